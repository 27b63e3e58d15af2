// Numerics of the AOT-compiled deformable attention variants (dsl/variants/ms_deform_attn_core.attn:
// `ms_deform_attn_core`, Deformable DETR's core op, dsl/variants/ms_deform_attn.attn:
// `ms_deform_attn`, the whole MSDeformAttn module, and dsl/variants/deform_attn.attn:
// `deform_attn`, single-scale deformable attention v1) against the hand-written fp64 reference
// (reference/deform_ref.h, grid_sample's bilinear / zero-padding / align_corners=False arithmetic)
// and the fp64 DSL interpreter.
//
// Every check runs the same inputs through (1) the AOT kernel (fp32, output pre-filled with NaN),
// (2) the reference in fp64 (ground truth) and plain fp32 (which sets the tolerance,
// attnc_ref::tolerance) and (3) the interpreter; (1) and (3) must agree with (2) within the
// tolerance and be finite. The sampling locations cover points exactly on the borders (loc = 0
// and 1), outside the map, at negative coordinates, 1x1 levels and several levels of different
// sizes.
#include "deform_deform_attn.attnc.h"
#include "deform_deform_attn_project_first.attnc.h"
#include "deform_deform_attn_sample_first.attnc.h"
#include "deform_ms_deform_attn.attnc.h"
#include "deform_ms_deform_attn_core.attnc.h"
#include "deform_ms_deform_attn_sample_first.attnc.h"

#include "attnc/dsl/FrontEnd.h"
#include "attnc/dsl/Interpreter.h"
#include "numerics/numerics_support.h"
#include "reference/deform_ref.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <ostream>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#ifndef ATTNC_VARIANTS_DIR
#error "ATTNC_VARIANTS_DIR must name dsl/variants"
#endif

namespace {

// --- inputs ------------------------------------------------------------------------------------

using attnc_test::check;
using attnc_test::In;
using attnc_test::ints;
using attnc_test::numel;
using attnc_test::Outcome;
using attnc_test::randn;
using attnc_test::uniform;

// The levels: shapes [L, 2] = (H_l, W_l) and start [L] (level start index), S = sum H_l W_l.
struct Levels {
  std::vector<int32_t> hw; // H_0, W_0, H_1, W_1, ...
  int L() const { return (int)hw.size() / 2; }
  std::vector<int32_t> start() const {
    std::vector<int32_t> s;
    int32_t acc = 0;
    for (int l = 0; l < L(); ++l) {
      s.push_back(acc);
      acc += hw[2 * l] * hw[2 * l + 1];
    }
    return s;
  }
  int S() const {
    int s = 0;
    for (int l = 0; l < L(); ++l)
      s += hw[2 * l] * hw[2 * l + 1];
    return s;
  }
  std::string label() const {
    std::ostringstream os;
    for (int l = 0; l < L(); ++l)
      os << (l ? "," : "") << hw[2 * l] << "x" << hw[2 * l + 1];
    return os.str();
  }
};

// Locations that hit every border case: exactly 0 and 1 (the outer edges, half a pixel beyond the
// outermost centres), pixel centres, outside the map on both sides, negative coordinates far
// enough that every corner is out, and points whose corners straddle the edge.
const float kSpecialLocs[] = {0.f, 1.f,  .5f,  -.1f, 1.1f, -.6f,      1.7f,          -2.f,
                              3.f, .25f, .75f, .1f,  .9f,  -1.f / 64, 1.f + 1.f / 64};

// --- ms_deform_attn_core -----------------------------------------------------------------------

struct CoreShape {
  int B, Q, M, D, P;
  Levels lv;
};

// value ~ N(0, 1), aw ~ U(0, 1) (the op does not need them normalised), loc as given.
Outcome checkCore(const CoreShape &s, const In &loc, unsigned seed, const std::string &what) {
  const int L = s.lv.L(), S = s.lv.S();
  const In value = randn({s.B, S, s.M, s.D}, seed + 1);
  const In aw = uniform({s.B, s.Q, s.M, L, s.P}, seed + 2, 0.f, 1.f);
  const In shapes = ints({L, 2}, s.lv.hw), start = ints({L}, s.lv.start());
  std::ostringstream os;
  os << "ms_deform_attn_core B=" << s.B << " Q=" << s.Q << " M=" << s.M << " D=" << s.D
     << " P=" << s.P << " levels " << s.lv.label() << what;
  return check(
      attnc_kernels::deform_ms_deform_attn_core(), "ms_deform_attn_core.attn",
      "ms_deform_attn_core", {value, shapes, start, loc, aw}, {s.B, s.Q, s.M * s.D},
      [&](auto tag) {
        using T = decltype(tag);
        return attnc_ref::msDeformAttnCore<T>(value.f.data(), shapes.i.data(), start.i.data(),
                                              loc.f.data(), aw.f.data(), s.B, S, s.M, s.D, s.Q, L,
                                              s.P);
      },
      os.str());
}

std::vector<int64_t> locShape(const CoreShape &s) { return {s.B, s.Q, s.M, s.lv.L(), s.P, 2}; }

const CoreShape kCoreShapes[] = {
    {2, 5, 2, 4, 3, Levels{{4, 5, 2, 3, 1, 1}}}, // several levels of different sizes and a 1x1
    {2, 3, 3, 2, 4, Levels{{1, 1}}},             // a single 1x1 level
    {2, 4, 1, 3, 2, Levels{{7, 3, 1, 6, 5, 1, 2, 2}}},
};

// Locations ~ U(-0.3, 1.3): interior points, points straddling the edges and points outside.
TEST(DeformNumerics, CoreRandomLocations) {
  unsigned seed = 100;
  for (const CoreShape &s : kCoreShapes) {
    checkCore(s, uniform(locShape(s), seed += 10, -.3f, 1.3f), seed, " loc~U(-.3,1.3)");
    checkCore(s, uniform(locShape(s), seed += 10, .02f, .98f), seed, " loc~U(.02,.98)");
  }
}

// Locations drawn from kSpecialLocs in both coordinates: exactly 0 and 1, pixel centres, outside
// the map and negative.
TEST(DeformNumerics, CoreBorderLocations) {
  unsigned seed = 200;
  const int nSpecial = sizeof(kSpecialLocs) / sizeof(kSpecialLocs[0]);
  for (const CoreShape &s : kCoreShapes) {
    In loc;
    loc.shape = locShape(s);
    loc.f.resize(numel(loc.shape));
    std::mt19937 rng(seed += 10);
    for (size_t i = 0; i < loc.f.size(); ++i)
      loc.f[i] = kSpecialLocs[rng() % nSpecial];
    // The first query of each batch: every (x, y) pair on the corners and edges of the unit square.
    const size_t perQuery = (size_t)s.M * s.lv.L() * s.P;
    const float corners[][2] = {{0, 0},   {1, 0},   {0, 1},   {1, 1},
                                {0, .5f}, {1, .5f}, {.5f, 0}, {.5f, 1}};
    for (int b = 0; b < s.B; ++b)
      for (size_t j = 0; j < perQuery; ++j) {
        float *xy = &loc.f[(((size_t)b * s.Q) * perQuery + j) * 2];
        xy[0] = corners[j % 8][0];
        xy[1] = corners[j % 8][1];
      }
    Outcome r = checkCore(s, loc, seed, " border locs");
    // Far-outside points contribute nothing; the border points must still give a non-trivial output.
    double mx = 0;
    for (double v : r.ref)
      mx = std::max(mx, std::abs(v));
    EXPECT_GT(mx, 1e-3) << "border locs: the reference is all zero";
  }
}

// Hand-computed values on a 1x1 and a 2x2 level, so that the reference itself is pinned to
// grid_sample's arithmetic (align_corners=False, zero padding).
TEST(DeformNumerics, CoreReferenceHandValues) {
  const int32_t shapes[] = {2, 2, 1, 1}, start[] = {0, 4};
  // value [1, S=5, 1, 1]: the 2x2 level holds 1 2 / 3 4, the 1x1 level holds 10.
  const float value[] = {1, 2, 3, 4, 10};
  struct Case {
    float lx0, ly0, lx1, ly1; // loc of level 0 and level 1
    double expect;            // aw = 1 for both levels
  };
  // Level 0: (x, y) = loc * 2 - .5. Level 1: loc * 1 - .5.
  const Case cases[] = {
      {.25f, .25f, .5f, .5f, 1 + 10},               // both on pixel centres
      {.5f, .5f, 0.f, .5f, 2.5 + 5},                // the 2x2 centre; 1x1 at x=-.5: half of 10
      {0.f, 0.f, 0.f, 0.f, .25 * 1 + .25 * 10},     // the top-left corners: a quarter each
      {1.f, 1.f, 1.f, 1.f, .25 * 4 + .25 * 10},     // the bottom-right corners
      {-.25f, .25f, 1.5f, .5f, 0},                  // one pixel outside on the left / right
      {.25f, 1.f, .5f, -.25f, .5 * 3 + .25 * 10},   // the bottom edge; 1x1 at y=-.75
      {.375f, .25f, -.6f, 1.6f, .75 * 1 + .25 * 2}, // x = .25 between 1 and 2; 1x1 far out
  };
  for (const Case &c : cases) {
    const float loc[] = {c.lx0, c.ly0, c.lx1, c.ly1};
    const float aw[] = {1, 1};
    const std::vector<double> o =
        attnc_ref::msDeformAttnCore<double>(value, shapes, start, loc, aw, 1, 5, 1, 1, 1, 2, 1);
    EXPECT_NEAR(o[0], c.expect, 1e-12)
        << "loc " << c.lx0 << "," << c.ly0 << " / " << c.lx1 << "," << c.ly1;
  }
}

// --- ms_deform_attn ----------------------------------------------------------------------------

struct ModShape {
  int B, Q, C, M, D, P;
  Levels lv;
};

// The 13 ms_deform_attn inputs in the kernel's order: query ~ N(0, 1), ref ~ U(refLo, refHi),
// input ~ N(0, 1), weights ~ N(0, 1/C), biases ~ N(0, .1^2) except b_off ~ N(0, offScale^2)
// (offsets of a few pixels, as Deformable DETR's grid initialisation gives).
std::vector<In> modInputs(const ModShape &s, unsigned seed, float refLo, float refHi,
                          float offScale) {
  const int L = s.lv.L(), S = s.lv.S(), C = s.C, M = s.M, D = s.D, P = s.P;
  const float ws = 1.f / std::sqrt((float)C), os = 1.f / std::sqrt((float)(M * D));
  return {randn({s.B, s.Q, C}, seed + 1),
          uniform({s.B, s.Q, L, 2}, seed + 2, refLo, refHi),
          randn({s.B, S, C}, seed + 3),
          ints({L, 2}, s.lv.hw),
          ints({L}, s.lv.start()),
          randn({M, D, C}, seed + 4, 0.f, ws),          // w_v
          randn({M, D}, seed + 5, 0.f, .1f),            // b_v
          randn({M, L, P, 2, C}, seed + 6, 0.f, ws),    // w_off
          randn({M, L, P, 2}, seed + 7, 0.f, offScale), // b_off
          randn({M, L, P, C}, seed + 8, 0.f, ws),       // w_aw
          randn({M, L, P}, seed + 9, 0.f, .1f),         // b_aw
          randn({C, M, D}, seed + 10, 0.f, os),         // w_o
          randn({C}, seed + 11, 0.f, .1f)};             // b_o
}

Outcome checkMod(const ModShape &s, const std::vector<In> &in, const std::string &what,
                 const attnc::KernelDesc &desc = attnc_kernels::deform_ms_deform_attn()) {
  std::ostringstream os;
  os << desc.name << " B=" << s.B << " Q=" << s.Q << " C=" << s.C << " M=" << s.M << " D=" << s.D
     << " P=" << s.P << " levels " << s.lv.label() << what;
  return check(
      desc, "ms_deform_attn.attn", "ms_deform_attn", in, {s.B, s.Q, s.C},
      [&](auto tag) {
        using T = decltype(tag);
        return attnc_ref::msDeformAttn<T>(
            in[0].f.data(), in[1].f.data(), in[2].f.data(), in[3].i.data(), in[4].i.data(),
            in[5].f.data(), in[6].f.data(), in[7].f.data(), in[8].f.data(), in[9].f.data(),
            in[10].f.data(), in[11].f.data(), in[12].f.data(), s.B, s.Q, s.lv.S(), s.C, s.M, s.D,
            s.lv.L(), s.P);
      },
      os.str());
}

const ModShape kModShapes[] = {
    {2, 5, 8, 2, 4, 3, Levels{{4, 5, 2, 3, 1, 1}}},
    {2, 3, 6, 3, 2, 4, Levels{{1, 1}}},
    {2, 4, 12, 4, 3, 2, Levels{{7, 3, 1, 6, 5, 1, 2, 2}}},
};

// Reference points in the map with offsets of ~1.5 pixels: many samples straddle or leave the
// smaller levels.
TEST(DeformNumerics, ModuleRandomInputs) {
  unsigned seed = 300;
  for (const ModShape &s : kModShapes) {
    checkMod(s, modInputs(s, seed += 20, 0.f, 1.f, 1.5f), " ref~U(0,1) off~1.5px");
    checkMod(s, modInputs(s, seed += 20, -.2f, 1.2f, 4.f), " ref~U(-.2,1.2) off~4px");
  }
}

// Zero offsets (w_off = b_off = 0): loc = ref exactly, with the reference points on the borders
// (0, 1), outside and negative (kSpecialLocs), and large logits (a near one-hot softmax).
TEST(DeformNumerics, ModuleBorderReferencePoints) {
  unsigned seed = 400;
  const int nSpecial = sizeof(kSpecialLocs) / sizeof(kSpecialLocs[0]);
  for (const ModShape &s : kModShapes) {
    std::vector<In> in = modInputs(s, seed += 20, 0.f, 1.f, 0.f);
    std::mt19937 rng(seed);
    for (float &e : in[1].f)
      e = kSpecialLocs[rng() % nSpecial];
    for (float &e : in[7].f)
      e = 0.f;
    for (float &e : in[8].f)
      e = 0.f;
    checkMod(s, in, " ref on borders, zero offsets");
    for (float &e : in[9].f)
      e *= 6.f; // logits ~ O(6)
    checkMod(s, in, " ref on borders, zero offsets, logits x6");
  }
}

// The value projection applied to the sampled points instead of the whole map (attn-sample-order
// forced to sample-first): its bias must be weighted by the bilinear weights of the corners that
// are inside the level, so points on borders and outside are the cases that tell.
TEST(DeformNumerics, ModuleSampleFirst) {
  unsigned seed = 500;
  const int nSpecial = sizeof(kSpecialLocs) / sizeof(kSpecialLocs[0]);
  for (const ModShape &s : kModShapes) {
    const attnc::KernelDesc &sf = attnc_kernels::deform_ms_deform_attn_sample_first();
    checkMod(s, modInputs(s, seed += 20, -.2f, 1.2f, 4.f), " ref~U(-.2,1.2) off~4px", sf);
    std::vector<In> in = modInputs(s, seed += 20, 0.f, 1.f, 0.f);
    std::mt19937 rng(seed);
    for (float &e : in[1].f)
      e = kSpecialLocs[rng() % nSpecial];
    for (float &e : in[7].f)
      e = 0.f;
    for (float &e : in[8].f)
      e = 0.f;
    checkMod(s, in, " ref on borders, zero offsets", sf);
  }
}

// --- deform_attn -------------------------------------------------------------------------------

struct DaShape {
  int B, Y, X, C, Q, M, K, D;
};

std::string daLabel(const attnc::KernelDesc &desc, const DaShape &s) {
  std::ostringstream os;
  os << desc.name << " B=" << s.B << " map " << s.Y << "x" << s.X << " C=" << s.C << " Q=" << s.Q
     << " M=" << s.M << " K=" << s.K << " D=" << s.D;
  return os.str();
}

// The 10 deform_attn inputs in the kernel's order (x, z, p, w_off, b_off, w_a, b_a, w_v, w_o, b_o):
// x, z ~ N(0, 1), p ~ U(-1, Y) x U(-1, X) pixels, weights ~ N(0, 1/fan_in), biases ~ N(0, .1^2)
// except the offsets: about offScale pixels, but at most half the map's extent along each axis, or
// most samples of a 1-pixel-wide map would fall outside it and read nothing.
std::vector<In> daInputs(const DaShape &s, unsigned seed, float offScale) {
  const int C = s.C, M = s.M, K = s.K, D = s.D;
  const float ws = 1.f / std::sqrt((float)C), os = 1.f / std::sqrt((float)(M * D));
  const float axisScale[2] = {std::min(offScale, s.Y / 2.f), std::min(offScale, s.X / 2.f)};
  In p = uniform({s.B, s.Q, 2}, seed + 3, 0.f, 1.f);
  for (size_t i = 0; i < p.f.size(); ++i)
    p.f[i] = -1.f + p.f[i] * (float)((i % 2 ? s.X : s.Y) + 1);
  In w_off = randn({M, K, 2, C}, seed + 4, 0.f, 1.f / C), b_off = randn({M, K, 2}, seed + 5);
  for (size_t i = 0; i < w_off.f.size(); ++i)
    w_off.f[i] *= axisScale[(i / C) % 2];
  for (size_t i = 0; i < b_off.f.size(); ++i)
    b_off.f[i] *= axisScale[i % 2];
  return {randn({s.B, s.Y, s.X, C}, seed + 1),
          randn({s.B, s.Q, C}, seed + 2),
          std::move(p),
          std::move(w_off),
          std::move(b_off),
          randn({M, K, C}, seed + 6, 0.f, ws), // w_a
          randn({M, K}, seed + 7, 0.f, .1f),   // b_a
          randn({M, D, C}, seed + 8, 0.f, ws), // w_v
          randn({C, M, D}, seed + 9, 0.f, os), // w_o
          randn({C}, seed + 10, 0.f, .1f)};    // b_o
}

// Also requires the map to contribute to the output (o != b_o somewhere): inputs whose samples all
// fall outside the map would leave sampling and the value / output projections untested.
Outcome checkDa(const attnc::KernelDesc &desc, const DaShape &s, const std::vector<In> &in,
                const std::string &what) {
  Outcome r = check(
      desc, "deform_attn.attn", "deform_attn", in, {s.B, s.Q, s.C},
      [&](auto tag) {
        using T = decltype(tag);
        return attnc_ref::deformAttn<T>(in[0].f.data(), in[1].f.data(), in[2].f.data(),
                                        in[3].f.data(), in[4].f.data(), in[5].f.data(),
                                        in[6].f.data(), in[7].f.data(), in[8].f.data(),
                                        in[9].f.data(), s.B, s.Y, s.X, s.C, s.Q, s.M, s.K, s.D);
      },
      daLabel(desc, s) + what);
  double fromMap = 0;
  for (size_t i = 0; i < r.ref.size(); ++i)
    fromMap = std::max(fromMap, std::abs(r.ref[i] - in[9].f[i % s.C]));
  EXPECT_GT(fromMap, 1e-3) << daLabel(desc, s) << what << ": no sample reads the map";
  return r;
}

const DaShape kDaShapes[] = {
    {2, 5, 7, 6, 4, 2, 3, 3}, // odd sizes, two batches
    {1, 1, 1, 3, 1, 3, 1, 2}, // one query, a 1x1 map, one key (the softmax is exactly 1)
    {2, 4, 1, 5, 3, 1, 4, 5}, // a single-column map, D = C
    {1, 3, 8, 4, 5, 4, 2, 1}, // D = 1
};

// Pixel coordinates along a dimension of extent n: the first and last pixel centres (0, n - 1),
// exactly one pixel outside (-1, n: every corner with weight is out), straddling the edge by
// half and quarter pixels, the centre, and far outside on both sides. All are multiples of 1/4
// small enough that p + b_off is exact in fp32, so the fp32 kernel samples the intended point.
std::vector<float> specialPixels(int n) {
  const float e = (float)(n - 1);
  return {0.f,      e,     -1.f, e + 1.f,  -.5f,  e + .5f,  -.25f,
          e + .75f, e / 2, .75f, e - .25f, -3.5f, e + 2.25f};
}

// Offsets in pixels; zero is repeated so that many samples land on the special points themselves.
const float kSpecialOffsets[] = {0.f, 0.f, 0.f, 1.f, -1.f, .5f, -.5f, .25f, -2.f};

// How the samples p + b_off of a deform_attn input set fall against a Y x X map, to check that
// the border inputs do hit the cases they are meant to.
struct SampleCases {
  int onEdge = 0;   // on the first or last row or column, inside the map
  int straddle = 0; // some corners in the map and some out, with a non-zero weight on both sides
  int outside = 0;  // every corner with a non-zero weight outside the map
  int negative = 0; // a negative coordinate
};

SampleCases classify(const DaShape &s, const std::vector<In> &in) {
  SampleCases r;
  const auto inside = [](double v, int n) { return v >= 0 && v <= n - 1; };
  const auto straddles = [](double v, int n) { return (v > -1 && v < 0) || (v > n - 1 && v < n); };
  const auto out = [](double v, int n) { return v <= -1 || v >= n; };
  for (int b = 0; b < s.B; ++b)
    for (int q = 0; q < s.Q; ++q)
      for (int mk = 0; mk < s.M * s.K; ++mk) {
        const double y = (double)in[2].f[((size_t)b * s.Q + q) * 2] + in[4].f[2 * mk];
        const double x = (double)in[2].f[((size_t)b * s.Q + q) * 2 + 1] + in[4].f[2 * mk + 1];
        r.onEdge +=
            inside(y, s.Y) && inside(x, s.X) && (y == 0 || y == s.Y - 1 || x == 0 || x == s.X - 1);
        r.straddle += (straddles(y, s.Y) && !out(x, s.X)) || (straddles(x, s.X) && !out(y, s.Y));
        r.outside += out(y, s.Y) || out(x, s.X);
        r.negative += y < 0 || x < 0;
      }
  return r;
}

// Random inputs: offsets of ~1.5 and ~4 pixels from reference points spread one pixel beyond the
// map, so samples fall inside, straddle the edges and leave the map.
void deformAttnRandomInputs(const attnc::KernelDesc &desc) {
  unsigned seed = 500;
  for (const DaShape &s : kDaShapes) {
    checkDa(desc, s, daInputs(s, seed += 20, 1.5f), " off~1.5px");
    checkDa(desc, s, daInputs(s, seed += 20, 4.f), " off~4px");
  }
}

// w_off = 0, so every sample is exactly p + b_off: reference points and offsets from the special
// values above; the first queries of each batch sit on the map's corners, and the first offsets
// move them by zero (on the corner), half a pixel across the edge and two pixels out.
// Then the same with logits x6 (a near one-hot softmax, so single border samples dominate).
void deformAttnBorderSamples(const attnc::KernelDesc &desc) {
  unsigned seed = 600;
  const int nOff = sizeof(kSpecialOffsets) / sizeof(kSpecialOffsets[0]);
  for (const DaShape &s : kDaShapes) {
    std::vector<In> in = daInputs(s, seed += 20, 0.f);
    std::mt19937 rng(seed);
    const std::vector<float> py = specialPixels(s.Y), px = specialPixels(s.X);
    for (size_t i = 0; i < in[2].f.size(); i += 2) {
      in[2].f[i] = py[rng() % py.size()];
      in[2].f[i + 1] = px[rng() % px.size()];
    }
    const float corners[][2] = {
        {0, 0}, {(float)s.Y - 1, (float)s.X - 1}, {0, (float)s.X - 1}, {(float)s.Y - 1, 0}};
    for (int b = 0; b < s.B; ++b)
      for (int q = 0; q < std::min(s.Q, 4); ++q) {
        in[2].f[((size_t)b * s.Q + q) * 2] = corners[(q + b) % 4][0];
        in[2].f[((size_t)b * s.Q + q) * 2 + 1] = corners[(q + b) % 4][1];
      }
    for (float &e : in[3].f)
      e = 0.f;
    for (float &e : in[4].f)
      e = kSpecialOffsets[rng() % nOff];
    const float firstOffsets[][2] = {{0, 0}, {-.5f, .5f}, {-2, 0}};
    for (int mk = 0; mk < std::min(s.M * s.K, 3); ++mk) {
      in[4].f[2 * mk] = firstOffsets[mk][0];
      in[4].f[2 * mk + 1] = firstOffsets[mk][1];
    }

    const SampleCases c = classify(s, in);
    EXPECT_GT(c.onEdge, 0) << daLabel(desc, s) << ": no sample on the map's edge";
    EXPECT_GT(c.straddle, 0) << daLabel(desc, s) << ": no sample straddling the edge";
    EXPECT_GT(c.outside, 0) << daLabel(desc, s) << ": no sample outside the map";
    EXPECT_GT(c.negative, 0) << daLabel(desc, s) << ": no sample at a negative coordinate";

    checkDa(desc, s, in, " border samples, w_off=0");
    for (float &e : in[5].f)
      e *= 6.f;
    checkDa(desc, s, in, " border samples, w_off=0, logits x6");
  }
}

// Every build of deform_attn.attn's kernel (the same source compiled with different attnc flags,
// e.g. the sampling order) must pass the same checks: add a build here and in tests/CMakeLists.txt.
struct DeformAttnBuild {
  const char *name;
  const attnc::KernelDesc &(*desc)();
};

// gtest names a failing build by this instead of the struct's bytes.
void PrintTo(const DeformAttnBuild &b, std::ostream *os) { *os << b.name; }

const DeformAttnBuild kDeformAttnBuilds[] = {
    {"default", &attnc_kernels::deform_deform_attn},
    {"sample_first", &attnc_kernels::deform_deform_attn_sample_first},
    {"project_first", &attnc_kernels::deform_deform_attn_project_first},
};

class DeformAttnNumerics : public ::testing::TestWithParam<DeformAttnBuild> {};

TEST_P(DeformAttnNumerics, RandomInputs) { deformAttnRandomInputs(GetParam().desc()); }

TEST_P(DeformAttnNumerics, BorderSamples) { deformAttnBorderSamples(GetParam().desc()); }

INSTANTIATE_TEST_SUITE_P(Builds, DeformAttnNumerics, ::testing::ValuesIn(kDeformAttnBuilds),
                         [](const ::testing::TestParamInfo<DeformAttnBuild> &i) {
                           return std::string(i.param.name);
                         });

// Hand-computed values on a 2 x 3 map, so that the reference itself is pinned to pixel
// coordinates (centres on the integers, no half-pixel shift), (y, x) order and zero padding.
TEST(DeformNumerics, DeformAttnReferenceHandValues) {
  // x [1, 2, 3, 1] = 1 2 3 / 4 5 6; one head, D = C = 1, K = 2; w_v = 2, w_o = .5, b_o = .25 make
  // o = .25 + sum_k A_k x(p + b_off[k]); w_off = w_a = 0, so the offsets are b_off.
  const float x[] = {1, 2, 3, 4, 5, 6}, z[] = {1}, w_off[] = {0, 0, 0, 0}, w_a[] = {0, 0};
  const float w_v[] = {2}, w_o[] = {.5f}, b_o[] = {.25f};
  struct Case {
    float py, px, oy0, ox0, oy1, ox1, ba0; // p, b_off[0, k], b_a[0, 0] (b_a[0, 1] = 0)
    double expect, tol;
  };
  const Case cases[] = {
      {0, 0, 0, 0, 1, 2, 0, .25 + (1 + 6) / 2., 1e-12}, // two pixel centres, opposite corners
      {.5f, .5f, 0, 0, 0, 0, 0, .25 + 3, 1e-12},        // between 1 2 / 4 5
      {-.5f, 1, 0, 0, 2, .5f, 0, .25 + (1 + 2.75) / 2,
       1e-12},                            // half of x(0, 1); (1.5, 1.5): 5/4 + 6/4
      {1, 2, 0, 1, -2, 0, 0, .25, 1e-12}, // (1, 3) and (-1, 2): one pixel out
      {-.25f, -.25f, 0, 0, 1.75f, 2.75f, 0, .25 + (.5625 + 1.5) / 2, 1e-12}, // corners straddling
      {0, 0, 0, 0, 1, 2, std::log(3.f), .25 + .75 * 1 + .25 * 6, 1e-6}, // softmax weights 3/4, 1/4
  };
  for (const Case &c : cases) {
    const float p[] = {c.py, c.px}, b_off[] = {c.oy0, c.ox0, c.oy1, c.ox1}, b_a[] = {c.ba0, 0};
    const std::vector<double> o = attnc_ref::deformAttn<double>(
        x, z, p, w_off, b_off, w_a, b_a, w_v, w_o, b_o, 1, 2, 3, 1, 1, 1, 2, 1);
    EXPECT_NEAR(o[0], c.expect, c.tol) << "p " << c.py << "," << c.px << " b_off " << c.oy0 << ","
                                       << c.ox0 << " / " << c.oy1 << "," << c.ox1;
  }
}

// --- requirements ------------------------------------------------------------------------------

// shapes given as f32 instead of i32: the runtime rejects the call instead of misreading it.
TEST(DeformNumerics, CoreWrongDtypeIsError) {
  const CoreShape s = kCoreShapes[0];
  const int L = s.lv.L(), S = s.lv.S();
  std::vector<float> value(numel({s.B, S, s.M, s.D}), .5f), shapesF(L * 2, 1.f),
      loc(numel(locShape(s)), .5f), aw(numel({s.B, s.Q, s.M, L, s.P}), .5f),
      out(numel({s.B, s.Q, s.M * s.D}));
  std::vector<int32_t> start = s.lv.start();
  const attnc::Status st = attnc::call(attnc_kernels::deform_ms_deform_attn_core(),
                                       {attnc::TensorView::f32(value.data(), {s.B, S, s.M, s.D}),
                                        attnc::TensorView::f32(shapesF.data(), {L, 2}),
                                        attnc::TensorView::i32(start.data(), {L}),
                                        attnc::TensorView::f32(loc.data(), locShape(s)),
                                        attnc::TensorView::f32(aw.data(), {s.B, s.Q, s.M, L, s.P})},
                                       {attnc::TensorView::f32(out.data(), {s.B, s.Q, s.M * s.D})});
  EXPECT_FALSE(st.ok()) << "f32 shapes accepted";
  std::printf("[ require  ] ms_deform_attn_core f32 shapes -> %s\n",
              st.ok() ? "ok (!)" : st.message().c_str());
}

// The output is the op's [B, Q, M*D]: the generated descriptor multiplies M and D, and rejects the
// old [B, Q, M, D] layout and a wrong concatenated extent, naming the product and its sizes.
TEST(DeformNumerics, CoreOutputIsHeadsConcatenated) {
  const CoreShape s = kCoreShapes[0]; // M = 2, D = 4
  const int L = s.lv.L(), S = s.lv.S();
  std::vector<float> value(numel({s.B, S, s.M, s.D}), .5f), loc(numel(locShape(s)), .5f),
      aw(numel({s.B, s.Q, s.M, L, s.P}), .5f), out(numel({s.B, s.Q, s.M * s.D + 1}));
  std::vector<int32_t> hw = s.lv.hw, start = s.lv.start();
  const std::vector<attnc::TensorView> ins = {
      attnc::TensorView::f32(value.data(), {s.B, S, s.M, s.D}),
      attnc::TensorView::i32(hw.data(), {L, 2}), attnc::TensorView::i32(start.data(), {L}),
      attnc::TensorView::f32(loc.data(), locShape(s)),
      attnc::TensorView::f32(aw.data(), {s.B, s.Q, s.M, L, s.P})};
  const attnc::KernelDesc &k = attnc_kernels::deform_ms_deform_attn_core();
  attnc::SizeMap sizes;
  ASSERT_TRUE(attnc::bind_sizes(k, ins, &sizes).ok());
  std::vector<std::vector<int64_t>> shapes;
  ASSERT_TRUE(attnc::output_shapes(k, sizes, &shapes).ok());
  EXPECT_EQ(shapes, (std::vector<std::vector<int64_t>>{{s.B, s.Q, s.M * s.D}}));

  attnc::Status st =
      attnc::call(k, ins, {attnc::TensorView::f32(out.data(), {s.B, s.Q, s.M, s.D})});
  EXPECT_EQ(st.message(),
            "deform_ms_deform_attn_core: output 'o' has rank 4, expected 3 (B, Q, M*D)");
  st = attnc::call(k, ins, {attnc::TensorView::f32(out.data(), {s.B, s.Q, s.M * s.D + 1})});
  EXPECT_EQ(
      st.message(),
      "deform_ms_deform_attn_core: output 'o' dimension 2 (M*D) is 9, but M*D = 8 (M = 2, D = 4)");
  std::printf("[ shape    ] ms_deform_attn_core [B, Q, M*D + 1] -> %s\n", st.message().c_str());
}

// Level tables that do not tile value's S rows: every call fails with the requirement it breaks
// (checked on the tables' values when the kernel is called) and leaves the output untouched.
TEST(DeformNumerics, CoreInconsistentLevelTablesAreErrors) {
  struct Bad {
    const char *what;
    std::vector<int32_t> hw, start;
    std::vector<const char *> messages; // the requirements it breaks: any one may report first
  };
  // value has S = 4*5 + 2*3 = 26 rows, as the good table says.
  const Bad bad[] = {
      {"empty level",
       {4, 5, 0, 3},
       {0, 20},
       {"every level needs H >= 1 and W >= 1", "the levels' H * W"}},
      {"levels short of S", {4, 5, 2, 2}, {0, 20}, {"the levels' H * W (shapes) must add up to S"}},
      {"start with a gap", {4, 5, 2, 3}, {0, 21}, {"start[l] must be where level l begins"}},
      {"start not at 0", {4, 5, 2, 3}, {1, 21}, {"start[l] must be where level l begins"}},
      {"overlapping levels", {4, 5, 2, 3}, {0, 19}, {"start[l] must be where level l begins"}},
  };
  const int B = 1, Q = 3, M = 2, D = 2, L = 2, P = 2, S = 26;
  std::vector<float> value(numel({B, S, M, D}), .5f), loc(numel({B, Q, M, L, P, 2}), .5f),
      aw(numel({B, Q, M, L, P}), .5f);
  for (const Bad &b : bad) {
    std::vector<float> out(numel({B, Q, M * D}), -7.f);
    std::vector<int32_t> hw = b.hw, start = b.start;
    const attnc::Status st = attnc::call(attnc_kernels::deform_ms_deform_attn_core(),
                                         {attnc::TensorView::f32(value.data(), {B, S, M, D}),
                                          attnc::TensorView::i32(hw.data(), {L, 2}),
                                          attnc::TensorView::i32(start.data(), {L}),
                                          attnc::TensorView::f32(loc.data(), {B, Q, M, L, P, 2}),
                                          attnc::TensorView::f32(aw.data(), {B, Q, M, L, P})},
                                         {attnc::TensorView::f32(out.data(), {B, Q, M * D})});
    ASSERT_FALSE(st.ok()) << b.what << " accepted";
    EXPECT_THAT(st.message(), ::testing::HasSubstr("ms_deform_attn_core.attn:")) << b.what;
    bool named = false;
    for (const char *m : b.messages)
      named |= st.message().find(std::string("requirement failed: ") + m) != std::string::npos;
    EXPECT_TRUE(named) << b.what << ": " << st.message();
    for (float o : out)
      EXPECT_EQ(o, -7.f) << b.what << ": the output was written";
    std::printf("[ require  ] %s -> %s\n", b.what, st.message().c_str());
  }
}

} // namespace
