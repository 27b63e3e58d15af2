// attn-opt: runs MLIR passes over attn-dialect IR, for lit tests of the dialect and its passes.
#include "attnc/Dialect/AttnOps.h"
#include "attnc/Transforms/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<attnc::attn::AttnDialect, mlir::arith::ArithDialect, mlir::math::MathDialect>();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();
  attnc::registerAttnPasses();
  attnc::registerAttnPipeline();
  return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, "attn optimizer driver\n", registry));
}
