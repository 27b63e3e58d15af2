// Registration of the attn dialect and its operations.
#include "attnc/Dialect/AttnDialect.h"
#include "attnc/Dialect/AttnOps.h"

using namespace mlir;
using namespace attnc::attn;

#include "attnc/Dialect/AttnOpsDialect.cpp.inc"

void AttnDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "attnc/Dialect/AttnOps.cpp.inc"
      >();
}
