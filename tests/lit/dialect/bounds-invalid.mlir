// Tests the diagnostics of the `attn.bounds` attribute (AttnDialect.cpp), one case per split.
// RUN: attn-opt %s -split-input-file -verify-diagnostics

attn.kernel @k(%s: tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "s"}) -> (tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "o"}) {
  %N = attn.dim %s[0] as "N" : tensor<?xf32>
  // expected-error @+1 {{'attn.define' op 'attn.bounds' applies to attn.softmax, attn.online_softmax and attn.reduce only}}
  %o = attn.define "o" [%N] {
  ^bb0(%i: index):
    %x = attn.read %s[%i] : tensor<?xf32>
    attn.yield %x : f32
  } {attn.bounds = [], indices = ["i"]} : tensor<?xf32>
  attn.return %o : tensor<?xf32>
}

// -----

attn.kernel @k(%s: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s"}) -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "p"}) {
  %N = attn.dim %s[0] as "N" : tensor<?x?xf32>
  // expected-error @+1 {{'attn.softmax' op 'attn.bounds' must be an array of dictionaries}}
  %p = attn.softmax "p" [%N, %N] over [1] {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s[%i, %j] : tensor<?x?xf32>
    attn.yield %x : f32
  } {attn.bounds = 3, indices = ["i", "j"]} : tensor<?x?xf32>
  attn.return %p : tensor<?x?xf32>
}

// -----

attn.kernel @k(%s: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s"}) -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "p"}) {
  %N = attn.dim %s[0] as "N" : tensor<?x?xf32>
  // expected-error @+1 {{'attn.softmax' op 'attn.bounds' entries need 'index' and 'sizes'}}
  %p = attn.softmax "p" [%N, %N] over [1] {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s[%i, %j] : tensor<?x?xf32>
    attn.yield %x : f32
  } {attn.bounds = [{upper = affine_map<(d0, d1) -> (d0)>}], indices = ["i", "j"]} : tensor<?x?xf32>
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
  } {attn.bounds = [{index = 0, sizes = [], upper = affine_map<(d0, d1) -> (d1)>}], indices = ["i", "j"]} : tensor<?x?xf32>
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
  } {attn.bounds = [{index = 2, sizes = [], upper = affine_map<(d0, d1) -> (d0)>}], indices = ["i", "j"]} : tensor<?x?xf32>
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
  } {attn.bounds = [{index = 1, sizes = ["M"], upper = affine_map<(d0, d1)[s0] -> (s0)>}], indices = ["i", "j"]} : tensor<?x?xf32>
  attn.return %p : tensor<?x?xf32>
}

// -----

attn.kernel @k(%s: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s"}) -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "p"}) {
  %N = attn.dim %s[0] as "N" : tensor<?x?xf32>
  // expected-error @+1 {{'attn.softmax' op 'attn.bounds' 'lower' must be an affine map}}
  %p = attn.softmax "p" [%N, %N] over [1] {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s[%i, %j] : tensor<?x?xf32>
    attn.yield %x : f32
  } {attn.bounds = [{index = 1, sizes = [], lower = 0}], indices = ["i", "j"]} : tensor<?x?xf32>
  attn.return %p : tensor<?x?xf32>
}

// -----

attn.kernel @k(%s: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s"}) -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "p"}) {
  %N = attn.dim %s[0] as "N" : tensor<?x?xf32>
  // expected-error @+1 {{'attn.softmax' op 'attn.bounds' 'upper' must map the 2 indices and 0 sizes to at least one bound}}
  %p = attn.softmax "p" [%N, %N] over [1] {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s[%i, %j] : tensor<?x?xf32>
    attn.yield %x : f32
  } {attn.bounds = [{index = 1, sizes = [], upper = affine_map<(d0) -> (d0)>}], indices = ["i", "j"]} : tensor<?x?xf32>
  attn.return %p : tensor<?x?xf32>
}

// -----

attn.kernel @k(%s: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s"}) -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "p"}) {
  %N = attn.dim %s[0] as "N" : tensor<?x?xf32>
  // expected-error @+1 {{'attn.softmax' op 'attn.bounds' 'upper' may divide only by positive constants}}
  %p = attn.softmax "p" [%N, %N] over [1] {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s[%i, %j] : tensor<?x?xf32>
    attn.yield %x : f32
  } {attn.bounds = [{index = 1, sizes = ["N"], upper = affine_map<(d0, d1)[s0] -> (d0 floordiv s0)>}], indices = ["i", "j"]} : tensor<?x?xf32>
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
  } {attn.bounds = [{index = 1, sizes = [], upper = affine_map<(d0, d1) -> (d1 + 1)>}], indices = ["i", "j"]} : tensor<?x?xf32>
  attn.return %p : tensor<?x?xf32>
}

// -----

attn.kernel @k(%s: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s"}) -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "p"}) {
  %N = attn.dim %s[0] as "N" : tensor<?x?xf32>
  // expected-error @+1 {{'attn.softmax' op 'attn.bounds' entries need 'lower' or 'upper'}}
  %p = attn.softmax "p" [%N, %N] over [1] {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s[%i, %j] : tensor<?x?xf32>
    attn.yield %x : f32
  } {attn.bounds = [{index = 1, sizes = []}], indices = ["i", "j"]} : tensor<?x?xf32>
  attn.return %p : tensor<?x?xf32>
}

// -----

attn.kernel @k(%s: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s"}) -> (tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "o"}) {
  %N = attn.dim %s[0] as "N" : tensor<?x?xf32>
  %o = attn.define "o" [%N] {
  ^bb0(%i: index):
    // expected-error @+1 {{'attn.reduce' op 'attn.bounds' 'upper' must map the 1 indices and 0 sizes to at least one bound}}
    %r = attn.reduce "sum" [%N] {
    ^bb0(%j: index):
      %x = attn.read %s[%i, %j] : tensor<?x?xf32>
      attn.yield %x : f32
    } {attn.bounds = [{index = 0, sizes = [], upper = affine_map<(d0, d1) -> (d0)>}], indices = ["j"]} : f32
    attn.yield %r : f32
  } {indices = ["i"]} : tensor<?xf32>
  attn.return %o : tensor<?xf32>
}

// -----

attn.kernel @k(%s: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s"}) -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "p"}) {
  %N = attn.dim %s[0] as "N" : tensor<?x?xf32>
  // expected-error @+1 {{'attn.softmax' op 'attn.bounds' 'exact' must be a unit attribute}}
  %p = attn.softmax "p" [%N, %N] over [1] {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s[%i, %j] : tensor<?x?xf32>
    attn.yield %x : f32
  } {attn.bounds = [{exact = 1, index = 1, sizes = [], upper = affine_map<(d0, d1) -> (d0)>}], indices = ["i", "j"]} : tensor<?x?xf32>
  attn.return %p : tensor<?x?xf32>
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
    } {attn.bounds = [{exact, index = 0, sizes = [], upper = affine_map<(d0) -> (d0)>}], indices = ["j"]} : f32
    attn.yield %r : f32
  } {indices = ["i"]} : tensor<?xf32>
  attn.return %o : tensor<?xf32>
}
