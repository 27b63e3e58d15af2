// Tests that attn ops are pure for the generic passes: CSE merges identical attn.dim and
// attn.read ops and erases unused definitions; canonicalize folds and hoists constants out of
// definition regions without touching attn ops that are used.
// RUN: attn-opt %s --cse | FileCheck %s --check-prefix=CSE
// RUN: attn-opt %s --canonicalize | FileCheck %s --check-prefix=CANON
// RUN: attn-opt %s --symbol-dce | FileCheck %s --check-prefix=DCE

// CSE-LABEL: attn.kernel @k(
// CSE-NEXT:    %N = attn.dim %q[0] as "N" : tensor<?xf32>
// CSE-NOT:     attn.dim
// CSE-NOT:     "u"
// CSE:         %o = attn.define "o"[%N] {
// CSE-NEXT:    ^bb0(%i: index):
// CSE-NEXT:      %[[A:.+]] = attn.read %q[%i] : tensor<?xf32>
// CSE-NOT:       attn.read
// CSE:           arith.mulf %[[A]], %[[A]] : f32
// CSE:         attn.return %o : tensor<?xf32>

// CANON-LABEL: attn.kernel @k(
// CANON:         %[[C3:.+]] = arith.constant 3.000000e+00 : f32
// CANON-NOT:     "u"
// CANON:         %o = attn.define "o"[%N] {
// CANON-NOT:       arith.addf
// CANON:           %[[M:.+]] = arith.mulf
// CANON-NEXT:      %[[R:.+]] = arith.mulf %[[M]], %[[C3]] : f32
// CANON-NEXT:      attn.yield %[[R]] : f32

// Kernels are public symbols: symbol-dce keeps them.
// DCE: attn.kernel @k(
// DCE: attn.define "u"

attn.kernel @k(%q: tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "q"}) -> (tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "o"}) {
  %N = attn.dim %q[0] as "N" : tensor<?xf32>
  %N2 = attn.dim %q[0] as "N" : tensor<?xf32>
  %unused = attn.define "u" [%N] {
  ^bb0(%i: index):
    %x = attn.read %q[%i] : tensor<?xf32>
    attn.yield %x : f32
  } {indices = ["i"]} : tensor<?xf32>
  %o = attn.define "o" [%N2] {
  ^bb0(%i: index):
    %a = attn.read %q[%i] : tensor<?xf32>
    %b = attn.read %q[%i] : tensor<?xf32>
    %c1 = arith.constant 1.0 : f32
    %c2 = arith.constant 2.0 : f32
    %c3 = arith.addf %c1, %c2 : f32
    %ab = arith.mulf %a, %b : f32
    %r = arith.mulf %ab, %c3 : f32
    attn.yield %r : f32
  } {indices = ["i"]} : tensor<?xf32>
  attn.return %o : tensor<?xf32>
}
