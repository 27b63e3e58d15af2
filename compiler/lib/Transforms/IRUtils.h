// IR helpers that more than one attn pass needs: cloning the ops a value is computed by, and
// dependence on an index.
#pragma once

#include "attnc/Dialect/AttnOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

#include <optional>
#include <string>

namespace attnc {

// Clones into `b` what computing `v` needs from inside `scope`'s regions, with `map` giving the
// region's indices (and caching what was cloned); values from outside `scope` are used as they
// are. Returns `v`'s clone.
mlir::Value materialize(mlir::Value v, mlir::Operation *scope, mlir::IRMapping &map,
                        mlir::OpBuilder &b);

// A new definition over `extents` (named `names`) before `at`, whose body `build` fills from its
// arguments and returns the yielded value (f32).
attn::DefineOp
makeDefine(mlir::Operation *at, llvm::StringRef name, llvm::ArrayRef<mlir::Value> extents,
           llvm::ArrayRef<std::string> names,
           llvm::function_ref<mlir::Value(mlir::OpBuilder &, mlir::ValueRange)> build);

// `n`, or `n_2`, `n_3`, ... : the first not in `taken`, which it joins (names of new definitions).
std::string uniqueName(llvm::StringRef n, llvm::StringSet<> &taken);

// Whether `v` is computed from `arg` (through its operands and the regions of nested ops).
bool dependsOn(mlir::Value v, mlir::Value arg);

// Whether `v` is computed from a tensor read (an input or a definition): data, not indices.
bool readsTensor(mlir::Value v);

// attn-mask-bounds' analysis (MaskBounds.cpp): the affine bounds on `axes` (positions among
// `body`'s arguments, extents `extents`) that the i1 mask `body` yields second implies, as
// `attn.bounds` entries; null when there are none. attn-online-softmax asks it for the masks it
// makes itself (an unnormalised weight's select).
mlir::ArrayAttr maskAxisBounds(mlir::Block &body, llvm::ArrayRef<int64_t> axes,
                               mlir::ValueRange extents);

// The value of the index expression `v` (sizes, constants, + - * / % max min) with the sizes from
// the kernel's estimates `est` (null: none); nullopt when it has no value, with the sizes that
// had no estimate added to `missing`. attn-sample-order and attn-contraction-order price their
// choices with it.
std::optional<int64_t> evalIndex(mlir::Value v, mlir::DictionaryAttr est,
                                 llvm::SetVector<llvm::StringRef> &missing, int depth = 0);

// Records a cost-based pass's choice for the value `source` in `owner`'s dictionary attribute
// `attrName`: {order, the costs that are known, reason when not empty}. A later run of the pass
// replaces the entry for the same source, so the note stays one per choice. attn-sample-order and
// attn-contraction-order explain themselves with it.
void recordChoice(mlir::Operation *owner, llvm::StringRef attrName, llvm::StringRef source,
                  llvm::StringRef order,
                  llvm::ArrayRef<std::pair<llvm::StringRef, std::optional<int64_t>>> costs,
                  llvm::StringRef reason);

// The value of the integer constant `v`, if it is one.
std::optional<int64_t> constIndex(mlir::Value v);

// An index expression as sum(coefficient x atom) + constant, through + - and multiplication by a
// constant; anything else is an atom of its own (linearIndex).
struct LinearIndex {
  llvm::MapVector<mlir::Value, int64_t> terms;
  int64_t constant = 0;

  void add(const LinearIndex &o, int64_t scale);
  // (Terms of coefficient 0 do not count.)
  bool operator==(const LinearIndex &o) const;
};
LinearIndex linearIndex(mlir::Value v, int depth = 0);

// `e - floordiv(e, m) * m`, the DSL's `e % m`: e and m, or nothing.
std::optional<std::pair<mlir::Value, mlir::Value>> matchRem(mlir::Value v);

// The constants m of the conjuncts `y % m == 0` (m > 0) that `kernel`'s requires state.
llvm::SmallVector<int64_t> requiredModuli(attn::KernelOp kernel, mlir::Value y);

// Whether a require of `kernel` states `y % m == 0` (a conjunct) for a constant m that is a
// multiple of `ws` (`Y % 8 == 0` proves windows of 2, 4 and 8 whole).
bool requiresMultiple(attn::KernelOp kernel, mlir::Value y, int64_t ws);

} // namespace attnc
