// Sema's range inference: the range of every index, from its declaration, the output it defines
// or its uses as a bare tensor (or constant list) subscript, and the conflicts between them.
#include "SemaInternal.h"

namespace attnc::dsl::sema {

// A range is fixed for the whole call: its bounds may use sizes, constants, numbers, functions
// of those and lets inside the bound, but no index, outer let or tensor. Returns false after
// reporting (where `report`) the first offending name; the expansion stage asks without.
bool KernelSema::rangeIsStatic(const IndexDecl &idx, bool report) {
  for (const Expr *e : {idx.range->lo.get(), idx.range->hi.get()}) {
    std::vector<std::string> inner;
    if (!isStatic(*e, "the range of '" + shown(idx.name) + "'",
                  "a range is fixed for the whole call, so its bounds", inner, report))
      return false;
  }
  return true;
}

// Checks an explicit range `i in lo..hi`: static, integer, and at most a 32-bit extent.
void KernelSema::resolveRange(IndexDecl &idx) {
  if (!rangeIsStatic(idx, /*report=*/true)) {
    idx.range.reset();
    badRange_.insert(&idx);
    return;
  }
  for (Expr *e : {idx.range->lo.get(), idx.range->hi.get()}) {
    // Range ends see sizes and constants, not indices: the range of an index is fixed per kernel call.
    std::vector<ScopeEntry> saved;
    saved.swap(scope_);
    check(*e);
    scope_.swap(saved);
    if (e->type != ScalarType::Int && e->type != ScalarType::Unknown)
      diags_.error(e->loc, "range of index '" + shown(idx.name) + "' must be an integer, found " +
                               scalarTypeName(e->type));
  }
  // Both ends fit in 32 bits (foldInt); so must the number of points, Halide's loop extent.
  const Expr &lo = *idx.range->lo, &hi = *idx.range->hi;
  if (lo.hasIntValue && hi.hasIntValue && hi.intValue - lo.intValue > kInt32Max)
    diags_.error(idx.loc, "the range " + std::to_string(lo.intValue) + ".." +
                              std::to_string(hi.intValue) + " of index '" + shown(idx.name) +
                              "' has " + std::to_string(hi.intValue - lo.intValue) +
                              " points, more than a 32-bit extent holds" + constNote(lo, &hi));
}

namespace {
bool isZero(const Expr &e) { return e.kind == ExprKind::Number && e.number == 0; }
ExprPtr zero(Loc loc) {
  auto z = std::make_unique<Expr>(ExprKind::Number, loc);
  z->isIntLiteral = true;
  z->type = ScalarType::Int;
  return z;
}
} // namespace

// Fixes an index's range from its explicit range or its uses, reporting conflicts.
void KernelSema::settleRange(IndexDecl &idx) {
  auto &uses = uses_[&idx];
  if (badRange_.count(&idx))
    return; // already reported
  // A constant list's length gives a range only where no tensor does: an index over a tensor's
  // dimension may subscript a list too (msda's groups `g` and their dilations), and its reads of
  // the list are then checked against the list's length (Subscripts.cpp), not compared by spelling.
  if (!idx.range && uses.empty() && !listUses_[&idx].empty()) {
    const RangeUse &u = listUses_[&idx][0];
    idx.range = Range{zero(idx.loc), u.extentExpr->clone()};
    idx.rangeOrigin = u.origin;
    idx.rangeOriginLoc = u.loc;
  }
  if (!idx.range) {
    if (uses.empty()) {
      diags_.error(idx.loc, "cannot infer the range of index '" + shown(idx.name) +
                                "': it is never used directly as a tensor index; give it as '" +
                                shown(idx.name) + " in 0..N'");
      return;
    }
    idx.range = Range{zero(idx.loc), uses[0].extentExpr->clone()};
    idx.rangeOrigin = uses[0].origin;
    idx.rangeOriginLoc = uses[0].loc;
  }
  if (!isZero(*idx.range->lo))
    return; // an offset range is a deliberate sub-range
  std::string have = exprToString(*idx.range->hi);
  for (const RangeUse &u : uses) {
    if (u.extent == have)
      continue;
    std::string where = idx.rangeOrigin.empty() ? "its declared range 0.." + have : idx.rangeOrigin;
    diags_.error(u.loc, "inconsistent sizes for index '" + shown(idx.name) + "': " + u.origin +
                            " here, but " + where);
    if (idx.rangeOriginLoc.valid())
      diags_.note(idx.rangeOriginLoc, "the range of '" + shown(idx.name) + "' comes from here");
    return;
  }
}

// Ranges of the left-hand indices: declared output dims win, then explicit, then inferred.
void KernelSema::settleLeftHandRanges(Definition &def, TensorDecl *target) {
  for (size_t i = 0; i < def.indices.size(); ++i) {
    IndexDecl &idx = def.indices[i];
    if (target && i < target->dims.size()) {
      const DimSpec &d = target->dims[i];
      if (idx.range) {
        if (!isZero(*idx.range->lo) ||
            exprToString(*idx.range->hi) != exprToString(*target->extents[i]))
          diags_.error(idx.loc,
                       "size mismatch: output '" + def.name + "' dimension " + std::to_string(i) +
                           " is " + d.str() + ", but index '" + idx.name + "' is given the range " +
                           exprToString(*idx.range->lo) + ".." + exprToString(*idx.range->hi));
      } else {
        idx.range = Range{zero(idx.loc), target->extents[i]->clone()};
        idx.rangeOrigin =
            "output '" + def.name + "' dimension " + std::to_string(i) + " (" + d.str() + ")";
        idx.rangeOriginLoc = d.loc;
      }
    }
    settleRange(idx);
    if (idx.range && !isZero(*idx.range->lo))
      diags_.error(idx.loc, "the range of left-hand index '" + idx.name + "' must start at 0");
  }
}

} // namespace attnc::dsl::sema
