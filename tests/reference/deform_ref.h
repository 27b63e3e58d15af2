// Hand-written references for the deformable-attention variants (dsl/variants/ms_deform_attn_core.attn
// and dsl/variants/ms_deform_attn.attn), written from Deformable DETR's formulas
// (ms_deform_attn_core_pytorch and MSDeformAttn.forward), not from the DSL.
//
// Sampling follows F.grid_sample(mode='bilinear', padding_mode='zeros', align_corners=False) on
// the grid 2 * loc - 1: a normalised (x, y) location of level l (H_l x W_l) samples pixel
//   x = loc_x * W_l - 0.5,  y = loc_y * H_l - 0.5,
// x0 = floor(x), y0 = floor(y), wx = x - x0, wy = y - y0, and the four corners weighted
// (1-wy)(1-wx), (1-wy)wx, wy(1-wx), wy wx; a corner outside [0, H_l) x [0, W_l) contributes 0.
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

// o[b, q, m, d] = sum_{l, p} aw[b, q, m, l, p] * bilinear(level l of value[b, :, m, d] at
// (locY * H_l - 0.5, locX * W_l - 0.5)). value [B, S, M, D]; locX / locY / aw [B, Q, M, L, P].
template <typename T>
std::vector<T> core(const std::vector<T>& value, const int32_t* shapes, const int32_t* start, const std::vector<T>& locX,
                    const std::vector<T>& locY, const std::vector<T>& aw, int B, int S, int M, int D, int Q, int L,
                    int P) {
  std::vector<T> out((size_t)B * Q * M * D, T(0));
  for (int b = 0; b < B; ++b)
    for (int q = 0; q < Q; ++q)
      for (int m = 0; m < M; ++m) {
        T* o = &out[(((size_t)b * Q + q) * M + m) * D];
        for (int l = 0; l < L; ++l) {
          const int H = shapes[2 * l], W = shapes[2 * l + 1], s0 = start[l];
          for (int p = 0; p < P; ++p) {
            const size_t i = ((((size_t)b * Q + q) * M + m) * L + l) * P + p;
            const T y = locY[i] * T(H) - T(0.5), x = locX[i] * T(W) - T(0.5);
            const T fy = std::floor(y), fx = std::floor(x);
            const T wy = y - fy, wx = x - fx;
            const int64_t y0 = (int64_t)fy, x0 = (int64_t)fx;
            const T a = aw[i];
            const int64_t cy[4] = {y0, y0, y0 + 1, y0 + 1}, cx[4] = {x0, x0 + 1, x0, x0 + 1};
            const T cw[4] = {(T(1) - wy) * (T(1) - wx), (T(1) - wy) * wx, wy * (T(1) - wx), wy * wx};
            for (int c = 0; c < 4; ++c) {
              if (cy[c] < 0 || cy[c] >= H || cx[c] < 0 || cx[c] >= W) continue; // zero padding
              const int64_t s = s0 + cy[c] * W + cx[c];
              const T* v = &value[(((size_t)b * S + s) * M + m) * D];
              for (int d = 0; d < D; ++d) o[d] += a * cw[c] * v[d];
            }
          }
        }
      }
  return out;
}

template <typename T> std::vector<T> convert(const float* p, size_t n) { return std::vector<T>(p, p + n); }

} // namespace deform_detail

// Deformable DETR's core op (ms_deform_attn_core_pytorch): value [B, S, M, D] (levels flattened,
// level l at rows start[l] .. start[l] + H_l W_l), shapes [L, 2] = (H_l, W_l), start [L],
// loc [B, Q, M, L, P, 2] normalised (x, y), aw [B, Q, M, L, P] -> o [B, Q, M, D].
template <typename T>
std::vector<T> msDeformAttnCore(const float* value, const int32_t* shapes, const int32_t* start, const float* loc,
                                const float* aw, int B, int S, int M, int D, int Q, int L, int P) {
  const size_t n = (size_t)B * Q * M * L * P;
  std::vector<T> locX(n), locY(n);
  for (size_t i = 0; i < n; ++i) {
    locX[i] = T(loc[2 * i]);
    locY[i] = T(loc[2 * i + 1]);
  }
  return deform_detail::core<T>(deform_detail::convert<T>(value, (size_t)B * S * M * D), shapes, start, locX, locY,
                                deform_detail::convert<T>(aw, n), B, S, M, D, Q, L, P);
}

// The whole MSDeformAttn module (2-d reference points), PyTorch's weights as views:
//   value[b, s, m, d]     = b_v[m, d] + sum_c input[b, s, c] w_v[m, d, c]          (value_proj)
//   off[b, q, m, l, p, k] = b_off[m, l, p, k] + sum_c query[b, q, c] w_off[m, l, p, k, c]
//   aw[b, q, m, :, :]     = softmax over (l, p) of b_aw[m, l, p] + sum_c query[b, q, c] w_aw[m, l, p, c]
//   loc_x = ref[b, q, l, 0] + off[..., 0] / W_l,  loc_y = ref[b, q, l, 1] + off[..., 1] / H_l
//   a = msDeformAttnCore(value, loc, aw),  o[b, q, oc] = b_o[oc] + sum_{m, d} a[b, q, m, d] w_o[oc, m, d].
// query [B, Q, C], ref [B, Q, L, 2], input [B, S, C] -> o [B, Q, C].
template <typename T>
std::vector<T> msDeformAttn(const float* query, const float* ref, const float* input, const int32_t* shapes,
                            const int32_t* start, const float* w_v, const float* b_v, const float* w_off,
                            const float* b_off, const float* w_aw, const float* b_aw, const float* w_o,
                            const float* b_o, int B, int Q, int S, int C, int M, int D, int L, int P) {
  // value_proj
  std::vector<T> value((size_t)B * S * M * D);
  for (int b = 0; b < B; ++b)
    for (int s = 0; s < S; ++s) {
      const float* x = input + ((size_t)b * S + s) * C;
      for (int md = 0; md < M * D; ++md) {
        T acc = T(b_v[md]);
        const float* w = w_v + (size_t)md * C;
        for (int c = 0; c < C; ++c) acc += T(x[c]) * T(w[c]);
        value[((size_t)b * S + s) * M * D + md] = acc;
      }
    }
  // sampling offsets -> locations, attention weights -> softmax over (l, p)
  const size_t n = (size_t)B * Q * M * L * P;
  std::vector<T> locX(n), locY(n), aw(n);
  const int LP = L * P;
  for (int b = 0; b < B; ++b)
    for (int q = 0; q < Q; ++q) {
      const float* z = query + ((size_t)b * Q + q) * C;
      for (int m = 0; m < M; ++m) {
        const size_t base = (((size_t)b * Q + q) * M + m) * LP;
        T mx = -INFINITY;
        for (int lp = 0; lp < LP; ++lp) {
          const int l = lp / P;
          const size_t wlp = (size_t)m * LP + lp; // (m, l, p)
          T ox = T(b_off[2 * wlp]), oy = T(b_off[2 * wlp + 1]), lg = T(b_aw[wlp]);
          const float* wx = w_off + (2 * wlp) * C;
          const float* wy = w_off + (2 * wlp + 1) * C;
          const float* wa = w_aw + wlp * C;
          for (int c = 0; c < C; ++c) {
            ox += T(z[c]) * T(wx[c]);
            oy += T(z[c]) * T(wy[c]);
            lg += T(z[c]) * T(wa[c]);
          }
          const T H = T(shapes[2 * l]), W = T(shapes[2 * l + 1]);
          const float* r = ref + (((size_t)b * Q + q) * L + l) * 2;
          locX[base + lp] = T(r[0]) + ox / W;
          locY[base + lp] = T(r[1]) + oy / H;
          aw[base + lp] = lg;
          mx = std::max(mx, lg);
        }
        T sum = 0;
        for (int lp = 0; lp < LP; ++lp) sum += (aw[base + lp] = std::exp(aw[base + lp] - mx));
        for (int lp = 0; lp < LP; ++lp) aw[base + lp] /= sum;
      }
    }
  const std::vector<T> a = deform_detail::core<T>(value, shapes, start, locX, locY, aw, B, S, M, D, Q, L, P);
  // output_proj
  std::vector<T> out((size_t)B * Q * C);
  for (size_t bq = 0; bq < (size_t)B * Q; ++bq)
    for (int oc = 0; oc < C; ++oc) {
      T acc = T(b_o[oc]);
      const float* w = w_o + (size_t)oc * M * D;
      for (int md = 0; md < M * D; ++md) acc += a[bq * M * D + md] * T(w[md]);
      out[bq * C + oc] = acc;
    }
  return out;
}

} // namespace attnc_ref
