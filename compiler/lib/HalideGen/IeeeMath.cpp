// IEEE-correct special values for exp, log, pow and erf around Halide's float math; tanh, sin
// and cos as vector code.
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

H::Expr isNan(const H::Expr &x) {
  return H::Internal::Call::make(H::Bool(x.type().lanes()), "is_nan_f32",
                                 {H::cast(H::Float(32, x.type().lanes()), x)},
                                 H::Internal::Call::PureExtern);
}

H::Expr ieeeExp(const H::Expr &x) {
  // Subnormal results: Halide builds 2^k in the exponent field, which cannot hold them, so they
  // are computed 2^24 larger and scaled down once (one rounding into the subnormal).
  H::Expr small = H::exp(x + kScaleLog) * (1.0f / kScale);
  return H::select(isNan(x), x,
                   H::select(x > kLogMaxFloat, H::Expr(kInf),
                             H::select(x < kLogMinSubnormal, H::Expr(0.0f),
                                       H::select(x < kLogMinNormal, small, H::exp(x)))));
}

namespace {
constexpr const char *kNonPositiveExp = "attnc_nonpositive_exp_f32";

// `code` of a variable bound to x (used several times, computed once).
template <typename F> H::Expr boundOnce(const H::Expr &x, F code) {
  const std::string name = H::Internal::unique_name("exp_arg");
  return H::Internal::Let::make(name, x, code(H::Internal::Variable::make(x.type(), name)));
}

// The code of nonPositiveExp(x) for a strict x, x bound to xv.
H::Expr nonPositiveExpCode(const H::Expr &xv) {
  const float kMagic = 12582912.0f;     // 1.5 * 2^23: adding it rounds to an integer
  const float kLog2e = 1.44269504f;     // 1 / ln 2
  const float kLn2Hi = 0.693359375f;    // ln 2's first 9 bits: n * kLn2Hi is exact
  const float kLn2Lo = -2.12194440e-4f; // ln 2 - kLn2Hi
  // Strict: the rounding trick and the exact first reduction step must not be reassociated.
  H::Expr t = H::strict_float(xv * kLog2e + kMagic);
  H::Expr n = H::strict_float(t - kMagic);
  H::Expr r1 = H::strict_float(xv - n * kLn2Hi);
  // From here Halide's flags: multiply-adds fuse.
  H::Expr r = r1 - n * kLn2Lo;
  H::Expr p = H::Expr(1.9875691500e-4f);
  for (float c :
       {1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f})
    p = p * r + c;
  H::Expr er = p * (r * r) + r + 1.0f;
  // t's low bits hold n (two's complement, |n| < 2^22); shifted into the exponent field and
  // biased. Unsigned, so that the shift's wrap-around is defined.
  const H::Expr u = H::reinterpret(H::UInt(32, xv.type().lanes()), t);
  H::Expr two_n =
      H::reinterpret(xv.type(), (u << 23) + H::Internal::make_const(u.type(), (uint64_t)127 << 23));
  H::Expr under = H::strict_float(xv < kLogMinNormal);
  return H::select(under, H::Expr(0.0f), er * two_n);
}
} // namespace

H::Expr nonPositiveExp(const H::Expr &x) {
  return H::Internal::Call::make(x.type(), kNonPositiveExp, {x}, H::Internal::Call::PureExtern);
}

H::Expr expandNonPositiveExp(const H::Expr &e, bool gpu) {
  struct Expand : H::Internal::IRMutator {
    bool gpu = false;
    using H::Internal::IRMutator::visit;
    H::Expr visit(const H::Internal::Call *c) override {
      if (c->name != kNonPositiveExp || c->call_type != H::Internal::Call::PureExtern)
        return H::Internal::IRMutator::visit(c);
      if (!gpu)
        return boundOnce(mutate(c->args[0]), nonPositiveExpCode);
      return boundOnce(mutate(c->args[0]),
                       [](const H::Expr &xv) { return H::select(isNan(xv), xv, H::exp(xv)); });
    }
  } expand;
  expand.gpu = gpu;
  return e.defined() ? expand.mutate(e) : e;
}

H::Expr ieeeLog(const H::Expr &x) {
  // A subnormal x is scaled into the normal range, where Halide's range reduction works.
  H::Expr sub = x < kMinNormal;
  H::Expr l =
      H::log(H::select(sub, x * kScale, x)) - H::select(sub, H::Expr(kScaleLog), H::Expr(0.0f));
  return H::select(isNan(x) || x == kInf, x,
                   H::select(x < 0.0f, H::Expr(kNaN), H::select(x == 0.0f, H::Expr(-kInf), l)));
}

H::Expr ieeeErf(const H::Expr &x) {
  // erf rounds to +-1 in float from |x| = 3.92 on; Halide's approximation is NaN far out, and
  // gives +0 for -0.
  return H::select(
      isNan(x) || x == 0.0f, x,
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
      H::select(isNan(x) || isNan(y), H::Expr(kNaN),
                H::select(x < 0.0f && ax != kInf && ay != kInf && !yInt, H::Expr(kNaN), value)));
}

H::Expr vecTanh(const H::Expr &x) {
  // A rational x P(x^2) / Q(x^2) of degrees 13 / 6, fitted to tanh on [-9, 9] for the least
  // maximal relative error (Lawson's iteration, P(0) = Q(0) = 1 so that it is x near 0: 7e-9 in
  // exact arithmetic, 0.56 ulp with the coefficients rounded to float); from |x| = 9 on tanh
  // rounds to +-1 and x is clamped there. Evaluated in float without fused multiply-adds
  // (strict float) it is within 5.8 ulp (2^-24 units near 1) over every float in [1e-6, 12]: an
  // odd function, exact at +-0 (the sign kept) and for tiny x (x^2 underflows, the ratio is x),
  // clamped to [-1, 1] (unclamped it reached 1 + 2^-22). No exp and no branch: Cephes' form
  // (a polynomial below 0.625, 1 - 2 / (exp(2|x|) + 1) above, both computed in vector code)
  // cost a soft-capped score 1.33x sdpa's time per visited key tile (attn-bench, AMD EPYC Zen 4,
  // 2026-11-29; this form: see docs/status.md).
  static const float kP[] = {1.0f,
                             0.130857646f,
                             0.00310587953f,
                             1.11734216e-05f,
                             -2.02968451e-08f,
                             5.30931826e-11f,
                             -8.56169587e-14f};
  static const float kQ[] = {1.0f, 0.46419093f, 0.0245029386f, 0.00025488867f};
  H::Expr c = H::clamp(x, -9.0f, 9.0f);
  H::Expr z = c * c;
  H::Expr p = H::Expr(kP[6]);
  for (int k = 5; k >= 0; --k)
    p = p * z + kP[k];
  H::Expr q = H::Expr(kQ[3]);
  for (int k = 2; k >= 0; --k)
    q = q * z + kQ[k];
  H::Expr t = H::clamp(c * p / q, -1.0f, 1.0f);
  return H::select(isNan(x), x, t);
}

namespace {
// sin (cosine = false) or cos of x. The argument is reduced in double precision: j = the
// integer nearest x * 2/pi, r = (x - j P1) - j P2 with pi/2 = P1 + P2 to 106 bits, so r's
// absolute error is about |x| 2^-53 (1e-8 at |x| = 1e8) where a float reduction loses all
// accuracy past |x| = 1e5 (rotary angles reach position * 1). Defined for |x| < 2^30. r in [-pi/4, pi/4] is rounded to
// float and evaluated with Cephes' sinf/cosf polynomials (1-2 ulp on that interval); the
// quadrant j mod 4 picks sin or cos of r and the sign. inf and NaN give NaN (inf - inf).
H::Expr sinCos(const H::Expr &x, bool cosine) {
  auto f64 = [](double v) {
    return H::Internal::make_const(H::Float(64), v);
  }; // Expr(double) is an f32
  H::Expr kTwoOverPi = f64(0.63661977236758134308);
  H::Expr kP1 = f64(1.5707963267948966);    // pi/2 rounded to double
  H::Expr kP2 = f64(6.123233995736766e-17); // pi/2 - kP1
  H::Expr xd = H::cast<double>(x);
  H::Expr j = H::round(xd * kTwoOverPi);
  H::Expr r = H::cast<float>((xd - j * kP1) - j * kP2);
  H::Expr q = H::cast<int32_t>(j - H::floor(j * f64(0.25)) * f64(4.0)); // j mod 4, in 0..3
  H::Expr z = r * r;
  H::Expr s = ((z * -1.9515295891e-4f + 8.3321608736e-3f) * z - 1.6666654611e-1f) * z * r + r;
  H::Expr c =
      ((z * 2.443315711809948e-5f - 1.388731625493765e-3f) * z + 4.166664568298827e-2f) * z * z -
      z * 0.5f + 1.0f;
  if (cosine)
    q = (q + 1) % 4; // cos x = sin(x + pi/2)
  H::Expr v = H::select(q % 2 == 0, s, c);
  v = H::select(q >= 2, negated(v), v);
  // From |x| = 2^30 on the reduction's error (|x| 2^-52) passes 2^-22 and soon exceeds 1: such
  // arguments give NaN rather than a value that looks right (no attention kernel comes near:
  // rotary angles stay below 1e7), docs/language.md §7.
  v = H::select(H::abs(x) >= 1073741824.0f, H::Expr(kNaN), v);
  // x - j P1 with j = 0 is +0 for x = -0; sin keeps the sign of a zero.
  return cosine ? v : H::select(x == 0.0f, x, v);
}
} // namespace

H::Expr vecSin(const H::Expr &x) { return sinCos(x, false); }
H::Expr vecCos(const H::Expr &x) { return sinCos(x, true); }

} // namespace attnc
