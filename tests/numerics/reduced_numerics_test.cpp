// bf16 and f16 builds (-D f32=bf16 / f16) of bundled variants against the fp64 interpreter on the same values.
//
// Each variant's f32 tensors are stored as bf16 or f16; the kernel computes in f32 and rounds its
// output once (docs/language.md §3). So for every output element the error from the exact
// result is at most half a unit in the last place of the storage type (the rounding) plus the
// f32 computation's own error, measured here as the f32 build's largest error on the same
// inputs (times 4: another schedule may sum in another order). That bound is far tighter than
// PyTorch's tests allow for bf16 (a multiple of a bf16 reference's error, which rounds every
// intermediate tensor). The interpreter with the same -D must give the exact result rounded
// once, bit for bit. Cases: cross-attention shapes with partial tiles, causal, projections
// (mhsa), a key padding mask with a batch whose keys are all padded (zero rows), scores of
// ~100 (the softmax's max subtraction), and sampling (ms_deform_attn_core, i32 level tables).
#include "deform_ms_deform_attn_core.attnc.h"
#include "dense_causal_attention.attnc.h"
#include "dense_mhsa.attnc.h"
#include "dense_padding_mask.attnc.h"
#include "reduced_causal_attention_bf16.attnc.h"
#include "reduced_causal_attention_f16.attnc.h"
#include "reduced_mhsa_bf16.attnc.h"
#include "reduced_mhsa_f16.attnc.h"
#include "reduced_ms_deform_attn_core_bf16.attnc.h"
#include "reduced_ms_deform_attn_core_f16.attnc.h"
#include "reduced_padding_mask_bf16.attnc.h"
#include "reduced_padding_mask_f16.attnc.h"
#include "reduced_sdpa_bf16.attnc.h"
#include "reduced_sdpa_f16.attnc.h"
#include "sdpa_auto.attnc.h"

#include "attnc/float16.h"
#include "numerics/numerics_support.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace {

using attnc::DType;
using attnc_test::In;
using attnc_test::numel;

// The spacing of `t`'s numbers at |x| (subnormals included).
double ulp(double x, DType t) {
  const int digits = t == DType::F16 ? 11 : 8, emin = t == DType::F16 ? -14 : -126;
  int e = x == 0 || !std::isfinite(x) ? emin : std::max(std::ilogb(x), emin);
  return std::ldexp(1.0, e - (digits - 1));
}

struct Builds {
  const attnc::KernelDesc &f32, &bf16, &f16;
};

// `ins`' float entries rounded to `t`, so the f32 build, the interpreter and the bf16/f16 build
// all see the same values.
std::vector<In> roundedTo(std::vector<In> ins, DType t) {
  for (In &x : ins)
    for (float &v : x.f)
      v = (float)attnc::round_to_dtype(v, t);
  return ins;
}

void checkReduced(const Builds &b, const std::string &file, const std::string &kernel,
                  const std::vector<In> &original, const std::vector<int64_t> &outShape,
                  const std::string &label) {
  const size_t n = numel(outShape);
  for (DType t : {DType::BF16, DType::F16}) {
    const std::string name = attnc::dtype_name(t);
    SCOPED_TRACE(label + " " + name);
    std::vector<In> ins = roundedTo(original, t);

    // The exact result: the interpreter of the f32 kernel on the rounded values.
    std::string err;
    const attnc::dsl::Kernel *k32 = attnc_test::interpreterKernel(file, kernel, {}, &err);
    ASSERT_NE(k32, nullptr) << err;
    std::vector<attnc::dsl::RefTensor> outs;
    ASSERT_TRUE(attnc::dsl::interpret(*k32, attnc_test::refTensorsOf(ins), &outs, &err)) << err;
    ASSERT_EQ(outs.size(), 1u);
    const std::vector<double> exact = outs[0].data;
    ASSERT_EQ(exact.size(), n);

    // The f32 build's own error on these inputs.
    std::vector<float> o32(n, std::numeric_limits<float>::quiet_NaN());
    std::vector<attnc::TensorView> v32 = attnc_test::viewsOf(ins);
    attnc::Status st = attnc::call(b.f32, v32, {attnc::TensorView::f32(o32.data(), outShape)});
    ASSERT_TRUE(st.ok()) << st.message();
    double slack = 0;
    for (size_t i = 0; i < n; ++i)
      slack = std::max(slack, std::abs(o32[i] - exact[i]));

    // The bf16/f16 build on the same values stored in two bytes.
    std::vector<std::vector<uint16_t>> bits(ins.size());
    std::vector<attnc::TensorView> views;
    for (size_t i = 0; i < ins.size(); ++i) {
      if (ins[i].isInt) {
        views.push_back(attnc::TensorView::i32(ins[i].i.data(), ins[i].shape));
        continue;
      }
      for (float v : ins[i].f)
        bits[i].push_back(attnc::float_to_half_bits(v, t));
      views.push_back(attnc::TensorView::contiguous(bits[i].data(), t, ins[i].shape));
    }
    std::vector<uint16_t> out(n, t == DType::BF16 ? 0x7fc0 : 0x7e00); // NaN: unwritten shows
    const attnc::KernelDesc &desc = t == DType::BF16 ? b.bf16 : b.f16;
    st = attnc::call(desc, views, {attnc::TensorView::contiguous(out.data(), t, outShape)});
    ASSERT_TRUE(st.ok()) << st.message();
    double worst = 0;
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) {
      const double got = attnc::half_bits_to_float(out[i], t);
      const double tol = 0.5 * ulp(exact[i], t) + 4 * slack;
      const double r = std::abs(got - exact[i]) / tol;
      worst = std::max(worst, std::isnan(r) ? INFINITY : r);
      if (!(r <= 1.0) && bad++ < 5)
        ADD_FAILURE() << "element " << i << ": " << got << ", exact " << exact[i] << ", tolerance "
                      << tol;
    }
    EXPECT_EQ(bad, 0u);

    // A call with f32 buffers is refused, naming the tensor and both types.
    std::vector<float> o(n);
    st = attnc::call(desc, v32, {attnc::TensorView::f32(o.data(), outShape)});
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message().find("has dtype f32, expected " + name), std::string::npos)
        << st.message();

    // The interpreter with the same -D rounds its fp64 result once to the type (without the
    // rounding it would return `exact` itself, which differs from these in most elements).
    const attnc::dsl::Kernel *kt =
        attnc_test::interpreterKernel(file, kernel, {{"f32", name}}, &err);
    ASSERT_NE(kt, nullptr) << err;
    ASSERT_TRUE(attnc::dsl::interpret(*kt, attnc_test::refTensorsOf(ins), &outs, &err)) << err;
    size_t differ = 0;
    for (size_t i = 0; i < n; ++i)
      differ += outs[0].data[i] != attnc::round_to_dtype(exact[i], t);
    EXPECT_EQ(differ, 0u) << "interpreter outputs not rounded once to " << name;

    std::printf("[ numerics ] %-52s %-4s worst %.3f of 0.5 ulp + 4 x f32 err (%.3g)\n",
                label.c_str(), name.c_str(), worst, slack);
  }
}

TEST(ReducedNumerics, SdpaCrossShapes) {
  checkReduced({attnc_kernels::sdpa_auto(), attnc_kernels::reduced_sdpa_bf16(),
                attnc_kernels::reduced_sdpa_f16()},
               "sdpa.attn", "sdpa",
               {attnc_test::randn({2, 3, 37, 16}, 1), attnc_test::randn({2, 3, 70, 16}, 2),
                attnc_test::randn({2, 3, 70, 16}, 3)},
               {2, 3, 37, 16}, "sdpa B2 H3 Nq37 Nk70 D16");
}

TEST(ReducedNumerics, SdpaLargeScores) {
  // Scores of ~100: exp overflows without the max subtraction, in any precision.
  checkReduced({attnc_kernels::sdpa_auto(), attnc_kernels::reduced_sdpa_bf16(),
                attnc_kernels::reduced_sdpa_f16()},
               "sdpa.attn", "sdpa",
               {attnc_test::randn({1, 2, 20, 16}, 4, 0.f, 10.f),
                attnc_test::randn({1, 2, 150, 16}, 5, 0.f, 10.f),
                attnc_test::randn({1, 2, 150, 16}, 6)},
               {1, 2, 20, 16}, "sdpa large scores");
}

// Head dimensions 64 and 128: on a CPU with AVX512_BF16 the bf16 score contraction runs on
// vdpbf16ps (cpu-online's pairs of the head dimension; its f16 and f32 builds and other head
// dimensions do not), which sums each pair of products before adding it and treats subnormal
// bf16 values as 0. Key counts past a whole tile (256) and a partial one.
TEST(ReducedNumerics, SdpaDotProductHeadDims) {
  std::printf("[ numerics ] bf16 dot products (vdpbf16ps) %s on this CPU\n",
              __builtin_cpu_supports("avx512bf16") ? "run" : "do not run (no AVX512_BF16)");
  for (int D : {64, 128})
    checkReduced({attnc_kernels::sdpa_auto(), attnc_kernels::reduced_sdpa_bf16(),
                  attnc_kernels::reduced_sdpa_f16()},
                 "sdpa.attn", "sdpa",
                 {attnc_test::randn({1, 2, 40, D}, 20 + D),
                  attnc_test::randn({1, 2, 300, D}, 21 + D),
                  attnc_test::randn({1, 2, 300, D}, 22 + D)},
                 {1, 2, 40, D}, "sdpa B1 H2 Nq40 Nk300 D" + std::to_string(D));
  checkReduced({attnc_kernels::causal_attention(), attnc_kernels::reduced_causal_attention_bf16(),
                attnc_kernels::reduced_causal_attention_f16()},
               "causal_attention.attn", "causal_attention",
               {attnc_test::randn({1, 2, 290, 64}, 23), attnc_test::randn({1, 2, 290, 64}, 24),
                attnc_test::randn({1, 2, 290, 64}, 25)},
               {1, 2, 290, 64}, "causal_attention B1 H2 N290 D64");
}

// AMX (Sapphire Rapids and later; cpu-online's tileScore and tileValues): whole tiles of 256 keys
// compute their scores and their exps x V on tdpbf16ps, d zero-padded to a multiple of 32 and the
// value index to 16, the last query group's rows past Nq read as the last row, and each exp split
// into three bf16 parts. Head dimensions that pad, two whole tiles and a partial one, a partial
// last group of rows, and scores of ~100.
TEST(ReducedNumerics, SdpaTileHeadDims) {
  std::printf("[ numerics ] AMX tiles %s on this process\n",
              attnc::request_tile_state() ? "run" : "do not run (no AMX tile state)");
  for (int D : {24, 40, 64, 72})
    checkReduced({attnc_kernels::sdpa_auto(), attnc_kernels::reduced_sdpa_bf16(),
                  attnc_kernels::reduced_sdpa_f16()},
                 "sdpa.attn", "sdpa",
                 {attnc_test::randn({1, 2, 50, D}, 40 + D),
                  attnc_test::randn({1, 2, 520, D}, 41 + D),
                  attnc_test::randn({1, 2, 520, D}, 42 + D)},
                 {1, 2, 50, D}, "sdpa B1 H2 Nq50 Nk520 D" + std::to_string(D));
  checkReduced({attnc_kernels::sdpa_auto(), attnc_kernels::reduced_sdpa_bf16(),
                attnc_kernels::reduced_sdpa_f16()},
               "sdpa.attn", "sdpa",
               {attnc_test::randn({1, 2, 33, 64}, 50, 0.f, 10.f),
                attnc_test::randn({1, 2, 300, 64}, 51, 0.f, 10.f),
                attnc_test::randn({1, 2, 300, 64}, 52, 0.f, 10.f)},
               {1, 2, 33, 64}, "sdpa large scores Nk300 D64");
}

// An odd head dimension: the bf16 key copy in pairs has a last pair of one value (its second
// value is clamped to the last d, and the score loop never multiplies it).
TEST(ReducedNumerics, SdpaOddHeadDim) {
  checkReduced({attnc_kernels::sdpa_auto(), attnc_kernels::reduced_sdpa_bf16(),
                attnc_kernels::reduced_sdpa_f16()},
               "sdpa.attn", "sdpa",
               {attnc_test::randn({1, 2, 33, 33}, 26), attnc_test::randn({1, 2, 140, 33}, 27),
                attnc_test::randn({1, 2, 140, 33}, 28)},
               {1, 2, 33, 33}, "sdpa B1 H2 Nq33 Nk140 D33");
}

TEST(ReducedNumerics, CausalAttention) {
  checkReduced({attnc_kernels::causal_attention(), attnc_kernels::reduced_causal_attention_bf16(),
                attnc_kernels::reduced_causal_attention_f16()},
               "causal_attention.attn", "causal_attention",
               {attnc_test::randn({1, 2, 130, 32}, 7), attnc_test::randn({1, 2, 130, 32}, 8),
                attnc_test::randn({1, 2, 130, 32}, 9)},
               {1, 2, 130, 32}, "causal_attention B1 H2 N130 D32");
}

TEST(ReducedNumerics, Mhsa) {
  const int B = 2, N = 17, C = 24, H = 3, Dh = 8;
  checkReduced({attnc_kernels::mhsa(), attnc_kernels::reduced_mhsa_bf16(),
                attnc_kernels::reduced_mhsa_f16()},
               "mhsa.attn", "mhsa",
               {attnc_test::randn({B, N, C}, 10), attnc_test::randn({3, H, Dh, C}, 11, 0.f, 0.3f),
                attnc_test::randn({3, H, Dh}, 12, 0.f, 0.1f),
                attnc_test::randn({C, H, Dh}, 13, 0.f, 0.3f),
                attnc_test::randn({C}, 14, 0.f, 0.1f)},
               {B, N, C}, "mhsa B2 N17 C24 H3");
}

TEST(ReducedNumerics, PaddingMaskWithAFullyPaddedBatch) {
  const int B = 2, H = 2, Nq = 20, Nk = 45, D = 16;
  std::vector<int32_t> mask(B * Nk, 0);
  for (int j = 30; j < Nk; ++j)
    mask[j] = 1; // batch 0: the last 15 keys padded
  for (int j = 0; j < Nk; ++j)
    mask[Nk + j] = 1; // batch 1: every key padded, so its rows are zeros
  checkReduced({attnc_kernels::padding_mask(), attnc_kernels::reduced_padding_mask_bf16(),
                attnc_kernels::reduced_padding_mask_f16()},
               "padding_mask.attn", "padding_mask",
               {attnc_test::randn({B, H, Nq, D}, 15), attnc_test::randn({B, H, Nk, D}, 16),
                attnc_test::randn({B, H, Nk, D}, 17), attnc_test::ints({B, Nk}, mask)},
               {B, H, Nq, D}, "padding_mask, batch 1 fully padded");
}

TEST(ReducedNumerics, MsDeformAttnCore) {
  // Two levels (4x5 and 2x3, S = 26); locations inside, on and beyond the borders.
  const int B = 1, Q = 7, M = 2, D = 8, L = 2, P = 3, S = 26;
  checkReduced({attnc_kernels::deform_ms_deform_attn_core(),
                attnc_kernels::reduced_ms_deform_attn_core_bf16(),
                attnc_kernels::reduced_ms_deform_attn_core_f16()},
               "ms_deform_attn_core.attn", "ms_deform_attn_core",
               {attnc_test::randn({B, S, M, D}, 18), attnc_test::ints({L, 2}, {4, 5, 2, 3}),
                attnc_test::ints({L}, {0, 20}),
                attnc_test::uniform({B, Q, M, L, P, 2}, 19, -0.2f, 1.2f),
                attnc_test::uniform({B, Q, M, L, P}, 20, 0.f, 1.f)},
               {B, Q, M * D}, "ms_deform_attn_core B1 Q7 M2 D8 L2 P3");
}

} // namespace
