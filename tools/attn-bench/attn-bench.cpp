// attn-bench: times bundled AOT kernels against plain C++ baselines on the same shapes, in one run.
//
// Entries so far (the full benchmark with FMA-peak and tuned schedules is issue #7):
//   msda  DilateFormer's multi-scale dilated attention (dsl/variants/msda.attn, B=1, C=72, 56x56,
//         3 heads of 24 channels, dilations [1, 2, 3]) against a plain C++ version of the seed's
//         nn.Unfold formulation (unfold k and v into [C, 9, H*W] buffers, then attend).
//   ms_deform_attn_core  Deformable DETR's sampling core (dsl/variants/ms_deform_attn_core.attn) on
//         the encoder's shapes (B=1, M=8 heads of D=32, 4 levels 100x152 ... 13x19, P=4, every
//         pixel a query: Q=20097) against a plain C++ version of ms_deform_attn_core_pytorch
//         (grid_sample per level into a materialised [B*M, D, Q, P] tensor, then the weighted
//         sum), and against the same kernel under the cpu-generic schedule.
//
// usage: attn-bench [--reps=N] [ENTRY...]   (no ENTRY: every entry)
#include "bench_msda.attnc.h"
#include "bench_ms_deform_attn_core.attnc.h"
#include "bench_ms_deform_attn_core_generic.attnc.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
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

// ms_deform_attn_core_pytorch (Deformable DETR, models/ops/functions/ms_deform_attn_func.py) as
// PyTorch's CPU path computes it, single-threaded: per level, value is reshaped per head into
// [B*M, D, H, W] (a copy: the reshape of the transposed view cannot be a view), F.grid_sample
// (bilinear, zeros, align_corners=False; grid = 2 * loc - 1) writes a [B*M, D, Q, P] tensor,
// computing each point's corners and weights once and then looping over the D channel planes;
// finally the levels' samples are weighted by attention_weights (transposed to [B*M, Q, L*P]),
// summed over (L, P), and the [B*M, D, Q] result transposed to [B, Q, M*D]. The stack and the
// product tensors of the Python code are fused into the final loop (a slightly faster baseline).
// value [B, S, M, D], shapes [L, 2] = (H, W), start [L], loc [B, Q, M, L, P, 2] (x, y),
// aw [B, Q, M, L, P], out [B, Q, M*D] (the same memory as [B, Q, M, D]).
void msDeformAttnCoreGridSample(const float* value, const int32_t* shapes, const int32_t* start, const float* loc,
                                const float* aw, float* out, int B, int S, int M, int D, int Q, int L, int P) {
  const int BM = B * M;
  std::vector<std::vector<float>> sampled(L);
  std::vector<float> vl;
  for (int l = 0; l < L; ++l) {
    const int H = shapes[2 * l], W = shapes[2 * l + 1], HW = H * W;
    vl.assign((size_t)BM * D * HW, 0.f);
    for (int b = 0; b < B; ++b)
      for (int s = 0; s < HW; ++s)
        for (int m = 0; m < M; ++m)
          for (int d = 0; d < D; ++d)
            vl[((size_t)(b * M + m) * D + d) * HW + s] = value[(((size_t)b * S + start[l] + s) * M + m) * D + d];
    std::vector<float>& sv = sampled[l];
    sv.assign((size_t)BM * D * Q * P, 0.f);
    auto inBounds = [&](int y, int x) { return y >= 0 && y < H && x >= 0 && x < W; };
    for (int n = 0; n < BM; ++n) {
      const int b = n / M, m = n % M;
      for (int q = 0; q < Q; ++q)
        for (int p = 0; p < P; ++p) {
          const float* g = loc + (((((size_t)b * Q + q) * M + m) * L + l) * P + p) * 2;
          const float gx = 2.f * g[0] - 1.f, gy = 2.f * g[1] - 1.f;
          const float ix = ((gx + 1.f) * W - 1.f) / 2.f, iy = ((gy + 1.f) * H - 1.f) / 2.f;
          const int ixNw = (int)std::floor(ix), iyNw = (int)std::floor(iy);
          const int ixNe = ixNw + 1, iyNe = iyNw, ixSw = ixNw, iySw = iyNw + 1, ixSe = ixNw + 1, iySe = iyNw + 1;
          const float nw = (ixSe - ix) * (iySe - iy), ne = (ix - ixSw) * (iySw - iy);
          const float sw = (ixNe - ix) * (iy - iyNe), se = (ix - ixNw) * (iy - iyNw);
          for (int d = 0; d < D; ++d) {
            const float* in = vl.data() + ((size_t)n * D + d) * HW;
            float o = 0.f;
            if (inBounds(iyNw, ixNw)) o += in[iyNw * W + ixNw] * nw;
            if (inBounds(iyNe, ixNe)) o += in[iyNe * W + ixNe] * ne;
            if (inBounds(iySw, ixSw)) o += in[iySw * W + ixSw] * sw;
            if (inBounds(iySe, ixSe)) o += in[iySe * W + ixSe] * se;
            sv[(((size_t)n * D + d) * Q + q) * P + p] = o;
          }
        }
    }
  }
  std::vector<float> awT((size_t)BM * Q * L * P), acc((size_t)BM * D * Q);
  for (int b = 0; b < B; ++b)
    for (int q = 0; q < Q; ++q)
      for (int m = 0; m < M; ++m)
        for (int lp = 0; lp < L * P; ++lp)
          awT[(((size_t)b * M + m) * Q + q) * L * P + lp] = aw[(((size_t)b * Q + q) * M + m) * L * P + lp];
  for (int n = 0; n < BM; ++n)
    for (int d = 0; d < D; ++d)
      for (int q = 0; q < Q; ++q) {
        float s = 0.f;
        for (int l = 0; l < L; ++l)
          for (int p = 0; p < P; ++p)
            s += sampled[l][(((size_t)n * D + d) * Q + q) * P + p] * awT[((size_t)n * Q + q) * L * P + l * P + p];
        acc[((size_t)n * D + d) * Q + q] = s;
      }
  for (int b = 0; b < B; ++b)
    for (int q = 0; q < Q; ++q)
      for (int m = 0; m < M; ++m)
        for (int d = 0; d < D; ++d)
          out[(((size_t)b * Q + q) * M + m) * D + d] = acc[(((size_t)b * M + m) * D + d) * Q + q];
}

int benchMsDeformAttnCore(int reps) {
  const int B = 1, M = 8, D = 32, L = 4, P = 4;
  const std::vector<int32_t> shapes = {100, 152, 50, 76, 25, 38, 13, 19};
  std::vector<int32_t> start(L);
  int S = 0;
  for (int l = 0; l < L; ++l) {
    start[l] = S;
    S += shapes[2 * l] * shapes[2 * l + 1];
  }
  const int Q = S; // the encoder: every pixel of every level is a query
  auto value = randn((size_t)B * S * M * D, 11, 1.f);
  // The encoder's sampling locations: each query's reference point (its pixel centre, normalised,
  // the same on every level) plus offsets of a few pixels of each level (sampling_offsets / (W, H)).
  std::vector<float> loc((size_t)B * Q * M * L * P * 2), aw((size_t)B * Q * M * L * P);
  std::mt19937 rng(12);
  std::normal_distribution<float> offset(0.f, 2.f), logit(0.f, 1.f);
  size_t il = 0, ia = 0;
  for (int b = 0; b < B; ++b)
    for (int lq = 0; lq < L; ++lq)
      for (int y = 0; y < shapes[2 * lq]; ++y)
        for (int x = 0; x < shapes[2 * lq + 1]; ++x) {
          const float rx = (x + .5f) / shapes[2 * lq + 1], ry = (y + .5f) / shapes[2 * lq];
          for (int m = 0; m < M; ++m) {
            for (int l = 0; l < L; ++l)
              for (int p = 0; p < P; ++p) {
                loc[il++] = rx + offset(rng) / shapes[2 * l + 1];
                loc[il++] = ry + offset(rng) / shapes[2 * l];
              }
            float e[L * P], sum = 0.f; // attention weights: softmax over the L * P points of a head
            for (int j = 0; j < L * P; ++j) sum += (e[j] = std::exp(logit(rng)));
            for (int j = 0; j < L * P; ++j) aw[ia++] = e[j] / sum;
          }
        }
  std::vector<float> ours((size_t)B * Q * M * D), generic(ours.size()), base(ours.size());
  auto runKernel = [&](const attnc::KernelDesc& k, std::vector<float>& o) {
    attnc::Status st = attnc::call(k,
                                   {attnc::TensorView::f32(value.data(), {B, S, M, D}),
                                    attnc::TensorView::i32(const_cast<int32_t*>(shapes.data()), {L, 2}),
                                    attnc::TensorView::i32(start.data(), {L}),
                                    attnc::TensorView::f32(loc.data(), {B, Q, M, L, P, 2}),
                                    attnc::TensorView::f32(aw.data(), {B, Q, M, L, P})},
                                   {attnc::TensorView::f32(o.data(), {B, Q, M * D})});
    if (!st.ok()) {
      std::fprintf(stderr, "attn-bench: ms_deform_attn_core: %s\n", st.message().c_str());
      std::exit(1);
    }
  };
  auto runOurs = [&] { runKernel(attnc_kernels::bench_ms_deform_attn_core(), ours); };
  auto runGeneric = [&] { runKernel(attnc_kernels::bench_ms_deform_attn_core_generic(), generic); };
  auto runBase = [&] {
    msDeformAttnCoreGridSample(value.data(), shapes.data(), start.data(), loc.data(), aw.data(), base.data(), B, S, M, D,
                               Q, L, P);
  };
  // Agreement first, on one run of each, before anything is timed.
  runOurs();
  runGeneric();
  runBase();
  double err = 0, errGeneric = 0;
  for (size_t i = 0; i < ours.size(); ++i) {
    err = std::max(err, (double)std::abs(ours[i] - base[i]));
    errGeneric = std::max(errGeneric, (double)std::abs(generic[i] - base[i]));
  }
  std::printf("ms_deform_attn_core: max|attnc - plain C++| = %.3g, max|cpu-generic - plain C++| = %.3g\n", err,
              errGeneric);
  if (!(err < 1e-4) || !(errGeneric < 1e-4)) {
    std::fprintf(stderr, "attn-bench: ms_deform_attn_core: the implementations disagree\n");
    return 1;
  }
  double tOurs = medianSeconds(runOurs, reps), tGeneric = medianSeconds(runGeneric, reps),
         tBase = medianSeconds(runBase, reps);
  // Per output channel and sampling point: 4 corner products, 3 sums, the weight and the
  // accumulation (9 flops). Compulsory traffic: value, loc, aw read once, the output written once.
  const double points = (double)B * Q * M * L * P;
  const double flops = points * D * 9;
  const double bytes = 4.0 * ((double)value.size() + loc.size() + aw.size() + ours.size());
  std::printf("%-20s %-34s %9s %9s %9s %9s\n", "entry", "shape", "ms", "vs base", "GFLOP/s", "GB/s");
  auto row = [&](const char* name, const char* shape, double t) {
    std::printf("%-20s %-34s %9.2f %8.2fx %9.2f %9.2f\n", name, shape, t * 1e3, tBase / t, flops / t * 1e-9,
                bytes / t * 1e-9);
  };
  row("ms_deform_attn_core", "B1 Q20097 M8 D32 L4 P4 (DETR enc)", tOurs);
  row("  cpu-generic", "", tGeneric);
  row("  plain C++ grid_sample", "", tBase);
  std::printf("        attnc: auto schedule, all cores; plain C++: 1 thread; GB/s counts the %.0f MB of compulsory\n"
              "        traffic (value, loc, aw, output); median of %d runs, single process\n",
              bytes * 1e-6, reps);
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  struct Entry {
    const char* name;
    int (*run)(int reps);
  };
  const Entry entries[] = {{"msda", benchMsda}, {"ms_deform_attn_core", benchMsDeformAttnCore}};
  int reps = 10;
  std::vector<std::string> selected;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--reps=", 0) == 0) {
      reps = std::atoi(a.c_str() + 7);
      if (reps < 1) {
        std::fprintf(stderr, "attn-bench: --reps must be at least 1\n");
        return 1;
      }
    } else if (a == "-h" || a == "--help") {
      std::printf("usage: attn-bench [--reps=N] [ENTRY...]   (no ENTRY: every entry)\nentries:");
      for (const Entry& e : entries) std::printf(" %s", e.name);
      std::printf("\n");
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "attn-bench: unknown option '%s'\n", a.c_str());
      return 1;
    } else {
      bool known = false;
      for (const Entry& e : entries) known |= a == e.name;
      if (!known) {
        std::fprintf(stderr, "attn-bench: unknown entry '%s' (attn-bench --help lists them)\n", a.c_str());
        return 1;
      }
      selected.push_back(a);
    }
  }
  int rc = 0;
  bool first = true;
  for (const Entry& e : entries) {
    if (!selected.empty() && std::find(selected.begin(), selected.end(), e.name) == selected.end()) continue;
    if (!first) std::printf("\n");
    first = false;
    rc |= e.run(reps);
  }
  return rc;
}
