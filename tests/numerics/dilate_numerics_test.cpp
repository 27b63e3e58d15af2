// Numerics of the AOT-compiled multi-scale dilated attention variants (dsl/variants/msda.attn:
// `msda`, DilateFormer's MultiDilatelocalAttention, and dsl/variants/dilate_block.attn:
// `dilate_block`, its DilateBlock with cpe_per_block=True) against the hand-written fp64 reference
// (reference/dilate_ref.h) and the fp64 DSL interpreter.
//
// Each kernel is compiled for several (hd, r0, r1, r2) with -D overrides (tests/CMakeLists.txt:
// library dilate_<kernel>_hd<hd>_r<r0><r1><r2>; dilate_msda_default has the file's constants); the
// interpreter loads the file with the same defines. Every check runs the same inputs through (1)
// the AOT kernel (fp32, output pre-filled with NaN), (2) the reference in fp64 (ground truth) and
// plain fp32 (which sets the tolerance, attnc_ref::tolerance) and (3) the interpreter; (1) and (3)
// must agree with (2) within the tolerance and be finite.
#include "dilate_dilate_block_hd2_r214.attnc.h"
#include "dilate_dilate_block_hd4_r123.attnc.h"
#include "dilate_msda_default.attnc.h"
#include "dilate_msda_hd2_r214.attnc.h"
#include "dilate_msda_hd4_r123.attnc.h"
#include "dilate_msda_natten_hd4_r123.attnc.h"
#include "dilate_msda_nobias_hd4_r123.attnc.h"

#include "attnc/dsl/FrontEnd.h"
#include "attnc/dsl/Interpreter.h"
#include "numerics/numerics_support.h"
#include "reference/dilate_ref.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#ifndef ATTNC_VARIANTS_DIR
#error "ATTNC_VARIANTS_DIR must name dsl/variants"
#endif

namespace {

// --- configurations ----------------------------------------------------------------------------

struct Config {
  int hd, r0, r1, r2;
  bool defaults; // compiled without -D (the file's constants hd=24, dilation = [1, 2, 3])
  const attnc::KernelDesc &(*desc)();
  bool natten = false; // compiled with -D natten=1: keys outside the map are excluded
};

const Config kMsdaConfigs[] = {
    {24, 1, 2, 3, true, attnc_kernels::dilate_msda_default},
    {4, 1, 2, 3, false, attnc_kernels::dilate_msda_hd4_r123},
    {2, 2, 1, 4, false, attnc_kernels::dilate_msda_hd2_r214},
};

const Config kBlockConfigs[] = {
    {4, 1, 2, 3, false, attnc_kernels::dilate_dilate_block_hd4_r123},
    {2, 2, 1, 4, false, attnc_kernels::dilate_dilate_block_hd2_r214},
};

std::string configLabel(const std::string &kernel, const Config &c) {
  std::ostringstream os;
  os << kernel << " hd=" << c.hd << " r=" << c.r0 << "," << c.r1 << "," << c.r2;
  return os.str();
}

// --- inputs ------------------------------------------------------------------------------------

using attnc_test::In;
using attnc_test::numel;
using attnc_test::Outcome;
using attnc_test::randn;

// --- the fp64 DSL interpreter ------------------------------------------------------------------

// Kernel `kernel` of <kernel>.attn checked with the configuration's defines.
const attnc::dsl::Kernel *interpreterKernel(const std::string &kernel, const Config &c,
                                            std::string *err) {
  attnc_test::Defines defines;
  if (!c.defaults)
    defines = {{"hd", std::to_string(c.hd)},
               {"dilation",
                std::to_string(c.r0) + "," + std::to_string(c.r1) + "," + std::to_string(c.r2)}};
  if (c.natten)
    defines.push_back({"natten", "1"});
  const std::string file = kernel == "msda_nobias" ? "msda.attn" : kernel + ".attn";
  return attnc_test::interpreterKernel(file, kernel, defines, err);
}

// --- the common check --------------------------------------------------------------------------

// Runs `ins` through configuration c's AOT kernel, the reference in fp64 and fp32, and the
// interpreter with c's defines (attnc_test::checkKernel).
template <typename RefFn>
Outcome check(const std::string &kernel, const Config &c, std::vector<In> ins,
              const std::vector<int64_t> &outShape, RefFn ref, const std::string &label) {
  std::string err;
  const attnc::dsl::Kernel *k = interpreterKernel(kernel, c, &err);
  return attnc_test::checkKernel(c.desc(), k, err, std::move(ins), outShape, ref, label);
}

// --- msda --------------------------------------------------------------------------------------

struct MsdaShape {
  int B, Y, X, C;
};

// The msda inputs: x [B, Y, X, C] ~ N(0, xs^2), weights ~ N(0, 1/C) (so that q, k, v are O(xs)),
// biases ~ N(0, .1^2).
std::vector<In> msdaInputs(const MsdaShape &s, unsigned seed, float xs = 1.f) {
  const int C = s.C, Cg = C / 3;
  const float ws = 1.f / std::sqrt((float)C);
  return {randn({s.B, s.Y, s.X, C}, seed + 1, 0.f, xs), randn({3, 3, Cg, C}, seed + 2, 0.f, ws),
          randn({3, 3, Cg}, seed + 3, 0.f, .1f), randn({C, C}, seed + 4, 0.f, ws),
          randn({C}, seed + 5, 0.f, .1f)};
}

Outcome checkMsda(const Config &c, const MsdaShape &s, const std::vector<In> &in,
                  const std::string &what = "") {
  std::ostringstream os;
  os << configLabel("msda", c) << " (" << s.B << "," << s.Y << "," << s.X << "," << s.C << ")"
     << what;
  return check(
      "msda", c, in, {s.B, s.Y, s.X, s.C},
      [&](auto tag) {
        using T = decltype(tag);
        return attnc_ref::msda<T>(in[0].f.data(), in[1].f.data(), in[2].f.data(), in[3].f.data(),
                                  in[4].f.data(), s.B, s.Y, s.X, s.C, c.hd, c.r0, c.r1, c.r2);
      },
      os.str());
}

// Shapes per configuration: maps not multiples of 8 (7x9, 13x5), a 1x1 map, a map smaller than
// the largest dilated window (4x5 with r=3: span 7; 3x4 with r=4: span 9, every key but the
// centre padded), several heads per group (C = 6 hd, Cg = 2 hd), and one map with an interior.
std::vector<MsdaShape> msdaShapes(const Config &c) {
  const int C1 = 3 * c.hd, C2 = 6 * c.hd;
  if (c.defaults)
    return {{1, 7, 9, C1}, {1, 4, 5, C2}, {2, 1, 1, C1}};
  return {{2, 7, 9, C1}, {1, 13, 5, C2}, {1, 1, 1, C1},
          {2, 4, 5, C2}, {1, 3, 4, C1},  {1, 16, 15, C1}};
}

TEST(DilateNumerics, MsdaRandomInputs) {
  unsigned seed = 100;
  for (const Config &c : kMsdaConfigs)
    for (const MsdaShape &s : msdaShapes(c))
      checkMsda(c, s, msdaInputs(s, seed += 10));
}

// q, k, v of ~3x the scale: scores ~ O(10), a nearly one-hot softmax, still finite and accurate.
TEST(DilateNumerics, MsdaLargeScores) {
  unsigned seed = 200;
  for (const Config &c : kMsdaConfigs) {
    const MsdaShape s = {1, 9, 7, 6 * c.hd};
    checkMsda(c, s, msdaInputs(s, seed += 10, 3.f), " scores ~10");
  }
}

// x = 0: the 1x1 conv gives q, k, v = their biases at every pixel, so every in-range score of a
// head is the same constant and every zero-padded position scores 0 (b_qkv > 0 makes q.k > 0); a
// group's output then depends only on how many of its dilated window's positions are in range, so
// the three dilations give three different border patterns. This isolates the padding semantics.
TEST(DilateNumerics, MsdaConstantInputBorders) {
  for (const Config &c : kMsdaConfigs) {
    const MsdaShape s = {1, 7, 9, 3 * c.hd};
    std::vector<In> in = msdaInputs(s, 300);
    for (float &e : in[0].f)
      e = 0.f;
    for (float &e : in[2].f)
      e = std::abs(e) + .5f; // positive q.k: padded keys get less weight
    checkMsda(c, s, in, " x=0");
  }
}

// msda_nobias is msda with a zero qkv bias: the same reference with b_qkv = 0.
TEST(DilateNumerics, MsdaNoBias) {
  const Config c = {4, 1, 2, 3, false, attnc_kernels::dilate_msda_nobias_hd4_r123};
  unsigned seed = 400;
  for (const MsdaShape &s :
       {MsdaShape{2, 7, 9, 12}, MsdaShape{1, 1, 1, 24}, MsdaShape{1, 4, 5, 24}}) {
    std::vector<In> in = msdaInputs(s, seed += 10);
    std::vector<float> zeroBias(in[2].f.size(), 0.f);
    std::ostringstream os;
    os << configLabel("msda_nobias", c) << " (" << s.B << "," << s.Y << "," << s.X << "," << s.C
       << ")";
    check(
        "msda_nobias", c, {in[0], in[1], in[3], in[4]}, {s.B, s.Y, s.X, s.C},
        [&](auto tag) {
          using T = decltype(tag);
          return attnc_ref::msda<T>(in[0].f.data(), in[1].f.data(), zeroBias.data(), in[3].f.data(),
                                    in[4].f.data(), s.B, s.Y, s.X, s.C, c.hd, c.r0, c.r1, c.r2);
        },
        os.str());
  }
}

// -D natten=1: out-of-range keys are excluded from the softmax instead of scoring 0. On maps with
// borders (and a map smaller than the dilated window) the result must match the reference with
// exclusion, and differ from the zero-padded kernel at the borders.
TEST(DilateNumerics, MsdaNattenBorders) {
  const Config c = {4, 1, 2, 3, false, attnc_kernels::dilate_msda_natten_hd4_r123, true};
  unsigned seed = 500;
  for (const MsdaShape &s :
       {MsdaShape{1, 7, 9, 12}, MsdaShape{2, 4, 5, 24}, MsdaShape{1, 1, 1, 12}}) {
    std::vector<In> in = msdaInputs(s, seed += 10);
    std::ostringstream os;
    os << configLabel("msda", c) << " natten (" << s.B << "," << s.Y << "," << s.X << "," << s.C
       << ")";
    Outcome r = check(
        "msda", c, in, {s.B, s.Y, s.X, s.C},
        [&](auto tag) {
          using T = decltype(tag);
          return attnc_ref::msda<T>(in[0].f.data(), in[1].f.data(), in[2].f.data(), in[3].f.data(),
                                    in[4].f.data(), s.B, s.Y, s.X, s.C, c.hd, c.r0, c.r1, c.r2,
                                    true);
        },
        os.str());
    if (s.Y * s.X > 1) { // every pixel is at a border of some group's window: zero padding differs
      std::vector<double> padded =
          attnc_ref::msda<double>(in[0].f.data(), in[1].f.data(), in[2].f.data(), in[3].f.data(),
                                  in[4].f.data(), s.B, s.Y, s.X, s.C, c.hd, c.r0, c.r1, c.r2);
      EXPECT_GT(attnc_ref::maxAbsDiff(padded, r.ref), 1e-3)
          << os.str() << ": exclusion changes nothing";
    }
  }
}

// --- dilate_block ------------------------------------------------------------------------------

struct BlockShape {
  int B, C, Y, X, F;
};

// The 15 dilate_block inputs in the kernel's order.
std::vector<In> blockInputs(const BlockShape &s, unsigned seed) {
  const int C = s.C, Cg = C / 3, F = s.F;
  const float ws = 1.f / std::sqrt((float)C), fs = 1.f / std::sqrt((float)F);
  return {randn({s.B, C, s.Y, s.X}, seed + 1),     // x
          randn({C, 3, 3}, seed + 2, 0.f, .3f),    // w_pos
          randn({C}, seed + 3, 0.f, .1f),          // b_pos
          randn({C}, seed + 4, 1.f, .1f),          // ln1_g
          randn({C}, seed + 5, 0.f, .1f),          // ln1_b
          randn({3, 3, Cg, C}, seed + 6, 0.f, ws), // w_qkv
          randn({3, 3, Cg}, seed + 7, 0.f, .1f),   // b_qkv
          randn({C, C}, seed + 8, 0.f, ws),        // w_o
          randn({C}, seed + 9, 0.f, .1f),          // b_o
          randn({C}, seed + 10, 1.f, .1f),         // ln2_g
          randn({C}, seed + 11, 0.f, .1f),         // ln2_b
          randn({F, C}, seed + 12, 0.f, ws),       // w_fc1
          randn({F}, seed + 13, 0.f, .1f),         // b_fc1
          randn({C, F}, seed + 14, 0.f, fs),       // w_fc2
          randn({C}, seed + 15, 0.f, .1f)};        // b_fc2
}

Outcome checkBlock(const Config &c, const BlockShape &s, const std::vector<In> &in,
                   const std::string &what = "") {
  std::ostringstream os;
  os << configLabel("dilate_block", c) << " (" << s.B << "," << s.C << "," << s.Y << "," << s.X
     << ") F=" << s.F << what;
  return check(
      "dilate_block", c, in, {s.B, s.C, s.Y, s.X},
      [&](auto tag) {
        using T = decltype(tag);
        const float *p[15];
        for (int i = 0; i < 15; ++i)
          p[i] = in[i].f.data();
        return attnc_ref::dilateBlock<T>(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], p[9],
                                         p[10], p[11], p[12], p[13], p[14], s.B, s.C, s.Y, s.X, s.F,
                                         c.hd, c.r0, c.r1, c.r2);
      },
      os.str());
}

TEST(DilateNumerics, DilateBlockRandomInputs) {
  unsigned seed = 400;
  for (const Config &c : kBlockConfigs) {
    const int C1 = 3 * c.hd, C2 = 6 * c.hd;
    // 7x9 and 13x5 maps, 1x1, a map smaller than the largest dilated window (4x5, 3x4), MLP
    // ratio 4 and an odd hidden size.
    for (BlockShape s :
         {BlockShape{2, C1, 7, 9, 4 * C1}, BlockShape{1, C2, 13, 5, 4 * C2},
          BlockShape{1, C1, 1, 1, 4 * C1}, BlockShape{2, C2, 4, 5, 20}, BlockShape{1, C1, 3, 4, 7}})
      checkBlock(c, s, blockInputs(s, seed += 20));
  }
}

// --- requirements ------------------------------------------------------------------------------

// Calls `desc` with the given shapes (inputs filled with .5) and returns the status.
attnc::Status callWithShapes(const attnc::KernelDesc &desc,
                             const std::vector<std::vector<int64_t>> &inShapes,
                             const std::vector<int64_t> &outShape) {
  std::vector<std::vector<float>> data;
  std::vector<attnc::TensorView> views;
  for (const auto &s : inShapes)
    data.emplace_back(numel(s), .5f);
  for (size_t i = 0; i < inShapes.size(); ++i)
    views.push_back(attnc::TensorView::f32(data[i].data(), inShapes[i]));
  std::vector<float> out(numel(outShape), std::numeric_limits<float>::quiet_NaN());
  return attnc::call(desc, views, {attnc::TensorView::f32(out.data(), outShape)});
}

// The kernels `require` G == 3, Cg % hd == 0 and G * Cg == C: a violating call returns an error
// instead of crashing or reading out of bounds.
TEST(DilateNumerics, MsdaBadShapesAreErrors) {
  const attnc::KernelDesc &d = attnc_kernels::dilate_msda_hd4_r123(); // hd = 4
  struct Case {
    const char *what;
    int C, G, Cg;
    bool requireFires; // false: Halide's bounds check (w_o / b_qkv read past their end) fires first
  };
  for (Case k :
       {Case{"G*Cg=12 != C=15", 15, 3, 4, true}, Case{"G*Cg=24 != C=12", 12, 3, 8, false},
        Case{"G=2", 12, 2, 6, false}, Case{"Cg=6 not a multiple of hd=4", 18, 3, 6, true}}) {
    const attnc::Status st =
        callWithShapes(d, {{1, 5, 5, k.C}, {3, k.G, k.Cg, k.C}, {3, k.G, k.Cg}, {k.C, k.C}, {k.C}},
                       {1, 5, 5, k.C});
    EXPECT_FALSE(st.ok()) << "msda " << k.what;
    if (k.requireFires)
      EXPECT_THAT(st.message(), ::testing::HasSubstr("requirement failed")) << k.what;
    std::printf("[ require  ] msda %-32s -> %s\n", k.what,
                st.ok() ? "ok (!)" : st.message().c_str());
  }
  // C of x differs from C of w_qkv / w_o.
  const attnc::Status st =
      callWithShapes(d, {{1, 5, 5, 24}, {3, 3, 4, 12}, {3, 3, 4}, {12, 12}, {12}}, {1, 5, 5, 24});
  EXPECT_FALSE(st.ok()) << "msda with x's C = 24, weights' C = 12";
  std::printf("[ require  ] msda %-32s -> %s\n", "x C=24 vs weights C=12",
              st.ok() ? "ok (!)" : st.message().c_str());
}

TEST(DilateNumerics, DilateBlockBadShapesAreErrors) {
  const attnc::KernelDesc &d = attnc_kernels::dilate_dilate_block_hd4_r123(); // hd = 4
  const int C = 15, G = 3, Cg = 4, F = 8;                                     // G*Cg = 12 != C
  const attnc::Status st = callWithShapes(d,
                                          {{1, C, 5, 5},
                                           {C, 3, 3},
                                           {C},
                                           {C},
                                           {C},
                                           {3, G, Cg, C},
                                           {3, G, Cg},
                                           {C, C},
                                           {C},
                                           {C},
                                           {C},
                                           {F, C},
                                           {F},
                                           {C, F},
                                           {C}},
                                          {1, C, 5, 5});
  EXPECT_FALSE(st.ok()) << "dilate_block with G*Cg != C";
  EXPECT_THAT(st.message(), ::testing::HasSubstr("requirement failed"));
  std::printf("[ require  ] dilate_block %-24s -> %s\n", "G*Cg=12 != C=15",
              st.ok() ? "ok (!)" : st.message().c_str());
}

} // namespace
