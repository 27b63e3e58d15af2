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

// Discardable attribute (set by attn-mask-bounds) on an attn.softmax or attn.reduce: an array of
// {index, lower?, upper?, sizes, from?, exact?} dictionaries, each bounding one index (a softmax axis, by
// position among the softmax's indices; a reduction index, by position among the reduction's):
// lower <= index < upper, where `lower` (the max of its results) and `upper` (the min of its
// results) are affine maps whose dimensions are the indices of the softmax (for a reduction: of
// its enclosing definition) and whose symbols are the sizes named in `sizes`. Points outside
// contribute nothing, so the reductions over the index may skip them. `exact` (softmax bounds
// only): the mask is nothing but these bounds, so points inside them need no mask test.
inline constexpr const char *kBoundsAttr = "attn.bounds";

// The MLIR element type of a kernel tensor of `dtype`, and back (false for a type that is no
// attnc::DType): the one place the dialect maps the shared element types.
mlir::Type elementType(mlir::MLIRContext *ctx, attnc::DType dtype);
bool dtypeOf(mlir::Type t, attnc::DType *out);

} // namespace attnc::attn
