// The source of every PyTorch operator module: registers the kernels of ATTNC_KERNEL_HEADER.
//
// attnc_add_library(... TORCH) and attnc.compile build it once per kernel library with
// -DATTNC_KERNEL_HEADER="<name>.attnc.h"; including that header registers the kernel with this
// module's attnc::Registry (through the header's inline Registrar variable, initialised before
// `registered` below, which is defined after it in this one translation unit), and `registered`
// hands every kernel there to PyTorch. The module is compiled with hidden visibility and linked
// with --exclude-libs,ALL, so its registry, runtime and kernel are its own even when PyTorch
// loads modules RTLD_GLOBAL. Errors are kept for attnc_torch_registration_errors(): nothing may
// throw inside dlopen. The two C functions are the module's only exports (default visibility).
#include ATTNC_KERNEL_HEADER
#include "attnc/torch_ops.h"

namespace {
const bool registered = [] {
  for (const attnc::KernelDesc *k : attnc::Registry::global().list())
    attnc::TorchRegistrar{k};
  return true;
}();
} // namespace

extern "C" {
__attribute__((visibility("default"))) const char *attnc_torch_registration_errors() {
  return attnc::torch_registration_errors();
}
__attribute__((visibility("default"))) const char *attnc_torch_kernels_json() {
  return attnc::torch_kernels_json();
}
}
