// bf16 and f16 values: their bits to and from float, and rounding a double to either, for callers that prepare or read kernel tensors.
//
// Header-only and free of dependencies, like tensor_type.h: the reference interpreter, attn-run,
// attn-bench and the tests use it, and none of them may depend on Halide (whose float16_t and
// bfloat16_t live in the compiler library) or on a C++23 <stdfloat> (GCC 12, Debian's, has none).
// Every conversion rounds to nearest, ties to even, as Halide's casts and PyTorch's do.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "attnc/tensor_type.h"

namespace attnc {

namespace detail {
struct Format16 {
  int digits;     // significand bits, the implicit one included
  int min_exp;    // exponent of the smallest normal number
  double largest; // the largest finite value
};
inline Format16 format16(DType t) {
  if (t == DType::F16)
    return {11, -14, 65504.0};
  return {8, -126, std::ldexp(255.0, 120)}; // bf16: f32's exponent range, 8 digits
}
} // namespace detail

// `x` rounded to the nearest value of `t` (BF16 or F16; F32 rounds to float, I32 returns `x`),
// ties to even, values past the largest finite one to infinity, NaN kept. Rounds once, from the
// exact double, where going through float first could round twice.
inline double round_to_dtype(double x, DType t) {
  if (t == DType::F32)
    return (double)(float)x;
  if ((t != DType::BF16 && t != DType::F16) || !std::isfinite(x) || x == 0)
    return x;
  const detail::Format16 f = detail::format16(t);
  int e = std::ilogb(x);
  if (e < f.min_exp)
    e = f.min_exp; // subnormal: the quantum stays that of the smallest normal binade
  const double quantum = std::ldexp(1.0, e - (f.digits - 1));
  const double r = std::nearbyint(x / quantum) * quantum; // exact scaling; ties to even
  if (std::fabs(r) > f.largest)
    return std::copysign(INFINITY, x);
  return r;
}

inline float bf16_bits_to_float(uint16_t b) {
  const uint32_t u = (uint32_t)b << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t float_to_bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f))
    return (uint16_t)((u >> 16) | 0x40); // a quiet NaN of the same sign
  u += 0x7fff + ((u >> 16) & 1);         // ties to even; overflow carries into infinity
  return (uint16_t)(u >> 16);
}

inline float f16_bits_to_float(uint16_t b) {
  const int exp = (b >> 10) & 0x1f, mant = b & 0x3ff;
  double v;
  if (exp == 0x1f)
    v = mant ? NAN : INFINITY;
  else if (exp == 0)
    v = std::ldexp((double)mant, -24);
  else
    v = std::ldexp((double)(mant | 0x400), exp - 25);
  return (float)((b & 0x8000) ? -v : v);
}

inline uint16_t float_to_f16_bits(float f) {
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  if (std::isnan(f))
    return sign | 0x7e00;
  const double r = std::fabs(round_to_dtype(f, DType::F16));
  if (std::isinf(r))
    return sign | 0x7c00;
  if (r < std::ldexp(1.0, -14)) // subnormal or zero: multiples of 2^-24
    return sign | (uint16_t)(r * std::ldexp(1.0, 24));
  const int e = std::ilogb(r);
  const uint16_t mant = (uint16_t)(std::ldexp(r, 10 - e) - 1024);
  return sign | (uint16_t)((e + 15) << 10) | mant;
}

// The value of a two-byte element of type `t` (BF16 or F16), and the element of a float.
inline float half_bits_to_float(uint16_t b, DType t) {
  return t == DType::F16 ? f16_bits_to_float(b) : bf16_bits_to_float(b);
}
inline uint16_t float_to_half_bits(float f, DType t) {
  return t == DType::F16 ? float_to_f16_bits(f) : float_to_bf16_bits(f);
}

} // namespace attnc
