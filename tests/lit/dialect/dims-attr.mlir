// Tests #attn.dims, the typed dimensions of kernel tensors: its printed form round trips (sizes,
// literals, products, no dimensions, a size spelt like an MLIR type), and its and the kernel's
// checks on it.
// RUN: attn-opt %s -split-input-file | FileCheck %s
// RUN: attn-opt %s -split-input-file | attn-opt -split-input-file | FileCheck %s
// RUN: attn-opt %S/Inputs/dims-attr-invalid.mlir -split-input-file -verify-diagnostics

// CHECK-LABEL: attn.kernel @k
// CHECK-SAME: (%x: tensor<?x4x?xf32> {attn.dims = #attn.dims<N, 4, M>, attn.name = "x"}, %s: tensor<i32> {attn.dims = #attn.dims<>, attn.name = "s"})
// CHECK-SAME: -> (tensor<?x8x?xf32> {attn.dims = #attn.dims<N, 2*4, M*4*N>, attn.name = "o"})
attn.kernel @k(%x: tensor<?x4x?xf32> {attn.dims = #attn.dims<N, 4, M>, attn.name = "x"},
               %s: tensor<i32> {attn.dims = #attn.dims<>, attn.name = "s"})
    -> (tensor<?x8x?xf32> {attn.dims = #attn.dims<N, 2 * 4, M*4*N>, attn.name = "o"}) {
  %N = attn.dim %x[0] as "N" : tensor<?x4x?xf32>
  %M = attn.dim %x[2] as "M" : tensor<?x4x?xf32>
  %c8 = arith.constant 8 : index
  %c4 = arith.constant 4 : index
  %m4 = arith.muli %M, %c4 : index
  %mn = arith.muli %m4, %N : index
  %o = attn.define "o" [%N, %c8, %mn] {
  ^bb0(%n: index, %a: index, %b: index):
    %f = arith.constant 0.0 : f32
    attn.yield %f : f32
  } {indices = ["n", "a", "b"]} : tensor<?x8x?xf32>
  attn.return %o : tensor<?x8x?xf32>
}

// -----

// A size whose name MLIR's lexer reads as a type is printed as a string.
// CHECK-LABEL: attn.kernel @typed_name
// CHECK-SAME: attn.dims = #attn.dims<"i8">
attn.kernel @typed_name(%x: tensor<?xf32> {attn.dims = #attn.dims<"i8">, attn.name = "x"})
    -> (tensor<?xf32> {attn.dims = #attn.dims<"i8">, attn.name = "o"}) {
  attn.return %x : tensor<?xf32>
}
