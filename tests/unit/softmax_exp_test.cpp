// nonPositiveExp, the softmax's exp: its error against fp64 over x <= 0 and its special values.
#include "../../compiler/lib/HalideGen/IeeeMath.h"

#include <gtest/gtest.h>

#include <Halide.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace {

namespace H = Halide;

float fromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

// exp of each input as a kernel computes it: strict floats, then the call expanded, vectorized
// as the schedules vectorize it (16 lanes) with a scalar tail.
std::vector<float> run(const std::vector<float> &xs) {
  H::Buffer<float> in(const_cast<float *>(xs.data()), (int)xs.size());
  H::Var i("i");
  H::Func f("f");
  f(i) = attnc::expandNonPositiveExp(H::strict_float(attnc::nonPositiveExp(in(i))));
  f.vectorize(i, 16, H::TailStrategy::GuardWithIf);
  H::Buffer<float> out = f.realize({(int)xs.size()}, H::get_jit_target_from_environment());
  return std::vector<float>(out.data(), out.data() + xs.size());
}

// |got - exact| in units of the last place of the float nearest the exact value.
double ulps(float got, double exact) {
  int e;
  std::frexp(exact, &e);                // exact = m 2^e, m in [0.5, 1)
  double ulp = std::ldexp(1.0, e - 24); // float has 24 significant bits
  return std::fabs(got - exact) / ulp;
}

TEST(SoftmaxExp, WithinTwoUlpOverTheNormalRange) {
  // Every 97th float from -0 down to -87.33 (where exp(x) is still a normal float), and 0.
  std::vector<float> xs{0.0f};
  const uint32_t lo = 0x80000000u, hi = 0xC2AEAC4Fu; // -0 and -87.3365
  for (uint64_t b = lo; b <= hi; b += 97)
    xs.push_back(fromBits((uint32_t)b));
  xs.push_back(fromBits(hi));
  std::vector<float> ys = run(xs);
  double worst = 0;
  float worstX = 0;
  for (size_t k = 0; k < xs.size(); ++k) {
    double u = ulps(ys[k], std::exp((double)xs[k]));
    if (u > worst)
      worst = u, worstX = xs[k];
  }
  EXPECT_LE(worst, 2.0) << "at x = " << worstX;
  EXPECT_EQ(ys[0], 1.0f);
  EXPECT_EQ(ys[1], 1.0f); // -0
}

TEST(SoftmaxExp, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> xs{-inf,   std::numeric_limits<float>::quiet_NaN(), -87.34f, -100.0f,
                        -1e30f, -std::numeric_limits<float>::max(),      -1e-30f, -1.0f};
  std::vector<float> ys = run(xs);
  EXPECT_EQ(ys[0], 0.0f);
  EXPECT_TRUE(std::isnan(ys[1]));
  EXPECT_EQ(ys[2], 0.0f); // subnormal results flush to 0, as Halide's exp's do
  EXPECT_EQ(ys[3], 0.0f);
  EXPECT_EQ(ys[4], 0.0f);
  EXPECT_EQ(ys[5], 0.0f);
  EXPECT_EQ(ys[6], 1.0f);
  EXPECT_LE(ulps(ys[7], std::exp(-1.0)), 1.0);
}

} // namespace
