// Attributes of the attn dialect: tensors' typed dimensions and the facts the passes record for HalideGen.
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

def Attn_BoundAttr : AttrDef<Attn_Dialect, "Bound"> {
  let mnemonic = "bound";
  let summary = "An affine bound on one index of a softmax or a reduction (attn-mask-bounds).";
  let description = [{
    `lower <= index < upper`, where `lower` is the max of its map's results and `upper` the min
    of its map's results; at least one is present. The maps' dimensions are the indices of the
    softmax (for a reduction: of its enclosing definition) and their symbols the sizes named in
    `sizes`. `index` is a softmax axis by its position among the softmax's indices, or a reduction
    index by its position among the reduction's. Points outside contribute nothing, so the
    reductions over the index may skip them. `from` (sums only) names the softmaxes the bound
    was carried over from; `exact` (softmax bounds only) says the mask is nothing but these
    bounds, so points inside them need no mask test. The discardable attribute `attn.bounds`
    (attnc/Dialect/AttnDialect.h) holds an array of them; where it may appear and what the maps'
    dimensions must be is checked by the dialect, which knows the op.

    ```mlir
    {attn.bounds = [#attn.bound<index = 1, upper = affine_map<(d0, d1) -> (d0 + 1)>, sizes = [], exact>]}
    ```
  }];
  let parameters = (ins "int64_t":$index,
                        OptionalParameter<"::mlir::AffineMapAttr">:$lower,
                        OptionalParameter<"::mlir::AffineMapAttr">:$upper,
                        ArrayRefParameter<"::mlir::StringAttr", "size names">:$sizes,
                        OptionalParameter<"::mlir::StringAttr">:$from,
                        "bool":$exact);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def Attn_KeyMaskAttr : AttrDef<Attn_Dialect, "KeyMask"> {
  let mnemonic = "key_mask";
  let summary = "The key-padding conjuncts of an online softmax's mask (attn-online-softmax).";
  let description = [{
    Which conjuncts of the mask of an `attn.online_softmax` depend on the key but not on the
    query row (the innermost score index that is a row): a key padding mask, `pad(b, j) == 0`.
    `conjuncts` are positions in the mask's `&&` leaves (attnc::attn::maskConjuncts' order, left
    to right), `indices` the score indices other than the key that those conjuncts read (by
    position among the score's indices), and `key_only` says that the mask is nothing but these
    conjuncts. HalideGen reduces these conjuncts once per call to the range of visible keys
    and skips the key tiles outside it (docs/language.md §20). The discardable attribute
    `attn.key_mask` holds one; it is absent where no conjunct is such.

    ```mlir
    {attn.key_mask = #attn.key_mask<conjuncts = [1], indices = [0], key_only>}
    ```
  }];
  let parameters = (ins ArrayRefParameter<"int64_t", "leaf positions">:$conjuncts,
                        ArrayRefParameter<"int64_t", "score index positions">:$indices,
                        "bool":$keyOnly);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

#endif // ATTN_ATTRS_TD
