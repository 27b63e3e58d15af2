// Invalid #attn.dims and kernels whose attn.dims disagree with their types (dims-attr.mlir runs it).

// expected-error @+1 {{'attn.kernel' op input 'x' dimension 0 (M*D) is a product; only outputs may have them}}
attn.kernel @k(%x: tensor<?xf32> {attn.dims = #attn.dims<M*D>, attn.name = "x"}) -> (tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "o"}) {
  attn.return %x : tensor<?xf32>
}

// -----

// expected-error @+1 {{'attn.kernel' op output 'o' dimension 0 (2*3) does not match its tensor type's extent}}
attn.kernel @k(%x: tensor<5xf32> {attn.dims = #attn.dims<5>, attn.name = "x"}) -> (tensor<5xf32> {attn.dims = #attn.dims<2*3>, attn.name = "o"}) {
  attn.return %x : tensor<5xf32>
}

// -----

// expected-error @+1 {{'attn.kernel' op input 'x' dimension 0 (N) does not match its tensor type's extent}}
attn.kernel @k(%x: tensor<5xf32> {attn.dims = #attn.dims<N>, attn.name = "x"}) -> (tensor<5xf32> {attn.dims = #attn.dims<5>, attn.name = "o"}) {
  attn.return %x : tensor<5xf32>
}

// -----

// expected-error @+1 {{'attn.kernel' op input 'x' needs an #attn.dims as 'attn.dims'}}
attn.kernel @k(%x: tensor<?xf32> {attn.dims = ["N"], attn.name = "x"}) -> (tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "o"}) {
  attn.return %x : tensor<?xf32>
}

// -----

// expected-error @+1 {{'attn.kernel' op input 'x' has element type 'f64', which is no kernel tensor type}}
attn.kernel @k(%x: tensor<?xf64> {attn.dims = #attn.dims<N>, attn.name = "x"}) -> (tensor<?xf64> {attn.dims = #attn.dims<N>, attn.name = "o"}) {
  attn.return %x : tensor<?xf64>
}

// -----

// An f16 output is an f32 definition rounded where it is stored: the kernel returns f32 values.
attn.kernel @k(%x: tensor<?xf16> {attn.dims = #attn.dims<N>, attn.name = "x"}) -> (tensor<?xf16> {attn.dims = #attn.dims<N>, attn.name = "o"}) {
  // expected-error @+1 {{'attn.return' op returns types that do not match the kernel's results}}
  attn.return %x : tensor<?xf16>
}

// -----

// expected-error @+1 {{#attn.dims: '9x' is not a size name}}
attn.kernel @k(%x: tensor<?xf32> {attn.dims = #attn.dims<"9x">, attn.name = "x"}) -> (tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "o"}) {
  attn.return %x : tensor<?xf32>
}

// -----

// expected-error @+1 {{expected valid keyword or string}}
attn.kernel @k(%x: tensor<?xf32> {attn.dims = #attn.dims<N*>, attn.name = "x"}) -> (tensor<?xf32> {attn.dims = #attn.dims<N>, attn.name = "o"}) {
  attn.return %x : tensor<?xf32>
}
