// Hand-written SDPA references (from the formula, not the DSL): fp64 ground truth and plain fp32.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace attnc_ref {

// O[b,h,i,:] = softmax_j(scale * Q[b,h,i,:] . K[b,h,j,:]) V[b,h,j,:], contiguous [B,H,N,D] tensors.
// T is the accumulation type: double for the ground truth, float for the "plain fp32" baseline
// whose error against double sets the numerics tests' tolerance.
template <typename T>
std::vector<T> sdpa(const float *q, const float *k, const float *v, int B, int H, int Nq, int Nk,
                    int D) {
  std::vector<T> out((size_t)B * H * Nq * D);
  std::vector<T> p(Nk);
  const T scale = T(1) / std::sqrt(T(D));
  for (int bh = 0; bh < B * H; ++bh) {
    const float *Q = q + (size_t)bh * Nq * D;
    const float *K = k + (size_t)bh * Nk * D;
    const float *V = v + (size_t)bh * Nk * D;
    T *O = out.data() + (size_t)bh * Nq * D;
    for (int i = 0; i < Nq; ++i) {
      T mx = -INFINITY;
      for (int j = 0; j < Nk; ++j) {
        T s = 0;
        for (int d = 0; d < D; ++d)
          s += T(Q[(size_t)i * D + d]) * T(K[(size_t)j * D + d]);
        p[j] = s * scale;
        mx = std::max(mx, p[j]);
      }
      T sum = 0;
      for (int j = 0; j < Nk; ++j)
        sum += (p[j] = std::exp(p[j] - mx));
      for (int e = 0; e < D; ++e) {
        T acc = 0;
        for (int j = 0; j < Nk; ++j)
          acc += p[j] * T(V[(size_t)j * D + e]);
        O[(size_t)i * D + e] = acc / sum;
      }
    }
  }
  return out;
}

template <typename A, typename B>
double maxAbsDiff(const std::vector<A> &a, const std::vector<B> &b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i)
    m = std::max(m, std::abs(double(a[i]) - double(b[i])));
  return m;
}

// The allowed error of an fp32 kernel: a small multiple of what a plain fp32 implementation of
// the same formula gets wrong against fp64 (as FlexAttention's tests do), with a floor for the
// rare case where the plain version happens to be exact.
inline double tolerance(double plainFp32Error) { return std::max(10.0 * plainFp32Error, 1e-6); }

} // namespace attnc_ref
