// Numerics of the AOT-compiled DAT deformable attention (dsl/variants/dat_attn.attn: `dat_attn`,
// DAttentionBaseline.forward) against the hand-written fp64 reference (reference/dat_ref.h,
// grid_sample's bilinear / zero-padding / align_corners=True arithmetic) and the fp64 interpreter.
//
// Two libraries (tests/CMakeLists.txt): dat_attn_default with the file's constants (stride 1,
// ksize 5, orf 2, 12 heads, 3 groups) and dat_attn_r2_k3_h4_g2 (-D r=2 ks=3 orf=3 nh=4 ng=2); the
// interpreter loads the file with the same defines. Every check runs the same inputs through (1)
// the AOT kernel (fp32, output pre-filled with NaN), (2) the reference in fp64 (ground truth) and
// plain fp32 (which sets the tolerance, attnc_ref::tolerance) and (3) the interpreter; (1) and (3)
// must agree with (2) within the tolerance and be finite.
#include "dat_attn_default.attnc.h"
#include "dat_attn_r2_k3_h4_g2.attnc.h"

#include "attnc/dsl/FrontEnd.h"
#include "attnc/dsl/Interpreter.h"
#include "numerics/numerics_support.h"
#include "reference/dat_ref.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#ifndef ATTNC_VARIANTS_DIR
#error "ATTNC_VARIANTS_DIR must name dsl/variants"
#endif

namespace {

using attnc_test::In;
using attnc_test::numel;
using attnc_test::Outcome;
using attnc_test::randn;

// --- configurations ----------------------------------------------------------------------------

struct Config {
  attnc_ref::DatConfig dat;
  attnc_test::Defines defines; // the -D the library was compiled with (empty: the file's constants)
  const attnc::KernelDesc &(*desc)();
};

const Config kDefault = {{1, 5, 2.0, 12, 3}, {}, attnc_kernels::dat_attn_default};
const Config kStride2 = {{2, 3, 3.0, 4, 2},
                         {{"r", "2"}, {"ks", "3"}, {"orf", "3"}, {"nh", "4"}, {"ng", "2"}},
                         attnc_kernels::dat_attn_r2_k3_h4_g2};

struct Shape {
  int B, Y, X, C;
};

// Maps that are not square, offset maps of 2 to 7 rows, one and several heads per group, head
// sizes 1 to 4 (C = 12 with 12 heads).
std::vector<Shape> shapes(const Config &c) {
  if (c.desc == kDefault.desc)
    return {{1, 6, 6, 24}, {2, 5, 7, 12}};
  return {{2, 6, 7, 8}, {1, 5, 5, 16}, {1, 9, 4, 8}};
}

std::string label(const Config &c, const Shape &s, const std::string &what) {
  std::ostringstream os;
  os << "dat_attn r=" << c.dat.stride << " ks=" << c.dat.ksize << " orf=" << c.dat.orf
     << " nh=" << c.dat.heads << " ng=" << c.dat.groups << " (" << s.B << "," << s.Y << "," << s.X
     << "," << s.C << ") Hk x Wk " << c.dat.keys(s.Y) << "x" << c.dat.keys(s.X) << what;
  return os.str();
}

// --- inputs ------------------------------------------------------------------------------------

enum { kX, kWq, kBq, kWdw, kBdw, kLnG, kLnB, kWoff, kWk, kBk, kWv, kBv, kRpe, kWo, kBo };

// The 15 inputs in the kernel's order: x ~ N(0, 1), 1x1-conv weights ~ N(0, 1/C), depthwise
// weights ~ N(0, .5^2), LayerNorm gain ~ N(1, .1^2), w_off ~ N(0, offScale^2), rpe ~ N(0, 1),
// biases ~ N(0, .1^2).
std::vector<In> inputs(const Config &c, const Shape &s, unsigned seed, float offScale = 1.f) {
  const int C = s.C, Cg = C / c.dat.groups, K = c.dat.ksize;
  const float ws = 1.f / std::sqrt((float)C);
  return {randn({s.B, s.Y, s.X, C}, seed + 1),                       // x
          randn({C, C}, seed + 2, 0.f, ws),                          // w_q
          randn({C}, seed + 3, 0.f, .1f),                            // b_q
          randn({Cg, K, K}, seed + 4, 0.f, .5f),                     // w_dw
          randn({Cg}, seed + 5, 0.f, .1f),                           // b_dw
          randn({Cg}, seed + 6, 1.f, .1f),                           // ln_g
          randn({Cg}, seed + 7, 0.f, .1f),                           // ln_b
          randn({2, Cg}, seed + 8, 0.f, offScale),                   // w_off
          randn({C, C}, seed + 9, 0.f, ws),                          // w_k
          randn({C}, seed + 10, 0.f, .1f),                           // b_k
          randn({C, C}, seed + 11, 0.f, ws),                         // w_v
          randn({C}, seed + 12, 0.f, .1f),                           // b_v
          randn({c.dat.heads, 2 * s.Y - 1, 2 * s.X - 1}, seed + 13), // rpe
          randn({C, C}, seed + 14, 0.f, ws),                         // w_o
          randn({C}, seed + 15, 0.f, .1f)};                          // b_o
}

attnc_ref::DatWeights weights(const std::vector<In> &in) {
  return {in[kWq].fp(),  in[kBq].fp(),   in[kWdw].fp(), in[kBdw].fp(), in[kLnG].fp(),
          in[kLnB].fp(), in[kWoff].fp(), in[kWk].fp(),  in[kBk].fp(),  in[kWv].fp(),
          in[kBv].fp(),  in[kRpe].fp(),  in[kWo].fp(),  in[kBo].fp()};
}

// --- the common check --------------------------------------------------------------------------

Outcome check(const Config &c, const Shape &s, const std::vector<In> &in, const std::string &what) {
  std::string err;
  const attnc::dsl::Kernel *k =
      attnc_test::interpreterKernel("dat_attn.attn", "dat_attn", c.defines, &err);
  return attnc_test::checkKernel(
      c.desc(), k, err, in, {s.B, s.Y, s.X, s.C},
      [&](auto tag) {
        using T = decltype(tag);
        return attnc_ref::datAttn<T>(in[kX].fp(), weights(in), s.B, s.Y, s.X, s.C, c.dat);
      },
      label(c, s, what));
}

// --- tests -------------------------------------------------------------------------------------

TEST(DatNumerics, RandomInputs) {
  unsigned seed = 100;
  for (const Config *c : {&kDefault, &kStride2})
    for (const Shape &s : shapes(*c))
      check(*c, s, inputs(*c, s, seed += 20), "");
}

// w_off x60: tanh saturates to exactly +-1, so with orf = 3 the points sit at reference +- 3 /
// (Hk - 1): exactly on the map's borders (normalised +-1, the outermost pixel centres) and up to
// several pixels outside it, for the keys and for the rpe table (displacements beyond +-1).
TEST(DatNumerics, SaturatedOffsetsOnAndBeyondBorders) {
  unsigned seed = 200;
  for (const Shape &s : shapes(kStride2)) {
    const std::vector<In> in = inputs(kStride2, s, seed += 20, 60.f);
    check(kStride2, s, in, " w_off x60");
    std::vector<double> pos;
    attnc_ref::datAttn<double>(in[kX].fp(), weights(in), s.B, s.Y, s.X, s.C, kStride2.dat, &pos);
    int onBorder = 0, outside = 0;
    for (double p : pos) {
      onBorder += std::abs(std::abs(p) - 1.0) < 1e-6;
      outside += std::abs(p) > 1.0 + 1e-6;
    }
    std::printf("[ borders  ] %s: %d of %zu coordinates on a border, %d outside\n",
                label(kStride2, s, "").c_str(), onBorder, pos.size(), outside);
    EXPECT_GT(outside, 0) << label(kStride2, s, "") << ": no sampling point outside the map";
    // Hk = 3 (Y = 6 or 5): reference (i + .5) - 1 in {-.5, .5, 1.5} and offsets +-1.5 give +-1.
    if (kStride2.dat.keys(s.Y) == 3)
      EXPECT_GT(onBorder, 0) << label(kStride2, s, "") << ": no point on a border";
  }
}

// w_off = 0: the points are DAT's reference points, which reach beyond +1 in the last row and
// column ((Hk - .5) / (Hk - 1) * 2 - 1 > 1); large rpe values make the bias dominate the scores.
TEST(DatNumerics, ZeroOffsetsAndLargeBias) {
  unsigned seed = 300;
  for (const Config *c : {&kDefault, &kStride2}) {
    const Shape s = shapes(*c)[0];
    std::vector<In> in = inputs(*c, s, seed += 20);
    for (float &e : in[kWoff].f)
      e = 0.f;
    check(*c, s, in, " w_off=0");
    for (float &e : in[kRpe].f)
      e *= 8.f;
    check(*c, s, in, " w_off=0 rpe x8");
  }
}

// Hand-computed samples on a 2x3 map, so that the reference is pinned to grid_sample's
// align_corners=True arithmetic (-1 and 1 are the outermost pixel centres, zero padding).
TEST(DatNumerics, ReferenceGridSampleHandValues) {
  const double map[2][3] = {{1, 2, 3}, {4, 5, 6}};
  auto at = [&](int y, int x) { return map[y][x]; };
  struct Case {
    double gy, gx, expect;
  };
  const Case cases[] = {
      {-1, -1, 1},    // the top-left pixel centre
      {1, 1, 6},      // the bottom-right pixel centre
      {0, 0, 3.5},    // y = .5 between rows, x = 1: (2 + 5) / 2
      {-1, .5, 2.5},  // x = 1.5: between 2 and 3
      {1, -2, 0},     // x = -1: a whole pixel outside
      {-1, -1.5, .5}, // x = -.5: half of pixel (0, 0)
      {3, 1, 0},      // y = 2: a whole row below
      {2, 1, 3},      // y = 1.5: half of pixel (1, 2)
  };
  for (const Case &c : cases)
    EXPECT_NEAR(attnc_ref::dat_detail::gridSampleAC<double>(at, 2, 3, c.gy, c.gx), c.expect, 1e-12)
        << "at (" << c.gy << ", " << c.gx << ")";
}

// --- requirements ------------------------------------------------------------------------------

// The kernel `require`s the shapes DAT needs: a violating call returns an error naming the
// requirement, or Halide's bounds error where the kernel would read an input past its end (an rpe
// with fewer heads than nh), instead of computing garbage.
TEST(DatNumerics, BadShapesAreErrors) {
  const Config &c = kStride2; // ks = 3, nh = 4, ng = 2
  struct Case {
    const char *what;
    Shape s;
    int Cg, K, heads, Ty, Tx;
    const char *message; // null: Halide's bounds check on an input fires before the requirement
  };
  const Case cases[] = {
      {"rpe 2H x 2W", {1, 6, 7, 8}, 4, 3, 4, 12, 14, "rpe must be [nh, 2Y - 1, 2X - 1]"},
      {"rpe with 6 heads", {1, 6, 7, 8}, 4, 3, 6, 11, 13, "rpe must be [nh, 2Y - 1, 2X - 1]"},
      {"rpe with 2 heads", {1, 6, 7, 8}, 4, 3, 2, 11, 13, nullptr},
      {"Cg = C / 4", {1, 6, 7, 8}, 2, 3, 4, 11, 13, "must have C / ng channels"},
      {"w_dw 5x5", {1, 6, 7, 8}, 4, 5, 4, 11, 13, "w_dw must be [C / ng, ks, ks]"},
      {"C = 6, 4 heads", {1, 6, 7, 6}, 3, 3, 4, 11, 13, "the nh heads must divide the C channels"},
      {"a 2-row map: Hk = 1", {1, 2, 7, 8}, 4, 3, 4, 3, 13, "conv_offset's output Hk x Wk"},
      {"a 1-column map", {1, 6, 1, 8}, 4, 3, 4, 11, 1, "the map needs 2 rows and 2 columns"},
  };
  for (const Case &k : cases) {
    const Shape &s = k.s;
    const std::vector<std::vector<int64_t>> inShapes = {{s.B, s.Y, s.X, s.C},
                                                        {s.C, s.C},
                                                        {s.C},
                                                        {k.Cg, k.K, k.K},
                                                        {k.Cg},
                                                        {k.Cg},
                                                        {k.Cg},
                                                        {2, k.Cg},
                                                        {s.C, s.C},
                                                        {s.C},
                                                        {s.C, s.C},
                                                        {s.C},
                                                        {k.heads, k.Ty, k.Tx},
                                                        {s.C, s.C},
                                                        {s.C}};
    std::vector<std::vector<float>> data;
    std::vector<attnc::TensorView> views;
    for (const auto &sh : inShapes)
      data.emplace_back(numel(sh), .5f);
    for (size_t i = 0; i < inShapes.size(); ++i)
      views.push_back(attnc::TensorView::f32(data[i].data(), inShapes[i]));
    std::vector<float> out(numel({s.B, s.Y, s.X, s.C}), std::numeric_limits<float>::quiet_NaN());
    const attnc::Status st =
        attnc::call(c.desc(), views, {attnc::TensorView::f32(out.data(), {s.B, s.Y, s.X, s.C})});
    EXPECT_FALSE(st.ok()) << k.what;
    if (k.message) {
      EXPECT_THAT(st.message(), ::testing::HasSubstr("requirement failed")) << k.what;
      EXPECT_THAT(st.message(), ::testing::HasSubstr(k.message)) << k.what;
    }
    std::printf("[ require  ] dat_attn %-24s -> %s\n", k.what,
                st.ok() ? "ok (!)" : st.message().c_str());
  }
}

} // namespace
