// HalideGen: sums, max and min as reduction domains, restricted to their mask bounds (attn.bounds).
#include "Lowerer.h"

namespace attnc::lowering {

H::RDom Lowerer::makeRDom(ValueRange extents, ArrayAttr names, Env &env, const std::string &owner) {
  std::vector<H::Internal::ReductionVariable> rvs;
  for (auto [ext, name] : llvm::zip(extents, names)) {
    rvs.push_back({owner + "$" + cast<StringAttr>(name).getValue().str(), H::Expr(0),
                   H::cast<int32_t>(eval(ext, env))});
    indexExtents_[rvs.back().var] = rvs.back().extent;
  }
  return H::RDom(H::Internal::ReductionDomain(rvs));
}

// An affine bound of attn.bounds in Halide; undefined if it uses a dimension without a value.
H::Expr Lowerer::affine(AffineExpr e, const std::vector<H::Expr> &dims,
                        ArrayRef<StringAttr> sizes) {
  switch (e.getKind()) {
  case AffineExprKind::Constant:
    return H::Expr((int32_t)cast<AffineConstantExpr>(e).getValue());
  case AffineExprKind::DimId: {
    unsigned d = cast<AffineDimExpr>(e).getPosition();
    return d < dims.size() ? dims[d] : H::Expr();
  }
  case AffineExprKind::SymbolId: {
    auto it = sizes_.find(sizes[cast<AffineSymbolExpr>(e).getPosition()].getValue().str());
    return it == sizes_.end() ? H::Expr() : it->second;
  }
  default:
    break;
  }
  auto b = cast<AffineBinaryOpExpr>(e);
  H::Expr l = affine(b.getLHS(), dims, sizes), r = affine(b.getRHS(), dims, sizes);
  if (!l.defined() || !r.defined())
    return H::Expr();
  // The verifier admits only positive constant divisors, where Halide's Euclidean division
  // and modulo are the floored ones of affine maps.
  switch (e.getKind()) {
  case AffineExprKind::Add:
    return l + r;
  case AffineExprKind::Mul:
    return l * r;
  case AffineExprKind::FloorDiv:
    return l / r;
  case AffineExprKind::CeilDiv:
    return (l + r - 1) / r;
  case AffineExprKind::Mod:
    return l % r;
  default:
    return H::Expr();
  }
}

// Restricts `r` to the attn.bounds of `op` (a softmax or a reduction): index `i` of the bounds is
// RDom dimension `rdomDim[i]` (-1: none), and the maps' dimensions take the values `dims`.
// Returns whether it added a predicate.
// Points outside the bounds are masked (softmax) or add zero (sums), so skipping them changes
// no result; Halide turns these predicates into loop bounds that depend on the outer indices.
bool Lowerer::restrictToBounds(H::RDom &r, Operation *op, const std::vector<int> &rdomDim,
                               const std::vector<H::Expr> &dims) {
  auto entries = op->getAttrOfType<ArrayAttr>(attn::kBoundsAttr);
  if (!entries)
    return false;
  H::Expr pred;
  auto add = [&](H::Expr c) { pred = pred.defined() ? pred && c : c; };
  for (auto entry : entries.getAsRange<attn::BoundAttr>()) {
    int64_t index = entry.getIndex();
    if (index >= (int64_t)rdomDim.size() || rdomDim[index] < 0)
      continue;
    H::RVar x = r[rdomDim[index]];
    for (bool lower : {true, false}) {
      AffineMapAttr map = lower ? entry.getLower() : entry.getUpper();
      if (!map)
        continue;
      for (AffineExpr e : map.getValue().getResults()) {
        H::Expr b = affine(e, dims, entry.getSizes());
        if (b.defined())
          add(lower ? H::Expr(x) >= b : H::Expr(x) < b);
      }
    }
  }
  if (pred.defined())
    r.where(pred);
  return pred.defined();
}

// A reduction's bounds: its indices are the RDom's dimensions, the maps' dimensions are the
// indices of its enclosing definition as `env` has them.
bool Lowerer::restrictReduction(H::RDom &r, attn::ReduceOp red, Env &env) {
  Operation *def = enclosingDefinition(red);
  if (!def)
    return false;
  std::vector<H::Expr> dims;
  for (BlockArgument a : def->getRegion(0).front().getArguments())
    dims.push_back(env.lookup(a));
  std::vector<int> rdomDim;
  for (int i = 0; i < r.dimensions(); ++i)
    rdomDim.push_back(i);
  return restrictToBounds(r, red, rdomDim, dims);
}

// A reduction's body, made to use its domain: Halide attaches an RDom to an update only through
// the RVars the update mentions, so `sum(j in 0..N) 1.0` would run once, not N times. A body
// that mentions none gets `+ 0 * j` (in the body's type), which lowering simplifies away after
// the loop over the domain exists.
H::Expr Lowerer::iterateAll(H::Expr v, const H::RDom &r) {
  for (int i = 0; i < r.dimensions(); ++i)
    if (H::Internal::expr_uses_var(v, r[i].name()))
      return v;
  return v + H::cast(v.type(), H::Expr(0) * H::Expr(r[0]));
}

H::Expr Lowerer::initValue(StringRef kind, H::Type t) {
  if (kind == "sum")
    return H::Internal::make_zero(t);
  if (kind == "max")
    return t.min();
  return t.max();
}

H::Expr Lowerer::combine(StringRef kind, H::Expr acc, H::Expr v) {
  if (kind == "sum")
    return acc + v;
  H::Expr m = kind == "max" ? H::max(acc, v) : H::min(acc, v);
  return v.type().is_float() ? nanPropagating(acc, v, m) : m;
}

// A reduction nested in a larger expression becomes its own Func `<def>__<kind><n>` over the
// enclosing indices it uses; the expression calls it.
H::Expr Lowerer::lowerNestedReduce(attn::ReduceOp op, Env &env) {
  // A reduction used from several places (a `let` value read inside another reduction, as
  // layer_norm's mean is) is one Func, called with each place's values of its indices.
  if (auto it = nestedReduce_.find(op.getOperation()); it != nestedReduce_.end()) {
    std::vector<H::Expr> callArgs;
    for (BlockArgument ba : it->second.captured) {
      callArgs.push_back(env.lookup(ba));
      if (!callArgs.back().defined())
        unsupported(op, "reduction uses an index that is not in scope");
    }
    return out_.find(it->second.name)->func(reversed(callArgs));
  }
  llvm::SetVector<BlockArgument> captured;
  collectCaptured(op, captured);
  std::string def = definitionOf(op);
  std::string name = def + "__" + op.getKind().str() + std::to_string(partCounter_[def]++);
  LoweredFunc lf;
  lf.name = name;
  lf.definition = def;
  lf.role = FuncRole::Reduction;
  lf.reduceKind = op.getKind().str();
  lf.func = H::Func(name);
  Env inner;
  std::vector<H::Expr> callArgs;
  // The helper's variables stand for the enclosing indices, and take their extents (for host
  // gather checks) while its body is lowered.
  IndexScope scope(indexExtents_, true);
  const std::map<std::string, H::Expr> &outerExtents = scope.saved;
  for (BlockArgument ba : captured) {
    lf.varNames.push_back(indexName(ba));
    lf.vars.emplace_back(lf.varNames.back());
    inner[ba] = lf.vars.back();
    callArgs.push_back(env.lookup(ba));
    if (!callArgs.back().defined())
      unsupported(op, "reduction uses an index that is not in scope");
    const auto *v = callArgs.back().as<H::Internal::Variable>();
    auto known = v ? outerExtents.find(v->name) : outerExtents.end();
    if (known != outerExtents.end())
      indexExtents_[lf.varNames.back()] = known->second;
    else
      indexExtents_.erase(lf.varNames.back());
  }
  H::RDom r = makeRDom(op.getExtents(), op.getIndices(), env, name);
  // The helper Func's own variables stand for the enclosing indices; an index it does not
  // capture has no value there, and a bound using it is left out.
  lf.maskBounded = restrictReduction(r, op, inner);
  for (unsigned i = 0; i < op.getBody().getNumArguments(); ++i)
    inner[op.getBody().getArgument(i)] = r[i];
  H::Expr v = iterateAll(
      castTo(op.getType(),
             eval(cast<attn::YieldOp>(op.getBody().front().getTerminator()).getValues()[0], inner)),
      r);
  std::vector<H::Expr> args = reversed(toExprs(lf.vars));
  lf.func(args) = initValue(op.getKind(), v.type());
  lf.func(args) = combine(op.getKind(), lf.func(args), v);
  lf.rvarNames = strings(op.getIndices());
  for (int i = 0; i < r.dimensions(); ++i)
    lf.rvars.push_back(r[i]);
  H::Func f = lf.func;
  addFunc(std::move(lf));
  nestedReduce_[op.getOperation()] = {name, {captured.begin(), captured.end()}};
  return f(reversed(callArgs));
}

} // namespace attnc::lowering
