// Tests attn-online-softmax on hand-written IR: `attn.key_mask` on an attn.online_softmax (fused by
// an earlier run) is recomputed, never trusted: a stale one is replaced, or removed when no
// conjunct of the mask reads the key alone; a query-less online softmax has every key conjunct.
// RUN: attn-opt %s --attn-online-softmax | FileCheck %s
// RUN: attn-opt %s --attn-online-softmax | attn-opt --attn-online-softmax | FileCheck %s

// CHECK-LABEL: attn.kernel @stale(
// CHECK:       } {attn.key_mask = #attn.key_mask<conjuncts = [0, 2], indices = [0]>, indices = ["b", "i"], score_indices = ["b", "i", "j"]}
attn.kernel @stale(%s: tensor<?x?x?xf32> {attn.dims = #attn.dims<B, N, N>, attn.name = "s"},
                   %m: tensor<?x?xi32> {attn.dims = #attn.dims<B, N>, attn.name = "m"})
    -> (tensor<?x?xf32> {attn.dims = #attn.dims<B, N>, attn.name = "o"}) {
  %B = attn.dim %s[0] as "B" : tensor<?x?x?xf32>
  %N = attn.dim %s[1] as "N" : tensor<?x?x?xf32>
  %o = attn.online_softmax "o"[%B, %N] over %N rows [0, 1, -1] tile 128 score {
  ^bb0(%b: index, %i: index, %j: index):
    %x = attn.read %s[%b, %i, %j] : tensor<?x?x?xf32>
    %mv = attn.read %m[%b, %j] : tensor<?x?xi32>
    %c0 = arith.constant 0 : i32
    %pad = arith.cmpi eq, %mv, %c0 : i32
    %causal = arith.cmpi sle, %j, %i : index
    %c1 = arith.constant 1 : index
    %lo = arith.cmpi sge, %j, %c1 : index
    %m1 = arith.andi %pad, %causal : i1
    %mask = arith.andi %m1, %lo : i1
    attn.yield %x, %mask : f32, i1
  } value {
  ^bb0(%b: index, %i: index, %j: index):
    %one = arith.constant 1.0 : f32
    attn.yield %one : f32
  } {attn.key_mask = #attn.key_mask<conjuncts = [1], indices = [], key_only>, indices = ["b", "i"], score_indices = ["b", "i", "j"]} : tensor<?x?xf32>
  attn.return %o : tensor<?x?xf32>
}

// CHECK-LABEL: attn.kernel @gone(
// CHECK:       } {indices = ["i"], score_indices = ["i", "j"]}
attn.kernel @gone(%s: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s"})
    -> (tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "o"}) {
  %N = attn.dim %s[0] as "N" : tensor<?x?xf32>
  %o = attn.online_softmax "o"[%N] over %N rows [0, -1] tile 128 score {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s[%i, %j] : tensor<?x?xf32>
    %causal = arith.cmpi sle, %j, %i : index
    attn.yield %x, %causal : f32, i1
  } value {
  ^bb0(%i: index, %j: index):
    %one = arith.constant 1.0 : f32
    attn.yield %one : f32
  } {attn.key_mask = #attn.key_mask<conjuncts = [0], indices = []>, indices = ["i"], score_indices = ["i", "j"]} : tensor<?xf32>
  attn.return %o : tensor<?xf32>
}

// CHECK-LABEL: attn.kernel @keys_only(
// CHECK:       } {attn.key_mask = #attn.key_mask<conjuncts = [0], indices = [], key_only>, indices = [], score_indices = ["j"]}
attn.kernel @keys_only(%s: tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "s"})
    -> (tensor<f32> {attn.dims = #attn.dims<>, attn.name = "o"}) {
  %N = attn.dim %s[0] as "N" : tensor<?xf32>
  %o = attn.online_softmax "o"[] over %N rows [-1] tile 128 score {
  ^bb0(%j: index):
    %x = attn.read %s[%j] : tensor<?xf32>
    %c8 = arith.constant 8 : index
    %few = arith.cmpi slt, %j, %c8 : index
    attn.yield %x, %few : f32, i1
  } value {
  ^bb0(%j: index):
    %one = arith.constant 1.0 : f32
    attn.yield %one : f32
  } {indices = [], score_indices = ["j"]} : tensor<f32>
  attn.return %o : tensor<f32>
}
