// CUDA schedule for deformable sampling: threads along the heads' channels, so each corner read is coalesced.
#include "attnc/Patterns.h"
#include "attnc/Schedule.h"

#include <algorithm>
#include <stdexcept>

namespace attnc {
namespace {

namespace H = Halide;

// A sampling sum s(b, q, m, d) reads value(b, s, m, d) at four corners per point; for a fixed
// point the (m, d) pairs of one query are contiguous in memory (M*D floats). The head and channel
// indices are fused into one thread index, 64 per block row and 4 queries per block: a warp reads
// 32 consecutive floats (one 128-byte transaction) at each corner whatever D is, where tiling d
// alone by 32 would leave lanes idle for D < 32 (DETR's D = 32, DAT's 32, smaller in tests).
// Knobs cuda.channel_threads and cuda.query_threads change the 64 x 4.
constexpr int kChannelThreads = 64, kQueryThreads = 4;

class CudaSampleRule : public ScheduleRule {
public:
  std::string name() const override { return "cuda-sample"; }
  std::optional<Match> match(const LoweredKernel &k, const Target &t) const override {
    if (!t.cuda)
      return std::nullopt;
    SamplingPattern p{findSampling(k)};
    if (p.funcs.empty())
      return std::nullopt;
    return p;
  }

  // Channel threads stay a multiple of a warp (32: one transaction per corner read). The generic
  // knobs only where Funcs outside the sampling sums (projections, softmax) get kernels of their own.
  std::vector<Knob> knobs(const Match &m, const LoweredKernel &k, const Target &) const override {
    std::vector<Knob> ks = {{"cuda.channel_threads", {32, 64, 128}, kChannelThreads},
                            {"cuda.query_threads", {1, 2, 4, 8}, kQueryThreads}};
    const std::vector<FuncIndex> &sampling = std::get<SamplingPattern>(m).funcs;
    for (FuncIndex i = 0; i < k.funcs.size(); ++i) {
      const LoweredFunc &f = k.funcs[i];
      bool member =
          std::find(sampling.begin(), sampling.end(), i) != sampling.end() && f.vars.size() >= 3;
      if (!member && cudaGenericSchedules(f) && !f.vars.empty()) {
        for (const Knob &kb : cudaGenericKnobs())
          ks.push_back(kb);
        break;
      }
    }
    return ks;
  }

  void apply(const Match &m, LoweredKernel &k, const Target &,
             const ScheduleParams &params) const override {
    const int channelThreads = params.get("cuda.channel_threads", kChannelThreads);
    const int queryThreads = params.get("cuda.query_threads", kQueryThreads);
    if (channelThreads * queryThreads > 1024)
      throw std::runtime_error(
          "cuda.channel_threads * cuda.query_threads must not exceed 1024 threads per block");
    std::vector<LoweredFunc *> sampling;
    for (FuncIndex f : std::get<SamplingPattern>(m).funcs)
      sampling.push_back(&k.funcs[f]);
    for (LoweredFunc &f : k.funcs)
      if (std::find(sampling.begin(), sampling.end(), &f) == sampling.end())
        scheduleCudaGenericFunc(f, params);
    for (LoweredFunc *f : sampling) {
      if (f->vars.size() < 3) {
        scheduleCudaGenericFunc(*f, params);
        continue;
      }
      if (!f->isOutput)
        f->func.compute_root();
      for (int s = 0; s <= f->func.num_update_definitions(); ++s)
        scheduleChannels(s == 0 ? H::Stage(f->func) : f->func.update(s - 1), *f, s > 0,
                         channelThreads, queryThreads);
    }
  }

private:
  static void scheduleChannels(H::Stage st, const LoweredFunc &f, bool update, int channelThreads,
                               int queryThreads) {
    const std::string &n = f.name;
    const size_t nv = f.vars.size();
    H::Var md(n + "_md"), bx(n + "_bx"), by(n + "_by"), tx(n + "_tx"), ty(n + "_ty");
    st.fuse(f.vars[nv - 1], f.vars[nv - 2], md);
    st.gpu_tile(md, f.vars[nv - 3], bx, by, tx, ty, channelThreads, queryThreads,
                H::TailStrategy::GuardWithIf);
    std::vector<H::VarOrRVar> order;
    // The sampling points run inside each thread, in the DSL's order (the sum's rounding is the
    // same as on the CPU schedules').
    if (update)
      for (const H::RVar &r : f.rvars)
        order.push_back(r);
    order.insert(order.end(), {tx, ty, bx, by});
    if (nv > 3) {
      H::VarOrRVar outer = f.vars[0];
      for (size_t i = 1; i + 3 < nv; ++i) {
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

std::unique_ptr<ScheduleRule> makeCudaSampleRule() { return std::make_unique<CudaSampleRule>(); }

} // namespace attnc
