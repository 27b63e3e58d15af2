// Tests the diagnostics of `attn.bounds` (#attn.bound, AttnDialect.cpp) and `attn.key_mask`
// (#attn.key_mask): the attributes' own checks where they are parsed, the checks against the op
// that carries them on the op; one case per split.
// RUN: attn-opt %s -split-input-file -verify-diagnostics

attn.kernel @k(%s: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s"}) -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "p"}) {
  %N = attn.dim %s[0] as "N" : tensor<?x?xf32>
  // expected-error @+1 {{'attn.define' op 'attn.bounds' applies to attn.softmax, attn.online_softmax and attn.reduce only}}
  %p = attn.define "p" [%N, %N] {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s[%i, %j] : tensor<?x?xf32>
    attn.yield %x : f32
  } {attn.bounds = [], indices = ["i", "j"]} : tensor<?x?xf32>
  attn.return %p : tensor<?x?xf32>
}

// -----

attn.kernel @k(%s: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s"}) -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "p"}) {
  %N = attn.dim %s[0] as "N" : tensor<?x?xf32>
  // expected-error @+1 {{'attn.softmax' op 'attn.bounds' must be an array of #attn.bound}}
  %p = attn.softmax "p" [%N, %N] over [1] {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s[%i, %j] : tensor<?x?xf32>
    attn.yield %x : f32
  } {attn.bounds = 3, indices = ["i", "j"]} : tensor<?x?xf32>
  attn.return %p : tensor<?x?xf32>
}

// -----

// The dictionaries of an earlier spelling are no bounds.
attn.kernel @k(%s: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s"}) -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "p"}) {
  %N = attn.dim %s[0] as "N" : tensor<?x?xf32>
  // expected-error @+1 {{'attn.softmax' op 'attn.bounds' must be an array of #attn.bound}}
  %p = attn.softmax "p" [%N, %N] over [1] {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s[%i, %j] : tensor<?x?xf32>
    attn.yield %x : f32
  } {attn.bounds = [{index = 1 : i64, sizes = [], upper = affine_map<(d0, d1) -> (d0)>}], indices = ["i", "j"]} : tensor<?x?xf32>
  attn.return %p : tensor<?x?xf32>
}

// -----

attn.kernel @k(%s: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s"}) -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "p"}) {
  %N = attn.dim %s[0] as "N" : tensor<?x?xf32>
  %p = attn.softmax "p" [%N, %N] over [1] {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s[%i, %j] : tensor<?x?xf32>
    attn.yield %x : f32
  // expected-error @+1 {{expected 'index'}}
  } {attn.bounds = [#attn.bound<upper = affine_map<(d0, d1) -> (d0)>, sizes = []>], indices = ["i", "j"]} : tensor<?x?xf32>
  attn.return %p : tensor<?x?xf32>
}

// -----

attn.kernel @k(%s: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s"}) -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "p"}) {
  %N = attn.dim %s[0] as "N" : tensor<?x?xf32>
  %p = attn.softmax "p" [%N, %N] over [1] {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s[%i, %j] : tensor<?x?xf32>
    attn.yield %x : f32
  // expected-error @+1 {{#attn.bound: needs 'sizes'}}
  } {attn.bounds = [#attn.bound<index = 1, upper = affine_map<(d0, d1) -> (d0)>>], indices = ["i", "j"]} : tensor<?x?xf32>
  attn.return %p : tensor<?x?xf32>
}

// -----

attn.kernel @k(%s: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s"}) -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "p"}) {
  %N = attn.dim %s[0] as "N" : tensor<?x?xf32>
  %p = attn.softmax "p" [%N, %N] over [1] {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s[%i, %j] : tensor<?x?xf32>
    attn.yield %x : f32
  // expected-error @+1 {{#attn.bound: index -1 is negative}}
  } {attn.bounds = [#attn.bound<index = -1, sizes = [], upper = affine_map<(d0, d1) -> (d0)>>], indices = ["i", "j"]} : tensor<?x?xf32>
  attn.return %p : tensor<?x?xf32>
}

// -----

attn.kernel @k(%s: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s"}) -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "p"}) {
  %N = attn.dim %s[0] as "N" : tensor<?x?xf32>
  %p = attn.softmax "p" [%N, %N] over [1] {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s[%i, %j] : tensor<?x?xf32>
    attn.yield %x : f32
  // expected-error @+1 {{#attn.bound: needs 'lower' or 'upper'}}
  } {attn.bounds = [#attn.bound<index = 1, sizes = []>], indices = ["i", "j"]} : tensor<?x?xf32>
  attn.return %p : tensor<?x?xf32>
}

// -----

attn.kernel @k(%s: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s"}) -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "p"}) {
  %N = attn.dim %s[0] as "N" : tensor<?x?xf32>
  %p = attn.softmax "p" [%N, %N] over [1] {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s[%i, %j] : tensor<?x?xf32>
    attn.yield %x : f32
  // expected-error @+1 {{#attn.bound: 'lower' must be an affine map}}
  } {attn.bounds = [#attn.bound<index = 1, lower = 0, sizes = []>], indices = ["i", "j"]} : tensor<?x?xf32>
  attn.return %p : tensor<?x?xf32>
}

// -----

attn.kernel @k(%s: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s"}) -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "p"}) {
  %N = attn.dim %s[0] as "N" : tensor<?x?xf32>
  %p = attn.softmax "p" [%N, %N] over [1] {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s[%i, %j] : tensor<?x?xf32>
    attn.yield %x : f32
  // expected-error @+1 {{#attn.bound: 'upper' appears twice}}
  } {attn.bounds = [#attn.bound<index = 1, upper = affine_map<(d0, d1) -> (d0)>, upper = affine_map<(d0, d1) -> (d0)>, sizes = []>], indices = ["i", "j"]} : tensor<?x?xf32>
  attn.return %p : tensor<?x?xf32>
}

// -----

attn.kernel @k(%s: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s"}) -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "p"}) {
  %N = attn.dim %s[0] as "N" : tensor<?x?xf32>
  %p = attn.softmax "p" [%N, %N] over [1] {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s[%i, %j] : tensor<?x?xf32>
    attn.yield %x : f32
  // expected-error @+1 {{expected '>'}}
  } {attn.bounds = [#attn.bound<index = 1, upper = affine_map<(d0, d1) -> (d0)>, sizes = [], exact = 1>], indices = ["i", "j"]} : tensor<?x?xf32>
  attn.return %p : tensor<?x?xf32>
}

// -----

attn.kernel @k(%s: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s"}) -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "p"}) {
  %N = attn.dim %s[0] as "N" : tensor<?x?xf32>
  %p = attn.softmax "p" [%N, %N] over [1] {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s[%i, %j] : tensor<?x?xf32>
    attn.yield %x : f32
  // expected-error @+1 {{#attn.bound: unknown entry 'below' (index, lower, upper, sizes, from, exact)}}
  } {attn.bounds = [#attn.bound<index = 1, upper = affine_map<(d0, d1) -> (d0)>, sizes = [], below = 1>], indices = ["i", "j"]} : tensor<?x?xf32>
  attn.return %p : tensor<?x?xf32>
}

// -----

attn.kernel @k(%s: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s"}) -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "p"}) {
  %N = attn.dim %s[0] as "N" : tensor<?x?xf32>
  %p = attn.softmax "p" [%N, %N] over [1] {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s[%i, %j] : tensor<?x?xf32>
    attn.yield %x : f32
  // expected-error @+1 {{#attn.bound: 'upper' must map the 0 sizes to at least one bound}}
  } {attn.bounds = [#attn.bound<index = 1, upper = affine_map<(d0, d1)[s0] -> (d0)>, sizes = []>], indices = ["i", "j"]} : tensor<?x?xf32>
  attn.return %p : tensor<?x?xf32>
}

// -----

attn.kernel @k(%s: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s"}) -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "p"}) {
  %N = attn.dim %s[0] as "N" : tensor<?x?xf32>
  %p = attn.softmax "p" [%N, %N] over [1] {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s[%i, %j] : tensor<?x?xf32>
    attn.yield %x : f32
  // expected-error @+1 {{#attn.bound: 'upper' must map the 0 sizes to at least one bound}}
  } {attn.bounds = [#attn.bound<index = 1, upper = affine_map<(d0, d1) -> ()>, sizes = []>], indices = ["i", "j"]} : tensor<?x?xf32>
  attn.return %p : tensor<?x?xf32>
}

// -----

attn.kernel @k(%s: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s"}) -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "p"}) {
  %N = attn.dim %s[0] as "N" : tensor<?x?xf32>
  %p = attn.softmax "p" [%N, %N] over [1] {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s[%i, %j] : tensor<?x?xf32>
    attn.yield %x : f32
  // expected-error @+1 {{#attn.bound: 'lower' and 'upper' must map the same indices}}
  } {attn.bounds = [#attn.bound<index = 1, lower = affine_map<(d0) -> (d0)>, upper = affine_map<(d0, d1) -> (d0)>, sizes = []>], indices = ["i", "j"]} : tensor<?x?xf32>
  attn.return %p : tensor<?x?xf32>
}

// -----

attn.kernel @k(%s: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s"}) -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "p"}) {
  %N = attn.dim %s[0] as "N" : tensor<?x?xf32>
  %p = attn.softmax "p" [%N, %N] over [1] {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s[%i, %j] : tensor<?x?xf32>
    attn.yield %x : f32
  // expected-error @+1 {{#attn.bound: 'upper' may divide only by positive constants}}
  } {attn.bounds = [#attn.bound<index = 1, upper = affine_map<(d0, d1)[s0] -> (d0 floordiv s0)>, sizes = ["N"]>], indices = ["i", "j"]} : tensor<?x?xf32>
  attn.return %p : tensor<?x?xf32>
}

// -----

attn.kernel @k(%s: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s"}) -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "p"}) {
  %N = attn.dim %s[0] as "N" : tensor<?x?xf32>
  // expected-error @+1 {{'attn.softmax' op 'attn.bounds' index 0 is not a softmax axis}}
  %p = attn.softmax "p" [%N, %N] over [1] {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s[%i, %j] : tensor<?x?xf32>
    attn.yield %x : f32
  } {attn.bounds = [#attn.bound<index = 0, upper = affine_map<(d0, d1) -> (d0)>, sizes = []>], indices = ["i", "j"]} : tensor<?x?xf32>
  attn.return %p : tensor<?x?xf32>
}

// -----

attn.kernel @k(%s: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s"}) -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "p"}) {
  %N = attn.dim %s[0] as "N" : tensor<?x?xf32>
  // expected-error @+1 {{'attn.softmax' op 'attn.bounds' index 2 is out of range}}
  %p = attn.softmax "p" [%N, %N] over [1] {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s[%i, %j] : tensor<?x?xf32>
    attn.yield %x : f32
  } {attn.bounds = [#attn.bound<index = 2, upper = affine_map<(d0, d1) -> (d0)>, sizes = []>], indices = ["i", "j"]} : tensor<?x?xf32>
  attn.return %p : tensor<?x?xf32>
}

// -----

attn.kernel @k(%s: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s"}) -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "p"}) {
  %N = attn.dim %s[0] as "N" : tensor<?x?xf32>
  // expected-error @+1 {{'attn.softmax' op 'attn.bounds' names 'M', which is not a size of the kernel}}
  %p = attn.softmax "p" [%N, %N] over [1] {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s[%i, %j] : tensor<?x?xf32>
    attn.yield %x : f32
  } {attn.bounds = [#attn.bound<index = 1, upper = affine_map<(d0, d1)[s0] -> (s0)>, sizes = ["M"]>], indices = ["i", "j"]} : tensor<?x?xf32>
  attn.return %p : tensor<?x?xf32>
}

// -----

attn.kernel @k(%s: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s"}) -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "p"}) {
  %N = attn.dim %s[0] as "N" : tensor<?x?xf32>
  // expected-error @+1 {{'attn.softmax' op 'attn.bounds' 'upper' must map the 2 indices}}
  %p = attn.softmax "p" [%N, %N] over [1] {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s[%i, %j] : tensor<?x?xf32>
    attn.yield %x : f32
  } {attn.bounds = [#attn.bound<index = 1, upper = affine_map<(d0) -> (d0)>, sizes = []>], indices = ["i", "j"]} : tensor<?x?xf32>
  attn.return %p : tensor<?x?xf32>
}

// -----

attn.kernel @k(%s: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s"}) -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "p"}) {
  %N = attn.dim %s[0] as "N" : tensor<?x?xf32>
  // expected-error @+1 {{'attn.softmax' op 'attn.bounds' 'upper' may not depend on a softmax axis}}
  %p = attn.softmax "p" [%N, %N] over [1] {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s[%i, %j] : tensor<?x?xf32>
    attn.yield %x : f32
  } {attn.bounds = [#attn.bound<index = 1, upper = affine_map<(d0, d1) -> (d1 + 1)>, sizes = []>], indices = ["i", "j"]} : tensor<?x?xf32>
  attn.return %p : tensor<?x?xf32>
}

// -----

// A reduction's bounds map the indices of its enclosing definition.
attn.kernel @k(%s: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s"}) -> (tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "o"}) {
  %N = attn.dim %s[0] as "N" : tensor<?x?xf32>
  %o = attn.define "o" [%N] {
  ^bb0(%i: index):
  // expected-error @+1 {{'attn.reduce' op 'attn.bounds' 'upper' must map the 1 indices}}
    %r = attn.reduce "sum" [%N] {
    ^bb0(%j: index):
      %x = attn.read %s[%i, %j] : tensor<?x?xf32>
      attn.yield %x : f32
    } {attn.bounds = [#attn.bound<index = 0, upper = affine_map<(d0, d1) -> (d0)>, sizes = []>], indices = ["j"]} : f32
    attn.yield %r : f32
  } {indices = ["i"]} : tensor<?xf32>
  attn.return %o : tensor<?xf32>
}

// -----

attn.kernel @k(%s: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s"}) -> (tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "o"}) {
  %N = attn.dim %s[0] as "N" : tensor<?x?xf32>
  %o = attn.define "o" [%N] {
  ^bb0(%i: index):
  // expected-error @+1 {{'attn.reduce' op 'attn.bounds' 'exact' applies to softmax bounds only}}
    %r = attn.reduce "sum" [%N] {
    ^bb0(%j: index):
      %x = attn.read %s[%i, %j] : tensor<?x?xf32>
      attn.yield %x : f32
    } {attn.bounds = [#attn.bound<index = 0, upper = affine_map<(d0) -> (d0)>, sizes = [], exact>], indices = ["j"]} : f32
    attn.yield %r : f32
  } {indices = ["i"]} : tensor<?xf32>
  attn.return %o : tensor<?xf32>
}

// -----

attn.kernel @k(%s: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s"}) -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "p"}) {
  %N = attn.dim %s[0] as "N" : tensor<?x?xf32>
  // expected-error @+1 {{'attn.softmax' op 'attn.key_mask' applies to attn.online_softmax only}}
  %p = attn.softmax "p" [%N, %N] over [1] {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s[%i, %j] : tensor<?x?xf32>
    attn.yield %x : f32
  } {attn.key_mask = #attn.key_mask<conjuncts = [0], indices = []>, indices = ["i", "j"]} : tensor<?x?xf32>
  attn.return %p : tensor<?x?xf32>
}

// -----

attn.kernel @k(%s: tensor<?x?x?xf32> {attn.dims = #attn.dims<B, N, N>, attn.name = "s"}, %m: tensor<?x?xi32> {attn.dims = #attn.dims<B, N>, attn.name = "m"}) -> (tensor<?x?xf32> {attn.dims = #attn.dims<B, N>, attn.name = "o"}) {
  %B = attn.dim %s[0] as "B" : tensor<?x?x?xf32>
  %N = attn.dim %s[1] as "N" : tensor<?x?x?xf32>
  // expected-error @+1 {{'attn.online_softmax' op 'attn.key_mask' must be an #attn.key_mask}}
  %o = attn.online_softmax "o"[%B, %N] over %N rows [0, 1, -1] tile 128 score {
  ^bb0(%b: index, %i: index, %j: index):
    %x = attn.read %s[%b, %i, %j] : tensor<?x?x?xf32>
    %mv = attn.read %m[%b, %j] : tensor<?x?xi32>
    %c0 = arith.constant 0 : i32
    %pad = arith.cmpi eq, %mv, %c0 : i32
    %causal = arith.cmpi sle, %j, %i : index
    %mask = arith.andi %pad, %causal : i1
    attn.yield %x, %mask : f32, i1
  } value {
  ^bb0(%b: index, %i: index, %j: index):
    %one = arith.constant 1.0 : f32
    attn.yield %one : f32
  } {attn.key_mask = [0], indices = ["b", "i"], score_indices = ["b", "i", "j"]} : tensor<?x?xf32>
  attn.return %o : tensor<?x?xf32>
}

// -----

attn.kernel @k(%s: tensor<?x?x?xf32> {attn.dims = #attn.dims<B, N, N>, attn.name = "s"}, %m: tensor<?x?xi32> {attn.dims = #attn.dims<B, N>, attn.name = "m"}) -> (tensor<?x?xf32> {attn.dims = #attn.dims<B, N>, attn.name = "o"}) {
  %B = attn.dim %s[0] as "B" : tensor<?x?x?xf32>
  %N = attn.dim %s[1] as "N" : tensor<?x?x?xf32>
  %o = attn.online_softmax "o"[%B, %N] over %N rows [0, 1, -1] tile 128 score {
  ^bb0(%b: index, %i: index, %j: index):
    %x = attn.read %s[%b, %i, %j] : tensor<?x?x?xf32>
    %mv = attn.read %m[%b, %j] : tensor<?x?xi32>
    %c0 = arith.constant 0 : i32
    %pad = arith.cmpi eq, %mv, %c0 : i32
    %causal = arith.cmpi sle, %j, %i : index
    %mask = arith.andi %pad, %causal : i1
    attn.yield %x, %mask : f32, i1
  } value {
  ^bb0(%b: index, %i: index, %j: index):
    %one = arith.constant 1.0 : f32
    attn.yield %one : f32
  // expected-error @+1 {{#attn.key_mask: needs at least one conjunct}}
  } {attn.key_mask = #attn.key_mask<conjuncts = [], indices = []>, indices = ["b", "i"], score_indices = ["b", "i", "j"]} : tensor<?x?xf32>
  attn.return %o : tensor<?x?xf32>
}

// -----

attn.kernel @k(%s: tensor<?x?x?xf32> {attn.dims = #attn.dims<B, N, N>, attn.name = "s"}, %m: tensor<?x?xi32> {attn.dims = #attn.dims<B, N>, attn.name = "m"}) -> (tensor<?x?xf32> {attn.dims = #attn.dims<B, N>, attn.name = "o"}) {
  %B = attn.dim %s[0] as "B" : tensor<?x?x?xf32>
  %N = attn.dim %s[1] as "N" : tensor<?x?x?xf32>
  %o = attn.online_softmax "o"[%B, %N] over %N rows [0, 1, -1] tile 128 score {
  ^bb0(%b: index, %i: index, %j: index):
    %x = attn.read %s[%b, %i, %j] : tensor<?x?x?xf32>
    %mv = attn.read %m[%b, %j] : tensor<?x?xi32>
    %c0 = arith.constant 0 : i32
    %pad = arith.cmpi eq, %mv, %c0 : i32
    %causal = arith.cmpi sle, %j, %i : index
    %mask = arith.andi %pad, %causal : i1
    attn.yield %x, %mask : f32, i1
  } value {
  ^bb0(%b: index, %i: index, %j: index):
    %one = arith.constant 1.0 : f32
    attn.yield %one : f32
  // expected-error @+1 {{#attn.key_mask: 'conjuncts' must be increasing non-negative positions}}
  } {attn.key_mask = #attn.key_mask<conjuncts = [1, 0], indices = []>, indices = ["b", "i"], score_indices = ["b", "i", "j"]} : tensor<?x?xf32>
  attn.return %o : tensor<?x?xf32>
}

// -----

attn.kernel @k(%s: tensor<?x?x?xf32> {attn.dims = #attn.dims<B, N, N>, attn.name = "s"}, %m: tensor<?x?xi32> {attn.dims = #attn.dims<B, N>, attn.name = "m"}) -> (tensor<?x?xf32> {attn.dims = #attn.dims<B, N>, attn.name = "o"}) {
  %B = attn.dim %s[0] as "B" : tensor<?x?x?xf32>
  %N = attn.dim %s[1] as "N" : tensor<?x?x?xf32>
  %o = attn.online_softmax "o"[%B, %N] over %N rows [0, 1, -1] tile 128 score {
  ^bb0(%b: index, %i: index, %j: index):
    %x = attn.read %s[%b, %i, %j] : tensor<?x?x?xf32>
    %mv = attn.read %m[%b, %j] : tensor<?x?xi32>
    %c0 = arith.constant 0 : i32
    %pad = arith.cmpi eq, %mv, %c0 : i32
    %causal = arith.cmpi sle, %j, %i : index
    %mask = arith.andi %pad, %causal : i1
    attn.yield %x, %mask : f32, i1
  } value {
  ^bb0(%b: index, %i: index, %j: index):
    %one = arith.constant 1.0 : f32
    attn.yield %one : f32
  // expected-error @+1 {{#attn.key_mask: 'indices' must be increasing non-negative positions}}
  } {attn.key_mask = #attn.key_mask<conjuncts = [0], indices = [-1]>, indices = ["b", "i"], score_indices = ["b", "i", "j"]} : tensor<?x?xf32>
  attn.return %o : tensor<?x?xf32>
}

// -----

attn.kernel @k(%s: tensor<?x?x?xf32> {attn.dims = #attn.dims<B, N, N>, attn.name = "s"}, %m: tensor<?x?xi32> {attn.dims = #attn.dims<B, N>, attn.name = "m"}) -> (tensor<?x?xf32> {attn.dims = #attn.dims<B, N>, attn.name = "o"}) {
  %B = attn.dim %s[0] as "B" : tensor<?x?x?xf32>
  %N = attn.dim %s[1] as "N" : tensor<?x?x?xf32>
  %o = attn.online_softmax "o"[%B, %N] over %N rows [0, 1, -1] tile 128 score {
  ^bb0(%b: index, %i: index, %j: index):
    %x = attn.read %s[%b, %i, %j] : tensor<?x?x?xf32>
    %mv = attn.read %m[%b, %j] : tensor<?x?xi32>
    %c0 = arith.constant 0 : i32
    %pad = arith.cmpi eq, %mv, %c0 : i32
    %causal = arith.cmpi sle, %j, %i : index
    %mask = arith.andi %pad, %causal : i1
    attn.yield %x, %mask : f32, i1
  } value {
  ^bb0(%b: index, %i: index, %j: index):
    %one = arith.constant 1.0 : f32
    attn.yield %one : f32
  // expected-error @+1 {{expected 'key_only'}}
  } {attn.key_mask = #attn.key_mask<conjuncts = [0], indices = [0], only_key>, indices = ["b", "i"], score_indices = ["b", "i", "j"]} : tensor<?x?xf32>
  attn.return %o : tensor<?x?xf32>
}

// -----

attn.kernel @k(%s: tensor<?x?x?xf32> {attn.dims = #attn.dims<B, N, N>, attn.name = "s"}, %m: tensor<?x?xi32> {attn.dims = #attn.dims<B, N>, attn.name = "m"}) -> (tensor<?x?xf32> {attn.dims = #attn.dims<B, N>, attn.name = "o"}) {
  %B = attn.dim %s[0] as "B" : tensor<?x?x?xf32>
  %N = attn.dim %s[1] as "N" : tensor<?x?x?xf32>
  // expected-error @+1 {{'attn.online_softmax' op 'attn.key_mask' conjunct 2 is out of range (the mask has 2)}}
  %o = attn.online_softmax "o"[%B, %N] over %N rows [0, 1, -1] tile 128 score {
  ^bb0(%b: index, %i: index, %j: index):
    %x = attn.read %s[%b, %i, %j] : tensor<?x?x?xf32>
    %mv = attn.read %m[%b, %j] : tensor<?x?xi32>
    %c0 = arith.constant 0 : i32
    %pad = arith.cmpi eq, %mv, %c0 : i32
    %causal = arith.cmpi sle, %j, %i : index
    %mask = arith.andi %pad, %causal : i1
    attn.yield %x, %mask : f32, i1
  } value {
  ^bb0(%b: index, %i: index, %j: index):
    %one = arith.constant 1.0 : f32
    attn.yield %one : f32
  } {attn.key_mask = #attn.key_mask<conjuncts = [2], indices = [0]>, indices = ["b", "i"], score_indices = ["b", "i", "j"]} : tensor<?x?xf32>
  attn.return %o : tensor<?x?xf32>
}

// -----

// The key (score index 2) and the query row (1) are never among the indices.
attn.kernel @k(%s: tensor<?x?x?xf32> {attn.dims = #attn.dims<B, N, N>, attn.name = "s"}, %m: tensor<?x?xi32> {attn.dims = #attn.dims<B, N>, attn.name = "m"}) -> (tensor<?x?xf32> {attn.dims = #attn.dims<B, N>, attn.name = "o"}) {
  %B = attn.dim %s[0] as "B" : tensor<?x?x?xf32>
  %N = attn.dim %s[1] as "N" : tensor<?x?x?xf32>
  // expected-error @+1 {{'attn.online_softmax' op 'attn.key_mask' index 2 is not a score index other than the key and the query row}}
  %o = attn.online_softmax "o"[%B, %N] over %N rows [0, 1, -1] tile 128 score {
  ^bb0(%b: index, %i: index, %j: index):
    %x = attn.read %s[%b, %i, %j] : tensor<?x?x?xf32>
    %mv = attn.read %m[%b, %j] : tensor<?x?xi32>
    %c0 = arith.constant 0 : i32
    %pad = arith.cmpi eq, %mv, %c0 : i32
    %causal = arith.cmpi sle, %j, %i : index
    %mask = arith.andi %pad, %causal : i1
    attn.yield %x, %mask : f32, i1
  } value {
  ^bb0(%b: index, %i: index, %j: index):
    %one = arith.constant 1.0 : f32
    attn.yield %one : f32
  } {attn.key_mask = #attn.key_mask<conjuncts = [0], indices = [2]>, indices = ["b", "i"], score_indices = ["b", "i", "j"]} : tensor<?x?xf32>
  attn.return %o : tensor<?x?xf32>
}

// -----

attn.kernel @k(%s: tensor<?x?x?xf32> {attn.dims = #attn.dims<B, N, N>, attn.name = "s"}, %m: tensor<?x?xi32> {attn.dims = #attn.dims<B, N>, attn.name = "m"}) -> (tensor<?x?xf32> {attn.dims = #attn.dims<B, N>, attn.name = "o"}) {
  %B = attn.dim %s[0] as "B" : tensor<?x?x?xf32>
  %N = attn.dim %s[1] as "N" : tensor<?x?x?xf32>
  // expected-error @+1 {{'attn.online_softmax' op 'attn.key_mask' index 1 is not a score index other than the key and the query row}}
  %o = attn.online_softmax "o"[%B, %N] over %N rows [0, 1, -1] tile 128 score {
  ^bb0(%b: index, %i: index, %j: index):
    %x = attn.read %s[%b, %i, %j] : tensor<?x?x?xf32>
    %mv = attn.read %m[%b, %j] : tensor<?x?xi32>
    %c0 = arith.constant 0 : i32
    %pad = arith.cmpi eq, %mv, %c0 : i32
    %causal = arith.cmpi sle, %j, %i : index
    %mask = arith.andi %pad, %causal : i1
    attn.yield %x, %mask : f32, i1
  } value {
  ^bb0(%b: index, %i: index, %j: index):
    %one = arith.constant 1.0 : f32
    attn.yield %one : f32
  } {attn.key_mask = #attn.key_mask<conjuncts = [0], indices = [1]>, indices = ["b", "i"], score_indices = ["b", "i", "j"]} : tensor<?x?xf32>
  attn.return %o : tensor<?x?xf32>
}

// -----

attn.kernel @k(%s: tensor<?x?x?xf32> {attn.dims = #attn.dims<B, N, N>, attn.name = "s"}, %m: tensor<?x?xi32> {attn.dims = #attn.dims<B, N>, attn.name = "m"}) -> (tensor<?x?xf32> {attn.dims = #attn.dims<B, N>, attn.name = "o"}) {
  %B = attn.dim %s[0] as "B" : tensor<?x?x?xf32>
  %N = attn.dim %s[1] as "N" : tensor<?x?x?xf32>
  // expected-error @+1 {{'attn.online_softmax' op 'attn.key_mask' needs a mask}}
  %o = attn.online_softmax "o"[%B, %N] over %N rows [0, 1, -1] tile 128 score {
  ^bb0(%b: index, %i: index, %j: index):
    %x = attn.read %s[%b, %i, %j] : tensor<?x?x?xf32>
    %mv = attn.read %m[%b, %j] : tensor<?x?xi32>
    %c0 = arith.constant 0 : i32
    %pad = arith.cmpi eq, %mv, %c0 : i32
    %causal = arith.cmpi sle, %j, %i : index
    %mask = arith.andi %pad, %causal : i1
    attn.yield %x : f32
  } value {
  ^bb0(%b: index, %i: index, %j: index):
    %one = arith.constant 1.0 : f32
    attn.yield %one : f32
  } {attn.key_mask = #attn.key_mask<conjuncts = [0], indices = [0]>, indices = ["b", "i"], score_indices = ["b", "i", "j"]} : tensor<?x?xf32>
  attn.return %o : tensor<?x?xf32>
}
