// HalideGen: a softmax as its named parts (scores, max, exps, sum, probabilities).
#include "Lowerer.h"

namespace attnc::lowering {

void Lowerer::lowerSoftmax(attn::SoftmaxOp op) {
  std::string name = op.getName().str();
  std::vector<std::string> varNames = strings(op.getIndices());
  std::vector<H::Var> vars = makeVars(op.getIndices());
  std::vector<int> axes(op.getAxes().begin(), op.getAxes().end());
  Block &body = op.getBody().front();
  Env env;
  for (auto [arg, var] : llvm::zip(body.getArguments(), vars))
    env[arg] = var;
  IndexScope scope(indexExtents_, false);
  bindIndices(vars, op.getExtents(), env);
  auto yield = cast<attn::YieldOp>(body.getTerminator());
  bool masked = yield.getValues().size() == 2;

  auto part = [&](const std::string &suffix, FuncRole role) {
    LoweredFunc lf;
    lf.name = suffix.empty() ? name : name + "__" + suffix;
    lf.definition = name;
    lf.role = role;
    lf.func = H::Func(lf.name);
    lf.softmaxAxes = axes;
    return lf;
  };
  // Rows: the indices that are not softmax axes.
  std::vector<H::Var> rowVars;
  std::vector<std::string> rowNames;
  for (size_t i = 0; i < vars.size(); ++i)
    if (std::find(axes.begin(), axes.end(), (int)i) == axes.end())
      rowVars.push_back(vars[i]), rowNames.push_back(varNames[i]);
  std::vector<H::Expr> all = reversed(toExprs(vars)), rows = reversed(toExprs(rowVars));

  LoweredFunc score = part("score", FuncRole::SoftmaxScore);
  score.varNames = varNames;
  score.vars = vars;
  // The mask first: the score's reads count only where it holds (Lowerer::readGuard_).
  H::Expr keep = masked ? eval(yield.getValues()[1], env) : H::Expr();
  H::Expr s;
  {
    GuardScope guard(readGuard_, keep);
    s = H::cast<float>(eval(yield.getValues()[0], env));
  }
  if (masked)
    s = H::select(keep, s, H::Float(32).min());
  score.func(all) = s;

  // Reduction domain over the axes; the score is read at rows + reduction coordinates.
  SmallVector<Value> axisExtents;
  SmallVector<Attribute> axisNames;
  for (int a : axes)
    axisExtents.push_back(op.getExtents()[a]), axisNames.push_back(op.getIndices()[a]);
  auto atAxes = [&](H::RDom r) {
    std::vector<H::Expr> c = toExprs(vars);
    for (size_t k = 0; k < axes.size(); ++k)
      c[axes[k]] = r[(int)k];
    return reversed(c);
  };
  auto reductionPart = [&](const std::string &suffix, FuncRole role, const char *kind) {
    LoweredFunc lf = part(suffix, role);
    lf.varNames = rowNames;
    lf.vars = rowVars;
    lf.reduceKind = kind;
    return lf;
  };

  // Index position -> RDom dimension, for the bounds on the axes (attn.bounds).
  std::vector<int> axisDim(vars.size(), -1);
  for (size_t k = 0; k < axes.size(); ++k)
    axisDim[axes[k]] = (int)k;
  std::vector<H::Expr> dims = toExprs(vars);

  // A sink (one logit per row, attention sinks) starts the max and the sum, as an entry would
  // that no probability is computed for. Inlined where it is used: it is one read per row.
  H::Expr sink;
  if (op.hasSink()) {
    Block &kb = op.getSink().front();
    Env kenv;
    for (auto [arg, var] : llvm::zip(kb.getArguments(), vars))
      kenv[arg] = var;
    sink = H::cast<float>(eval(cast<attn::YieldOp>(kb.getTerminator()).getValues()[0], kenv));
  }

  LoweredFunc mx = reductionPart("max", FuncRole::SoftmaxMax, "max");
  H::RDom rm = makeRDom(axisExtents, ArrayAttr::get(op.getContext(), axisNames), env, mx.name);
  mx.maskBounded = restrictToBounds(rm, op, axisDim, dims);
  mx.func(rows) = sink.defined() ? sink : H::Float(32).min();
  mx.func(rows) = H::max(mx.func(rows), score.func(atAxes(rm)));
  for (int i = 0; i < rm.dimensions(); ++i)
    mx.rvars.push_back(rm[i]);
  for (int a : axes)
    mx.rvarNames.push_back(varNames[a]);

  LoweredFunc ex = part("exp", FuncRole::SoftmaxExp);
  ex.varNames = varNames;
  ex.vars = vars;
  H::Expr e = nonPositiveExp(score.func(all) - mx.func(rows));
  // A masked score is -inf (as is a -inf score from an additive mask); a row where every score
  // is -inf has max -inf too, and exp(-inf - -inf) would be NaN, so guard both.
  e = H::select(score.func(all) == H::Float(32).min(), 0.0f, e);
  ex.func(all) = e;

  LoweredFunc sm = reductionPart("sum", FuncRole::SoftmaxSum, "sum");
  H::RDom rs = makeRDom(axisExtents, ArrayAttr::get(op.getContext(), axisNames), env, sm.name);
  sm.maskBounded = restrictToBounds(rs, op, axisDim, dims);
  // exp(sink - max) <= 1: the max includes the sink. A -inf sink adds nothing (and its max may
  // be -inf too); a NaN or +inf one makes the row NaN, as such a score does. A row whose entries
  // are all masked then has sum exp(0) = 1 and zeros, as without a sink.
  sm.func(rows) = sink.defined() ? H::select(sink == H::Float(32).min(), 0.0f,
                                             nonPositiveExp(sink - mx.func(rows)))
                                 : H::Expr(0.0f);
  sm.func(rows) += ex.func(atAxes(rs));
  for (int i = 0; i < rs.dimensions(); ++i)
    sm.rvars.push_back(rs[i]);
  sm.rvarNames = mx.rvarNames;

  LoweredFunc p = part("", FuncRole::Softmax);
  p.varNames = varNames;
  p.vars = vars;
  // A fully masked row has sum 0 and gives zeros; a NaN sum (a NaN or +inf score) stays NaN.
  H::Expr prob = H::select(sm.func(rows) == 0.0f, 0.0f, ex.func(all) / sm.func(rows));
  p.func(all) = guarded(op.getResult(), prob);

  funcNames_[op.getResult()] = name;
  for (LoweredFunc *f : {&score, &mx, &ex, &sm, &p})
    addFunc(std::move(*f));
}

} // namespace attnc::lowering
