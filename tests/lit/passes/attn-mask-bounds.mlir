// Tests attn-mask-bounds on hand-written IR: masks computed in i64 through index_cast, stale
// bounds from an earlier run replaced (or removed when the mask no longer bounds the axis), and a
// sum of p * v nested in another sum (its bound uses the definition's indices only).
// RUN: attn-opt %s --attn-mask-bounds | FileCheck %s

// CHECK-DAG: #[[LO:map[0-9]*]] = affine_map<(d0, d1)[s0] -> (d0 - s0 + 2)>
// CHECK-DAG: #[[UP:map[0-9]*]] = affine_map<(d0, d1)[s0] -> (d0 + 1)>
// CHECK-DAG: #[[LOE:map[0-9]*]] = affine_map<(d0, d1, d2)[s0] -> (d0 - s0 + 2)>
// CHECK-DAG: #[[UPE:map[0-9]*]] = affine_map<(d0, d1, d2)[s0] -> (d0 + 1)>

// CHECK-LABEL: attn.kernel @k(
// CHECK:       %p = attn.softmax "p"
// CHECK:       } {attn.bounds = [#attn.bound<index = 1, lower = #[[LO]], upper = #[[UP]], sizes = ["N"], exact>], indices = ["i", "j"]}
// CHECK:       %u = attn.softmax "u"
// CHECK:       } {indices = ["i", "j"]}
// CHECK:       %o = attn.define "o"
// CHECK:           } {attn.bounds = [#attn.bound<index = 0, lower = #[[LOE]], upper = #[[UPE]], sizes = ["N"], from = "p">], indices = ["j"]} : f32
// CHECK:         } {indices = ["c"]} : f32
attn.kernel @k(%s: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s"},
               %v: tensor<?x?xf32> {attn.dims = #attn.dims<N, D>, attn.name = "v"})
    -> (tensor<?x?x?xf32> {attn.dims = #attn.dims<N, D, D>, attn.name = "o"},
        tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "u"}) {
  %N = attn.dim %s[0] as "N" : tensor<?x?xf32>
  %D = attn.dim %v[1] as "D" : tensor<?x?xf32>
  // j <= i as i64, and j + N - 2 >= i (j >= i - N + 2); the stale upper bound is replaced.
  %p = attn.softmax "p" [%N, %N] over [1] {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s[%i, %j] : tensor<?x?xf32>
    %i64 = arith.index_cast %i : index to i64
    %j64 = arith.index_cast %j : index to i64
    %m1 = arith.cmpi sle, %j64, %i64 : i64
    %c2 = arith.constant 2 : index
    %jn = arith.addi %j, %N : index
    %jn2 = arith.subi %jn, %c2 : index
    %m2 = arith.cmpi sge, %jn2, %i : index
    %m = arith.andi %m1, %m2 : i1
    attn.yield %x, %m : f32, i1
  } {attn.bounds = [#attn.bound<index = 1, upper = affine_map<(d0, d1) -> (d0 + 5)>, sizes = []>], indices = ["i", "j"]} : tensor<?x?xf32>
  // j != i bounds nothing: the stale attribute goes.
  %u = attn.softmax "u" [%N, %N] over [1] {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s[%i, %j] : tensor<?x?xf32>
    %m = arith.cmpi ne, %j, %i : index
    attn.yield %x, %m : f32, i1
  } {attn.bounds = [#attn.bound<index = 1, upper = affine_map<(d0, d1) -> (d0)>, sizes = []>], indices = ["i", "j"]} : tensor<?x?xf32>
  // o(i, e, f) = sum(c) sum(j) p(i, j) * v(j, c): the inner sum is bounded, the outer is not.
  %o = attn.define "o" [%N, %D, %D] {
  ^bb0(%i: index, %e: index, %f: index):
    %r = attn.reduce "sum" [%D] {
    ^bb0(%c: index):
      %t = attn.reduce "sum" [%N] {
      ^bb0(%j: index):
        %pp = attn.read %p[%i, %j] : tensor<?x?xf32>
        %vv = attn.read %v[%j, %c] : tensor<?x?xf32>
        %pv = arith.mulf %pp, %vv : f32
        attn.yield %pv : f32
      } {indices = ["j"]} : f32
      attn.yield %t : f32
    } {indices = ["c"]} : f32
    attn.yield %r : f32
  } {indices = ["i", "e", "f"]} : tensor<?x?x?xf32>
  attn.return %o, %u : tensor<?x?x?xf32>, tensor<?x?xf32>
}
