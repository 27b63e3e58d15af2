// Hand-written references for the deformable-attention variants (dsl/variants/ms_deform_attn_core.attn,
// dsl/variants/ms_deform_attn.attn and dsl/variants/deform_attn.attn), written from Deformable
// DETR's formulas (ms_deform_attn_core_pytorch, MSDeformAttn.forward and eq. 2 of the paper), not
// from the DSL.
//
// Sampling follows F.grid_sample(mode='bilinear', padding_mode='zeros', align_corners=False) on
// the grid 2 * loc - 1: a normalised (x, y) location of level l (H_l x W_l) samples pixel
//   x = loc_x * W_l - 0.5,  y = loc_y * H_l - 0.5,
// x0 = floor(x), y0 = floor(y), wx = x - x0, wy = y - y0, and the four corners weighted
// (1-wy)(1-wx), (1-wy)wx, wy(1-wx), wy wx; a corner outside [0, H_l) x [0, W_l) contributes 0.
// deformAttn samples at pixel coordinates directly (pixel centres on the integers), with the same
// corner arithmetic.
//
// T = double is the ground truth, T = float a plain fp32 implementation whose error against
// double sets the numerics tests' tolerance (attnc_ref::tolerance).
#pragma once

#include "reference/sdpa_ref.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace attnc_ref {

namespace deform_detail {

// Bilinear sampling of an H x W map at pixel coordinates (y, x) (pixel centres on the integers):
// calls f(weight, row, col) for each of the four corners inside the map; the corners outside are
// zero padding and skipped.
template <typename T, typename F> void bilinearCorners(T y, T x, int H, int W, F &&f) {
  const T fy = std::floor(y), fx = std::floor(x);
  const T wy = y - fy, wx = x - fx;
  const int64_t y0 = (int64_t)fy, x0 = (int64_t)fx;
  const int64_t cy[4] = {y0, y0, y0 + 1, y0 + 1}, cx[4] = {x0, x0 + 1, x0, x0 + 1};
  const T cw[4] = {(T(1) - wy) * (T(1) - wx), (T(1) - wy) * wx, wy * (T(1) - wx), wy * wx};
  for (int c = 0; c < 4; ++c)
    if (cy[c] >= 0 && cy[c] < H && cx[c] >= 0 && cx[c] < W)
      f(cw[c], cy[c], cx[c]);
}

// o[b, q, m, d] = sum_{l, p} aw[b, q, m, l, p] * bilinear(level l of value[b, :, m, d] at
// (locY * H_l - 0.5, locX * W_l - 0.5)). value [B, S, M, D]; locX / locY / aw [B, Q, M, L, P].
template <typename T>
std::vector<T> core(const std::vector<T> &value, const int32_t *shapes, const int32_t *start,
                    const std::vector<T> &locX, const std::vector<T> &locY,
                    const std::vector<T> &aw, int B, int S, int M, int D, int Q, int L, int P) {
  std::vector<T> out((size_t)B * Q * M * D, T(0));
  for (int b = 0; b < B; ++b)
    for (int q = 0; q < Q; ++q)
      for (int m = 0; m < M; ++m) {
        T *o = &out[(((size_t)b * Q + q) * M + m) * D];
        for (int l = 0; l < L; ++l) {
          const int H = shapes[2 * l], W = shapes[2 * l + 1], s0 = start[l];
          for (int p = 0; p < P; ++p) {
            const size_t i = ((((size_t)b * Q + q) * M + m) * L + l) * P + p;
            const T a = aw[i];
            bilinearCorners(locY[i] * T(H) - T(0.5), locX[i] * T(W) - T(0.5), H, W,
                            [&](T cw, int64_t cy, int64_t cx) {
                              const int64_t s = s0 + cy * W + cx;
                              const T *v = &value[(((size_t)b * S + s) * M + m) * D];
                              for (int d = 0; d < D; ++d)
                                o[d] += a * cw * v[d];
                            });
          }
        }
      }
  return out;
}

template <typename T> std::vector<T> convert(const float *p, size_t n) {
  return std::vector<T>(p, p + n);
}

} // namespace deform_detail

// Deformable DETR's core op (ms_deform_attn_core_pytorch): value [B, S, M, D] (levels flattened,
// level l at rows start[l] .. start[l] + H_l W_l), shapes [L, 2] = (H_l, W_l), start [L],
// loc [B, Q, M, L, P, 2] normalised (x, y), aw [B, Q, M, L, P] -> o [B, Q, M*D] (the heads
// concatenated: o[b, q, m*D + d], the memory of a row-major [B, Q, M, D]).
template <typename T>
std::vector<T> msDeformAttnCore(const float *value, const int32_t *shapes, const int32_t *start,
                                const float *loc, const float *aw, int B, int S, int M, int D,
                                int Q, int L, int P) {
  const size_t n = (size_t)B * Q * M * L * P;
  std::vector<T> locX(n), locY(n);
  for (size_t i = 0; i < n; ++i) {
    locX[i] = T(loc[2 * i]);
    locY[i] = T(loc[2 * i + 1]);
  }
  return deform_detail::core<T>(deform_detail::convert<T>(value, (size_t)B * S * M * D), shapes,
                                start, locX, locY, deform_detail::convert<T>(aw, n), B, S, M, D, Q,
                                L, P);
}

// The whole MSDeformAttn module (2-d reference points), PyTorch's weights as views:
//   value[b, s, m, d]     = b_v[m, d] + sum_c input[b, s, c] w_v[m, d, c]          (value_proj)
//   off[b, q, m, l, p, k] = b_off[m, l, p, k] + sum_c query[b, q, c] w_off[m, l, p, k, c]
//   aw[b, q, m, :, :]     = softmax over (l, p) of b_aw[m, l, p] + sum_c query[b, q, c] w_aw[m, l, p, c]
//   loc_x = ref[b, q, l, 0] + off[..., 0] / W_l,  loc_y = ref[b, q, l, 1] + off[..., 1] / H_l
//   a = msDeformAttnCore(value, loc, aw),  o[b, q, oc] = b_o[oc] + sum_{m, d} a[b, q, m, d] w_o[oc, m, d].
// query [B, Q, C], ref [B, Q, L, 2], input [B, S, C] -> o [B, Q, C].
template <typename T>
std::vector<T>
msDeformAttn(const float *query, const float *ref, const float *input, const int32_t *shapes,
             const int32_t *start, const float *w_v, const float *b_v, const float *w_off,
             const float *b_off, const float *w_aw, const float *b_aw, const float *w_o,
             const float *b_o, int B, int Q, int S, int C, int M, int D, int L, int P) {
  // value_proj
  std::vector<T> value((size_t)B * S * M * D);
  for (int b = 0; b < B; ++b)
    for (int s = 0; s < S; ++s) {
      const float *x = input + ((size_t)b * S + s) * C;
      for (int md = 0; md < M * D; ++md) {
        T acc = T(b_v[md]);
        const float *w = w_v + (size_t)md * C;
        for (int c = 0; c < C; ++c)
          acc += T(x[c]) * T(w[c]);
        value[((size_t)b * S + s) * M * D + md] = acc;
      }
    }
  // sampling offsets -> locations, attention weights -> softmax over (l, p)
  const size_t n = (size_t)B * Q * M * L * P;
  std::vector<T> locX(n), locY(n), aw(n);
  const int LP = L * P;
  for (int b = 0; b < B; ++b)
    for (int q = 0; q < Q; ++q) {
      const float *z = query + ((size_t)b * Q + q) * C;
      for (int m = 0; m < M; ++m) {
        const size_t base = (((size_t)b * Q + q) * M + m) * LP;
        T mx = -INFINITY;
        for (int lp = 0; lp < LP; ++lp) {
          const int l = lp / P;
          const size_t wlp = (size_t)m * LP + lp; // (m, l, p)
          T ox = T(b_off[2 * wlp]), oy = T(b_off[2 * wlp + 1]), lg = T(b_aw[wlp]);
          const float *wx = w_off + (2 * wlp) * C;
          const float *wy = w_off + (2 * wlp + 1) * C;
          const float *wa = w_aw + wlp * C;
          for (int c = 0; c < C; ++c) {
            ox += T(z[c]) * T(wx[c]);
            oy += T(z[c]) * T(wy[c]);
            lg += T(z[c]) * T(wa[c]);
          }
          const T H = T(shapes[2 * l]), W = T(shapes[2 * l + 1]);
          const float *r = ref + (((size_t)b * Q + q) * L + l) * 2;
          locX[base + lp] = T(r[0]) + ox / W;
          locY[base + lp] = T(r[1]) + oy / H;
          aw[base + lp] = lg;
          mx = std::max(mx, lg);
        }
        T sum = 0;
        for (int lp = 0; lp < LP; ++lp)
          sum += (aw[base + lp] = std::exp(aw[base + lp] - mx));
        for (int lp = 0; lp < LP; ++lp)
          aw[base + lp] /= sum;
      }
    }
  const std::vector<T> a =
      deform_detail::core<T>(value, shapes, start, locX, locY, aw, B, S, M, D, Q, L, P);
  // output_proj
  std::vector<T> out((size_t)B * Q * C);
  for (size_t bq = 0; bq < (size_t)B * Q; ++bq)
    for (int oc = 0; oc < C; ++oc) {
      T acc = T(b_o[oc]);
      const float *w = w_o + (size_t)oc * M * D;
      for (int md = 0; md < M * D; ++md)
        acc += a[bq * M * D + md] * T(w[md]);
      out[bq * C + oc] = acc;
    }
  return out;
}

// Single-scale deformable attention v1 (Deformable DETR eq. 2), as the paper writes it:
//   dp[b, q, m, k, t] = b_off[m, k, t] + sum_c z[b, q, c] w_off[m, k, t, c]       (t = 0: y, 1: x; pixels)
//   A[b, q, m, :]     = softmax over k of b_a[m, k] + sum_c z[b, q, c] w_a[m, k, c]
//   s[c]              = bilinear sample of x[b, :, :, c] at (p[b, q, 0] + dp[.., 0], p[b, q, 1] + dp[.., 1])
//   h[b, q, m, d]     = sum_k A[b, q, m, k] sum_c w_v[m, d, c] s[c]
//   o[b, q, oc]       = b_o[oc] + sum_{m, d} w_o[oc, m, d] h[b, q, m, d].
// The samples are taken from x and projected afterwards (W'_m x(p)), the order of the formula; the
// kernel may project first, which is the same linear map.
// x [B, Y, X, C], z [B, Q, C], p [B, Q, 2] (y, x), w_off [M, K, 2, C], b_off [M, K, 2],
// w_a [M, K, C], b_a [M, K], w_v [M, D, C], w_o [C, M, D], b_o [C] -> o [B, Q, C].
template <typename T>
std::vector<T> deformAttn(const float *x, const float *z, const float *p, const float *w_off,
                          const float *b_off, const float *w_a, const float *b_a, const float *w_v,
                          const float *w_o, const float *b_o, int B, int Y, int X, int C, int Q,
                          int M, int K, int D) {
  std::vector<T> out((size_t)B * Q * C);
  std::vector<T> a(K), dy(K), dx(K), s(C), h((size_t)M * D);
  for (int b = 0; b < B; ++b)
    for (int q = 0; q < Q; ++q) {
      const float *zq = z + ((size_t)b * Q + q) * C;
      const float *pq = p + ((size_t)b * Q + q) * 2;
      for (int m = 0; m < M; ++m) {
        T mx = -INFINITY;
        for (int k = 0; k < K; ++k) {
          const size_t mk = (size_t)m * K + k;
          T oy = T(b_off[2 * mk]), ox = T(b_off[2 * mk + 1]), lg = T(b_a[mk]);
          for (int c = 0; c < C; ++c) {
            oy += T(zq[c]) * T(w_off[(2 * mk) * C + c]);
            ox += T(zq[c]) * T(w_off[(2 * mk + 1) * C + c]);
            lg += T(zq[c]) * T(w_a[mk * C + c]);
          }
          dy[k] = oy;
          dx[k] = ox;
          a[k] = lg;
          mx = std::max(mx, lg);
        }
        T sum = 0;
        for (int k = 0; k < K; ++k)
          sum += (a[k] = std::exp(a[k] - mx));
        T *hm = &h[(size_t)m * D];
        std::fill(hm, hm + D, T(0));
        for (int k = 0; k < K; ++k) {
          std::fill(s.begin(), s.end(), T(0));
          deform_detail::bilinearCorners(
              T(pq[0]) + dy[k], T(pq[1]) + dx[k], Y, X, [&](T cw, int64_t cy, int64_t cx) {
                const float *xv = x + (((size_t)b * Y + cy) * X + cx) * C;
                for (int c = 0; c < C; ++c)
                  s[c] += cw * T(xv[c]);
              });
          const T ak = a[k] / sum;
          for (int d = 0; d < D; ++d) {
            T v = 0;
            const float *w = w_v + ((size_t)m * D + d) * C;
            for (int c = 0; c < C; ++c)
              v += T(w[c]) * s[c];
            hm[d] += ak * v;
          }
        }
      }
      T *o = &out[((size_t)b * Q + q) * C];
      for (int oc = 0; oc < C; ++oc) {
        T acc = T(b_o[oc]);
        const float *w = w_o + (size_t)oc * M * D;
        for (int md = 0; md < M * D; ++md)
          acc += T(w[md]) * h[md];
        o[oc] = acc;
      }
    }
  return out;
}

} // namespace attnc_ref
