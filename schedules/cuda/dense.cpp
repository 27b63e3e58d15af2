// CUDA schedule for dense attention: both contractions as shared-memory tiled GEMMs, softmax rows per warp.
#include "attnc/Patterns.h"
#include "attnc/Schedule.h"

#include <algorithm>
#include <stdexcept>

namespace attnc {
namespace {

namespace H = Halide;

// Defaults of the knobs (cuda.tile, cuda.rows_per_thread, cuda.rows_per_block):
// 16 x 16 output tiles with 16-deep slices of the contracted index staged in shared memory: the
// shape of Halide's apps/cuda_mat_mul. Each staged element is read 16 times from shared memory
// instead of 16 times from global memory; 2 x 16 x 16 floats = 2 KiB per block, so many blocks
// fit on an SM (48 KiB of shared memory and more per SM on sm_80/86/90).
constexpr int kTile = 16;
// Output rows per thread in the tiled contractions (register blocking).
constexpr int kRowsPerThread = 4;
// A warp's width: softmax statistics reduce a row with 32 lanes and warp shuffles.
constexpr int kWarp = 32;
// Rows of the softmax per block: 8 warps.
constexpr int kRowsPerBlock = 8;

class CudaDenseRule : public ScheduleRule {
public:
  std::string name() const override { return "cuda-dense"; }
  std::optional<Match> match(const LoweredKernel &k, const Target &t) const override {
    if (!t.cuda)
      return std::nullopt;
    if (std::optional<DensePattern> p = findDensePattern(k))
      return Match(std::move(*p));
    return std::nullopt;
  }

  // Block and thread shapes. Without a GPU they can only be checked offline (compile success and
  // ptxas resources: attnc --emit=ptx, make ptx-report), not timed.
  // The generic knobs too where Funcs outside the pattern (projections) get kernels of their own.
  std::vector<Knob> knobs(const Match &m, const LoweredKernel &k, const Target &) const override {
    std::vector<Knob> ks = {{"cuda.tile", {8, 16, 32}, kTile},
                            {"cuda.rows_per_thread", {1, 2, 4, 8}, kRowsPerThread},
                            {"cuda.rows_per_block", {4, 8, 16}, kRowsPerBlock}};
    const DensePattern &pat = std::get<DensePattern>(m);
    for (FuncIndex i = 0; i < k.funcs.size(); ++i)
      if (const LoweredFunc &f = k.funcs[i];
          !pat.contains(i) && cudaGenericSchedules(f) && !f.vars.empty()) {
        for (const Knob &kb : cudaGenericKnobs())
          ks.push_back(kb);
        break;
      }
    return ks;
  }

  void apply(const Match &m, LoweredKernel &k, const Target &,
             const ScheduleParams &params) const override {
    const int tile = params.get("cuda.tile", kTile),
              rowsPerThread = params.get("cuda.rows_per_thread", kRowsPerThread);
    const int rowsPerBlock = params.get("cuda.rows_per_block", kRowsPerBlock);
    if (rowsPerThread > tile)
      throw std::runtime_error("cuda.rows_per_thread must not exceed cuda.tile");
    const DensePattern &pat = std::get<DensePattern>(m);
    std::vector<LoweredFunc *> softmax;
    for (FuncIndex f : pat.softmax)
      softmax.push_back(&k.funcs[f]);
    // Everything outside the pattern (projections, biases) as the generic rule has it.
    for (FuncIndex i = 0; i < k.funcs.size(); ++i)
      if (!pat.contains(i))
        scheduleCudaGenericFunc(k.funcs[i], params);
    scheduleGemm(k, k.funcs[pat.out], /*staged=*/softmax, tile, rowsPerThread);
    scheduleGemm(k, k.funcs[pat.score], {}, tile, rowsPerThread);
    for (LoweredFunc *f : softmax) {
      if (f->role == FuncRole::SoftmaxMax || f->role == FuncRole::SoftmaxSum)
        scheduleRowReduction(*f, rowsPerBlock);
      else if (f->role == FuncRole::SoftmaxExp)
        scheduleCudaGenericFunc(*f);
      // scores and probabilities are pointwise: inlined into exp/max and into o's tiles
    }
  }

private:
  // c(.., i, j) = sum_r a(.., i, r) * b(.., r, j): a grid of 16 x 16 tiles of c (batch indices on
  // the third grid dimension); each block walks r in 16-deep slices, staging the slice of every
  // input (and of any softmax Func in `staged`) that the tile reads into shared memory.
  static void scheduleGemm(LoweredKernel &k, LoweredFunc &C,
                           const std::vector<LoweredFunc *> &staged, int tile, int rowsPerThread) {
    const size_t n = C.vars.size();
    H::Var i = C.vars[n - 2], j = C.vars[n - 1];
    H::RVar r = C.rvars[0];
    const std::string &nm = C.name;
    H::Var io(nm + "_io"), ii(nm + "_ii"), jo(nm + "_jo"), ji(nm + "_ji");
    H::RVar ro(nm + "_ro"), ri(nm + "_ri");
    if (!C.isOutput)
      C.func.compute_root();
    auto batch = [&](H::Stage st) -> std::vector<H::VarOrRVar> {
      if (n == 2)
        return {};
      H::VarOrRVar outer = C.vars[0];
      for (size_t b = 1; b + 2 < n; ++b) {
        H::Var fused(nm + "_bz" + std::to_string(b));
        st.fuse(C.vars[b], outer, fused);
        outer = fused;
      }
      return {outer};
    };
    H::Stage init = C.func;
    init.gpu_tile(j, i, jo, io, ji, ii, tile, tile, H::TailStrategy::GuardWithIf);
    for (auto &b : batch(init))
      init.gpu_blocks(b);

    H::Stage upd = C.func.update();
    // Register blocking: tile x tile/rowsPerThread threads (16 x 4 by default), each accumulating
    // rowsPerThread rows of the tile (unrolled), so every value it loads from shared memory along
    // j serves that many rows.
    H::Var it(nm + "_it"), ir(nm + "_ir");
    upd.split(i, io, ii, tile, H::TailStrategy::GuardWithIf)
        .split(j, jo, ji, tile, H::TailStrategy::GuardWithIf)
        .split(r, ro, ri, tile, H::TailStrategy::GuardWithIf)
        .split(ii, it, ir, rowsPerThread, H::TailStrategy::GuardWithIf);
    std::vector<H::VarOrRVar> order{ir, ri, ji, it, ro, jo, io};
    std::vector<H::VarOrRVar> b = batch(upd);
    order.insert(order.end(), b.begin(), b.end());
    upd.reorder(order).unroll(ir).gpu_threads(ji, it);
    if (b.empty())
      upd.gpu_blocks(jo, io);
    else
      upd.gpu_blocks(jo, io, b[0]);

    // Inputs read in the update along r, and the softmax numerators, staged per slice of r with
    // the block's threads. Halide puts a Func computed at a loop between the block and thread
    // levels in shared memory and brackets it with barriers.
    std::vector<std::string> alongR = inputsReadWithVar(k, C.func.update_value(0), r.name());
    for (KernelParam &p : k.inputs)
      if (std::find(alongR.begin(), alongR.end(), p.name) != alongR.end())
        stageSlice(p.param.in(C.func), C.func, ro, tile);
    for (LoweredFunc *f : staged)
      if (f->role == FuncRole::Softmax)
        stageSlice(f->func.in(C.func), C.func, ro, tile);
  }

  // The slice is copied by tile x tile threads into tile x tile floats of shared memory: its
  // dimensions are split by the tile so that the thread counts are constants, and its storage is
  // bounded by the tile. Left to bounds inference, both grew with the sizes under a causal mask
  // (r <= i): Halide bounds the staged numerators' rows only by Nq, and for blocks above the
  // diagonal it multiplies two negative extents, so causal_attention asked for 16 x Nq threads
  // and 197 KiB of shared memory per block at Nq = 256, which a GPU refuses
  // (CUDA_ERROR_INVALID_VALUE on an H100; ptxas cannot see launch sizes). A slice never holds
  // more than one tile: `at` walks the contraction in tiles and the block computes one output tile.
  static void stageSlice(H::Func w, H::Func consumer, H::RVar at, int tile) {
    w.compute_at(consumer, at);
    std::vector<H::Var> a = w.args(); // innermost first
    const std::string &nm = w.name();
    H::Var xo(nm + "_xo"), xi(nm + "_xi"), yo(nm + "_yo"), yi(nm + "_yi");
    for (size_t d = 0; d < a.size() && d < 2; ++d)
      w.bound_storage(a[d], tile);
    if (a.size() >= 2)
      w.tile(a[0], a[1], xo, yo, xi, yi, tile, tile, H::TailStrategy::GuardWithIf)
          .gpu_threads(xi, yi);
    else if (!a.empty())
      w.split(a[0], xo, xi, tile, H::TailStrategy::GuardWithIf).gpu_threads(xi);
  }

  // A row statistic (max or sum over the softmax axis): one warp per row, 32 lanes each reduce a
  // strided part of the row, then combine with shuffles; 8 rows per block.
  static void scheduleRowReduction(LoweredFunc &f, int rowsPerBlock) {
    f.func.compute_root();
    const std::string &nm = f.name;
    const size_t n = f.vars.size();
    H::Var row = f.vars[n - 1], ro(nm + "_ro"), ri(nm + "_ri"), u(nm + "_lane");
    H::RVar r = f.rvars[0], rxo(nm + "_rxo"), rxi(nm + "_rxi");
    auto outer = [&](H::Stage st) {
      std::vector<H::VarOrRVar> b;
      if (n < 2)
        return b;
      H::VarOrRVar o = f.vars[0];
      for (size_t i = 1; i + 1 < n; ++i) {
        H::Var fused(nm + "_bz" + std::to_string(i));
        st.fuse(f.vars[i], o, fused);
        o = fused;
      }
      b.push_back(o);
      return b;
    };
    H::Stage init = f.func;
    init.gpu_tile(row, ro, ri, rowsPerBlock, H::TailStrategy::GuardWithIf);
    for (auto &b : outer(init))
      init.gpu_blocks(b);
    H::Func lanes =
        f.func.update().split(r, rxo, rxi, kWarp, H::TailStrategy::GuardWithIf).rfactor(rxi, u);
    H::Stage upd = f.func.update();
    upd.split(row, ro, ri, rowsPerBlock, H::TailStrategy::GuardWithIf)
        .gpu_threads(ri)
        .gpu_blocks(ro);
    for (auto &b : outer(upd))
      upd.gpu_blocks(b);
    lanes.compute_at(f.func, ri).gpu_lanes(u);
    lanes.update().gpu_lanes(u);
  }
};

} // namespace

std::unique_ptr<ScheduleRule> makeCudaDenseRule() { return std::make_unique<CudaDenseRule>(); }

} // namespace attnc
