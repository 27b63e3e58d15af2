// Tests the optional `sink` region of attn.softmax and attn.online_softmax (attention sinks):
// it prints and parses back unchanged, in the custom and the generic form (sink-invalid.mlir has
// its verifier's diagnostics).
// RUN: attn-opt %s | attn-opt | FileCheck %s
// RUN: attn-opt %s --mlir-print-op-generic | attn-opt | FileCheck %s

// CHECK-LABEL: attn.kernel @softmax_sink(
// CHECK:       %p = attn.softmax "p"[%N, %N] over [1] sink {
// CHECK-NEXT:  ^bb0(%i: index, %j: index):
// CHECK-NEXT:    %[[K:.+]] = attn.read %sk[%i] : tensor<?xf32>
// CHECK-NEXT:    attn.yield %[[K]] : f32
// CHECK-NEXT:  } {
// CHECK-NEXT:  ^bb0(%i: index, %j: index):
// CHECK-NEXT:    %[[S:.+]] = attn.read %s[%i, %j] : tensor<?x?xf32>
// CHECK-NEXT:    attn.yield %[[S]] : f32
// CHECK-NEXT:  } {indices = ["i", "j"]} : tensor<?x?xf32>
attn.kernel @softmax_sink(%s: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s"},
                          %sk: tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "sk"})
    -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "p"}) {
  %N = attn.dim %s[0] as "N" : tensor<?x?xf32>
  %p = attn.softmax "p" [%N, %N] over [1] sink {
  ^bb0(%i: index, %j: index):
    %k = attn.read %sk[%i] : tensor<?xf32>
    attn.yield %k : f32
  } {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s[%i, %j] : tensor<?x?xf32>
    attn.yield %x : f32
  } {indices = ["i", "j"]} : tensor<?x?xf32>
  attn.return %p : tensor<?x?xf32>
}

// CHECK-LABEL: attn.kernel @online_sink(
// CHECK:       } value {
// CHECK:       } sink {
// CHECK-NEXT:  ^bb0(%i: index, %j: index):
// CHECK-NEXT:    %[[C:.+]] = arith.constant 2.000000e+00 : f32
// CHECK-NEXT:    attn.yield %[[C]] : f32
// CHECK-NEXT:  } {indices = ["i", "e"], score_indices = ["i", "j"]} : tensor<?x?xf32>
attn.kernel @online_sink(%s: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s"},
                         %v: tensor<?x?xf32> {attn.dims = #attn.dims<N, D>, attn.name = "v"})
    -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, D>, attn.name = "o"}) {
  %N = attn.dim %s[0] as "N" : tensor<?x?xf32>
  %D = attn.dim %v[1] as "D" : tensor<?x?xf32>
  %o = attn.online_softmax "o"[%N, %D] over %N rows [0, -1] tile 128 score {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s[%i, %j] : tensor<?x?xf32>
    attn.yield %x : f32
  } value {
  ^bb0(%i: index, %e: index, %j: index):
    %y = attn.read %v[%j, %e] : tensor<?x?xf32>
    attn.yield %y : f32
  } sink {
  ^bb0(%i: index, %j: index):
    %c = arith.constant 2.0 : f32
    attn.yield %c : f32
  } {indices = ["i", "e"], score_indices = ["i", "j"]} : tensor<?x?xf32>
  attn.return %o : tensor<?x?xf32>
}
