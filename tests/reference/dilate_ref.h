// Hand-written references of DilateFormer's multi-scale dilated attention (seed 001, class
// MultiDilatelocalAttention; dsl/variants/msda.attn) and of its block (class DilateBlock with
// cpe_per_block=True; dsl/variants/dilate_block.attn), written from the seed's formulas, not from
// the DSL: fp64 ground truth (T = double) and the "plain fp32" baseline (T = float) whose error
// against fp64 sets the numerics tests' tolerance (attnc_ref::tolerance).
//
// msda: x [B, Y, X, C] (the seed's forward input), C = 3 * Cg (three dilation groups, group g with
// dilation r[g]), heads of hd channels inside each group (Cg % hd == 0).
//   qkv[s, b, ch, y, x] = b_qkv[s*C + ch] + sum_c w_qkv[s*C + ch, c] x[b, y, x, c]   (1x1 conv, s = q/k/v)
//     (w_qkv [3C, C] is passed as its view [3, G, Cg, C], b_qkv [3C] as [3, G, Cg]);
//   group g takes channels g*Cg .. g*Cg+Cg-1 of q, k, v; head h of the group its channels h*hd ..;
//   DilateAttention (window 3, dilation r = r[g], nn.Unfold(3, r, padding r)): the query at (y, x)
//   sees positions (y + (u-1) r, x + (t-1) r), u, t in [0, 3); positions outside the map have zero
//   keys and values (score 0, in the softmax over all 9 positions, value 0);
//     s_{u,t} = hd^-0.5 q . k_{u,t},  a[b, y, x, g*Cg + h*hd + e] = sum_{u,t} softmax(s)_{u,t} v_{u,t}[e];
//   o[b, y, x, oc] = b_o[oc] + sum_c a[b, y, x, c] w_o[oc, c]                         (proj, nn.Linear)
// dilateBlock: x [B, C, Y, X] -> o [B, C, Y, X]:
//   x1 = x + DWConv3x3(x) (padding 1, bias; w_pos [C, 1, 3, 3] passed as [C, 3, 3]), as [B, Y, X, C];
//   y1 = x1 + msda(LayerNorm1(x1));  y = y1 + fc2(GELU(fc1(LayerNorm2(y1))));  o = y permuted back.
//   LayerNorm eps 1e-5 (biased variance), exact (erf) GELU, fc1 [F, C], fc2 [C, F].
#pragma once

#include "reference/dense_ref.h"
#include "reference/sdpa_ref.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace attnc_ref {

namespace detail {

// Multi-dilated local attention core on an already-normalised map xin [B, Y, X, C] (float input or
// T intermediate): qkv 1x1 conv, per-group dilated window attention (window w), channel concat.
// Returns the concatenated heads a [B, Y, X, C] (before the output projection).
template <typename T, typename Xin>
std::vector<T> msdaHeads(const Xin *xin, const float *w_qkv, const float *b_qkv, int B, int Y,
                         int X, int C, int hd, const int r[3], int w = 3, bool exclude = false) {
  const int G = 3, Cg = C / G, H = Cg / hd, W2 = w * w;
  const size_t P = (size_t)Y * X;
  // qkv[s][b][ch][p], p = y*X + x (the seed's B, 3C, H, W conv output).
  std::vector<T> qkv((size_t)3 * B * C * P);
  auto at = [&](int s, int b, int ch, size_t p) -> T & {
    return qkv[(((size_t)s * B + b) * C + ch) * P + p];
  };
  for (int s = 0; s < 3; ++s)
    for (int b = 0; b < B; ++b)
      for (int ch = 0; ch < C; ++ch) {
        const float *W = w_qkv + ((size_t)s * C + ch) * C;
        for (size_t p = 0; p < P; ++p) {
          const Xin *xr = xin + ((size_t)b * P + p) * C;
          T acc = T(b_qkv[(size_t)s * C + ch]);
          for (int c = 0; c < C; ++c)
            acc += T(xr[c]) * T(W[c]);
          at(s, b, ch, p) = acc;
        }
      }
  std::vector<T> a((size_t)B * P * C, T(0));
  std::vector<T> sc(W2);
  std::vector<long> pos(W2);
  const T scale = T(1) / std::sqrt(T(hd));
  for (int g = 0; g < G; ++g)
    for (int b = 0; b < B; ++b)
      for (int y = 0; y < Y; ++y)
        for (int x = 0; x < X; ++x) {
          for (int u = 0; u < w; ++u)
            for (int t = 0; t < w; ++t) {
              const int yy = y + (u - w / 2) * r[g], xx = x + (t - w / 2) * r[g];
              pos[u * w + t] = (yy >= 0 && yy < Y && xx >= 0 && xx < X) ? (long)yy * X + xx : -1;
            }
          const size_t p = (size_t)y * X + x;
          for (int h = 0; h < H; ++h) {
            const int c0 = g * Cg + h * hd;
            T mx = -INFINITY;
            for (int j = 0; j < W2; ++j) {
              T dot = 0; // zero-padded key: score 0 (or, with exclude, no part in the softmax)
              if (pos[j] >= 0)
                for (int e = 0; e < hd; ++e)
                  dot += at(0, b, c0 + e, p) * at(1, b, c0 + e, (size_t)pos[j]);
              sc[j] = dot * scale;
              if (exclude && pos[j] < 0)
                continue;
              mx = std::max(mx, sc[j]);
            }
            T sum = 0;
            for (int j = 0; j < W2; ++j)
              sum += (sc[j] = (exclude && pos[j] < 0) ? T(0) : std::exp(sc[j] - mx));
            for (int e = 0; e < hd; ++e) {
              T acc = 0;
              for (int j = 0; j < W2; ++j)
                if (pos[j] >= 0)
                  acc += sc[j] * at(2, b, c0 + e, (size_t)pos[j]); // zero values add nothing
              a[((size_t)b * P + p) * C + c0 + e] = acc / sum;
            }
          }
        }
  return a;
}

// y[r, o] = bias[o] + sum_i x[r, i] w[o, i] (nn.Linear), x [R, In] of T.
template <typename T>
std::vector<T> linearRows(const std::vector<T> &x, const float *w, const float *bias, size_t R,
                          int In, int Out) {
  std::vector<T> y(R * Out);
  for (size_t rr = 0; rr < R; ++rr)
    for (int o = 0; o < Out; ++o) {
      T acc = T(bias[o]);
      for (int i = 0; i < In; ++i)
        acc += x[rr * In + i] * T(w[(size_t)o * In + i]);
      y[rr * Out + o] = acc;
    }
  return y;
}

} // namespace detail

// msda: x [B, Y, X, C], w_qkv [3, 3, C/3, C], b_qkv [3, 3, C/3], w_o [C, C], b_o [C] -> [B, Y, X, C].
template <typename T>
std::vector<T> msda(const float *x, const float *w_qkv, const float *b_qkv, const float *w_o,
                    const float *b_o, int B, int Y, int X, int C, int hd, int r0, int r1, int r2,
                    bool exclude = false) {
  const int r[3] = {r0, r1, r2};
  const std::vector<T> a = detail::msdaHeads<T>(x, w_qkv, b_qkv, B, Y, X, C, hd, r, 3, exclude);
  return detail::linearRows(a, w_o, b_o, (size_t)B * Y * X, C, C);
}

// dilateBlock: x [B, C, Y, X], w_pos [C, 3, 3], b_pos [C], ln1_g/ln1_b [C], w_qkv [3, 3, C/3, C],
// b_qkv [3, 3, C/3], w_o [C, C], b_o [C], ln2_g/ln2_b [C], w_fc1 [F, C], b_fc1 [F], w_fc2 [C, F],
// b_fc2 [C] -> [B, C, Y, X].
template <typename T>
std::vector<T> dilateBlock(const float *x, const float *w_pos, const float *b_pos,
                           const float *ln1_g, const float *ln1_b, const float *w_qkv,
                           const float *b_qkv, const float *w_o, const float *b_o,
                           const float *ln2_g, const float *ln2_b, const float *w_fc1,
                           const float *b_fc1, const float *w_fc2, const float *b_fc2, int B, int C,
                           int Y, int X, int F, int hd, int r0, int r1, int r2) {
  const size_t P = (size_t)Y * X, R = (size_t)B * P;
  const T eps = T(1e-5);
  // x1 = x + pos_embed(x), stored channels-last [B, Y, X, C].
  std::vector<T> x1(R * C);
  for (int b = 0; b < B; ++b)
    for (int c = 0; c < C; ++c) {
      const float *xp = x + ((size_t)b * C + c) * P;
      for (int y = 0; y < Y; ++y)
        for (int xx = 0; xx < X; ++xx) {
          T conv = T(b_pos[c]);
          for (int u = 0; u < 3; ++u)
            for (int t = 0; t < 3; ++t) {
              const int yy = y + u - 1, xq = xx + t - 1;
              if (yy >= 0 && yy < Y && xq >= 0 && xq < X)
                conv += T(w_pos[(size_t)c * 9 + u * 3 + t]) * T(xp[(size_t)yy * X + xq]);
            }
          x1[(((size_t)b * Y + y) * X + xx) * C + c] = T(xp[(size_t)y * X + xx]) + conv;
        }
    }
  // y1 = x1 + attn(norm1(x1)).
  const std::vector<T> n1 = detail::layerNorm<T>(x1.data(), ln1_g, ln1_b, (int)R, C, eps);
  const int r[3] = {r0, r1, r2};
  const std::vector<T> a = detail::msdaHeads<T>(n1.data(), w_qkv, b_qkv, B, Y, X, C, hd, r);
  std::vector<T> y1 = detail::linearRows(a, w_o, b_o, R, C, C);
  for (size_t e = 0; e < y1.size(); ++e)
    y1[e] += x1[e];
  // y = y1 + mlp(norm2(y1)).
  const std::vector<T> n2 = detail::layerNorm<T>(y1.data(), ln2_g, ln2_b, (int)R, C, eps);
  std::vector<T> hid = detail::linearRows(n2, w_fc1, b_fc1, R, C, F);
  for (T &h : hid)
    h = detail::geluExact(h);
  const std::vector<T> m = detail::linearRows(hid, w_fc2, b_fc2, R, F, C);
  // Back to [B, C, Y, X].
  std::vector<T> out(R * C);
  for (int b = 0; b < B; ++b)
    for (size_t p = 0; p < P; ++p)
      for (int c = 0; c < C; ++c) {
        const size_t e = ((size_t)b * P + p) * C + c;
        out[((size_t)b * C + c) * P + p] = y1[e] + m[e];
      }
  return out;
}

} // namespace attnc_ref
