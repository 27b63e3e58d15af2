// The attn MLIR dialect and its attributes (declarations generated from AttnDialect.td, AttnAttrs.td).
#pragma once

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/DialectImplementation.h"

#include "attnc/tensor_type.h"

#include "attnc/Dialect/AttnOpsDialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "attnc/Dialect/AttnAttrs.h.inc"

namespace attnc::attn {

// Discardable attribute (set by attn-mask-bounds) on an attn.softmax, attn.online_softmax or
// attn.reduce: an array of #attn.bound (AttnAttrs.td), each bounding one index. The maps'
// dimensions are the indices of the softmax (for a reduction: of its enclosing definition).
inline constexpr const char *kBoundsAttr = "attn.bounds";

// Discardable attribute (set by attn-online-softmax) on an attn.online_softmax: an
// #attn.key_mask (AttnAttrs.td), the mask's conjuncts that depend on the key but not the query row.
inline constexpr const char *kKeyMaskAttr = "attn.key_mask";

// Discardable attribute (set by attn-online-softmax) on an attn.online_softmax whose mask reads a
// tensor at the query row (packed sequences' `seg(b, i) == seg(b, j)`, a 2-D `keep(i, j)`): a
// DenseI64ArrayAttr of the score indices other than the query and the key that the mask reads.
// HalideGen reduces the mask per group of query rows to the range of keys the group sees.
inline constexpr const char *kGroupKeysAttr = "attn.group_keys";

// The leaves of the `&&` tree of i1 values `mask`, left to right: the conjuncts that
// #attn.key_mask's `conjuncts` count.
void maskConjuncts(mlir::Value mask, llvm::SmallVectorImpl<mlir::Value> &out);

// Whether two index extents are the same size: the same SSA value, the same named size (attn.dim
// ops of different inputs bound to one symbol), the same constant, or the same product, sum or
// difference of such.
bool sameExtent(mlir::Value a, mlir::Value b);

// The MLIR element type of a kernel tensor of `dtype`, and back (false for a type that is no
// attnc::DType): the one place the dialect maps the shared element types.
mlir::Type elementType(mlir::MLIRContext *ctx, attnc::DType dtype);
bool dtypeOf(mlir::Type t, attnc::DType *out);

// The type a value of element type `storage` is computed in: f32 for the storage types bf16 and
// f16 (attn.read widens them; an output of such a type is rounded where it is stored), else
// `storage` itself.
mlir::Type computeType(mlir::Type storage);

} // namespace attnc::attn
