// Unit tests of the fp64 reference interpreter (attnc/dsl/Interpreter.h): SDPA against the
// hand-written reference, integer semantics, reductions, softmax masks, let/def, and the errors.
#include "attnc/dsl/AST.h"
#include "attnc/dsl/Diagnostics.h"
#include "attnc/dsl/Interpreter.h"
#include "attnc/dsl/Parser.h"
#include "attnc/dsl/Sema.h"
#include "reference/sdpa_ref.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace attnc::dsl {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

// A checked module parsed from memory.
struct Checked {
  std::shared_ptr<SourceFile> file;
  std::unique_ptr<DiagEngine> diags;
  std::unique_ptr<Module> module;
  bool ok = false;
  const Kernel &kernel(size_t i = 0) const { return *module->kernels.at(i); }
};

Checked check(const std::string &text) {
  Checked c;
  c.file = std::make_shared<SourceFile>();
  c.file->path = "test.attn";
  c.file->text = text;
  c.diags = std::make_unique<DiagEngine>(c.file);
  Parser p(*c.file, *c.diags);
  c.module = p.parseModule();
  c.ok = c.module && analyze(*c.module, *c.diags);
  if (!c.ok) {
    std::ostringstream os;
    c.diags->print(os);
    ADD_FAILURE() << "front end rejected the test kernel:\n" << os.str();
  }
  return c;
}

RefTensor f32(std::vector<int64_t> shape, std::vector<double> data) {
  return RefTensor{std::move(shape), std::move(data), false};
}
RefTensor i32(std::vector<int64_t> shape, std::vector<double> data) {
  return RefTensor{std::move(shape), std::move(data), true};
}

std::vector<double> randomData(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist;
  std::vector<double> v(n);
  for (double &x : v)
    x = dist(rng); // f32 values, as attn-run reads them
  return v;
}

// Runs `text`'s first kernel; fails the test when the interpreter reports an error.
std::vector<RefTensor> run(const std::string &text, const std::vector<RefTensor> &inputs) {
  Checked c = check(text);
  std::vector<RefTensor> outs;
  if (!c.ok)
    return outs;
  std::string err;
  EXPECT_TRUE(interpret(c.kernel(), inputs, &outs, &err)) << err;
  return outs;
}

// Runs `text`'s first kernel, expects an error and returns its message.
std::string runError(const std::string &text, const std::vector<RefTensor> &inputs) {
  Checked c = check(text);
  if (!c.ok)
    return "<front-end error>";
  std::vector<RefTensor> outs;
  std::string err;
  EXPECT_FALSE(interpret(c.kernel(), inputs, &outs, &err)) << "expected an interpreter error";
  return err;
}

const char *kSdpa = R"(
kernel sdpa(q: f32[B, H, Nq, D], k: f32[B, H, Nk, D], v: f32[B, H, Nk, D]) -> o: f32[B, H, Nq, D] {
  s(b, h, i, j) = rsqrt(D) * sum(d) q(b, h, i, d) * k(b, h, j, d)
  p(b, h, i, j) = softmax(j) s(b, h, i, j)
  o(b, h, i, e) = sum(j) p(b, h, i, j) * v(b, h, j, e)
}
)";

// ---------------------------------------------------------------------------------------------
// SDPA against the hand-written fp64 reference
// ---------------------------------------------------------------------------------------------

TEST(Interpreter, SdpaMatchesReference) {
  const int B = 2, H = 3, Nq = 5, Nk = 7, D = 8;
  std::vector<double> q = randomData(B * H * Nq * D, 1), k = randomData(B * H * Nk * D, 2),
                      v = randomData(B * H * Nk * D, 3);
  auto outs = run(kSdpa, {f32({B, H, Nq, D}, q), f32({B, H, Nk, D}, k), f32({B, H, Nk, D}, v)});
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_THAT(outs[0].shape, ElementsAre(B, H, Nq, D));
  EXPECT_FALSE(outs[0].isInt);
  std::vector<float> qf(q.begin(), q.end()), kf(k.begin(), k.end()), vf(v.begin(), v.end());
  std::vector<double> ref =
      attnc_ref::sdpa<double>(qf.data(), kf.data(), vf.data(), B, H, Nq, Nk, D);
  ASSERT_EQ(outs[0].data.size(), ref.size());
  EXPECT_LT(attnc_ref::maxAbsDiff(outs[0].data, ref), 1e-12);
  // Sanity: the reference is not trivially small, so the comparison means something.
  double mx = 0;
  for (double x : ref)
    mx = std::max(mx, std::abs(x));
  EXPECT_GT(mx, 0.1);
}

TEST(Interpreter, CausalSoftmaxRowsSumToOne) {
  const char *src = R"(
kernel causal(s: f32[N, N]) -> p: f32[N, N] {
  p(i, j) = softmax(j where j <= i) s(i, j)
}
)";
  const int N = 4;
  std::vector<double> s = randomData(N * N, 4);
  auto outs = run(src, {f32({N, N}, s)});
  ASSERT_EQ(outs.size(), 1u);
  for (int i = 0; i < N; ++i) {
    double mx = -INFINITY, sum = 0;
    for (int j = 0; j <= i; ++j)
      mx = std::max(mx, s[i * N + j]);
    for (int j = 0; j <= i; ++j)
      sum += std::exp(s[i * N + j] - mx);
    for (int j = 0; j < N; ++j) {
      double want = j <= i ? std::exp(s[i * N + j] - mx) / sum : 0.0;
      EXPECT_NEAR(outs[0].data[i * N + j], want, 1e-15) << "p(" << i << ", " << j << ")";
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Integer semantics
// ---------------------------------------------------------------------------------------------

TEST(Interpreter, FloorDivisionAndModulo) {
  const char *src = R"(
kernel ints(a: i32[N], b: i32[M]) -> (q: i32[N, M], r: i32[N, M]) {
  q(i, j) = a(i) / b(j)
  r(i, j) = a(i) % b(j)
}
)";
  std::vector<double> a = {-7, 7, 0, -8, 9}, b = {2, -2, 3, -3, 1, -1};
  auto outs = run(src, {i32({5}, a), i32({6}, b)});
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_TRUE(outs[0].isInt);
  EXPECT_TRUE(outs[1].isInt);
  EXPECT_THAT(outs[0].shape, ElementsAre(5, 6));
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t j = 0; j < b.size(); ++j) {
      double fq = std::floor(a[i] / b[j]);
      EXPECT_EQ(outs[0].data[i * 6 + j], fq) << a[i] << " / " << b[j];
      EXPECT_EQ(outs[1].data[i * 6 + j], a[i] - b[j] * fq) << a[i] << " % " << b[j];
    }
  // The documented examples.
  EXPECT_EQ(outs[0].data[0 * 6 + 0], -4); // -7 / 2
  EXPECT_EQ(outs[0].data[1 * 6 + 1], -4); // 7 / -2
  EXPECT_EQ(outs[1].data[0 * 6 + 2], 2);  // -7 % 3
  EXPECT_EQ(outs[1].data[1 * 6 + 3], -2); // 7 % -3
}

TEST(Interpreter, PromotionAndIntegerLocals) {
  const char *src = R"(
kernel promo(a: i32[N]) -> (f: f32[N], g: i32[N], h: f32[N], l: f32[N], c: i32[N]) {
  const w = 3, half = 1 / 2.0
  f(i) = a(i) / 2.0 + half
  g(i) = select(a(i) < 0.5, 1, 0) + w
  h(i) = a(i) / 2
  t(i in 0..N) = i * 2 - 1
  l(i) = t(i) + 0.25
  c(i) = (i + 1) / 2 * -1 + max(i, 1) + abs(-2) + min(a(i), 0)
}
)";
  auto outs = run(src, {i32({4}, {-7, 3, 0, 5})});
  ASSERT_EQ(outs.size(), 5u);
  EXPECT_THAT(outs[0].data, ElementsAre(-3.0, 2.0, 0.5, 3.0));
  EXPECT_FALSE(outs[0].isInt);
  EXPECT_THAT(outs[1].data, ElementsAre(4, 3, 4, 3));
  EXPECT_TRUE(outs[1].isInt);
  EXPECT_THAT(outs[2].data, ElementsAre(-4.0, 1.0, 0.0, 2.0)); // integer division, then converted
  EXPECT_THAT(outs[3].data, ElementsAre(-0.75, 1.25, 3.25, 5.25));
  // (i+1)/2*-1: 0,-1,-1,-2; max(i,1): 1,1,2,3; abs(-2): 2; min(a,0): -7,0,0,0
  EXPECT_THAT(outs[4].data, ElementsAre(-4, 2, 3, 3));
}

TEST(Interpreter, FloatBuiltins) {
  const char *src = R"(
kernel fns(x: f32[N]) -> o: f32[N, 8] {
  o(i, c in 0..8) = select(c == 0, exp(x(i)), select(c == 1, log(abs(x(i))), select(c == 2, sqrt(abs(x(i))),
                    select(c == 3, rsqrt(abs(x(i))), select(c == 4, tanh(x(i)) + sin(x(i)) * cos(x(i)),
                    select(c == 5, erf(x(i)), select(c == 6, floor(x(i)), pow(abs(x(i)), 1.5))))))))
}
)";
  std::vector<double> x = {-1.75, 0.5, 2.25};
  auto outs = run(src, {f32({3}, x)});
  ASSERT_EQ(outs.size(), 1u);
  for (size_t i = 0; i < x.size(); ++i) {
    double a = std::abs(x[i]);
    std::vector<double> want = {std::exp(x[i]),
                                std::log(a),
                                std::sqrt(a),
                                1 / std::sqrt(a),
                                std::tanh(x[i]) + std::sin(x[i]) * std::cos(x[i]),
                                std::erf(x[i]),
                                std::floor(x[i]),
                                std::pow(a, 1.5)};
    for (int c = 0; c < 8; ++c)
      EXPECT_DOUBLE_EQ(outs[0].data[i * 8 + c], want[c]) << "x=" << x[i] << " c=" << c;
  }
}

// ---------------------------------------------------------------------------------------------
// Reductions
// ---------------------------------------------------------------------------------------------

TEST(Interpreter, ReductionsWithOffsetRanges) {
  const char *src = R"(
kernel red(x: f32[N]) -> (s: f32[], mx: f32[], mn: f32[], e: f32[], em: f32[], m: f32[]) {
  s() = sum(j in 2..N) x(j)
  mx() = max(j in 1..N - 1) x(j)
  mn() = min(j in 2..N) x(j)
  e() = sum(j in 3..2) x(j)
  em() = max(j in 3..3) x(j)
  m() = mean(j in 1..N) x(j)
}
)";
  std::vector<double> x = {-10, 4, 1.5, -2, 8};
  auto outs = run(src, {f32({5}, x)});
  ASSERT_EQ(outs.size(), 6u);
  for (const auto &o : outs)
    EXPECT_TRUE(o.shape.empty());
  EXPECT_THAT(outs[0].data, ElementsAre(7.5));       // 1.5 - 2 + 8
  EXPECT_THAT(outs[1].data, ElementsAre(4.0));       // max of x(1..3): excludes 8
  EXPECT_THAT(outs[2].data, ElementsAre(-2.0));      // min of x(2..4): excludes -10
  EXPECT_THAT(outs[3].data, ElementsAre(0.0));       // empty sum
  EXPECT_THAT(outs[4].data, ElementsAre(-INFINITY)); // empty max
  EXPECT_THAT(outs[5].data, ElementsAre(11.5 / 4));  // mean of x(1..4)
}

TEST(Interpreter, IntegerAndMultiIndexReductions) {
  const char *src = R"(
kernel ired(w: i32[N, M]) -> (t: i32[N], u: i32[], v: i32[], z: i32[], f: f32[N]) {
  t(i) = sum(j in 1..M) w(i, j)
  u() = max(a, b) w(a, b) * 2
  v() = min(j in 1..1) w(0, j)
  z() = sum(a in 1..N, b in 0..M - 1) w(a, b + 0) % 3
  f(i) = 1.0 + sum(j) w(i, j) / 2
}
)";
  // w = [[1, -2, 3], [4, 5, -6]]
  auto outs = run(src, {i32({2, 3}, {1, -2, 3, 4, 5, -6})});
  ASSERT_EQ(outs.size(), 5u);
  EXPECT_THAT(outs[0].data, ElementsAre(1, -1));
  EXPECT_THAT(outs[1].data, ElementsAre(10));
  EXPECT_THAT(outs[2].data, ElementsAre(2147483647)); // empty min of an int: the largest i32
  EXPECT_THAT(outs[3].data, ElementsAre(1 + 2));      // 4 % 3 + 5 % 3
  // floor division per element: 1/2=0, -2/2=-1, 3/2=1 -> 0; 4/2=2, 5/2=2, -6/2=-3 -> 1
  EXPECT_THAT(outs[4].data, ElementsAre(1.0, 2.0));
}

// ---------------------------------------------------------------------------------------------
// Softmax masks and -inf scores
// ---------------------------------------------------------------------------------------------

TEST(Interpreter, MaskedSoftmaxFullyMaskedRowIsZero) {
  const char *src = R"(
kernel masked(s: f32[N, M], keep: i32[N, M]) -> p: f32[N, M] {
  p(i, j) = softmax(j where keep(i, j) != 0) s(i, j)
}
)";
  std::vector<double> s = {1, 2, 3, 4, 5, 6, 0.5, 0.25, 7};
  std::vector<double> keep = {1, 0, 1, 0, 0, 0, 1, 1, 1};
  auto outs = run(src, {f32({3, 3}, s), i32({3, 3}, keep)});
  ASSERT_EQ(outs.size(), 1u);
  const auto &p = outs[0].data;
  double z0 = std::exp(1 - 3.0) + 1;
  EXPECT_NEAR(p[0], std::exp(1 - 3.0) / z0, 1e-15);
  EXPECT_EQ(p[1], 0.0);
  EXPECT_NEAR(p[2], 1 / z0, 1e-15);
  EXPECT_THAT(std::vector<double>(p.begin() + 3, p.begin() + 6),
              ElementsAre(0.0, 0.0, 0.0)); // fully masked, not NaN
  double z2 = std::exp(0.5 - 7) + std::exp(0.25 - 7) + 1;
  EXPECT_NEAR(p[6], std::exp(0.5 - 7) / z2, 1e-15);
  EXPECT_NEAR(p[8], 1 / z2, 1e-15);
}

TEST(Interpreter, MinusInfinityScoresAreMasked) {
  const char *src = R"(
kernel inf(s: f32[N, M]) -> (p: f32[N, M], q: f32[N, M]) {
  p(i, j) = softmax(j) s(i, j)
  q(i, j) = softmax(j where j > 0) s(i, j)
}
)";
  const double ninf = -INFINITY;
  std::vector<double> s = {ninf, ninf, ninf, 0.0, ninf, 0.0, ninf, 2.0, ninf};
  auto outs = run(src, {f32({3, 3}, s)});
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_THAT(outs[0].data, ElementsAre(0.0, 0.0, 0.0, 0.5, 0.0, 0.5, 0.0, 1.0, 0.0));
  // Row 1 with j > 0: only s(1, 2) = 0 is unmasked and finite.
  EXPECT_THAT(outs[1].data, ElementsAre(0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0));
}

TEST(Interpreter, SoftmaxOverTwoAxes) {
  const char *src = R"(
kernel two(s: f32[B, N, M]) -> p: f32[B, N, M] {
  p(b, i, j) = softmax(i, j) s(b, i, j) * 0.5
}
)";
  std::vector<double> s = randomData(2 * 3 * 4, 5);
  auto outs = run(src, {f32({2, 3, 4}, s)});
  ASSERT_EQ(outs.size(), 1u);
  for (int b = 0; b < 2; ++b) {
    double mx = -INFINITY, sum = 0;
    for (int t = 0; t < 12; ++t)
      mx = std::max(mx, 0.5 * s[b * 12 + t]);
    for (int t = 0; t < 12; ++t)
      sum += std::exp(0.5 * s[b * 12 + t] - mx);
    for (int t = 0; t < 12; ++t)
      EXPECT_NEAR(outs[0].data[b * 12 + t], std::exp(0.5 * s[b * 12 + t] - mx) / sum, 1e-15);
  }
}

// ---------------------------------------------------------------------------------------------
// let and def
// ---------------------------------------------------------------------------------------------

TEST(Interpreter, LetAndFunctionsComputeLayerNorm) {
  const char *src = R"(
def layer_norm(x, gamma, beta, c, eps) =
  let mu = mean(k) x(k),
      var = mean(k) (x(k) - mu) * (x(k) - mu)
  in (x(c) - mu) * rsqrt(var + eps) * gamma(c) + beta(c)
kernel ln(x: f32[N, C], g: f32[C], b: f32[C]) -> (o: f32[N, C], d: f32[N]) {
  o(i, c) = layer_norm(x(i), g, b, c, 1e-5)
  d(i) = let t = x(i, 0) * 2.0 in t + t
}
)";
  const int N = 3, C = 5;
  std::vector<double> x = randomData(N * C, 6), g = randomData(C, 7), b = randomData(C, 8);
  auto outs = run(src, {f32({N, C}, x), f32({C}, g), f32({C}, b)});
  ASSERT_EQ(outs.size(), 2u);
  const double eps = 1e-5;
  for (int i = 0; i < N; ++i) {
    double mu = 0, var = 0;
    for (int c = 0; c < C; ++c)
      mu += x[i * C + c] / C;
    for (int c = 0; c < C; ++c)
      var += (x[i * C + c] - mu) * (x[i * C + c] - mu) / C;
    for (int c = 0; c < C; ++c)
      EXPECT_NEAR(outs[0].data[i * C + c], (x[i * C + c] - mu) / std::sqrt(var + eps) * g[c] + b[c],
                  1e-12);
    EXPECT_DOUBLE_EQ(outs[1].data[i], 4 * x[i * C]);
  }
}

TEST(Interpreter, ProductOutputDimension) {
  // The heads concatenated: o[n, m*D + d] = x[n, m, d] + m, and [x, 10 x] along the channels.
  const char *src = R"(
kernel h(x: f32[N, M, D]) -> (o: f32[N, M * D], p: f32[2 * M * D]) {
  o(n, c) = x.clamp(n, c / D, c % D) + c / D
  p(i) = select(i < M * D, 1.0, 10.0) * x.clamp(0, (i % (M * D)) / D, i % D)
}
)";
  std::vector<double> x = randomData(2 * 3 * 2, 7);
  auto outs = run(src, {f32({2, 3, 2}, x)});
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_THAT(outs[0].shape, ElementsAre(2, 6));
  EXPECT_THAT(outs[1].shape, ElementsAre(12));
  for (int n = 0; n < 2; ++n)
    for (int c = 0; c < 6; ++c)
      EXPECT_DOUBLE_EQ(outs[0].data[n * 6 + c], x[n * 6 + c] + c / 2);
  for (int i = 0; i < 12; ++i)
    EXPECT_DOUBLE_EQ(outs[1].data[i], (i < 6 ? 1 : 10) * x[i % 6]);
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

TEST(InterpreterErrors, WrongRank) {
  std::string err =
      runError(kSdpa, {f32({2, 5, 8}, randomData(80, 1)), f32({1, 1, 3, 8}, randomData(24, 2)),
                       f32({1, 1, 3, 8}, randomData(24, 3))});
  EXPECT_THAT(err, AllOf(HasSubstr("input 'q'"), HasSubstr("rank 3"), HasSubstr("f32[B, H, Nq, D]"),
                         HasSubstr("rank 4")));
}

TEST(InterpreterErrors, WrongSizeNamesTensorAndDimension) {
  std::string err =
      runError(kSdpa, {f32({1, 1, 2, 4}, randomData(8, 1)), f32({1, 1, 7, 4}, randomData(28, 2)),
                       f32({1, 1, 6, 4}, randomData(24, 3))});
  EXPECT_EQ(err, "input 'v' dimension 2 (Nk) is 6, but Nk = 7 from input 'k' dimension 2");
}

TEST(InterpreterErrors, WrongLiteralDimension) {
  const char *src = "kernel lit(x: f32[N, 3]) -> o: f32[N] {\n  o(i) = x(i, 0)\n}\n";
  std::string err = runError(src, {f32({2, 4}, randomData(8, 1))});
  EXPECT_EQ(err, "input 'x' dimension 1 is 4, but the kernel declares 3 (f32[N, 3])");
}

TEST(InterpreterErrors, WrongDtypeAndCount) {
  std::string err = runError(kSdpa, {f32({1, 1, 2, 4}, randomData(8, 1)),
                                     i32({1, 1, 3, 4}, std::vector<double>(12, 1)),
                                     f32({1, 1, 3, 4}, randomData(12, 3))});
  EXPECT_EQ(err, "input 'k' is i32, but the kernel declares f32[B, H, Nk, D]");
  err = runError(kSdpa, {f32({1, 1, 2, 4}, randomData(8, 1))});
  EXPECT_EQ(err, "kernel 'sdpa' takes 3 inputs, got 1");
  err = runError(kSdpa, {f32({1, 1, 2, 4}, randomData(7, 1)), f32({1, 1, 3, 4}, randomData(12, 2)),
                         f32({1, 1, 3, 4}, randomData(12, 3))});
  EXPECT_THAT(err, HasSubstr("input 'q' holds 7 values, but its shape [1, 1, 2, 4] needs 8"));
}

TEST(InterpreterErrors, OutOfRangeRead) {
  const char *src = "kernel shift(x: f32[N]) -> o: f32[N] {\n  o(i) = x(i + 1)\n}\n";
  std::string err = runError(src, {f32({4}, {1, 2, 3, 4})});
  EXPECT_THAT(err, AllOf(HasSubstr("definition 'o'"), HasSubstr("index 4"),
                         HasSubstr("'x' dimension 0"), HasSubstr("extent 4"), HasSubstr("2:10")));
  // A read of a definition is checked too, and a guarded read is not evaluated.
  const char *guarded = R"(
kernel g(x: f32[N]) -> (o: f32[N], r: f32[N]) {
  t(i) = x(i) * 2.0
  o(i) = select(i > 0, t(i - 1), 0.0)
  r(i) = t(i - 1)
}
)";
  err = runError(guarded, {f32({3}, {1, 2, 3})});
  EXPECT_THAT(err, AllOf(HasSubstr("definition 'r'"), HasSubstr("index -1"),
                         HasSubstr("'t' dimension 0"), HasSubstr("extent 3")));
}

TEST(InterpreterErrors, IntegerDivisionByZero) {
  const char *src = "kernel dz(a: i32[N], b: i32[N]) -> o: i32[N] {\n  o(i) = a(i) / b(i)\n}\n";
  std::string err = runError(src, {i32({3}, {1, 2, 3}), i32({3}, {1, 0, 1})});
  EXPECT_THAT(err, HasSubstr("integer division by zero in definition 'o'"));
  const char *mod = "kernel dz(a: i32[N], b: i32[N]) -> o: i32[N] {\n  o(i) = a(i) % b(i)\n}\n";
  err = runError(mod, {i32({3}, {1, 2, 3}), i32({3}, {1, 1, 0})});
  EXPECT_THAT(err, HasSubstr("integer division by zero in definition 'o'"));
  // A float division by zero is IEEE.
  auto outs =
      run("kernel fz(a: f32[N]) -> o: f32[N] {\n  o(i) = a(i) / 0.0\n}\n", {f32({1}, {1.0})});
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_THAT(outs[0].data, ElementsAre(INFINITY));
}

TEST(InterpreterErrors, ProductDimensionOverflows) {
  // No elements, but sizes whose product does not fit in 64 bits: an error, not a wrapped shape.
  const char *src = "kernel big(x: f32[Z, M, D]) -> o: f32[M * D] {\n  o(c) = 1.0\n}\n";
  std::string err = runError(src, {f32({0, int64_t{1} << 32, int64_t{1} << 32}, {})});
  EXPECT_EQ(err, "output 'o' dimension 0 (M*D) overflows 64 bits (M = 4294967296, D = 4294967296)");
}

TEST(InterpreterErrors, NonIntegralI32Input) {
  const char *src = "kernel n(a: i32[N]) -> o: i32[N] {\n  o(i) = a(i)\n}\n";
  std::string err = runError(src, {i32({2}, {1, 2.5})});
  EXPECT_THAT(err, AllOf(HasSubstr("input 'a'"), HasSubstr("element 1")));
}

} // namespace
} // namespace attnc::dsl
