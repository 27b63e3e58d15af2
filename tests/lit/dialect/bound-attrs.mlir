// Tests #attn.bound (the entries of attn.bounds) and #attn.key_mask: their printed forms round trip,
// in the canonical order whatever order a bound's entries are written in, through the generic form
// too. Their checks are in bounds-invalid.mlir.
// RUN: attn-opt %s | FileCheck %s
// RUN: attn-opt %s | attn-opt | FileCheck %s
// RUN: attn-opt %s --mlir-print-op-generic | attn-opt | FileCheck %s

// CHECK-DAG: #[[LO:map[0-9]*]] = affine_map<(d0, d1)[s0, s1] -> (d0 - s0 + s1, 0)>
// CHECK-DAG: #[[UP:map[0-9]*]] = affine_map<(d0, d1)[s0, s1] -> (d0 floordiv 2 + 1)>
// CHECK-DAG: #[[RUP:map[0-9]*]] = affine_map<(d0, d1) -> (d0 + 1)>
// CHECK-LABEL: attn.kernel @k(
// CHECK:       } {attn.bounds = [#attn.bound<index = 1, lower = #[[LO]], upper = #[[UP]], sizes = ["Nk", "i8"], exact>], indices = ["i", "j"]}
// CHECK:         } {attn.bounds = [#attn.bound<index = 0, upper = #[[RUP]], sizes = [], from = "p,q">], indices = ["j"]} : f32
// CHECK:       } {attn.key_mask = #attn.key_mask<conjuncts = [1], indices = [0], key_only>, indices = ["b", "i"], score_indices = ["b", "i", "j"]}
// CHECK:       } {attn.key_mask = #attn.key_mask<conjuncts = [0], indices = []>, indices = ["b", "i"], score_indices = ["b", "i", "j"]}
attn.kernel @k(%s: tensor<?x?xf32> {attn.dims = #attn.dims<Nq, Nk>, attn.name = "s"},
               %w: tensor<?x?xf32> {attn.dims = #attn.dims<"i8", Nk>, attn.name = "w"},
               %t: tensor<?x?x?xf32> {attn.dims = #attn.dims<B, Nq, Nk>, attn.name = "t"},
               %m: tensor<?x?xi32> {attn.dims = #attn.dims<B, Nk>, attn.name = "m"})
    -> (tensor<?x?xf32> {attn.dims = #attn.dims<Nq, Nk>, attn.name = "p"},
        tensor<?x?xf32> {attn.dims = #attn.dims<Nq, Nk>, attn.name = "o"},
        tensor<?x?xf32> {attn.dims = #attn.dims<B, Nq>, attn.name = "a"},
        tensor<?x?xf32> {attn.dims = #attn.dims<B, Nq>, attn.name = "c"}) {
  %Nq = attn.dim %s[0] as "Nq" : tensor<?x?xf32>
  %Nk = attn.dim %s[1] as "Nk" : tensor<?x?xf32>
  %I8 = attn.dim %w[0] as "i8" : tensor<?x?xf32>
  %B = attn.dim %t[0] as "B" : tensor<?x?x?xf32>
  %p = attn.softmax "p" [%Nq, %Nk] over [1] {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s[%i, %j] : tensor<?x?xf32>
    attn.yield %x : f32
  } {attn.bounds = [#attn.bound<index = 1, exact, sizes = ["Nk", "i8"],
                                upper = affine_map<(d0, d1)[s0, s1] -> (d0 floordiv 2 + 1)>,
                                lower = affine_map<(d0, d1)[s0, s1] -> (d0 - s0 + s1, 0)>>],
     indices = ["i", "j"]} : tensor<?x?xf32>
  %o = attn.define "o" [%Nq, %Nk] {
  ^bb0(%i: index, %e: index):
    %r = attn.reduce "sum" [%Nk] {
    ^bb0(%j: index):
      %x = attn.read %p[%i, %j] : tensor<?x?xf32>
      attn.yield %x : f32
    } {attn.bounds = [#attn.bound<index = 0, upper = affine_map<(d0, d1) -> (d0 + 1)>, sizes = [], from = "p,q">], indices = ["j"]} : f32
    attn.yield %r : f32
  } {indices = ["i", "e"]} : tensor<?x?xf32>
  %a = attn.online_softmax "a"[%B, %Nq] over %Nk rows [0, 1, -1] tile 128 score {
  ^bb0(%b: index, %i: index, %j: index):
    %x = attn.read %t[%b, %i, %j] : tensor<?x?x?xf32>
    %mv = attn.read %m[%b, %j] : tensor<?x?xi32>
    %c0 = arith.constant 0 : i32
    %pad = arith.cmpi eq, %mv, %c0 : i32
    %c1 = arith.constant 1 : index
    %ok = arith.cmpi sge, %c1, %c1 : index
    %mask = arith.andi %ok, %pad : i1
    attn.yield %x, %mask : f32, i1
  } value {
  ^bb0(%b: index, %i: index, %j: index):
    %one = arith.constant 1.0 : f32
    attn.yield %one : f32
  } {attn.key_mask = #attn.key_mask<conjuncts = [1], indices = [0], key_only>, indices = ["b", "i"], score_indices = ["b", "i", "j"]} : tensor<?x?xf32>
  %c = attn.online_softmax "c"[%B, %Nq] over %Nk rows [0, 1, -1] tile 64 score {
  ^bb0(%b: index, %i: index, %j: index):
    %x = attn.read %t[%b, %i, %j] : tensor<?x?x?xf32>
    %causal = arith.cmpi sle, %j, %i : index
    attn.yield %x, %causal : f32, i1
  } value {
  ^bb0(%b: index, %i: index, %j: index):
    %one = arith.constant 1.0 : f32
    attn.yield %one : f32
  } {attn.key_mask = #attn.key_mask<conjuncts = [0], indices = []>, indices = ["b", "i"], score_indices = ["b", "i", "j"]} : tensor<?x?xf32>
  attn.return %p, %o, %a, %c : tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>
}
