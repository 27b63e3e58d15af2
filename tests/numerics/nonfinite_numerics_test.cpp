// NaN, inf and extreme magnitudes through the AOT attention kernels, under every schedule, against fp64.
//
// The rules (docs/language.md, "Floating point"): a NaN stays in exactly the rows it reaches (a
// NaN or +inf score makes its row NaN, as PyTorch's SDPA does), a masked key is never read (its
// NaN or inf changes nothing), a -inf score is weight 0, and any finite score keeps its exact max
// (scores near 1e30 give the winning key's value row, not zeros). Each case states by
// construction which rows must be NaN, so the test cannot pass by agreeing with a reference that
// shares a mistake; the other rows must match the fp64 reference within a tolerance scaled from a
// plain fp32 reference's own error on the same data.
#include "dense_attn_mask_additive.attnc.h"
#include "dense_attn_mask_bool.attnc.h"
#include "dense_causal_attention.attnc.h"
#include "dense_padding_mask.attnc.h"
#include "sdpa_auto.attnc.h"
#include "sdpa_generic.attnc.h"
#include "sdpa_unfused.attnc.h"
#include "sdpa_unscheduled.attnc.h"

#include "numerics/numerics_support.h"
#include "reference/dense_ref.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace {

using attnc_test::In;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// One batch, H = 2 heads of Nq = 37 queries and Nk = 53 keys (partial row blocks and key tiles).
constexpr int H = 2, Nq = 37, Nk = 53, D = 16;
size_t qi(int h, int i, int d) { return ((size_t)h * Nq + i) * D + d; }
size_t ki(int h, int j, int d) { return ((size_t)h * Nk + j) * D + d; }

using RowPred = std::function<bool(int h, int i)>;

// Checks `got` ([1, H, Nq, D]) row by row: in rows where `special` holds, the fp64 `ref` must be
// non-finite throughout (the case's own expectation) and `got` the same (NaN where ref is NaN,
// the same infinity where ref is inf); every other row finite and within `tol` of `ref`.
void expectRows(const std::string &label, const std::vector<float> &got,
                const std::vector<double> &ref, const RowPred &special, double tol) {
  ASSERT_EQ(got.size(), ref.size()) << label;
  int specialRows = 0, wrongSpecial = 0, extraNonFinite = 0, refWrong = 0;
  double err = 0;
  for (int h = 0; h < H; ++h)
    for (int i = 0; i < Nq; ++i) {
      const bool sp = special(h, i);
      specialRows += sp;
      for (int d = 0; d < D; ++d) {
        const size_t e = qi(h, i, d);
        if (sp) {
          refWrong += std::isfinite(ref[e]);
          wrongSpecial += std::isnan(ref[e]) ? !std::isnan(got[e]) : (double)got[e] != ref[e];
        } else {
          extraNonFinite += !std::isfinite(got[e]);
          refWrong += !std::isfinite(ref[e]);
          if (std::isfinite(got[e]) && std::isfinite(ref[e]))
            err = std::max(err, std::abs(got[e] - ref[e]));
        }
      }
    }
  EXPECT_EQ(refWrong, 0) << label << ": the fp64 reference breaks the case's own expectation";
  EXPECT_EQ(wrongSpecial, 0) << label << ": entries of the " << specialRows
                             << " rows the special values reach differ from fp64 (NaN/inf)";
  EXPECT_EQ(extraNonFinite, 0) << label
                               << ": non-finite entries in rows the special values must not reach";
  EXPECT_LE(err, tol) << label << ": finite rows vs fp64";
  std::printf("[ nonfinite ] %-52s special rows %3d  err %.3g  tol %.3g\n", label.c_str(),
              specialRows, err, tol);
}

std::vector<float> callKernel(const attnc::KernelDesc &desc, std::vector<In> ins,
                              const std::string &label) {
  std::vector<float> out((size_t)H * Nq * D, -12345.f);
  attnc::Status st = attnc::call(desc, attnc_test::viewsOf(ins),
                                 {attnc::TensorView::f32(out.data(), {1, H, Nq, D})});
  EXPECT_TRUE(st.ok()) << label << ": " << st.message();
  return out;
}

// The largest |plain fp32 - fp64| over entries finite in both: what fp32 itself gets wrong here.
template <typename A, typename B>
double finiteDiff(const std::vector<A> &a, const std::vector<B> &b) {
  double m = 0;
  for (size_t e = 0; e < a.size(); ++e)
    if (std::isfinite((double)a[e]) && std::isfinite((double)b[e]))
      m = std::max(m, std::abs((double)a[e] - (double)b[e]));
  return m;
}

struct SdpaCase {
  const char *name;
  std::function<void(In &q, In &k, In &v)> inject;
  RowPred nanRow;
  float qkScale = 1.f; // q and k are multiplied by this (scores by its square)
  float vScale = 1.f;  // v is multiplied by this (the tolerance too)
};

const RowPred kNone = [](int, int) { return false; };

const SdpaCase kSdpaCases[] = {
    {"nan_in_one_query", [](In &q, In &, In &) { q.f[qi(0, 3, 2)] = kNaN; },
     [](int h, int i) { return h == 0 && i == 3; }},
    {"inf_query_row",
     [](In &q, In &, In &) {
       for (int d = 0; d < D; ++d)
         q.f[qi(1, 5, d)] = kInf;
     },
     [](int h, int i) { return h == 1 && i == 5; }},
    {"nan_in_one_key", [](In &, In &k, In &) { k.f[ki(0, 7, 1)] = kNaN; },
     [](int h, int) { return h == 0; }},
    {"nan_value_row",
     [](In &, In &, In &v) {
       for (int d = 0; d < D; ++d)
         v.f[ki(1, 30, d)] = kNaN;
     },
     [](int h, int) { return h == 1; }},
    // Scores near 1e12 (D = 16) and near 1e34: softmax is one-hot, and must keep the winning
    // key's value row (a contracted max vs exp once zeroed whole rows here).
    {"scores_1e12", nullptr, kNone, 2.5e5f},
    {"scores_1e34", nullptr, kNone, 2.5e16f},
    // Values near the largest float: a weighted mean of them never overflows.
    {"values_3e38", nullptr, kNone, 1.f, 7e37f},
};

class NonFiniteSdpa : public ::testing::TestWithParam<const attnc::KernelDesc *> {};

TEST_P(NonFiniteSdpa, RowsFollowIeeeAndPyTorch) {
  const attnc::KernelDesc &desc = *GetParam();
  for (const SdpaCase &c : kSdpaCases) {
    In q = attnc_test::randn({1, H, Nq, D}, 101), k = attnc_test::randn({1, H, Nk, D}, 102),
       v = attnc_test::randn({1, H, Nk, D}, 103);
    for (float &x : q.f)
      x *= c.qkScale;
    for (float &x : k.f)
      x *= c.qkScale;
    In plainV = v;
    if (c.inject)
      c.inject(q, k, plainV);
    v = plainV;
    for (float &x : v.f)
      x *= c.vScale;
    const auto ref = attnc_ref::sdpa<double>(q.fp(), k.fp(), v.fp(), 1, H, Nq, Nk, D);
    // The tolerance from the unscaled values (fp32 on v * 7e37 overflows where the kernel must not).
    const auto ref1 = attnc_ref::sdpa<double>(q.fp(), k.fp(), plainV.fp(), 1, H, Nq, Nk, D);
    const auto plain1 = attnc_ref::sdpa<float>(q.fp(), k.fp(), plainV.fp(), 1, H, Nq, Nk, D);
    const double tol = attnc_ref::tolerance(finiteDiff(plain1, ref1)) * c.vScale;
    const std::string label = std::string(desc.name) + " " + c.name;
    expectRows(label, callKernel(desc, {q, k, v}, label), ref, c.nanRow, tol);
  }

  // +inf in key 7 of head 0, dimension 1: query rows with q[., 1] > 0 score +inf (NaN row: inf -
  // inf), rows with q[., 1] < 0 score -inf (weight 0, a finite row).
  In q = attnc_test::randn({1, H, Nq, D}, 111), k = attnc_test::randn({1, H, Nk, D}, 112),
     v = attnc_test::randn({1, H, Nk, D}, 113);
  k.f[ki(0, 7, 1)] = kInf;
  const auto ref = attnc_ref::sdpa<double>(q.fp(), k.fp(), v.fp(), 1, H, Nq, Nk, D);
  In kFinite = k;
  kFinite.f[ki(0, 7, 1)] = 0.f;
  const double tol = attnc_ref::tolerance(
      finiteDiff(attnc_ref::sdpa<float>(q.fp(), kFinite.fp(), v.fp(), 1, H, Nq, Nk, D),
                 attnc_ref::sdpa<double>(q.fp(), kFinite.fp(), v.fp(), 1, H, Nq, Nk, D)));
  int nanRows = 0;
  RowPred infRow = [&](int h, int i) { return h == 0 && q.f[qi(0, i, 1)] > 0; };
  for (int i = 0; i < Nq; ++i)
    nanRows += infRow(0, i);
  ASSERT_GT(nanRows, 0);
  ASSERT_LT(nanRows, Nq);
  const std::string label = std::string(desc.name) + " inf_in_one_key";
  expectRows(label, callKernel(desc, {q, k, v}, label), ref, infRow, tol);
}

INSTANTIATE_TEST_SUITE_P(Schedules, NonFiniteSdpa,
                         ::testing::Values(&attnc_kernels::sdpa_auto(),
                                           &attnc_kernels::sdpa_generic(),
                                           &attnc_kernels::sdpa_unfused(),
                                           &attnc_kernels::sdpa_unscheduled()),
                         [](const auto &info) { return std::string(info.param->name); });

// The masked variants against the fp64 interpreter (whose masked keys are never read either).
std::vector<double> interpret(const char *file, const char *kernel, const std::vector<In> &ins) {
  std::string err;
  const attnc::dsl::Kernel *k = attnc_test::interpreterKernel(file, kernel, {}, &err);
  EXPECT_NE(k, nullptr) << err;
  if (!k)
    return {};
  std::vector<attnc::dsl::RefTensor> outs;
  EXPECT_TRUE(attnc::dsl::interpret(*k, attnc_test::refTensorsOf(ins), &outs, &err)) << err;
  return outs.empty() ? std::vector<double>{} : outs[0].data;
}

// The tolerance of the unmasked attention on the same q, k, v (specials cleared by `clean`).
double sdpaTolerance(const In &q, const In &k, const In &v, int nk) {
  return attnc_ref::tolerance(
      finiteDiff(attnc_ref::sdpa<float>(q.fp(), k.fp(), v.fp(), 1, H, Nq, nk, D),
                 attnc_ref::sdpa<double>(q.fp(), k.fp(), v.fp(), 1, H, Nq, nk, D)));
}

TEST(NonFiniteMasked, CausalFutureKeysAreNeverRead) {
  // Square: causal attention has N queries and N keys; N = Nq here.
  In q = attnc_test::randn({1, H, Nq, D}, 121), k = attnc_test::randn({1, H, Nq, D}, 122),
     v = attnc_test::randn({1, H, Nq, D}, 123);
  const double tol = sdpaTolerance(q, k, v, Nq);
  // A NaN key at 30 in head 0 and a value row of +inf at 31 in head 1: only rows that see them
  // (i >= 30: NaN, i >= 31: +inf) are non-finite; the earlier rows never read them.
  k.f[((size_t)0 * Nq + 30) * D + 1] = kNaN;
  for (int d = 0; d < D; ++d)
    v.f[((size_t)1 * Nq + 31) * D + d] = kInf;
  const auto ref = interpret("causal_attention.attn", "causal_attention", {q, k, v});
  RowPred nanRow = [](int h, int i) { return (h == 0 && i >= 30) || (h == 1 && i >= 31); };
  expectRows("causal_attention", callKernel(attnc_kernels::causal_attention(), {q, k, v}, "causal"),
             ref, nanRow, tol);
}

TEST(NonFiniteMasked, AdditiveMaskNaNAndInfStayInTheirRows) {
  In q = attnc_test::randn({1, H, Nq, D}, 131), k = attnc_test::randn({1, H, Nk, D}, 132),
     v = attnc_test::randn({1, H, Nk, D}, 133);
  In bias = attnc_test::randn({Nq, Nk}, 134, 0.f, .5f);
  const double tol = sdpaTolerance(q, k, v, Nk) * 4; // the bias shifts scores by O(1): same order
  bias.f[(size_t)4 * Nk + 9] = kNaN;                 // row 4: NaN
  bias.f[(size_t)6 * Nk + 2] = kInf;                 // row 6: +inf score, NaN row (inf - inf)
  bias.f[(size_t)8 * Nk + 11] = -kInf;               // row 8: key 11 weight 0, a finite row
  for (int j = 0; j < Nk; ++j)
    bias.f[(size_t)12 * Nk + j] = -kInf; // row 12: every key -inf, zeros
  const auto ref = interpret("attn_mask.attn", "attn_mask_additive", {q, k, v, bias});
  RowPred nanRow = [](int, int i) { return i == 4 || i == 6; };
  auto got = callKernel(attnc_kernels::attn_mask_additive(), {q, k, v, bias}, "attn_mask_additive");
  expectRows("attn_mask_additive", got, ref, nanRow, tol);
  for (int h = 0; h < H; ++h)
    for (int d = 0; d < D; ++d)
      EXPECT_EQ(got[qi(h, 12, d)], 0.f) << "a row whose scores are all -inf gives 0";
}

TEST(NonFiniteMasked, MaskedKeysAreNeverRead) {
  In q = attnc_test::randn({1, H, Nq, D}, 141), k = attnc_test::randn({1, H, Nk, D}, 142),
     v = attnc_test::randn({1, H, Nk, D}, 143);
  const double tol = sdpaTolerance(q, k, v, Nk);
  // Keys 40.. are padding and key 3 is masked for every query; their keys and values hold NaN and inf.
  std::vector<int32_t> pad(Nk, 0), mask((size_t)Nq * Nk, 1);
  for (int j = 40; j < Nk; ++j)
    pad[j] = 1;
  for (int i = 0; i < Nq; ++i)
    mask[(size_t)i * Nk + 3] = 0;
  for (int h = 0; h < H; ++h)
    for (int j : {3, 41, 52}) {
      k.f[ki(h, j, 0)] = kNaN, k.f[ki(h, j, 5)] = kInf;
      v.f[ki(h, j, 2)] = kNaN, v.f[ki(h, j, 7)] = -kInf;
    }
  In padIn = attnc_test::ints({1, Nk}, pad), maskIn = attnc_test::ints({Nq, Nk}, mask);
  // Key 3 is not padding: padding_mask reads it, so its rows are NaN; attn_mask_bool never reads 41, 52.
  for (int j : {41, 52})
    pad[j] = 1;
  const auto refPad = interpret("padding_mask.attn", "padding_mask", {q, k, v, padIn});
  expectRows(
      "padding_mask", callKernel(attnc_kernels::padding_mask(), {q, k, v, padIn}, "padding_mask"),
      refPad, [](int, int) { return true; }, tol);
  // With key 3 also padded, nothing special is read.
  pad[3] = 1;
  In padAll = attnc_test::ints({1, Nk}, pad);
  const auto refPadAll = interpret("padding_mask.attn", "padding_mask", {q, k, v, padAll});
  expectRows("padding_mask (all specials padded)",
             callKernel(attnc_kernels::padding_mask(), {q, k, v, padAll}, "padding_mask"),
             refPadAll, kNone, tol);
  // The boolean mask excludes key 3 only: keys 41 and 52 are read, so every row is NaN...
  const auto refMask = interpret("attn_mask.attn", "attn_mask_bool", {q, k, v, maskIn});
  expectRows(
      "attn_mask_bool",
      callKernel(attnc_kernels::attn_mask_bool(), {q, k, v, maskIn}, "attn_mask_bool"), refMask,
      [](int, int) { return true; }, tol);
  // ...and with 41 and 52 masked too, none is.
  for (int i = 0; i < Nq; ++i)
    for (int j : {41, 52})
      mask[(size_t)i * Nk + j] = 0;
  In maskAll = attnc_test::ints({Nq, Nk}, mask);
  const auto refMaskAll = interpret("attn_mask.attn", "attn_mask_bool", {q, k, v, maskAll});
  expectRows("attn_mask_bool (all specials masked)",
             callKernel(attnc_kernels::attn_mask_bool(), {q, k, v, maskAll}, "attn_mask_bool"),
             refMaskAll, kNone, tol);
}

} // namespace
