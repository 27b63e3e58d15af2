// Tests that every attn op (kernel, dim, define, softmax with a mask, reduce, read, return, yield)
// prints and parses back unchanged, in the custom and in the generic assembly form.
// RUN: attn-opt %s | attn-opt | FileCheck %s
// RUN: attn-opt %s --mlir-print-op-generic | attn-opt | FileCheck %s
// RUN: attn-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// CHECK-LABEL: attn.kernel @causal(
// CHECK-SAME: %q: tensor<?x?xf32> {attn.dims = #attn.dims<N, D>, attn.name = "q"}
// CHECK-SAME: %k: tensor<?x?xf32> {attn.dims = #attn.dims<N, D>, attn.name = "k"}
// CHECK-SAME: %v: tensor<?x?xf32> {attn.dims = #attn.dims<N, D>, attn.name = "v"})
// CHECK-SAME: -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, D>, attn.name = "o"}, tensor<4xf32> {attn.dims = #attn.dims<4>, attn.name = "c"}) {
// CHECK-NEXT:   %N = attn.dim %q[0] as "N" : tensor<?x?xf32>
// CHECK-NEXT:   %D = attn.dim %q[1] as "D" : tensor<?x?xf32>
// CHECK-NEXT:   %s = attn.define "s"[%N, %N] {
// CHECK-NEXT:   ^bb0(%i: index, %j: index):
// CHECK-NEXT:     %[[SUM:.+]] = attn.reduce "sum"[%D] {
// CHECK-NEXT:     ^bb0(%d: index):
// CHECK-NEXT:       %[[QV:.+]] = attn.read %q[%i, %d] : tensor<?x?xf32>
// CHECK-NEXT:       %[[KV:.+]] = attn.read %k[%j, %d] : tensor<?x?xf32>
// CHECK-NEXT:       %[[MUL:.+]] = arith.mulf %[[QV]], %[[KV]] : f32
// CHECK-NEXT:       attn.yield %[[MUL]] : f32
// CHECK-NEXT:     } {indices = ["d"]} : f32
// CHECK-NEXT:     attn.yield %[[SUM]] : f32
// CHECK-NEXT:   } {indices = ["i", "j"]} : tensor<?x?xf32>
// CHECK-NEXT:   %p = attn.softmax "p"[%N, %N] over [1] {
// CHECK-NEXT:   ^bb0(%i: index, %j: index):
// CHECK-NEXT:     %[[S:.+]] = attn.read %s[%i, %j] : tensor<?x?xf32>
// CHECK-NEXT:     %[[MASK:.+]] = arith.cmpi sle, %j, %i : index
// CHECK-NEXT:     attn.yield %[[S]], %[[MASK]] : f32, i1
// CHECK-NEXT:   } {indices = ["i", "j"]} : tensor<?x?xf32>
// CHECK-NEXT:   %o = attn.define "o"[%N, %D] {
// CHECK-NEXT:   ^bb0(%i: index, %e: index):
// CHECK-NEXT:     %[[O:.+]] = attn.reduce "max"[%N] {
// CHECK-NEXT:     ^bb0(%j: index):
// CHECK-NEXT:       %[[P:.+]] = attn.read %p[%i, %j] : tensor<?x?xf32>
// CHECK-NEXT:       %[[V:.+]] = attn.read %v[%j, %e] : tensor<?x?xf32>
// CHECK-NEXT:       %[[PV:.+]] = arith.mulf %[[P]], %[[V]] : f32
// CHECK-NEXT:       attn.yield %[[PV]] : f32
// CHECK-NEXT:     } {indices = ["j"]} : f32
// CHECK-NEXT:     attn.yield %[[O]] : f32
// CHECK-NEXT:   } {indices = ["i", "e"]} : tensor<?x?xf32>
// CHECK-NEXT:   %[[C4:.+]] = arith.constant 4 : index
// CHECK-NEXT:   %c = attn.define "c"[%[[C4]]] {
// CHECK-NEXT:   ^bb0(%x: index):
// CHECK-NEXT:     %[[X:.+]] = arith.index_cast %x : index to i32
// CHECK-NEXT:     %[[XF:.+]] = arith.sitofp %[[X]] : i32 to f32
// CHECK-NEXT:     attn.yield %[[XF]] : f32
// CHECK-NEXT:   } {indices = ["x"]} : tensor<4xf32>
// CHECK-NEXT:   attn.return %o, %c : tensor<?x?xf32>, tensor<4xf32>
// CHECK-NEXT: }

// GENERIC: "attn.kernel"() <{arg_attrs = [{attn.dims = #attn.dims<N, D>, attn.name = "q"}
// GENERIC-SAME: function_type = (tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>) -> (tensor<?x?xf32>, tensor<4xf32>)
// GENERIC-SAME: sym_name = "causal"
// GENERIC: "attn.dim"(%{{.*}}) <{index = 0 : i64, size = "N"}> : (tensor<?x?xf32>) -> index
// GENERIC: "attn.define"(%{{.*}}, %{{.*}}) <{indices = ["i", "j"], name = "s"}>
// GENERIC: "attn.reduce"(%{{.*}}) <{indices = ["d"], kind = "sum"}>
// The default boundary mode is printed explicitly in the generic form.
// GENERIC: "attn.read"(%{{.*}}, %{{.*}}, %{{.*}}) <{boundary = "none"}> : (tensor<?x?xf32>, index, index) -> f32
// GENERIC: "attn.softmax"(%{{.*}}, %{{.*}}) <{axes = array<i64: 1>, indices = ["i", "j"], name = "p"}>
// GENERIC: "attn.yield"(%{{.*}}, %{{.*}}) : (f32, i1) -> ()
// GENERIC: "attn.return"(%{{.*}}, %{{.*}}) : (tensor<?x?xf32>, tensor<4xf32>) -> ()

attn.kernel @causal(%q: tensor<?x?xf32> {attn.dims = #attn.dims<N, D>, attn.name = "q"},
                    %k: tensor<?x?xf32> {attn.dims = #attn.dims<N, D>, attn.name = "k"},
                    %v: tensor<?x?xf32> {attn.dims = #attn.dims<N, D>, attn.name = "v"})
    -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, D>, attn.name = "o"},
        tensor<4xf32> {attn.dims = #attn.dims<4>, attn.name = "c"}) {
  %N = attn.dim %q[0] as "N" : tensor<?x?xf32>
  %D = attn.dim %q[1] as "D" : tensor<?x?xf32>
  %s = attn.define "s" [%N, %N] {
  ^bb0(%i: index, %j: index):
    %sum = attn.reduce "sum" [%D] {
    ^bb0(%d: index):
      %a = attn.read %q[%i, %d] : tensor<?x?xf32>
      %b = attn.read %k[%j, %d] : tensor<?x?xf32>
      %ab = arith.mulf %a, %b : f32
      attn.yield %ab : f32
    } {indices = ["d"]} : f32
    attn.yield %sum : f32
  } {indices = ["i", "j"]} : tensor<?x?xf32>
  %p = attn.softmax "p" [%N, %N] over [1] {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s[%i, %j] : tensor<?x?xf32>
    %m = arith.cmpi sle, %j, %i : index
    attn.yield %x, %m : f32, i1
  } {indices = ["i", "j"]} : tensor<?x?xf32>
  %o = attn.define "o" [%N, %D] {
  ^bb0(%i: index, %e: index):
    %r = attn.reduce "max" [%N] {
    ^bb0(%j: index):
      %pp = attn.read %p[%i, %j] {boundary = "none"} : tensor<?x?xf32>
      %vv = attn.read %v[%j, %e] : tensor<?x?xf32>
      %pv = arith.mulf %pp, %vv : f32
      attn.yield %pv : f32
    } {indices = ["j"]} : f32
    attn.yield %r : f32
  } {indices = ["i", "e"]} : tensor<?x?xf32>
  %c4 = arith.constant 4 : index
  %c = attn.define "c" [%c4] {
  ^bb0(%x: index):
    %xi = arith.index_cast %x : index to i32
    %xf = arith.sitofp %xi : i32 to f32
    attn.yield %xf : f32
  } {indices = ["x"]} : tensor<4xf32>
  attn.return %o, %c : tensor<?x?xf32>, tensor<4xf32>
}

// A kernel without inputs, with an i32 result and a "min" reduction over a constant extent.
// CHECK-LABEL: attn.kernel @iota() -> (tensor<3xi32> {attn.dims = #attn.dims<3>, attn.name = "n"}) {
// CHECK:         %n = attn.define "n"[%{{.+}}] {
// CHECK-NEXT:    ^bb0(%i: index):
// CHECK:           %[[MIN:.+]] = attn.reduce "min"[%{{.+}}] {
// CHECK-NEXT:      ^bb0(%j: index):
// CHECK:             attn.yield %{{.+}} : i32
// CHECK-NEXT:      } {indices = ["j"]} : i32
// CHECK-NEXT:      attn.yield %[[MIN]] : i32
// CHECK-NEXT:    } {indices = ["i"]} : tensor<3xi32>
// CHECK-NEXT:    attn.return %n : tensor<3xi32>
// GENERIC: "attn.reduce"(%{{.*}}) <{indices = ["j"], kind = "min"}>
attn.kernel @iota() -> (tensor<3xi32> {attn.dims = #attn.dims<3>, attn.name = "n"}) {
  %c3 = arith.constant 3 : index
  %n = attn.define "n" [%c3] {
  ^bb0(%i: index):
    %m = attn.reduce "min" [%c3] {
    ^bb0(%j: index):
      %s = arith.addi %i, %j : index
      %v = arith.index_cast %s : index to i32
      attn.yield %v : i32
    } {indices = ["j"]} : i32
    attn.yield %m : i32
  } {indices = ["i"]} : tensor<3xi32>
  attn.return %n : tensor<3xi32>
}
