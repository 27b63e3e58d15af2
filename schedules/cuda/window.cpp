// CUDA schedule for windowed attention: one thread per query pixel, its w x w window in registers.
#include "attnc/Patterns.h"
#include "attnc/Schedule.h"

#include <algorithm>
#include <stdexcept>

namespace attnc {
namespace {

namespace H = Halide;

// Threads along the map's width (the row index, contiguous between neighbouring queries in the
// [B, H, W, C] maps the bundled variants use) and down its height; 32 x 8 per block by default
// (knobs cuda.row_threads, cuda.col_threads).
constexpr int kRowThreads = 32, kColThreads = 8;

class CudaWindowRule : public ScheduleRule {
public:
  std::string name() const override { return "cuda-window"; }
  std::optional<Match> match(const LoweredKernel &k, const Target &t) const override {
    if (!t.cuda)
      return std::nullopt;
    if (std::optional<WindowPattern> w = findWindow(k))
      return Match(std::move(*w));
    return std::nullopt;
  }

  // Block shapes; 16 threads along the row still fill half a warp with consecutive pixels. The
  // generic knobs only where Funcs outside the window (projections) get kernels of their own.
  std::vector<Knob> knobs(const Match &m, const LoweredKernel &k, const Target &) const override {
    std::vector<Knob> ks = {{"cuda.row_threads", {16, 32, 64}, kRowThreads},
                            {"cuda.col_threads", {4, 8, 16}, kColThreads}};
    const WindowPattern &w = std::get<WindowPattern>(m);
    for (FuncIndex i = 0; i < k.funcs.size(); ++i)
      if (const LoweredFunc &f = k.funcs[i];
          std::find(w.parts.begin(), w.parts.end(), i) == w.parts.end() &&
          cudaGenericSchedules(f) && !f.vars.empty()) {
        for (const Knob &kb : cudaGenericKnobs())
          ks.push_back(kb);
        break;
      }
    return ks;
  }

  void apply(const Match &m, LoweredKernel &k, const Target &,
             const ScheduleParams &params) const override {
    const int rowThreads = params.get("cuda.row_threads", kRowThreads),
              colThreads = params.get("cuda.col_threads", kColThreads);
    if (rowThreads * colThreads > 1024)
      throw std::runtime_error(
          "cuda.row_threads * cuda.col_threads must not exceed 1024 threads per block");
    const WindowPattern &w = std::get<WindowPattern>(m);
    for (FuncIndex i = 0; i < k.funcs.size(); ++i)
      if (std::find(w.parts.begin(), w.parts.end(), i) == w.parts.end())
        scheduleCudaGenericFunc(k.funcs[i], params);
    // The window's statistics (row max, sum, the scores' nested reductions): a thread per query
    // pixel, looping over its window offsets, rather than threads along the offsets (3 of 32
    // lanes busy). exp(score - max) is recomputed where it is read: cheaper than storing the
    // whole window of every pixel in global memory.
    for (FuncIndex part : w.parts) {
      LoweredFunc *f = &k.funcs[part];
      if (f->role == FuncRole::SoftmaxScore || f->role == FuncRole::SoftmaxExp)
        continue; // inlined
      auto row = std::find(f->varNames.begin(), f->varNames.end(), w.rowVar);
      if (row == f->varNames.end() || row == f->varNames.begin()) {
        scheduleCudaGenericFunc(*f);
        continue;
      }
      const size_t r = row - f->varNames.begin();
      f->func.compute_root();
      for (int s = 0; s <= f->func.num_update_definitions(); ++s)
        scheduleRows(s == 0 ? H::Stage(f->func) : f->func.update(s - 1), *f, r, s > 0, rowThreads,
                     colThreads);
    }
  }

private:
  // Threads over (vars[r], vars[r - 1]); indices after r (window offsets) and reduction indices
  // run inside each thread; indices before r - 1 fuse onto the grid's third dimension.
  static void scheduleRows(H::Stage st, const LoweredFunc &f, size_t r, bool update, int rowThreads,
                           int colThreads) {
    const std::string &n = f.name;
    H::Var bx(n + "_bx"), by(n + "_by"), tx(n + "_tx"), ty(n + "_ty");
    st.gpu_tile(f.vars[r], f.vars[r - 1], bx, by, tx, ty, rowThreads, colThreads,
                H::TailStrategy::GuardWithIf);
    std::vector<H::VarOrRVar> order;
    if (update)
      for (const H::RVar &v : f.rvars)
        order.push_back(v);
    for (size_t i = f.vars.size(); i-- > r + 1;)
      order.push_back(f.vars[i]);
    order.insert(order.end(), {tx, ty, bx, by});
    if (r >= 2) {
      H::VarOrRVar outer = f.vars[0];
      for (size_t i = 1; i + 1 < r; ++i) {
        H::Var fused(n + "_bz" + std::to_string(i));
        st.fuse(f.vars[i], outer, fused);
        outer = fused;
      }
      st.gpu_blocks(outer);
      order.push_back(outer);
    }
    st.reorder(order);
  }
};

} // namespace

std::unique_ptr<ScheduleRule> makeCudaWindowRule() { return std::make_unique<CudaWindowRule>(); }

} // namespace attnc
