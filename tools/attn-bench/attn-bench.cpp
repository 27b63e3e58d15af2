// attn-bench: times bundled AOT kernels against plain C++ baselines on the same shapes, in one run.
//
// Entries so far (the full benchmark with FMA-peak and tuned schedules is issue #7):
//   msda  DilateFormer's multi-scale dilated attention (dsl/variants/msda.attn, B=1, C=72, 56x56,
//         3 heads of 24 channels, dilations [1, 2, 3]) against a plain C++ version of the seed's
//         nn.Unfold formulation (unfold k and v into [C, 9, H*W] buffers, then attend).
#include "bench_msda.attnc.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

double medianSeconds(const std::function<void()>& run, int reps) {
  run(); // warm-up: first-touch pages, thread pool start
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto a = std::chrono::steady_clock::now();
    run();
    auto b = std::chrono::steady_clock::now();
    t.push_back(std::chrono::duration<double>(b - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

std::vector<float> randn(size_t n, unsigned seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// The seed's MultiDilatelocalAttention, written as PyTorch computes it: a 1x1 convolution for
// qkv, nn.Unfold of k and v per dilation group (materialised), attention per pixel and head,
// then the projection. x and o are [B, H, W, C]; weights as in msda.attn.
void msdaUnfold(const float* x, const float* wqkv, const float* bqkv, const float* wo, const float* bo, float* o, int B,
                int H, int W, int C, int hd, const int dil[3]) {
  const int G = 3, Cg = C / G, N = H * W, K = 9;
  std::vector<float> qkv((size_t)3 * C * N), ku((size_t)Cg * K * N), vu((size_t)Cg * K * N), att((size_t)N * C);
  const float scale = 1.f / std::sqrt((float)hd);
  for (int b = 0; b < B; ++b) {
    const float* xb = x + (size_t)b * N * C;
    for (int oc = 0; oc < 3 * C; ++oc)
      for (int n = 0; n < N; ++n) {
        float s = bqkv[oc];
        for (int c = 0; c < C; ++c) s += xb[(size_t)n * C + c] * wqkv[(size_t)oc * C + c];
        qkv[(size_t)oc * N + n] = s;
      }
    for (int g = 0; g < G; ++g) {
      const float* q = qkv.data() + (size_t)(0 * C + g * Cg) * N;
      const float* k = qkv.data() + (size_t)(1 * C + g * Cg) * N;
      const float* v = qkv.data() + (size_t)(2 * C + g * Cg) * N;
      const int r = dil[g];
      for (int c = 0; c < Cg; ++c) // unfold: [Cg, 9, N], zero outside the map
        for (int u = 0; u < 3; ++u)
          for (int t = 0; t < 3; ++t)
            for (int y = 0; y < H; ++y)
              for (int xx = 0; xx < W; ++xx) {
                int yy = y + (u - 1) * r, x2 = xx + (t - 1) * r;
                bool in = yy >= 0 && yy < H && x2 >= 0 && x2 < W;
                size_t dst = ((size_t)c * K + u * 3 + t) * N + (size_t)y * W + xx;
                ku[dst] = in ? k[(size_t)c * N + (size_t)yy * W + x2] : 0.f;
                vu[dst] = in ? v[(size_t)c * N + (size_t)yy * W + x2] : 0.f;
              }
      for (int h = 0; h < Cg / hd; ++h)
        for (int n = 0; n < N; ++n) {
          float s[9], mx = -INFINITY, sum = 0;
          for (int j = 0; j < K; ++j) {
            float d = 0;
            for (int e = 0; e < hd; ++e) d += q[(size_t)(h * hd + e) * N + n] * ku[((size_t)(h * hd + e) * K + j) * N + n];
            s[j] = d * scale;
            mx = std::max(mx, s[j]);
          }
          for (int j = 0; j < K; ++j) sum += (s[j] = std::exp(s[j] - mx));
          for (int e = 0; e < hd; ++e) {
            float acc = 0;
            for (int j = 0; j < K; ++j) acc += s[j] * vu[((size_t)(h * hd + e) * K + j) * N + n];
            att[(size_t)n * C + g * Cg + h * hd + e] = acc / sum;
          }
        }
    }
    float* ob = o + (size_t)b * N * C;
    for (int n = 0; n < N; ++n)
      for (int oc = 0; oc < C; ++oc) {
        float s = bo[oc];
        for (int c = 0; c < C; ++c) s += att[(size_t)n * C + c] * wo[(size_t)oc * C + c];
        ob[(size_t)n * C + oc] = s;
      }
  }
}

int benchMsda(int reps) {
  const int B = 1, H = 56, W = 56, C = 72, hd = 24, G = 3, Cg = C / G;
  const int dil[3] = {1, 2, 3};
  auto x = randn((size_t)B * H * W * C, 1, 1.f), wqkv = randn((size_t)3 * C * C, 2, 0.12f), bqkv = randn(3 * C, 3, 0.1f);
  auto wo = randn((size_t)C * C, 4, 0.12f), bo = randn(C, 5, 0.1f);
  std::vector<float> ours((size_t)B * H * W * C), base(ours.size());
  auto runOurs = [&] {
    attnc::Status st = attnc::call(attnc_kernels::bench_msda(),
                                   {attnc::TensorView::f32(x.data(), {B, H, W, C}), attnc::TensorView::f32(wqkv.data(), {3, G, Cg, C}),
                                    attnc::TensorView::f32(bqkv.data(), {3, G, Cg}), attnc::TensorView::f32(wo.data(), {C, C}),
                                    attnc::TensorView::f32(bo.data(), {C})},
                                   {attnc::TensorView::f32(ours.data(), {B, H, W, C})});
    if (!st.ok()) {
      std::fprintf(stderr, "attn-bench: msda: %s\n", st.message().c_str());
      std::exit(1);
    }
  };
  auto runBase = [&] { msdaUnfold(x.data(), wqkv.data(), bqkv.data(), wo.data(), bo.data(), base.data(), B, H, W, C, hd, dil); };
  double tOurs = medianSeconds(runOurs, reps), tBase = medianSeconds(runBase, reps);
  double err = 0;
  for (size_t i = 0; i < ours.size(); ++i) err = std::max(err, (double)std::abs(ours[i] - base[i]));
  const double n = (double)B * H * W;
  const double flops = n * (2.0 * C * 3 * C + 2.0 * 2 * C * 9 + 2.0 * C * C); // qkv, attention, projection
  std::printf("%-6s %-36s %10s %10s %10s %9s\n", "entry", "shape", "attnc ms", "base ms", "speedup", "max|diff|");
  std::printf("%-6s %-36s %10.2f %10.2f %9.2fx %9.2g\n", "msda", "B1 C72 56x56 heads3 dil[1,2,3]", tOurs * 1e3, tBase * 1e3,
              tBase / tOurs, err);
  std::printf("        attnc %.2f GFLOP/s, plain C++ unfold %.2f GFLOP/s (median of %d runs, single process)\n",
              flops / tOurs * 1e-9, flops / tBase * 1e-9, reps);
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  int reps = 10;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--reps=", 0) == 0) {
      reps = std::atoi(a.c_str() + 7);
      if (reps < 1) {
        std::fprintf(stderr, "attn-bench: --reps must be at least 1\n");
        return 1;
      }
    } else if (a == "-h" || a == "--help") {
      std::printf("usage: attn-bench [--reps=N]\n");
      return 0;
    } else {
      std::fprintf(stderr, "attn-bench: unknown option '%s'\n", a.c_str());
      return 1;
    }
  }
  return benchMsda(reps);
}
