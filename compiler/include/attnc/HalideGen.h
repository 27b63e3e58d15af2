// HalideGen: lowers an attn.kernel to a Halide pipeline (the algorithm only, no schedule).
#pragma once

#include "attnc/Dialect/AttnOps.h"
#include "attnc/tensor_type.h"

#include "Halide.h"

#include <map>
#include <set>
#include <string>
#include <vector>

namespace attnc {

// What a lowered Func computes; schedule rules match on these roles, never on Halide internals.
enum class FuncRole {
  Define,       // a pointwise definition
  Reduction,    // a sum/max/min (the definition itself when its whole body is one reduction)
  SoftmaxScore, // the scores of a softmax, over all indices
  SoftmaxMax,   // running max over the softmax axes
  SoftmaxExp,   // exp(score - max), zero where masked
  SoftmaxSum,   // sum of SoftmaxExp over the axes
  Softmax,      // the normalised probabilities (the DSL name)
  Check, // `require__<n>`: a requirement on input values, 0 or a run-time error (compute it once, at root)
  // attn.online_softmax's parts, over key tiles t of T slots r (key t*T + r; the last tile is
  // shifted back to end at the last key, see HalideGen's lowerOnline). Under exact mask bounds
  // the tile parts come twice: `<o>__<part>_full` for fully visible tiles, without the mask:
  OnlineScore,     // `<o>__score`: the scores, masked ones -inf (inlined)
  OnlineTileMax,   // `<o>__tmax`(rows, t): the tile's max score
  OnlineTileExp,   // `<o>__texp`(rows, r, t): exp(score - its tile's max); unnormalised, the weight
  OnlineTileSum,   // `<o>__tsum`(rows, t): sum of the tile's exps
  OnlineTileValue, // `<o>__tpv`(indices, t): sum over the tile of exp times value
  OnlineState,     // `<o>__state`(indices): (running max, sum, accumulator), one update per tile
                   // (unnormalised: the accumulator alone)
  Online,          // `<o>`: accumulator / sum (0 for a row with no unmasked key)
};
const char *funcRoleName(FuncRole r);

// Funcs are named by their index in LoweredKernel::funcs, not by pointer: an index stays valid
// while the kernel is moved or copied, and the same index names the same Func in every copy.
using FuncIndex = size_t;

struct LoweredFunc {
  std::string name;       // the DSL definition's name, or `<def>__<part>` for generated parts
  std::string definition; // the DSL definition it belongs to
  FuncRole role;
  Halide::Func func;
  std::vector<std::string> varNames;  // DSL order, outermost first (Halide's order is reversed)
  std::vector<Halide::Var> vars;      // same order as varNames
  std::vector<std::string> rvarNames; // reduction indices (Reduction, SoftmaxMax, SoftmaxSum)
  std::vector<Halide::RVar> rvars;
  std::string reduceKind;       // "sum" / "max" / "min" for reductions
  std::vector<int> softmaxAxes; // Softmax parts: positions of the axes in the definition's indices
  // Its reduction runs over part of its domain only: a mask bound (attn.bounds) became an RDom
  // predicate, from which Halide derives loop bounds that depend on the outer indices.
  bool maskBounded = false;
  bool isOutput = false;
  // A definition's index extents, DSL order (empty for generated parts): what a rule may ask of
  // an index the Func's consumers do not bound by a constant (a window's 49 positions).
  std::vector<Halide::Expr> extents;
  // A copy of an input at computed subscripts that attn-gather-reads made its own definition
  // (attn.gather): inlined where it is read unless a rule places it.
  bool gather = false;
  // Names of the kernel inputs and Funcs its definitions call, so rules can find producers and
  // consumers: each once, in the order of its first call (the pure definition, then the updates;
  // in each, values, arguments, then the domain's predicate; a call's arguments before the call).
  std::vector<std::string> reads;
};

struct KernelParam {
  std::string name;
  Halide::ImageParam param;
  TensorType type; // element type and symbolic dims, DSL order
};

// The Halide type of a tensor element (the one place HalideGen maps the shared element types).
Halide::Type halideType(DType dtype);

// A bf16/f16 value as f32, and an f32 value rounded to bf16/f16 (nearest, ties to even; NaN stays
// NaN). bf16 is spelt in integer operations on its bits (a shift, an add and a select per
// vector), which Halide vectorises on every target, where its own bf16 casts are emulated
// element by element without a bf16 target feature (and say so on stderr); f16 is Halide's
// cast, one F16C instruction per vector on x86.
Halide::Expr widenStorage(Halide::Expr v);
Halide::Expr narrowStorage(Halide::Expr f, DType to);
// The bf16 read that `e` widens to f32, spelt as widenStorage does or as Halide's cast; null for
// anything else (a schedule that rewrites a widened product, cpu-online's bf16 dot products).
const Halide::Internal::Call *widenedBF16Read(const Halide::Expr &e);

// How many (row block, key tile) pairs an online softmax's state visits: the same tile predicates
// as its updates, evaluated on their own (no tile is computed). A row block is the group's
// queryGroup query rows when it is grouped, otherwise one row of the softmax.
struct TileVisits {
  bool masked = false; // the softmax has a mask; without one no tile tests anything
  // () -> (visited, visited with the mask test, all pairs), int64. Reads the kernel's inputs (a
  // key padding mask's tile counts): set their params before realizing it.
  Halide::Func count;
};

// One chain of an online softmax's tile Funcs (the FuncRoles Online*): a tile's scores, max, exps,
// exp sum and exps times values, computed once per step of the state update that folds them.
// An unnormalised group's chains (OnlineGroup::normalized false) have no max and no exp sum:
// tmax and tsum are kNoFunc, texp holds the weights.
inline constexpr FuncIndex kNoFunc = ~FuncIndex(0);

struct OnlineChain {
  FuncIndex score = 0, tmax = kNoFunc, texp = 0, tsum = kNoFunc, tpv = 0;
  // The state update that folds these tiles: its index in OnlineGroup::chains, and the state's
  // rvars[stage] is that update's tile index.
  int stage = 0;
  // The fully visible tiles (`<o>__tmax_full`, ...): no mask test, every slot a key.
  bool full = false;
  // The whole tiles of a group's key ranges (`<o>__tmax_whole`, ...: attn.online_softmax's
  // whole_tile keys each, inside every row's visible keys), whose updates Halide guards as a
  // whole (producers included) by the range's test. (Without a mask the full chain's tiles are
  // the whole ones, the masked chain's the rest.)
  bool groupWhole = false;
  // Keys per tile of this chain (its slots; the masked chain's exps x values step may stop
  // earlier, at the key count).
  int tile = 0;
};

// One attn.online_softmax as HalideGen lowered it (lowerOnline): its Funcs, by index, and what the
// lowering decided about its tiles, which schedules build their loops from.
struct OnlineGroup {
  std::string name;     // the DSL definition (the output Func's name)
  FuncIndex output = 0; // `<o>`: accumulator / sum
  FuncIndex state = 0;  // `<o>__state`: (running max, sum, accumulator), one update per chain
  // In the order of the state's updates: under exact mask bounds (or key ranges with fully visible
  // tiles) the chain of fully visible tiles first, then the masked one; otherwise the masked one.
  std::vector<OnlineChain> chains;
  // A softmax (running max, exp sum, rescaling); false for an `unnormalized` op, whose state is a
  // plain sum of the tiles' weighted values.
  bool normalized = true;
  // `<o>__tkeys` and `<o>__tranges` (a key padding mask's visible keys and tile ranges), read by
  // the state's domain predicates: Halide has no loop level inside a predicate to compute them
  // at, so every schedule computes them at root.
  std::vector<FuncIndex> predicateInputs;
  // Among them, for a mask that reads a tensor at the query row, `<o>__rkeys` (per query row its
  // visible keys' first, end and count: a reduction over every key, indexed last by the row) and
  // `<o>__gkeys` (per query group their extremes: a reduction over the group's rows, indexed
  // last by the group); part of the group's definition, so the online rule schedules them
  // (generic rules compute them at root, when forced on such a kernel).
  FuncIndex rowKeys = kNoFunc;
  FuncIndex groupKeys = kNoFunc;
  int tile = 0;          // keys per tile
  Halide::Expr keyCount; // with keyCount >= tile every key read is a plain offset from its tile's
                         // first key, which schedules specialise for
  // Under mask bounds the state is indexed by (query group, row in group) in place of the query
  // row, so that each group of queryGroup rows visits its tiles with all its rows.
  bool grouped = false;
  int queryGroup = 0; // rows per group (attn.online_softmax's query_group)
  // The tile updates are bounded by data-dependent key ranges (`<o>__tranges`, a key padding
  // mask): LoweredKernel::pipeline() bounds those tile loops by them (KeyRangeLoops.cpp), which
  // needs every store an iteration makes to a buffer that outlives it under the range's `if`s:
  // the tile Funcs must be allocated inside the tile loop.
  bool keyRanged = false;
  // The extent of each index of the result, by name (the value index's among them).
  std::vector<std::pair<std::string, Halide::Expr>> extents;
  // Instrumentation, not part of the pipeline (attnc::countTileVisits evaluates it).
  TileVisits visits;

  // The chain with the mask test (every online softmax has one).
  const OnlineChain &masked() const;
};

struct LoweredKernel {
  std::string name;
  std::vector<KernelParam> inputs;
  std::vector<std::string> outputNames;
  std::vector<TensorType> outputTypes; // same order as outputNames
  // Same order: for a bf16/f16 output, the Func that rounds its f32 definition into the output
  // buffer (the pipeline's output, named `<o>__bf16` or `<o>__f16`); undefined for f32/i32
  // outputs.
  std::vector<Halide::Func> stores;
  std::vector<LoweredFunc> funcs; // producers before consumers
  // Conditions on the sizes (attn.require), checked before anything is computed.
  std::vector<std::pair<Halide::Expr, std::string>> requirements;
  // One per attn.online_softmax, in the kernel's order.
  std::vector<OnlineGroup> onlineGroups;
  // Where each DSL definition is written ("file:line:col"), for diagnostics about its plan.
  std::map<std::string, std::string> definitionLocs;
  // Reads of an input at an index taken from a tensor (a page table's entry) that could not be
  // checked on the host (lowerToHalide's hostGatherChecks): "file:line:col" of the read and the
  // tensor's name. A GPU kernel cannot format a check's message in device code (Halide's
  // `require` there is an internal error), so GPU targets refuse them.
  std::vector<std::pair<std::string, std::string>> inputGathers;
  // Whether compiling for a GPU checks the blocks' threads and shared memory against constant
  // bounds (GpuLaunchLimits.cpp). attnc's rules must pass; Halide's autoscheduler (Anderson2021)
  // sizes shared memory for its --sizes estimates, so its schedules are left to the launch.
  bool checkGpuLaunches = true;
  // Whether the kernel is scheduled for a GPU (set where a schedule is applied). The softmax's
  // exps are then Halide's (a libdevice call, ~10 instructions, where IeeeMath.h's
  // nonPositiveExp is ~20 on the FMA pipes): applyFloatSemantics expands them by it.
  bool gpu = false;
  // The Functions applyFloatSemantics has made strict: applying it again leaves them as they are
  // (strict_float over the expanded exps would make their polynomial strict too). Copies of the
  // kernel (clone) copy their Functions already made strict.
  mutable std::set<std::string> strictFuncs;

  LoweredFunc *find(const std::string &name);
  const LoweredFunc *find(const std::string &name) const;
  std::vector<Halide::Func> outputs() const;
  // The buffer output `f` is stored in: its own, or its rounding Func's (stores) for a bf16/f16
  // output. Same extents either way; rules that bound loops by an output's extent ask here.
  Halide::OutputImageParam outputBuffer(const LoweredFunc &f) const;
  std::vector<Halide::Argument> arguments() const;
  // The kernel's pipeline, with IEEE float semantics applied to every Func (after scheduling,
  // as every compile path calls this; applyFloatSemantics is idempotent).
  Halide::Pipeline pipeline() const;
};

// Gives every float operation of the kernel's Funcs IEEE semantics for inf and NaN (Halide's
// default assumes neither), except the multiply-adds of sums of products, which stay free to
// become fused multiply-adds (FloatSemantics.cpp). Idempotent.
void applyFloatSemantics(const LoweredKernel &k);

// Makes `p` check the kernel's size requirements before Halide's checks of the inputs' regions,
// so that a call breaking one is told the requirement, not a read outside an input
// (RequirementsFirst.cpp).
void checkRequirementsFirst(Halide::Pipeline &p);

// Makes compiling `p` for a GPU fail when a block's thread count has no constant bound within
// CUDA's limits, instead of the launch failing on the device (GpuLaunchLimits.cpp).
void checkGpuLaunchLimits(Halide::Pipeline &p);

// Makes `p` run each named loop (an online state's key-tile loop under key ranges) only over the
// tiles its ranges let through, which Halide does not do for a predicate that reads a Func
// (KeyRangeLoops.cpp).
void boundKeyRangeLoops(Halide::Pipeline &p, const std::vector<std::string> &loops);

// The names of the variables `e` uses that none of its lets binds; without the buffers' and
// parameters' own (`q.extent.1`) unless `withParams` (ExprQueries.cpp).
std::set<std::string> freeVars(const Halide::Expr &e, bool withParams = true);

// Whether `e` reads a tensor (an input or a Func): as an index, a gather such as `q(m(i))`, which
// Halide cannot bound from the loop ranges (ExprQueries.cpp).
bool readsData(const Halide::Expr &e);

// Lowers one kernel. Throws std::runtime_error for IR that has no Halide lowering.
// hostGatherChecks (GPU targets): a read of an input at an index taken from a tensor is clamped,
// and checked before the kernel by a scalar Func over the indices the index uses, where the read
// counts (Lowerer::readGuard_), instead of by a `require` at the read (CPU targets).
LoweredKernel lowerToHalide(attn::KernelOp kernel, bool hostGatherChecks = false);

// A copy of an unscheduled lowering that shares no Halide object with it (Funcs, inputs,
// reduction domains; names are kept), so that one lowering serves every schedule candidate:
// scheduling the copy leaves `k` as it was, and the copy compiles to what a fresh lowering
// scheduled the same way compiles to (Clone.cpp, whose list of each struct's Halide members a new
// member is added to). Throws std::logic_error for a kernel already given wrappers (`in()`).
LoweredKernel clone(const LoweredKernel &k);

// A readable dump of the algorithm: every Func's pure and update definitions (`--emit=halide`).
std::string printAlgorithm(const LoweredKernel &k);

} // namespace attnc
