// Numerics of the AOT-compiled sliding-window dilated attention variants (dsl/variants/swda.attn:
// `swda`, zero-padded keys/values as nn.Unfold, and `swda_natten`, out-of-range positions excluded)
// against the hand-written fp64 reference (reference/window_ref.h) and the fp64 DSL interpreter.
//
// Each kernel is compiled for several (w, r, hd) with -D overrides (tests/CMakeLists.txt: library
// window_<kernel>_w<w>_r<r>_hd<hd>); the interpreter loads swda.attn with the same defines. Every
// check runs the same inputs through (1) the AOT kernel (fp32, output pre-filled with NaN), (2) the
// reference in fp64 (ground truth) and plain fp32 (which sets the tolerance, attnc_ref::tolerance)
// and (3) the interpreter; (1) and (3) must agree with (2) within the tolerance and be finite.
#include "window_swda_natten_w3_r1_hd32.attnc.h"
#include "window_swda_natten_w3_r2_hd4.attnc.h"
#include "window_swda_natten_w3_r5_hd4.attnc.h"
#include "window_swda_natten_w5_r3_hd8.attnc.h"
#include "window_swda_w3_r1_hd32.attnc.h"
#include "window_swda_w3_r2_hd4.attnc.h"
#include "window_swda_w3_r5_hd4.attnc.h"
#include "window_swda_w5_r3_hd8.attnc.h"

#include "attnc/dsl/FrontEnd.h"
#include "attnc/dsl/Interpreter.h"
#include "numerics/numerics_support.h"
#include "reference/window_ref.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <string>

#ifndef ATTNC_VARIANTS_DIR
#error "ATTNC_VARIANTS_DIR must name dsl/variants"
#endif

namespace {

// --- configurations ----------------------------------------------------------------------------

struct Config {
  int w, r, hd;
  const attnc::KernelDesc &(*swda)();
  const attnc::KernelDesc &(*natten)();
};

const Config kConfigs[] = {
    {3, 1, 32, attnc_kernels::window_swda_w3_r1_hd32,
     attnc_kernels::window_swda_natten_w3_r1_hd32}, // the defaults
    {3, 2, 4, attnc_kernels::window_swda_w3_r2_hd4, attnc_kernels::window_swda_natten_w3_r2_hd4},
    {5, 3, 8, attnc_kernels::window_swda_w5_r3_hd8, attnc_kernels::window_swda_natten_w5_r3_hd8},
    {3, 5, 4, attnc_kernels::window_swda_w3_r5_hd4, attnc_kernels::window_swda_natten_w3_r5_hd4},
};

std::string configLabel(const Config &c, bool exclude) {
  std::ostringstream os;
  os << (exclude ? "swda_natten" : "swda") << " w=" << c.w << " r=" << c.r << " hd=" << c.hd;
  return os.str();
}

struct Shape {
  int B, C, Y, X;
};

std::string shapeLabel(const Shape &s) {
  std::ostringstream os;
  os << "(" << s.B << "," << s.C << "," << s.Y << "," << s.X << ")";
  return os.str();
}

// --- inputs ------------------------------------------------------------------------------------

std::vector<float> randn(size_t n, unsigned seed, float mean = 0.f, float scale = 1.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(mean, scale);
  std::vector<float> x(n);
  for (float &e : x)
    e = dist(rng);
  return x;
}

// --- the fp64 DSL interpreter ------------------------------------------------------------------

// Kernel `kernel` of swda.attn checked with -D w=.. r=.. hd=...
const attnc::dsl::Kernel *interpreterKernel(const Config &c, const std::string &kernel,
                                            std::string *err) {
  return attnc_test::interpreterKernel(
      "swda.attn", kernel,
      {{"w", std::to_string(c.w)}, {"r", std::to_string(c.r)}, {"hd", std::to_string(c.hd)}}, err);
}

// --- the common check --------------------------------------------------------------------------

using attnc_test::Outcome;

// swda (or swda_natten) of configuration c on q, k, v [B, C, Y, X] against the seed's formula in
// fp64/fp32 and the interpreter (attnc_test::checkKernel).
Outcome check(const Config &c, bool exclude, const Shape &s, const std::vector<float> &q,
              const std::vector<float> &k, const std::vector<float> &v,
              const std::string &what = "") {
  const std::vector<int64_t> inShape = {s.B, s.C, s.Y, s.X}, outShape = {s.B, s.Y, s.X, s.C};
  std::vector<attnc_test::In> ins(3);
  const std::vector<float> *src[3] = {&q, &k, &v};
  for (int i = 0; i < 3; ++i)
    ins[i].shape = inShape, ins[i].f = *src[i];
  std::string err;
  const attnc::dsl::Kernel *kern = interpreterKernel(c, exclude ? "swda_natten" : "swda", &err);
  return attnc_test::checkKernel(
      exclude ? c.natten() : c.swda(), kern, err, std::move(ins), outShape,
      [&](auto tag) {
        using T = decltype(tag);
        return attnc_ref::swda<T>(q.data(), k.data(), v.data(), s.B, s.C, s.Y, s.X, c.w, c.r, c.hd,
                                  exclude);
      },
      configLabel(c, exclude) + " " + shapeLabel(s) + what);
}

// --- 1. random inputs, many shapes -------------------------------------------------------------

// Shapes per configuration: maps not multiples of 8/16 (7x9, 13x5), a 1x1 map, a map smaller
// than the window's span (w-1)*r+1 (so no pixel is interior), a dilation larger than a third of the
// map, and one map with an interior.
std::vector<Shape> shapesFor(const Config &c) {
  const int hd = c.hd;
  std::vector<Shape> s = {{2, 2 * hd, 7, 9}, {1, hd, 13, 5}, {1, hd, 1, 1}};
  switch (c.r) {
  case 1:
    s.push_back({2, hd, 2, 2});
    s.push_back({1, 2 * hd, 16, 16});
    break; // 2x2 < 3x3
  case 2:
    s.push_back({1, 2 * hd, 4, 3});
    s.push_back({2, 4 * hd, 16, 15});
    break; // r=2 > 4/3, 3/3
  case 3:
    s.push_back({1, 2 * hd, 3, 4});
    s.push_back({1, 2 * hd, 16, 16});
    break; // span 13
  default:
    s.push_back({1, 2 * hd, 2, 3});
    s.push_back({1, 2 * hd, 16, 11});
    break; // r=5 > 9/3, 13/3
  }
  return s;
}

TEST(WindowNumerics, RandomInputs) {
  unsigned seed = 1000;
  for (const Config &c : kConfigs)
    for (const Shape &s : shapesFor(c)) {
      const size_t n = (size_t)s.B * s.C * s.Y * s.X;
      const auto q = randn(n, seed + 1), k = randn(n, seed + 2), v = randn(n, seed + 3);
      seed += 10;
      for (bool exclude : {false, true})
        check(c, exclude, s, q, k, v);
    }
}

// Scores of O(10): q.k / sqrt(hd) ~ N(0, 10^2); softmax nearly one-hot, still finite and accurate.
TEST(WindowNumerics, LargeScores) {
  unsigned seed = 2000;
  for (const Config &c : kConfigs) {
    const Shape s = {1, 2 * c.hd, 9, 7};
    const size_t n = (size_t)s.B * s.C * s.Y * s.X;
    const float a = std::sqrt(10.f);
    const auto q = randn(n, seed + 1, 0.f, a), k = randn(n, seed + 2, 0.f, a),
               v = randn(n, seed + 3);
    seed += 10;
    for (bool exclude : {false, true})
      check(c, exclude, s, q, k, v, " scores ~10");
  }
}

// --- 2. borders: zero padding vs exclusion -----------------------------------------------------

// q = a (1 + .1 n), k = sign * a (1 + .1 n'), v = 1 + .1 n'': every in-range score has the sign
// `sign` and magnitude ~6. With sign < 0 the zero-padded keys (score 0) dominate `swda`'s softmax
// at the borders, pulling its output towards 0, while `swda_natten` averages values ~1; with
// sign > 0 they get weight ~e^-6 and the two differ only slightly. In the interior (every window
// position in range) the two kernels are the same function.
void checkBorders(const Config &c, float sign, unsigned seed) {
  const Shape s = {2, 2 * c.hd, 16, 14};
  const size_t n = (size_t)s.B * s.C * s.Y * s.X;
  const float a = std::sqrt(6.f / std::sqrt((float)c.hd));
  auto q = randn(n, seed + 1, 1.f, .1f), k = randn(n, seed + 2, 1.f, .1f),
       v = randn(n, seed + 3, 1.f, .1f);
  for (float &e : q)
    e *= a;
  for (float &e : k)
    e *= sign * a;
  const std::string what = sign < 0 ? " padding dominates" : " padding negligible";
  const Outcome z = check(c, false, s, q, k, v, what), x = check(c, true, s, q, k, v, what);
  const std::string label = "w=" + std::to_string(c.w) + " r=" + std::to_string(c.r) +
                            " hd=" + std::to_string(c.hd) + what;

  size_t border = 0, interior = 0;
  double minBorderDiff = INFINITY, maxInteriorDiff = 0;
  for (int b = 0; b < s.B; ++b)
    for (int y = 0; y < s.Y; ++y)
      for (int xx = 0; xx < s.X; ++xx) {
        const bool in = attnc_ref::windowInterior(y, xx, s.Y, s.X, c.w, c.r);
        (in ? interior : border) += 1;
        for (int ch = 0; ch < s.C; ++ch) {
          const size_t e = (((size_t)b * s.Y + y) * s.X + xx) * s.C + ch;
          const double refDiff = z.ref[e] - x.ref[e];
          if (in) {
            // Same function in the interior: the references agree exactly, the kernels within tolerance.
            EXPECT_EQ(refDiff, 0.0)
                << label << ": references differ at interior pixel (" << y << "," << xx << ")";
            if (z.ran && x.ran) {
              const double d = std::abs((double)z.aot[e] - (double)x.aot[e]);
              maxInteriorDiff = std::max(maxInteriorDiff, d);
              EXPECT_LE(d, z.tol + x.tol)
                  << label << ": swda and swda_natten differ at interior pixel (" << y << "," << xx
                  << ") channel " << ch;
            }
          } else {
            // Border: the padding changes the result, by a lot when it dominates.
            const double want = sign < 0 ? .5 : 1e-5;
            EXPECT_GT(std::abs(refDiff), want)
                << label << ": references agree at border pixel (" << y << "," << xx << ")";
            if (z.ran && x.ran) {
              const double d = (double)z.aot[e] - (double)x.aot[e];
              minBorderDiff = std::min(minBorderDiff, std::abs(d));
              EXPECT_GT(std::abs(d), want)
                  << label << ": kernels agree at border pixel (" << y << "," << xx << ")";
              EXPECT_LE(std::abs(d - refDiff), z.tol + x.tol)
                  << label << ": swda - swda_natten at border pixel (" << y << "," << xx << ")";
            }
          }
        }
      }
  EXPECT_GT(border, 0u) << label;
  EXPECT_GT(interior, 0u) << label;
  std::printf(
      "[ borders  ] %-52s %zu border px: min |swda-natten| %.3g; %zu interior px: max %.3g\n",
      label.c_str(), border, minBorderDiff, interior, maxInteriorDiff);
}

TEST(WindowNumerics, BordersPaddingDominates) {
  unsigned seed = 3000;
  for (const Config &c : kConfigs)
    checkBorders(c, -1.f, seed += 10);
}

TEST(WindowNumerics, BordersPaddingNegligible) {
  unsigned seed = 4000;
  for (const Config &c : kConfigs)
    checkBorders(c, 1.f, seed += 10);
}

// --- 3. corners and edges in closed form -------------------------------------------------------

// k = 0 makes every score 0 (in range or padded) and v[b, ch, :, :] = c_ch = (ch + 1) / C is
// constant per channel, so `swda` outputs c_ch * n_in / w^2 (n_in = in-range window positions: 4/9
// at a corner of a 3x3 window, 6/9 on an edge) and `swda_natten` outputs c_ch everywhere.
// (Values stay O(1) so that the tolerance floor of 1e-6 is above an fp32 ulp.)
TEST(WindowNumerics, ClosedFormCornersAndEdges) {
  for (const Config &c : kConfigs)
    for (Shape s : {Shape{1, 2 * c.hd, 16, 13}, Shape{1, c.hd, 5, 3}, Shape{1, c.hd, 1, 1}}) {
      const size_t plane = (size_t)s.Y * s.X, n = (size_t)s.B * s.C * plane;
      std::vector<float> q = randn(n, 5000), k(n, 0.f), v(n);
      std::vector<float> cch(s.C);
      for (int ch = 0; ch < s.C; ++ch)
        cch[ch] = (float)(ch + 1) / (float)s.C;
      for (size_t e = 0; e < n; ++e)
        v[e] = cch[(e / plane) % s.C];
      for (bool exclude : {false, true}) {
        const Outcome o = check(c, exclude, s, q, k, v, " closed form");
        const std::string label = configLabel(c, exclude) + " " + shapeLabel(s) + " closed form";
        // The corners explicitly, then every pixel.
        for (int y : {0, s.Y - 1})
          for (int x : {0, s.X - 1}) {
            const int ny = std::min(y / c.r, c.w / 2) + std::min((s.Y - 1 - y) / c.r, c.w / 2) + 1;
            const int nx = std::min(x / c.r, c.w / 2) + std::min((s.X - 1 - x) / c.r, c.w / 2) + 1;
            EXPECT_EQ(attnc_ref::windowInRange(y, x, s.Y, s.X, c.w, c.r), ny * nx) << label;
          }
        double maxErr = 0;
        for (int y = 0; y < s.Y; ++y)
          for (int x = 0; x < s.X; ++x)
            for (int ch = 0; ch < s.C; ++ch) {
              const double frac =
                  exclude
                      ? 1.0
                      : (double)attnc_ref::windowInRange(y, x, s.Y, s.X, c.w, c.r) / (c.w * c.w);
              const double want = (double)cch[ch] * frac;
              const size_t e = ((size_t)y * s.X + x) * s.C + ch;
              EXPECT_NEAR(o.ref[e], want, 1e-12)
                  << label << " (reference) at (" << y << "," << x << ")";
              if (o.ran) {
                maxErr = std::max(maxErr, std::abs(o.aot[e] - want) / cch[ch]);
                EXPECT_NEAR(o.aot[e], want, 1e-6 * cch[ch])
                    << label << " (AOT) at (" << y << "," << x << ")";
              }
              if (!o.interp.empty())
                EXPECT_NEAR(o.interp[e], want, 1e-12)
                    << label << " (interp) at (" << y << "," << x << ")";
            }
        std::printf("[ closed   ] %-52s max rel err %.3g\n", label.c_str(), maxErr);
      }
    }
}

} // namespace
