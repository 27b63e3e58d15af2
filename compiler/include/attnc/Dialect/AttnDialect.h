// The attn MLIR dialect (declarations generated from AttnDialect.td).
#pragma once

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Dialect.h"

#include "attnc/Dialect/AttnOpsDialect.h.inc"

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

} // namespace attnc::attn
