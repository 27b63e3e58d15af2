// Tests the verifier diagnostics of attn.online_softmax's whole_tile (a multiple of the tile; no mask
// unless its keys are taken per query group).
// RUN: attn-opt %s -split-input-file -verify-diagnostics

attn.kernel @multiple(%s: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s"})
    -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "o"}) {
  %N = attn.dim %s[0] as "N" : tensor<?x?xf32>
  // expected-error @+1 {{'attn.online_softmax' op whole_tile must be a multiple of the tile, not 192}}
  %o = attn.online_softmax "o"[%N, %N] over %N rows [0, -1] tile 128 score {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s[%i, %j] : tensor<?x?xf32>
    attn.yield %x : f32
  } value {
  ^bb0(%i: index, %e: index, %j: index):
    %y = attn.read %s[%j, %e] : tensor<?x?xf32>
    attn.yield %y : f32
  } {indices = ["i", "e"], score_indices = ["i", "j"], whole_tile = 192} : tensor<?x?xf32>
  attn.return %o : tensor<?x?xf32>
}

// -----

attn.kernel @shorter(%s: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s"})
    -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "o"}) {
  %N = attn.dim %s[0] as "N" : tensor<?x?xf32>
  // expected-error @+1 {{'attn.online_softmax' op whole_tile must be a multiple of the tile, not 64}}
  %o = attn.online_softmax "o"[%N, %N] over %N rows [0, -1] tile 128 score {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s[%i, %j] : tensor<?x?xf32>
    attn.yield %x : f32
  } value {
  ^bb0(%i: index, %e: index, %j: index):
    %y = attn.read %s[%j, %e] : tensor<?x?xf32>
    attn.yield %y : f32
  } {indices = ["i", "e"], score_indices = ["i", "j"], whole_tile = 64} : tensor<?x?xf32>
  attn.return %o : tensor<?x?xf32>
}

// -----

attn.kernel @masked(%s: tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "s"})
    -> (tensor<?x?xf32> {attn.dims = #attn.dims<N, N>, attn.name = "o"}) {
  %N = attn.dim %s[0] as "N" : tensor<?x?xf32>
  // expected-error @+1 {{'attn.online_softmax' op whole_tile needs a score without a mask, or a mask whose visible keys are taken per query group or per key (attn.group_keys or a key_only attn.key_mask, no attn.bounds)}}
  %o = attn.online_softmax "o"[%N, %N] over %N rows [0, -1] tile 128 score {
  ^bb0(%i: index, %j: index):
    %x = attn.read %s[%i, %j] : tensor<?x?xf32>
    %m = arith.cmpi ule, %j, %i : index
    attn.yield %x, %m : f32, i1
  } value {
  ^bb0(%i: index, %e: index, %j: index):
    %y = attn.read %s[%j, %e] : tensor<?x?xf32>
    attn.yield %y : f32
  } {indices = ["i", "e"], score_indices = ["i", "j"], whole_tile = 256} : tensor<?x?xf32>
  attn.return %o : tensor<?x?xf32>
}
