// The lowering of one attn.kernel to Halide Funcs: the Lowerer, its state and what its files share.
//
// Private to HalideGen. Its members are defined by responsibility: HalideGen.cpp (the kernel,
// definitions, requirements), ScalarExpr.cpp (scalar expressions and reads), Reductions.cpp
// (sums, max, min and their mask bounds), Softmax.cpp, OnlineSoftmax.cpp (the streaming form,
// with its tile predicates) and TileVisits.cpp (the tile-visit counts).
#pragma once

#include "IeeeMath.h"
#include "attnc/HalideGen.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/AffineMap.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>

using namespace mlir;
namespace H = Halide;

namespace attnc::lowering {

using Env = llvm::DenseMap<Value, H::Expr>;

[[noreturn]] inline void unsupported(Operation *op, const std::string &what) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << op->getLoc() << ": HalideGen: " << what << ": " << op->getName();
  throw std::runtime_error(os.str());
}

template <typename T> std::vector<T> reversed(std::vector<T> v) { return {v.rbegin(), v.rend()}; }

inline std::vector<H::Expr> toExprs(const std::vector<H::Var> &vars) {
  return {vars.begin(), vars.end()};
}

class Lowerer {
public:
  explicit Lowerer(bool hostGatherChecks) : hostGatherChecks_(hostGatherChecks) {}
  LoweredKernel run(attn::KernelOp kernel);

private:
  LoweredKernel out_;
  llvm::DenseSet<Value> returned_;
  std::vector<H::Func> dataChecks_;
  // Where the reads being lowered count: a masked softmax's mask in its score, the condition
  // under which a product is not structurally 0 in its other factors. Undefined: everywhere. A
  // gather's out-of-range check holds only there, so that a masked key's table entry (-1 in a
  // padded page table) is never an error, with or without the online softmax.
  H::Expr readGuard_;
  const bool hostGatherChecks_;
  int gatherChecks_ = 0;
  // The extent of each index by its Halide name (definitions' and softmaxes' variables, as their
  // bodies are lowered; reduction variables), for the domains of host gather checks.
  std::map<std::string, H::Expr> indexExtents_;
  // indexExtents_ for one body being lowered: a definition's own (`inherit` false: the map starts
  // empty) or a nested reduction's (the enclosing ones and its own); the enclosing body's map
  // comes back when the body is done.
  struct IndexScope {
    std::map<std::string, H::Expr> &live, saved;
    IndexScope(std::map<std::string, H::Expr> &m, bool inherit) : live(m), saved(m) {
      if (!inherit)
        live.clear();
    }
    ~IndexScope() { live = std::move(saved); }
    IndexScope(const IndexScope &) = delete;
    IndexScope &operator=(const IndexScope &) = delete;
  };
  // Narrows readGuard_ to where `cond` holds too (an undefined `cond`: unchanged) while it lives.
  struct GuardScope {
    H::Expr &live, saved;
    GuardScope(H::Expr &g, const H::Expr &cond) : live(g), saved(g) {
      if (cond.defined())
        live = live.defined() ? live && cond : cond;
    }
    ~GuardScope() { live = std::move(saved); }
    GuardScope(const GuardScope &) = delete;
    GuardScope &operator=(const GuardScope &) = delete;
  };
  // A gather of input `tensor` at index `i` in DSL dimension `dim` of extent `extent`, valid
  // where `ok` holds, checked by Funcs `gather__<n>` (the first point, in the order of its
  // indices, where `ok` fails) and `gather__<n>__check` (a data check). False when `ok` uses
  // an index whose extent is unknown (the caller then refuses the read for GPU targets).
  bool addHostGatherCheck(const H::Expr &ok, const H::Expr &i, const std::string &tensor, int dim,
                          const H::Expr &extent);
  void bindIndices(ArrayRef<H::Var> vars, ValueRange extents, Env &env);

  // Whether a requirement's condition reads tensor values (not only sizes and constants).
  static bool conditionReadsData(Value cond);

  // A requirement on input values cannot be a Pipeline requirement (those may not call Funcs),
  // so it becomes a scalar Func `require__<n>` that is 0 or fails with the requirement's message,
  // and every output adds it (+0) to its first definition: no call returns results computed from
  // inputs that break it. (Reads through the tables it guards are clamped, never out of bounds.)
  void lowerDataRequirement(attn::RequireOp req);

  // `value` plus every data check (each 0 once passed), for the first definition of an output.
  H::Expr guarded(Value result, H::Expr value);
  llvm::DenseMap<Value, int> inputIndex_;
  llvm::DenseMap<Value, std::string> funcNames_;
  std::map<std::string, H::Expr> sizes_; // by size name, for attn.bounds
  std::map<std::string, int> partCounter_;
  struct NestedReduce {
    std::string name;
    std::vector<BlockArgument> captured;
  };
  llvm::DenseMap<Operation *, NestedReduce> nestedReduce_;

  LoweredFunc &addFunc(LoweredFunc f);
  // Sets every Func's `reads` from its definitions, once all are lowered.
  static void computeReads(LoweredKernel &k);

  std::vector<H::Var> makeVars(ArrayAttr names);
  static std::vector<std::string> strings(ArrayAttr names);

  H::RDom makeRDom(ValueRange extents, ArrayAttr names, Env &env, const std::string &owner);

  // An affine bound of attn.bounds in Halide; undefined if it uses a dimension without a value.
  H::Expr affine(AffineExpr e, const std::vector<H::Expr> &dims, ArrayRef<StringAttr> sizes);

  // Restricts `r` to the attn.bounds of `op` (a softmax or a reduction): index `i` of the bounds is
  // RDom dimension `rdomDim[i]` (-1: none), and the maps' dimensions take the values `dims`.
  // Returns whether it added a predicate.
  // Points outside the bounds are masked (softmax) or add zero (sums), so skipping them changes
  // no result; Halide turns these predicates into loop bounds that depend on the outer indices.
  bool restrictToBounds(H::RDom &r, Operation *op, const std::vector<int> &rdomDim,
                        const std::vector<H::Expr> &dims);

  static Operation *enclosingDefinition(Operation *op);

  // A reduction's bounds: its indices are the RDom's dimensions, the maps' dimensions are the
  // indices of its enclosing definition as `env` has them.
  bool restrictReduction(H::RDom &r, attn::ReduceOp red, Env &env);

  static H::Expr castTo(Type t, H::Expr e);

  // --- definitions ---------------------------------------------------------------------------
  void lowerDefine(attn::DefineOp op);

  void lowerSoftmax(attn::SoftmaxOp op);

  // attn.online_softmax (attn-online-softmax): FlashAttention's streaming softmax over key tiles
  // of `tile` slots. Per tile: the row max of the scores (`__tmax`), their exps against it
  // (`__texp`), the exp sum (`__tsum`) and the exps times the value (`__tpv`); the state
  // (`__state`: running max, sum, accumulator) folds one tile per step of an RDom over the tiles,
  // rescaling by exp(old max - new max).
  // Slot r of tile t holds key base(t) + r, base(t) = min(t*T, Nk - T): when T does not divide Nk,
  // the last tile is shifted back to end at the last key and masks the slots an earlier tile
  // already counted, so every read is its tile's first key plus the slot, never a per-key clamp
  // (clamped keys vectorise to gathers that Halide could not partition away under a mask). With
  // fewer keys than slots (Nk < T) base is 0 and slots past the last key are masked.
  void lowerOnline(attn::OnlineSoftmaxOp op);

  // What an online softmax's tile-visit counts need of its lowering: its row blocks, its tiles and
  // the predicates its state updates test.
  struct TileLoops {
    std::string name;     // the online softmax
    std::string tileName; // the tile index's name
    H::Expr tiles;        // key tiles per row block
    bool masked = false;  // the softmax has a mask
    // The score's row indices, outermost first: the query as groups when grouped (`var` is the
    // index the predicates use for it, `blocks` its extent in blocks).
    struct Row {
      std::string name;
      H::Var var;
      H::Expr blocks;
    };
    std::vector<Row> rows;
    // Tile t -> (visible, fully visible) as the updates test them; undefined: not tested.
    std::function<std::pair<H::Expr, H::Expr>(H::Expr)> predicates;
    bool split = false;    // the fully visible tiles have a chain of their own
    bool disjoint = false; // the two chains' tile ranges are disjoint already (key ranges)
  };
  // The pairs of (row block, key tile) an online softmax's state visits, counted by the same
  // predicates as its updates (TileVisits.cpp).
  static TileVisits lowerTileVisits(const TileLoops &l);

  // A reduction's body, made to use its domain: Halide attaches an RDom to an update only through
  // the RVars the update mentions, so `sum(j in 0..N) 1.0` would run once, not N times. A body
  // that mentions none gets `+ 0 * j` (in the body's type), which lowering simplifies away after
  // the loop over the domain exists.
  static H::Expr iterateAll(H::Expr v, const H::RDom &r);

  static H::Expr initValue(StringRef kind, H::Type t);
  static H::Expr combine(StringRef kind, H::Expr acc, H::Expr v);
  // a / b by IEEE rules. Halide refuses to generate a division by a divisor it simplifies to a
  // constant zero (the `mean` of an empty domain divides by 0, and a kernel may write `/ 0.0` or
  // `/ (y - y)`), so that case is spelt out: NaN for 0 / 0, a NaN operand, or a divisor that is
  // NaN after all (y - y and y * 0.0 are, for a NaN or infinite y); otherwise +-inf by the
  // signs, the divisor's sign bit included (y * 0.0 is -0 for a negative y). Strict floats keep
  // the divisor's own NaN test and sign from being folded.
  // A divisor that is not a constant here may still become a constant 0 in Halide's lowering
  // (known sizes, the out-of-range part of a loop over a `.zero` read: rsqrt(x.zero(..)) gave
  // "Division by constant zero", fuzz seed 772683725). It is divided as b + -0.0, which is b
  // for every float (-0 + -0 = -0) and which strict floats never fold, so the hardware divides
  // and gives IEEE's result.
  static H::Expr fdiv(const H::Expr &a, const H::Expr &b);
  // `m` (a max or min of x and y), or NaN when x or y is NaN (x + y is then NaN).
  static H::Expr nanPropagating(H::Expr x, H::Expr y, H::Expr m);
  static bool nonNegative(Value v);

  // Block arguments of enclosing index regions that `root`'s region depends on, outermost first.
  // Only indices of regions that enclose `root` count: reads of other definitions are calls to
  // their Funcs, and a sibling reduction's own indices are bound inside it.
  void collectCaptured(Operation *root, llvm::SetVector<BlockArgument> &captured);

  static std::string indexName(BlockArgument ba);

  static std::string definitionOf(Operation *op);
  static std::optional<std::string> sourcePosition(Location loc);

  // A reduction nested in a larger expression becomes its own Func `<def>__<kind><n>` over the
  // enclosing indices it uses; the expression calls it.
  H::Expr lowerNestedReduce(attn::ReduceOp op, Env &env);

  // A read of an input or a definition. Halide's dimension order is the reverse of the DSL's.

  // Whether subscript `sub` of a read is inside dimension `d` by construction: a bare index
  // (a region argument, which MLIRGen keeps for ranges starting at 0) whose extent is the
  // dimension's. Such a subscript needs no clamp and no range test.
  bool inRangeByConstruction(Value sub, Value tensor, size_t d);

  // A read, as its value at the clamped subscripts and the condition under which that value is
  // the one read (false: a `.zero`/`.exclude` read outside the tensor, whose value is 0).
  struct ReadParts {
    H::Expr value, inRange;
  };

  H::Expr lowerRead(attn::ReadOp r, Env &env);

  // Whether computing `v` inside `owner`'s body involves a reduction.
  static bool reducesIn(Value v, Operation *owner);

  // Structural zeros (docs/language.md §6): a `.zero` or `.exclude` read outside its tensor and a
  // masked entry of a softmax are exact zeros that make a product they are a factor of 0, even
  // when another factor is inf or NaN (a zero-padded sample times an infinite weight, a masked
  // probability times a NaN value: the masked key is never read). For a product, negation or
  // quotient with such a factor: its value computed from the raw reads, and the condition under
  // which it is not structurally 0. Empty for anything else.
  std::optional<ReadParts> structural(Value v, Env &env);

  ReadParts lowerReadParts(attn::ReadOp r, Env &env);

  // --- scalar expressions --------------------------------------------------------------------
  H::Expr eval(Value v, Env &env);

  H::Expr evalOp(Operation *op, Env &env);
};

} // namespace attnc::lowering
