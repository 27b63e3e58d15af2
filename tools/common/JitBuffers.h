// Gives a JIT-compiled pipeline the heap buffers AOT kernels get (attnc::buffer_alloc).
#pragma once

#include "attnc/runtime.h"

#include <Halide.h>

namespace attnc::tool {
// Halide's JIT default maps and unmaps large buffers per call, which can take longer than a small
// kernel's work: attn-run and attn-tune run and time what the AOT kernels run.
inline void useRuntimeBuffers(Halide::Pipeline &p) {
  // (A kernel with AMX tiles needs the tile state before its first run, as call() asks for it.)
  attnc::request_tile_state();
  p.jit_handlers().custom_malloc = [](Halide::JITUserContext *, size_t n) {
    return attnc::buffer_alloc(n);
  };
  p.jit_handlers().custom_free = [](Halide::JITUserContext *, void *q) { attnc::buffer_free(q); };
}
} // namespace attnc::tool
