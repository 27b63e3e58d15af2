// attn-demo: runs the bundled SDPA kernel (AOT-compiled for this CPU) and checks it against fp64.
#include "sdpa.attnc.h"

#include "../../tests/reference/sdpa_ref.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

int main() {
  const int B = 2, H = 8, N = 1024, D = 64;
  const size_t n = (size_t)B * H * N * D;
  std::vector<float> q(n), k(n), v(n), o(n);
  std::mt19937 rng(42);
  std::normal_distribution<float> dist(0.f, 1.f);
  for (auto *t : {&q, &k, &v})
    for (float &x : *t)
      x = dist(rng);

  const attnc::KernelDesc &kernel = attnc_kernels::sdpa();
  std::vector<attnc::TensorView> ins = {attnc::TensorView::f32(q.data(), {B, H, N, D}),
                                        attnc::TensorView::f32(k.data(), {B, H, N, D}),
                                        attnc::TensorView::f32(v.data(), {B, H, N, D})};
  std::vector<attnc::TensorView> outs = {attnc::TensorView::f32(o.data(), {B, H, N, D})};

  std::printf("attnc demo: sdpa B=%d H=%d N=%d D=%d (kernel '%s', target '%s')\n", B, H, N, D,
              kernel.name, kernel.target);
  std::vector<double> times;
  for (int rep = 0; rep < 11; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    attnc::Status st = attnc::call(kernel, ins, outs);
    auto t1 = std::chrono::steady_clock::now();
    if (!st.ok()) {
      std::fprintf(stderr, "error: %s\n", st.message().c_str());
      return 1;
    }
    if (rep > 0)
      times.push_back(std::chrono::duration<double>(t1 - t0).count()); // first run warms caches
  }
  std::sort(times.begin(), times.end());
  double median = times[times.size() / 2];
  double flops = 4.0 * B * H * (double)N * N * D; // QK^T and PV, 2 flops per multiply-add

  std::printf("checking against the fp64 reference...\n");
  std::vector<double> ref = attnc_ref::sdpa<double>(q.data(), k.data(), v.data(), B, H, N, N, D);
  std::vector<float> plain = attnc_ref::sdpa<float>(q.data(), k.data(), v.data(), B, H, N, N, D);
  double err = attnc_ref::maxAbsDiff(o, ref), plainErr = attnc_ref::maxAbsDiff(plain, ref);
  double tol = attnc_ref::tolerance(plainErr);
  std::printf("max |error| vs fp64: %.3g (plain fp32 reference: %.3g; tolerance %.3g)\n", err,
              plainErr, tol);
  std::printf("median time: %.3f ms over %zu runs, %.1f GFLOP/s\n", median * 1e3, times.size(),
              flops / median * 1e-9);
  if (err > tol) {
    std::printf("FAILED: error above tolerance\n");
    return 1;
  }
  std::printf("OK\n");
  return 0;
}
