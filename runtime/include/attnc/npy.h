// Reading and writing NumPy .npy files (little-endian f32/i32/bf16/f16, C order) for kernel inputs and outputs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attnc/output.h"
#include "attnc/runtime.h"

namespace attnc {

struct NpyArray {
  DType dtype = DType::F32;
  std::vector<int64_t> shape; // C order; empty for a scalar
  std::vector<char> data;     // numel * dtype_size bytes, C-contiguous, little-endian
  // Two-byte elements whose format the file does not say: numpy has no bf16, so ml_dtypes arrays
  // are saved as '<V2' (opaque bytes) and raw bits as '<u2'. read_npy calls them BF16; a caller
  // that knows the kernel declares f16 there may retype them (retype_raw16).
  bool raw16 = false;

  // Contiguous view over `data`. Valid until `data` is resized or the array
  // is destroyed. read_npy guarantees shape.size() <= kMaxRank.
  TensorView view();
};

// Reads a version 1.0/2.0/3.0 .npy file holding '<f4', '<i4', '<f2' (f16) or two-byte
// '<V2'/'<u2' (bf16 bits, see raw16) data in C order. On error `out` is left unchanged and the
// message starts with `path`.
Status read_npy(const std::string &path, NpyArray *out);

// Gives `a` the type `declared` a kernel expects where its file could not say: raw two-byte
// data (raw16) becomes BF16 or F16. Any other array is left as it is (a mismatch stays one for
// the kernel's checks to report).
void retype_raw16(NpyArray &a, DType declared);

// Writes a version 1.0 .npy file (2.0 only if the header would not fit) whose
// data starts at a multiple of 64 bytes. The file goes through an OutputSet
// (attnc/output.h): a temporary beside `path` renamed over it, so readers never
// see a partial file, and /dev/null or a FIFO written in place. `data` holds the
// C-contiguous little-endian elements.
Status write_npy(const std::string &path, DType dtype, const std::vector<int64_t> &shape,
                 const void *data);

// The same file as output `file` of `out`, which writes it when committed with
// the set's other files (attn-run's outputs appear together or not at all).
Status write_npy(OutputSet &out, size_t file, DType dtype, const std::vector<int64_t> &shape,
                 const void *data);

} // namespace attnc
