// Hand-written reference of sliding-window dilated attention (DilateFormer's SWDA, class
// DilateAttention; dsl/variants/swda.attn), written from the formula, not from the DSL: fp64
// ground truth (T = double) and the "plain fp32" baseline (T = float) whose error against fp64 sets
// the numerics tests' tolerance (attnc_ref::tolerance).
//
// q, k, v: contiguous [B, C, Y, X]; heads of hd channels (head h owns channels h*hd .. h*hd+hd-1,
// as the seed's reshape [B, C/hd, hd, ...] does); window w (odd) and dilation r. The query at
// (y, x) sees the keys/values at (y + (u - w/2) r, x + (t - w/2) r), u, t in [0, w):
//   s_{u,t} = hd^-0.5 * sum_c q[b, h*hd+c, y, x] k[b, h*hd+c, y', x'],
//   o[b, y, x, h*hd + e] = sum_{u,t} softmax(s)_{u,t} v[b, h*hd+e, y', x'],   o: [B, Y, X, C].
// Out-of-range positions (outside the Y x X map):
//   exclude == false (`swda`): nn.Unfold(w, dilation=r, padding=r*(w-1)/2) semantics: the key and
//     value are zero vectors, so the score is 0 and the position takes part in the softmax over all
//     w*w positions, contributing value 0;
//   exclude == true (`swda_natten`): the position takes no part in the softmax (which runs over the
//     in-range positions only) and contributes nothing. The centre (u = t = w/2) is always in range.
#pragma once

#include "reference/sdpa_ref.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace attnc_ref {

// Number of window positions of the query at (y, x) that fall inside the Y x X map.
inline int windowInRange(int y, int x, int Y, int X, int w, int r) {
  int ny = 0, nx = 0;
  for (int u = 0; u < w; ++u) {
    const int yy = y + (u - w / 2) * r, xx = x + (u - w / 2) * r;
    ny += (yy >= 0 && yy < Y);
    nx += (xx >= 0 && xx < X);
  }
  return ny * nx;
}

// True where every one of the w*w window positions of (y, x) is inside the map.
inline bool windowInterior(int y, int x, int Y, int X, int w, int r) {
  return windowInRange(y, x, Y, X, w, r) == w * w;
}

template <typename T>
std::vector<T> swda(const float *q, const float *k, const float *v, int B, int C, int Y, int X,
                    int w, int r, int hd, bool exclude) {
  const int H = C / hd, W2 = w * w;
  const size_t plane = (size_t)Y * X;
  std::vector<T> out((size_t)B * Y * X * C, T(0));
  std::vector<T> p(W2);
  std::vector<long> at(W2); // flat offset y' * X + x' of each window position, -1 outside
  const T scale = T(1) / std::sqrt(T(hd));
  for (int b = 0; b < B; ++b)
    for (int y = 0; y < Y; ++y)
      for (int x = 0; x < X; ++x) {
        for (int u = 0; u < w; ++u)
          for (int t = 0; t < w; ++t) {
            const int yy = y + (u - w / 2) * r, xx = x + (t - w / 2) * r;
            at[u * w + t] = (yy >= 0 && yy < Y && xx >= 0 && xx < X) ? (long)yy * X + xx : -1;
          }
        for (int h = 0; h < H; ++h) {
          const size_t base = ((size_t)b * C + (size_t)h * hd) * plane; // channel h*hd of batch b
          T mx = -INFINITY;
          for (int j = 0; j < W2; ++j) {
            if (at[j] < 0) {
              p[j] = exclude ? T(-INFINITY) : T(0); // zero key: score 0, or excluded
            } else {
              T dot = 0;
              for (int c = 0; c < hd; ++c)
                dot += T(q[base + c * plane + (size_t)y * X + x]) *
                       T(k[base + c * plane + (size_t)at[j]]);
              p[j] = dot * scale;
            }
            mx = std::max(mx, p[j]);
          }
          T sum = 0;
          for (int j = 0; j < W2; ++j)
            sum += (p[j] = (p[j] == T(-INFINITY)) ? T(0) : std::exp(p[j] - mx));
          T *o = out.data() + (((size_t)b * Y + y) * X + x) * C + (size_t)h * hd;
          for (int e = 0; e < hd; ++e) {
            T acc = 0;
            for (int j = 0; j < W2; ++j)
              if (at[j] >= 0)
                acc += p[j] * T(v[base + e * plane + (size_t)at[j]]); // zero values add nothing
            o[e] = acc / sum;
          }
        }
      }
  return out;
}

} // namespace attnc_ref
