// Passes over the attn dialect and the pipeline attnc runs between MLIRGen and HalideGen.
#pragma once

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>

namespace attnc {

// Where a projection read by bilinear sampling is applied (seed 000's two orders).
enum class SampleOrder {
  Auto,         // by cost, from the kernel's size estimates; as written when they are missing
  SampleFirst,  // sample the projection's input, then project every sampled point
  ProjectFirst, // keep the projection over the whole map, then sample it (no rewrite)
};

// "auto", "sample-first", "project-first"; false for anything else.
bool parseSampleOrder(const std::string &s, SampleOrder *out);

// attn-sample-order: for a definition v = sum_c x(..., c) * w(..., c) [+ bias] that is read only
// through expressions linear in it (bilinear sampling and weighted sums), chooses between
// computing v everywhere and sampling it (project-then-sample, cost prod(v's extents) * C) and
// sampling x and projecting each sampled point (sample-then-project, cost prod(the reading
// site's iteration space) * C), as seed 000 does: N_k * C^2 against N_q * K * C^2. The sizes come
// from the kernel's `attn.estimates` attribute. Every consumer records the decision and both
// costs in an `attn.sample_order` attribute, so `--emit=mlir` shows it.
std::unique_ptr<mlir::Pass> createSampleOrderPass(SampleOrder order = SampleOrder::Auto);

// attn-mask-bounds: for each softmax axis with a symbolic extent, the conjuncts of its mask that
// bound the axis affinely in the other indices and the sizes (`j <= i`, `j >= i - w`,
// `j <= i + Nk - Nq`) become an `attn.bounds` attribute on the softmax; a sum whose body is zero
// wherever such a softmax is zero (`sum(j) p(.., j) * v(.., j, e)`) gets the bounds carried over
// to its index. HalideGen restricts those reductions to the bounds (docs/language.md §9).
std::unique_ptr<mlir::Pass> createMaskBoundsPass();

// attn-online-softmax: rewrites a softmax over one (non-window) axis that is read only by a sum
// over that axis of the probabilities times a value into attn.online_softmax, which HalideGen
// lowers to FlashAttention's streaming form (running max, sum and rescaled accumulator over tiles
// of `tile` keys; 0 picks it from the key count estimate). A softmax it leaves alone records why
// in `attn.online`.
std::unique_ptr<mlir::Pass> createOnlineSoftmaxPass(int64_t tile = 0);

// Registers the attn passes with MLIR's pass registry (for attn-opt).
void registerAttnPasses();

// The name of the kernel attribute holding size estimates (a dictionary of i64 by size name).
inline constexpr const char *kEstimatesAttr = "attn.estimates";

// The keys per tile that may be asked of attn-online-softmax (0 lets it choose): cpu-online's
// schedule vectorises a whole tile, which takes minutes to compile beyond about 1024 lanes (and
// Halide refuses 32768).
inline constexpr int64_t kMinOnlineTile = 1, kMaxOnlineTile = 1024;
// The keys per tile when the key count is unknown or large: attn-online-softmax's choice (measured
// there), and the tile cpu-online and the schedule's description take as the default.
inline constexpr int64_t kDefaultOnlineTile = 128;

struct PipelineOptions {
  SampleOrder sampleOrder = SampleOrder::Auto;
  std::map<std::string, int64_t> estimates; // size name -> typical value; merged into every kernel
  // attn-online-softmax. attnc turns it off for CUDA targets, whose cuda-dense schedule keeps the
  // unfused scores in shared memory tiles instead.
  bool onlineSoftmax = true;
  int64_t onlineTile = 0;
};

// Sets size estimates on every kernel of `module` and runs attnc's default pass pipeline.
// Diagnostics go through the context's handler; returns failure if a pass failed.
mlir::LogicalResult runPassPipeline(mlir::ModuleOp module, const PipelineOptions &opts);

} // namespace attnc
