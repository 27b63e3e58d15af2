// Sema's `require` conditions: what they may read, and which are decided at compile time.
#include "SemaInternal.h"

namespace attnc::dsl::sema {

namespace {

// Whether `e` reads a tensor or reduces: a requirement on the inputs' values (level tables,
// index tables), checked when the kernel is called, before anything else is computed.
bool readsData(const Expr &e) {
  if (e.kind == ExprKind::Read || e.kind == ExprKind::Reduce)
    return true;
  for (const auto &a : e.args)
    if (readsData(*a))
      return true;
  return e.body && readsData(*e.body);
}

// Whether a checked condition reads a tensor or uses a size anywhere, the ranges of its reductions
// included: one that does not (a reduction over constant lists) is decided at compile time.
bool dependsOnCall(const Expr &e) {
  if (e.kind == ExprKind::Read || (e.kind == ExprKind::Ident && e.identKind == IdentKind::Size))
    return true;
  for (const IndexDecl &idx : e.reduceIndices)
    if (idx.range && (dependsOnCall(*idx.range->lo) || dependsOnCall(*idx.range->hi)))
      return true;
  for (const auto &a : e.args)
    if (dependsOnCall(*a))
      return true;
  return (e.body && dependsOnCall(*e.body)) || (e.where && dependsOnCall(*e.where)) ||
         (e.sink && dependsOnCall(*e.sink));
}

// Whether a checked condition reads a tensor or reduces (reads of constant lists do neither).
bool readsDataChecked(const Expr &e) {
  if (e.kind == ExprKind::Read || e.kind == ExprKind::Reduce)
    return true;
  for (const auto &a : e.args)
    if (readsDataChecked(*a))
      return true;
  return e.body && readsDataChecked(*e.body);
}

} // namespace

// A requirement on data may read inputs only: it runs before any definition exists.
bool KernelSema::readsOnlyInputs(const Expr &e, bool report) {
  bool ok = true;
  if (e.kind == ExprKind::Read) {
    auto it = tensors_.find(e.name);
    if (it == tensors_.end() || it->second->role != TensorRole::Input) {
      if (it != tensors_.end() || definitionNames_.count(e.name)) {
        if (report)
          diags_.error(
              e.loc, "a requirement can read only inputs, not '" + e.name +
                         "': it is checked when the kernel is called, before anything is computed");
        ok = false;
      }
    } else if (!e.boundary.empty() && e.boundary != "none") {
      if (report)
        diags_.error(e.loc, "a requirement reads inputs in range; '." + e.boundary +
                                "' has no meaning here");
      ok = false;
    }
  }
  for (const auto &a : e.args)
    ok &= readsOnlyInputs(*a, report);
  if (e.body)
    ok &= readsOnlyInputs(*e.body, report);
  return ok;
}

// Whether a requirement's condition is checked: one on data may read only inputs, any other only
// sizes, constants and numbers. Reports why not where `report` is set; the expansion stage asks
// without, before anything is checked.
bool KernelSema::requirementIsChecked(const Kernel::Requirement &r, bool report) {
  if (readsData(*r.cond))
    return readsOnlyInputs(*r.cond, report);
  std::vector<std::string> inner;
  return isStatic(*r.cond, "a requirement", "it is checked once per call, so it", inner, report);
}

// A requirement on sizes and constants is checked here where it can be, and otherwise when the
// kernel is called, as is one on the inputs' values.
void KernelSema::checkRequirement(Kernel::Requirement &r) {
  if (!requirementIsChecked(r, /*report=*/true))
    return;
  r.isData = readsData(*r.cond);
  check(*r.cond);
  if (r.cond->type != ScalarType::Bool) {
    if (r.cond->type != ScalarType::Unknown)
      diags_.error(r.cond->loc, std::string("a requirement must be a condition, found ") +
                                    scalarTypeName(r.cond->type));
    return;
  }
  // Reads of constant lists looked like reads of data before the check: a condition that only
  // they made one is a condition on sizes and constants, or, without sizes, decided here.
  if (r.isData && (!readsDataChecked(*r.cond) || !dependsOnCall(*r.cond)))
    r.isData = false;
  if (r.isData || dependsOnCall(*r.cond))
    return; // checked when the kernel is called
  r.isStatic = true;
  std::optional<double> v = evalStatic(*r.cond);
  if (v && *v == 0)
    diags_.error(r.loc, Kernel::failure(r));
}

} // namespace attnc::dsl::sema
