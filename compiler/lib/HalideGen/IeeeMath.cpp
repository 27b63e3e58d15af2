// IEEE-correct special values for exp, log, pow and erf around Halide's float math.
#include "IeeeMath.h"

#include <limits>

namespace attnc {
namespace {
namespace H = Halide;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kMinNormal = 1.17549435e-38f; // 2^-126
constexpr float kLogMaxFloat = 88.72284f;     // exp overflows above
constexpr float kLogMinNormal = -87.33655f;   // exp is subnormal below
constexpr float kLogMinSubnormal = -104.0f;   // exp rounds to 0 below (log(2^-150) = -103.97)
constexpr float kScaleLog = 16.635532f;       // 24 * ln 2: the shift that makes subnormals normal
constexpr float kScale = 16777216.0f;         // 2^24

// Halide negates a float as 0 - x, which is +0 for x = +-0; a product keeps the sign of zero.
H::Expr negated(const H::Expr &x) { return x * -1.0f; }
// The sign bit, which `x < 0` misses for -0.
H::Expr signBit(const H::Expr &x) { return H::reinterpret<int32_t>(x) < 0; }
} // namespace

H::Expr ieeeExp(const H::Expr &x) {
  // Subnormal results: Halide builds 2^k in the exponent field, which cannot hold them, so they
  // are computed 2^24 larger and scaled down once (one rounding into the subnormal).
  H::Expr small = H::exp(x + kScaleLog) * (1.0f / kScale);
  return H::select(H::is_nan(x), x,
                   H::select(x > kLogMaxFloat, H::Expr(kInf),
                             H::select(x < kLogMinSubnormal, H::Expr(0.0f),
                                       H::select(x < kLogMinNormal, small, H::exp(x)))));
}

H::Expr ieeeLog(const H::Expr &x) {
  // A subnormal x is scaled into the normal range, where Halide's range reduction works.
  H::Expr sub = x < kMinNormal;
  H::Expr l =
      H::log(H::select(sub, x * kScale, x)) - H::select(sub, H::Expr(kScaleLog), H::Expr(0.0f));
  return H::select(H::is_nan(x) || x == kInf, x,
                   H::select(x < 0.0f, H::Expr(kNaN), H::select(x == 0.0f, H::Expr(-kInf), l)));
}

H::Expr ieeeErf(const H::Expr &x) {
  // erf rounds to +-1 in float from |x| = 3.92 on; Halide's approximation is NaN far out, and
  // gives +0 for -0.
  return H::select(
      H::is_nan(x) || x == 0.0f, x,
      H::select(x >= 3.92f, H::Expr(1.0f),
                H::select(x <= -3.92f, H::Expr(-1.0f), H::erf(H::clamp(x, -4.0f, 4.0f)))));
}

H::Expr ieeePow(const H::Expr &x, const H::Expr &y) {
  // C99 powf (F.9.4.4) case by case; Halide's pow is used for finite, nonzero |x| and finite y
  // whose result is a normal float.
  H::Expr ax = H::abs(x), ay = H::abs(y);
  H::Expr yInt = H::floor(y) == y;
  // Floats from 2^24 on are even integers; below it an integer y fits an int32.
  H::Expr yOdd = ay < kScale && yInt && H::cast<int32_t>(H::select(ay < kScale, y, 0.0f)) % 2 == 1;
  // Halide's pow is wrong for a subnormal |x| and for results outside the normal range; there
  // x^y is exp(y log x).
  H::Expr t = y * ieeeLog(H::select(ax == 0.0f || ax == kInf, 1.0f, ax));
  H::Expr finite =
      H::select(t > kLogMaxFloat, H::Expr(kInf),
                H::select(t < kLogMinNormal || ax < kMinNormal, ieeeExp(t), H::pow(ax, y)));
  H::Expr magnitude = H::select(
      ay == kInf,
      H::select(ax == 1.0f, H::Expr(1.0f),
                H::select((ax < 1.0f) == (y > 0.0f), H::Expr(0.0f), H::Expr(kInf))),
      H::select(ax == 0.0f, H::select(y < 0.0f, H::Expr(kInf), H::Expr(0.0f)),
                H::select(ax == kInf, H::select(y < 0.0f, H::Expr(0.0f), H::Expr(kInf)), finite)));
  H::Expr value = H::select(signBit(x) && yOdd && ay != kInf, negated(magnitude), magnitude);
  return H::select(
      y == 0.0f || x == 1.0f, H::Expr(1.0f),
      H::select(H::is_nan(x) || H::is_nan(y), H::Expr(kNaN),
                H::select(x < 0.0f && ax != kInf && ay != kInf && !yInt, H::Expr(kNaN), value)));
}

} // namespace attnc
