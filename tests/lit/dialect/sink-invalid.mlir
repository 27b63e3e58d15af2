// Tests the verifier diagnostics of the `sink` region of attn.softmax and attn.online_softmax (none on an unnormalized one).
// RUN: attn-opt %s -split-input-file -verify-diagnostics

attn.kernel @axis(%s: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s"})
    -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "p"}) {
  %N = attn.dim %s[0] as "N" : tensor<?x?xf32>
  // expected-error @+1 {{'attn.softmax' op sink uses the softmax axis 'j'; a sink is one value per row}}
  %p = attn.softmax "p" [%N, %N] over [1] sink {
  ^bb0(%i: index, %j: index):
    %k = attn.read %s[%i, %j] : tensor<?x?xf32>
    attn.yield %k : f32
  } {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s[%i, %j] : tensor<?x?xf32>
    attn.yield %x : f32
  } {indices = ["i", "j"]} : tensor<?x?xf32>
  attn.return %p : tensor<?x?xf32>
}

// -----

attn.kernel @args(%s: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s"})
    -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "p"}) {
  %N = attn.dim %s[0] as "N" : tensor<?x?xf32>
  // expected-error @+1 {{'attn.softmax' op sink region has 1 arguments but the softmax has 2 indices}}
  %p = attn.softmax "p" [%N, %N] over [1] sink {
  ^bb0(%i: index):
    %c = arith.constant 0.0 : f32
    attn.yield %c : f32
  } {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s[%i, %j] : tensor<?x?xf32>
    attn.yield %x : f32
  } {indices = ["i", "j"]} : tensor<?x?xf32>
  attn.return %p : tensor<?x?xf32>
}

// -----

attn.kernel @yields(%s: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s"})
    -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "o"}) {
  %N = attn.dim %s[0] as "N" : tensor<?x?xf32>
  %o = attn.online_softmax "o"[%N, %N] over %N rows [0, -1] tile 128 score {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s[%i, %j] : tensor<?x?xf32>
    attn.yield %x : f32
  } value {
  ^bb0(%i: index, %e: index, %j: index):
    %y = attn.read %s[%j, %e] : tensor<?x?xf32>
    attn.yield %y : f32
  } sink {
  ^bb0(%i: index, %j: index):
    %c = arith.constant 1 : i32
    // expected-error @+1 {{'attn.yield' op in the sink region yields one f32 value}}
    attn.yield %c : i32
  } {indices = ["i", "e"], score_indices = ["i", "j"]} : tensor<?x?xf32>
  attn.return %o : tensor<?x?xf32>
}

// -----

attn.kernel @unnormalized(%s: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s"})
    -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "o"}) {
  %N = attn.dim %s[0] as "N" : tensor<?x?xf32>
  // expected-error @+1 {{'attn.online_softmax' op is unnormalized: a sink joins a softmax's normalisation, and there is none}}
  %o = attn.online_softmax "o"[%N, %N] over %N rows [0, -1] tile 128 score {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s[%i, %j] : tensor<?x?xf32>
    attn.yield %x : f32
  } value {
  ^bb0(%i: index, %e: index, %j: index):
    %y = attn.read %s[%j, %e] : tensor<?x?xf32>
    attn.yield %y : f32
  } sink {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s[%i, %i] : tensor<?x?xf32>
    attn.yield %x : f32
  } {indices = ["i", "e"], score_indices = ["i", "j"], unnormalized} : tensor<?x?xf32>
  attn.return %o : tensor<?x?xf32>
}
