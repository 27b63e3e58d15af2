// Generic CPU schedule: any kernel; every non-trivial Func computed at root, parallel and vectorized.
#include "attnc/Schedule.h"

#include <algorithm>
#include <set>

namespace attnc {
namespace {

namespace H = Halide;

// The calls (to Funcs and inputs) in an expression, with their arguments.
class CallsIn : public H::Internal::IRVisitor {
public:
  std::vector<const H::Internal::Call *> calls;

private:
  using H::Internal::IRVisitor::visit;
  void visit(const H::Internal::Call *c) override {
    if (c->call_type == H::Internal::Call::Halide || c->call_type == H::Internal::Call::Image)
      calls.push_back(c);
    H::Internal::IRVisitor::visit(c);
  }
};

bool usesVar(const H::Expr &e, const std::string &v) { return H::Internal::expr_uses_var(e, v); }

// Rows of a contraction's register block: with 32 vector registers (AVX-512) 8 rows x 2 vectors
// of accumulators fit beside the operands; with 16, 4 rows.
int defaultGemmRows(const Target &t) { return t.floatLanes >= 16 ? 8 : 4; }

// A weight read at the vectorised index `v` (argument `a` of `c`, a plain index) by a
// contraction whose row blocks stay outside its output blocks (no index between them: ViT-B's
// output projection y(b, i, o) = sum(h, d) a(b, i, h, d) * w_o(o, h, d)) gets a copy packed in
// panels of `width` outputs, [o / width][reduction indices][o % width], and the sum reads it
// there. Each block of outputs then walks one contiguous panel through the reduction; with the
// outputs of all blocks innermost (a transposed copy) each step jumped a whole row of the copy
// (3 KB at ViT-B), every step a new page: perf on the Xeon with AMX (family 6 model 167) put
// 39% of the projection's samples on its weight loads, and the projection took 2.6x the time of
// the q projection of the same size (whose per-head rows are already panels). Returns false
// where it does not apply (the caller then makes the transposed copy). The panel is the same
// values in another order: results do not change.
bool packedCopy(LoweredFunc &f, KernelParam &p, const H::Internal::Call *c, size_t a, int width,
                const Target &t) {
  const auto *var = c->args[a].as<H::Internal::Variable>();
  if (!var || var->name != f.vars.back().name() || c->args.size() < 2)
    return false;
  for (size_t i = 0; i < c->args.size(); ++i)
    if (i != a && usesVar(c->args[i], var->name))
      return false;
  const std::string name = f.name + "__" + p.param.name() + "_panels";
  H::Var oi(name + "_oi"), ob(name + "_ob");
  std::vector<H::Var> rest;
  for (size_t i = 0; i < c->args.size(); ++i)
    if (i != a)
      rest.push_back(H::Var(name + "_" + std::to_string(i)));
  // (Outputs past the last, in the last panel, read the last one: never used.)
  H::Expr lo = p.param.dim((int)a).min(), hi = lo + p.param.dim((int)a).extent() - 1;
  std::vector<H::Expr> src;
  for (size_t i = 0, r = 0; i < c->args.size(); ++i)
    src.push_back(i == a ? H::clamp(ob * width + oi, lo, hi) : H::Expr(rest[r++]));
  std::vector<H::Var> args{oi};
  args.insert(args.end(), rest.begin(), rest.end());
  args.push_back(ob);
  H::Func panels(name);
  panels(args) = p.param(src);
  // The sum reads the panels instead of the weight.
  struct Repoint : H::Internal::IRMutator {
    std::string param, v;
    size_t a = 0;
    int width = 0;
    H::Func panels;
    using H::Internal::IRMutator::visit;
    H::Expr visit(const H::Internal::Call *call) override {
      if (call->name != param || call->args.size() <= a)
        return H::Internal::IRMutator::visit(call);
      const auto *x = call->args[a].as<H::Internal::Variable>();
      if (!x || x->name != v)
        return H::Internal::IRMutator::visit(call);
      std::vector<H::Expr> at{call->args[a] % width};
      for (size_t i = 0; i < call->args.size(); ++i)
        if (i != a)
          at.push_back(mutate(call->args[i]));
      at.push_back(call->args[a] / width);
      return panels(at);
    }
  } repoint;
  repoint.param = c->name, repoint.v = var->name, repoint.a = a, repoint.width = width;
  repoint.panels = panels;
  std::vector<H::Expr> &values = f.func.function().update(0).values();
  for (H::Expr &e : values)
    e = repoint.mutate(e);
  // Copied in square tiles of the panel's outputs and the weight's innermost index, vectorised
  // along the outputs and unrolled along that index (as the transposed copy below), panels in
  // parallel.
  const int tv = t.floatLanes;
  const H::Var inner = args[1]; // the weight's argument 0 (a > 0)
  H::Var xo(name + "_xo"), yo(name + "_yo"), xi(name + "_xi"), yi(name + "_yi");
  std::vector<H::VarOrRVar> order{xi, yi, xo, yo};
  for (size_t i = 2; i < args.size(); ++i)
    order.push_back(args[i]);
  panels.compute_root()
      .tile(oi, inner, xo, yo, xi, yi, tv, tv, H::TailStrategy::GuardWithIf)
      .reorder(order)
      .vectorize(xi)
      .unroll(yi)
      .parallel(ob);
  return true;
}

// A sum whose body multiplies reads (a projection, a 1x1 convolution, a linear layer) as a
// register-blocked GEMM: `rows` values of an index that the vectorised operand does not use (a
// pixel, a token) times one vector of the innermost index, accumulated over the whole reduction
// in registers. An input read with a reduction index innermost and the vectorised index further
// out (a weight stored [out][in]) gets a transposed copy, so its vector loads are contiguous.
// Returns false (nothing scheduled) when the sum has no such shape. Measured on msda's qkv and
// output projections (B1 56x56 C72, 2-core Zen 4): the plain generic nest gathered the weights
// along the output channels.
bool scheduleContraction(LoweredFunc &f, const Target &t, const ScheduleParams &params,
                         LoweredKernel *k) {
  if (f.role != FuncRole::Reduction || f.reduceKind != "sum" || f.maskBounded ||
      f.func.num_update_definitions() != 1 || f.vars.size() < 2 || f.rvars.empty())
    return false;
  const H::Expr value = f.func.update_value(0);
  CallsIn ci;
  value.accept(&ci);
  const std::string v = f.vars.back().name();
  // The blocked index: the innermost other index that no read using the vectorised one uses.
  int u = -1;
  for (int i = (int)f.vars.size() - 2; i >= 0 && u < 0; --i) {
    bool free = true, used = false;
    for (const H::Internal::Call *c : ci.calls) {
      if (c->name == f.func.name())
        continue;
      bool withV = false, withU = false;
      for (const H::Expr &a : c->args)
        withV |= usesVar(a, v), withU |= usesVar(a, f.vars[i].name());
      if (withV && withU)
        free = false;
      used |= withU;
    }
    if (free && used)
      u = i;
  }
  if (u < 0)
    return false;
  const int vec = t.floatLanes * params.get("generic.vector_mult", 1);
  const int rows = params.get("generic.gemm_rows", defaultGemmRows(t));
  const int vecs = params.get("generic.gemm_vectors", 2);
  bool packed = false; // a weight read from panels (packedCopy)
  if (k) {
    for (const H::Internal::Call *c : ci.calls) {
      if (c->args.size() < 2)
        continue;
      bool rInner = false;
      for (const H::RVar &r : f.rvars)
        rInner |= usesVar(c->args[0], r.name());
      if (!rInner || usesVar(c->args[0], v))
        continue;
      for (KernelParam &p : k->inputs) {
        if (c->name != p.param.name() && c->name != H::Func(p.param).name())
          continue;
        for (size_t a = 1; a < c->args.size(); ++a) {
          if (!usesVar(c->args[a], v))
            continue;
          if (u == (int)f.vars.size() - 2 && !f.isOutput && packedCopy(f, p, c, a, vec * vecs, t)) {
            packed = true;
            break;
          }
          H::Func wt = p.param.in(f.func);
          std::vector<H::Var> st = wt.args();
          std::swap(st[0], st[a]);
          // Copied in square tiles, vectorised along the copy's rows and unrolled along its
          // columns, so that Halide reads the source as dense vectors and transposes them in
          // registers; element by element the strided reads were gathers (ViT-B's output
          // projection weight: 2.3 ms per call on a Zen 5 core, as long as the projection).
          const int tv = t.floatLanes;
          H::Var xo(wt.name() + "_xo"), yo(wt.name() + "_yo"), xi(wt.name() + "_xi"),
              yi(wt.name() + "_yi");
          // The tile spans the copy's innermost index and the source's (now at position a).
          std::vector<H::VarOrRVar> order{xi, yi, xo, yo};
          for (size_t j = 1; j < st.size(); ++j)
            if (j != a)
              order.push_back(st[j]);
          wt.compute_root()
              .reorder_storage(st)
              .tile(st[0], st[a], xo, yo, xi, yi, tv, tv, H::TailStrategy::GuardWithIf)
              .reorder(order)
              .vectorize(xi)
              .unroll(yi);
          // In parallel over the outermost two loops fused: the outermost alone can be an index
          // the sum reads at one value (q's slice w_qkv(0, h, d, c) of a stacked q/k/v weight),
          // which ran the copy on one thread (ViT-B mhsa, perf on the Xeon with AMX: the q, k
          // and v copies, 7.6% of the samples, all on the calling thread).
          if (order.size() >= 6) {
            H::Var fused(wt.name() + "_par");
            wt.fuse(order[order.size() - 2], order.back(), fused).parallel(fused);
          } else {
            wt.parallel(H::VarOrRVar(order.back()));
          }
          break;
        }
      }
    }
  }
  const H::Var vv = f.vars.back(), uv = f.vars[u];
  H::Var vo(f.name + "_vo"), vi(f.name + "_vi"), uo(f.name + "_uo"), ui(f.name + "_ui");
  // The loops over blocks, innermost first: vo, the indices between v and u, uo, then the rest.
  auto blockLoops = [&](bool withBlocks) {
    std::vector<H::VarOrRVar> outer;
    for (int i = (int)f.vars.size() - 2; i >= 0; --i)
      outer.push_back(i == u ? H::VarOrRVar(uo) : H::VarOrRVar(f.vars[i]));
    if (withBlocks)
      outer.insert(outer.begin(), vo);
    return outer;
  };
  auto parallelOuter = [&](H::Stage st, const std::vector<H::VarOrRVar> &outer,
                           const std::string &tag) {
    if (outer.size() >= 3) {
      H::Var par(f.name + tag);
      st.fuse(outer[outer.size() - 2], outer.back(), par).parallel(par);
    } else {
      st.parallel(outer.back());
    }
  };
  if (!f.isOutput) {
    // The sum is computed one block (rows x one vector) at a time into a buffer of constant size
    // that LLVM keeps in registers; a wrapper holds the result for the consumers. Accumulating
    // in the root buffer instead loaded and stored every accumulator per step (3.9 GFLOP/s on
    // msda's qkv projection, single thread).
    // A block is rows x vecs vectors: rows x vecs independent FMA chains, each weight vector
    // loaded once for the rows and each input value broadcast once for the vectors. One vector
    // per block (4 chains) left the FMA units idle behind their latency: ViT-B's projections ran
    // at 29 GFLOP/s on a Zen 5 core (10% of its peak).
    H::Func res = f.func.in();
    res.compute_root();
    std::vector<H::VarOrRVar> order{vi, ui};
    std::vector<H::VarOrRVar> outer = blockLoops(true);
    // With indices between the vectorised one and the blocked one (a head: q(b, h, i, d) from
    // w(h, d, c)), the row blocks go innermost: each (head, block of outputs) then reads its
    // weights (32 outputs x C) once from memory and from the L2 cache for every further row
    // block, where a row block that swept every head read them all again (ViT-B's q, k and v
    // projections: 2.4 MB per block of 8 tokens, beyond a core's L2). Xeon (family 6 model
    // 167), ViT-B mhsa harness (calls in turns): each of q, k, v 1.75x faster (perf share 7.9%
    // -> 4.5%). Without such indices (ViT-B's output projection, y(b, i, o)) the output blocks
    // would join the parallel loop, whose tail guard then kept the accumulators in memory
    // (1.4x slower): their order stays, as it does where the parallel loop (the outermost two
    // loops fused) would take in the output blocks.
    const bool rowsInnermost = u != (int)f.vars.size() - 2 && outer.size() >= 4;
    H::Var at = vo;
    if (rowsInnermost) {
      outer.erase(std::find_if(outer.begin(), outer.end(),
                               [&](const H::VarOrRVar &x) { return x.name() == uo.name(); }));
      outer.insert(outer.begin(), uo);
      at = uo;
    }
    order.insert(order.end(), outer.begin(), outer.end());
    // With panels, blocks start at multiples of the panel width, so that a block's outputs are
    // one panel's (o % width and o / width simplify; from an unaligned start, as dat_attn's
    // per-group slices of q, every read was a gather: 1.3x slower).
    if (packed)
      res.align_bounds(vv, vec * vecs);
    res.split(vv, vo, vi, vec * vecs, H::TailStrategy::GuardWithIf)
        .split(uv, uo, ui, rows, H::TailStrategy::GuardWithIf)
        .reorder(order)
        .vectorize(vi, vec, H::TailStrategy::GuardWithIf)
        .unroll(ui);
    parallelOuter(H::Stage(res), outer, "_par");
    // Storage of constant size (the last block may be narrower): a stack array, not the heap.
    // (The rows' outer loop, one trip per block, goes outside the reduction: inside it, LLVM
    // could not keep the accumulators in registers across the reduction's steps.)
    H::Var bo(f.name + "_bo"), bi(f.name + "_bi"), ro(f.name + "_ro"), ri(f.name + "_ri");
    f.func.compute_at(res, at)
        .bound_storage(vv, vec * vecs)
        .bound_storage(uv, rows)
        .vectorize(vv, vec, H::TailStrategy::GuardWithIf)
        .unroll(uv, rows, H::TailStrategy::GuardWithIf);
    std::vector<H::VarOrRVar> uorder{bi, bo, ri};
    for (const H::RVar &r : f.rvars)
      uorder.push_back(r);
    uorder.push_back(ro);
    for (int i = (int)f.vars.size() - 2; i >= 0; --i)
      if (i != u)
        uorder.push_back(f.vars[i]);
    f.func.update()
        .split(vv, bo, bi, vec, H::TailStrategy::GuardWithIf)
        .split(uv, ro, ri, rows, H::TailStrategy::GuardWithIf)
        .reorder(uorder)
        .vectorize(bi)
        .unroll(bo)
        .unroll(ri);
    return true;
  }
  // An output: blocked in place (its buffer is the caller's).
  H::Stage init(f.func);
  init.vectorize(vv, vec, H::TailStrategy::GuardWithIf);
  H::Stage up = f.func.update();
  up.split(vv, vo, vi, vec, H::TailStrategy::GuardWithIf)
      .split(uv, uo, ui, rows, H::TailStrategy::GuardWithIf);
  std::vector<H::VarOrRVar> order{vi, ui};
  for (const H::RVar &r : f.rvars)
    order.push_back(r);
  std::vector<H::VarOrRVar> outer = blockLoops(true);
  order.insert(order.end(), outer.begin(), outer.end());
  up.reorder(order).vectorize(vi).unroll(ui);
  parallelOuter(up, outer, "_par");
  if (f.vars.size() == 2)
    init.parallel(f.vars.front());
  else {
    H::Var par(f.name + "_ipar");
    init.fuse(f.vars[1], f.vars[0], par).parallel(par);
  }
  return true;
}

void scheduleStored(LoweredFunc &f, const Target &t, const ScheduleParams &params,
                    LoweredKernel *k);

// Finds a float call to a math library function (exp, log, ...), as --emit=cost counts
// transcendental calls, or a float division by a varying divisor: tanh is a rational function
// (IeeeMath.cpp), whose one division and 14 multiply-adds cost about an exp (a soft-capped
// score inlined into its tile's max and exps computed it twice: 1.48x sdpa's time per visited
// tile against 1.32x stored, attn-bench, AMD EPYC Zen 4, 2026-11-29). Only those that use one
// of `vars`: a scale such as 1 / sqrt(D) is the same at every point, and storing a score for it
// would only cost memory.
class HasTranscendental : public H::Internal::IRVisitor {
public:
  explicit HasTranscendental(const std::vector<H::Var> &vars) : vars_(vars) {}
  bool found = false;

private:
  using H::Internal::IRVisitor::visit;
  bool varying(const H::Expr &e) const {
    for (const H::Var &v : vars_)
      if (usesVar(e, v.name()))
        return true;
    for (const std::string &l : varyingLets_)
      if (usesVar(e, l))
        return true;
    return false;
  }
  void visit(const H::Internal::Let *l) override {
    l->value.accept(this);
    if (varying(l->value))
      varyingLets_.push_back(l->name);
    l->body.accept(this);
  }
  void visit(const H::Internal::Call *c) override {
    if ((c->call_type == H::Internal::Call::PureExtern ||
         c->call_type == H::Internal::Call::Extern) &&
        c->type.is_float())
      for (const H::Expr &a : c->args)
        found |= varying(a);
    H::Internal::IRVisitor::visit(c);
  }
  void visit(const H::Internal::Div *d) override {
    found |= d->type.is_float() && varying(d->b);
    H::Internal::IRVisitor::visit(d);
  }
  const std::vector<H::Var> &vars_;
  std::vector<std::string> varyingLets_; // let names bound to values that use vars_
};

} // namespace

bool callsTranscendental(const LoweredFunc &f) {
  HasTranscendental ht(f.vars);
  const H::Tuple own = f.func.values(); // held: as_vector() refers into it
  for (const H::Expr &v : own.as_vector())
    v.accept(&ht);
  return ht.found;
}

namespace {

// A pointwise definition that calls a transcendental and that some Func reads inside a loop over
// an index of its own which the read does not use (a feature map phi(q)(i, d) read by
// sum(d) phi(q)(i, d) * kv(d, e), once per e): inlined, the transcendental runs once per read
// instead of once per point. Linear attention's elu + 1 ran E = 64 times per element
// (--emit=cost at B1 H8 N2048 D64: 3.0e7 transcendental calls against the algorithm's 6.3e6).
// Storing it costs one write and one read per point, less than one exp.
bool reusedCostly(const LoweredFunc &f, const LoweredKernel &k) {
  if (f.role != FuncRole::Define || f.isOutput || f.func.num_update_definitions() != 0)
    return false;
  if (!callsTranscendental(f))
    return false;
  for (const LoweredFunc &g : k.funcs) {
    if (std::find(g.reads.begin(), g.reads.end(), f.func.name()) == g.reads.end() &&
        std::find(g.reads.begin(), g.reads.end(), f.name) == g.reads.end())
      continue;
    for (int s = 0; s <= g.func.num_update_definitions(); ++s) {
      // Tuple-valued Funcs (an online softmax's state, its tile ranges) too. The loops are the
      // definition's own pure and reduction indices (each update has its own domain), as they
      // are before any split: the same answer whichever Funcs a rule has scheduled already.
      const H::Internal::Definition &def =
          s == 0 ? g.func.function().definition() : g.func.function().updates()[s - 1];
      const H::Tuple values = s == 0 ? g.func.values() : g.func.update_values(s - 1);
      std::vector<std::string> loops;
      for (const H::Expr &a : def.args())
        if (const auto *v = a.as<H::Internal::Variable>())
          loops.push_back(v->name);
      for (const H::Internal::ReductionVariable &r : def.schedule().rvars())
        loops.push_back(r.var);
      CallsIn ci;
      for (const H::Expr &v : values.as_vector())
        v.accept(&ci);
      for (const H::Internal::Call *c : ci.calls) {
        if (c->name != f.func.name())
          continue;
        for (const std::string &l : loops) {
          bool used = false;
          for (const H::Expr &a : c->args)
            used |= usesVar(a, l);
          if (!used)
            return true;
        }
      }
    }
  }
  return false;
}

class CpuGenericRule : public ScheduleRule {
public:
  std::string name() const override { return "cpu-generic"; }
  std::optional<Match> match(const LoweredKernel &, const Target &t) const override {
    if (t.gpu)
      return std::nullopt;
    return WholeKernel{};
  }
  std::vector<Knob> knobs(const Match &, const LoweredKernel &, const Target &t) const override {
    return genericKnobs(t);
  }

  void apply(const Match &, LoweredKernel &k, const Target &t,
             const ScheduleParams &params) const override {
    for (LoweredFunc &f : k.funcs)
      scheduleGenericFunc(f, t, params, &k);
  }
};

} // namespace

std::vector<Knob> genericKnobs(const Target &t) {
  // Vectors per innermost step (more independent accumulators for reductions), and how many
  // outer loops are fused into the parallel one (more tasks, or fewer and larger).
  // Rows and vectors per register block of a contraction (projections).
  return {{"generic.vector_mult", {1, 2, 4}, 1},
          {"generic.parallel_fuse", {1, 2, 3}, 3},
          {"generic.gemm_rows", {2, 4, 8}, defaultGemmRows(t)},
          {"generic.gemm_vectors", {1, 2, 4}, 2}};
}

bool genericSchedules(const LoweredFunc &f) {
  // Pointwise helpers (scores, scaled values) are cheapest inlined into their consumers;
  // reductions and softmax statistics are reused across a whole row, so they get storage. So
  // does a softmax's score that calls a transcendental: both the row's max and its exps read it,
  // and inlined it was computed twice (dat_attn's rpe bias, sampled with floor: its max and exps
  // were 25% of the kernel's time, DAT-T stage 3 on Zen 5).
  return f.isOutput || f.role == FuncRole::Reduction || f.role == FuncRole::SoftmaxMax ||
         f.role == FuncRole::SoftmaxSum || f.role == FuncRole::SoftmaxExp ||
         (f.role == FuncRole::SoftmaxScore && callsTranscendental(f));
}

namespace {

// `f`'s own loop nest: a contraction's register blocks, or at root, vectorised and parallel.
void scheduleStored(LoweredFunc &f, const Target &t, const ScheduleParams &params,
                    LoweredKernel *k) {
  const int vec = t.floatLanes * params.get("generic.vector_mult", 1);
  const int fuseLoops = params.get("generic.parallel_fuse", 3);
  if (scheduleContraction(f, t, params, k))
    return;
  if (!f.isOutput)
    f.func.compute_root();
  for (int s = 0; s <= f.func.num_update_definitions(); ++s) {
    H::Stage st = s == 0 ? H::Stage(f.func) : f.func.update(s - 1);
    if (f.vars.empty())
      continue;
    // DSL order is outermost first: vectorize the innermost index and run the outer ones in
    // parallel, fused so that a batch of 1 (the usual inference case) still fills the cores.
    st.vectorize(f.vars.back(), vec, H::TailStrategy::GuardWithIf);
    if (f.vars.size() == 2) {
      st.parallel(f.vars.front());
    } else if (f.vars.size() > 2) {
      H::VarOrRVar outer = f.vars[0];
      for (size_t i = 1; i + 1 < f.vars.size() && (int)i < fuseLoops; ++i) {
        H::Var fused(f.name + "_par" + std::to_string(i));
        st.fuse(f.vars[i], outer, fused);
        outer = fused;
      }
      // A pure stage (a pointwise definition, a reduction's initial value) does one row of its
      // innermost index per iteration of the fused loop: a few vectors, far less than the thread
      // pool's cost per task, so its tasks take 2 x (vector lanes) rows each, about 2D vector
      // operations at a row of D whatever the vector width. Linear attention (B1 H8 N2048 D64,
      // its feature maps and output, 16K rows each), Zen 4, C++ harness: a task per row
      // 9.8-10.4 ms, 32 rows 6.1-6.6 ms, 128 rows 6.2-6.6 ms (N256: 1.12 -> 0.73-0.78 ms).
      // An update (a reduction's body) keeps one row per task: its rows carry the reduction.
      if (s == 0)
        st.parallel(outer, 2 * t.floatLanes, H::TailStrategy::GuardWithIf);
      else
        st.parallel(outer);
    }
  }
}

} // namespace

void scheduleGenericFunc(LoweredFunc &f, const Target &t, const ScheduleParams &params,
                         LoweredKernel *k) {
  // (Costly pointwise Funcs by every rule that hands Funcs to this one: ViT-B's encoder block,
  // under cpu-online, inlined its GELU (an erf per element) into the second MLP layer's sum,
  // which recomputed it for every block of 32 outputs: --emit=cost 5.1e7 transcendental calls
  // against the algorithm's 3.0e5, two thirds of the kernel's time by perf.)
  if (genericSchedules(f) || (k && reusedCostly(f, *k)))
    scheduleStored(f, t, params, k);
}

std::unique_ptr<ScheduleRule> makeCpuGenericRule() { return std::make_unique<CpuGenericRule>(); }

} // namespace attnc
