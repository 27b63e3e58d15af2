// attnc kernels as PyTorch operators (torch.ops.attnc.<kernel>), declared without PyTorch headers.
//
// A library built by attnc_add_library(... TORCH) is a shared module whose static initialisers
// register each kernel's descriptor here; `torch.ops.load_library` (or attnc.load) dlopens it. The
// implementation (libattnc_torch, runtime/torch/torch_ops.cpp) is compiled once against the
// installed PyTorch, so a kernel's module compiles only a few lines and no PyTorch header.
#pragma once

#include <string>

#include "attnc/runtime.h"

namespace attnc {

// The operator schema of `k`: "sdpa(Tensor q, Tensor k, Tensor v) -> Tensor", inputs in
// declaration order; several outputs give a tuple. A parameter name that PyTorch's schema parser
// or Python reserves (`self`, `out`, `lambda`...) gets a trailing underscore.
std::string torch_schema(const KernelDesc &k);

// Defines torch.ops.attnc.<k.name> (a fragment of the `attnc` namespace, so several libraries
// add to it) with kernels for CPU tensors (validated by the runtime; errors raise with its text:
// TypeError for a dtype, ValueError for other bad inputs, RuntimeError for a failed requirement or
// kernel) and for Meta tensors (output shapes and dtypes from the descriptor, symbolic sizes
// allowed), which torch.compile and torch.export trace through; CUDA tensors get the CPU kernel's
// device error. Returns an error, never throws: a name already registered is one.
Status register_torch_op(const KernelDesc &k);

// register_torch_op at static-initialisation time (inside dlopen, where an exception would abort
// the process); failures are kept and reported by torch_registration_errors().
struct TorchRegistrar {
  explicit TorchRegistrar(const KernelDesc *k);
};

// Every registration failure so far, one per line ("" when none). An operator module exports it
// as the C function attnc_torch_registration_errors (runtime/torch/module.cpp).
const char *torch_registration_errors();
// The kernels registered so far, one JSON object per kernel in a JSON array: name, target,
// schedule, schema, and each input's and output's name, argument name, dtype and dims (attnc.load
// reads it through the module's C function attnc_torch_kernels_json).
const char *torch_kernels_json();

} // namespace attnc
