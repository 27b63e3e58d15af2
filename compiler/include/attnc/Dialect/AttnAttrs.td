// Attributes of the attn dialect: the typed dimensions of a kernel's tensors.
#ifndef ATTN_ATTRS_TD
#define ATTN_ATTRS_TD

include "attnc/Dialect/AttnDialect.td"
include "mlir/IR/AttrTypeBase.td"

def Attn_DimsAttr : AttrDef<Attn_Dialect, "Dims"> {
  let mnemonic = "dims";
  let summary = "The symbolic dimensions of a kernel tensor, each a product of factors.";
  let description = [{
    One entry per dimension, outermost first; each is a list of factors, a size name or a
    non-negative integer literal. A dimension of one factor is a size or a literal; products
    (`M*D`) appear in outputs only. The kernel's argument and result attribute `attn.dims` holds
    one, which the runtime descriptors and HalideGen read as an `attnc::TensorType`
    (attnc/tensor_type.h) without parsing any string.

    ```mlir
    {attn.dims = #attn.dims<B, Q, M*D>, attn.name = "o"}
    ```
  }];
  // Each dimension is an ArrayAttr of factors: StringAttr (a size) or i64 IntegerAttr (a literal).
  let parameters = (ins ArrayRefParameter<"::mlir::ArrayAttr", "dimensions">:$dims);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let builders = [AttrBuilder<(ins "::llvm::ArrayRef<::attnc::Dim>":$dims)>];
  let extraClassDeclaration = [{
    // The dimensions as the shared tensor type's Dims (attnc/tensor_type.h).
    ::llvm::SmallVector<::attnc::Dim> getDimList() const;
  }];
}

#endif // ATTN_ATTRS_TD
