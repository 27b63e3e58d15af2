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
// The spelling of `o` that parseSampleOrder reads (attn-sample-order's `order` option).
const char *sampleOrderName(SampleOrder o);

// The passes' classes, options structs (SampleOrderPassOptions, OnlineSoftmaxPassOptions) and
// create...Pass() functions, declared in Passes.td.
#define GEN_PASS_DECL
#include "attnc/Transforms/Passes.h.inc"

// registerAttnPasses(): registers every pass of Passes.td with MLIR's pass registry (attn-opt).
#define GEN_PASS_REGISTRATION
#include "attnc/Transforms/Passes.h.inc"

// The name of the kernel attribute holding size estimates (a dictionary of i64 by size name).
inline constexpr const char *kEstimatesAttr = "attn.estimates";

// The keys per tile that may be asked of attn-online-softmax (0 lets it choose): cpu-online's
// schedule vectorises a whole tile, which takes minutes to compile beyond about 1024 lanes (and
// Halide refuses 32768).
inline constexpr int64_t kMinOnlineTile = 1, kMaxOnlineTile = 1024;
// The keys per tile when the key count is unknown or large: attn-online-softmax's choice (measured
// there), and the tile cpu-online and the schedule's description take as the default.
inline constexpr int64_t kDefaultOnlineTile = 128;
// The keys per tile of an online softmax's tiles that test nothing (attn.online_softmax's
// whole_tile: no mask, not the last tile), where the key count is unknown or at least this:
// every row visits every tile, so longer tiles only halve the per-tile work (the state's
// rescaling, the tile's max and sum reductions) against the same GEMMs, and the keys past the
// last multiple of it go to tiles of the default length, which waste no more than before.
// Measured on the 2-core Zen 4 (32 KiB L1), A/B in one process, tiles of 128 vs 256 keys
// throughout: sdpa B1 H8 N2048 D64 60.4 vs 57.4 ms, N256 1.24 vs 1.12 ms; at N=32 and at key
// counts that are odd multiples of 128 the longer tiles alone lost (slots past the keys).
inline constexpr int64_t kWholeOnlineTile = 256;
// Query rows per group over which an online softmax's mask bounds skip key tiles
// (attn.online_softmax's query_group): attn-online-softmax's choice. cpu-online's query tile
// follows the group's, so a tile's rows are all computed or all skipped.
inline constexpr int64_t kDefaultOnlineQueryGroup = 32;

struct PipelineOptions {
  SampleOrder sampleOrder = SampleOrder::Auto;
  std::map<std::string, int64_t> estimates; // size name -> typical value; merged into every kernel
  // attn-online-softmax. attnc turns it off for CUDA targets, whose cuda-dense schedule keeps the
  // unfused scores in shared memory tiles instead.
  bool onlineSoftmax = true;
  int64_t onlineTile = 0;
};

// attnc's pass pipeline, the one definition of which passes run in which order with which options:
// runPassPipeline runs it, attn-opt offers it as --attn-pipeline.
void buildPassPipeline(mlir::OpPassManager &pm, const PipelineOptions &opts);

// Sets size estimates on every kernel of `module` and runs buildPassPipeline's passes.
// Diagnostics go through the context's handler; returns failure if a pass failed.
mlir::LogicalResult runPassPipeline(mlir::ModuleOp module, const PipelineOptions &opts);

// Registers buildPassPipeline as `attn-pipeline` (attn-opt), with options named like attnc's
// flags: sample-order, online-softmax and online-tile. Size estimates come from the kernels'
// `attn.estimates` attributes, as attnc's do without --sizes.
void registerAttnPipeline();

} // namespace attnc
