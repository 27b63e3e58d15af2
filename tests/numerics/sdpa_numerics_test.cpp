// Numerics of the AOT-compiled SDPA kernel, under every schedule, against the fp64 reference.
#include "sdpa_auto.attnc.h"
#include "sdpa_generic.attnc.h"
#include "sdpa_unfused.attnc.h"
#include "sdpa_unscheduled.attnc.h"

#include "numerics/numerics_support.h"
#include "reference/sdpa_ref.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

namespace {

struct Shape {
  int B, H, Nq, Nk, D;
};

std::ostream &operator<<(std::ostream &os, const Shape &s) {
  return os << "B" << s.B << "_H" << s.H << "_Nq" << s.Nq << "_Nk" << s.Nk << "_D" << s.D;
}

std::vector<float> randomTensor(size_t n, unsigned seed, float scale = 1.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, scale);
  std::vector<float> t(n);
  for (float &x : t)
    x = dist(rng);
  return t;
}

class SdpaNumerics : public ::testing::TestWithParam<std::tuple<Shape, const attnc::KernelDesc *>> {
};

TEST_P(SdpaNumerics, MatchesFp64Reference) {
  auto [s, kernel] = GetParam();
  auto q = randomTensor((size_t)s.B * s.H * s.Nq * s.D, 1);
  auto k = randomTensor((size_t)s.B * s.H * s.Nk * s.D, 2);
  auto v = randomTensor((size_t)s.B * s.H * s.Nk * s.D, 3);
  std::vector<float> o((size_t)s.B * s.H * s.Nq * s.D, -12345.f);
  attnc::Status st = attnc::call(*kernel,
                                 {attnc::TensorView::f32(q.data(), {s.B, s.H, s.Nq, s.D}),
                                  attnc::TensorView::f32(k.data(), {s.B, s.H, s.Nk, s.D}),
                                  attnc::TensorView::f32(v.data(), {s.B, s.H, s.Nk, s.D})},
                                 {attnc::TensorView::f32(o.data(), {s.B, s.H, s.Nq, s.D})});
  ASSERT_TRUE(st.ok()) << st.message();
  auto ref = attnc_ref::sdpa<double>(q.data(), k.data(), v.data(), s.B, s.H, s.Nq, s.Nk, s.D);
  auto plain = attnc_ref::sdpa<float>(q.data(), k.data(), v.data(), s.B, s.H, s.Nq, s.Nk, s.D);
  double tol = attnc_ref::tolerance(attnc_ref::maxAbsDiff(plain, ref));
  EXPECT_LE(attnc_ref::maxAbsDiff(o, ref), tol) << kernel->name << " " << s;
  // sdpa_auto's CUDA build (sdpa_auto_cuda) on the same inputs, where a device is present.
  std::ostringstream label;
  label << kernel->name << " " << s;
  attnc_test::checkCudaTwin(*kernel,
                            {attnc::TensorView::f32(q.data(), {s.B, s.H, s.Nq, s.D}),
                             attnc::TensorView::f32(k.data(), {s.B, s.H, s.Nk, s.D}),
                             attnc::TensorView::f32(v.data(), {s.B, s.H, s.Nk, s.D})},
                            {s.B, s.H, s.Nq, s.D}, ref, tol, label.str());
}

// Shapes: tile multiples; N not a multiple of the 4-row or 16-key tiles; Nq != Nk both ways;
// a single query and a single key; head dims that are not a multiple of the vector width.
const Shape kShapes[] = {
    {1, 2, 64, 64, 64},
    {2, 3, 37, 53, 16},
    {1, 2, 100, 7, 32},
    {1, 1, 1, 1, 8},
    {2, 1, 5, 130, 24},
    {1, 4, 129, 129, 64},
    {1, 1, 3, 1000, 3},
    // Head dimensions the online schedule specialises for, with a partial last key tile.
    {1, 2, 37, 300, 128},
    {1, 1, 70, 257, 64},
    // Head dimensions whose exps x V blocks are shifted inwards (cpu-online: 2-vector blocks, the
    // last overlapping its neighbour), with whole and partial key tiles.
    {1, 2, 45, 520, 40},
    {1, 1, 33, 300, 72},
};

std::string testName(const ::testing::TestParamInfo<SdpaNumerics::ParamType> &info) {
  std::ostringstream os;
  os << std::get<1>(info.param)->name << "_" << std::get<0>(info.param);
  return os.str();
}

INSTANTIATE_TEST_SUITE_P(Scheduled, SdpaNumerics,
                         ::testing::Combine(::testing::ValuesIn(kShapes),
                                            ::testing::Values(&attnc_kernels::sdpa_auto(),
                                                              &attnc_kernels::sdpa_generic(),
                                                              &attnc_kernels::sdpa_unfused())),
                         testName);

// Unscheduled, Halide recomputes every reduction inside its consumer's innermost loop (about
// Nq*Nk^2*D^2 work), so it is checked on small shapes only.
const Shape kSmallShapes[] = {{1, 2, 5, 7, 4}, {2, 1, 1, 1, 3}, {1, 1, 9, 4, 8}};
INSTANTIATE_TEST_SUITE_P(Unscheduled, SdpaNumerics,
                         ::testing::Combine(::testing::ValuesIn(kSmallShapes),
                                            ::testing::Values(&attnc_kernels::sdpa_unscheduled())),
                         testName);

// Softmax must subtract the row max: scores near 1e4 would overflow exp() otherwise.
TEST(SdpaNumerics, LargeScoresStayFinite) {
  const int B = 1, H = 1, N = 33, D = 16;
  auto q = randomTensor(N * D, 4, 30.f), k = randomTensor(N * D, 5, 30.f),
       v = randomTensor(N * D, 6);
  std::vector<float> o(N * D);
  attnc::Status st = attnc::call(attnc_kernels::sdpa_auto(),
                                 {attnc::TensorView::f32(q.data(), {B, H, N, D}),
                                  attnc::TensorView::f32(k.data(), {B, H, N, D}),
                                  attnc::TensorView::f32(v.data(), {B, H, N, D})},
                                 {attnc::TensorView::f32(o.data(), {B, H, N, D})});
  ASSERT_TRUE(st.ok()) << st.message();
  auto ref = attnc_ref::sdpa<double>(q.data(), k.data(), v.data(), B, H, N, N, D);
  for (float x : o)
    ASSERT_TRUE(std::isfinite(x));
  auto plain = attnc_ref::sdpa<float>(q.data(), k.data(), v.data(), B, H, N, N, D);
  EXPECT_LE(attnc_ref::maxAbsDiff(o, ref), attnc_ref::tolerance(attnc_ref::maxAbsDiff(plain, ref)));
}

// The AOT kernel through the runtime rejects mismatched shapes with the tensor and dimension named.
TEST(SdpaNumerics, ShapeMismatchNamesTensorAndDimension) {
  std::vector<float> buf(2 * 2 * 8 * 16);
  attnc::Status st = attnc::call(attnc_kernels::sdpa_auto(),
                                 {attnc::TensorView::f32(buf.data(), {2, 2, 8, 16}),
                                  attnc::TensorView::f32(buf.data(), {2, 2, 8, 8}),
                                  attnc::TensorView::f32(buf.data(), {2, 2, 8, 16})},
                                 {attnc::TensorView::f32(nullptr, {2, 2, 8, 16})});
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), ::testing::HasSubstr("'k' dimension 3 (D)"));
}

TEST(SdpaNumerics, RegisteredUnderNameAndTarget) {
  EXPECT_EQ(attnc::Registry::global().find("sdpa_auto", "host"), &attnc_kernels::sdpa_auto());
  EXPECT_EQ(attnc::Registry::global().find("sdpa_auto", "cuda"), nullptr);
}

} // namespace
