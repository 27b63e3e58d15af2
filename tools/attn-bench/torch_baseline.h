// The optional PyTorch baseline: torch_baseline.py run on attn-bench's own inputs, where torch imports.
#pragma once

#include "bench.h"

#include <memory>
#include <string>
#include <vector>

namespace attn_bench {

class TorchBaseline {
public:
  // The baseline if `python` can import torch, else null: attn-bench then has no PyTorch column
  // and says nothing about it (torch is an optional comparison, never a dependency).
  static std::unique_ptr<TorchBaseline> detect(const std::string &python,
                                               const std::string &script);

  struct Result {
    std::vector<float> out; // the first run's output, for the agreement check
    double seconds = 0;     // median of the timed runs
    int runs = 0;
    int threads = 0; // torch.get_num_threads()
  };

  // Runs torch_baseline.py's `entry` on `inputs` (written as .npy files named after the kernel's
  // parameters) with keyword arguments `constsJson`, its float inputs converted to `dtype`
  // ("f32", "bf16" or "f16"); its first run's output must have `outShape`.
  bool run(const std::string &entry, const std::string &constsJson,
           const std::vector<std::string> &names, std::vector<Tensor> &inputs,
           const std::vector<int64_t> &outShape, const std::string &dtype, const Options &o,
           Result *r, std::string *err) const;

  const std::string &version() const { return version_; }

private:
  TorchBaseline(std::string python, std::string script, std::string version)
      : python_(std::move(python)), script_(std::move(script)), version_(std::move(version)) {}
  std::string python_, script_, version_;
};

} // namespace attn_bench
