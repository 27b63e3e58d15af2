// Numerics of the AOT-compiled deformable attention variants (dsl/variants/ms_deform_attn_core.attn:
// `ms_deform_attn_core`, Deformable DETR's core op, and dsl/variants/ms_deform_attn.attn:
// `ms_deform_attn`, the whole MSDeformAttn module) against the hand-written fp64 reference
// (reference/deform_ref.h, grid_sample's bilinear / zero-padding / align_corners=False arithmetic)
// and the fp64 DSL interpreter.
//
// Every check runs the same inputs through (1) the AOT kernel (fp32, output pre-filled with NaN),
// (2) the reference in fp64 (ground truth) and plain fp32 (which sets the tolerance,
// attnc_ref::tolerance) and (3) the interpreter; (1) and (3) must agree with (2) within the
// tolerance and be finite. The sampling locations cover points exactly on the borders (loc = 0
// and 1), outside the map, at negative coordinates, 1x1 levels and several levels of different
// sizes.
#include "deform_ms_deform_attn.attnc.h"
#include "deform_ms_deform_attn_core.attnc.h"

#include "attnc/dsl/FrontEnd.h"
#include "attnc/dsl/Interpreter.h"
#include "numerics/numerics_support.h"
#include "reference/deform_ref.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
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
    for (int l = 0; l < L(); ++l) s += hw[2 * l] * hw[2 * l + 1];
    return s;
  }
  std::string label() const {
    std::ostringstream os;
    for (int l = 0; l < L(); ++l) os << (l ? "," : "") << hw[2 * l] << "x" << hw[2 * l + 1];
    return os.str();
  }
};

// Locations that hit every border case: exactly 0 and 1 (the outer edges, half a pixel beyond the
// outermost centres), pixel centres, outside the map on both sides, negative coordinates far
// enough that every corner is out, and points whose corners straddle the edge.
const float kSpecialLocs[] = {0.f, 1.f, .5f, -.1f, 1.1f, -.6f, 1.7f, -2.f, 3.f, .25f, .75f, .1f, .9f, -1.f / 64, 1.f + 1.f / 64};


// --- ms_deform_attn_core -----------------------------------------------------------------------

struct CoreShape {
  int B, Q, M, D, P;
  Levels lv;
};

// value ~ N(0, 1), aw ~ U(0, 1) (the op does not need them normalised), loc as given.
Outcome checkCore(const CoreShape& s, const In& loc, unsigned seed, const std::string& what) {
  const int L = s.lv.L(), S = s.lv.S();
  const In value = randn({s.B, S, s.M, s.D}, seed + 1);
  const In aw = uniform({s.B, s.Q, s.M, L, s.P}, seed + 2, 0.f, 1.f);
  const In shapes = ints({L, 2}, s.lv.hw), start = ints({L}, s.lv.start());
  std::ostringstream os;
  os << "ms_deform_attn_core B=" << s.B << " Q=" << s.Q << " M=" << s.M << " D=" << s.D << " P=" << s.P << " levels "
     << s.lv.label() << what;
  return check(attnc_kernels::deform_ms_deform_attn_core(), "ms_deform_attn_core.attn", "ms_deform_attn_core",
               {value, shapes, start, loc, aw}, {s.B, s.Q, s.M, s.D},
               [&](auto tag) {
                 using T = decltype(tag);
                 return attnc_ref::msDeformAttnCore<T>(value.f.data(), shapes.i.data(), start.i.data(), loc.f.data(),
                                                       aw.f.data(), s.B, S, s.M, s.D, s.Q, L, s.P);
               },
               os.str());
}

std::vector<int64_t> locShape(const CoreShape& s) { return {s.B, s.Q, s.M, s.lv.L(), s.P, 2}; }

const CoreShape kCoreShapes[] = {
    {2, 5, 2, 4, 3, Levels{{4, 5, 2, 3, 1, 1}}}, // several levels of different sizes and a 1x1
    {2, 3, 3, 2, 4, Levels{{1, 1}}},             // a single 1x1 level
    {2, 4, 1, 3, 2, Levels{{7, 3, 1, 6, 5, 1, 2, 2}}},
};

// Locations ~ U(-0.3, 1.3): interior points, points straddling the edges and points outside.
TEST(DeformNumerics, CoreRandomLocations) {
  unsigned seed = 100;
  for (const CoreShape& s : kCoreShapes) {
    checkCore(s, uniform(locShape(s), seed += 10, -.3f, 1.3f), seed, " loc~U(-.3,1.3)");
    checkCore(s, uniform(locShape(s), seed += 10, .02f, .98f), seed, " loc~U(.02,.98)");
  }
}

// Locations drawn from kSpecialLocs in both coordinates: exactly 0 and 1, pixel centres, outside
// the map and negative.
TEST(DeformNumerics, CoreBorderLocations) {
  unsigned seed = 200;
  const int nSpecial = sizeof(kSpecialLocs) / sizeof(kSpecialLocs[0]);
  for (const CoreShape& s : kCoreShapes) {
    In loc;
    loc.shape = locShape(s);
    loc.f.resize(numel(loc.shape));
    std::mt19937 rng(seed += 10);
    for (size_t i = 0; i < loc.f.size(); ++i) loc.f[i] = kSpecialLocs[rng() % nSpecial];
    // The first query of each batch: every (x, y) pair on the corners and edges of the unit square.
    const size_t perQuery = (size_t)s.M * s.lv.L() * s.P;
    const float corners[][2] = {{0, 0}, {1, 0}, {0, 1}, {1, 1}, {0, .5f}, {1, .5f}, {.5f, 0}, {.5f, 1}};
    for (int b = 0; b < s.B; ++b)
      for (size_t j = 0; j < perQuery; ++j) {
        float* xy = &loc.f[(((size_t)b * s.Q) * perQuery + j) * 2];
        xy[0] = corners[j % 8][0];
        xy[1] = corners[j % 8][1];
      }
    Outcome r = checkCore(s, loc, seed, " border locs");
    // Far-outside points contribute nothing; the border points must still give a non-trivial output.
    double mx = 0;
    for (double v : r.ref) mx = std::max(mx, std::abs(v));
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
      {.25f, .25f, .5f, .5f, 1 + 10},                       // both on pixel centres
      {.5f, .5f, 0.f, .5f, 2.5 + 5},                        // the 2x2 centre; 1x1 at x=-.5: half of 10
      {0.f, 0.f, 0.f, 0.f, .25 * 1 + .25 * 10},            // the top-left corners: a quarter each
      {1.f, 1.f, 1.f, 1.f, .25 * 4 + .25 * 10},            // the bottom-right corners
      {-.25f, .25f, 1.5f, .5f, 0},                          // one pixel outside on the left / right
      {.25f, 1.f, .5f, -.25f, .5 * 3 + .25 * 10},           // the bottom edge; 1x1 at y=-.75
      {.375f, .25f, -.6f, 1.6f, .75 * 1 + .25 * 2},         // x = .25 between 1 and 2; 1x1 far out
  };
  for (const Case& c : cases) {
    const float loc[] = {c.lx0, c.ly0, c.lx1, c.ly1};
    const float aw[] = {1, 1};
    const std::vector<double> o = attnc_ref::msDeformAttnCore<double>(value, shapes, start, loc, aw, 1, 5, 1, 1, 1, 2, 1);
    EXPECT_NEAR(o[0], c.expect, 1e-12) << "loc " << c.lx0 << "," << c.ly0 << " / " << c.lx1 << "," << c.ly1;
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
std::vector<In> modInputs(const ModShape& s, unsigned seed, float refLo, float refHi, float offScale) {
  const int L = s.lv.L(), S = s.lv.S(), C = s.C, M = s.M, D = s.D, P = s.P;
  const float ws = 1.f / std::sqrt((float)C), os = 1.f / std::sqrt((float)(M * D));
  return {randn({s.B, s.Q, C}, seed + 1),
          uniform({s.B, s.Q, L, 2}, seed + 2, refLo, refHi),
          randn({s.B, S, C}, seed + 3),
          ints({L, 2}, s.lv.hw),
          ints({L}, s.lv.start()),
          randn({M, D, C}, seed + 4, 0.f, ws),        // w_v
          randn({M, D}, seed + 5, 0.f, .1f),          // b_v
          randn({M, L, P, 2, C}, seed + 6, 0.f, ws),  // w_off
          randn({M, L, P, 2}, seed + 7, 0.f, offScale), // b_off
          randn({M, L, P, C}, seed + 8, 0.f, ws),     // w_aw
          randn({M, L, P}, seed + 9, 0.f, .1f),       // b_aw
          randn({C, M, D}, seed + 10, 0.f, os),       // w_o
          randn({C}, seed + 11, 0.f, .1f)};           // b_o
}

Outcome checkMod(const ModShape& s, const std::vector<In>& in, const std::string& what) {
  std::ostringstream os;
  os << "ms_deform_attn B=" << s.B << " Q=" << s.Q << " C=" << s.C << " M=" << s.M << " D=" << s.D << " P=" << s.P
     << " levels " << s.lv.label() << what;
  return check(attnc_kernels::deform_ms_deform_attn(), "ms_deform_attn.attn", "ms_deform_attn", in, {s.B, s.Q, s.C},
               [&](auto tag) {
                 using T = decltype(tag);
                 return attnc_ref::msDeformAttn<T>(in[0].f.data(), in[1].f.data(), in[2].f.data(), in[3].i.data(),
                                                   in[4].i.data(), in[5].f.data(), in[6].f.data(), in[7].f.data(),
                                                   in[8].f.data(), in[9].f.data(), in[10].f.data(), in[11].f.data(),
                                                   in[12].f.data(), s.B, s.Q, s.lv.S(), s.C, s.M, s.D, s.lv.L(), s.P);
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
  for (const ModShape& s : kModShapes) {
    checkMod(s, modInputs(s, seed += 20, 0.f, 1.f, 1.5f), " ref~U(0,1) off~1.5px");
    checkMod(s, modInputs(s, seed += 20, -.2f, 1.2f, 4.f), " ref~U(-.2,1.2) off~4px");
  }
}

// Zero offsets (w_off = b_off = 0): loc = ref exactly, with the reference points on the borders
// (0, 1), outside and negative (kSpecialLocs), and large logits (a near one-hot softmax).
TEST(DeformNumerics, ModuleBorderReferencePoints) {
  unsigned seed = 400;
  const int nSpecial = sizeof(kSpecialLocs) / sizeof(kSpecialLocs[0]);
  for (const ModShape& s : kModShapes) {
    std::vector<In> in = modInputs(s, seed += 20, 0.f, 1.f, 0.f);
    std::mt19937 rng(seed);
    for (float& e : in[1].f) e = kSpecialLocs[rng() % nSpecial];
    for (float& e : in[7].f) e = 0.f;
    for (float& e : in[8].f) e = 0.f;
    checkMod(s, in, " ref on borders, zero offsets");
    for (float& e : in[9].f) e *= 6.f; // logits ~ O(6)
    checkMod(s, in, " ref on borders, zero offsets, logits x6");
  }
}

// --- requirements ------------------------------------------------------------------------------

// shapes given as f32 instead of i32: the runtime rejects the call instead of misreading it.
TEST(DeformNumerics, CoreWrongDtypeIsError) {
  const CoreShape s = kCoreShapes[0];
  const int L = s.lv.L(), S = s.lv.S();
  std::vector<float> value(numel({s.B, S, s.M, s.D}), .5f), shapesF(L * 2, 1.f), loc(numel(locShape(s)), .5f),
      aw(numel({s.B, s.Q, s.M, L, s.P}), .5f), out(numel({s.B, s.Q, s.M, s.D}));
  std::vector<int32_t> start = s.lv.start();
  const attnc::Status st = attnc::call(
      attnc_kernels::deform_ms_deform_attn_core(),
      {attnc::TensorView::f32(value.data(), {s.B, S, s.M, s.D}), attnc::TensorView::f32(shapesF.data(), {L, 2}),
       attnc::TensorView::i32(start.data(), {L}), attnc::TensorView::f32(loc.data(), locShape(s)),
       attnc::TensorView::f32(aw.data(), {s.B, s.Q, s.M, L, s.P})},
      {attnc::TensorView::f32(out.data(), {s.B, s.Q, s.M, s.D})});
  EXPECT_FALSE(st.ok()) << "f32 shapes accepted";
  std::printf("[ require  ] ms_deform_attn_core f32 shapes -> %s\n", st.ok() ? "ok (!)" : st.message().c_str());
}

} // namespace
