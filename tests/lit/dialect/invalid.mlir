// Tests every verifier diagnostic of the attn dialect (AttnOps.cpp), one case per split.
// RUN: attn-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{'attn.kernel' op input 0 has no 'attn.name'}}
attn.kernel @k(%q: tensor<?xf32> {attn.dims = #attn.dims<N>}) -> (tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "o"}) {
  attn.return %q : tensor<?xf32>
}

// -----

// expected-error @+1 {{'attn.kernel' op output 0 has no 'attn.name'}}
attn.kernel @k(%q: tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "q"}) -> (tensor<?xf32> {attn.dims = #attn.dims<N>}) {
  attn.return %q : tensor<?xf32>
}

// -----

// expected-error @+1 {{'attn.kernel' op output 0 has no 'attn.name'}}
attn.kernel @k(%q: tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "q"}) -> tensor<?xf32> {
  attn.return %q : tensor<?xf32>
}

// -----

// expected-error @+1 {{'attn.kernel' op input 'q' has rank 2 but 1 'attn.dims' entries}}
attn.kernel @k(%q: tensor<?x?xf32> {attn.dims = #attn.dims<N>, attn.name = "q"}) -> (tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "o"}) {
  %N = attn.dim %q[0] as "N" : tensor<?x?xf32>
  %o = attn.define "o" [%N] {
  ^bb0(%i: index):
    %x = attn.read %q[%i, %i] : tensor<?x?xf32>
    attn.yield %x : f32
  } {indices = ["i"]} : tensor<?xf32>
  attn.return %o : tensor<?xf32>
}

// -----

// expected-error @+1 {{'attn.kernel' op output 'o' has rank 1 but 0 'attn.dims' entries}}
attn.kernel @k(%q: tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "q"}) -> (tensor<?xf32> {attn.name = "o"}) {
  attn.return %q : tensor<?xf32>
}

// -----

// expected-error @+1 {{'attn.kernel' op input 0 is not a ranked tensor}}
attn.kernel @k(%q: tensor<*xf32> {attn.dims = #attn.dims<N>, attn.name = "q"}) -> (tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "o"}) {
  %c = arith.constant 1 : index
  %o = attn.define "o" [%c] {
  ^bb0(%i: index):
    %x = arith.constant 1.0 : f32
    attn.yield %x : f32
  } {indices = ["i"]} : tensor<?xf32>
  attn.return %o : tensor<?xf32>
}

// -----

// expected-error @+1 {{'attn.kernel' op output 0 is not a ranked tensor}}
attn.kernel @k(%q: tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "q"}) -> (f32 {attn.name = "o"}) {
  %x = arith.constant 1.0 : f32
  attn.return %x : f32
}

// -----

// expected-error @+1 {{'attn.kernel' op body must end with attn.return}}
attn.kernel @k(%q: tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "q"}) -> (tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "o"}) {
  %N = attn.dim %q[0] as "N" : tensor<?xf32>
}

// -----

attn.kernel @k(%q: tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "q"}) -> (tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "o"}) {
  %c = arith.constant 4 : index
  %o = attn.define "o" [%c] {
  ^bb0(%i: index):
    %x = arith.constant 1.0 : f32
    attn.yield %x : f32
  } {indices = ["i"]} : tensor<4xf32>
  // expected-error @+1 {{'attn.return' op returns types that do not match the kernel's results}}
  attn.return %o : tensor<4xf32>
}

// -----

attn.kernel @k(%q: tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "q"}) -> (tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "o"}) {
  // expected-error @+1 {{'attn.return' op returns types that do not match the kernel's results}}
  attn.return
}

// -----

attn.kernel @k(%q: tensor<?x?xf32> {attn.dims = #attn.dims<N, D>, attn.name = "q"}) -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, D>, attn.name = "o"}) {
  // expected-error @+1 {{'attn.dim' op dimension 2 is out of range for a tensor of rank 2}}
  %X = attn.dim %q[2] as "X" : tensor<?x?xf32>
  attn.return %q : tensor<?x?xf32>
}

// -----

attn.kernel @k(%q: tensor<?x?xf32> {attn.dims = #attn.dims<N, D>, attn.name = "q"}) -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, D>, attn.name = "o"}) {
  // expected-error @+1 {{'attn.dim' op dimension -1 is out of range for a tensor of rank 2}}
  %X = attn.dim %q[-1] as "X" : tensor<?x?xf32>
  attn.return %q : tensor<?x?xf32>
}

// -----

attn.kernel @k(%q: tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "q"}) -> (tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "o"}) {
  // expected-error @+1 {{'attn.dim' op needs a size name}}
  %X = attn.dim %q[0] as "" : tensor<?xf32>
  attn.return %q : tensor<?xf32>
}

// -----

attn.kernel @k(%q: tensor<?x?xf32> {attn.dims = #attn.dims<N, D>, attn.name = "q"}) -> (tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "o"}) {
  %N = attn.dim %q[0] as "N" : tensor<?x?xf32>
  %o = attn.define "o" [%N] {
  ^bb0(%i: index):
    // expected-error @+1 {{'attn.read' op reads a tensor of rank 2 with 1 indices}}
    %x = attn.read %q[%i] : tensor<?x?xf32>
    attn.yield %x : f32
  } {indices = ["i"]} : tensor<?xf32>
  attn.return %o : tensor<?xf32>
}

// -----

attn.kernel @k(%q: tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "q"}) -> (tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "o"}) {
  %N = attn.dim %q[0] as "N" : tensor<?xf32>
  %o = attn.define "o" [%N] {
  ^bb0(%i: index):
    // expected-error @+1 {{'attn.read' op unknown boundary mode 'wrap'}}
    %x = attn.read %q[%i] {boundary = "wrap"} : tensor<?xf32>
    attn.yield %x : f32
  } {indices = ["i"]} : tensor<?xf32>
  attn.return %o : tensor<?xf32>
}

// -----

attn.kernel @k(%q: tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "q"}) -> (tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "o"}) {
  %N = attn.dim %q[0] as "N" : tensor<?xf32>
  // expected-error @+1 {{'attn.define' op result has rank 1 but 2 extents are given}}
  %o = attn.define "o" [%N, %N] {
  ^bb0(%i: index, %j: index):
    %x = attn.read %q[%i] : tensor<?xf32>
    attn.yield %x : f32
  } {indices = ["i", "j"]} : tensor<?xf32>
  attn.return %o : tensor<?xf32>
}

// -----

attn.kernel @k(%q: tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "q"}) -> (tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "o"}) {
  %N = attn.dim %q[0] as "N" : tensor<?xf32>
  // expected-error @+1 {{'attn.define' op has 1 extents but its region has 2 index arguments}}
  %o = attn.define "o" [%N] {
  ^bb0(%i: index, %j: index):
    %x = attn.read %q[%i] : tensor<?xf32>
    attn.yield %x : f32
  } {indices = ["i"]} : tensor<?xf32>
  attn.return %o : tensor<?xf32>
}

// -----

attn.kernel @k(%q: tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "q"}) -> (tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "o"}) {
  %N = attn.dim %q[0] as "N" : tensor<?xf32>
  // expected-error @+1 {{'attn.define' op region arguments must be of type index}}
  %o = attn.define "o" [%N] {
  ^bb0(%i: i32):
    %x = arith.constant 1.0 : f32
    attn.yield %x : f32
  } {indices = ["i"]} : tensor<?xf32>
  attn.return %o : tensor<?xf32>
}

// -----

attn.kernel @k(%q: tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "q"}) -> (tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "o"}) {
  %N = attn.dim %q[0] as "N" : tensor<?xf32>
  // expected-error @+1 {{'attn.define' op has 1 extents but 2 index names}}
  %o = attn.define "o" [%N] {
  ^bb0(%i: index):
    %x = attn.read %q[%i] : tensor<?xf32>
    attn.yield %x : f32
  } {indices = ["i", "j"]} : tensor<?xf32>
  attn.return %o : tensor<?xf32>
}

// -----

attn.kernel @k(%q: tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "q"}) -> (tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "o"}) {
  %N = attn.dim %q[0] as "N" : tensor<?xf32>
  %o = attn.define "o" [%N] {
  ^bb0(%i: index):
    // expected-error @+1 {{'attn.yield' op must yield the element value}}
    attn.yield
  } {indices = ["i"]} : tensor<?xf32>
  attn.return %o : tensor<?xf32>
}

// -----

attn.kernel @k(%q: tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "q"}) -> (tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "o"}) {
  %N = attn.dim %q[0] as "N" : tensor<?xf32>
  %o = attn.define "o" [%N] {
  ^bb0(%i: index):
    %x = arith.index_cast %i : index to i32
    // expected-error @+1 {{'attn.yield' op yields 'i32' but the tensor holds 'f32'}}
    attn.yield %x : i32
  } {indices = ["i"]} : tensor<?xf32>
  attn.return %o : tensor<?xf32>
}

// -----

attn.kernel @k(%q: tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "q"}) -> (tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "o"}) {
  %N = attn.dim %q[0] as "N" : tensor<?xf32>
  %o = attn.define "o" [%N] {
  ^bb0(%i: index):
    %x = attn.read %q[%i] : tensor<?xf32>
    %m = arith.constant true
    // expected-error @+1 {{'attn.yield' op must yield exactly one value in attn.define}}
    attn.yield %x, %m : f32, i1
  } {indices = ["i"]} : tensor<?xf32>
  attn.return %o : tensor<?xf32>
}

// -----

attn.kernel @k(%q: tensor<?xi32> {attn.dims = #attn.dims<N>, attn.name = "q"}) -> (tensor<?xi32> {attn.dims = #attn.dims<N>, attn.name = "o"}) {
  %N = attn.dim %q[0] as "N" : tensor<?xi32>
  // expected-error @+1 {{'attn.softmax' op result must hold f32}}
  %o = attn.softmax "o" [%N] over [0] {
  ^bb0(%i: index):
    %x = attn.read %q[%i] : tensor<?xi32>
    attn.yield %x : i32
  } {indices = ["i"]} : tensor<?xi32>
  attn.return %o : tensor<?xi32>
}

// -----

attn.kernel @k(%q: tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "q"}) -> (tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "o"}) {
  %N = attn.dim %q[0] as "N" : tensor<?xf32>
  %o = attn.softmax "o" [%N] over [0] {
  ^bb0(%i: index):
    %x = attn.read %q[%i] : tensor<?xf32>
    // expected-error @+1 {{'attn.yield' op in attn.softmax yields the score and optionally an i1 mask}}
    attn.yield %x, %x : f32, f32
  } {indices = ["i"]} : tensor<?xf32>
  attn.return %o : tensor<?xf32>
}

// -----

attn.kernel @k(%q: tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "q"}) -> (tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "o"}) {
  %N = attn.dim %q[0] as "N" : tensor<?xf32>
  %o = attn.softmax "o" [%N] over [0] {
  ^bb0(%i: index):
    %x = attn.read %q[%i] : tensor<?xf32>
    %m = arith.constant true
    // expected-error @+1 {{'attn.yield' op in attn.softmax yields the score and optionally an i1 mask}}
    attn.yield %x, %m, %m : f32, i1, i1
  } {indices = ["i"]} : tensor<?xf32>
  attn.return %o : tensor<?xf32>
}

// -----

attn.kernel @k(%q: tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "q"}) -> (tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "o"}) {
  %N = attn.dim %q[0] as "N" : tensor<?xf32>
  // expected-error @+1 {{'attn.softmax' op needs at least one axis}}
  %o = attn.softmax "o" [%N] over [] {
  ^bb0(%i: index):
    %x = attn.read %q[%i] : tensor<?xf32>
    attn.yield %x : f32
  } {indices = ["i"]} : tensor<?xf32>
  attn.return %o : tensor<?xf32>
}

// -----

attn.kernel @k(%q: tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "q"}) -> (tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "o"}) {
  %N = attn.dim %q[0] as "N" : tensor<?xf32>
  // expected-error @+1 {{'attn.softmax' op axis 1 is out of range for rank 1}}
  %o = attn.softmax "o" [%N] over [1] {
  ^bb0(%i: index):
    %x = attn.read %q[%i] : tensor<?xf32>
    attn.yield %x : f32
  } {indices = ["i"]} : tensor<?xf32>
  attn.return %o : tensor<?xf32>
}

// -----

attn.kernel @k(%q: tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "q"}) -> (tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "o"}) {
  %N = attn.dim %q[0] as "N" : tensor<?xf32>
  // expected-error @+1 {{'attn.softmax' op axis -1 is out of range for rank 1}}
  %o = attn.softmax "o" [%N] over [-1] {
  ^bb0(%i: index):
    %x = attn.read %q[%i] : tensor<?xf32>
    attn.yield %x : f32
  } {indices = ["i"]} : tensor<?xf32>
  attn.return %o : tensor<?xf32>
}

// -----

attn.kernel @k(%q: tensor<?x?xf32> {attn.dims = #attn.dims<N, D>, attn.name = "q"}) -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, D>, attn.name = "o"}) {
  %N = attn.dim %q[0] as "N" : tensor<?x?xf32>
  %D = attn.dim %q[1] as "D" : tensor<?x?xf32>
  // expected-error @+1 {{'attn.softmax' op axis 1 appears twice}}
  %o = attn.softmax "o" [%N, %D] over [1, 1] {
  ^bb0(%i: index, %j: index):
    %x = attn.read %q[%i, %j] : tensor<?x?xf32>
    attn.yield %x : f32
  } {indices = ["i", "j"]} : tensor<?x?xf32>
  attn.return %o : tensor<?x?xf32>
}

// -----

attn.kernel @k(%q: tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "q"}) -> (tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "o"}) {
  %N = attn.dim %q[0] as "N" : tensor<?xf32>
  %o = attn.define "o" [%N] {
  ^bb0(%i: index):
    // expected-error @+1 {{'attn.reduce' op unknown reduction kind 'prod'}}
    %r = attn.reduce "prod" [%N] {
    ^bb0(%j: index):
      %x = attn.read %q[%j] : tensor<?xf32>
      attn.yield %x : f32
    } {indices = ["j"]} : f32
    attn.yield %r : f32
  } {indices = ["i"]} : tensor<?xf32>
  attn.return %o : tensor<?xf32>
}

// -----

attn.kernel @k(%q: tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "q"}) -> (tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "o"}) {
  %N = attn.dim %q[0] as "N" : tensor<?xf32>
  %o = attn.define "o" [%N] {
  ^bb0(%i: index):
    // expected-error @+1 {{'attn.reduce' op needs at least one reduction index}}
    %r = attn.reduce "sum" [] {
    ^bb0:
      %x = attn.read %q[%i] : tensor<?xf32>
      attn.yield %x : f32
    } {indices = []} : f32
    attn.yield %r : f32
  } {indices = ["i"]} : tensor<?xf32>
  attn.return %o : tensor<?xf32>
}

// -----

attn.kernel @k(%q: tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "q"}) -> (tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "o"}) {
  %N = attn.dim %q[0] as "N" : tensor<?xf32>
  %o = attn.define "o" [%N] {
  ^bb0(%i: index):
    // expected-error @+1 {{'attn.reduce' op has 1 extents but its region has 0 index arguments}}
    %r = attn.reduce "sum" [%N] {
      %x = attn.read %q[%i] : tensor<?xf32>
      attn.yield %x : f32
    } {indices = ["j"]} : f32
    attn.yield %r : f32
  } {indices = ["i"]} : tensor<?xf32>
  attn.return %o : tensor<?xf32>
}

// -----

attn.kernel @k(%q: tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "q"}) -> (tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "o"}) {
  %N = attn.dim %q[0] as "N" : tensor<?xf32>
  %o = attn.define "o" [%N] {
  ^bb0(%i: index):
    %r = attn.reduce "max" [%N] {
    ^bb0(%j: index):
      %x = attn.read %q[%j] : tensor<?xf32>
      %y = arith.fptosi %x : f32 to i32
      // expected-error @+1 {{'attn.yield' op must yield one value of the reduction's type 'f32'}}
      attn.yield %y : i32
    } {indices = ["j"]} : f32
    attn.yield %r : f32
  } {indices = ["i"]} : tensor<?xf32>
  attn.return %o : tensor<?xf32>
}

// -----

attn.kernel @k(%q: tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "q"}) -> (tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "o"}) {
  %N = attn.dim %q[0] as "N" : tensor<?xf32>
  %o = attn.define "o" [%N] {
  ^bb0(%i: index):
    %r = attn.reduce "min" [%N] {
    ^bb0(%j: index):
      %x = attn.read %q[%j] : tensor<?xf32>
      // expected-error @+1 {{'attn.yield' op must yield one value of the reduction's type 'f32'}}
      attn.yield %x, %x : f32, f32
    } {indices = ["j"]} : f32
    attn.yield %r : f32
  } {indices = ["i"]} : tensor<?xf32>
  attn.return %o : tensor<?xf32>
}

// -----

// expected-error @+1 {{'attn.yield' op expects parent op to be one of 'attn.define, attn.softmax, attn.reduce, attn.online_softmax'}}
attn.yield

// -----

attn.kernel @k(%q: tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "q"}) -> (tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "o"}) {
  %N = attn.dim %q[0] as "N" : tensor<?xf32>
  %o = attn.define "o" [%N] {
  ^bb0(%i: index):
    // expected-error @+1 {{'attn.read' op failed to verify that result is the tensor's element type}}
    %x = "attn.read"(%q, %i) : (tensor<?xf32>, index) -> i32
    %y = arith.sitofp %x : i32 to f32
    attn.yield %y : f32
  } {indices = ["i"]} : tensor<?xf32>
  attn.return %o : tensor<?xf32>
}

// -----

// A body that does not end in a terminator at all.
// expected-error @+1 {{'attn.kernel' op body must end with attn.return}}
attn.kernel @k(%q: tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "q"}) -> (tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "o"}) {
  %c = arith.constant 1 : index
}
