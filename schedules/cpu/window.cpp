// CPU schedule for windowed attention: a softmax over a small constant window around each query.
//
// Measured with attn-bench on the 2-core Zen 4 machine (msda, B=1, C=72, 56x56, dilations
// [1, 2, 3], medians of 5-9 runs): cpu-generic with batch-only parallelism 40.9 ms; cpu-generic
// with fused outer parallel loops 28.5 ms; this rule 21.5-25 ms; the plain C++ unfold
// formulation 39-47 ms in the same runs (1.8-1.9x). Most of the remaining time is the qkv and
// output projections (130 of the 140 MFLOP), still scheduled by the generic rule (issue #7).
#include "attnc/Patterns.h"
#include "attnc/Schedule.h"

#include <algorithm>
#include <optional>

namespace attnc {
namespace {

namespace H = Halide;

// Whether update `s` of `f` reads a Func or input at a coordinate that does not move by a
// constant when `var` moves by one (a gather per vector lane along `var`).
bool gathersAlong(const LoweredFunc &f, int s, const std::string &var) {
  struct Reads : H::Internal::IRGraphVisitor {
    const std::string &var;
    bool gather = false;
    explicit Reads(const std::string &v) : var(v) {}
    using H::Internal::IRGraphVisitor::visit;
    void visit(const H::Internal::Call *c) override {
      H::Internal::IRGraphVisitor::visit(c);
      // (Inputs are read through wrapper Funcs, `k_im`: any Func or image.)
      if (c->call_type != H::Internal::Call::Image && c->call_type != H::Internal::Call::Halide)
        return;
      H::Expr v = H::Internal::Variable::make(H::Int(32), var);
      for (const H::Expr &a : c->args) {
        if (!H::Internal::expr_uses_var(a, var))
          continue;
        H::Expr step = H::Internal::simplify(H::Internal::substitute(var, v + 1, a) - a);
        gather = gather || !H::Internal::is_const(step);
      }
    }
  } r(var);
  const H::Tuple values = f.func.update_values(s);
  for (const H::Expr &v : values.as_vector())
    v.accept(&r);
  return r.gather;
}

class CpuWindowRule : public ScheduleRule {
public:
  std::string name() const override { return "cpu-window"; }
  std::optional<Match> match(const LoweredKernel &k, const Target &t) const override {
    if (t.gpu)
      return std::nullopt;
    if (std::optional<WindowPattern> w = findWindow(k))
      return Match(std::move(*w));
    return std::nullopt;
  }

  // Its own loops are fixed; the Funcs outside its pattern (projections) take the generic knobs,
  // with defaults of their own: one vector per GEMM block and one parallel loop. attn-tune on msda
  // (B1 56x56 C72, Zen 5, 7 alternating runs each): 3.06 ms with the generic defaults, 2.56 ms
  // with these; 72 channels fill 4.5 vectors, so two-vector blocks carried a half-empty tail.
  static constexpr std::pair<const char *, int> kDefaults[] = {{"generic.gemm_vectors", 1},
                                                               {"generic.parallel_fuse", 1}};

  std::vector<Knob> knobs(const Match &, const LoweredKernel &, const Target &t) const override {
    std::vector<Knob> ks = genericKnobs(t);
    for (Knob &kb : ks)
      for (auto [name, v] : kDefaults)
        if (kb.name == name)
          kb.dflt = v;
    return ks;
  }

  void apply(const Match &m, LoweredKernel &k, const Target &t,
             const ScheduleParams &given) const override {
    ScheduleParams params = given;
    for (auto [name, v] : kDefaults)
      params.values.emplace(name, v);
    const WindowPattern &w = std::get<WindowPattern>(m);
    const int vec = t.floatLanes;
    for (FuncIndex f = 0; f < k.funcs.size(); ++f) {
      bool part = std::find(w.parts.begin(), w.parts.end(), f) != w.parts.end();
      bool consumer = std::find(w.consumers.begin(), w.consumers.end(), f) != w.consumers.end();
      bool def = std::find(w.scoreDefs.begin(), w.scoreDefs.end(), f) != w.scoreDefs.end();
      if (!part && !consumer && !def)
        scheduleGenericFunc(k.funcs[f], t, params, &k);
    }
    // The consumer: parallel over (batch, row) fused, vectorized over its innermost index.
    LoweredFunc &c = k.funcs[w.consumers[0]];
    c.func.compute_root();
    H::Var row(c.name + "_row"), bh(c.name + "_bh");
    // With a score definition of its own (Swin), image rows too: computed per (batch, head) the
    // contraction held the whole image's scores (614 KB at 56x56, 49 offsets) and three heads
    // made three tasks for two threads (41% of the time waiting, Halide profiler, Zen 4).
    const bool imageRows = !w.scoreDefs.empty() && c.vars.size() >= 5;
    for (int s = 0; s <= c.func.num_update_definitions(); ++s) {
      H::Stage st = s == 0 ? H::Stage(c.func) : c.func.update(s - 1);
      if (imageRows && s > 0) {
        // The window's offsets outside the value vectors: each probability (an exp over a sum)
        // and each key's computed row are then made once for all D / 16 vectors of the value.
        H::Var e = c.vars.back(), eo(c.name + "_eo"), ei(c.name + "_ei");
        std::vector<H::VarOrRVar> order{ei, eo};
        for (const H::RVar &r : c.rvars)
          order.push_back(r);
        order.push_back(c.vars[c.vars.size() - 2]);
        st.split(e, eo, ei, vec, H::TailStrategy::GuardWithIf).vectorize(ei).reorder(order);
      } else {
        st.vectorize(c.vars.back(), vec, H::TailStrategy::GuardWithIf);
      }
      if (imageRows)
        st.fuse(c.vars[1], c.vars[0], bh).fuse(c.vars[2], bh, row).parallel(row);
      else
        st.fuse(c.vars[1], c.vars[0], row).parallel(row);
    }
    // A score written as its own definition (Swin's `s`): its pointwise part inlined into the
    // softmax's, its contraction computed per consumer row with the row index innermost in
    // storage, so that the statistics, vectorized along the row, load it densely. The
    // contraction itself is vectorized along the row where its input reads move with the row
    // (msda's `x + dilation * (t - 1)`), else along its reduction: Swin's keys are read at
    // `((x - shift) % X / ws) * ws + t`, a gather per lane along the row. Measured (attn-bench,
    // swin_attention B1 NH3 56x56 D32, Zen 4, Halide profiler): as a root Func vectorized along
    // the window's 7 offsets, the contraction took 18.4 of 21.4 ms on one thread.
    for (FuncIndex d : w.scoreDefs) {
      LoweredFunc &f = k.funcs[d];
      if (f.func.num_update_definitions() == 0) {
        f.func.compute_inline();
        continue;
      }
      f.func.compute_at(c.func, row);
      auto it = std::find(f.varNames.begin(), f.varNames.end(), w.rowVar);
      if (it == f.varNames.end())
        continue;
      H::Var x = f.vars[it - f.varNames.begin()];
      std::vector<H::Var> storage{x};
      for (const H::Var &a : f.func.args())
        if (a.name() != x.name())
          storage.push_back(a);
      f.func.reorder_storage(storage);
      f.func.vectorize(x, vec, H::TailStrategy::GuardWithIf);
      for (int s = 0; s < f.func.num_update_definitions(); ++s) {
        H::Stage st = f.func.update(s);
        if (!gathersAlong(f, s, x.name()) || f.rvars.size() != 1) {
          st.vectorize(x, vec, H::TailStrategy::GuardWithIf);
          continue;
        }
        H::RVar r = f.rvars[0], ro(r.name() + "_o"), ri(r.name() + "_i");
        st.split(r, ro, ri, vec, H::TailStrategy::GuardWithIf).atomic().vectorize(ri);
      }
    }
    // The window's scores and statistics: computed per consumer row, for that row only, and
    // vectorized along the row (the map's width), which every window offset shares.
    for (FuncIndex part : w.parts) {
      LoweredFunc *f = &k.funcs[part];
      if (f->role == FuncRole::SoftmaxScore)
        continue; // pointwise: inlined into max and exp
      f->func.compute_at(c.func, row);
      auto it = std::find(f->varNames.begin(), f->varNames.end(), w.rowVar);
      if (it == f->varNames.end())
        continue;
      H::Var x = f->vars[it - f->varNames.begin()];
      for (int s = 0; s <= f->func.num_update_definitions(); ++s) {
        H::Stage st = s == 0 ? H::Stage(f->func) : f->func.update(s - 1);
        st.vectorize(x, vec, H::TailStrategy::GuardWithIf);
      }
    }
  }
};

} // namespace

std::unique_ptr<ScheduleRule> makeCpuWindowRule() { return std::make_unique<CpuWindowRule>(); }

} // namespace attnc
