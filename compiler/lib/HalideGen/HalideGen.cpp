// HalideGen: walks an attn.kernel and builds one Halide Func per definition (plus named parts).
#include "attnc/HalideGen.h"
#include "IeeeMath.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/AffineMap.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>

using namespace mlir;
namespace H = Halide;

namespace attnc {

Halide::Type halideType(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return H::Float(32);
  case DType::I32:
    return H::Int(32);
  }
  throw std::runtime_error("HalideGen: an element type without a Halide type");
}

const char *funcRoleName(FuncRole r) {
  switch (r) {
  case FuncRole::Define:
    return "define";
  case FuncRole::Reduction:
    return "reduction";
  case FuncRole::SoftmaxScore:
    return "softmax-score";
  case FuncRole::SoftmaxMax:
    return "softmax-max";
  case FuncRole::SoftmaxExp:
    return "softmax-exp";
  case FuncRole::SoftmaxSum:
    return "softmax-sum";
  case FuncRole::Softmax:
    return "softmax";
  case FuncRole::Check:
    return "check";
  case FuncRole::OnlineScore:
    return "online-score";
  case FuncRole::OnlineTileMax:
    return "online-tile-max";
  case FuncRole::OnlineTileExp:
    return "online-tile-exp";
  case FuncRole::OnlineTileSum:
    return "online-tile-sum";
  case FuncRole::OnlineTileValue:
    return "online-tile-value";
  case FuncRole::OnlineState:
    return "online-state";
  case FuncRole::Online:
    return "online-softmax";
  }
  return "?";
}

LoweredFunc *LoweredKernel::find(const std::string &n) {
  for (auto &f : funcs)
    if (f.name == n)
      return &f;
  return nullptr;
}
const LoweredFunc *LoweredKernel::find(const std::string &n) const {
  return const_cast<LoweredKernel *>(this)->find(n);
}

std::vector<H::Func> LoweredKernel::outputs() const {
  std::vector<H::Func> out;
  for (const auto &n : outputNames)
    out.push_back(find(n)->func);
  return out;
}

H::Pipeline LoweredKernel::pipeline() const {
  applyFloatSemantics(*this);
  H::Pipeline p(outputs());
  // The marker lets the runtime cut Halide's "Requirement Failed: (cond)" prefix.
  for (const auto &[cond, msg] : requirements)
    p.add_requirement(cond, "[attnc] " + msg);
  if (!requirements.empty())
    checkRequirementsFirst(p);
  if (checkGpuLaunches)
    checkGpuLaunchLimits(p);
  return p;
}

std::vector<H::Argument> LoweredKernel::arguments() const {
  std::vector<H::Argument> args;
  for (const auto &p : inputs)
    args.push_back(p.param);
  return args;
}

namespace {

using Env = llvm::DenseMap<Value, H::Expr>;

[[noreturn]] void unsupported(Operation *op, const std::string &what) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << op->getLoc() << ": HalideGen: " << what << ": " << op->getName();
  throw std::runtime_error(os.str());
}

template <typename T> std::vector<T> reversed(std::vector<T> v) { return {v.rbegin(), v.rend()}; }

// Whether an index reads a tensor (a gather such as `q(m(i))`): Halide cannot bound such an
// access from the loop ranges.
bool readsData(const H::Expr &e) {
  struct Finder : H::Internal::IRVisitor {
    bool found = false;
    using H::Internal::IRVisitor::visit;
    void visit(const H::Internal::Call *op) override {
      if (op->call_type == H::Internal::Call::Image || op->call_type == H::Internal::Call::Halide)
        found = true;
      H::Internal::IRVisitor::visit(op);
    }
  } f;
  e.accept(&f);
  return f.found;
}

std::vector<H::Expr> toExprs(const std::vector<H::Var> &vars) { return {vars.begin(), vars.end()}; }

class Lowerer {
public:
  LoweredKernel run(attn::KernelOp kernel) {
    out_.name = kernel.getSymName().str();
    Block &entry = kernel.getBody().front();
    for (unsigned i = 0; i < entry.getNumArguments(); ++i) {
      KernelParam p;
      p.name = kernel.getInputName(i).str();
      p.type = kernel.getInputType(i);
      p.param = H::ImageParam(halideType(p.type.dtype), (int)p.type.rank(), p.name);
      // DSL tensors are indexed from 0 and the runtime passes every buffer with min 0. Saying so
      // lets Halide drop the min arithmetic and see that a tile of rows keeps a constant extent
      // when mask bounds (attn.bounds) also imply i >= 0.
      for (int d = 0; d < p.param.dimensions(); ++d)
        p.param.dim(d).set_min(0);
      inputIndex_[entry.getArgument(i)] = (int)out_.inputs.size();
      out_.inputs.push_back(p);
    }
    for (auto dim : entry.getOps<attn::DimOp>()) {
      Env env;
      sizes_[dim.getSize().str()] = eval(dim.getResult(), env);
    }
    // Outputs carry the data checks (below), so they are known before definitions are lowered.
    if (auto ret = dyn_cast<attn::ReturnOp>(entry.getTerminator()))
      for (Value v : ret.getValues())
        returned_.insert(v);
    for (Operation &op : entry) {
      if (auto req = dyn_cast<attn::RequireOp>(op)) {
        if (conditionReadsData(req.getCondition())) {
          lowerDataRequirement(req);
          continue;
        }
        Env env;
        out_.requirements.push_back({eval(req.getCondition(), env), req.getMessage().str()});
      } else if (auto def = dyn_cast<attn::DefineOp>(op))
        lowerDefine(def);
      else if (auto sm = dyn_cast<attn::SoftmaxOp>(op))
        lowerSoftmax(sm);
      else if (auto on = dyn_cast<attn::OnlineSoftmaxOp>(op))
        lowerOnline(on);
      else if (auto ret = dyn_cast<attn::ReturnOp>(op)) {
        for (auto [i, v] : llvm::enumerate(ret.getValues())) {
          auto it = funcNames_.find(v);
          if (it == funcNames_.end())
            unsupported(&op, "a kernel output must be a definition");
          LoweredFunc *f = out_.find(it->second);
          if (f->isOutput)
            unsupported(&op, "the same definition is returned twice");
          f->isOutput = true;
          out_.outputNames.push_back(f->name);
          out_.outputTypes.push_back(kernel.getOutputType(i));
          const std::vector<attnc::Dim> &dims = out_.outputTypes.back().dims;
          // The runtime checks every output's shape against the sizes bound from the inputs;
          // saying so lets Halide compare an output's extent with the inputs' (a causal
          // tile's keys j <= i then end inside k without a clamp to k's extent).
          H::OutputImageParam ob = f->func.output_buffer();
          int rank = f->func.dimensions();
          for (int d = 0; d < rank; ++d) {
            ob.dim(d).set_min(0);
            const attnc::Dim &dim = dims[rank - 1 - d];
            if (!dim.symbol())
              continue;
            if (auto it = sizes_.find(dim.symbol_name()); it != sizes_.end())
              ob.dim(d).set_extent(it->second);
          }
        }
      }
    }
    return std::move(out_);
  }

private:
  LoweredKernel out_;
  llvm::DenseSet<Value> returned_;
  std::vector<H::Func> dataChecks_;

  // Whether a requirement's condition reads tensor values (not only sizes and constants).
  static bool conditionReadsData(Value cond) {
    llvm::SmallVector<Value> work{cond};
    llvm::DenseSet<Value> seen;
    while (!work.empty()) {
      Value v = work.pop_back_val();
      if (!seen.insert(v).second)
        continue;
      Operation *d = v.getDefiningOp();
      if (!d)
        continue;
      if (isa<attn::ReadOp, attn::ReduceOp>(d))
        return true;
      for (Value o : d->getOperands())
        work.push_back(o);
    }
    return false;
  }

  // A requirement on input values cannot be a Pipeline requirement (those may not call Funcs),
  // so it becomes a scalar Func `require__<n>` that is 0 or fails with the requirement's message,
  // and every output adds it (+0) to its first definition: no call returns results computed from
  // inputs that break it. (Reads through the tables it guards are clamped, never out of bounds.)
  void lowerDataRequirement(attn::RequireOp req) {
    LoweredFunc lf;
    lf.name = lf.definition = "require__" + std::to_string(dataChecks_.size());
    lf.role = FuncRole::Check;
    lf.func = H::Func(lf.name);
    Env env;
    reads_ = &lf.reads;
    H::Expr cond = eval(req.getCondition(), env);
    reads_ = nullptr;
    // The marker lets the runtime cut Halide's "Requirement Failed: (cond) 0" prefix.
    lf.func() = H::require(cond, H::Expr(0), "[attnc] " + req.getMessage().str());
    dataChecks_.push_back(lf.func);
    addFunc(std::move(lf));
  }

  // `value` plus every data check (each 0 once passed), for the first definition of an output.
  H::Expr guarded(Value result, H::Expr value) {
    if (!returned_.contains(result) || dataChecks_.empty())
      return value;
    H::Expr sum = dataChecks_[0]();
    for (size_t i = 1; i < dataChecks_.size(); ++i)
      sum = sum + dataChecks_[i]();
    return value + H::cast(value.type(), sum);
  }
  llvm::DenseMap<Value, int> inputIndex_;
  llvm::DenseMap<Value, std::string> funcNames_;
  std::map<std::string, H::Expr> sizes_; // by size name, for attn.bounds
  std::map<std::string, int> partCounter_;
  std::vector<std::string> *reads_ = nullptr;
  struct NestedReduce {
    std::string name;
    std::vector<BlockArgument> captured;
  };
  llvm::DenseMap<Operation *, NestedReduce> nestedReduce_;

  LoweredFunc &addFunc(LoweredFunc f) {
    out_.funcs.push_back(std::move(f));
    return out_.funcs.back();
  }

  std::vector<H::Var> makeVars(ArrayAttr names) {
    std::vector<H::Var> vars;
    for (Attribute a : names)
      vars.emplace_back(cast<StringAttr>(a).getValue().str());
    return vars;
  }
  static std::vector<std::string> strings(ArrayAttr names) {
    std::vector<std::string> s;
    for (Attribute a : names)
      s.push_back(cast<StringAttr>(a).getValue().str());
    return s;
  }

  H::RDom makeRDom(ValueRange extents, ArrayAttr names, Env &env, const std::string &owner) {
    std::vector<H::Internal::ReductionVariable> rvs;
    for (auto [ext, name] : llvm::zip(extents, names))
      rvs.push_back({owner + "$" + cast<StringAttr>(name).getValue().str(), H::Expr(0),
                     H::cast<int32_t>(eval(ext, env))});
    return H::RDom(H::Internal::ReductionDomain(rvs));
  }

  // An affine bound of attn.bounds in Halide; undefined if it uses a dimension without a value.
  H::Expr affine(AffineExpr e, const std::vector<H::Expr> &dims, ArrayAttr sizes) {
    switch (e.getKind()) {
    case AffineExprKind::Constant:
      return H::Expr((int32_t)cast<AffineConstantExpr>(e).getValue());
    case AffineExprKind::DimId: {
      unsigned d = cast<AffineDimExpr>(e).getPosition();
      return d < dims.size() ? dims[d] : H::Expr();
    }
    case AffineExprKind::SymbolId: {
      auto it = sizes_.find(
          cast<StringAttr>(sizes[cast<AffineSymbolExpr>(e).getPosition()]).getValue().str());
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
  bool restrictToBounds(H::RDom &r, Operation *op, const std::vector<int> &rdomDim,
                        const std::vector<H::Expr> &dims) {
    auto entries = op->getAttrOfType<ArrayAttr>(attn::kBoundsAttr);
    if (!entries)
      return false;
    H::Expr pred;
    auto add = [&](H::Expr c) { pred = pred.defined() ? pred && c : c; };
    for (Attribute a : entries) {
      auto entry = cast<DictionaryAttr>(a);
      int64_t index = entry.getAs<IntegerAttr>("index").getInt();
      if (index >= (int64_t)rdomDim.size() || rdomDim[index] < 0)
        continue;
      H::RVar x = r[rdomDim[index]];
      auto sizes = entry.getAs<ArrayAttr>("sizes");
      for (StringRef side : {"lower", "upper"}) {
        auto map = entry.getAs<AffineMapAttr>(side);
        if (!map)
          continue;
        for (AffineExpr e : map.getValue().getResults()) {
          H::Expr b = affine(e, dims, sizes);
          if (b.defined())
            add(side == "lower" ? H::Expr(x) >= b : H::Expr(x) < b);
        }
      }
    }
    if (pred.defined())
      r.where(pred);
    return pred.defined();
  }

  static Operation *enclosingDefinition(Operation *op) {
    for (Operation *p = op->getParentOp(); p; p = p->getParentOp())
      if (isa<attn::DefineOp, attn::SoftmaxOp, attn::OnlineSoftmaxOp>(p))
        return p;
    return nullptr;
  }

  // A reduction's bounds: its indices are the RDom's dimensions, the maps' dimensions are the
  // indices of its enclosing definition as `env` has them.
  bool restrictReduction(H::RDom &r, attn::ReduceOp red, Env &env) {
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

  static H::Expr castTo(Type t, H::Expr e) {
    if (t.isF32())
      return H::cast<float>(e);
    if (t.isInteger(1))
      return e;
    if (t.isInteger(64))
      return H::cast<int64_t>(e);
    return H::cast<int32_t>(e); // index and i32
  }

  // --- definitions ---------------------------------------------------------------------------
  void lowerDefine(attn::DefineOp op) {
    std::string name = op.getName().str();
    LoweredFunc lf;
    lf.name = lf.definition = name;
    lf.varNames = strings(op.getIndices());
    lf.vars = makeVars(op.getIndices());
    lf.func = H::Func(name);
    Type elem = op.getResult().getType().getElementType();
    Block &body = op.getBody().front();
    Env env;
    for (auto [arg, var] : llvm::zip(body.getArguments(), lf.vars))
      env[arg] = var;
    Value y = cast<attn::YieldOp>(body.getTerminator()).getValues()[0];
    std::vector<H::Expr> args = reversed(toExprs(lf.vars));
    reads_ = &lf.reads;
    auto red = y.getDefiningOp<attn::ReduceOp>();
    if (red && red->getBlock() == &body && red.getType() == elem) {
      // The whole body is one reduction: the definition itself is the reduction Func, so
      // schedules see `o` with its reduction index rather than a hidden helper.
      H::RDom r = makeRDom(red.getExtents(), red.getIndices(), env, name);
      lf.maskBounded = restrictReduction(r, red, env);
      Env inner = env;
      for (unsigned i = 0; i < red.getBody().getNumArguments(); ++i)
        inner[red.getBody().getArgument(i)] = r[i];
      H::Expr v = iterateAll(
          castTo(elem,
                 eval(cast<attn::YieldOp>(red.getBody().front().getTerminator()).getValues()[0],
                      inner)),
          r);
      lf.func(args) = guarded(op.getResult(), initValue(red.getKind(), v.type()));
      lf.func(args) = combine(red.getKind(), lf.func(args), v);
      lf.role = FuncRole::Reduction;
      lf.reduceKind = red.getKind().str();
      lf.rvarNames = strings(red.getIndices());
      for (int i = 0; i < r.dimensions(); ++i)
        lf.rvars.push_back(r[i]);
    } else {
      lf.func(args) = guarded(op.getResult(), castTo(elem, eval(y, env)));
      lf.role = FuncRole::Define;
    }
    reads_ = nullptr;
    funcNames_[op.getResult()] = name;
    addFunc(std::move(lf));
  }

  void lowerSoftmax(attn::SoftmaxOp op) {
    std::string name = op.getName().str();
    std::vector<std::string> varNames = strings(op.getIndices());
    std::vector<H::Var> vars = makeVars(op.getIndices());
    std::vector<int> axes(op.getAxes().begin(), op.getAxes().end());
    Block &body = op.getBody().front();
    Env env;
    for (auto [arg, var] : llvm::zip(body.getArguments(), vars))
      env[arg] = var;
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
    reads_ = &score.reads;
    H::Expr s = H::cast<float>(eval(yield.getValues()[0], env));
    if (masked)
      s = H::select(eval(yield.getValues()[1], env), s, H::Float(32).min());
    reads_ = nullptr;
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

    LoweredFunc mx = reductionPart("max", FuncRole::SoftmaxMax, "max");
    H::RDom rm = makeRDom(axisExtents, ArrayAttr::get(op.getContext(), axisNames), env, mx.name);
    mx.maskBounded = restrictToBounds(rm, op, axisDim, dims);
    mx.func(rows) = H::Float(32).min();
    mx.func(rows) = H::max(mx.func(rows), score.func(atAxes(rm)));
    for (int i = 0; i < rm.dimensions(); ++i)
      mx.rvars.push_back(rm[i]);
    for (int a : axes)
      mx.rvarNames.push_back(varNames[a]);
    mx.reads = {score.name};

    LoweredFunc ex = part("exp", FuncRole::SoftmaxExp);
    ex.varNames = varNames;
    ex.vars = vars;
    H::Expr e = nanExp(score.func(all) - mx.func(rows));
    // A masked score is -inf (as is a -inf score from an additive mask); a row where every score
    // is -inf has max -inf too, and exp(-inf - -inf) would be NaN, so guard both.
    e = H::select(score.func(all) == H::Float(32).min(), 0.0f, e);
    ex.func(all) = e;
    ex.reads = {score.name, mx.name};

    LoweredFunc sm = reductionPart("sum", FuncRole::SoftmaxSum, "sum");
    H::RDom rs = makeRDom(axisExtents, ArrayAttr::get(op.getContext(), axisNames), env, sm.name);
    sm.maskBounded = restrictToBounds(rs, op, axisDim, dims);
    sm.func(rows) = 0.0f;
    sm.func(rows) += ex.func(atAxes(rs));
    for (int i = 0; i < rs.dimensions(); ++i)
      sm.rvars.push_back(rs[i]);
    sm.rvarNames = mx.rvarNames;
    sm.reads = {ex.name};

    LoweredFunc p = part("", FuncRole::Softmax);
    p.varNames = varNames;
    p.vars = vars;
    // A fully masked row has sum 0 and gives zeros; a NaN sum (a NaN or +inf score) stays NaN.
    H::Expr prob = H::select(sm.func(rows) == 0.0f, 0.0f, ex.func(all) / sm.func(rows));
    p.func(all) = guarded(op.getResult(), prob);
    p.reads = {ex.name, sm.name};

    funcNames_[op.getResult()] = name;
    for (LoweredFunc *f : {&score, &mx, &ex, &sm, &p})
      addFunc(std::move(*f));
  }

  // attn.online_softmax (attn-online-softmax): FlashAttention's streaming softmax over key tiles
  // of `tile` slots. Per tile: the row max of the scores (`__tmax`), their exps against it
  // (`__texp`), the exp sum (`__tsum`) and the exps times the value (`__tpv`); the state
  // (`__state`: running max, sum, accumulator) folds one tile per step of an RDom over the tiles,
  // rescaling by exp(old max - new max).
  // Slot r of tile t holds key base(t) + r, base(t) = min(t*T, Nk - T): when T does not divide Nk,
  // the last tile is shifted back to end at the last key and masks the slots an earlier tile
  // already counted, so every read is its tile's first key plus the slot, never a per-key clamp
  // (clamped keys vectorise to gathers that Halide could not partition away under a mask). With
  // fewer keys than slots (Nk < T) base is 0 and slots past the last key are masked.
  void lowerOnline(attn::OnlineSoftmaxOp op) {
    const std::string name = op.getName().str();
    const int T = (int)op.getTile();
    std::vector<std::string> varNames = strings(op.getIndices());
    std::vector<H::Var> vars = makeVars(op.getIndices());
    std::vector<std::string> scoreNames = strings(op.getScoreIndices());
    std::vector<int64_t> rowsMap(op.getRows().begin(), op.getRows().end());
    const unsigned keyPos = op.getKeyPosition();
    auto unique = [&](std::string n) {
      while (std::find(varNames.begin(), varNames.end(), n) != varNames.end())
        n += "_";
      return n;
    };
    const std::string keyName = unique(scoreNames[keyPos]), tileName = unique(keyName + "_tile");
    H::Var key(keyName), kt(tileName);
    Env env;
    H::Expr Nk = H::cast<int32_t>(eval(op.getKeyExtent(), env));
    const H::Expr lo = H::Float(32).min();
    // The lowest finite float: maxes are kept at least this so that -inf - -inf makes no NaN.
    const H::Expr finite = -std::numeric_limits<float>::max();
    // Every exp is scaled by 2^-k <= 1/T, so that a tile's sum of exps times values stays within
    // the values' range (each exp is <= 1, and T values near the largest float would overflow).
    // A power of two scales exactly; it only flushes exps below 2^-126 (relative to the row's
    // largest, 2^-k, they are under 2^-110: far below a float's resolution of the sum).
    int scaleBits = 0;
    while ((1 << scaleBits) < T)
      ++scaleBits;
    const H::Expr tileScale = H::Expr(std::ldexp(1.0f, -scaleBits));
    // The result's extents, by index.
    std::vector<H::Expr> extents;
    for (Value e : op.getExtents())
      extents.push_back(H::cast<int32_t>(eval(e, env)));

    auto part = [&](const std::string &suffix, FuncRole role) {
      LoweredFunc lf;
      lf.name = suffix.empty() ? name : name + "__" + suffix;
      lf.definition = name;
      lf.role = role;
      lf.func = H::Func(lf.name);
      lf.softmaxAxes = {(int)keyPos};
      return lf;
    };
    // The score's indices: result indices for the rows, the key at its place.
    std::vector<H::Var> svars, rowVars;
    std::vector<std::string> snames, rowNames;
    for (size_t k = 0; k < rowsMap.size(); ++k) {
      if (rowsMap[k] < 0) {
        svars.push_back(key), snames.push_back(keyName);
      } else {
        svars.push_back(vars[rowsMap[k]]), snames.push_back(varNames[rowsMap[k]]);
        rowVars.push_back(vars[rowsMap[k]]), rowNames.push_back(varNames[rowsMap[k]]);
      }
    }
    auto withKey = [&](const std::vector<H::Var> &vs, H::Expr keyExpr) {
      std::vector<H::Expr> c = toExprs(vs);
      c.push_back(keyExpr);
      return reversed(c);
    };
    auto scoreArgs = [&](H::Expr keyExpr) {
      std::vector<H::Expr> c = toExprs(svars);
      c[keyPos] = keyExpr;
      return reversed(c);
    };

    Block &sb = op.getScore().front();
    auto sy = cast<attn::YieldOp>(sb.getTerminator());
    // The score Func of a chain: `masked` keeps the mask (masked scores are -inf), otherwise the
    // raw scores (tiles every row of a group fully sees).
    auto scoreFunc = [&](const std::string &suffix, bool masked) {
      LoweredFunc score = part(suffix, FuncRole::OnlineScore);
      score.vars = svars;
      score.varNames = snames;
      Env senv;
      for (auto [arg, var] : llvm::zip(sb.getArguments(), svars))
        senv[arg] = var;
      reads_ = &score.reads;
      H::Expr sv = H::cast<float>(eval(sy.getValues()[0], senv));
      if (masked && sy.getValues().size() == 2)
        sv = H::select(eval(sy.getValues()[1], senv), sv, lo);
      reads_ = nullptr;
      score.func(scoreArgs(key)) = sv;
      return score;
    };

    auto tileRDom = [&](const std::string &owner) {
      std::vector<H::Internal::ReductionVariable> rv{
          {owner + "$" + keyName, H::Expr(0), H::Expr(T)}};
      return H::RDom(H::Internal::ReductionDomain(rv));
    };
    auto rowsTile = [&](H::Expr t) { return withKey(rowVars, t); };
    auto texpArgs = [&](H::Expr r, H::Expr t) {
      std::vector<H::Expr> a = scoreArgs(r);
      a.push_back(t);
      return a;
    };

    // One chain of per-tile Funcs (max, exps, exp sum, exps x value) over the scores `score`.
    // A full chain counts every slot with no mask test; the other masks the slots that an earlier
    // tile counted (the shifted last tile) and the masked scores.
    struct Chain {
      LoweredFunc score, tmax, texp, tsum, tpv;
    };
    auto makeChain = [&](const std::string &sfx, bool full, int stage) {
      Chain c{scoreFunc("score" + sfx, !full), part("tmax" + sfx, FuncRole::OnlineTileMax),
              part("texp" + sfx, FuncRole::OnlineTileExp),
              part("tsum" + sfx, FuncRole::OnlineTileSum),
              part("tpv" + sfx, FuncRole::OnlineTileValue)};
      // The first key of tile t, the key in slot r (min(r, Nk - 1) only bites when Nk < T), and
      // whether the slot holds a key this tile counts.
      auto base = [&](H::Expr t) { return H::max(H::min(t * T, Nk - T), 0); };
      // (In a full tile base(t) = t*T and r < Nk; the clamped form keeps Halide's bounds of the
      // key reads inside the keys, since they do not see the tile loop's predicate.)
      auto keyAt = [&](H::Expr t, H::Expr r) { return base(t) + H::min(r, Nk - 1); };
      auto scoreAt = [&](H::Expr t, H::Expr r) {
        H::Expr s = c.score.func(scoreArgs(keyAt(t, r)));
        return full ? s : H::select(r >= t * T - base(t) && r < Nk, s, lo);
      };
      for (LoweredFunc *f : {&c.score, &c.tmax, &c.texp, &c.tsum, &c.tpv})
        f->onlineStage = stage, f->onlineFull = full;

      c.tmax.vars = rowVars, c.tmax.varNames = rowNames;
      c.tmax.vars.push_back(kt), c.tmax.varNames.push_back(tileName);
      H::RDom rm = tileRDom(c.tmax.name);
      c.tmax.func(rowsTile(kt)) = lo;
      c.tmax.func(rowsTile(kt)) = H::max(c.tmax.func(rowsTile(kt)), scoreAt(kt, rm));
      c.tmax.rvars = {rm[0]}, c.tmax.rvarNames = {keyName}, c.tmax.reduceKind = "max";
      c.tmax.reads = {c.score.name};

      // The exps by slot (the score's indices with the slot at the key's place) and tile, against
      // the tile's own max (<= 0, so no overflow). A -inf score (masked, or so in the data) gives
      // exp(-inf) = 0; the max is kept finite so that a tile with every score -inf gives 0, not
      // NaN. (No select on the score: Halide cannot skip the tile Funcs of a tile that a key range
      // excludes when a condition reads a Func they compute.)
      c.texp.vars = svars, c.texp.varNames = snames;
      c.texp.vars.push_back(kt), c.texp.varNames.push_back(tileName);
      H::Expr sk = scoreAt(kt, key);
      c.texp.func(texpArgs(key, kt)) =
          nanExp(sk - H::max(c.tmax.func(rowsTile(kt)), finite)) * tileScale;
      c.texp.reads = {c.score.name, c.tmax.name};

      c.tsum.vars = c.tmax.vars, c.tsum.varNames = c.tmax.varNames;
      H::RDom rs = tileRDom(c.tsum.name);
      c.tsum.func(rowsTile(kt)) = 0.0f;
      c.tsum.func(rowsTile(kt)) += c.texp.func(texpArgs(rs, kt));
      c.tsum.rvars = {rs[0]}, c.tsum.rvarNames = {keyName}, c.tsum.reduceKind = "sum";
      c.tsum.reads = {c.texp.name};

      c.tpv.vars = vars, c.tpv.varNames = varNames;
      c.tpv.vars.push_back(kt), c.tpv.varNames.push_back(tileName);
      H::RDom rp = tileRDom(c.tpv.name);
      Block &vb = op.getValue().front();
      Env venv;
      for (size_t i = 0; i < vars.size(); ++i)
        venv[vb.getArgument(i)] = vars[i];
      venv[vb.getArgument(vars.size())] = keyAt(kt, rp);
      reads_ = &c.tpv.reads;
      H::Expr value =
          H::cast<float>(eval(cast<attn::YieldOp>(vb.getTerminator()).getValues()[0], venv));
      reads_ = nullptr;
      c.tpv.reads.push_back(c.texp.name);
      std::vector<H::Expr> tpvArgs = withKey(vars, kt);
      H::Expr weighted = c.texp.func(texpArgs(rp, kt)) * value;
      if (!full) {
        // A slot another tile counts, or a key the mask hides from this row, is never read: its
        // exp is 0, but 0 times an inf or NaN value would be NaN (docs/language.md, "Structural
        // zeros"). Full tiles have neither.
        H::Expr slotOk = rp >= kt * T - base(kt) && rp < Nk;
        if (sy.getValues().size() == 2) {
          Env menv;
          for (size_t k = 0; k < rowsMap.size(); ++k)
            menv[sb.getArgument(k)] = rowsMap[k] < 0 ? keyAt(kt, rp) : H::Expr(vars[rowsMap[k]]);
          reads_ = &c.tpv.reads;
          slotOk = slotOk && eval(sy.getValues()[1], menv);
          reads_ = nullptr;
        }
        // `|| exp < 0` is never true (an exp times a positive scale is >= 0 or NaN); it hides the
        // mask from Halide's (21) trimming of loops to where an update is not a no-op, which has
        // lost keys twice: it solved `j == i` for the tile loop and, hoisting the bound out of the
        // slot loop, simplified `(32*g - slot) / 2` as if the slot were 0 (2-key tiles lost the
        // odd rows' key: fuzz seed 1054729161, regressions/online-band-tile2.test), and it kept
        // only the first row block of a `j == i` mask once rows were unrolled
        // (regressions/online-equality-mask.test). Being a load, the test cannot be solved.
        slotOk = slotOk || c.texp.func(texpArgs(rp, kt)) < 0.0f;
        // Selecting the whole update (not the product) keeps its multiply-add one FMA.
        c.tpv.func(tpvArgs) = 0.0f;
        c.tpv.func(tpvArgs) =
            H::select(slotOk, c.tpv.func(tpvArgs) + weighted, c.tpv.func(tpvArgs));
      } else {
        c.tpv.func(tpvArgs) = 0.0f;
        c.tpv.func(tpvArgs) += weighted;
      }
      c.tpv.rvars = {rp[0]}, c.tpv.rvarNames = {keyName}, c.tpv.reduceKind = "sum";
      return c;
    };

    // Mask bounds (attn.bounds on the key) skip whole tiles: tile t has a visible key in
    // [lower, upper) iff t*T < upper and t*T + T > lower, and every key of it is visible iff
    // t*T >= lower and t*T + T <= upper (and the tile is not the shifted last one). The bounds are
    // taken over groups of kOnlineQueryGroup query rows (the innermost row index), at both ends
    // of the group (they are affine), so each group visits its tiles with all its rows: the
    // state is indexed by (group, row in group), and its tile loops run inside the group loop.
    // Rows as a plain index would let Halide narrow every tile's rows to a tile-dependent range,
    // with a guard per row in the tiles' register blocks (2x slower per tile, measured).
    // Exact bounds (the mask is nothing but them) give the fully visible tiles a chain of their
    // own without the mask test: the state folds those tiles first, then the partly visible ones.
    H::Expr visible, fully;
    int qpos = -1, rq = -1;
    for (int k = 0; k < (int)rowsMap.size(); ++k)
      if (rowsMap[k] >= 0)
        qpos = k, rq = (int)rowsMap[k];
    auto entries = op->getAttrOfType<ArrayAttr>(attn::kBoundsAttr);
    H::Var ig(unique(varNames.empty() ? "g" : varNames[std::max(rq, 0)] + "_group")),
        il(unique(varNames.empty() ? "l" : varNames[std::max(rq, 0)] + "_lane"));
    auto tilePreds = [&](H::Expr t) {
      std::vector<H::Expr> dims = toExprs(svars), first = dims, last = dims;
      first[qpos] = H::Expr(ig) * kOnlineQueryGroup;
      last[qpos] = H::Expr(ig) * kOnlineQueryGroup + (kOnlineQueryGroup - 1);
      bool exact = false;
      // (t < Nk / T: the same as t*T + T <= Nk, in a form from which Halide's simplifier does not
      // drop the clamps of the key reads; bounds inference applies the simplified reads to the
      // tile loop's range even when it is empty, Nk < T, and would read keys below 0.)
      H::Expr vis, full = t < Nk / T;
      for (Attribute a : entries) {
        auto entry = cast<DictionaryAttr>(a);
        if (entry.getAs<IntegerAttr>("index").getInt() != (int64_t)keyPos)
          continue;
        exact = (bool)entry.get("exact");
        for (StringRef side : {"lower", "upper"}) {
          auto map = entry.getAs<AffineMapAttr>(side);
          if (!map)
            continue;
          for (AffineExpr e : map.getValue().getResults()) {
            H::Expr b0 = affine(e, first, entry.getAs<ArrayAttr>("sizes")),
                    b1 = affine(e, last, entry.getAs<ArrayAttr>("sizes"));
            if (!b0.defined() || !b1.defined()) {
              exact = false;
              continue;
            }
            H::Expr v = side == "lower" ? t * T + T > H::min(b0, b1) : t * T < H::max(b0, b1);
            H::Expr f = side == "lower" ? t * T >= H::max(b0, b1) : t * T + T <= H::min(b0, b1);
            vis = vis.defined() ? vis && v : v;
            full = full && f;
          }
        }
      }
      return std::make_pair(vis, exact && vis.defined() ? full : H::Expr());
    };
    if (entries && qpos >= 0)
      std::tie(visible, fully) = tilePreds(H::Expr(0));
    const bool grouped = visible.defined();

    // Conjuncts of the mask that do not depend on the query row (a key padding mask,
    // `mask(b, j) == 0`) give, per entry of the other row indices (the batch), the keys they let
    // through: `<o>__tkeys` = (first, last + 1, count). Tiles outside [first, last] are skipped
    // by every row, whatever else the mask says. The skip must be a range of tiles, linear in the
    // tile index (Halide then solves the update's predicate for loop bounds, and the tile Funcs
    // computed at that loop run only inside them; a data-dependent `if` would skip the state
    // update but not them). When the mask is nothing but such conjuncts, `<o>__tranges` splits
    // the tiles into a range of fully visible ones (no mask test) and a range of the others: the
    // partly visible tiles at either end (the shifted last tile among them), or every visible
    // tile where the keys have holes or both ends are partly visible.
    LoweredFunc tkeys, tranges;
    bool keyOnly = false;
    H::Expr keyLo, keyHi;        // [first tile, end tile) holding visible keys
    std::vector<H::Expr> ranges; // fs, fe, ps, pe
    if (sy.getValues().size() == 2) {
      Value keyArg = sb.getArgument(keyPos),
            qArg = qpos >= 0 ? Value(sb.getArgument(qpos)) : Value();
      SmallVector<Value> leaves, keyLeaves;
      andLeaves(sy.getValues()[1], leaves);
      keyOnly = true;
      for (Value l : leaves) {
        bool rowFree = !qArg || !dependsOn(l, qArg);
        keyOnly &= rowFree;
        if (rowFree && dependsOn(l, keyArg))
          keyLeaves.push_back(l);
      }
      if (keyLeaves.empty())
        keyOnly = false;
      else {
        // Indexed by the row indices other than the query that the key conjuncts read.
        std::vector<H::Var> kvars;
        std::vector<std::string> knames;
        for (size_t k = 0; k < rowVars.size(); ++k) {
          if (qpos >= 0 && k + 1 == rowVars.size())
            continue;
          Value arg = sb.getArgument(k < keyPos ? k : k + 1);
          if (llvm::any_of(keyLeaves, [&](Value l) { return dependsOn(l, arg); }))
            kvars.push_back(rowVars[k]), knames.push_back(rowNames[k]);
        }
        auto keyFunc = [&](const std::string &suffix) {
          LoweredFunc f = part(suffix, FuncRole::Reduction);
          f.definition = f.name; // scheduled as any reduction, not with the tiles
          f.predicateInput = true;
          f.vars = kvars, f.varNames = knames;
          return f;
        };
        tkeys = keyFunc("tkeys");
        std::vector<H::Internal::ReductionVariable> rv{
            {tkeys.name + "$" + keyName, H::Expr(0), Nk}};
        H::RDom r{H::Internal::ReductionDomain(rv)};
        Env cenv;
        for (size_t k = 0; k < svars.size(); ++k)
          cenv[sb.getArgument(k)] = (int)k == (int)keyPos ? H::Expr(r.x)
                                    : (int)k == qpos      ? H::Expr(0)
                                                          : H::Expr(svars[k]);
        reads_ = &tkeys.reads;
        H::Expr cond;
        for (Value l : keyLeaves)
          cond = cond.defined() ? cond && eval(l, cenv) : eval(l, cenv);
        reads_ = nullptr;
        std::vector<H::Expr> kargs = reversed(toExprs(kvars));
        tkeys.func(kargs) = H::Tuple(Nk, 0, 0);
        tkeys.func(kargs) =
            H::Tuple(H::select(cond, H::min(tkeys.func(kargs)[0], r.x), tkeys.func(kargs)[0]),
                     H::select(cond, H::max(tkeys.func(kargs)[1], r.x + 1), tkeys.func(kargs)[1]),
                     tkeys.func(kargs)[2] + H::select(cond, 1, 0));
        tkeys.rvars = {r[0]}, tkeys.rvarNames = {keyName};
        H::Expr lo = tkeys.func(kargs)[0], hi = tkeys.func(kargs)[1], n = tkeys.func(kargs)[2];
        H::Expr loT = lo / T, loC = (lo + T - 1) / T, hiC = (hi + T - 1) / T;
        if (keyOnly && !grouped) {
          // Full tiles [loC, fullEnd) (the shifted last tile, t = Nk / T, is never full); a partly
          // visible first tile when lo is not a multiple of T; partly visible tiles [fullEnd, hiC)
          // at the end. Both ends partly visible, or holes: one masked range over them all.
          tranges = keyFunc("tranges");
          tranges.role = FuncRole::Define;
          H::Expr fullEnd = H::max(H::min(hi / T, Nk / T), loC), dense = n == hi - lo && n > 0;
          H::Expr head = lo % T != 0, tail = fullEnd < hiC;
          H::Expr z(0);
          H::Expr fs = H::select(!dense || (head && tail), z, loC),
                  fe = H::select(!dense || (head && tail), z, fullEnd);
          // (With no visible key, lo = Nk and hi = 0: [loT, hiC) is empty, and so is the full range.)
          H::Expr ps = H::select(dense && !head, fullEnd, loT),
                  pe = H::select(dense && head && !tail, loC, hiC);
          tranges.func(kargs) = H::Tuple(fs, fe, ps, pe);
          for (int c = 0; c < 4; ++c)
            ranges.push_back(tranges.func(kargs)[c]);
        } else {
          keyLo = loT, keyHi = hiC; // empty without a visible key (lo = Nk, hi = 0)
        }
      }
    }
    // The tile predicates of the state updates: affine bounds per group, then the key ranges.
    auto allPreds = [&](H::Expr t) {
      H::Expr vis, full;
      if (grouped)
        std::tie(vis, full) = tilePreds(t);
      if (!ranges.empty()) {
        vis = t >= ranges[2] && t < ranges[3];
        full = t >= ranges[0] && t < ranges[1];
      } else if (keyLo.defined()) {
        H::Expr inKeys = t >= keyLo && t < keyHi;
        vis = vis.defined() ? vis && inKeys : inKeys;
      }
      return std::make_pair(vis, full);
    };
    std::tie(visible, fully) = allPreds(H::Expr(0));
    const bool split = fully.defined();

    LoweredFunc state = part("state", FuncRole::OnlineState);
    // The state's indices: the result's, with the query row as (group, row in group) when grouped.
    std::vector<H::Var> stVars;
    std::vector<std::string> stNames;
    for (size_t k = 0; k < vars.size(); ++k) {
      if (grouped && (int)k == rq) {
        stVars.push_back(ig), stNames.push_back(ig.name());
        stVars.push_back(il), stNames.push_back(il.name());
      } else {
        stVars.push_back(vars[k]), stNames.push_back(varNames[k]);
      }
    }
    state.vars = stVars, state.varNames = stNames;
    std::vector<H::Expr> stArgs = reversed(toExprs(stVars));
    // (output so far, sum of exps, max). Each element reads only itself and the elements after
    // it: Halide stores a Tuple update's elements in order, and under strict floats it does not
    // see that an element reads an earlier one (FloatSemantics.cpp checks the order).
    state.func(stArgs) = H::Tuple(0.0f, 0.0f, lo);
    // What the state reads at (group, row in group): the row itself, kept inside the query range
    // for the last group's rows past its end (their state is computed and never read).
    std::vector<H::Expr> rowExprs = toExprs(vars);
    if (grouped) {
      H::Expr Nq = extents[rq];
      rowExprs[rq] = H::min(H::Expr(ig) * kOnlineQueryGroup + il, Nq - 1);
    }
    auto stateRows = [&](H::Expr t) {
      std::vector<H::Expr> c;
      for (int64_t r : rowsMap)
        if (r >= 0)
          c.push_back(rowExprs[r]);
      c.push_back(t);
      return reversed(c);
    };
    auto stateIndices = [&](H::Expr t) {
      std::vector<H::Expr> c = rowExprs;
      c.push_back(t);
      return reversed(c);
    };

    std::vector<Chain> chains;
    if (split)
      chains.push_back(makeChain("_full", true, 0));
    chains.push_back(makeChain("", false, split ? 1 : 0));
    for (Chain &c : chains) {
      std::vector<H::Internal::ReductionVariable> rtv{
          {state.name + "$" + tileName + (c.score.onlineFull ? "_full" : ""), H::Expr(0),
           (Nk + T - 1) / T}};
      H::RDom rt{H::Internal::ReductionDomain(rtv)};
      if (visible.defined()) {
        auto [vis, full] = allPreds(rt);
        // (Key ranges are disjoint already: `vis && !full` would be a union that Halide cannot
        // solve for loop bounds.)
        rt.where(!split ? vis : c.score.onlineFull ? full : ranges.empty() ? vis && !full : vis);
        state.maskBounded = grouped;
      }
      H::Expr acc = state.func(stArgs)[0], l = state.func(stArgs)[1], mo = state.func(stArgs)[2];
      H::Expr mt = c.tmax.func(stateRows(rt));
      // One exp per step: exp(-|old - tile max|) rescales whichever of the two is smaller. Maxes
      // are kept finite so that -inf - -inf (nothing seen yet, a tile with every key masked)
      // makes no NaN: such a tile's sum and values are 0, so either weight adds nothing. The
      // weights blend by a 0/1 factor, not a select: a select whose condition reads the tile's
      // max would stop Halide from skipping the tile Funcs of tiles a key range excludes.
      H::Expr mof = H::max(mo, finite), mtf = H::max(mt, finite);
      H::Expr cf = H::exp(-H::abs(mof - mtf)), g = H::cast<float>(mof >= mtf);
      H::Expr a = g + (1.0f - g) * cf, b = g * cf + (1.0f - g);
      // The output so far is kept normalised (a weighted mean of the values seen), so it never
      // overflows where the result does not; the sum of exps is 0 only while every key seen was
      // masked, and then both terms are 0 (the sum is kept at least the smallest normal float).
      H::Expr ln = l * a + c.tsum.func(stateRows(rt)) * b;
      H::Expr inv = 1.0f / H::max(ln, std::numeric_limits<float>::min());
      state.func(stArgs) = H::Tuple(acc * (l * a * inv) + c.tpv.func(stateIndices(rt)) * (b * inv),
                                    ln, H::max(mo, mt));
      state.rvars.push_back(rt[0]), state.rvarNames.push_back(tileName);
      for (const std::string &n : {c.tmax.name, c.tsum.name, c.tpv.name})
        state.reads.push_back(n);
    }
    state.keyCount = Nk, state.onlineTile = T, state.onlineGrouped = grouped;
    state.onlineKeyRanged = !ranges.empty() || keyLo.defined();
    for (size_t k = 0; k < vars.size(); ++k)
      state.onlineExtents.push_back({varNames[k], extents[k]});

    // The pairs of (row block, key tile) the updates above visit, counted by the same predicates
    // over an RDom of the rows (the query as groups when grouped) and the tiles.
    {
      TileVisits tv;
      tv.output = name, tv.tile = T, tv.rowsPerBlock = grouped ? kOnlineQueryGroup : 1;
      tv.masked = sy.getValues().size() == 2;
      tv.count = H::Func(name + "__visits");
      std::vector<H::Internal::ReductionVariable> rv;
      std::map<std::string, H::Expr> sub;
      size_t k = 0;
      for (int64_t r : rowsMap) {
        if (r < 0)
          continue;
        H::Expr ext = extents[r];
        if (grouped && r == rq)
          ext = (ext + kOnlineQueryGroup - 1) / kOnlineQueryGroup;
        rv.push_back({tv.count.name() + "$" + rowNames[k], H::Expr(0), ext});
        ++k;
      }
      rv.push_back({tv.count.name() + "$" + tileName, H::Expr(0), (Nk + T - 1) / T});
      H::RDom r{H::Internal::ReductionDomain(rv)};
      k = 0;
      for (int64_t ri : rowsMap) {
        if (ri < 0)
          continue;
        sub[(grouped && ri == rq ? H::Var(ig) : rowVars[k]).name()] = r[k];
        ++k;
      }
      auto [vis, full] = allPreds(r[(int)rv.size() - 1]);
      // (Every term reads the RDom: an update that reads none of its variables has no RDom.)
      auto one = [&](H::Expr c) {
        return H::cast<int64_t>(
            H::select(c.defined() ? H::Internal::substitute(sub, c) : H::Expr(r[0]) >= 0, 1, 0));
      };
      H::Expr part = split && ranges.empty() ? vis && !full : vis;
      H::Expr visited = split ? one(full) + one(part) : one(part);
      H::Expr tested = !tv.masked ? H::Expr((int64_t)0) : split ? one(part) : visited;
      H::Expr z((int64_t)0);
      tv.count() = H::Tuple(z, z, z);
      tv.count() =
          H::Tuple(tv.count()[0] + visited, tv.count()[1] + tested, tv.count()[2] + one(H::Expr()));
      out_.tileVisits.push_back(std::move(tv));
    }

    LoweredFunc out = part("", FuncRole::Online);
    out.vars = vars, out.varNames = varNames;
    std::vector<H::Expr> outState = toExprs(vars);
    if (grouped) {
      H::Expr i = vars[rq];
      outState[rq] = i % kOnlineQueryGroup;
      outState.insert(outState.begin() + rq, i / kOnlineQueryGroup);
    }
    outState = reversed(outState);
    out.func(reversed(toExprs(vars))) = guarded(op.getResult(), state.func(outState)[0]);
    out.reads = {state.name};

    funcNames_[op.getResult()] = name;
    for (Chain &c : chains)
      for (LoweredFunc *f : {&c.score, &c.tmax, &c.texp, &c.tsum, &c.tpv})
        addFunc(std::move(*f));
    if (tkeys.func.defined())
      addFunc(std::move(tkeys));
    if (tranges.func.defined())
      addFunc(std::move(tranges));
    addFunc(std::move(state));
    addFunc(std::move(out));
  }

  // The leaves of an `&&` tree of i1 values.
  static void andLeaves(Value v, SmallVectorImpl<Value> &out) {
    if (auto a = v.getDefiningOp<arith::AndIOp>(); a && a.getType().isInteger(1)) {
      andLeaves(a.getLhs(), out);
      andLeaves(a.getRhs(), out);
      return;
    }
    out.push_back(v);
  }
  // Whether `v` is computed from `arg` (through its operands and the regions of nested ops).
  static bool dependsOn(Value v, Value arg) {
    llvm::DenseSet<Value> seen;
    std::function<bool(Value)> dep = [&](Value x) -> bool {
      if (x == arg)
        return true;
      if (!seen.insert(x).second)
        return false;
      Operation *d = x.getDefiningOp();
      if (!d)
        return false;
      bool found = false;
      d->walk([&](Operation *op) {
        for (Value o : op->getOperands())
          if (!found && (o == arg ||
                         (o.getDefiningOp() ? !d->isAncestor(o.getDefiningOp()) && dep(o) : false)))
            found = true;
      });
      return found;
    };
    return dep(v);
  }

  // A reduction's body, made to use its domain: Halide attaches an RDom to an update only through
  // the RVars the update mentions, so `sum(j in 0..N) 1.0` would run once, not N times. A body
  // that mentions none gets `+ 0 * j` (in the body's type), which lowering simplifies away after
  // the loop over the domain exists.
  static H::Expr iterateAll(H::Expr v, const H::RDom &r) {
    for (int i = 0; i < r.dimensions(); ++i)
      if (H::Internal::expr_uses_var(v, r[i].name()))
        return v;
    return v + H::cast(v.type(), H::Expr(0) * H::Expr(r[0]));
  }

  static H::Expr initValue(StringRef kind, H::Type t) {
    if (kind == "sum")
      return H::Internal::make_zero(t);
    if (kind == "max")
      return t.min();
    return t.max();
  }
  static H::Expr combine(StringRef kind, H::Expr acc, H::Expr v) {
    if (kind == "sum")
      return acc + v;
    H::Expr m = kind == "max" ? H::max(acc, v) : H::min(acc, v);
    return v.type().is_float() ? nanPropagating(acc, v, m) : m;
  }
  // a / b by IEEE rules. Halide refuses to generate a division by a divisor it simplifies to a
  // constant zero (the `mean` of an empty domain divides by 0, and a kernel may write `/ 0.0` or
  // `/ (y - y)`), so that case is spelt out: NaN for 0 / 0, a NaN operand, or a divisor that is
  // NaN after all (y - y and y * 0.0 are, for a NaN or infinite y); otherwise +-inf by the
  // signs, the divisor's sign bit included (y * 0.0 is -0 for a negative y). Strict floats keep
  // the divisor's own NaN test and sign from being folded.
  // A divisor that is not a constant here may still become a constant 0 in Halide's lowering
  // (known sizes, the out-of-range part of a loop over a `.zero` read: rsqrt(x.zero(..)) gave
  // "Division by constant zero", fuzz seed 772683725). It is divided as b + -0.0, which is b
  // for every float (-0 + -0 = -0) and which strict floats never fold, so the hardware divides
  // and gives IEEE's result.
  static H::Expr fdiv(const H::Expr &a, const H::Expr &b) {
    const std::optional<double> z = Halide::Internal::as_const_float(Halide::Internal::simplify(b));
    if (!z)
      return a / (b + H::Expr(-0.0f));
    if (*z != 0.0)
      return a / b;
    const float inf = std::numeric_limits<float>::infinity();
    const H::Expr negative = H::reinterpret<int32_t>(b) < 0;
    return H::select(H::is_nan(a) || H::is_nan(b) || a == 0.0f,
                     H::Expr(std::numeric_limits<float>::quiet_NaN()),
                     H::select((a > 0.0f) != negative, H::Expr(inf), H::Expr(-inf)));
  }
  // exp(x), NaN for a NaN x: Halide's exp gives 0 there. A softmax's exps of score - max are
  // where a NaN or +inf score (inf - inf) turns its row into NaN, as in PyTorch: the row's sum
  // becomes NaN whether or not the max kept the NaN (a max of floats does not promise to).
  static H::Expr nanExp(const H::Expr &x) { return H::select(H::is_nan(x), x, H::exp(x)); }
  // `m` (a max or min of x and y), or NaN when x or y is NaN (x + y is then NaN).
  static H::Expr nanPropagating(H::Expr x, H::Expr y, H::Expr m) {
    return H::select(H::is_nan(x) || H::is_nan(y), x + y, m);
  }

  // Block arguments of enclosing index regions that `root`'s region depends on, outermost first.
  // Only indices of regions that enclose `root` count: reads of other definitions are calls to
  // their Funcs, and a sibling reduction's own indices are bound inside it.
  void collectCaptured(Operation *root, llvm::SetVector<BlockArgument> &captured) {
    llvm::DenseSet<Value> visited;
    std::function<void(Value)> dep = [&](Value v) {
      if (!visited.insert(v).second)
        return;
      if (auto ba = dyn_cast<BlockArgument>(v)) {
        Operation *owner = ba.getOwner()->getParentOp();
        if (owner != root && owner->isAncestor(root) && !isa<attn::KernelOp>(owner))
          captured.insert(ba);
        return;
      }
      Operation *def = v.getDefiningOp();
      if (root->isAncestor(def) ||
          isa<attn::DefineOp, attn::SoftmaxOp, attn::OnlineSoftmaxOp, attn::DimOp>(def))
        return;
      def->walk([&](Operation *inner) {
        for (Value o : inner->getOperands())
          dep(o);
      });
    };
    root->walk([&](Operation *inner) {
      for (Value o : inner->getOperands())
        dep(o);
    });
  }

  static std::string indexName(BlockArgument ba) {
    Operation *owner = ba.getOwner()->getParentOp();
    ArrayAttr names = owner->getAttrOfType<ArrayAttr>("indices");
    if (names && ba.getArgNumber() < names.size())
      return cast<StringAttr>(names[ba.getArgNumber()]).getValue().str();
    return "v" + std::to_string(ba.getArgNumber());
  }

  static std::string definitionOf(Operation *op) {
    while (op && !isa<attn::DefineOp, attn::SoftmaxOp, attn::OnlineSoftmaxOp>(op))
      op = op->getParentOp();
    if (auto d = dyn_cast_or_null<attn::DefineOp>(op))
      return d.getName().str();
    if (auto s = dyn_cast_or_null<attn::SoftmaxOp>(op))
      return s.getName().str();
    if (auto o = dyn_cast_or_null<attn::OnlineSoftmaxOp>(op))
      return o.getName().str();
    return "kernel";
  }

  // A reduction nested in a larger expression becomes its own Func `<def>__<kind><n>` over the
  // enclosing indices it uses; the expression calls it.
  H::Expr lowerNestedReduce(attn::ReduceOp op, Env &env) {
    // A reduction used from several places (a `let` value read inside another reduction, as
    // layer_norm's mean is) is one Func, called with each place's values of its indices.
    if (auto it = nestedReduce_.find(op.getOperation()); it != nestedReduce_.end()) {
      std::vector<H::Expr> callArgs;
      for (BlockArgument ba : it->second.captured) {
        callArgs.push_back(env.lookup(ba));
        if (!callArgs.back().defined())
          unsupported(op, "reduction uses an index that is not in scope");
      }
      if (reads_)
        reads_->push_back(it->second.name);
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
    for (BlockArgument ba : captured) {
      lf.varNames.push_back(indexName(ba));
      lf.vars.emplace_back(lf.varNames.back());
      inner[ba] = lf.vars.back();
      callArgs.push_back(env.lookup(ba));
      if (!callArgs.back().defined())
        unsupported(op, "reduction uses an index that is not in scope");
    }
    H::RDom r = makeRDom(op.getExtents(), op.getIndices(), env, name);
    // The helper Func's own variables stand for the enclosing indices; an index it does not
    // capture has no value there, and a bound using it is left out.
    lf.maskBounded = restrictReduction(r, op, inner);
    for (unsigned i = 0; i < op.getBody().getNumArguments(); ++i)
      inner[op.getBody().getArgument(i)] = r[i];
    std::vector<std::string> *savedReads = reads_;
    reads_ = &lf.reads;
    H::Expr v = iterateAll(
        castTo(
            op.getType(),
            eval(cast<attn::YieldOp>(op.getBody().front().getTerminator()).getValues()[0], inner)),
        r);
    reads_ = savedReads;
    std::vector<H::Expr> args = reversed(toExprs(lf.vars));
    lf.func(args) = initValue(op.getKind(), v.type());
    lf.func(args) = combine(op.getKind(), lf.func(args), v);
    lf.rvarNames = strings(op.getIndices());
    for (int i = 0; i < r.dimensions(); ++i)
      lf.rvars.push_back(r[i]);
    H::Func f = lf.func;
    addFunc(std::move(lf));
    nestedReduce_[op.getOperation()] = {name, {captured.begin(), captured.end()}};
    if (reads_)
      reads_->push_back(name);
    return f(reversed(callArgs));
  }

  // A read of an input or a definition. Halide's dimension order is the reverse of the DSL's.
  // Two extents that are the same size: the same SSA value, the same named size (attn.dim ops
  // of different inputs bound to one symbol) or the same constant.
  static bool sameExtent(Value a, Value b) {
    if (a == b)
      return true;
    auto da = a.getDefiningOp<attn::DimOp>(), db = b.getDefiningOp<attn::DimOp>();
    if (da && db)
      return da.getSize() == db.getSize();
    auto ca = a.getDefiningOp<arith::ConstantIndexOp>(),
         cb = b.getDefiningOp<arith::ConstantIndexOp>();
    return ca && cb && ca.value() == cb.value();
  }

  // Whether subscript `sub` of a read is inside dimension `d` by construction: a bare index
  // (a region argument, which MLIRGen keeps for ranges starting at 0) whose extent is the
  // dimension's. Such a subscript needs no clamp and no range test.
  bool inRangeByConstruction(Value sub, Value tensor, size_t d) {
    auto ba = dyn_cast<BlockArgument>(sub);
    if (!ba)
      return false;
    Operation *owner = ba.getOwner()->getParentOp();
    Value ext;
    if (auto on = dyn_cast<attn::OnlineSoftmaxOp>(owner)) {
      // Value region: the result's indices, then the key (the operands' order). Score region:
      // the softmax's indices, each a result index or the key.
      if (ba.getOwner()->getParent() == &on.getValue())
        ext = owner->getOperand(ba.getArgNumber());
      else {
        int64_t r = on.getRows()[ba.getArgNumber()];
        ext = r < 0 ? on.getKeyExtent() : on.getExtents()[r];
      }
    } else if (isa<attn::DefineOp, attn::SoftmaxOp, attn::ReduceOp>(owner)) {
      ext = owner->getOperand(ba.getArgNumber());
    } else {
      return false;
    }
    if (inputIndex_.count(tensor)) {
      const KernelParam &p = out_.inputs[inputIndex_.lookup(tensor)];
      auto dim = ext.getDefiningOp<attn::DimOp>();
      const std::vector<attnc::Dim> &dims = p.type.dims;
      if (dim)
        return d < dims.size() && dims[d].symbol() && dim.getSize() == dims[d].symbol_name();
      auto c = ext.getDefiningOp<arith::ConstantIndexOp>();
      return c && d < dims.size() && dims[d].literal() && dims[d].literal_value() == c.value();
    }
    Operation *def = tensor.getDefiningOp();
    return def && d < def->getNumOperands() && sameExtent(def->getOperand(d), ext);
  }

  // A read, as its value at the clamped subscripts and the condition under which that value is
  // the one read (false: a `.zero`/`.exclude` read outside the tensor, whose value is 0).
  struct ReadParts {
    H::Expr value, inRange;
  };

  H::Expr lowerRead(attn::ReadOp r, Env &env) {
    ReadParts p = lowerReadParts(r, env);
    if (r.getBoundary() == "zero" && !H::Internal::is_const_one(p.inRange))
      return H::select(p.inRange, p.value, H::Internal::make_zero(p.value.type()));
    return p.value;
  }

  // Whether computing `v` inside `owner`'s body involves a reduction.
  static bool reducesIn(Value v, Operation *owner) {
    llvm::SmallVector<Value> work{v};
    llvm::DenseSet<Operation *> seen;
    while (!work.empty()) {
      Operation *d = work.pop_back_val().getDefiningOp();
      if (!d || !owner->isAncestor(d) || !seen.insert(d).second)
        continue;
      if (isa<attn::ReduceOp>(d))
        return true;
      for (Value o : d->getOperands())
        work.push_back(o);
    }
    return false;
  }

  // Structural zeros (docs/language.md §6): a `.zero` or `.exclude` read outside its tensor and a
  // masked entry of a softmax are exact zeros that make a product they are a factor of 0, even
  // when another factor is inf or NaN (a zero-padded sample times an infinite weight, a masked
  // probability times a NaN value: the masked key is never read). For a product, negation or
  // quotient with such a factor: its value computed from the raw reads, and the condition under
  // which it is not structurally 0. Empty for anything else.
  std::optional<ReadParts> structural(Value v, Env &env) {
    Operation *op = v.getDefiningOp();
    if (!op || !v.getType().isF32())
      return std::nullopt;
    if (auto r = dyn_cast<attn::ReadOp>(op)) {
      Value t = r.getTensor();
      StringRef boundary = r.getBoundary();
      if (boundary == "zero" || boundary == "exclude") {
        ReadParts p = lowerReadParts(r, env);
        if (H::Internal::is_const_one(p.inRange))
          return std::nullopt;
        return p;
      }
      auto sm = t.getDefiningOp<attn::SoftmaxOp>();
      if (!sm)
        return std::nullopt;
      auto yield = cast<attn::YieldOp>(sm.getBody().front().getTerminator());
      if (yield.getValues().size() != 2)
        return std::nullopt;
      // A mask that reduces (an `.exclude` read inside the score's sum, as swda_natten's) would be
      // a reduction Func of its own at every read of the softmax, redoing the mask's work there
      // and keeping the window rule from placing the softmax next to its consumer; such a read
      // stays a plain product (its probability is still exactly 0 at masked entries).
      if (reducesIn(yield.getValues()[1], sm))
        return std::nullopt;
      // The softmax's mask (its `where` and `.exclude` conditions) at the read's subscripts,
      // clamped as the read clamps them: Halide cannot bound a computed subscript (`(i + 2) % N`)
      // and would evaluate the mask, and read its inputs, outside the softmax.
      Env menv;
      ValueRange extents = sm->getOperands();
      for (auto [d, arg, sub] :
           llvm::enumerate(sm.getBody().front().getArguments(), r.getIndices())) {
        H::Expr i = H::cast<int32_t>(eval(sub, env));
        if (!i.as<H::Internal::Variable>())
          i = H::clamp(i, 0, H::max(H::cast<int32_t>(eval(extents[d], env)) - 1, 0));
        menv[arg] = i;
      }
      H::Expr mask = eval(yield.getValues()[1], menv);
      return ReadParts{lowerReadParts(r, env).value, mask};
    }
    auto operand = [&](Value x) {
      std::optional<ReadParts> p = structural(x, env);
      return p ? *p : ReadParts{eval(x, env), H::Expr()};
    };
    auto both = [](const H::Expr &a, const H::Expr &b) {
      return !a.defined() ? b : !b.defined() ? a : a && b;
    };
    if (isa<arith::MulFOp>(op)) {
      ReadParts a = operand(op->getOperand(0)), b = operand(op->getOperand(1));
      if (!a.inRange.defined() && !b.inRange.defined())
        return std::nullopt;
      return ReadParts{a.value * b.value, both(a.inRange, b.inRange)};
    }
    if (isa<arith::NegFOp>(op)) {
      std::optional<ReadParts> a = structural(op->getOperand(0), env);
      if (a)
        a->value = -a->value;
      return a;
    }
    if (isa<arith::DivFOp>(op)) {
      std::optional<ReadParts> a = structural(op->getOperand(0), env);
      if (a)
        a->value = fdiv(a->value, eval(op->getOperand(1), env));
      return a;
    }
    return std::nullopt;
  }

  ReadParts lowerReadParts(attn::ReadOp r, Env &env) {
    std::vector<H::Expr> idx; // DSL order
    for (Value i : r.getIndices())
      idx.push_back(H::cast<int32_t>(eval(i, env)));
    Value t = r.getTensor();
    StringRef boundary = r.getBoundary();
    std::vector<H::Expr> extent(idx.size());
    H::Func func;
    const KernelParam *param = nullptr;
    if (inputIndex_.count(t)) {
      param = &out_.inputs[inputIndex_.lookup(t)];
      if (reads_)
        reads_->push_back(param->name);
      for (size_t d = 0; d < idx.size(); ++d)
        extent[d] = param->param.dim((int)(idx.size() - 1 - d)).extent();
    } else {
      auto fn = funcNames_.find(t);
      if (fn == funcNames_.end())
        unsupported(r, "read of a tensor that is not an input or a definition");
      if (reads_)
        reads_->push_back(fn->second);
      func = out_.find(fn->second)->func;
      // Define and softmax ops take exactly their extents as operands.
      ValueRange extents = t.getDefiningOp()->getOperands();
      for (size_t d = 0; d < idx.size(); ++d)
        extent[d] = H::cast<int32_t>(eval(extents[d], env));
    }
    H::Expr inRange = H::Internal::const_true();
    for (size_t d = 0; d < idx.size(); ++d) {
      if (boundary != "none" && inRangeByConstruction(r.getIndices()[d], t, d))
        continue;
      if (boundary == "zero")
        inRange = inRange && idx[d] >= 0 && idx[d] < extent[d];
      // Zero and clamp read the nearest element (then zero discards it): the access stays inside
      // the tensor, and Halide's bounds inference sees a region no larger than the tensor.
      // A computed index into a definition (`v(b, o / Dh, i, o % Dh)`) is clamped too: that
      // changes nothing for a valid program, but Halide cannot prove the range of such indices
      // itself and would compute the definition (and read its inputs) outside it. Plain
      // indices need no clamp.
      bool computed = !idx[d].as<H::Internal::Variable>();
      if (boundary != "none" || (!param && computed)) {
        idx[d] = H::clamp(idx[d], 0, H::max(extent[d] - 1, 0));
      } else if (param && readsData(idx[d])) {
        // A gather from an input: the read is clamped so Halide can bound it, and an index that
        // was out of range stops the kernel with an error (as a bounds check would).
        H::Expr i = idx[d];
        idx[d] = H::require(i >= 0 && i < extent[d], H::clamp(i, 0, H::max(extent[d] - 1, 0)),
                            "input", param->name, "is read at", i, "in dimension", (int)d,
                            "of extent", extent[d]);
      }
    }
    H::Expr v = param ? H::Expr(param->param(reversed(idx))) : H::Expr(func(reversed(idx)));
    return {v, inRange};
  }

  // --- scalar expressions --------------------------------------------------------------------
  H::Expr eval(Value v, Env &env) {
    auto it = env.find(v);
    if (it != env.end())
      return it->second;
    Operation *op = v.getDefiningOp();
    if (!op)
      throw std::runtime_error("HalideGen: index used outside its region");
    H::Expr e = evalOp(op, env);
    env[v] = e;
    return e;
  }

  H::Expr evalOp(Operation *op, Env &env) {
    auto a = [&](unsigned i) { return eval(op->getOperand(i), env); };
    return llvm::TypeSwitch<Operation *, H::Expr>(op)
        .Case<attn::DimOp>([&](attn::DimOp d) -> H::Expr {
          const KernelParam &p = out_.inputs[inputIndex_.lookup(d.getTensor())];
          return p.param.dim(p.param.dimensions() - 1 - (int)d.getIndex()).extent();
        })
        .Case<attn::ReadOp>([&](attn::ReadOp r) -> H::Expr { return lowerRead(r, env); })
        .Case<attn::ReduceOp>([&](attn::ReduceOp r) { return lowerNestedReduce(r, env); })
        .Case<arith::ConstantOp>([&](arith::ConstantOp c) -> H::Expr {
          Attribute val = c.getValue();
          if (auto f = dyn_cast<FloatAttr>(val))
            return H::Expr((float)f.getValueAsDouble());
          if (auto i = dyn_cast<IntegerAttr>(val)) {
            if (c.getType().isInteger(1))
              return H::cast<bool>(H::Expr((int)i.getValue().getZExtValue()));
            return H::Expr((int32_t)i.getValue().getSExtValue());
          }
          unsupported(op, "constant kind");
        })
        .Case<arith::AddFOp, arith::AddIOp>([&](auto) { return a(0) + a(1); })
        .Case<arith::SubFOp, arith::SubIOp>([&](auto) { return a(0) - a(1); })
        .Case<arith::MulFOp, arith::DivFOp, arith::NegFOp>([&](Operation *o) -> H::Expr {
          if (std::optional<ReadParts> p = structural(o->getResult(0), env))
            return H::select(p->inRange, p->value, 0.0f);
          // Halide negates as 0 - x, which loses the sign of a zero.
          if (isa<arith::NegFOp>(o))
            return a(0) * -1.0f;
          return isa<arith::MulFOp>(o) ? a(0) * a(1) : fdiv(a(0), a(1));
        })
        .Case<arith::MulIOp>([&](auto) { return a(0) * a(1); })
        .Case<arith::FloorDivSIOp>([&](auto) {
          // Halide's integer division is Euclidean; it equals floor division for positive divisors.
          H::Expr x = a(0), y = a(1);
          return H::select(y > 0, x / y, (0 - x) / (0 - y));
        })
        // maximumf/minimumf propagate NaN (as torch.maximum does); Halide's max/min of floats
        // return the other operand (maxnumf/minnumf, which ifloor's clamp uses).
        .Case<arith::MaximumFOp>(
            [&](auto) { return nanPropagating(a(0), a(1), H::max(a(0), a(1))); })
        .Case<arith::MinimumFOp>(
            [&](auto) { return nanPropagating(a(0), a(1), H::min(a(0), a(1))); })
        .Case<arith::MaxNumFOp, arith::MaxSIOp>([&](auto) { return H::max(a(0), a(1)); })
        .Case<arith::MinNumFOp, arith::MinSIOp>([&](auto) { return H::min(a(0), a(1)); })
        .Case<arith::AndIOp>([&](auto) { return a(0) && a(1); })
        .Case<arith::OrIOp>([&](auto) { return a(0) || a(1); })
        .Case<arith::XOrIOp>([&](auto) { return a(0) != a(1); })
        .Case<arith::SelectOp>([&](auto) { return H::select(a(0), a(1), a(2)); })
        .Case<arith::IndexCastOp, arith::SIToFPOp, arith::FPToSIOp>(
            [&](auto) { return castTo(op->getResult(0).getType(), a(0)); })
        .Case<arith::CmpIOp>([&](arith::CmpIOp c) -> H::Expr {
          H::Expr x = a(0), y = a(1);
          switch (c.getPredicate()) {
          case arith::CmpIPredicate::eq:
            return x == y;
          case arith::CmpIPredicate::ne:
            return x != y;
          case arith::CmpIPredicate::slt:
            return x < y;
          case arith::CmpIPredicate::sle:
            return x <= y;
          case arith::CmpIPredicate::sgt:
            return x > y;
          case arith::CmpIPredicate::sge:
            return x >= y;
          default:
            unsupported(op, "unsigned integer comparison");
          }
        })
        .Case<arith::CmpFOp>([&](arith::CmpFOp c) -> H::Expr {
          H::Expr x = a(0), y = a(1);
          switch (c.getPredicate()) {
          case arith::CmpFPredicate::OEQ:
            return x == y;
          case arith::CmpFPredicate::UNE:
            return x != y;
          case arith::CmpFPredicate::OLT:
            return x < y;
          // Halide's simplifier rewrites a <= b as !(b < a), which is true for a NaN operand:
          // ordered comparisons are spelt as < and == (false for NaN).
          case arith::CmpFPredicate::OLE:
            return x < y || x == y;
          case arith::CmpFPredicate::OGT:
            return x > y;
          case arith::CmpFPredicate::OGE:
            return x > y || x == y;
          default:
            unsupported(op, "float comparison predicate");
          }
        })
        .Case<math::ExpOp>([&](auto) {
          // Halide's exp is wrong past float's range (exp(1e30) and exp(inf) give 0, exp(nan) 0):
          // overflow gives inf and NaN stays NaN, as IEEE and the reference interpreter say.
          // (Softmax's exp, of score - max <= 0, is generated without this guard.)
          return ieeeExp(a(0));
        })
        .Case<math::LogOp>([&](auto) { return ieeeLog(a(0)); })
        .Case<math::SqrtOp>([&](auto) { return H::sqrt(a(0)); })
        .Case<math::RsqrtOp>([&](auto) { return fdiv(1.0f, H::sqrt(a(0))); })
        .Case<math::SinOp>([&](auto) { return H::sin(a(0)); })
        .Case<math::CosOp>([&](auto) { return H::cos(a(0)); })
        .Case<math::TanhOp>([&](auto) { return H::tanh(a(0)); })
        .Case<math::ErfOp>([&](auto) { return ieeeErf(a(0)); })
        .Case<math::AbsFOp, math::AbsIOp>([&](auto) { return H::abs(a(0)); })
        .Case<math::FloorOp>([&](auto) { return H::floor(a(0)); })
        .Case<math::PowFOp>([&](auto) { return ieeePow(a(0), a(1)); })
        .Default([&](Operation *) -> H::Expr { unsupported(op, "no Halide lowering for"); });
  }
};

} // namespace

LoweredKernel lowerToHalide(attn::KernelOp kernel) { return Lowerer().run(kernel); }

namespace {
// Calls to Tuple-valued Funcs print with their element, `f(x)[1]` (Halide's printer drops it).
class ShowTupleElements : public H::Internal::IRMutator {
  using IRMutator::visit;
  H::Expr visit(const H::Internal::Call *op) override {
    H::Expr e = IRMutator::visit(op);
    const auto *c = e.as<H::Internal::Call>();
    if (!c || c->call_type != H::Internal::Call::Halide || !c->func.defined() ||
        H::Internal::Function(c->func).outputs() < 2)
      return e;
    std::ostringstream s;
    s << c->name << "(";
    for (size_t i = 0; i < c->args.size(); ++i)
      s << (i ? ", " : "") << c->args[i];
    s << ")[" << c->value_index << "]";
    return H::Internal::Variable::make(c->type, s.str());
  }
};
H::Expr shown(const H::Expr &e) { return e.defined() ? ShowTupleElements().mutate(e) : e; }
} // namespace

std::string printAlgorithm(const LoweredKernel &k) {
  std::ostringstream os;
  os << "pipeline " << k.name << "\n";
  for (const auto &p : k.inputs) {
    os << "  input " << p.name << ": " << p.type.str() << "\n";
  }
  for (const auto &f : k.funcs) {
    H::Func fn = f.func;
    os << "func " << f.name << " [" << funcRoleName(f.role);
    if (!f.reduceKind.empty())
      os << " " << f.reduceKind;
    if (f.isOutput)
      os << ", output";
    os << "]\n";
    std::vector<H::Var> args = fn.args();
    auto lhs = [&](const std::vector<H::Expr> &a) {
      std::ostringstream s;
      s << f.name << "(";
      for (size_t i = 0; i < a.size(); ++i)
        s << (i ? ", " : "") << a[i];
      s << ")";
      return s.str();
    };
    auto rhs = [](const H::Tuple &t) {
      std::ostringstream s;
      if (t.size() == 1)
        s << shown(t[0]);
      else
        for (size_t i = 0; i < t.size(); ++i)
          s << (i ? ", " : "(") << shown(t[i]) << (i + 1 == t.size() ? ")" : "");
      return s.str();
    };
    os << "  " << lhs(std::vector<H::Expr>(args.begin(), args.end())) << " = " << rhs(fn.values())
       << "\n";
    for (int u = 0; u < fn.num_update_definitions(); ++u) {
      os << "  " << lhs(fn.update_args(u)) << " = " << rhs(fn.update_values(u));
      // The RVars kept at lowering carry their domain; Func::rvars() returns bare names. An
      // online state keeps one per update (its chains).
      std::vector<H::RVar> rvs = f.role == FuncRole::OnlineState && u < (int)f.rvars.size()
                                     ? std::vector<H::RVar>{f.rvars[u]}
                                 : u == 0 ? f.rvars
                                          : fn.rvars(u);
      if (!rvs.empty()) {
        os << "  where ";
        for (size_t i = 0; i < rvs.size(); ++i)
          os << (i ? ", " : "") << rvs[i].name() << " in [" << rvs[i].min() << ", " << rvs[i].min()
             << " + " << rvs[i].extent() << ")";
        // Bounds from a softmax mask (attn.bounds) restrict the domain further.
        H::Internal::ReductionDomain dom = rvs[0].domain();
        H::Expr pred = dom.defined() ? dom.predicate() : H::Expr();
        if (pred.defined() && !H::Internal::is_const_one(pred))
          os << " if " << shown(pred);
      }
      os << "\n";
    }
  }
  return os.str();
}

} // namespace attnc
