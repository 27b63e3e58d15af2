// Hand-written reference for DAT's deformable attention (dsl/variants/dat_attn.attn), written from
// DAttentionBaseline.forward (DAT, models/dat_blocks.py) with use_pe=True, dwc_pe=False,
// fixed_pe=False, log_cpb=False, no_off=False and offset_range_factor >= 0, not from the DSL.
//
// Both samplings follow F.grid_sample(mode='bilinear', padding_mode='zeros', align_corners=True)
// as ATen's CPU kernel computes it: a normalised coordinate g of a map of `size` pixels is the pixel
// ((g + 1) / 2) * (size - 1); with ix_nw = floor(ix) (iy likewise) the corners weigh
//   nw = (ix_nw + 1 - ix) (iy_nw + 1 - iy), ne = (ix - ix_nw) (iy_nw + 1 - iy),
//   sw = (ix_nw + 1 - ix) (iy - iy_nw),     se = (ix - ix_nw) (iy - iy_nw),
// and a corner outside the map contributes 0.
//
// x and the output are channels-last [B, H, W, C] (DAT is NCHW); the weights are the kernel's
// views (dat_attn.attn's header). T = double is the ground truth, T = float a plain fp32
// implementation whose error against double sets the numerics tests' tolerance.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace attnc_ref {

// DAttentionBaseline's constants: stride, ksize, offset_range_factor, n_heads, n_groups.
struct DatConfig {
  int stride, ksize;
  double orf;
  int heads, groups;
  int pad() const { return ksize != stride ? ksize / 2 : 0; }
  // conv_offset's output size along a side of n pixels (Hk for n = H, Wk for n = W).
  int keys(int n) const { return (n + 2 * pad() - ksize) / stride + 1; }
};

// The weights in dat_attn's order and views: w_q/w_k/w_v/w_o [C, C] (out, in) with biases [C];
// w_dw [Cg, ksize, ksize], b_dw, ln_g, ln_b [Cg], w_off [2, Cg]; rpe [heads, 2H - 1, 2W - 1].
struct DatWeights {
  const float *w_q, *b_q, *w_dw, *b_dw, *ln_g, *ln_b, *w_off, *w_k, *b_k, *w_v, *b_v, *rpe, *w_o,
      *b_o;
};

namespace dat_detail {

// grid_sample (bilinear, zeros, align_corners=True) of the Hs x Ws map at(y, x) at normalised (gy, gx).
template <typename T, typename At> T gridSampleAC(At at, int Hs, int Ws, T gy, T gx) {
  const T ix = ((gx + T(1)) / T(2)) * T(Ws - 1), iy = ((gy + T(1)) / T(2)) * T(Hs - 1);
  const T fx = std::floor(ix), fy = std::floor(iy);
  const int64_t x0 = (int64_t)fx, y0 = (int64_t)fy;
  const T e = fx + T(1) - ix, w = ix - fx, s = iy - fy, n = fy + T(1) - iy;
  const int64_t cy[4] = {y0, y0, y0 + 1, y0 + 1}, cx[4] = {x0, x0 + 1, x0, x0 + 1};
  const T cw[4] = {e * n, w * n, e * s, w * s};
  T acc = 0;
  for (int c = 0; c < 4; ++c)
    if (cy[c] >= 0 && cy[c] < Hs && cx[c] >= 0 && cx[c] < Ws)
      acc += cw[c] * at((int)cy[c], (int)cx[c]);
  return acc;
}

// A 1x1 convolution on channels-last rows: out[i, o] = b[o] + sum_c in[i, c] w[o, c] (b may be null).
template <typename T, typename Src>
std::vector<T> conv1x1(const Src *in, size_t rows, int Cin, const float *w, const float *b,
                       int Cout) {
  std::vector<T> out(rows * Cout);
  for (size_t i = 0; i < rows; ++i)
    for (int o = 0; o < Cout; ++o) {
      T acc = b ? T(b[o]) : T(0);
      for (int c = 0; c < Cin; ++c)
        acc += T(in[i * Cin + c]) * T(w[(size_t)o * Cin + c]);
      out[i * Cout + o] = acc;
    }
  return out;
}

} // namespace dat_detail

// DAttentionBaseline.forward on x [B, H, W, C] -> [B, H, W, C]. With posOut, also returns the
// sampling positions pos [B, groups, Hk, Wk, 2] (normalised (y, x), DAT's `pos`).
template <typename T>
std::vector<T> datAttn(const float *x, const DatWeights &wt, int B, int H, int W, int C,
                       const DatConfig &cfg, std::vector<T> *posOut = nullptr) {
  const int G = cfg.groups, NH = cfg.heads, Cg = C / G, hg = NH / G, hc = C / NH, K = cfg.ksize,
            r = cfg.stride;
  const int Hk = cfg.keys(H), Wk = cfg.keys(W), Ns = Hk * Wk, pad = cfg.pad();
  const size_t HW = (size_t)H * W;

  // q = proj_q(x)
  const std::vector<T> q = dat_detail::conv1x1<T>(x, B * HW, C, wt.w_q, wt.b_q, C);

  // offset = conv_offset(q of group g); pos = tanh(offset) * (1 / (Hk - 1), 1 / (Wk - 1)) * orf + reference.
  std::vector<T> pos((size_t)B * G * Ns * 2);
  std::vector<T> dw(Cg);
  const T range[2] = {T(1) / (T(Hk) - T(1)), T(1) / (T(Wk) - T(1))};
  for (int b = 0; b < B; ++b)
    for (int g = 0; g < G; ++g)
      for (int ki = 0; ki < Hk; ++ki)
        for (int kj = 0; kj < Wk; ++kj) {
          for (int c = 0; c < Cg; ++c) { // depthwise K x K, stride r, zero padding
            T acc = T(wt.b_dw[c]);
            for (int u = 0; u < K; ++u)
              for (int t = 0; t < K; ++t) {
                const int y = ki * r + u - pad, xx = kj * r + t - pad;
                if (y < 0 || y >= H || xx < 0 || xx >= W)
                  continue;
                acc += T(wt.w_dw[((size_t)c * K + u) * K + t]) *
                       q[(((size_t)b * H + y) * W + xx) * C + g * Cg + c];
              }
            dw[c] = acc;
          }
          T mu = 0, var = 0; // LayerNormProxy: nn.LayerNorm over the channels, biased variance
          for (int c = 0; c < Cg; ++c)
            mu += dw[c];
          mu /= T(Cg);
          for (int c = 0; c < Cg; ++c)
            var += (dw[c] - mu) * (dw[c] - mu);
          var /= T(Cg);
          const T inv = T(1) / std::sqrt(var + T(1e-5));
          T off[2] = {0, 0};
          for (int c = 0; c < Cg; ++c) {
            const T n = (dw[c] - mu) * inv * T(wt.ln_g[c]) + T(wt.ln_b[c]);
            const T a = T(0.5) * n * (T(1) + std::erf(n / std::sqrt(T(2)))); // exact GELU
            for (int p = 0; p < 2; ++p)
              off[p] += T(wt.w_off[(size_t)p * Cg + c]) * a;
          }
          // _get_ref_points: linspace(0.5, Hk - 0.5, Hk) / (Hk - 1) * 2 - 1 (x likewise).
          const T ref[2] = {(T(ki) + T(0.5)) / (T(Hk) - T(1)) * T(2) - T(1),
                            (T(kj) + T(0.5)) / (T(Wk) - T(1)) * T(2) - T(1)};
          T *ps = &pos[((((size_t)b * G + g) * Hk + ki) * Wk + kj) * 2];
          for (int p = 0; p < 2; ++p)
            ps[p] = std::tanh(off[p]) * range[p] * T(cfg.orf) + ref[p];
        }

  // x_sampled[b, n, g * Cg + c] = grid_sample(x of group g, pos[..., (1, 0)]).
  std::vector<T> xs((size_t)B * Ns * C);
  for (int b = 0; b < B; ++b)
    for (int g = 0; g < G; ++g)
      for (int n = 0; n < Ns; ++n) {
        const T *ps = &pos[(((size_t)b * G + g) * Ns + n) * 2];
        for (int c = 0; c < Cg; ++c) {
          const int ch = g * Cg + c;
          auto at = [&](int y, int xx) { return T(x[(((size_t)b * H + y) * W + xx) * C + ch]); };
          xs[((size_t)b * Ns + n) * C + ch] = dat_detail::gridSampleAC<T>(at, H, W, ps[0], ps[1]);
        }
      }
  const std::vector<T> k = dat_detail::conv1x1<T>(xs.data(), (size_t)B * Ns, C, wt.w_k, wt.b_k, C);
  const std::vector<T> v = dat_detail::conv1x1<T>(xs.data(), (size_t)B * Ns, C, wt.w_v, wt.b_v, C);

  // Per head: scores * n_head_channels^-0.5 + rpe bias at (q_grid - pos) / 2, softmax over the keys, times v.
  const T scale = T(std::pow((double)hc, -0.5));
  const int Ty = 2 * H - 1, Tx = 2 * W - 1;
  std::vector<T> att((size_t)B * HW * C), s(Ns);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h) {
      const int g = h / hg;
      const float *table = wt.rpe + (size_t)h * Ty * Tx;
      auto at = [&](int y, int xx) { return T(table[(size_t)y * Tx + xx]); };
      for (int i = 0; i < H; ++i)
        for (int j = 0; j < W; ++j) {
          const T *qv = &q[(((size_t)b * H + i) * W + j) * C + h * hc];
          // _get_q_grid: arange(0, H) / (H - 1) * 2 - 1 (x likewise).
          const T qy = T(i) / (T(H) - T(1)) * T(2) - T(1), qx = T(j) / (T(W) - T(1)) * T(2) - T(1);
          T mx = -INFINITY;
          for (int n = 0; n < Ns; ++n) {
            const T *kv = &k[((size_t)b * Ns + n) * C + h * hc];
            T dot = 0;
            for (int e = 0; e < hc; ++e)
              dot += qv[e] * kv[e];
            const T *ps = &pos[(((size_t)b * G + g) * Ns + n) * 2];
            const T bias = dat_detail::gridSampleAC<T>(at, Ty, Tx, (qy - ps[0]) * T(0.5),
                                                       (qx - ps[1]) * T(0.5));
            s[n] = dot * scale + bias;
            mx = std::max(mx, s[n]);
          }
          T sum = 0;
          for (int n = 0; n < Ns; ++n)
            sum += (s[n] = std::exp(s[n] - mx));
          T *o = &att[(((size_t)b * H + i) * W + j) * C + h * hc];
          for (int e = 0; e < hc; ++e) {
            T acc = 0;
            for (int n = 0; n < Ns; ++n)
              acc += s[n] * v[((size_t)b * Ns + n) * C + h * hc + e];
            o[e] = acc / sum;
          }
        }
    }
  if (posOut)
    *posOut = pos;
  return dat_detail::conv1x1<T>(att.data(), B * HW, C, wt.w_o, wt.b_o, C); // proj_out
}

} // namespace attnc_ref
