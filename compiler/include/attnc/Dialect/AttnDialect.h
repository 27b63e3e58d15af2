// The attn MLIR dialect (declarations generated from AttnDialect.td).
#pragma once

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/Dialect.h"

#include "attnc/Dialect/AttnOpsDialect.h.inc"
