// fp64 reference interpreter of checked .attn kernels: plain loops over the AST, independent of Halide.
#pragma once

#include "attnc/dsl/AST.h"

#include <cstdint>
#include <string>
#include <vector>

namespace attnc::dsl {

// A dense, row-major (last index fastest) tensor of doubles. Integer tensors (i32) hold integral
// values.
struct RefTensor {
  std::vector<int64_t> shape;
  std::vector<double> data;
  bool isInt = false;
  size_t numel() const;
};

// Evaluates kernel `k` (which Sema accepted) on `inputs` (in declaration order) in double
// precision, and fills `outputs` (in declaration order). Every definition is materialised over its
// whole index space in definition order, exactly as the language defines it; softmax subtracts the
// row maximum, masked points are 0 and a row with no unmasked point is all zeros.
// Returns false with a message in `err` (naming the tensor and dimension where it applies) for
// mismatched input ranks, sizes or dtypes, an out-of-range read, or integer division by zero.
bool interpret(const Kernel &k, const std::vector<RefTensor> &inputs,
               std::vector<RefTensor> *outputs, std::string *err);

} // namespace attnc::dsl
