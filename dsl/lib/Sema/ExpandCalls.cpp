// Sema's function expansion stage: before any expression is checked, every call the checker will
// reach is expanded (Expand.cpp) and left on the call for the checker to put in place.
#include "SemaInternal.h"

namespace attnc::dsl::sema {

// The stage walks what the checker checks, in its order and with its scope and depth, so that
// every call the checker reaches is prepared (checkRead asserts it) and the size count comes out
// as when expansion ran inside the checker. What each step of an expansion reports waits for the
// checker, which checks the arguments between the steps, and so do the fresh names of the
// expansion's binders (provisionalName). Not knowing which arguments have errors, the stage also
// expands calls that the checker then gives up: in a kernel with such an error their nodes still
// count towards the stage's own size limit, which can then stop a later call that the checker
// would have expanded, and that call is reported too large.
void KernelSema::prepareExpansions() {
  for (auto &r : k_.requirements)
    if (requirementIsChecked(r, /*report=*/false))
      prepare(*r.cond, 0);
  for (auto &def : k_.defs) {
    for (auto &idx : def->indices)
      if (idx.range)
        prepareRange(idx, 0);
    for (auto &idx : def->indices)
      scope_.push_back({idx.name, &idx, nullptr});
    Expr &rhs = *def->rhs;
    if (rhs.kind == ExprKind::Softmax) {
      if (rhs.where)
        prepare(*rhs.where, 0);
      if (rhs.sink)
        prepare(*rhs.sink, 0);
      prepare(*rhs.body, 0);
    } else {
      prepare(rhs, 0);
    }
    scope_.clear();
    // As analyzeDefinition: a definition of a new name makes a local tensor, which later reads of
    // the name find (a local of a function's name still calls the function: calledFunction).
    if (!sizeLocs_.count(def->name) && !consts_.count(def->name) && !tensors_.count(def->name))
      localNames_.insert(def->name);
  }
}

// `level` is how deep check() would be when it reaches `e`.
void KernelSema::prepare(Expr &e, int level) {
  // The checker checks nothing this deep; a copy of an argument was prepared where the argument
  // stands, and is replaced before it is checked.
  if (level >= kMaxCheckDepth || e.copyOf)
    return;
  switch (e.kind) {
  case ExprKind::Number:
  case ExprKind::Ident:
  case ExprKind::Softmax: // checked only as a definition's right-hand side, where it is an error
    return;
  case ExprKind::Read:
    if (const FunctionInfo *fi = calledFunction(e))
      return prepareCall(e, *fi, level);
    break;
  case ExprKind::Reduce: {
    for (auto &idx : e.reduceIndices)
      if (idx.range)
        prepareRange(idx, level + 1);
    size_t depth = scope_.size();
    for (auto &idx : e.reduceIndices)
      scope_.push_back({idx.name, &idx, nullptr});
    prepare(*e.body, level + 1);
    scope_.resize(depth);
    return;
  }
  case ExprKind::Let:
    prepare(*e.args[0], level + 1);
    scope_.push_back({e.name, nullptr, &e});
    prepare(*e.body, level + 1);
    scope_.pop_back();
    return;
  default:
    break;
  }
  for (auto &a : e.args)
    prepare(*a, level + 1);
}

// As resolveRange: only a static range is checked, and without the enclosing names.
void KernelSema::prepareRange(IndexDecl &idx, int level) {
  if (!rangeIsStatic(idx, /*report=*/false))
    return;
  std::vector<ScopeEntry> saved;
  saved.swap(scope_);
  prepare(*idx.range->lo, level);
  prepare(*idx.range->hi, level);
  scope_.swap(saved);
}

// As checkRead decides with the tensors declared so far: a function's name is read as a tensor
// where it is an input or output, or a definition not analysed yet; a local tensor of the name was
// rejected where it is defined, so there the call wins.
const FunctionInfo *KernelSema::calledFunction(const Expr &read) const {
  if (findBuiltin(read.name))
    return nullptr;
  auto fn = functions_.find(read.name);
  if (fn == functions_.end() || tensors_.count(read.name))
    return nullptr;
  if (definitionNames_.count(read.name) && !localNames_.count(read.name))
    return nullptr;
  return &fn->second;
}

// The steps of checkFunctionCall, without the checking: the arguments it checks before the
// expansion are prepared where they stand, and those bound with `let` inside the expansion.
void KernelSema::prepareCall(Expr &call, const FunctionInfo &fi, int level) {
  expansions_.push_back(std::make_unique<PendingExpansion>());
  PendingExpansion &x = *expansions_.back();
  x.fn = &fi;
  call.expansion = &x;
  if (!expansionArityOk(call, fi, x.arity))
    return;
  if (!fi.ok) { // the checker checks the arguments only
    for (auto &a : call.args)
      prepare(*a, level + 1);
    return;
  }
  if (!expansionDepthOk(call, x.depth))
    return;
  for (size_t i = 0; i < call.args.size(); ++i) {
    Expr &a = *call.args[i];
    if (fi.params[i] == FunctionInfo::Param::Tensor) {
      if (!a.copyOf)
        for (auto &p : a.args)
          prepare(*p, level + 1);
    } else if (fi.params[i] == FunctionInfo::Param::Scalar && isCheapArgument(a)) {
      prepare(a, level + 1);
    }
  }
  if (!expansionFits(call, fi, /*prepared=*/true, x.fits))
    return;
  Expansion b;
  bool ok = true;
  x.binding.resize(call.args.size());
  x.argumentNames.resize(call.args.size());
  for (size_t i = 0; i < call.args.size(); ++i) {
    if (fi.params[i] == FunctionInfo::Param::Unused)
      prepare(*call.args[i], level + 1);
    else
      ok &= bindArgument(call, fi, i, b, x);
  }
  if (!ok || !expand(call, fi, b, x))
    return;
  expanding_.push_back(&fi);
  prepare(*x.body, level + 1);
  expanding_.pop_back();
  x.nodes = preparedNodes(*x.body);
  x.prepared = true;
}

} // namespace attnc::dsl::sema
