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

  void apply(LoweredKernel& k, const H::Target& t) const override {
    for (LoweredFunc& f : k.funcs) scheduleGenericFunc(f, t);
  }
};

} // namespace

void scheduleGenericFunc(LoweredFunc& f, const H::Target& t) {
  const int vec = t.natural_vector_size<float>();
  // Pointwise helpers (scores, scaled values) are cheapest inlined into their consumers;
  // reductions and softmax statistics are reused across a whole row, so they get storage.
  bool root = f.isOutput || f.role == FuncRole::Reduction || f.role == FuncRole::SoftmaxMax || f.role == FuncRole::SoftmaxSum ||
              f.role == FuncRole::SoftmaxExp;
  if (!root) return;
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
      for (size_t i = 1; i + 1 < f.vars.size() && i < 3; ++i) {
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
