// Generic CPU schedule: any kernel; every non-trivial Func computed at root, parallel and vectorized.
#include "attnc/Schedule.h"

namespace attnc {
namespace {

namespace H = Halide;

class CpuGenericRule : public ScheduleRule {
public:
  std::string name() const override { return "cpu-generic"; }
  int priority() const override { return 0; }
  bool applies(const LoweredKernel&, const H::Target& t) const override { return !t.has_gpu_feature(); }
  std::vector<Knob> knobs(const LoweredKernel&, const H::Target&) const override { return genericKnobs(); }

  void apply(LoweredKernel& k, const H::Target& t, const ScheduleParams& params) const override {
    for (LoweredFunc& f : k.funcs) scheduleGenericFunc(f, t, params);
  }
};

} // namespace

std::vector<Knob> genericKnobs() {
  // Vectors per innermost step (more independent accumulators for reductions), and how many
  // outer loops are fused into the parallel one (more tasks, or fewer and larger).
  return {{"generic.vector_mult", {1, 2, 4}, 1}, {"generic.parallel_fuse", {1, 2, 3}, 3}};
}

bool genericSchedules(const LoweredFunc& f) {
  // Pointwise helpers (scores, scaled values) are cheapest inlined into their consumers;
  // reductions and softmax statistics are reused across a whole row, so they get storage.
  return f.isOutput || f.role == FuncRole::Reduction || f.role == FuncRole::SoftmaxMax || f.role == FuncRole::SoftmaxSum ||
         f.role == FuncRole::SoftmaxExp;
}

void scheduleGenericFunc(LoweredFunc& f, const H::Target& t, const ScheduleParams& params) {
  const int vec = t.natural_vector_size<float>() * params.get("generic.vector_mult", 1);
  const int fuseLoops = params.get("generic.parallel_fuse", 3);
  if (!genericSchedules(f)) return;
  if (!f.isOutput) f.func.compute_root();
  for (int s = 0; s <= f.func.num_update_definitions(); ++s) {
    H::Stage st = s == 0 ? H::Stage(f.func) : f.func.update(s - 1);
    if (f.vars.empty()) continue;
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
      st.parallel(outer);
    }
  }
}

std::unique_ptr<ScheduleRule> makeCpuGenericRule() { return std::make_unique<CpuGenericRule>(); }

} // namespace attnc
