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
    const int vec = t.natural_vector_size<float>();
    for (LoweredFunc& f : k.funcs) {
      // Pointwise helpers (scores, scaled values) are cheapest inlined into their consumers;
      // reductions and softmax statistics are reused across a whole row, so they get storage.
      bool root = f.isOutput || f.role == FuncRole::Reduction || f.role == FuncRole::SoftmaxMax ||
                  f.role == FuncRole::SoftmaxSum || f.role == FuncRole::SoftmaxExp;
      if (!root) continue;
      if (!f.isOutput) f.func.compute_root();
      for (int s = 0; s <= f.func.num_update_definitions(); ++s) {
        H::Stage st = s == 0 ? H::Stage(f.func) : f.func.update(s - 1);
        if (f.vars.empty()) continue;
        // DSL order is outermost first: parallel over the outermost index, vectorize the innermost.
        st.vectorize(f.vars.back(), vec, H::TailStrategy::GuardWithIf);
        if (f.vars.size() > 1) st.parallel(f.vars.front());
      }
    }
  }
};

} // namespace

std::unique_ptr<ScheduleRule> makeCpuGenericRule() { return std::make_unique<CpuGenericRule>(); }

} // namespace attnc
