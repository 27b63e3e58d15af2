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
      if (!part && !consumer)
        scheduleGenericFunc(k.funcs[f], t, params, &k);
    }
    // The consumer: parallel over (batch, row) fused, vectorized over its innermost index.
    LoweredFunc &c = k.funcs[w.consumers[0]];
    c.func.compute_root();
    H::Var row(c.name + "_row");
    for (int s = 0; s <= c.func.num_update_definitions(); ++s) {
      H::Stage st = s == 0 ? H::Stage(c.func) : c.func.update(s - 1);
      st.vectorize(c.vars.back(), vec, H::TailStrategy::GuardWithIf);
      st.fuse(c.vars[1], c.vars[0], row).parallel(row);
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
