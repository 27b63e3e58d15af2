// HalideGen: walks an attn.kernel and builds one Halide Func per definition (plus named parts).
#include "attnc/HalideGen.h"
#include "Lowerer.h"

#include <algorithm>
#include <set>
#include <sstream>

namespace attnc {

Halide::Type halideType(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return H::Float(32);
  case DType::I32:
    return H::Int(32);
  case DType::BF16:
    return H::BFloat(16);
  case DType::F16:
    return H::Float(16);
  }
  throw std::runtime_error("HalideGen: an element type without a Halide type");
}

Halide::Expr widenStorage(Halide::Expr v) {
  if (v.type().is_bfloat())
    return H::reinterpret<float>(H::cast<uint32_t>(H::reinterpret<uint16_t>(v)) << 16);
  return H::cast<float>(v);
}

const Halide::Internal::Call *widenedBF16Read(const Halide::Expr &e) {
  namespace I = Halide::Internal;
  H::Expr x;
  if (const auto *c = e.as<I::Cast>(); c && c->type == H::Float(32))
    x = c->value;
  else if (const auto *r = e.as<I::Reinterpret>(); r && r->type == H::Float(32))
    if (const auto *sh = I::Call::as_intrinsic(r->value, {I::Call::shift_left}))
      if (const auto *u = sh->args[0].as<I::Cast>(); u && u->type == H::UInt(32))
        if (const auto *r2 = u->value.as<I::Reinterpret>())
          x = r2->value;
  return x.defined() && x.type().is_bfloat() ? x.as<I::Call>() : nullptr;
}

Halide::Expr narrowStorage(Halide::Expr f, DType to) {
  if (to != DType::BF16)
    return H::cast(halideType(to), f);
  H::Expr u = H::reinterpret<uint32_t>(f);
  H::Expr rounded = (u + (0x7fff + ((u >> 16) & 1))) >> 16; // ties to even; may carry to inf
  H::Expr nan = (u & 0x7fffffff) > 0x7f800000;              // kept quiet, with its sign
  H::Expr bits = H::select(nan, (u >> 16) | 0x40, rounded);
  return H::reinterpret(H::BFloat(16), H::cast<uint16_t>(bits));
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

const OnlineChain &OnlineGroup::masked() const {
  for (const OnlineChain &c : chains)
    if (!c.full)
      return c;
  throw std::logic_error("HalideGen: online softmax '" + name + "' without a masked chain");
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
  for (size_t i = 0; i < outputNames.size(); ++i)
    out.push_back(i < stores.size() && stores[i].defined() ? stores[i]
                                                           : find(outputNames[i])->func);
  return out;
}

H::OutputImageParam LoweredKernel::outputBuffer(const LoweredFunc &f) const {
  for (size_t i = 0; i < outputNames.size() && i < stores.size(); ++i)
    if (outputNames[i] == f.name && stores[i].defined())
      return stores[i].output_buffer();
  return f.func.output_buffer();
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
  // The key-ranged tile loops: `<state>.s<update>.<tile RVar>`, as Halide names a loop.
  std::vector<std::string> ranged;
  for (const OnlineGroup &g : onlineGroups)
    if (g.keyRanged) {
      const LoweredFunc &s = funcs[g.state];
      for (size_t u = 0; u < s.rvars.size(); ++u)
        ranged.push_back(s.func.name() + ".s" + std::to_string(u + 1) + "." + s.rvars[u].name());
    }
  if (!ranged.empty())
    boundKeyRangeLoops(p, ranged);
  return p;
}

std::vector<H::Argument> LoweredKernel::arguments() const {
  std::vector<H::Argument> args;
  for (const auto &p : inputs)
    args.push_back(p.param);
  return args;
}

namespace lowering {

LoweredKernel Lowerer::run(attn::KernelOp kernel) {
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
    if (isa<attn::DefineOp, attn::SoftmaxOp, attn::OnlineSoftmaxOp>(op))
      if (std::optional<std::string> at = sourcePosition(op.getLoc()))
        out_.definitionLocs.emplace(definitionOf(&op), *at);
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
        // A bf16/f16 output: the definition computes in f32, and a Func of the storage type
        // rounds it (to nearest even) into the output buffer. Rules schedule the definition as
        // they would an f32 output; scheduleStores then computes it at root and schedules the
        // conversion (an autoscheduler schedules both itself).
        H::Func store;
        if (DType st = out_.outputTypes.back().dtype; st == DType::BF16 || st == DType::F16) {
          store = H::Func(f->name + "__" + dtype_name(st));
          std::vector<H::Var> vars = f->func.args();
          store(vars) = narrowStorage(f->func(vars), st);
        }
        out_.stores.push_back(store);
        // The runtime checks every output's shape against the sizes bound from the inputs;
        // saying so lets Halide compare an output's extent with the inputs' (a causal
        // tile's keys j <= i then end inside k without a clamp to k's extent).
        H::OutputImageParam ob = store.defined() ? store.output_buffer() : f->func.output_buffer();
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
  computeReads(out_);
  return std::move(out_);
}

// The names (LoweredFunc::name, KernelParam::name) of what each Func's definitions call: its pure
// definition, then its updates in order, each's values, then arguments, then domain predicate (an
// online state's key ranges). Each name once, where it is first called; a call's arguments come
// before the call, so a gather `q(m(i))` reads m, then q. A Func's calls to itself do not count.
// Inputs are called through the wrapper Func Halide makes for each ImageParam (its name
// uniquified when a process lowers a kernel twice), and as Call::Image by their own name.
void Lowerer::computeReads(LoweredKernel &k) {
  std::map<std::string, std::string> nameOf;
  for (const KernelParam &p : k.inputs) {
    nameOf[p.param.name()] = p.name;
    nameOf[H::Func(p.param).name()] = p.name;
  }
  for (const LoweredFunc &f : k.funcs)
    nameOf[f.func.name()] = f.name;
  struct Calls : H::Internal::IRVisitor {
    const std::map<std::string, std::string> &nameOf;
    const std::string self;
    std::vector<std::string> found;
    Calls(const std::map<std::string, std::string> &n, std::string s)
        : nameOf(n), self(std::move(s)) {}
    using H::Internal::IRVisitor::visit;
    void visit(const H::Internal::Call *op) override {
      H::Internal::IRVisitor::visit(op);
      if (op->call_type != H::Internal::Call::Halide && op->call_type != H::Internal::Call::Image)
        return;
      auto it = nameOf.find(op->name);
      if (it == nameOf.end() || it->second == self)
        return;
      if (std::find(found.begin(), found.end(), it->second) == found.end())
        found.push_back(it->second);
    }
  };
  for (LoweredFunc &f : k.funcs) {
    Calls c(nameOf, f.name);
    H::Internal::Function fn = f.func.function();
    std::vector<H::Internal::Definition> defs{fn.definition()};
    defs.insert(defs.end(), fn.updates().begin(), fn.updates().end());
    for (const H::Internal::Definition &d : defs) {
      for (const H::Expr &v : d.values())
        v.accept(&c);
      for (const H::Expr &a : d.args())
        a.accept(&c);
      if (d.predicate().defined())
        d.predicate().accept(&c);
    }
    f.reads = std::move(c.found);
  }
}

// Whether a requirement's condition reads tensor values (not only sizes and constants).
bool Lowerer::conditionReadsData(Value cond) {
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
void Lowerer::lowerDataRequirement(attn::RequireOp req) {
  LoweredFunc lf;
  lf.name = lf.definition = "require__" + std::to_string(dataChecks_.size());
  lf.role = FuncRole::Check;
  lf.func = H::Func(lf.name);
  Env env;
  IndexScope scope(indexExtents_, false);
  H::Expr cond = eval(req.getCondition(), env);
  // The marker lets the runtime cut Halide's "Requirement Failed: (cond) 0" prefix.
  lf.func() = H::require(cond, H::Expr(0), "[attnc] " + req.getMessage().str());
  dataChecks_.push_back(lf.func);
  addFunc(std::move(lf));
}

void Lowerer::bindIndices(ArrayRef<H::Var> vars, ValueRange extents, Env &env) {
  // (Inside the definition's IndexScope: a name may stand for another extent elsewhere.)
  for (auto [var, ext] : llvm::zip(vars, extents))
    indexExtents_[var.name()] = H::cast<int32_t>(eval(ext, env));
}

bool Lowerer::addHostGatherCheck(const H::Expr &ok, const H::Expr &i, const std::string &tensor,
                                 int dim, const H::Expr &extent) {
  // The indices `ok` uses (not sizes, which are parameters, nor names bound by its lets).
  std::set<std::string> used = freeVars(ok, false);
  used.merge(freeVars(i, false));
  std::vector<std::pair<std::string, H::Expr>> dom; // name, extent; the first varies fastest
  for (const std::string &n : used) {
    auto it = indexExtents_.find(n);
    if (it == indexExtents_.end())
      return false;
    dom.emplace_back(n, it->second);
  }
  const std::string name = "gather__" + std::to_string(gatherChecks_++);
  std::vector<H::Internal::ReductionVariable> rvs;
  for (const auto &[n, ext] : dom)
    rvs.push_back({name + "$" + n, H::Expr(0), ext});
  H::RDom r{H::Internal::ReductionDomain(rvs)};
  // The first point (as a number in 64 bits, the first index fastest) where the read counts and
  // is out of range; INT64_MAX if none.
  std::map<std::string, H::Expr> atR;
  H::Expr point = H::cast<int64_t>(0), stride = H::cast<int64_t>(1);
  for (size_t k = 0; k < dom.size(); ++k) {
    atR[dom[k].first] = r[(int)k];
    point = point + H::cast<int64_t>(r[(int)k]) * stride;
    stride = stride * H::cast<int64_t>(dom[k].second);
  }
  const H::Expr none = H::Int(64).max();
  LoweredFunc first;
  first.name = first.definition = name;
  first.role = FuncRole::Check;
  first.func = H::Func(name);
  first.func() = none;
  first.func() = H::min(first.func(), H::select(H::Internal::substitute(atR, ok), none, point));
  // The message is the one a CPU kernel's check at the read gives (the runtime names the DSL's
  // tensor and dimension from it), with the index at that point.
  std::map<std::string, H::Expr> atFirst;
  stride = H::cast<int64_t>(1);
  for (const auto &[n, ext] : dom) {
    atFirst[n] = H::cast<int32_t>((first.func() / stride) % H::cast<int64_t>(H::max(ext, 1)));
    stride = stride * H::cast<int64_t>(ext);
  }
  LoweredFunc check;
  check.name = check.definition = name + "__check";
  check.role = FuncRole::Check;
  check.func = H::Func(check.name);
  check.func() =
      H::require(first.func() == none, H::Expr(0), "input", tensor, "is read at",
                 H::Internal::substitute(atFirst, i), "in dimension", dim, "of extent", extent);
  dataChecks_.push_back(check.func);
  addFunc(std::move(first));
  addFunc(std::move(check));
  return true;
}

// `value` plus every data check (each 0 once passed), for the first definition of an output.
H::Expr Lowerer::guarded(Value result, H::Expr value) {
  if (!returned_.contains(result) || dataChecks_.empty())
    return value;
  H::Expr sum = dataChecks_[0]();
  for (size_t i = 1; i < dataChecks_.size(); ++i)
    sum = sum + dataChecks_[i]();
  return value + H::cast(value.type(), sum);
}

LoweredFunc &Lowerer::addFunc(LoweredFunc f) {
  out_.funcs.push_back(std::move(f));
  return out_.funcs.back();
}

std::vector<H::Var> Lowerer::makeVars(ArrayAttr names) {
  std::vector<H::Var> vars;
  for (Attribute a : names)
    vars.emplace_back(cast<StringAttr>(a).getValue().str());
  return vars;
}

std::vector<std::string> Lowerer::strings(ArrayAttr names) {
  std::vector<std::string> s;
  for (Attribute a : names)
    s.push_back(cast<StringAttr>(a).getValue().str());
  return s;
}

Operation *Lowerer::enclosingDefinition(Operation *op) {
  for (Operation *p = op->getParentOp(); p; p = p->getParentOp())
    if (isa<attn::DefineOp, attn::SoftmaxOp, attn::OnlineSoftmaxOp>(p))
      return p;
  return nullptr;
}

// --- definitions ---------------------------------------------------------------------------
void Lowerer::lowerDefine(attn::DefineOp op) {
  IndexScope scope(indexExtents_, false);
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
  // A definition read only by online softmaxes (the score extracted from a masked softmax) is
  // computed where their masks show keys, which a check over its whole domain would not know:
  // its gathers are not checked on the host.
  Value res = op.getResult();
  if (res.use_empty() || !llvm::all_of(res.getUsers(), [](Operation *u) {
        return isa<attn::OnlineSoftmaxOp>(u) || u->getParentOfType<attn::OnlineSoftmaxOp>();
      }))
    bindIndices(lf.vars, op.getExtents(), env);
  for (Value ext : op.getExtents())
    lf.extents.push_back(H::Internal::simplify(H::cast<int32_t>(eval(ext, env))));
  lf.gather = op->hasAttr("attn.gather");
  Value y = cast<attn::YieldOp>(body.getTerminator()).getValues()[0];
  std::vector<H::Expr> args = reversed(toExprs(lf.vars));
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
        castTo(elem, eval(cast<attn::YieldOp>(red.getBody().front().getTerminator()).getValues()[0],
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
  funcNames_[op.getResult()] = name;
  addFunc(std::move(lf));
}

// Block arguments of enclosing index regions that `root`'s region depends on, outermost first.
// Only indices of regions that enclose `root` count: reads of other definitions are calls to
// their Funcs, and a sibling reduction's own indices are bound inside it.
void Lowerer::collectCaptured(Operation *root, llvm::SetVector<BlockArgument> &captured) {
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
  // The innermost index the DSL declares (the enclosing definition's last, or a deeper scope's)
  // goes last, whatever order the body uses the indices in: the helper Func's last dimension is
  // innermost in memory and the one schedules vectorise. Used first in a body, dat_attn's
  // dw(b, g, ki, kj, c) = sum(u, t) w_dw(c, u, t) * q.zero(b, ...) got a helper over
  // (c, ki, kj, g, b) with the batch innermost: GEMM blocks of 32 lanes of a batch of 1, 40% of
  // the kernel's time (DAT-T stage 3, Zen 5: the kernel 21.0 -> 12.2 ms with c last). The other
  // indices keep their order: sorting them all as declared made msda's qkv(s, b, i, j, g, c)
  // projection's blocks heap allocations and the kernel 1.22x slower.
  auto declaredBefore = [](BlockArgument a, BlockArgument b) {
    Operation *oa = a.getOwner()->getParentOp(), *ob = b.getOwner()->getParentOp();
    if (oa != ob)
      return oa->isProperAncestor(ob);
    return a.getArgNumber() < b.getArgNumber();
  };
  if (captured.size() > 1) {
    std::vector<BlockArgument> order(captured.begin(), captured.end());
    auto last = std::max_element(order.begin(), order.end(), declaredBefore);
    std::rotate(last, last + 1, order.end());
    captured.clear();
    captured.insert(order.begin(), order.end());
  }
}

std::string Lowerer::indexName(BlockArgument ba) {
  Operation *owner = ba.getOwner()->getParentOp();
  ArrayAttr names = owner->getAttrOfType<ArrayAttr>("indices");
  if (names && ba.getArgNumber() < names.size())
    return cast<StringAttr>(names[ba.getArgNumber()]).getValue().str();
  return "v" + std::to_string(ba.getArgNumber());
}

// "file:line:col" of a source location (the first file position of a fused one).
std::optional<std::string> Lowerer::sourcePosition(Location loc) {
  if (auto f = dyn_cast<FileLineColLoc>(loc))
    return f.getFilename().str() + ":" + std::to_string(f.getLine()) + ":" +
           std::to_string(f.getColumn());
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location l : fused.getLocations())
      if (std::optional<std::string> s = sourcePosition(l))
        return s;
  if (auto named = dyn_cast<NameLoc>(loc))
    return sourcePosition(named.getChildLoc());
  return std::nullopt;
}

std::string Lowerer::definitionOf(Operation *op) {
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

} // namespace lowering

using lowering::Lowerer;

LoweredKernel lowerToHalide(attn::KernelOp kernel, bool hostGatherChecks) {
  return Lowerer(hostGatherChecks).run(kernel);
}

} // namespace attnc
