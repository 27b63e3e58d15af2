// Hand-written references of the dense attention variants (dsl/variants/*.attn), written from the
// formulas, not from the DSL: fp64 ground truth (T = double) and the "plain fp32" baseline
// (T = float) whose error against fp64 sets the numerics tests' tolerance (attnc_ref::tolerance).
//
// Conventions: every tensor is contiguous row-major (C order); weights use PyTorch's nn.Linear
// layout w[out, in] (y = x w^T + b); softmax subtracts the row max; "scale" is 1/sqrt(head dim).
// Masked keys take no part in the softmax (probability exactly 0); a query row with no allowed key
// (every key masked, or every score -inf) outputs zeros.
#pragma once

#include "reference/sdpa_ref.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace attnc_ref {

namespace detail {

// One query row of attention: given the (already scaled and biased) scores s[0..Nk) of the row,
// where -inf marks an excluded key, writes out[e] = sum_j p[j] v[j, e] for e < D, with
// p = softmax over the finite scores. v(j, e) is any callable giving the value. A row with no
// finite score gets zeros. `s` is overwritten with the unnormalised weights.
template <typename T, typename VFn> void attendRow(T *s, int Nk, int D, VFn v, T *out) {
  T mx = -INFINITY;
  for (int j = 0; j < Nk; ++j)
    mx = std::max(mx, s[j]);
  if (!(mx > T(-INFINITY))) { // every key excluded (or no key at all)
    for (int e = 0; e < D; ++e)
      out[e] = 0;
    return;
  }
  T sum = 0;
  for (int j = 0; j < Nk; ++j)
    sum += (s[j] = (s[j] == T(-INFINITY)) ? T(0) : std::exp(s[j] - mx));
  for (int e = 0; e < D; ++e) {
    T acc = 0;
    for (int j = 0; j < Nk; ++j)
      acc += s[j] * v(j, e);
    out[e] = acc / sum;
  }
}

// Attention over [B, H*, N*, D] tensors (element type E: float inputs or T intermediates) with
// grouped kv heads (query head h reads kv head h / (Hq / Hkv)) and an additive score term
// bias(b, h, i, j) (T; -inf excludes the key): o[b,h,i,:] = softmax_j(scale * q.k + bias) v.
// Returns o as [B, Hq, Nq, D].
template <typename T, typename E, typename BiasFn>
std::vector<T> attention(const E *q, const E *k, const E *v, int B, int Hq, int Hkv, int Nq, int Nk,
                         int D, T scale, BiasFn bias) {
  std::vector<T> out((size_t)B * Hq * Nq * D);
  std::vector<T> s(Nk);
  const int group = Hq / Hkv;
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < Hq; ++h) {
      const int hk = h / group;
      const E *Q = q + ((size_t)b * Hq + h) * Nq * D;
      const E *K = k + ((size_t)b * Hkv + hk) * Nk * D;
      const E *V = v + ((size_t)b * Hkv + hk) * Nk * D;
      T *O = out.data() + ((size_t)b * Hq + h) * Nq * D;
      for (int i = 0; i < Nq; ++i) {
        for (int j = 0; j < Nk; ++j) {
          T dot = 0;
          for (int d = 0; d < D; ++d)
            dot += T(Q[(size_t)i * D + d]) * T(K[(size_t)j * D + d]);
          s[j] = dot * scale + bias(b, h, i, j);
        }
        attendRow<T>(
            s.data(), Nk, D, [&](int j, int e) { return T(V[(size_t)j * D + e]); },
            O + (size_t)i * D);
      }
    }
  return out;
}

template <typename T> T invSqrt(int n) { return T(1) / std::sqrt(T(n)); }

// Per-head projection p[b, h, n, d] = sum_c x[b, n, c] w[h, d, c] (+ bias[h, d]) of x [B, N, C]
// with w [H, Dh, C] (rows h*Dh + d of an nn.Linear weight) and an optional bias [H, Dh] (null for
// none). X is float (an input) or T (an intermediate). Returns [B, H, N, Dh].
template <typename T, typename X>
std::vector<T> projectHeads(const X *x, const float *w, const float *bias, int B, int N, int C,
                            int H, int Dh) {
  std::vector<T> p((size_t)B * H * N * Dh);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int n = 0; n < N; ++n)
        for (int d = 0; d < Dh; ++d) {
          const float *W = w + ((size_t)h * Dh + d) * C;
          const X *xr = x + ((size_t)b * N + n) * C;
          T acc = 0;
          for (int c = 0; c < C; ++c)
            acc += T(xr[c]) * T(W[c]);
          if (bias)
            acc += T(bias[(size_t)h * Dh + d]);
          p[(((size_t)b * H + h) * N + n) * Dh + d] = acc;
        }
  return p;
}

// Output projection of the heads: y[b, i, o] = b_o[o] + sum_{h,d} a[b, h, i, d] w_o[o, h, d],
// with a as [B, H, N, Dh] (the layout attention() returns) and w_o [Cout, H, Dh].
template <typename T>
std::vector<T> projectOut(const std::vector<T> &a, const float *w_o, const float *b_o, int B, int N,
                          int H, int Dh, int Cout) {
  std::vector<T> y((size_t)B * N * Cout);
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < N; ++i)
      for (int o = 0; o < Cout; ++o) {
        T acc = 0;
        for (int h = 0; h < H; ++h)
          for (int d = 0; d < Dh; ++d)
            acc += a[(((size_t)b * H + h) * N + i) * Dh + d] * T(w_o[((size_t)o * H + h) * Dh + d]);
        y[((size_t)b * N + i) * Cout + o] = T(b_o[o]) + acc;
      }
  return y;
}

// nn.LayerNorm over the last dimension C of rows x [R, C]: biased variance, eps inside the sqrt.
template <typename T, typename X>
std::vector<T> layerNorm(const X *x, const float *g, const float *beta, int R, int C, T eps) {
  std::vector<T> y((size_t)R * C);
  for (int r = 0; r < R; ++r) {
    const X *xr = x + (size_t)r * C;
    T mu = 0;
    for (int c = 0; c < C; ++c)
      mu += T(xr[c]);
    mu /= T(C);
    T var = 0;
    for (int c = 0; c < C; ++c)
      var += (T(xr[c]) - mu) * (T(xr[c]) - mu);
    var /= T(C);
    const T inv = T(1) / std::sqrt(var + eps);
    for (int c = 0; c < C; ++c)
      y[(size_t)r * C + c] = (T(xr[c]) - mu) * inv * T(g[c]) + T(beta[c]);
  }
  return y;
}

template <typename T> T geluExact(T x) {
  return T(0.5) * x * (T(1) + std::erf(x / std::sqrt(T(2))));
}

} // namespace detail

// 1./2. Multi-head self-attention with a fused qkv projection.
//   x [B, N, C], w_qkv [3, H, Dh, C], b_qkv [3, H, Dh] (null: mhsa_nobias), w_o [C, H, Dh], b_o [C]
//   q/k/v[b,h,i,d] = sum_c x[b,i,c] w_qkv[0/1/2,h,d,c] (+ b_qkv[0/1/2,h,d]),
//   a = softmax_j(q.k * Dh^-0.5) v,  y[b,i,o] = b_o[o] + sum_{h,d} a[b,i,h,d] w_o[o,h,d].  y: [B, N, C]
template <typename T>
std::vector<T> mhsa(const float *x, const float *w_qkv, const float *b_qkv, const float *w_o,
                    const float *b_o, int B, int N, int C, int H, int Dh) {
  const size_t wPart = (size_t)H * Dh * C, bPart = (size_t)H * Dh;
  auto q = detail::projectHeads<T>(x, w_qkv, b_qkv, B, N, C, H, Dh);
  auto k =
      detail::projectHeads<T>(x, w_qkv + wPart, b_qkv ? b_qkv + bPart : nullptr, B, N, C, H, Dh);
  auto v = detail::projectHeads<T>(x, w_qkv + 2 * wPart, b_qkv ? b_qkv + 2 * bPart : nullptr, B, N,
                                   C, H, Dh);
  auto a = detail::attention<T>(q.data(), k.data(), v.data(), B, H, H, N, N, Dh,
                                detail::invSqrt<T>(Dh), [](int, int, int, int) { return T(0); });
  return detail::projectOut<T>(a, w_o, b_o, B, N, H, Dh, C);
}

template <typename T>
std::vector<T> mhsa_nobias(const float *x, const float *w_qkv, const float *w_o, const float *b_o,
                           int B, int N, int C, int H, int Dh) {
  return mhsa<T>(x, w_qkv, nullptr, w_o, b_o, B, N, C, H, Dh);
}

// 3. Multi-head cross-attention, no qkv bias.
//   x_q [B, Nq, C], x_k/x_v [B, Nk, C], w_q/w_k/w_v [H, Dh, C], w_o [C, H, Dh], b_o [C] -> y [B, Nq, C]
template <typename T>
std::vector<T> cross_attention(const float *x_q, const float *x_k, const float *x_v,
                               const float *w_q, const float *w_k, const float *w_v,
                               const float *w_o, const float *b_o, int B, int Nq, int Nk, int C,
                               int H, int Dh) {
  auto q = detail::projectHeads<T>(x_q, w_q, nullptr, B, Nq, C, H, Dh);
  auto k = detail::projectHeads<T>(x_k, w_k, nullptr, B, Nk, C, H, Dh);
  auto v = detail::projectHeads<T>(x_v, w_v, nullptr, B, Nk, C, H, Dh);
  auto a = detail::attention<T>(q.data(), k.data(), v.data(), B, H, H, Nq, Nk, Dh,
                                detail::invSqrt<T>(Dh), [](int, int, int, int) { return T(0); });
  return detail::projectOut<T>(a, w_o, b_o, B, Nq, H, Dh, C);
}

// 4. Causal attention: query i attends to keys j <= i.  q/k/v/o [B, H, N, D]
template <typename T>
std::vector<T> causal_attention(const float *q, const float *k, const float *v, int B, int H, int N,
                                int D) {
  return detail::attention<T>(q, k, v, B, H, H, N, N, D, detail::invSqrt<T>(D),
                              [](int, int, int i, int j) { return j <= i ? T(0) : T(-INFINITY); });
}

// 5. Tokens-to-Token ViT attention (no qkv bias; v is the skip connection).
//   x [B, N, Dim], w_qkv [3, H, Dh, Dim], w_o [Ch, H, Dh], b_o [Ch], Ch = H * Dh -> y [B, N, Ch]
//   s = (q * Dh^-0.5) . k,  y[b,i,o] = v[b, o/Dh, i, o%Dh] + b_o[o] + sum_{h,d} a[b,i,h,d] w_o[o,h,d]
template <typename T>
std::vector<T> t2t_attention(const float *x, const float *w_qkv, const float *w_o, const float *b_o,
                             int B, int N, int Dim, int H, int Dh) {
  const int Ch = H * Dh;
  const size_t wPart = (size_t)H * Dh * Dim;
  auto q = detail::projectHeads<T>(x, w_qkv, nullptr, B, N, Dim, H, Dh);
  auto k = detail::projectHeads<T>(x, w_qkv + wPart, nullptr, B, N, Dim, H, Dh);
  auto v = detail::projectHeads<T>(x, w_qkv + 2 * wPart, nullptr, B, N, Dim, H, Dh);
  const T scale = detail::invSqrt<T>(Dh);
  for (T &e : q)
    e *= scale; // the scale is applied to q before the dot product
  auto a = detail::attention<T>(q.data(), k.data(), v.data(), B, H, H, N, N, Dh, T(1),
                                [](int, int, int, int) { return T(0); });
  auto y = detail::projectOut<T>(a, w_o, b_o, B, N, H, Dh, Ch);
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < N; ++i)
      for (int o = 0; o < Ch; ++o)
        y[((size_t)b * N + i) * Ch + o] += v[(((size_t)b * H + o / Dh) * N + i) * Dh + o % Dh];
  return y;
}

// 6. Sinusoidal positional encoding: y = x + P,  P[i, 2j] = sin(i / 10000^(2j/D)),
//    P[i, 2j+1] = cos(i / 10000^(2j/D)).  x/y [B, N, D] (D may be odd).
template <typename T> std::vector<T> positional_encoding(const float *x, int B, int N, int D) {
  std::vector<T> y((size_t)B * N * D);
  for (int b = 0; b < B; ++b)
    for (int i = 0; i < N; ++i)
      for (int c = 0; c < D; ++c) {
        const int j = c / 2;
        const T angle = T(i) / std::pow(T(10000), T(2 * j) / T(D));
        const T p = (c % 2 == 0) ? std::sin(angle) : std::cos(angle);
        const size_t idx = ((size_t)b * N + i) * D + c;
        y[idx] = T(x[idx]) + p;
      }
  return y;
}

// 7. Pre-norm transformer encoder block:
//   y1 = x + MHSA(LN1(x)),  y = y1 + fc2(GELU(fc1(LN2(y1)))),  LayerNorm eps 1e-5, exact GELU.
//   x [B, N, C], ln*_g/b [C], w_qkv [3, H, Dh, C], b_qkv [3, H, Dh], w_o [C, H, Dh], b_o [C],
//   w_fc1 [F, C], b_fc1 [F], w_fc2 [C, F], b_fc2 [C] -> y [B, N, C]
template <typename T>
std::vector<T> encoder_block(const float *x, const float *ln1_g, const float *ln1_b,
                             const float *w_qkv, const float *b_qkv, const float *w_o,
                             const float *b_o, const float *ln2_g, const float *ln2_b,
                             const float *w_fc1, const float *b_fc1, const float *w_fc2,
                             const float *b_fc2, int B, int N, int C, int H, int Dh, int F) {
  const T eps = T(1e-5);
  const int R = B * N;
  auto n1 = detail::layerNorm<T>(x, ln1_g, ln1_b, R, C, eps);
  const size_t wPart = (size_t)H * Dh * C, bPart = (size_t)H * Dh;
  auto q = detail::projectHeads<T>(n1.data(), w_qkv, b_qkv, B, N, C, H, Dh);
  auto k = detail::projectHeads<T>(n1.data(), w_qkv + wPart, b_qkv + bPart, B, N, C, H, Dh);
  auto v = detail::projectHeads<T>(n1.data(), w_qkv + 2 * wPart, b_qkv + 2 * bPart, B, N, C, H, Dh);
  auto a = detail::attention<T>(q.data(), k.data(), v.data(), B, H, H, N, N, Dh,
                                detail::invSqrt<T>(Dh), [](int, int, int, int) { return T(0); });
  auto y1 = detail::projectOut<T>(a, w_o, b_o, B, N, H, Dh, C);
  for (size_t e = 0; e < y1.size(); ++e)
    y1[e] += T(x[e]);
  auto n2 = detail::layerNorm<T>(y1.data(), ln2_g, ln2_b, R, C, eps);
  std::vector<T> hid((size_t)R * F);
  for (int r = 0; r < R; ++r)
    for (int f = 0; f < F; ++f) {
      T acc = 0;
      for (int c = 0; c < C; ++c)
        acc += n2[(size_t)r * C + c] * T(w_fc1[(size_t)f * C + c]);
      hid[(size_t)r * F + f] = detail::geluExact<T>(acc + T(b_fc1[f]));
    }
  std::vector<T> y((size_t)R * C);
  for (int r = 0; r < R; ++r)
    for (int o = 0; o < C; ++o) {
      T acc = 0;
      for (int f = 0; f < F; ++f)
        acc += hid[(size_t)r * F + f] * T(w_fc2[(size_t)o * F + f]);
      y[(size_t)r * C + o] = y1[(size_t)r * C + o] + (acc + T(b_fc2[o]));
    }
  return y;
}

// 8. Grouped-query attention: query head h reads kv head h / (Hq / Hkv) (MQA when Hkv = 1).
//   q [B, Hq, Nq, D], k/v [B, Hkv, Nk, D] -> o [B, Hq, Nq, D]
template <typename T>
std::vector<T> gqa(const float *q, const float *k, const float *v, int B, int Hq, int Hkv, int Nq,
                   int Nk, int D) {
  return detail::attention<T>(q, k, v, B, Hq, Hkv, Nq, Nk, D, detail::invSqrt<T>(D),
                              [](int, int, int, int) { return T(0); });
}

// 9. ALiBi: s = q.k * D^-0.5 + m_h (j - i),  m_h = 2^(-8 (h + 1) / H).  q [B,H,Nq,D], k/v [B,H,Nk,D]
template <typename T>
std::vector<T> alibi(const float *q, const float *k, const float *v, int B, int H, int Nq, int Nk,
                     int D) {
  std::vector<T> slope(H);
  for (int h = 0; h < H; ++h)
    slope[h] = std::pow(T(2), T(-8) * T(h + 1) / T(H));
  return detail::attention<T>(q, k, v, B, H, H, Nq, Nk, D, detail::invSqrt<T>(D),
                              [&](int, int h, int i, int j) { return slope[h] * T(j - i); });
}

// 10. Relative position bias: s = q.k * D^-0.5 + table[h, j - i + Nq - 1].  table [H, R],
//     R >= Nq + Nk - 1.
template <typename T>
std::vector<T> relative_bias(const float *q, const float *k, const float *v, const float *table,
                             int B, int H, int Nq, int Nk, int D, int R) {
  return detail::attention<T>(
      q, k, v, B, H, H, Nq, Nk, D, detail::invSqrt<T>(D),
      [&](int, int h, int i, int j) { return T(table[(size_t)h * R + (j - i + Nq - 1)]); });
}

// 11. Key padding mask: key j of batch b is excluded where key_padding_mask[b, j] != 0; a query with
//     every key excluded outputs zeros.  key_padding_mask [B, Nk]
template <typename T>
std::vector<T> padding_mask(const float *q, const float *k, const float *v,
                            const int32_t *key_padding_mask, int B, int H, int Nq, int Nk, int D) {
  return detail::attention<T>(
      q, k, v, B, H, H, Nq, Nk, D, detail::invSqrt<T>(D), [&](int b, int, int, int j) {
        return key_padding_mask[(size_t)b * Nk + j] != 0 ? T(-INFINITY) : T(0);
      });
}

// 12a. Boolean attention mask shared by batches and heads: key j allowed for query i where
//      mask[i, j] != 0; no allowed key -> zeros.  mask [Nq, Nk]
template <typename T>
std::vector<T> attn_mask_bool(const float *q, const float *k, const float *v, const int32_t *mask,
                              int B, int H, int Nq, int Nk, int D) {
  return detail::attention<T>(
      q, k, v, B, H, H, Nq, Nk, D, detail::invSqrt<T>(D),
      [&](int, int, int i, int j) { return mask[(size_t)i * Nk + j] != 0 ? T(0) : T(-INFINITY); });
}

// 12b. Additive attention mask: s += bias[i, j]; -inf entries exclude the key; a row whose scores
//      are all -inf outputs zeros.  bias [Nq, Nk]
template <typename T>
std::vector<T> attn_mask_additive(const float *q, const float *k, const float *v, const float *bias,
                                  int B, int H, int Nq, int Nk, int D) {
  return detail::attention<T>(q, k, v, B, H, H, Nq, Nk, D, detail::invSqrt<T>(D),
                              [&](int, int, int i, int j) { return T(bias[(size_t)i * Nk + j]); });
}

// 13. Attention sinks (gpt-oss): causal attention whose softmax has one more logit per head,
//     sinks[h], in each row's normalisation and no value for it:
//     o_i = sum_{j <= i} exp(s_ij - m) v_j / (exp(sinks_h - m) + sum_{j <= i} exp(s_ij - m)),
//     m = max(sinks_h, max_{j <= i} s_ij), s_ij = q_i . k_j / sqrt(D). A -inf sink adds nothing.
//     q/k/v/o [B, H, N, D], sinks [H]
template <typename T>
std::vector<T> sink_attention(const float *q, const float *k, const float *v, const float *sinks,
                              int B, int H, int N, int D) {
  std::vector<T> out((size_t)B * H * N * D);
  std::vector<T> w(N);
  const T scale = detail::invSqrt<T>(D);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      const size_t base = ((size_t)b * H + h) * N * D;
      const T sink = T(sinks[h]);
      for (int i = 0; i < N; ++i) {
        T mx = sink;
        for (int j = 0; j <= i; ++j) {
          T dot = 0;
          for (int d = 0; d < D; ++d)
            dot += T(q[base + (size_t)i * D + d]) * T(k[base + (size_t)j * D + d]);
          w[j] = dot * scale;
          mx = std::max(mx, w[j]);
        }
        T sum = sink == T(-INFINITY) ? T(0) : std::exp(sink - mx);
        for (int j = 0; j <= i; ++j)
          sum += (w[j] = std::exp(w[j] - mx));
        for (int e = 0; e < D; ++e) {
          T acc = 0;
          for (int j = 0; j <= i; ++j)
            acc += w[j] * T(v[base + (size_t)j * D + e]);
          out[base + (size_t)i * D + e] = acc / sum;
        }
      }
    }
  return out;
}

} // namespace attnc_ref
