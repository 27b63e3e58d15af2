// Operations of the attn dialect.
#ifndef ATTN_OPS_TD
#define ATTN_OPS_TD

include "attnc/Dialect/AttnDialect.td"
include "attnc/Dialect/AttnAttrs.td"
include "mlir/IR/OpAsmInterface.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/FunctionInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"

def Attn_ElemType : AnyTypeOf<[F32, I32]>;
def Attn_Tensor : RankedTensorOf<[F32, I32]>;
// A kernel input: definitions compute in f32/i32, inputs may also be stored as bf16 or f16, which
// attn.read widens to f32.
def Attn_ParamTensor : RankedTensorOf<[F32, I32, BF16, F16]>;

//===----------------------------------------------------------------------===//
// attn.kernel
//===----------------------------------------------------------------------===//

def Attn_KernelOp : Attn_Op<"kernel", [
    FunctionOpInterface, IsolatedFromAbove,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmBlockArgumentNames"]>]> {
  let summary = "An attention kernel: tensor inputs in, tensor outputs out.";
  let description = [{
    Argument and result attributes carry the DSL names (`attn.name`) and the symbolic size of
    every dimension (`attn.dims`, an `#attn.dims` of size names, integer literals and, in
    outputs, their products), which the runtime uses to validate calls.

    ```mlir
    attn.kernel @sdpa(%q: tensor<?x?x?x?xf32> {attn.dims = #attn.dims<B, H, Nq, D>, attn.name = "q"}, ...)
        -> (tensor<?x?x?x?xf32> {attn.dims = #attn.dims<B, H, Nq, D>, attn.name = "o"}) { ... }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<FunctionType>:$function_type,
                       OptionalAttr<DictArrayAttr>:$arg_attrs,
                       OptionalAttr<DictArrayAttr>:$res_attrs);
  let regions = (region SizedRegion<1>:$body);
  let builders = [OpBuilder<(ins "::llvm::StringRef":$name, "::mlir::FunctionType":$type)>];
  let extraClassDeclaration = [{
    ::llvm::ArrayRef<::mlir::Type> getArgumentTypes() { return getFunctionType().getInputs(); }
    ::llvm::ArrayRef<::mlir::Type> getResultTypes() { return getFunctionType().getResults(); }
    ::mlir::Region *getCallableRegion() { return &getBody(); }
    // DSL name of input `i` / output `i`, from the `attn.name` attribute.
    ::llvm::StringRef getInputName(unsigned i);
    ::llvm::StringRef getOutputName(unsigned i);
    // The type of input `i` / output `i`: its element type and its dimensions (`attn.dims`).
    ::attnc::TensorType getInputType(unsigned i);
    ::attnc::TensorType getOutputType(unsigned i);
  }];
  let hasCustomAssemblyFormat = 1;
  let skipDefaultBuilders = 1;
  let hasVerifier = 1;
}

def Attn_ReturnOp : Attn_Op<"return", [Pure, Terminator, HasParent<"KernelOp">, ReturnLike]> {
  let summary = "Returns the kernel's output tensors.";
  let arguments = (ins Variadic<Attn_Tensor>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

//===----------------------------------------------------------------------===//
// Sizes and reads
//===----------------------------------------------------------------------===//

def Attn_DimOp : Attn_Op<"dim", [Pure,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>]> {
  let summary = "A symbolic size: the extent of one dimension of a kernel input.";
  let arguments = (ins Attn_ParamTensor:$tensor, I64Attr:$index, StrAttr:$size);
  let results = (outs Index:$result);
  let assemblyFormat = "$tensor `[` $index `]` `as` $size attr-dict `:` type($tensor)";
  let hasVerifier = 1;
}

def Attn_ReadOp : Attn_Op<"read", [Pure,
    TypesMatchWith<"result is the tensor's element type, bf16/f16 widened to f32", "tensor", "result",
                   "::attnc::attn::computeType(::llvm::cast<::mlir::TensorType>($_self).getElementType())">]> {
  let summary = "Reads one element of a tensor at integer indices.";
  let description = [{
    `boundary` says what an out-of-range index means: "none" (the caller guarantees it is in range;
    Halide's bounds checks catch violations at run time), "zero" (reads 0) or "clamp" (reads the
    nearest element, each index clamped to its dimension). The DSL's `.exclude` is a "zero" read
    whose in-range condition joins the enclosing softmax's mask. A bf16 or f16 input reads as its
    value in f32 (exact: every bf16 and f16 is an f32), so every definition computes in f32.
  }];
  let arguments = (ins Attn_ParamTensor:$tensor, Variadic<Index>:$indices,
                       DefaultValuedStrAttr<StrAttr, "none">:$boundary);
  let results = (outs Attn_ElemType:$result);
  let assemblyFormat = "$tensor `[` $indices `]` attr-dict `:` type($tensor)";
  let hasVerifier = 1;
}

def Attn_RequireOp : Attn_Op<"require", [HasParent<"KernelOp">]> {
  let summary = "A condition on the kernel's sizes, checked when the kernel is called.";
  let description = [{
    A call whose sizes make `condition` false fails with `message` before computing anything.
    Deliberately not Pure: the check must survive dead-code elimination.
    ```mlir
    attn.require %ok, "heads of 32 channels must divide C"
    ```
  }];
  let arguments = (ins I1:$condition, StrAttr:$message);
  let assemblyFormat = "$condition `,` $message attr-dict";
}

//===----------------------------------------------------------------------===//
// Definitions
//===----------------------------------------------------------------------===//

class Attn_DefinitionOp<string mnemonic, list<Trait> traits = []> : Attn_Op<mnemonic, !listconcat(traits, [
    Pure, SingleBlockImplicitTerminator<"YieldOp">, RecursiveMemoryEffects,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames", "getAsmBlockArgumentNames"]>])> {
  let results = (outs Attn_Tensor:$result);
  let regions = (region SizedRegion<1>:$body);
  let hasVerifier = 1;
}

def Attn_DefineOp : Attn_DefinitionOp<"define"> {
  let summary = "A tensor defined pointwise over its index space.";
  let description = [{
    The region's block arguments are the tensor's indices (one per dimension, ranging over
    `[0, extent)`); it yields the element at that point.

    ```mlir
    %s = attn.define "s" [%B, %H, %Nq, %Nk] {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      ...
      attn.yield %v : f32
    } {indices = ["b", "h", "i", "j"]} : tensor<?x?x?x?xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, Variadic<Index>:$extents, StrArrayAttr:$indices);
  let assemblyFormat = "$name `[` $extents `]` $body attr-dict `:` type($result)";
}

def Attn_SoftmaxOp : Attn_DefinitionOp<"softmax"> {
  let summary = "A tensor normalised by softmax over some of its indices.";
  let description = [{
    The region yields the score at a point and, optionally, an `i1` mask. The result at a point
    is exp(score - max) / sum(exp(score - max)) over the `axes`, counting only unmasked points;
    masked points are 0, and a slice with no unmasked point is all zeros (never NaN).

    The optional `sink` region (attention sinks) has the same indices, uses none of the axes and
    yields an f32 logit per slice that joins the normalisation without an entry of its own: the
    max is taken over it too and the sum adds exp(sink - max). A slice with no unmasked point is
    then all zeros as well; a -inf sink is the plain softmax.
    ```mlir
    %p = attn.softmax "p"[%B, %H, %N, %N] over [3] sink {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %0 = attn.read %sinks[%h] : tensor<?xf32>
      attn.yield %0 : f32
    } { ... }
    ```
  }];
  let arguments = (ins StrAttr:$name, Variadic<Index>:$extents, StrArrayAttr:$indices,
                       DenseI64ArrayAttr:$axes);
  let regions = (region SizedRegion<1>:$body, MaxSizedRegion<1>:$sink);
  let assemblyFormat =
      "$name `[` $extents `]` `over` $axes (`sink` $sink^)? $body attr-dict `:` type($result)";
  let extraClassDeclaration = [{
    bool hasMask() { return getBody().front().getTerminator()->getNumOperands() == 2; }
    bool hasSink() { return !getSink().empty(); }
  }];
}

def Attn_OnlineSoftmaxOp : Attn_Op<"online_softmax", [Pure, RecursiveMemoryEffects,
    SingleBlockImplicitTerminator<"YieldOp">,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames", "getAsmBlockArgumentNames"]>]> {
  let summary = "A sum over one softmax axis of the probabilities times a value, streamed over key tiles.";
  let description = [{
    The fused form of `p = softmax(j) score` read only by `o(...) = sum(j) p(...) * value`
    (attn-online-softmax). The result at a point of its index space is
    sum_j softmax_j(score)(rows, j) * value(indices, j), computed the way FlashAttention does:
    keys in tiles of `tile`, a running max and sum per row and an accumulator rescaled when the
    max grows, so no tensor over (rows, keys) is ever formed.

    The `score` region has the softmax's indices (`score_indices`; `rows[k]` is the result index
    that score index k equals, -1 for the key axis) and yields the score and optionally an i1
    mask, as attn.softmax does. The `value` region has the result's indices then the key and
    yields the factor multiplying the probability. Masked points count as in attn.softmax; a row
    with no unmasked key gives zeros. Under mask bounds on the key (`attn.bounds`), key tiles are
    skipped per group of `query_group` query rows (the innermost row index), taken at both ends
    of the group, so that a group visits its tiles with all its rows; it is printed only when it
    is not 32. The optional `sink` region, over the score's indices and using none but the rows,
    is attn.softmax's sink: each row's result is scaled by l / (l + exp(sink - m)) after the last
    tile (m, l the row's running max and sum of exps), which is the same normalisation.

    With `whole_tile` (a multiple of `tile`), the keys up to the last multiple of `whole_tile`
    are streamed in tiles of that many keys, and the rest in tiles of `tile`: every slot of the
    longer tiles is a key, and the rest wastes no more slots than tiles of `tile` alone. It needs
    a score without a mask, or one whose mask's visible keys are taken per query group
    (`attn.group_keys`) or depend on the key alone (`attn.key_mask` with `key_only`, a padding
    mask), with no `attn.bounds`: there the whole tiles are those inside every row's visible
    keys, in tiles of `whole_tile`.

    With `unnormalized`, no softmax is taken: the score region yields each key's weight itself
    (sigmoid or ReLU attention's `sigmoid(s - b)`, a masked key weighing 0) and the result is
    sum_j weight(rows, j) * value(indices, j), streamed over the same key tiles with a plain
    accumulator (no max, no exp, no rescaling). It has no sink.
    ```mlir
    %o = attn.online_softmax "o"[%B, %H, %N, %D] over %N rows [0, 1, 2, -1] tile 128 score {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      ...
    } value {
    ^bb0(%b: index, %h: index, %i: index, %e: index, %j: index):
      ...
    } {indices = ["b", "h", "i", "e"], score_indices = ["b", "h", "i", "j"]} : tensor<?x?x?x?xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, Variadic<Index>:$extents, Index:$key_extent, StrArrayAttr:$indices,
                       StrArrayAttr:$score_indices, DenseI64ArrayAttr:$rows, I64Attr:$tile,
                       ConfinedAttr<DefaultValuedAttr<I64Attr, "32">, [IntPositive]>:$query_group,
                       UnitAttr:$unnormalized, OptionalAttr<I64Attr>:$whole_tile);
  let results = (outs Attn_Tensor:$result);
  let regions = (region SizedRegion<1>:$score, SizedRegion<1>:$value, MaxSizedRegion<1>:$sink);
  let assemblyFormat = [{
    $name `[` $extents `]` `over` $key_extent `rows` $rows `tile` $tile `score` $score `value` $value
    (`sink` $sink^)? attr-dict `:` type($result)
  }];
  let extraClassDeclaration = [{
    bool hasMask() { return getScore().front().getTerminator()->getNumOperands() == 2; }
    bool hasSink() { return !getSink().empty(); }
    // Whether the mask's visible keys are taken per query group or per key (attn.group_keys or a
    // key_only attn.key_mask) with no attn.bounds: the masks under which whole tiles may run.
    bool hasRangedKeys();
    // Position of the key among the score's indices.
    unsigned getKeyPosition();
    // Position of the query row among the score's indices: the innermost one that is a row (-1
    // when the key is the only score index).
    int getQueryPosition();
  }];
  let hasVerifier = 1;
}

def Attn_ReduceOp : Attn_Op<"reduce", [Pure, RecursiveMemoryEffects, SingleBlockImplicitTerminator<"YieldOp">,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmBlockArgumentNames"]>]> {
  let summary = "A sum, max or min of a scalar expression over reduction indices.";
  let description = [{
    The region's block arguments are the reduction indices, each over `[0, extent)`; values from
    enclosing regions may be used freely.
  }];
  let arguments = (ins StrAttr:$kind, Variadic<Index>:$extents, StrArrayAttr:$indices);
  let results = (outs AnyTypeOf<[F32, I32]>:$result);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$kind `[` $extents `]` $body attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Attn_YieldOp : Attn_Op<"yield", [Pure, Terminator,
    ParentOneOf<["DefineOp", "SoftmaxOp", "ReduceOp", "OnlineSoftmaxOp"]>]> {
  let summary = "Yields the value of a definition or reduction body.";
  let arguments = (ins Variadic<AnyType>:$values);
  let builders = [OpBuilder<(ins), [{ /* empty yield for the implicit terminator */ }]>];
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

#endif // ATTN_OPS_TD
