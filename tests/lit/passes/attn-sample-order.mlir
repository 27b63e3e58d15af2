// Tests attn-sample-order: a projection v = sum_c x * w (+ bias) read only through expressions
// linear in v is computed where it is sampled (sample-then-project) when that is cheaper by
// seed 000's costs, from the kernel's attn.estimates, or when forced; kernels it cannot rewrite
// (a product of two samples, an affine use, a projection that is an output) are left unchanged.
// The input is `attnc --no-opt` output of the kernels in each kernel's comment.
// RUN: attn-opt %s --attn-sample-order | FileCheck %s --check-prefix=AUTO
// RUN: attn-opt %s --attn-sample-order=order=sample-first | FileCheck %s --check-prefix=SAMPLE
// RUN: attn-opt %s --attn-sample-order=order=project-first | FileCheck %s --check-prefix=PROJECT
// RUN: not attn-opt %s --attn-sample-order=order=sideways 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: attn-sample-order: unknown order 'sideways' (auto, sample-first or project-first)

// gather: v(i, d) = sum(c) x(i, c) * w(d, c);  o(q, d) = sum(k) a(q, k) * v.clamp(idx(q, k), d)
// Costs: N*D*C = 1000*64*64 to project every row, Q*D*K*C = 10*64*4*64 to project each sample.
// AUTO-LABEL: attn.kernel @gather
// AUTO: %v__sample = attn.define "v__sample"[%Q, %K, %C] {
// AUTO-NEXT: ^bb0(%q: index, %k: index, %c: index):
// AUTO-NEXT: %0 = attn.read %idx[%q, %k] : tensor<?x?xi32>
// AUTO-NEXT: %1 = arith.index_cast %0 : i32 to index
// AUTO-NEXT: %2 = attn.read %x[%1, %c] {boundary = "clamp"} : tensor<?x?xf32>
// AUTO-NEXT: attn.yield %2 : f32
// AUTO: %o = attn.define "o"[%Q, %D] {
// AUTO: attn.reduce "sum"[%K] {
// AUTO: attn.read %a[%q, %k]
// AUTO: attn.reduce "sum"[%C] {
// AUTO-NEXT: ^bb0(%c: index):
// AUTO-NEXT: attn.read %v__sample[%q, %k, %c]
// AUTO-NEXT: attn.read %w[%d, %c]
// AUTO-NEXT: arith.mulf
// AUTO: attn.sample_order = {v = {order = "sample-then-project", project_then_sample = 4096000 : i64, sample_then_project = 163840 : i64}}
// PROJECT-LABEL: attn.kernel @gather
// PROJECT: %v = attn.define "v"[%N, %D]
// PROJECT: attn.sample_order = {v = {order = "project-then-sample", project_then_sample = 4096000 : i64, reason = "forced by --sample-order=project-first", sample_then_project = 163840 : i64}}

// twopoint: v(i, d) = b(d) + sum(c) x(i, c) * w(d, c);
//           o(q, d) = 0.25 * v.zero(idx(q, 0), d) + 0.75 * v.zero(idx(q, 1), d)
// Without estimates the order stays as written. Sampled first, the bias is weighted by the same
// expression with each sample replaced by 1 where it is in range (0 where .zero reads zero).
// AUTO-LABEL: attn.kernel @twopoint
// AUTO: %v = attn.define "v"[%N, %D]
// AUTO: attn.sample_order = {v = {order = "project-then-sample", reason = "no size estimate for N D C Q; kept as written"}}
// SAMPLE-LABEL: attn.kernel @twopoint
// SAMPLE: %v__sample = attn.define "v__sample"[%Q, %C] {
// SAMPLE: attn.read %x[%{{.*}}, %c] {boundary = "zero"}
// SAMPLE: attn.read %x[%{{.*}}, %c] {boundary = "zero"}
// SAMPLE: %o = attn.define "o"[%Q, %D] {
// SAMPLE: %[[SUM:.*]] = attn.reduce "sum"[%C] {
// SAMPLE: attn.read %v__sample[%q, %c]
// SAMPLE: attn.read %w[%d, %c]
// SAMPLE: %[[IN0:.*]] = arith.andi
// SAMPLE: arith.select %[[IN0]], %cst{{.*}}, %cst
// SAMPLE: %[[IN1:.*]] = arith.andi
// SAMPLE: arith.select %[[IN1]], %cst{{.*}}, %cst
// SAMPLE: %[[ONES:.*]] = arith.addf
// SAMPLE: %[[B:.*]] = attn.read %b[%d]
// SAMPLE: %[[BIAS:.*]] = arith.mulf %[[B]], %[[ONES]]
// SAMPLE: arith.addf %[[SUM]], %[[BIAS]]
// SAMPLE: attn.sample_order = {v = {order = "sample-then-project", reason = "forced by --sample-order=sample-first"}}

// squared: o(q, d) = v.clamp(idx(q, 0), d) * v.clamp(idx(q, 1), d) is not linear in v;
// affine: o(q, d) = 1.0 + v.clamp(idx(q, 0), d) + v.clamp(idx(q, 1), d) is not either (the 1.0);
// output: the projection is the kernel's output. None of them is touched, even when forced.
// SAMPLE-LABEL: attn.kernel @squared
// SAMPLE-NOT: v__sample
// SAMPLE-NOT: attn.sample_order
// SAMPLE: attn.kernel @affine
// SAMPLE-NOT: v__sample
// SAMPLE-NOT: attn.sample_order
// SAMPLE: attn.kernel @output
// SAMPLE-NOT: attn.sample_order

  attn.kernel @gather(%x: tensor<?x?xf32> {attn.dims = #attn.dims<N, C>, attn.name = "x"}, %w: tensor<?x?xf32> {attn.dims = #attn.dims<D, C>, attn.name = "w"}, %idx: tensor<?x?xi32> {attn.dims = #attn.dims<Q, K>, attn.name = "idx"}, %a: tensor<?x?xf32> {attn.dims = #attn.dims<Q, K>, attn.name = "a"}) -> (tensor<?x?xf32> {attn.dims = #attn.dims<Q, D>, attn.name = "o"}) attributes {attn.estimates = {N = 1000 : i64, C = 64 : i64, D = 64 : i64, Q = 10 : i64, K = 4 : i64}} {
    %N = attn.dim %x[0] as "N" : tensor<?x?xf32>
    %C = attn.dim %x[1] as "C" : tensor<?x?xf32>
    %D = attn.dim %w[0] as "D" : tensor<?x?xf32>
    %Q = attn.dim %idx[0] as "Q" : tensor<?x?xi32>
    %K = attn.dim %idx[1] as "K" : tensor<?x?xi32>
    %v = attn.define "v"[%N, %D] {
    ^bb0(%i: index, %d: index):
      %0 = attn.reduce "sum"[%C] {
      ^bb0(%c: index):
        %1 = attn.read %x[%i, %c] : tensor<?x?xf32>
        %2 = attn.read %w[%d, %c] : tensor<?x?xf32>
        %3 = arith.mulf %1, %2 : f32
        attn.yield %3 : f32
      } {indices = ["c"]} : f32
      attn.yield %0 : f32
    } {indices = ["i", "d"]} : tensor<?x?xf32>
    %o = attn.define "o"[%Q, %D] {
    ^bb0(%q: index, %d: index):
      %0 = attn.reduce "sum"[%K] {
      ^bb0(%k: index):
        %1 = attn.read %a[%q, %k] : tensor<?x?xf32>
        %2 = attn.read %idx[%q, %k] : tensor<?x?xi32>
        %3 = arith.index_cast %2 : i32 to index
        %4 = attn.read %v[%3, %d] {boundary = "clamp"} : tensor<?x?xf32>
        %5 = arith.mulf %1, %4 : f32
        attn.yield %5 : f32
      } {indices = ["k"]} : f32
      attn.yield %0 : f32
    } {indices = ["q", "d"]} : tensor<?x?xf32>
    attn.return %o : tensor<?x?xf32>
  }
  attn.kernel @twopoint(%x: tensor<?x?xf32> {attn.dims = #attn.dims<N, C>, attn.name = "x"}, %w: tensor<?x?xf32> {attn.dims = #attn.dims<D, C>, attn.name = "w"}, %b: tensor<?xf32> {attn.dims = #attn.dims<D>, attn.name = "b"}, %idx: tensor<?x2xi32> {attn.dims = #attn.dims<Q, 2>, attn.name = "idx"}) -> (tensor<?x?xf32> {attn.dims = #attn.dims<Q, D>, attn.name = "o"}) {
    %N = attn.dim %x[0] as "N" : tensor<?x?xf32>
    %C = attn.dim %x[1] as "C" : tensor<?x?xf32>
    %D = attn.dim %w[0] as "D" : tensor<?x?xf32>
    %Q = attn.dim %idx[0] as "Q" : tensor<?x2xi32>
    %v = attn.define "v"[%N, %D] {
    ^bb0(%i: index, %d: index):
      %0 = attn.read %b[%d] : tensor<?xf32>
      %1 = attn.reduce "sum"[%C] {
      ^bb0(%c: index):
        %3 = attn.read %x[%i, %c] : tensor<?x?xf32>
        %4 = attn.read %w[%d, %c] : tensor<?x?xf32>
        %5 = arith.mulf %3, %4 : f32
        attn.yield %5 : f32
      } {indices = ["c"]} : f32
      %2 = arith.addf %0, %1 : f32
      attn.yield %2 : f32
    } {indices = ["i", "d"]} : tensor<?x?xf32>
    %o = attn.define "o"[%Q, %D] {
    ^bb0(%q: index, %d: index):
      %cst = arith.constant 2.500000e-01 : f32
      %c0 = arith.constant 0 : index
      %0 = attn.read %idx[%q, %c0] : tensor<?x2xi32>
      %1 = arith.index_cast %0 : i32 to index
      %2 = attn.read %v[%1, %d] {boundary = "zero"} : tensor<?x?xf32>
      %3 = arith.mulf %cst, %2 : f32
      %cst_0 = arith.constant 7.500000e-01 : f32
      %c1 = arith.constant 1 : index
      %4 = attn.read %idx[%q, %c1] : tensor<?x2xi32>
      %5 = arith.index_cast %4 : i32 to index
      %6 = attn.read %v[%5, %d] {boundary = "zero"} : tensor<?x?xf32>
      %7 = arith.mulf %cst_0, %6 : f32
      %8 = arith.addf %3, %7 : f32
      attn.yield %8 : f32
    } {indices = ["q", "d"]} : tensor<?x?xf32>
    attn.return %o : tensor<?x?xf32>
  }
  attn.kernel @squared(%x: tensor<?x?xf32> {attn.dims = #attn.dims<N, C>, attn.name = "x"}, %w: tensor<?x?xf32> {attn.dims = #attn.dims<D, C>, attn.name = "w"}, %idx: tensor<?x2xi32> {attn.dims = #attn.dims<Q, 2>, attn.name = "idx"}) -> (tensor<?x?xf32> {attn.dims = #attn.dims<Q, D>, attn.name = "o"}) {
    %N = attn.dim %x[0] as "N" : tensor<?x?xf32>
    %C = attn.dim %x[1] as "C" : tensor<?x?xf32>
    %D = attn.dim %w[0] as "D" : tensor<?x?xf32>
    %Q = attn.dim %idx[0] as "Q" : tensor<?x2xi32>
    %v = attn.define "v"[%N, %D] {
    ^bb0(%i: index, %d: index):
      %0 = attn.reduce "sum"[%C] {
      ^bb0(%c: index):
        %1 = attn.read %x[%i, %c] : tensor<?x?xf32>
        %2 = attn.read %w[%d, %c] : tensor<?x?xf32>
        %3 = arith.mulf %1, %2 : f32
        attn.yield %3 : f32
      } {indices = ["c"]} : f32
      attn.yield %0 : f32
    } {indices = ["i", "d"]} : tensor<?x?xf32>
    %o = attn.define "o"[%Q, %D] {
    ^bb0(%q: index, %d: index):
      %c0 = arith.constant 0 : index
      %0 = attn.read %idx[%q, %c0] : tensor<?x2xi32>
      %1 = arith.index_cast %0 : i32 to index
      %2 = attn.read %v[%1, %d] {boundary = "clamp"} : tensor<?x?xf32>
      %c1 = arith.constant 1 : index
      %3 = attn.read %idx[%q, %c1] : tensor<?x2xi32>
      %4 = arith.index_cast %3 : i32 to index
      %5 = attn.read %v[%4, %d] {boundary = "clamp"} : tensor<?x?xf32>
      %6 = arith.mulf %2, %5 : f32
      attn.yield %6 : f32
    } {indices = ["q", "d"]} : tensor<?x?xf32>
    attn.return %o : tensor<?x?xf32>
  }
  attn.kernel @affine(%x: tensor<?x?xf32> {attn.dims = #attn.dims<N, C>, attn.name = "x"}, %w: tensor<?x?xf32> {attn.dims = #attn.dims<D, C>, attn.name = "w"}, %idx: tensor<?x2xi32> {attn.dims = #attn.dims<Q, 2>, attn.name = "idx"}) -> (tensor<?x?xf32> {attn.dims = #attn.dims<Q, D>, attn.name = "o"}) {
    %N = attn.dim %x[0] as "N" : tensor<?x?xf32>
    %C = attn.dim %x[1] as "C" : tensor<?x?xf32>
    %D = attn.dim %w[0] as "D" : tensor<?x?xf32>
    %Q = attn.dim %idx[0] as "Q" : tensor<?x2xi32>
    %v = attn.define "v"[%N, %D] {
    ^bb0(%i: index, %d: index):
      %0 = attn.reduce "sum"[%C] {
      ^bb0(%c: index):
        %1 = attn.read %x[%i, %c] : tensor<?x?xf32>
        %2 = attn.read %w[%d, %c] : tensor<?x?xf32>
        %3 = arith.mulf %1, %2 : f32
        attn.yield %3 : f32
      } {indices = ["c"]} : f32
      attn.yield %0 : f32
    } {indices = ["i", "d"]} : tensor<?x?xf32>
    %o = attn.define "o"[%Q, %D] {
    ^bb0(%q: index, %d: index):
      %cst = arith.constant 1.000000e+00 : f32
      %c0 = arith.constant 0 : index
      %0 = attn.read %idx[%q, %c0] : tensor<?x2xi32>
      %1 = arith.index_cast %0 : i32 to index
      %2 = attn.read %v[%1, %d] {boundary = "clamp"} : tensor<?x?xf32>
      %3 = arith.addf %cst, %2 : f32
      %c1 = arith.constant 1 : index
      %4 = attn.read %idx[%q, %c1] : tensor<?x2xi32>
      %5 = arith.index_cast %4 : i32 to index
      %6 = attn.read %v[%5, %d] {boundary = "clamp"} : tensor<?x?xf32>
      %7 = arith.addf %3, %6 : f32
      attn.yield %7 : f32
    } {indices = ["q", "d"]} : tensor<?x?xf32>
    attn.return %o : tensor<?x?xf32>
  }
  attn.kernel @output(%x: tensor<?x?xf32> {attn.dims = #attn.dims<N, C>, attn.name = "x"}, %w: tensor<?x?xf32> {attn.dims = #attn.dims<D, C>, attn.name = "w"}) -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, D>, attn.name = "o"}) {
    %N = attn.dim %x[0] as "N" : tensor<?x?xf32>
    %C = attn.dim %x[1] as "C" : tensor<?x?xf32>
    %D = attn.dim %w[0] as "D" : tensor<?x?xf32>
    %o = attn.define "o"[%N, %D] {
    ^bb0(%i: index, %d: index):
      %0 = attn.reduce "sum"[%C] {
      ^bb0(%c: index):
        %1 = attn.read %x[%i, %c] : tensor<?x?xf32>
        %2 = attn.read %w[%d, %c] : tensor<?x?xf32>
        %3 = arith.mulf %1, %2 : f32
        attn.yield %3 : f32
      } {indices = ["c"]} : f32
      attn.yield %0 : f32
    } {indices = ["i", "d"]} : tensor<?x?xf32>
    attn.return %o : tensor<?x?xf32>
  }
