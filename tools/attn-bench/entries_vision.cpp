// attn-bench entries of the vision family: msda, ms_deform_attn_core, deform_attn, dat_attn, swin_attention and neighborhood_attention.
#include "entries.h"
#include "pytorch_style.h"

#include "bench_dat_attn.attnc.h"
#include "bench_deform_attn.attnc.h"
#include "bench_deform_attn_none.attnc.h"
#include "bench_ms_deform_attn_core.attnc.h"
#include "bench_ms_deform_attn_core_bf16.attnc.h"
#include "bench_ms_deform_attn_core_generic.attnc.h"
#include "bench_ms_deform_attn_core_none.attnc.h"
#include "bench_msda.attnc.h"
#include "bench_neighborhood_attention.attnc.h"
#include "bench_swin_attention.attnc.h"
#include "bench_swin_attention_shifted.attnc.h"
#include "bench_swin_on_image.attnc.h"
#include "bench_swin_on_image_shifted.attnc.h"
#ifdef ATTN_BENCH_AUTOSCHEDULED
#include "bench_ms_deform_attn_core_adams2019.attnc.h"
#include "bench_ms_deform_attn_core_mullapudi2016.attnc.h"
#include "bench_msda_adams2019.attnc.h"
#include "bench_msda_mullapudi2016.attnc.h"
#endif
#ifdef ATTN_BENCH_TUNED
#include "bench_msda_tuned.attnc.h"
#endif

#include "reference/dat_ref.h"
#include "reference/deform_ref.h"
#include "reference/dilate_ref.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

namespace attn_bench {
namespace {

double bytesOf(const std::vector<Tensor> &inputs, const std::vector<int64_t> &outShape) {
  double n = 0;
  for (const Tensor &t : inputs)
    n += (double)t.numel();
  double o = 1;
  for (int64_t d : outShape)
    o *= (double)d;
  return 4.0 * (n + o);
}

// Swin's window attention as swin_attention.attn defines it (Swin's own arithmetic: roll, windows,
// bias, -100 across regions), one query at a time in float: q, k, v [B, NH, Y, X, D], table
// [(2 ws - 1)^2, NH].
std::vector<float> swinReference(const float *q, const float *k, const float *v, const float *table,
                                 int B, int NH, int Y, int X, int D, int ws, int shift) {
  std::vector<float> o((size_t)B * NH * Y * X * D), s((size_t)ws * ws);
  auto region = [&](int p, int n) { return p < n - ws ? 0 : p < n - shift ? 1 : 2; };
  auto at = [&](int b, int h, int y, int x) { return (((size_t)b * NH + h) * Y + y) * X + x; };
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h)
      for (int y = 0; y < Y; ++y)
        for (int x = 0; x < X; ++x) {
          const int ry = (y + Y - shift) % Y, rx = (x + X - shift) % X;
          const float *qp = q + at(b, h, y, x) * D;
          float m = -INFINITY;
          for (int u = 0; u < ws; ++u)
            for (int t = 0; t < ws; ++t) {
              const int ky = ry / ws * ws + u, kx = rx / ws * ws + t;
              const float *kp = k + at(b, h, (ky + shift) % Y, (kx + shift) % X) * D;
              float dot = 0;
              for (int d = 0; d < D; ++d)
                dot += qp[d] * kp[d];
              const int rel = (ry % ws - u + ws - 1) * (2 * ws - 1) + rx % ws - t + ws - 1;
              const bool same = region(ry, Y) == region(ky, Y) && region(rx, X) == region(kx, X);
              float &sc = s[(size_t)u * ws + t];
              sc = dot / std::sqrt((float)D) + table[(size_t)rel * NH + h] + (same ? 0.f : -100.f);
              m = std::max(m, sc);
            }
          float sum = 0;
          for (float &sc : s)
            sum += (sc = std::exp(sc - m));
          float *op = o.data() + at(b, h, y, x) * D;
          for (int u = 0; u < ws; ++u)
            for (int t = 0; t < ws; ++t) {
              const int ky = ry / ws * ws + u, kx = rx / ws * ws + t;
              const float *vp = v + at(b, h, (ky + shift) % Y, (kx + shift) % X) * D;
              const float w = s[(size_t)u * ws + t] / sum;
              for (int d = 0; d < D; ++d)
                op[d] += w * vp[d];
            }
        }
  return o;
}

// NATTEN's neighbourhood attention as neighborhood_attention.attn defines it (windows with clamped
// starts, the bias indexed by key minus query), one query at a time in float: q, k, v
// [B, NH, Y, X, D], rpb [NH, 2 ks - 1, 2 ks - 1].
std::vector<float> nattenReference(const float *q, const float *k, const float *v, const float *rpb,
                                   int B, int NH, int Y, int X, int D, int ks) {
  std::vector<float> o((size_t)B * NH * Y * X * D, 0.f), s((size_t)ks * ks);
  const int R = 2 * ks - 1;
  auto at = [&](int b, int h, int y, int x) { return (((size_t)b * NH + h) * Y + y) * X + x; };
  auto start = [&](int i, int n) { return std::min(std::max(i - ks / 2, 0), n - ks); };
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h)
      for (int y = 0; y < Y; ++y)
        for (int x = 0; x < X; ++x) {
          const int sy = start(y, Y), sx = start(x, X);
          const float *qp = q + at(b, h, y, x) * D;
          float m = -INFINITY;
          for (int u = 0; u < ks; ++u)
            for (int t = 0; t < ks; ++t) {
              const float *kp = k + at(b, h, sy + u, sx + t) * D;
              float dot = 0;
              for (int d = 0; d < D; ++d)
                dot += qp[d] * kp[d];
              const size_t bias = ((size_t)h * R + sy + u - y + ks - 1) * R + sx + t - x + ks - 1;
              float &sc = s[(size_t)u * ks + t];
              sc = dot / std::sqrt((float)D) + rpb[bias];
              m = std::max(m, sc);
            }
          float sum = 0;
          for (float &sc : s)
            sum += (sc = std::exp(sc - m));
          float *op = o.data() + at(b, h, y, x) * D;
          for (int u = 0; u < ks; ++u)
            for (int t = 0; t < ks; ++t) {
              const float *vp = v + at(b, h, sy + u, sx + t) * D;
              const float w = s[(size_t)u * ks + t] / sum;
              for (int d = 0; d < D; ++d)
                op[d] += w * vp[d];
            }
        }
  return o;
}

std::string mapLabel(int B, int Y, int X, int C) {
  return "B" + std::to_string(B) + " " + std::to_string(Y) + "x" + std::to_string(X) + " C" +
         std::to_string(C);
}

} // namespace

// msda (msda.attn's constants: heads of hd = 24 channels, dilations 1, 2, 3, 3x3 windows), per
// pixel: the qkv 1x1 convolution 2*C*3C, scores and weighted sum over the 9 window positions
// 2*C*9 each, the projection 2*C*C: B*Y*X*(8*C^2 + 36*C).
void benchMsda(const Options &o, std::vector<CaseResult> *out) {
  struct Shape {
    int B, Y, X, C;
  };
  // DilateFormer-T's first stage (56x56, C = 72: three groups of one 24-channel head), and 14x14.
  const std::vector<Shape> shapes = o.quick ? std::vector<Shape>{{1, 8, 8, 72}}
                                            : std::vector<Shape>{{1, 56, 56, 72}, {1, 14, 14, 72}};
  const int hd = 24;
  static const int dil[3] = {1, 2, 3};
  for (const Shape &s : shapes) {
    const int C = s.C, G = 3, Cg = C / G;
    Case c;
    c.variant = "msda";
    c.shape = mapLabel(s.B, s.Y, s.X, C) + " hd24 dil1,2,3";
    c.inputs = {Tensor::randn({s.B, s.Y, s.X, C}, 1), Tensor::randn({3, G, Cg, C}, 2, 0.f, .12f),
                Tensor::randn({3, G, Cg}, 3, 0.f, .1f), Tensor::randn({C, C}, 4, 0.f, .12f),
                Tensor::randn({C}, 5, 0.f, .1f)};
    c.outShape = {s.B, s.Y, s.X, C};
    c.flopFormula = "B*Y*X*(8*C^2 + 36*C)";
    c.flops = (double)s.B * s.Y * s.X * (8.0 * C * C + 36.0 * C);
    c.bytes = bytesOf(c.inputs, c.outShape);
    c.kernel = &attnc_kernels::bench_msda();
    // The autoschedulers' estimates and attn-tune's shape (tools/CMakeLists.txt).
    const bool mainShape = s.B == 1 && s.Y == 56 && s.X == 56 && s.C == 72;
#ifdef ATTN_BENCH_AUTOSCHEDULED
    if (mainShape) {
      c.schedules.push_back(
          {"Mullapudi2016 autoscheduler", &attnc_kernels::bench_msda_mullapudi2016()});
      c.schedules.push_back({"Adams2019 autoscheduler", &attnc_kernels::bench_msda_adams2019()});
    }
#endif
#ifdef ATTN_BENCH_TUNED
    if (mainShape)
      c.schedules.push_back({"tuned", &attnc_kernels::bench_msda_tuned()});
#endif
    (void)mainShape;
    // Unscheduled, the qkv convolution is recomputed inside every window score and softmax statistic.
    c.unscheduledNote = "not timed: unscheduled msda recomputes the qkv convolution per score (B1 "
                        "3x3 C72: over 30 s)";
    c.reference = [&c, s, hd] {
      return attnc_ref::msda<float>(c.inputs[0].fp(), c.inputs[1].fp(), c.inputs[2].fp(),
                                    c.inputs[3].fp(), c.inputs[4].fp(), s.B, s.Y, s.X, s.C, hd,
                                    dil[0], dil[1], dil[2]);
    };
    c.cpp.push_back({"C++ nn.Unfold formulation", [&c, s, hd] {
                       std::vector<float> o((size_t)s.B * s.Y * s.X * s.C);
                       msdaUnfold(c.inputs[0].fp(), c.inputs[1].fp(), c.inputs[2].fp(),
                                  c.inputs[3].fp(), c.inputs[4].fp(), o.data(), s.B, s.Y, s.X, s.C,
                                  hd, dil);
                       return o;
                     }});
    c.torchEntry = "msda";
    c.torchConsts = "{\"hd\": 24, \"dilations\": [1, 2, 3]}";
    out->push_back(runCase(c, o));
  }
}

// ms_deform_attn_core, per output channel and sampling point: 4 corner products, 3 sums, the
// attention weight and the accumulation: 9*B*Q*M*L*P*D. The op gathers 4 scattered D-vectors per
// point and does 9 flops per value read, so it is bound by memory (cache) traffic: GB/s counts
// the compulsory traffic (value, loc and aw read once, the output written once).
void benchMsDeformAttnCore(const Options &o, std::vector<CaseResult> *out) {
  struct Shape {
    std::vector<int32_t> hw; // (H, W) per level
    const char *what;
  };
  const std::vector<Shape> shapes =
      o.quick ? std::vector<Shape>{{{8, 12, 4, 6, 2, 3, 1, 2}, "tiny"}}
              : std::vector<Shape>{{{100, 152, 50, 76, 25, 38, 13, 19}, "DETR enc"},
                                   {{16, 24, 8, 12, 4, 6, 2, 3}, "small"}};
  const int B = 1, M = 8, D = 32, P = 4;
  for (const Shape &sh : shapes) {
    const int L = (int)sh.hw.size() / 2;
    std::vector<int32_t> start(L);
    int S = 0;
    for (int l = 0; l < L; ++l) {
      start[l] = S;
      S += sh.hw[2 * l] * sh.hw[2 * l + 1];
    }
    const int Q = S; // the encoder: every pixel of every level is a query
    // The encoder's sampling locations: each query's reference point (its pixel centre,
    // normalised, the same on every level) plus offsets of a few pixels of each level.
    Tensor loc = Tensor::zeros({B, Q, M, L, P, 2}), aw = Tensor::zeros({B, Q, M, L, P});
    std::mt19937 rng(12);
    std::normal_distribution<float> offset(0.f, 2.f), logit(0.f, 1.f);
    size_t il = 0, ia = 0;
    for (int b = 0; b < B; ++b)
      for (int lq = 0; lq < L; ++lq)
        for (int y = 0; y < sh.hw[2 * lq]; ++y)
          for (int x = 0; x < sh.hw[2 * lq + 1]; ++x) {
            const float rx = (x + .5f) / sh.hw[2 * lq + 1], ry = (y + .5f) / sh.hw[2 * lq];
            for (int m = 0; m < M; ++m) {
              for (int l = 0; l < L; ++l)
                for (int p = 0; p < P; ++p) {
                  loc.f[il++] = rx + offset(rng) / sh.hw[2 * l + 1];
                  loc.f[il++] = ry + offset(rng) / sh.hw[2 * l];
                }
              std::vector<float> e(L * P); // attention weights: softmax over a head's L * P points
              float sum = 0.f;
              for (float &v : e)
                sum += (v = std::exp(logit(rng)));
              for (float v : e)
                aw.f[ia++] = v / sum;
            }
          }
    Case c;
    c.variant = "ms_deform_attn_core";
    c.shape =
        "B1 Q" + std::to_string(Q) + " M8 D32 L" + std::to_string(L) + " P4 (" + sh.what + ")";
    c.memoryBound = true;
    c.inputs = {Tensor::randn({B, S, M, D}, 11), Tensor::ints({L, 2}, sh.hw),
                Tensor::ints({L}, start), std::move(loc), std::move(aw)};
    c.outShape = {B, Q, M * D};
    c.flopFormula = "9*B*Q*M*L*P*D";
    c.flops = 9.0 * B * Q * M * L * P * D;
    c.bytes = bytesOf(c.inputs, c.outShape);
    c.kernel = &attnc_kernels::bench_ms_deform_attn_core();
    // Nothing is recomputed when inlined here (one sum per output), so it runs at every shape.
    c.unscheduled = &attnc_kernels::bench_ms_deform_attn_core_none();
    c.schedules.push_back({"cpu-generic", &attnc_kernels::bench_ms_deform_attn_core_generic()});
#ifdef ATTN_BENCH_AUTOSCHEDULED
    if (Q == 20197) { // the autoschedulers' estimates (tools/CMakeLists.txt)
      c.schedules.push_back({"Mullapudi2016 autoscheduler",
                             &attnc_kernels::bench_ms_deform_attn_core_mullapudi2016()});
      c.schedules.push_back(
          {"Adams2019 autoscheduler", &attnc_kernels::bench_ms_deform_attn_core_adams2019()});
    }
#endif
    c.reference = [&c, B, S, M, D, Q, L, P] {
      return attnc_ref::msDeformAttnCore<float>(c.inputs[0].fp(), c.inputs[1].i.data(),
                                                c.inputs[2].i.data(), c.inputs[3].fp(),
                                                c.inputs[4].fp(), B, S, M, D, Q, L, P);
    };
    c.cpp.push_back({"C++ grid_sample formulation", [&c, B, S, M, D, Q, L, P] {
                       std::vector<float> o((size_t)B * Q * M * D);
                       msDeformAttnCoreGridSample(c.inputs[0].fp(), c.inputs[1].i.data(),
                                                  c.inputs[2].i.data(), c.inputs[3].fp(),
                                                  c.inputs[4].fp(), o.data(), B, S, M, D, Q, L, P);
                       return o;
                     }});
    c.torchEntry = "ms_deform_attn_core";
    out->push_back(runCase(c, o));
    if (&sh == &shapes.front())
      out->push_back(
          runReduced(c, attnc::DType::BF16, attnc_kernels::bench_ms_deform_attn_core_bf16(), o));
  }
}

// deform_attn (v1, single scale), counted in the project-then-sample order, the cheaper one
// whenever the map has fewer pixels than there are samples (Y*X < Q*M*K): offsets and logits
// 2*Q*C*3MK, the value projection 2*Y*X*C*M*D, the bilinear samples with their weights
// 9*Q*M*K*D, the output projection 2*Q*M*D*C.
void benchDeformAttn(const Options &o, std::vector<CaseResult> *out) {
  struct Shape {
    int B, Y, X, C, M, K, D;
    bool unscheduled;
    const char *what;
  };
  // Deformable DETR's single-scale encoder on the stride-16 map of an 800x1216 image (every
  // pixel a query, 8 heads of 32 channels, 4 points), and a small map for the unscheduled
  // pipeline, which recomputes the offsets and the value projection per sample (B1 12x12 C64 M4:
  // 24 s; 6x8 C32 M2: 0.4 s).
  const std::vector<Shape> shapes =
      o.quick ? std::vector<Shape>{{1, 4, 4, 16, 2, 2, 8, true, "tiny"}}
              : std::vector<Shape>{{1, 50, 76, 256, 8, 4, 32, false, "DETR C4"},
                                   {1, 6, 8, 32, 2, 4, 16, true, "small"}};
  for (const Shape &s : shapes) {
    const int Q = s.Y * s.X, C = s.C, M = s.M, K = s.K, D = s.D;
    const float ws = 1.f / std::sqrt((float)C);
    // Queries at their pixels (y, x); offsets of about two pixels.
    Tensor p = Tensor::zeros({s.B, Q, 2});
    for (int b = 0; b < s.B; ++b)
      for (int q = 0; q < Q; ++q) {
        p.f[((size_t)b * Q + q) * 2] = (float)(q / s.X);
        p.f[((size_t)b * Q + q) * 2 + 1] = (float)(q % s.X);
      }
    Case c;
    c.variant = "deform_attn";
    c.shape = mapLabel(s.B, s.Y, s.X, C) + " M" + std::to_string(M) + " K" + std::to_string(K) +
              " D" + std::to_string(D) + " (" + s.what + ")";
    c.inputs = {Tensor::randn({s.B, s.Y, s.X, C}, 41),
                Tensor::randn({s.B, Q, C}, 42),
                std::move(p),
                Tensor::randn({M, K, 2, C}, 44, 0.f, 2.f * ws),
                Tensor::randn({M, K, 2}, 45),
                Tensor::randn({M, K, C}, 46, 0.f, ws),
                Tensor::randn({M, K}, 47, 0.f, .1f),
                Tensor::randn({M, D, C}, 48, 0.f, ws),
                Tensor::randn({C, M, D}, 49, 0.f, 1.f / std::sqrt((float)(M * D))),
                Tensor::randn({C}, 50, 0.f, .1f)};
    c.outShape = {s.B, Q, C};
    c.flopFormula = "2*Q*C*3MK + 2*Y*X*C*M*D + 9*Q*M*K*D + 2*Q*M*D*C (B=1)";
    const double BQ = (double)s.B * Q;
    c.flops = 2 * BQ * C * 3 * M * K + 2.0 * s.B * s.Y * s.X * C * M * D + 9 * BQ * M * K * D +
              2 * BQ * M * D * C;
    c.bytes = bytesOf(c.inputs, c.outShape);
    c.kernel = &attnc_kernels::bench_deform_attn();
    if (s.unscheduled)
      c.unscheduled = &attnc_kernels::bench_deform_attn_none();
    c.unscheduledNote =
        "not timed at this shape: unscheduled, the offsets and the value projection are recomputed "
        "per sample; see the small row";
    c.reference = [&c, s, Q] {
      const std::vector<Tensor> &in = c.inputs;
      return attnc_ref::deformAttn<float>(
          in[0].fp(), in[1].fp(), in[2].fp(), in[3].fp(), in[4].fp(), in[5].fp(), in[6].fp(),
          in[7].fp(), in[8].fp(), in[9].fp(), s.B, s.Y, s.X, s.C, Q, s.M, s.K, s.D);
    };
    c.torchEntry = "deform_attn";
    c.notes.push_back(
        "the naive reference samples first (C channels per point) and projects afterwards, as the "
        "paper's formula reads; attnc projects first");
    out->push_back(runCase(c, o));
  }
}

// dat_attn (dat_attn.attn's constants: stride 1, 5x5 offset kernel, 12 heads, 3 groups; Ns = Hk*Wk
// keys, Ns = Y*X at stride 1): proj_q and proj_out 2*Y*X*C^2 each, proj_k and proj_v 2*Ns*C^2
// each, scores and the weighted sum 2*Y*X*Ns*C each, the rpe bias one bilinear sample (7 flops)
// per head and score, the depthwise offset convolution 2*Ns*C*ks^2, the offset projection 4*Ns*C
// and the key samples 7*Ns*C (LayerNorm, GELU and the coordinates are not counted):
// 4*Y*X*C^2 + 4*Ns*C^2 + 4*Y*X*Ns*C + 7*nh*Y*X*Ns + 2*Ns*C*ks^2 + 11*Ns*C per batch.
void benchDatAttn(const Options &o, std::vector<CaseResult> *out) {
  struct Shape {
    int B, Y, X, C;
    const char *what;
  };
  // DAT-T's third stage at 224x224 (14x14, C = 384), and a small map; C a multiple of the 12
  // heads and 3 groups compiled into the kernel.
  const std::vector<Shape> shapes =
      o.quick ? std::vector<Shape>{{1, 5, 5, 24, "tiny"}}
              : std::vector<Shape>{{1, 14, 14, 384, "DAT-T stage 3"}, {1, 6, 6, 48, "small"}};
  const attnc_ref::DatConfig cfg = {1, 5, 2.0, 12, 3};
  for (const Shape &s : shapes) {
    const int C = s.C, Cg = C / cfg.groups, K = cfg.ksize;
    const int Ns = cfg.keys(s.Y) * cfg.keys(s.X);
    const float ws = 1.f / std::sqrt((float)C);
    Case c;
    c.variant = "dat_attn";
    c.shape = mapLabel(s.B, s.Y, s.X, C) + " nh12 ng3 (" + s.what + ")";
    c.inputs = {Tensor::randn({s.B, s.Y, s.X, C}, 61),
                Tensor::randn({C, C}, 62, 0.f, ws),
                Tensor::randn({C}, 63, 0.f, .1f),
                Tensor::randn({Cg, K, K}, 64, 0.f, .5f),
                Tensor::randn({Cg}, 65, 0.f, .1f),
                Tensor::randn({Cg}, 66, 1.f, .1f),
                Tensor::randn({Cg}, 67, 0.f, .1f),
                Tensor::randn({2, Cg}, 68),
                Tensor::randn({C, C}, 69, 0.f, ws),
                Tensor::randn({C}, 70, 0.f, .1f),
                Tensor::randn({C, C}, 71, 0.f, ws),
                Tensor::randn({C}, 72, 0.f, .1f),
                Tensor::randn({cfg.heads, 2 * s.Y - 1, 2 * s.X - 1}, 73),
                Tensor::randn({C, C}, 74, 0.f, ws),
                Tensor::randn({C}, 75, 0.f, .1f)};
    c.outShape = {s.B, s.Y, s.X, C};
    c.flopFormula = "4*Y*X*C^2 + 4*Ns*C^2 + 4*Y*X*Ns*C + 7*nh*Y*X*Ns + 2*Ns*C*ks^2 + 11*Ns*C (B=1)";
    const double HW = (double)s.Y * s.X, CC = (double)C * C;
    c.flops = s.B * (4 * HW * CC + 4.0 * Ns * CC + 4 * HW * Ns * C + 7.0 * cfg.heads * HW * Ns +
                     2.0 * Ns * C * K * K + 11.0 * Ns * C);
    c.bytes = bytesOf(c.inputs, c.outShape);
    c.kernel = &attnc_kernels::bench_dat_attn();
    // Unscheduled, the offset network and the projections are recomputed inside every score.
    c.unscheduledNote =
        "not timed: unscheduled dat_attn recomputes the offset network and projections per score "
        "(B1 5x5 C24: over 30 s)";
    c.reference = [&c, s, cfg] {
      const std::vector<Tensor> &in = c.inputs;
      const attnc_ref::DatWeights w = {
          in[1].fp(), in[2].fp(), in[3].fp(),  in[4].fp(),  in[5].fp(),  in[6].fp(),  in[7].fp(),
          in[8].fp(), in[9].fp(), in[10].fp(), in[11].fp(), in[12].fp(), in[13].fp(), in[14].fp()};
      return attnc_ref::datAttn<float>(in[0].fp(), w, s.B, s.Y, s.X, s.C, cfg);
    };
    c.torchEntry = "dat_attn";
    c.torchConsts = "{\"stride\": 1, \"ksize\": 5, \"orf\": 2.0, \"heads\": 12, \"groups\": 3}";
    out->push_back(runCase(c, o));
  }
}

// Swin Transformer's window attention (swin_attention.attn, ws = 7) on the image, W-MSA and SW-MSA
// (shift 3, bench_swin_attention_shifted): per query, the scores and the weighted sum over its
// window's 49 keys, 2*49*D flops each: 4*B*NH*Y*X*49*D (the bias, the mask and the softmax are not
// counted). Swin-T's first stage (56x56, 3 heads of 32 channels) and third (14x14, 12 heads).
// Beside it the same attention written per pixel (examples/swin_on_image.attn), which
// attn-window-partition brings to the same plan.
void benchSwin(const Options &o, std::vector<CaseResult> *out) {
  struct Shape {
    int B, NH, Y, X, D;
  };
  const std::vector<Shape> shapes =
      o.quick ? std::vector<Shape>{{1, 2, 14, 14, 8}}
              : std::vector<Shape>{{1, 3, 56, 56, 32}, {1, 12, 14, 14, 32}};
  const int ws = 7;
  for (const Shape &s : shapes)
    for (int shift : {0, 3}) {
      Case c;
      c.variant = "swin_attention";
      c.shape = "B" + std::to_string(s.B) + " NH" + std::to_string(s.NH) + " " +
                std::to_string(s.Y) + "x" + std::to_string(s.X) + " D" + std::to_string(s.D) +
                (shift ? " shift 3" : " shift 0");
      const std::vector<int64_t> shape = {s.B, s.NH, s.Y, s.X, s.D};
      c.inputs = {Tensor::randn(shape, 81), Tensor::randn(shape, 82), Tensor::randn(shape, 83),
                  Tensor::randn({(2 * ws - 1) * (2 * ws - 1), s.NH}, 84, 0.f, .5f)};
      c.outShape = shape;
      c.flopFormula = "4*B*NH*Y*X*49*D";
      c.flops = 4.0 * s.B * s.NH * s.Y * s.X * ws * ws * s.D;
      c.bytes = bytesOf(c.inputs, c.outShape);
      c.kernel = shift ? &attnc_kernels::bench_swin_attention_shifted()
                       : &attnc_kernels::bench_swin_attention();
      c.algorithms.push_back({"written on the image (examples/swin_on_image.attn)",
                              shift ? &attnc_kernels::bench_swin_on_image_shifted()
                                    : &attnc_kernels::bench_swin_on_image()});
      c.unscheduledNote = "not built: no SCHEDULE none kernel of this variant";
      c.reference = [&c, s, shift] {
        return swinReference(c.inputs[0].fp(), c.inputs[1].fp(), c.inputs[2].fp(), c.inputs[3].fp(),
                             s.B, s.NH, s.Y, s.X, s.D, ws, shift);
      };
      c.torchEntry = "swin_attention";
      c.torchConsts = "{\"ws\": 7, \"shift\": " + std::to_string(shift) + "}";
      out->push_back(runCase(c, o));
    }
}

// NATTEN's neighbourhood attention (neighborhood_attention.attn, ks = 7): per query, the scores and
// the weighted sum over its 49 keys, 2*49*D flops each: 4*B*NH*Y*X*49*D (bias and softmax not
// counted). NAT-Mini's first stage (56x56, 2 heads of 32 channels) and third (14x14, 8 heads).
void benchNatten(const Options &o, std::vector<CaseResult> *out) {
  struct Shape {
    int B, NH, Y, X, D;
  };
  const std::vector<Shape> shapes =
      o.quick ? std::vector<Shape>{{1, 2, 9, 11, 8}}
              : std::vector<Shape>{{1, 2, 56, 56, 32}, {1, 8, 14, 14, 32}};
  const int ks = 7;
  for (const Shape &s : shapes) {
    Case c;
    c.variant = "neighborhood_attention";
    c.shape = "B" + std::to_string(s.B) + " NH" + std::to_string(s.NH) + " " + std::to_string(s.Y) +
              "x" + std::to_string(s.X) + " D" + std::to_string(s.D) + " ks7";
    const std::vector<int64_t> shape = {s.B, s.NH, s.Y, s.X, s.D};
    c.inputs = {Tensor::randn(shape, 91), Tensor::randn(shape, 92), Tensor::randn(shape, 93),
                Tensor::randn({s.NH, 2 * ks - 1, 2 * ks - 1}, 94, 0.f, .5f)};
    c.outShape = shape;
    c.flopFormula = "4*B*NH*Y*X*49*D";
    c.flops = 4.0 * s.B * s.NH * s.Y * s.X * ks * ks * s.D;
    c.bytes = bytesOf(c.inputs, c.outShape);
    c.kernel = &attnc_kernels::bench_neighborhood_attention();
    c.unscheduledNote = "not built: no SCHEDULE none kernel of this variant";
    c.reference = [&c, s] {
      return nattenReference(c.inputs[0].fp(), c.inputs[1].fp(), c.inputs[2].fp(), c.inputs[3].fp(),
                             s.B, s.NH, s.Y, s.X, s.D, ks);
    };
    c.torchEntry = "neighborhood_attention";
    c.torchConsts = "{\"ks\": 7}";
    out->push_back(runCase(c, o));
  }
}

} // namespace attn_bench
