// PyTorch's formulations of msda and ms_deform_attn_core in plain C++: what PyTorch materialises, without PyTorch.
#include "pytorch_style.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace attn_bench {

// The seed's MultiDilatelocalAttention, written as PyTorch computes it: a 1x1 convolution for
// qkv, nn.Unfold of k and v per dilation group (materialised), attention per pixel and head,
// then the projection. x and o are [B, H, W, C]; weights as in msda.attn.
void msdaUnfold(const float *x, const float *wqkv, const float *bqkv, const float *wo,
                const float *bo, float *o, int B, int H, int W, int C, int hd, const int dil[3]) {
  const int G = 3, Cg = C / G, N = H * W, K = 9;
  std::vector<float> qkv((size_t)3 * C * N), ku((size_t)Cg * K * N), vu((size_t)Cg * K * N),
      att((size_t)N * C);
  const float scale = 1.f / std::sqrt((float)hd);
  for (int b = 0; b < B; ++b) {
    const float *xb = x + (size_t)b * N * C;
    for (int oc = 0; oc < 3 * C; ++oc)
      for (int n = 0; n < N; ++n) {
        float s = bqkv[oc];
        for (int c = 0; c < C; ++c)
          s += xb[(size_t)n * C + c] * wqkv[(size_t)oc * C + c];
        qkv[(size_t)oc * N + n] = s;
      }
    for (int g = 0; g < G; ++g) {
      const float *q = qkv.data() + (size_t)(0 * C + g * Cg) * N;
      const float *k = qkv.data() + (size_t)(1 * C + g * Cg) * N;
      const float *v = qkv.data() + (size_t)(2 * C + g * Cg) * N;
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
            for (int e = 0; e < hd; ++e)
              d += q[(size_t)(h * hd + e) * N + n] * ku[((size_t)(h * hd + e) * K + j) * N + n];
            s[j] = d * scale;
            mx = std::max(mx, s[j]);
          }
          for (int j = 0; j < K; ++j)
            sum += (s[j] = std::exp(s[j] - mx));
          for (int e = 0; e < hd; ++e) {
            float acc = 0;
            for (int j = 0; j < K; ++j)
              acc += s[j] * vu[((size_t)(h * hd + e) * K + j) * N + n];
            att[(size_t)n * C + g * Cg + h * hd + e] = acc / sum;
          }
        }
    }
    float *ob = o + (size_t)b * N * C;
    for (int n = 0; n < N; ++n)
      for (int oc = 0; oc < C; ++oc) {
        float s = bo[oc];
        for (int c = 0; c < C; ++c)
          s += att[(size_t)n * C + c] * wo[(size_t)oc * C + c];
        ob[(size_t)n * C + oc] = s;
      }
  }
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
void msDeformAttnCoreGridSample(const float *value, const int32_t *shapes, const int32_t *start,
                                const float *loc, const float *aw, float *out, int B, int S, int M,
                                int D, int Q, int L, int P) {
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
            vl[((size_t)(b * M + m) * D + d) * HW + s] =
                value[(((size_t)b * S + start[l] + s) * M + m) * D + d];
    std::vector<float> &sv = sampled[l];
    sv.assign((size_t)BM * D * Q * P, 0.f);
    auto inBounds = [&](int y, int x) { return y >= 0 && y < H && x >= 0 && x < W; };
    for (int n = 0; n < BM; ++n) {
      const int b = n / M, m = n % M;
      for (int q = 0; q < Q; ++q)
        for (int p = 0; p < P; ++p) {
          const float *g = loc + (((((size_t)b * Q + q) * M + m) * L + l) * P + p) * 2;
          const float gx = 2.f * g[0] - 1.f, gy = 2.f * g[1] - 1.f;
          const float ix = ((gx + 1.f) * W - 1.f) / 2.f, iy = ((gy + 1.f) * H - 1.f) / 2.f;
          const int ixNw = (int)std::floor(ix), iyNw = (int)std::floor(iy);
          const int ixNe = ixNw + 1, iyNe = iyNw, ixSw = ixNw, iySw = iyNw + 1, ixSe = ixNw + 1,
                    iySe = iyNw + 1;
          const float nw = (ixSe - ix) * (iySe - iy), ne = (ix - ixSw) * (iySw - iy);
          const float sw = (ixNe - ix) * (iy - iyNe), se = (ix - ixNw) * (iy - iyNw);
          for (int d = 0; d < D; ++d) {
            const float *in = vl.data() + ((size_t)n * D + d) * HW;
            float o = 0.f;
            if (inBounds(iyNw, ixNw))
              o += in[iyNw * W + ixNw] * nw;
            if (inBounds(iyNe, ixNe))
              o += in[iyNe * W + ixNe] * ne;
            if (inBounds(iySw, ixSw))
              o += in[iySw * W + ixSw] * sw;
            if (inBounds(iySe, ixSe))
              o += in[iySe * W + ixSe] * se;
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
          awT[(((size_t)b * M + m) * Q + q) * L * P + lp] =
              aw[(((size_t)b * Q + q) * M + m) * L * P + lp];
  for (int n = 0; n < BM; ++n)
    for (int d = 0; d < D; ++d)
      for (int q = 0; q < Q; ++q) {
        float s = 0.f;
        for (int l = 0; l < L; ++l)
          for (int p = 0; p < P; ++p)
            s += sampled[l][(((size_t)n * D + d) * Q + q) * P + p] *
                 awT[((size_t)n * Q + q) * L * P + l * P + p];
        acc[((size_t)n * D + d) * Q + q] = s;
      }
  for (int b = 0; b < B; ++b)
    for (int q = 0; q < Q; ++q)
      for (int m = 0; m < M; ++m)
        for (int d = 0; d < D; ++d)
          out[(((size_t)b * Q + q) * M + m) * D + d] = acc[(((size_t)b * M + m) * D + d) * Q + q];
}

} // namespace attn_bench
