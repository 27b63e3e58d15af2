// The attn dialect: attention kernels as index-notation definitions over tensors.
#ifndef ATTN_DIALECT_TD
#define ATTN_DIALECT_TD

include "mlir/IR/OpBase.td"

def Attn_Dialect : Dialect {
  let name = "attn";
  let summary = "Index-notation attention kernels (definitions, reductions, softmax, reads).";
  let description = [{
    A kernel is a list of tensor definitions. Each definition's region is evaluated at one point of
    its index space (the region's index block arguments) and yields a scalar; reductions and
    softmax are first-class so passes can recognise attention patterns before Halide lowering.
  }];
  let cppNamespace = "::attnc::attn";
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::math::MathDialect"];
  // attn.bounds and attn.key_mask (attnc/Dialect/AttnDialect.h) are checked wherever they appear.
  let hasOperationAttrVerify = 1;
  // #attn.dims, #attn.bound, #attn.key_mask (AttnAttrs.td).
  let useDefaultAttributePrinterParser = 1;
}

class Attn_Op<string mnemonic, list<Trait> traits = []> : Op<Attn_Dialect, mnemonic, traits>;

#endif // ATTN_DIALECT_TD
