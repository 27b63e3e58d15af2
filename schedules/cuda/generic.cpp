// Generic CUDA schedule: any kernel; every non-trivial Func computed at root as a grid of thread tiles.
#include "attnc/Schedule.h"

#include <stdexcept>

namespace attnc {
namespace {

namespace H = Halide;

class CudaGenericRule : public ScheduleRule {
public:
  std::string name() const override { return "cuda-generic"; }
  std::optional<Match> match(const LoweredKernel &, const Target &t) const override {
    if (!t.cuda)
      return std::nullopt;
    return WholeKernel{};
  }

  std::vector<Knob> knobs(const Match &, const LoweredKernel &k, const Target &) const override {
    for (const LoweredFunc &f : k.funcs)
      if (cudaGenericSchedules(f) && !f.vars.empty())
        return cudaGenericKnobs();
    return {};
  }

  void apply(const Match &, LoweredKernel &k, const Target &,
             const ScheduleParams &params) const override {
    for (LoweredFunc &f : k.funcs)
      scheduleCudaGenericFunc(f, params);
  }
};

} // namespace

void scheduleCudaStage(H::Stage st, const LoweredFunc &f, int tileX, int tileY) {
  const std::string &n = f.name;
  std::vector<H::VarOrRVar> order; // innermost first, for reorder()
  // Reduction indices run inside each thread: one thread owns one output element.
  for (const H::RVar &r : f.rvars)
    order.push_back(r);
  const size_t nv = f.vars.size();
  if (nv == 1) {
    H::Var bx(n + "_bx"), tx(n + "_tx");
    st.gpu_tile(f.vars[0], bx, tx, tileX * tileY, H::TailStrategy::GuardWithIf);
    order.push_back(tx);
    order.push_back(bx);
  } else {
    // The innermost index on threadIdx.x: neighbouring threads touch neighbouring addresses of
    // the output and of every input read along the same index (coalesced).
    H::Var bx(n + "_bx"), by(n + "_by"), tx(n + "_tx"), ty(n + "_ty");
    st.gpu_tile(f.vars[nv - 1], f.vars[nv - 2], bx, by, tx, ty, tileX, tileY,
                H::TailStrategy::GuardWithIf);
    order.push_back(tx);
    order.push_back(ty);
    order.push_back(bx);
    order.push_back(by);
    if (nv > 2) {
      // The remaining (batch, head, ...) indices fused into the third grid dimension, so a
      // whole call is one launch.
      H::VarOrRVar outer = f.vars[0];
      for (size_t i = 1; i + 2 < nv; ++i) {
        H::Var fused(n + "_bz" + std::to_string(i));
        st.fuse(f.vars[i], outer, fused);
        outer = fused;
      }
      st.gpu_blocks(outer);
      order.push_back(outer);
    }
  }
  if (!f.rvars.empty())
    st.reorder(order);
}

// 32 x 8 threads by default: a warp along the innermost index, 256 threads per block (8 warps
// keep an SM's schedulers busy while others wait on memory). A warp narrower than 32 along the
// innermost index would split each row of a warp's reads into several transactions, so x starts
// at 32; 64 x 16 = 1024 is the most threads a block may have.
std::vector<Knob> cudaGenericKnobs() {
  return {{"cuda.threads_x", {32, 64}, 32}, {"cuda.threads_y", {2, 4, 8, 16}, 8}};
}

bool cudaGenericSchedules(const LoweredFunc &f) {
  // As on the CPU: pointwise Funcs are inlined into their consumers; reductions and softmax
  // statistics get storage in global memory, each a kernel of its own.
  bool root = f.isOutput || f.role == FuncRole::Reduction || f.role == FuncRole::SoftmaxMax ||
              f.role == FuncRole::SoftmaxSum || f.role == FuncRole::SoftmaxExp;
  return root && f.role != FuncRole::Check;
}

void scheduleCudaGenericFunc(LoweredFunc &f, const ScheduleParams &params) {
  if (!cudaGenericSchedules(f))
    return;
  const int tx = params.get("cuda.threads_x", 32), ty = params.get("cuda.threads_y", 8);
  if (tx * ty > 1024)
    throw std::runtime_error(
        "cuda.threads_x * cuda.threads_y must not exceed 1024 threads per block");
  if (!f.isOutput)
    f.func.compute_root();
  for (int s = 0; s <= f.func.num_update_definitions(); ++s) {
    H::Stage st = s == 0 ? H::Stage(f.func) : f.func.update(s - 1);
    if (f.vars.empty()) {
      st.gpu_single_thread();
      continue;
    }
    LoweredFunc view = f;
    if (s == 0)
      view.rvars.clear(); // the pure definition has no reduction loop
    scheduleCudaStage(st, view, tx, ty);
  }
}

std::unique_ptr<ScheduleRule> makeCudaGenericRule() { return std::make_unique<CudaGenericRule>(); }

} // namespace attnc
