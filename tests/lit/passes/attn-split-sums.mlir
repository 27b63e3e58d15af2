// Tests attn-split-sums on hand-written IR: a sum over a linear combination of probability-weighted
// terms becomes one sum per probability (the probability times the value), with each term's
// coefficient (the factors that read no summed index) computed outside the sums, and the terms
// without a probability in one more sum. Left alone: a term with two probabilities, a probability
// under exp, a body already `p * v`, more than 8 terms, a factor that reads the summed index (no
// coefficient), one probability whose only companions are terms without one. A second run
// changes nothing.
// RUN: attn-opt %s --attn-split-sums | FileCheck %s
// RUN: attn-opt %s --attn-split-sums > %t.once
// RUN: attn-opt %t.once --attn-split-sums | diff %t.once -

// Differential attention: sum(j) (p1 - lam(0) * p2) * v = sum(j) p1 * v - lam(0) * sum(j) p2 * v.
// CHECK-LABEL: attn.kernel @diff(
// CHECK:       attn.define "o"
// CHECK-NEXT:  ^bb0(%i: index, %e: index):
// CHECK-NEXT:    %[[S1:.+]] = attn.reduce "sum"[%N] {
// CHECK-NEXT:    ^bb0(%j: index):
// CHECK-NEXT:      %[[P1:.+]] = attn.read %p1[%i, %j]
// CHECK-NEXT:      %[[V1:.+]] = attn.read %v[%j, %e]
// CHECK-NEXT:      %[[PV1:.+]] = arith.mulf %[[P1]], %[[V1]] : f32
// CHECK-NEXT:      attn.yield %[[PV1]] : f32
// CHECK-NEXT:    } {indices = ["j"]} : f32
// CHECK-NEXT:    %[[S2:.+]] = attn.reduce "sum"[%N] {
// CHECK-NEXT:    ^bb0(%j: index):
// CHECK-NEXT:      %[[P2:.+]] = attn.read %p2[%i, %j]
// CHECK-NEXT:      %[[V2:.+]] = attn.read %v[%j, %e]
// CHECK-NEXT:      %[[PV2:.+]] = arith.mulf %[[P2]], %[[V2]] : f32
// CHECK-NEXT:      attn.yield %[[PV2]] : f32
// CHECK-NEXT:    } {indices = ["j"]} : f32
// CHECK-NEXT:    %[[C0:.+]] = arith.constant 0 : index
// CHECK-NEXT:    %[[LAM:.+]] = attn.read %lam[%[[C0]]]
// CHECK-NEXT:    %[[LS2:.+]] = arith.mulf %[[LAM]], %[[S2]] : f32
// CHECK-NEXT:    %[[O:.+]] = arith.subf %[[S1]], %[[LS2]] : f32
// CHECK-NEXT:    attn.yield %[[O]] : f32
// CHECK-NEXT:  } {indices = ["i", "e"]}
attn.kernel @diff(%s1: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s1"},
                  %s2: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s2"},
                  %v: tensor<?x?xf32> {attn.dims = #attn.dims<N, E>, attn.name = "v"},
                  %lam: tensor<1xf32> {attn.dims = #attn.dims<1>, attn.name = "lam"})
    -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, E>, attn.name = "o"}) {
  %N = attn.dim %s1[0] as "N" : tensor<?x?xf32>
  %E = attn.dim %v[1] as "E" : tensor<?x?xf32>
  %p1 = attn.softmax "p1"[%N, %N] over [1] {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s1[%i, %j] : tensor<?x?xf32>
    attn.yield %x : f32
  } {indices = ["i", "j"]} : tensor<?x?xf32>
  %p2 = attn.softmax "p2"[%N, %N] over [1] {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s2[%i, %j] : tensor<?x?xf32>
    attn.yield %x : f32
  } {indices = ["i", "j"]} : tensor<?x?xf32>
  %o = attn.define "o"[%N, %E] {
  ^bb0(%i: index, %e: index):
    %r = attn.reduce "sum"[%N] {
    ^bb0(%j: index):
      %a = attn.read %p1[%i, %j] : tensor<?x?xf32>
      %c0 = arith.constant 0 : index
      %l = attn.read %lam[%c0] : tensor<1xf32>
      %b = attn.read %p2[%i, %j] : tensor<?x?xf32>
      %lb = arith.mulf %l, %b : f32
      %d = arith.subf %a, %lb : f32
      %x = attn.read %v[%j, %e] : tensor<?x?xf32>
      %y = arith.mulf %d, %x : f32
      attn.yield %y : f32
    } {indices = ["j"]} : f32
    attn.yield %r : f32
  } {indices = ["i", "e"]} : tensor<?x?xf32>
  attn.return %o : tensor<?x?xf32>
}

// One probability with a coefficient, written before it (0.5 * p * v), inside the value
// (p * (w(i) * v)) or as a negation (-(p * v)): the coefficient multiplies the sum.
// CHECK-LABEL: attn.kernel @coefficient(
// CHECK:       attn.define "o"
// CHECK-NEXT:  ^bb0(%i: index, %e: index):
// CHECK-NEXT:    %[[S:.+]] = attn.reduce "sum"[%N] {
// CHECK-NEXT:    ^bb0(%j: index):
// CHECK-NEXT:      %[[P:.+]] = attn.read %p[%i, %j]
// CHECK-NEXT:      %[[V:.+]] = attn.read %v[%j, %e]
// CHECK-NEXT:      %[[PV:.+]] = arith.mulf %[[P]], %[[V]] : f32
// CHECK-NEXT:      attn.yield %[[PV]] : f32
// CHECK-NEXT:    } {indices = ["j"]} : f32
// CHECK-NEXT:    %[[H:.+]] = arith.constant 5.000000e-01 : f32
// CHECK-NEXT:    %[[O:.+]] = arith.mulf %[[H]], %[[S]] : f32
// CHECK-NEXT:    attn.yield %[[O]] : f32
// CHECK:       attn.define "o2"
// CHECK-NEXT:  ^bb0(%i: index, %e: index):
// CHECK-NEXT:    %[[S:.+]] = attn.reduce "sum"[%N] {
// CHECK-NEXT:    ^bb0(%j: index):
// CHECK-NEXT:      %[[P:.+]] = attn.read %p[%i, %j]
// CHECK-NEXT:      %[[V:.+]] = attn.read %v[%j, %e]
// CHECK-NEXT:      %[[PV:.+]] = arith.mulf %[[P]], %[[V]] : f32
// CHECK-NEXT:      attn.yield %[[PV]] : f32
// CHECK-NEXT:    } {indices = ["j"]} : f32
// CHECK-NEXT:    %[[W:.+]] = attn.read %w[%i]
// CHECK-NEXT:    %[[O:.+]] = arith.mulf %[[W]], %[[S]] : f32
// CHECK-NEXT:    attn.yield %[[O]] : f32
// CHECK:       attn.define "o3"
// CHECK-NEXT:  ^bb0(%i: index, %e: index):
// CHECK-NEXT:    %[[S:.+]] = attn.reduce "sum"[%N] {
// CHECK-NEXT:    ^bb0(%j: index):
// CHECK-NEXT:      %[[P:.+]] = attn.read %p[%i, %j]
// CHECK-NEXT:      %[[V:.+]] = attn.read %v[%j, %e]
// CHECK-NEXT:      %[[PV:.+]] = arith.mulf %[[P]], %[[V]] : f32
// CHECK-NEXT:      attn.yield %[[PV]] : f32
// CHECK-NEXT:    } {indices = ["j"]} : f32
// CHECK-NEXT:    %[[O:.+]] = arith.negf %[[S]] : f32
// CHECK-NEXT:    attn.yield %[[O]] : f32
attn.kernel @coefficient(%s: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s"},
                         %v: tensor<?x?xf32> {attn.dims = #attn.dims<N, E>, attn.name = "v"},
                         %w: tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "w"})
    -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, E>, attn.name = "o"},
        tensor<?x?xf32> {attn.dims = #attn.dims<N, E>, attn.name = "o2"},
        tensor<?x?xf32> {attn.dims = #attn.dims<N, E>, attn.name = "o3"}) {
  %N = attn.dim %s[0] as "N" : tensor<?x?xf32>
  %E = attn.dim %v[1] as "E" : tensor<?x?xf32>
  %p = attn.softmax "p"[%N, %N] over [1] {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s[%i, %j] : tensor<?x?xf32>
    attn.yield %x : f32
  } {indices = ["i", "j"]} : tensor<?x?xf32>
  %o = attn.define "o"[%N, %E] {
  ^bb0(%i: index, %e: index):
    %r = attn.reduce "sum"[%N] {
    ^bb0(%j: index):
      %h = arith.constant 0.5 : f32
      %a = attn.read %p[%i, %j] : tensor<?x?xf32>
      %ha = arith.mulf %h, %a : f32
      %x = attn.read %v[%j, %e] : tensor<?x?xf32>
      %y = arith.mulf %ha, %x : f32
      attn.yield %y : f32
    } {indices = ["j"]} : f32
    attn.yield %r : f32
  } {indices = ["i", "e"]} : tensor<?x?xf32>
  %o2 = attn.define "o2"[%N, %E] {
  ^bb0(%i: index, %e: index):
    %r = attn.reduce "sum"[%N] {
    ^bb0(%j: index):
      %a = attn.read %p[%i, %j] : tensor<?x?xf32>
      %c = attn.read %w[%i] : tensor<?xf32>
      %x = attn.read %v[%j, %e] : tensor<?x?xf32>
      %cx = arith.mulf %c, %x : f32
      %y = arith.mulf %a, %cx : f32
      attn.yield %y : f32
    } {indices = ["j"]} : f32
    attn.yield %r : f32
  } {indices = ["i", "e"]} : tensor<?x?xf32>
  %o3 = attn.define "o3"[%N, %E] {
  ^bb0(%i: index, %e: index):
    %r = attn.reduce "sum"[%N] {
    ^bb0(%j: index):
      %a = attn.read %p[%i, %j] : tensor<?x?xf32>
      %x = attn.read %v[%j, %e] : tensor<?x?xf32>
      %ax = arith.mulf %a, %x : f32
      %y = arith.negf %ax : f32
      attn.yield %y : f32
    } {indices = ["j"]} : f32
    attn.yield %r : f32
  } {indices = ["i", "e"]} : tensor<?x?xf32>
  attn.return %o, %o2, %o3 : tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>
}

// Terms without a probability stay in one sum, kept as written (b(j) * (c(j) * x(j, e))); two
// terms weighted by the same probability share its sum: sum(j) (p1 + b(j) * c(j) + p2 + p1 * b(j))
// * x(j, e) -- the distributed products p1 * x, b * c * x, p2 * x, p1 * b * x -- becomes
// sum(j) p1 * (x + b * x) + sum(j) p2 * x + sum(j) b * c * x.
// CHECK-LABEL: attn.kernel @rest(
// CHECK:       attn.define "o"
// CHECK-NEXT:  ^bb0(%i: index, %e: index):
// CHECK-NEXT:    %[[S1:.+]] = attn.reduce "sum"[%N] {
// CHECK-NEXT:    ^bb0(%j: index):
// CHECK-NEXT:      %[[P1:.+]] = attn.read %p1[%i, %j]
// CHECK-NEXT:      %[[X:.+]] = attn.read %x[%j, %e]
// CHECK-NEXT:      %[[B:.+]] = attn.read %b[%j]
// CHECK-NEXT:      %[[BX:.+]] = arith.mulf %[[B]], %[[X]] : f32
// CHECK-NEXT:      %[[V:.+]] = arith.addf %[[X]], %[[BX]] : f32
// CHECK-NEXT:      %[[PV:.+]] = arith.mulf %[[P1]], %[[V]] : f32
// CHECK-NEXT:      attn.yield %[[PV]] : f32
// CHECK-NEXT:    } {indices = ["j"]} : f32
// CHECK-NEXT:    %[[S2:.+]] = attn.reduce "sum"[%N] {
// CHECK:           attn.read %p2[%i, %j]
// CHECK:         } {indices = ["j"]} : f32
// CHECK-NEXT:    %[[A:.+]] = arith.addf %[[S1]], %[[S2]] : f32
// CHECK-NEXT:    %[[S3:.+]] = attn.reduce "sum"[%N] {
// CHECK-NEXT:    ^bb0(%j: index):
// CHECK-NEXT:      %[[B:.+]] = attn.read %b[%j]
// CHECK-NEXT:      %[[C:.+]] = attn.read %c[%j]
// CHECK-NEXT:      %[[BC:.+]] = arith.mulf %[[B]], %[[C]] : f32
// CHECK-NEXT:      %[[X:.+]] = attn.read %x[%j, %e]
// CHECK-NEXT:      %[[BCX:.+]] = arith.mulf %[[BC]], %[[X]] : f32
// CHECK-NEXT:      attn.yield %[[BCX]] : f32
// CHECK-NEXT:    } {indices = ["j"]} : f32
// CHECK-NEXT:    %[[O:.+]] = arith.addf %[[A]], %[[S3]] : f32
// CHECK-NEXT:    attn.yield %[[O]] : f32
// The rest sum reuses a term written as it is.
// CHECK:       attn.define "o2"
// CHECK:         attn.reduce "sum"[%N] {
// CHECK:           attn.read %p1[%i, %j]
// CHECK:         attn.reduce "sum"[%N] {
// CHECK:           attn.read %p2[%i, %j]
// CHECK:         attn.reduce "sum"[%N] {
// CHECK-NEXT:    ^bb0(%j: index):
// CHECK-NEXT:      %[[B:.+]] = attn.read %b[%j]
// CHECK-NEXT:      %[[C:.+]] = attn.read %c[%j]
// CHECK-NEXT:      %[[X:.+]] = attn.read %x[%j, %e]
// CHECK-NEXT:      %[[CX:.+]] = arith.mulf %[[C]], %[[X]] : f32
// CHECK-NEXT:      %[[BCX:.+]] = arith.mulf %[[B]], %[[CX]] : f32
// CHECK-NEXT:      %[[R:.+]] = arith.negf %[[BCX]] : f32
// CHECK-NEXT:      attn.yield %[[R]] : f32
// CHECK-NEXT:    } {indices = ["j"]} : f32
// CHECK-NEXT:    arith.addf
// CHECK-NEXT:    attn.yield
attn.kernel @rest(%s1: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s1"},
                  %s2: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s2"},
                  %x: tensor<?x?xf32> {attn.dims = #attn.dims<N, E>, attn.name = "x"},
                  %b: tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "b"},
                  %c: tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "c"})
    -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, E>, attn.name = "o"},
        tensor<?x?xf32> {attn.dims = #attn.dims<N, E>, attn.name = "o2"}) {
  %N = attn.dim %s1[0] as "N" : tensor<?x?xf32>
  %E = attn.dim %x[1] as "E" : tensor<?x?xf32>
  %p1 = attn.softmax "p1"[%N, %N] over [1] {
  ^bb0(%i: index, %j: index):
    %r = attn.read %s1[%i, %j] : tensor<?x?xf32>
    attn.yield %r : f32
  } {indices = ["i", "j"]} : tensor<?x?xf32>
  %p2 = attn.softmax "p2"[%N, %N] over [1] {
  ^bb0(%i: index, %j: index):
    %r = attn.read %s2[%i, %j] : tensor<?x?xf32>
    attn.yield %r : f32
  } {indices = ["i", "j"]} : tensor<?x?xf32>
  %o = attn.define "o"[%N, %E] {
  ^bb0(%i: index, %e: index):
    %r = attn.reduce "sum"[%N] {
    ^bb0(%j: index):
      %a1 = attn.read %p1[%i, %j] : tensor<?x?xf32>
      %bj = attn.read %b[%j] : tensor<?xf32>
      %cj = attn.read %c[%j] : tensor<?xf32>
      %bc = arith.mulf %bj, %cj : f32
      %t1 = arith.addf %a1, %bc : f32
      %a2 = attn.read %p2[%i, %j] : tensor<?x?xf32>
      %t2 = arith.addf %t1, %a2 : f32
      %ab = arith.mulf %a1, %bj : f32
      %t3 = arith.addf %t2, %ab : f32
      %xv = attn.read %x[%j, %e] : tensor<?x?xf32>
      %y = arith.mulf %t3, %xv : f32
      attn.yield %y : f32
    } {indices = ["j"]} : f32
    attn.yield %r : f32
  } {indices = ["i", "e"]} : tensor<?x?xf32>
  // sum(j) p1 * x + p2 * x - b * (c * x)
  %o2 = attn.define "o2"[%N, %E] {
  ^bb0(%i: index, %e: index):
    %r = attn.reduce "sum"[%N] {
    ^bb0(%j: index):
      %a1 = attn.read %p1[%i, %j] : tensor<?x?xf32>
      %xv = attn.read %x[%j, %e] : tensor<?x?xf32>
      %ax1 = arith.mulf %a1, %xv : f32
      %a2 = attn.read %p2[%i, %j] : tensor<?x?xf32>
      %ax2 = arith.mulf %a2, %xv : f32
      %t = arith.addf %ax1, %ax2 : f32
      %bj = attn.read %b[%j] : tensor<?xf32>
      %cj = attn.read %c[%j] : tensor<?xf32>
      %cx = arith.mulf %cj, %xv : f32
      %bcx = arith.mulf %bj, %cx : f32
      %y = arith.subf %t, %bcx : f32
      attn.yield %y : f32
    } {indices = ["j"]} : f32
    attn.yield %r : f32
  } {indices = ["i", "e"]} : tensor<?x?xf32>
  attn.return %o, %o2 : tensor<?x?xf32>, tensor<?x?xf32>
}

// Left alone, each a single attn.reduce: p1 * p2 * v (two probabilities in a term), p1 * v +
// exp(p2) (a probability under exp), p1 * v (already the form that fuses), nine terms
// (p1 + p2 + 7 * b(j)... as nine additions), w(j) * p1 * v (w reads j: no coefficient) and
// p1 * v + b(j) (one probability, and terms without one).
// CHECK-LABEL: attn.kernel @alone(
// CHECK-COUNT-6: attn.reduce "sum"
// CHECK-NOT:     attn.reduce
// CHECK:         attn.return
attn.kernel @alone(%s1: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s1"},
                   %s2: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s2"},
                   %v: tensor<?x?xf32> {attn.dims = #attn.dims<N, E>, attn.name = "v"},
                   %w: tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "w"})
    -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, E>, attn.name = "twop"},
        tensor<?x?xf32> {attn.dims = #attn.dims<N, E>, attn.name = "under"},
        tensor<?x?xf32> {attn.dims = #attn.dims<N, E>, attn.name = "pv"},
        tensor<?x?xf32> {attn.dims = #attn.dims<N, E>, attn.name = "many"},
        tensor<?x?xf32> {attn.dims = #attn.dims<N, E>, attn.name = "wj"},
        tensor<?x?xf32> {attn.dims = #attn.dims<N, E>, attn.name = "plus"}) {
  %N = attn.dim %s1[0] as "N" : tensor<?x?xf32>
  %E = attn.dim %v[1] as "E" : tensor<?x?xf32>
  %p1 = attn.softmax "p1"[%N, %N] over [1] {
  ^bb0(%i: index, %j: index):
    %r = attn.read %s1[%i, %j] : tensor<?x?xf32>
    attn.yield %r : f32
  } {indices = ["i", "j"]} : tensor<?x?xf32>
  %p2 = attn.softmax "p2"[%N, %N] over [1] {
  ^bb0(%i: index, %j: index):
    %r = attn.read %s2[%i, %j] : tensor<?x?xf32>
    attn.yield %r : f32
  } {indices = ["i", "j"]} : tensor<?x?xf32>
  %twop = attn.define "twop"[%N, %E] {
  ^bb0(%i: index, %e: index):
    %r = attn.reduce "sum"[%N] {
    ^bb0(%j: index):
      %a1 = attn.read %p1[%i, %j] : tensor<?x?xf32>
      %a2 = attn.read %p2[%i, %j] : tensor<?x?xf32>
      %c0 = arith.constant 0 : index
      %l = attn.read %w[%c0] : tensor<?xf32>
      %la2 = arith.mulf %l, %a2 : f32
      %d = arith.subf %a1, %la2 : f32
      %dd = arith.mulf %a1, %d : f32
      %xv = attn.read %v[%j, %e] : tensor<?x?xf32>
      %y = arith.mulf %dd, %xv : f32
      attn.yield %y : f32
    } {indices = ["j"]} : f32
    attn.yield %r : f32
  } {indices = ["i", "e"]} : tensor<?x?xf32>
  %under = attn.define "under"[%N, %E] {
  ^bb0(%i: index, %e: index):
    %r = attn.reduce "sum"[%N] {
    ^bb0(%j: index):
      %a1 = attn.read %p1[%i, %j] : tensor<?x?xf32>
      %xv = attn.read %v[%j, %e] : tensor<?x?xf32>
      %ax = arith.mulf %a1, %xv : f32
      %a2 = attn.read %p2[%i, %j] : tensor<?x?xf32>
      %ex = math.exp %a2 : f32
      %y = arith.addf %ax, %ex : f32
      attn.yield %y : f32
    } {indices = ["j"]} : f32
    attn.yield %r : f32
  } {indices = ["i", "e"]} : tensor<?x?xf32>
  %pv = attn.define "pv"[%N, %E] {
  ^bb0(%i: index, %e: index):
    %r = attn.reduce "sum"[%N] {
    ^bb0(%j: index):
      %xv = attn.read %v[%j, %e] : tensor<?x?xf32>
      %a1 = attn.read %p1[%i, %j] : tensor<?x?xf32>
      %y = arith.mulf %xv, %a1 : f32
      attn.yield %y : f32
    } {indices = ["j"]} : f32
    attn.yield %r : f32
  } {indices = ["i", "e"]} : tensor<?x?xf32>
  // (p1 + p2 + b + b + b + b + b + b + b) * v: nine terms.
  %many = attn.define "many"[%N, %E] {
  ^bb0(%i: index, %e: index):
    %r = attn.reduce "sum"[%N] {
    ^bb0(%j: index):
      %a1 = attn.read %p1[%i, %j] : tensor<?x?xf32>
      %a2 = attn.read %p2[%i, %j] : tensor<?x?xf32>
      %bj = attn.read %w[%j] : tensor<?xf32>
      %t1 = arith.addf %a1, %a2 : f32
      %t2 = arith.addf %t1, %bj : f32
      %t3 = arith.addf %t2, %bj : f32
      %t4 = arith.addf %t3, %bj : f32
      %t5 = arith.addf %t4, %bj : f32
      %t6 = arith.addf %t5, %bj : f32
      %t7 = arith.addf %t6, %bj : f32
      %t8 = arith.addf %t7, %bj : f32
      %xv = attn.read %v[%j, %e] : tensor<?x?xf32>
      %y = arith.mulf %t8, %xv : f32
      attn.yield %y : f32
    } {indices = ["j"]} : f32
    attn.yield %r : f32
  } {indices = ["i", "e"]} : tensor<?x?xf32>
  %wj = attn.define "wj"[%N, %E] {
  ^bb0(%i: index, %e: index):
    %r = attn.reduce "sum"[%N] {
    ^bb0(%j: index):
      %wv = attn.read %w[%j] : tensor<?xf32>
      %a1 = attn.read %p1[%i, %j] : tensor<?x?xf32>
      %wa = arith.mulf %wv, %a1 : f32
      %xv = attn.read %v[%j, %e] : tensor<?x?xf32>
      %y = arith.mulf %wa, %xv : f32
      attn.yield %y : f32
    } {indices = ["j"]} : f32
    attn.yield %r : f32
  } {indices = ["i", "e"]} : tensor<?x?xf32>
  %plus = attn.define "plus"[%N, %E] {
  ^bb0(%i: index, %e: index):
    %r = attn.reduce "sum"[%N] {
    ^bb0(%j: index):
      %a1 = attn.read %p1[%i, %j] : tensor<?x?xf32>
      %xv = attn.read %v[%j, %e] : tensor<?x?xf32>
      %ax = arith.mulf %a1, %xv : f32
      %wv = attn.read %w[%j] : tensor<?xf32>
      %y = arith.addf %ax, %wv : f32
      attn.yield %y : f32
    } {indices = ["j"]} : f32
    attn.yield %r : f32
  } {indices = ["i", "e"]} : tensor<?x?xf32>
  attn.return %twop, %under, %pv, %many, %wj, %plus : tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>, tensor<?x?xf32>
}
