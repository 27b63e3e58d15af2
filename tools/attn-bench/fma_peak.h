// The CPU's fp32 FMA peak, measured by a microkernel: the denominator of attn-bench's "% of peak".
#pragma once

#include <string>

namespace attn_bench {

struct FmaPeak {
  std::string isa;    // the vector extension the microkernel ran on (avx512f, avx2+fma, ...)
  int lanes = 0;      // fp32 lanes per vector
  int threads = 0;    // threads of the all-core measurement
  double gflops = 0;  // all threads together
  double gflops1 = 0; // one thread
};

// Independent FMA chains on the widest vectors this CPU supports, once on one thread and once on
// `threads` threads (one per core, like the kernels' thread pool); the best of several trials of
// about `trialSeconds` each, since interference only ever slows a trial down.
FmaPeak measureFmaPeak(int threads, double trialSeconds, int trials);

} // namespace attn_bench
