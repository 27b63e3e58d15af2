// The fp32 FMA-throughput microkernel behind attn-bench's "% of peak" (plain C++, no Halide).
#include "fma_peak.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define ATTN_BENCH_X86 1
#endif

namespace attn_bench {
namespace {

// Each step is a = a * m + c on every chain: the chains are independent, so the loop is limited by
// FMA throughput rather than latency once there are at least latency x pipes of them in flight
// (4-5 cycles x 2 pipes on current x86 cores). m slightly below 1 keeps the values bounded and
// away from denormals however long the loop runs.
using ChainFn = float (*)(long iters, float m, float c);

#ifdef ATTN_BENCH_X86
// 16 chains: AVX-512 has 32 registers, so 16 accumulators plus the two constants never spill.
constexpr int kChains512 = 16;
__attribute__((target("avx512f"))) float chainsAvx512(long iters, float m, float c) {
  const __m512 vm = _mm512_set1_ps(m), vc = _mm512_set1_ps(c);
  __m512 a[kChains512];
  for (int k = 0; k < kChains512; ++k)
    a[k] = _mm512_set1_ps(1.f + k * 1e-3f);
  for (long i = 0; i < iters; ++i)
    for (int k = 0; k < kChains512; ++k)
      a[k] = _mm512_fmadd_ps(a[k], vm, vc);
  __m512 s = a[0];
  for (int k = 1; k < kChains512; ++k)
    s = _mm512_add_ps(s, a[k]);
  return _mm512_reduce_add_ps(s);
}

// 12 chains: AVX2 has 16 registers; 12 accumulators, the two constants and spare room.
constexpr int kChains256 = 12;
__attribute__((target("avx2,fma"))) float chainsAvx2(long iters, float m, float c) {
  const __m256 vm = _mm256_set1_ps(m), vc = _mm256_set1_ps(c);
  __m256 a[kChains256];
  for (int k = 0; k < kChains256; ++k)
    a[k] = _mm256_set1_ps(1.f + k * 1e-3f);
  for (long i = 0; i < iters; ++i)
    for (int k = 0; k < kChains256; ++k)
      a[k] = _mm256_fmadd_ps(a[k], vm, vc);
  __m256 s = a[0];
  for (int k = 1; k < kChains256; ++k)
    s = _mm256_add_ps(s, a[k]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, s);
  float r = 0;
  for (float x : lanes)
    r += x;
  return r;
}
#endif

// Without FMA (SSE2 or another architecture): a multiply and an add, also two flops per lane and
// step, on the compiler's 16-byte vectors.
constexpr int kChainsPlain = 8;
typedef float V4 __attribute__((vector_size(16)));
float chainsPlain(long iters, float m, float c) {
  const V4 vm = {m, m, m, m}, vc = {c, c, c, c};
  V4 a[kChainsPlain];
  for (int k = 0; k < kChainsPlain; ++k) {
    const float x = 1.f + k * 1e-3f;
    a[k] = V4{x, x, x, x};
  }
  for (long i = 0; i < iters; ++i)
    for (int k = 0; k < kChainsPlain; ++k)
      a[k] = a[k] * vm + vc;
  float r = 0;
  for (int k = 0; k < kChainsPlain; ++k)
    r += a[k][0] + a[k][1] + a[k][2] + a[k][3];
  return r;
}

struct Kernel {
  const char *isa;
  int lanes, chains;
  ChainFn fn;
};

Kernel widestKernel() {
#ifdef ATTN_BENCH_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f"))
    return {"avx512f", 16, kChains512, chainsAvx512};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return {"avx2+fma", 8, kChains256, chainsAvx2};
  return {"sse (mul+add)", 4, kChainsPlain, chainsPlain};
#else
  return {"generic 128-bit (mul+add)", 4, kChainsPlain, chainsPlain};
#endif
}

// The constants come through volatiles so the compiler cannot fold the chains away.
volatile float gMul = 0.9999999f, gAdd = 1e-7f;
volatile float gSink;

// Wall time of `threads` threads each running `iters` steps, measured from a common start (the
// threads are created and waiting first, so their start-up is not timed) to the last one's end.
double timeThreads(const Kernel &k, int threads, long iters) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<float> sinks(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      const float m = gMul, c = gAdd;
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) {
      }
      sinks[t] = k.fn(iters, m, c);
    });
  while (ready.load() < threads)
    std::this_thread::yield();
  const auto a = std::chrono::steady_clock::now();
  go.store(true, std::memory_order_release);
  for (std::thread &th : pool)
    th.join();
  const auto b = std::chrono::steady_clock::now();
  float s = 0;
  for (float x : sinks)
    s += x;
  gSink = s;
  return std::chrono::duration<double>(b - a).count();
}

double bestGflops(const Kernel &k, int threads, long iters, int trials) {
  double best = 0;
  const double flops = 2.0 * k.lanes * k.chains * (double)iters * threads;
  for (int i = 0; i < trials; ++i)
    best = std::max(best, flops / timeThreads(k, threads, iters) * 1e-9);
  return best;
}

} // namespace

FmaPeak measureFmaPeak(int threads, double trialSeconds, int trials) {
  const Kernel k = widestKernel();
  // Calibrate on one thread: double the steps until a trial is long enough to time, then scale.
  long iters = 1 << 12;
  double t = timeThreads(k, 1, iters);
  while (t < 0.01) {
    iters *= 2;
    t = timeThreads(k, 1, iters);
  }
  iters = std::max(1L, (long)(iters * trialSeconds / t));
  FmaPeak p;
  p.isa = k.isa;
  p.lanes = k.lanes;
  p.threads = std::max(1, threads);
  p.gflops1 = bestGflops(k, 1, iters, trials);
  p.gflops = bestGflops(k, p.threads, iters, trials);
  return p;
}

} // namespace attn_bench
