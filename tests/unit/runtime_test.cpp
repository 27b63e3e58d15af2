// Unit tests for attnc_runtime: registry, size binding, call validation and the Halide buffer bridge (via fake kernels).
#include "attnc/float16.h"
#include "attnc/runtime.h"

#include <HalideRuntime.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <climits>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <set>
#include <thread>

namespace attnc {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// ---------------------------------------------------------------------------
// Fake kernels. They stand in for Halide-generated *_argv functions so the
// buffers the runtime builds can be inspected and the data path exercised.

struct Recorded {
  int calls = 0;
  int nbufs = 0;
  halide_buffer_t bufs[4];
  halide_dimension_t dims[4][kMaxRank];
};
Recorded g_rec;

void record(void **args, int n) {
  ++g_rec.calls;
  g_rec.nbufs = n;
  for (int i = 0; i < n; ++i) {
    const auto *b = static_cast<const halide_buffer_t *>(args[i]);
    g_rec.bufs[i] = *b;
    for (int d = 0; d < b->dimensions; ++d)
      g_rec.dims[i][d] = b->dim[d];
  }
}

float *at4(const halide_buffer_t *b, int i0, int i1, int i2, int i3) {
  const int64_t off = int64_t{i0} * b->dim[0].stride + int64_t{i1} * b->dim[1].stride +
                      int64_t{i2} * b->dim[2].stride + int64_t{i3} * b->dim[3].stride;
  return reinterpret_cast<float *>(b->host) + off;
}

// o[b,h,n,d] = q[b,h,n,d] + v[b,h,0,d], walking Halide coordinates (dim 0 = d).
int fake_sdpa_argv(void **args) {
  record(args, 4);
  auto *q = static_cast<halide_buffer_t *>(args[0]);
  auto *v = static_cast<halide_buffer_t *>(args[2]);
  auto *o = static_cast<halide_buffer_t *>(args[3]);
  if (q->dimensions != 4 || o->dimensions != 4)
    return halide_error_code_bad_dimensions;
  if (q->type.code != halide_type_float || q->type.bits != 32)
    return halide_error_code_bad_type;
  for (int i3 = 0; i3 < o->dim[3].extent; ++i3)
    for (int i2 = 0; i2 < o->dim[2].extent; ++i2)
      for (int i1 = 0; i1 < o->dim[1].extent; ++i1)
        for (int i0 = 0; i0 < o->dim[0].extent; ++i0) {
          float add = v->dim[1].extent > 0 ? *at4(v, i0, 0, i2, i3) : 0.0f;
          *at4(o, i0, i1, i2, i3) = *at4(q, i0, i1, i2, i3) + add;
        }
  return 0;
}

int g_fail_code = 0;
int fake_failing_argv(void **args) {
  record(args, 4);
  return g_fail_code;
}

const char *const kQDims[] = {"B", "H", "Nq", "D"};
const char *const kKDims[] = {"B", "H", "Nk", "D"};
const ParamDesc kSdpaIn[] = {
    {"q", DType::F32, 4, kQDims},
    {"k", DType::F32, 4, kKDims},
    {"v", DType::F32, 4, kKDims},
};
const ParamDesc kSdpaOut[] = {{"o", DType::F32, 4, kQDims}};
const KernelDesc kSdpa = {"sdpa", "host", 3, kSdpaIn, 1, kSdpaOut, fake_sdpa_argv};
const KernelDesc kSdpaFailing = {"sdpa", "host", 3, kSdpaIn, 1, kSdpaOut, fake_failing_argv};

// Same as sdpa but the head dimension is fixed by the kernel.
const char *const kQDims64[] = {"B", "H", "Nq", "64"};
const char *const kKDims64[] = {"B", "H", "Nk", "64"};
const ParamDesc kSdpa64In[] = {
    {"q", DType::F32, 4, kQDims64},
    {"k", DType::F32, 4, kKDims64},
    {"v", DType::F32, 4, kKDims64},
};
const ParamDesc kSdpa64Out[] = {{"o", DType::F32, 4, kQDims64}};
const KernelDesc kSdpa64 = {"sdpa", "host", 3, kSdpa64In, 1, kSdpa64Out, fake_sdpa_argv};

// Rank-0 i32 kernel: y = 2 * x.
int fake_scalar_argv(void **args) {
  record(args, 2);
  auto *x = static_cast<halide_buffer_t *>(args[0]);
  auto *y = static_cast<halide_buffer_t *>(args[1]);
  *reinterpret_cast<int32_t *>(y->host) = 2 * *reinterpret_cast<int32_t *>(x->host);
  return 0;
}
const ParamDesc kScalarIn[] = {{"x", DType::I32, 0, nullptr}};
const ParamDesc kScalarOut[] = {{"y", DType::I32, 0, nullptr}};
const KernelDesc kScalar = {"twice", "host", 1, kScalarIn, 1, kScalarOut, fake_scalar_argv};

// Rank-1 kernel x[N] -> y[N] that only records.
int fake_vec_argv(void **args) {
  record(args, 2);
  return 0;
}
const char *const kNDims[] = {"N"};
const ParamDesc kVecIn[] = {{"x", DType::F32, 1, kNDims}};
const ParamDesc kVecOut[] = {{"y", DType::F32, 1, kNDims}};
const KernelDesc kVec = {"vec", "host", 1, kVecIn, 1, kVecOut, fake_vec_argv};

// Two outputs, to check output/output aliasing.
const ParamDesc kVec2Out[] = {{"y1", DType::F32, 1, kNDims}, {"y2", DType::F32, 1, kNDims}};
const KernelDesc kVec2 = {"vec2", "host", 1, kVecIn, 2, kVec2Out, fake_vec_argv};

// Output dimension uses a symbol no input binds.
const char *const kXDims[] = {"X"};
const ParamDesc kUnboundOut[] = {{"y", DType::F32, 1, kXDims}};
const KernelDesc kUnbound = {"unbound", "host", 1, kVecIn, 1, kUnboundOut, fake_vec_argv};

struct Sdpa {
  int64_t B = 2, H = 3, Nq = 5, Nk = 4, D = 8;
  std::vector<float> q, k, v, o;
  Sdpa() { resize(); }
  void resize() {
    q.resize(B * H * Nq * D);
    k.resize(B * H * Nk * D);
    v.resize(B * H * Nk * D);
    o.assign(B * H * Nq * D, -1.0f);
    std::iota(q.begin(), q.end(), 0.0f);
    std::iota(k.begin(), k.end(), 1000.0f);
    std::iota(v.begin(), v.end(), 0.5f);
  }
  std::vector<TensorView> ins() {
    return {TensorView::f32(q.data(), {B, H, Nq, D}), TensorView::f32(k.data(), {B, H, Nk, D}),
            TensorView::f32(v.data(), {B, H, Nk, D})};
  }
  std::vector<TensorView> outs() { return {TensorView::f32(o.data(), {B, H, Nq, D})}; }
  float expected(int64_t b, int64_t h, int64_t n, int64_t d) const {
    return q[((b * H + h) * Nq + n) * D + d] + v[((b * H + h) * Nk + 0) * D + d];
  }
};

// ---------------------------------------------------------------------------

TEST(DTypeTest, NamesAndSizes) {
  EXPECT_STREQ(dtype_name(DType::F32), "f32");
  EXPECT_STREQ(dtype_name(DType::I32), "i32");
  EXPECT_EQ(dtype_size(DType::F32), 4u);
  EXPECT_EQ(dtype_size(DType::I32), 4u);
  EXPECT_STREQ(dtype_name(DType::BF16), "bf16");
  EXPECT_STREQ(dtype_name(DType::F16), "f16");
  EXPECT_EQ(dtype_size(DType::BF16), 2u);
  EXPECT_EQ(dtype_size(DType::F16), 2u);
  for (const DTypeInfo &i : kDTypes) {
    DType t;
    ASSERT_TRUE(parse_dtype(i.name, &t));
    EXPECT_EQ(t, i.dtype);
  }
  DType t;
  EXPECT_FALSE(parse_dtype("f64", &t));
}

// attnc/float16.h against independent conversions: every bf16 and f16 bit pattern round-trips
// through float, and float -> f16 agrees with the compiler's own _Float16 conversion (F16C or
// its software routine, round to nearest even) on every f16 value, every midpoint between two
// (the ties) and random floats over the whole range; float -> bf16 keeps the top half of an
// exactly representable float and rounds midpoints to even.
TEST(Float16Test, BitsRoundTripAndRoundToNearestEven) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    const uint16_t h = (uint16_t)b;
    const float fb = bf16_bits_to_float(h), fh = f16_bits_to_float(h);
    if (std::isnan(fb))
      EXPECT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(fb))));
    else
      ASSERT_EQ(float_to_bf16_bits(fb), h) << b;
    if (std::isnan(fh)) {
      EXPECT_TRUE(std::isnan(f16_bits_to_float(float_to_f16_bits(fh))));
      continue;
    }
    ASSERT_EQ(float_to_f16_bits(fh), h) << b;
    const _Float16 c = (_Float16)fh;
    ASSERT_EQ((float)c, fh) << b;
    EXPECT_EQ(round_to_dtype(fh, DType::F16), (double)fh);
  }
  auto hw = [](float f) {
    _Float16 c = (_Float16)f;
    uint16_t u;
    std::memcpy(&u, &c, 2);
    return u;
  };
  // Midpoints between neighbouring finite f16 values of one sign: the ties.
  for (uint16_t b = 0; b < 0x7bff; ++b) {
    const float mid = (float)(0.5 * ((double)f16_bits_to_float(b) + f16_bits_to_float(b + 1)));
    ASSERT_EQ(float_to_f16_bits(mid), hw(mid)) << b;
    ASSERT_EQ(float_to_f16_bits(-mid), hw(-mid)) << b;
  }
  uint64_t x = 88172645463325252ull;
  for (int n = 0; n < 200000; ++n) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    uint32_t u = (uint32_t)x;
    float f;
    std::memcpy(&f, &u, 4);
    if (std::isnan(f))
      continue;
    ASSERT_EQ(float_to_f16_bits(f), hw(f)) << f;
    // bf16: the nearest of the two candidates, the even one on a tie.
    const uint16_t lo = (uint16_t)(u >> 16), b = float_to_bf16_bits(f);
    const uint32_t rest = u & 0xffff;
    const uint16_t want = rest > 0x8000 || (rest == 0x8000 && (lo & 1)) ? lo + 1 : lo;
    ASSERT_EQ(b, want) << f;
    EXPECT_EQ(round_to_dtype(f, DType::BF16), (double)bf16_bits_to_float(b)) << f;
  }
  EXPECT_EQ(float_to_f16_bits(65504.f), 0x7bff);
  EXPECT_EQ(float_to_f16_bits(65520.f), 0x7c00); // the midpoint to the next binade: infinity
  EXPECT_EQ(float_to_bf16_bits(3.4028235e38f), 0x7f80);
  EXPECT_EQ(round_to_dtype(1e-9, DType::F16), 0.0);
  EXPECT_EQ(round_to_dtype(std::ldexp(3.0, -25), DType::F16), std::ldexp(1.0, -23)); // ties to even
  EXPECT_EQ(round_to_dtype(std::ldexp(1.0, -25), DType::F16), 0.0);
}

TEST(StatusTest, OkAndError) {
  EXPECT_TRUE(Status::Ok().ok());
  EXPECT_EQ(Status::Ok().message(), "");
  Status e = Status::Error("boom");
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.message(), "boom");
}

TEST(TensorViewTest, ContiguousStrides) {
  float buf[24];
  TensorView v = TensorView::f32(buf, {2, 3, 4});
  EXPECT_EQ(v.data, buf);
  EXPECT_EQ(v.dtype, DType::F32);
  EXPECT_EQ(v.rank, 3);
  EXPECT_EQ(v.shape[0], 2);
  EXPECT_EQ(v.shape[2], 4);
  EXPECT_EQ(v.strides[0], 12);
  EXPECT_EQ(v.strides[1], 4);
  EXPECT_EQ(v.strides[2], 1);
  EXPECT_EQ(v.numel(), 24);
}

TEST(TensorViewTest, ScalarZeroSizeAndTooManyDims) {
  int32_t x = 0;
  TensorView s = TensorView::i32(&x, {});
  EXPECT_EQ(s.rank, 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_EQ(s.dtype, DType::I32);

  TensorView z = TensorView::contiguous(nullptr, DType::F32, {2, 0, 3});
  EXPECT_EQ(z.numel(), 0);
  // Matches numpy: zero-size dims count as 1 when computing outer strides.
  EXPECT_EQ(z.strides[0], 3);
  EXPECT_EQ(z.strides[1], 3);
  EXPECT_EQ(z.strides[2], 1);

  EXPECT_THROW(TensorView::contiguous(nullptr, DType::F32, std::vector<int64_t>(9, 1)),
               std::invalid_argument);
}

// ---------------------------------------------------------------------------
// Registry

TEST(RegistryTest, AddFindReplaceList) {
  Registry r;
  EXPECT_EQ(r.find("sdpa", "host"), nullptr);
  EXPECT_TRUE(r.list().empty());

  KernelDesc a = kSdpa;
  KernelDesc b = kSdpa;
  b.target = "host-cuda";
  KernelDesc c = kVec;
  r.add(&c);
  r.add(&b);
  r.add(&a);
  r.add(nullptr); // ignored
  EXPECT_EQ(r.find("sdpa", "host"), &a);
  EXPECT_EQ(r.find("sdpa", "host-cuda"), &b);
  EXPECT_EQ(r.find("vec", "host"), &c);
  EXPECT_EQ(r.find("sdpa", "arm"), nullptr);
  EXPECT_EQ(r.find("sdp", "host"), nullptr);

  auto l = r.list();
  ASSERT_EQ(l.size(), 3u);
  // Sorted by (name, target) regardless of insertion order.
  EXPECT_EQ(l[0], &a);
  EXPECT_EQ(l[1], &b);
  EXPECT_EQ(l[2], &c);

  KernelDesc a2 = kSdpa; // same (name, target), different object
  r.add(&a2);
  EXPECT_EQ(r.find("sdpa", "host"), &a2);
  EXPECT_EQ(r.list().size(), 3u);
}

TEST(RegistryTest, NullTargetMatchesEmpty) {
  Registry r;
  KernelDesc d = kVec;
  d.target = nullptr;
  r.add(&d);
  EXPECT_EQ(r.find("vec", ""), &d);
  EXPECT_EQ(r.find("vec", "host"), nullptr);
}

TEST(RegistryTest, ConcurrentAddAndFind) {
  Registry r;
  std::vector<KernelDesc> descs(64, kVec);
  std::vector<std::string> names;
  for (size_t i = 0; i < descs.size(); ++i)
    names.push_back("k" + std::to_string(i));
  for (size_t i = 0; i < descs.size(); ++i)
    descs[i].name = names[i].c_str();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = t; i < descs.size(); i += 4) {
        r.add(&descs[i]);
        EXPECT_EQ(r.find(names[i], "host"), &descs[i]);
        (void)r.list();
      }
    });
  }
  for (auto &th : threads)
    th.join();
  EXPECT_EQ(r.list().size(), descs.size());
}

const KernelDesc kRegistered = {
    "registrar_test_kernel", "host", 1, kVecIn, 1, kVecOut, fake_vec_argv};
const Registrar kRegistrar(&kRegistered);

TEST(RegistryTest, RegistrarAddsToGlobal) {
  EXPECT_EQ(Registry::global().find("registrar_test_kernel", "host"), &kRegistered);
  auto l = Registry::global().list();
  EXPECT_NE(std::find(l.begin(), l.end(), &kRegistered), l.end());
}

// ---------------------------------------------------------------------------
// bind_sizes / output_shapes

TEST(BindSizesTest, BindsAllSymbols) {
  Sdpa t;
  SizeMap sizes;
  Status s = bind_sizes(kSdpa, t.ins(), &sizes);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(sizes, (SizeMap{{"B", 2}, {"H", 3}, {"Nq", 5}, {"Nk", 4}, {"D", 8}}));
  EXPECT_TRUE(bind_sizes(kSdpa, t.ins(), nullptr).ok());
}

TEST(BindSizesTest, WrongInputCount) {
  Sdpa t;
  auto ins = t.ins();
  ins.pop_back();
  Status s = bind_sizes(kSdpa, ins, nullptr);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "sdpa: expected 3 inputs (q, k, v), got 2");
}

TEST(BindSizesTest, NullData) {
  Sdpa t;
  auto ins = t.ins();
  ins[1].data = nullptr;
  Status s = bind_sizes(kSdpa, ins, nullptr);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "sdpa: input 'k' has a null data pointer");
}

TEST(BindSizesTest, WrongDType) {
  Sdpa t;
  auto ins = t.ins();
  ins[0].dtype = DType::I32;
  Status s = bind_sizes(kSdpa, ins, nullptr);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "sdpa: input 'q' has dtype i32, expected f32");
}

TEST(BindSizesTest, WrongRank) {
  Sdpa t;
  auto ins = t.ins();
  ins[2] = TensorView::f32(t.v.data(), {2, 3, 32});
  Status s = bind_sizes(kSdpa, ins, nullptr);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "sdpa: input 'v' has rank 3, expected 4 (B, H, Nk, D)");

  ins[2].rank = 99;
  s = bind_sizes(kSdpa, ins, nullptr);
  EXPECT_THAT(s.message(), HasSubstr("input 'v' has invalid rank 99"));
}

TEST(BindSizesTest, NegativeShape) {
  Sdpa t;
  auto ins = t.ins();
  ins[0].shape[2] = -5;
  Status s = bind_sizes(kSdpa, ins, nullptr);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "sdpa: input 'q' dimension 2 (Nq) is -5; sizes must be non-negative");
}

TEST(BindSizesTest, SymbolDisagreement) {
  Sdpa t;
  auto ins = t.ins();
  ins[1].shape[3] = 32; // D on k; q set D = 8
  Status s = bind_sizes(kSdpa, ins, nullptr);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "sdpa: input 'k' dimension 3 (D) is 32, but 'q' dimension 3 set D = 8");

  ins = t.ins();
  ins[2].shape[2] = 7; // Nk on v; first bound by k
  s = bind_sizes(kSdpa, ins, nullptr);
  EXPECT_EQ(s.message(), "sdpa: input 'v' dimension 2 (Nk) is 7, but 'k' dimension 2 set Nk = 4");
}

TEST(BindSizesTest, LiteralDims) {
  std::vector<float> q(64 * 2), k(64 * 3), v(64 * 3);
  std::vector<TensorView> ins = {TensorView::f32(q.data(), {1, 1, 2, 64}),
                                 TensorView::f32(k.data(), {1, 1, 3, 64}),
                                 TensorView::f32(v.data(), {1, 1, 3, 64})};
  SizeMap sizes;
  ASSERT_TRUE(bind_sizes(kSdpa64, ins, &sizes).ok());
  EXPECT_EQ(sizes.count("64"), 0u); // literals are not symbols
  EXPECT_EQ(sizes.size(), 4u);

  ins[0] = TensorView::f32(q.data(), {1, 1, 4, 32});
  Status s = bind_sizes(kSdpa64, ins, nullptr);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "sdpa: input 'q' dimension 3 is 32, expected 64");
}

TEST(BindSizesTest, MalformedDescriptor) {
  const char *const bad_dims[] = {"B", "3x"};
  const ParamDesc in[] = {{"x", DType::F32, 2, bad_dims}};
  const KernelDesc bad = {"bad", "host", 1, in, 0, nullptr, fake_vec_argv};
  float x[6];
  Status s = bind_sizes(bad, {TensorView::f32(x, {2, 3})}, nullptr);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), StartsWith("bad: malformed kernel descriptor"));
  EXPECT_THAT(s.message(), HasSubstr("input 'x' dimension 1 is '3x'"));
}

TEST(OutputShapesTest, ComputesShapes) {
  SizeMap sizes = {{"B", 2}, {"H", 3}, {"Nq", 5}, {"Nk", 4}, {"D", 8}};
  std::vector<std::vector<int64_t>> shapes;
  ASSERT_TRUE(output_shapes(kSdpa, sizes, &shapes).ok());
  ASSERT_EQ(shapes.size(), 1u);
  EXPECT_EQ(shapes[0], (std::vector<int64_t>{2, 3, 5, 8}));

  ASSERT_TRUE(output_shapes(kSdpa64, sizes, &shapes).ok());
  EXPECT_EQ(shapes[0], (std::vector<int64_t>{2, 3, 5, 64}));

  ASSERT_TRUE(output_shapes(kScalar, {}, &shapes).ok());
  ASSERT_EQ(shapes.size(), 1u);
  EXPECT_TRUE(shapes[0].empty());
}

TEST(OutputShapesTest, UnboundSymbol) {
  std::vector<std::vector<int64_t>> shapes;
  Status s = output_shapes(kUnbound, {{"N", 4}}, &shapes);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "unbound: output 'y' dimension 0 uses size 'X', which no input binds");

  std::vector<float> x(4), y(4);
  s = validate_call(kUnbound, {TensorView::f32(x.data(), {4})}, {TensorView::f32(y.data(), {4})});
  EXPECT_THAT(s.message(), HasSubstr("uses size 'X'"));
}

// ---------------------------------------------------------------------------
// validate_call

TEST(ValidateCallTest, AcceptsGoodCallAndReturnsSizes) {
  Sdpa t;
  SizeMap sizes;
  Status s = validate_call(kSdpa, t.ins(), t.outs(), &sizes);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(sizes.at("Nq"), 5);
}

TEST(ValidateCallTest, WrongOutputCount) {
  Sdpa t;
  Status s = validate_call(kSdpa, t.ins(), {});
  EXPECT_EQ(s.message(), "sdpa: expected 1 output (o), got 0");
}

TEST(ValidateCallTest, OutputNullDtypeRank) {
  Sdpa t;
  auto outs = t.outs();
  outs[0].data = nullptr;
  EXPECT_EQ(validate_call(kSdpa, t.ins(), outs).message(),
            "sdpa: output 'o' has a null data pointer");

  outs = t.outs();
  outs[0].dtype = DType::I32;
  EXPECT_EQ(validate_call(kSdpa, t.ins(), outs).message(),
            "sdpa: output 'o' has dtype i32, expected f32");

  outs[0] = TensorView::f32(t.o.data(), {2, 3, 40});
  EXPECT_EQ(validate_call(kSdpa, t.ins(), outs).message(),
            "sdpa: output 'o' has rank 3, expected 4 (B, H, Nq, D)");
}

TEST(ValidateCallTest, OutputShapeMismatch) {
  Sdpa t;
  t.Nq = 128;
  t.resize();
  std::vector<float> small(2 * 3 * 100 * 8);
  std::vector<TensorView> outs = {TensorView::f32(small.data(), {2, 3, 100, 8})};
  Status s = validate_call(kSdpa, t.ins(), outs);
  EXPECT_EQ(s.message(), "sdpa: output 'o' dimension 2 (Nq) is 100, expected 128");
}

TEST(ValidateCallTest, OutputLiteralDimMismatch) {
  std::vector<float> q(64 * 2), k(64 * 3), v(64 * 3), o(64 * 2);
  std::vector<TensorView> ins = {TensorView::f32(q.data(), {1, 1, 2, 64}),
                                 TensorView::f32(k.data(), {1, 1, 3, 64}),
                                 TensorView::f32(v.data(), {1, 1, 3, 64})};
  Status s = validate_call(kSdpa64, ins, {TensorView::f32(o.data(), {1, 1, 4, 32})});
  EXPECT_EQ(s.message(), "sdpa: output 'o' dimension 2 (Nq) is 4, expected 2");
  s = validate_call(kSdpa64, ins, {TensorView::f32(o.data(), {1, 1, 2, 32})});
  EXPECT_EQ(s.message(), "sdpa: output 'o' dimension 3 is 32, expected 64");
}

TEST(ValidateCallTest, BroadcastInputAllowedButNotOutput) {
  Sdpa t;
  auto ins = t.ins();
  // k broadcast over B: both batches read batch 0.
  ins[1].strides[0] = 0;
  EXPECT_TRUE(validate_call(kSdpa, ins, t.outs()).ok());

  auto outs = t.outs();
  outs[0].strides[1] = 0;
  Status s = validate_call(kSdpa, t.ins(), outs);
  EXPECT_EQ(s.message(), "sdpa: output 'o' dimension 1 has stride 0; outputs cannot be broadcast");

  // Stride 0 on an extent-1 dimension never aliases anything.
  Sdpa one;
  one.B = 1;
  one.resize();
  outs = one.outs();
  outs[0].strides[0] = 0;
  EXPECT_TRUE(validate_call(kSdpa, one.ins(), outs).ok());
}

TEST(ValidateCallTest, OutputSelfAlias) {
  Sdpa t;
  auto outs = t.outs();
  outs[0].strides[2] = 4; // rows of 8 elements advancing by 4: overlap
  Status s = validate_call(kSdpa, t.ins(), outs);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), StartsWith("sdpa: output 'o' has strides that make distinct elements"));
}

TEST(ValidateCallTest, OutputOverlapsInput) {
  Sdpa t;
  // o written over q itself.
  std::vector<TensorView> outs = {TensorView::f32(t.q.data(), {t.B, t.H, t.Nq, t.D})};
  Status s = validate_call(kSdpa, t.ins(), outs);
  EXPECT_EQ(s.message(),
            "sdpa: output 'o' overlaps input 'q' in memory; outputs must not alias inputs");

  // Partial overlap: one shared float at the end of v.
  std::vector<float> big(t.v.size() + t.o.size());
  auto ins = t.ins();
  ins[2].data = big.data();
  outs = {TensorView::f32(big.data() + t.v.size() - 1, {t.B, t.H, t.Nq, t.D})};
  s = validate_call(kSdpa, ins, outs);
  EXPECT_THAT(s.message(), HasSubstr("output 'o' overlaps input 'v'"));

  // Adjacent but disjoint is fine.
  outs = {TensorView::f32(big.data() + t.v.size(), {t.B, t.H, t.Nq, t.D})};
  s = validate_call(kSdpa, ins, outs);
  EXPECT_TRUE(s.ok()) << s.message();
}

TEST(ValidateCallTest, OverlapWithNegativeStrides) {
  std::vector<float> buf(20);
  // x reversed over buf[0..9]: data points at buf[9], stride -1.
  TensorView x = TensorView::f32(buf.data() + 9, {10});
  x.strides[0] = -1;
  TensorView y_overlap = TensorView::f32(buf.data() + 5, {10});
  TensorView y_disjoint = TensorView::f32(buf.data() + 10, {10});
  EXPECT_THAT(validate_call(kVec, {x}, {y_overlap}).message(),
              HasSubstr("output 'y' overlaps input 'x'"));
  EXPECT_TRUE(validate_call(kVec, {x}, {y_disjoint}).ok());

  // Output reversed into memory just below the input.
  TensorView x2 = TensorView::f32(buf.data() + 10, {10});
  TensorView y_rev = TensorView::f32(buf.data() + 9, {10});
  y_rev.strides[0] = -1;
  EXPECT_TRUE(validate_call(kVec, {x2}, {y_rev}).ok());
  y_rev.data = buf.data() + 10;
  EXPECT_FALSE(validate_call(kVec, {x2}, {y_rev}).ok());
}

TEST(ValidateCallTest, OutputsOverlapEachOther) {
  std::vector<float> x(8), y(12);
  Status s = validate_call(kVec2, {TensorView::f32(x.data(), {8})},
                           {TensorView::f32(y.data(), {8}), TensorView::f32(y.data() + 4, {8})});
  EXPECT_EQ(s.message(),
            "vec2: output 'y2' overlaps output 'y1' in memory; outputs must not alias each other");
}

TEST(ValidateCallTest, HalideLimits) {
  // Never dereferenced: validation only looks at the pointers.
  static float dummy_in[1], dummy_out[1];
  TensorView x = TensorView::f32(dummy_in, {int64_t{3} << 30});
  TensorView y = TensorView::f32(dummy_out, {int64_t{3} << 30});
  Status s = validate_call(kVec, {x}, {y});
  EXPECT_EQ(s.message(),
            "vec: input 'x' dimension 0 has extent 3221225472, which exceeds Halide's 32-bit "
            "limit");

  x = TensorView::f32(dummy_in, {2});
  x.strides[0] = int64_t{1} << 33;
  y = TensorView::f32(dummy_out, {2});
  s = validate_call(kVec, {x}, {y});
  EXPECT_THAT(s.message(), HasSubstr("input 'x' dimension 0 has stride 8589934592"));

  x = TensorView::f32(dummy_in, {2});
  y.strides[0] = INT64_MIN;
  s = validate_call(kVec, {x}, {y});
  EXPECT_THAT(s.message(), HasSubstr("output 'y' dimension 0 has stride -9223372036854775808"));
}

TEST(ValidateCallTest, ZeroSizeTensorsMayHaveNullData) {
  Status s = validate_call(kVec, {TensorView::f32(nullptr, {0})}, {TensorView::f32(nullptr, {0})});
  EXPECT_TRUE(s.ok()) << s.message();
}

// ---------------------------------------------------------------------------
// Product dimensions ("M*D"): outputs whose extent is a product of sizes and
// literals, as attnc writes them for `o: f32[N, M * D]`.

const char *const kHeadsInDims[] = {"N", "M", "D"};
const char *const kHeadsODims[] = {"N", "M*D"};
const char *const kHeadsPDims[] = {"2*N*M", "3"};
const ParamDesc kHeadsIn[] = {{"x", DType::F32, 3, kHeadsInDims}};
const ParamDesc kHeadsOut[] = {{"o", DType::F32, 2, kHeadsODims},
                               {"p", DType::F32, 2, kHeadsPDims}};
int fake_heads_argv(void **args) {
  record(args, 3);
  return 0;
}
const KernelDesc kHeads = {"heads", "host", 1, kHeadsIn, 2, kHeadsOut, fake_heads_argv};

struct Heads {
  int64_t N = 2, M = 3, D = 4;
  std::vector<float> x = std::vector<float>(N * M * D), o = std::vector<float>(N * M * D),
                     p = std::vector<float>(2 * N * M * 3);
  std::vector<TensorView> ins() { return {TensorView::f32(x.data(), {N, M, D})}; }
  std::vector<TensorView> outs() {
    return {TensorView::f32(o.data(), {N, M * D}), TensorView::f32(p.data(), {2 * N * M, 3})};
  }
};

TEST(ProductDimsTest, OutputShapesMultiplyTheFactors) {
  std::vector<std::vector<int64_t>> shapes;
  ASSERT_TRUE(output_shapes(kHeads, {{"N", 2}, {"M", 3}, {"D", 4}}, &shapes).ok());
  EXPECT_EQ(shapes, (std::vector<std::vector<int64_t>>{{2, 12}, {12, 3}}));
  // A zero size makes the product zero, as it makes a plain dimension zero.
  ASSERT_TRUE(output_shapes(kHeads, {{"N", 2}, {"M", 0}, {"D", 4}}, &shapes).ok());
  EXPECT_EQ(shapes, (std::vector<std::vector<int64_t>>{{2, 0}, {0, 3}}));
}

TEST(ProductDimsTest, CallAcceptsTheMultipliedShape) {
  Heads t;
  SizeMap sizes;
  Status s = validate_call(kHeads, t.ins(), t.outs(), &sizes);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(sizes, (SizeMap{{"N", 2}, {"M", 3}, {"D", 4}}));
  g_rec = {};
  ASSERT_TRUE(call(kHeads, t.ins(), t.outs()).ok());
  EXPECT_EQ(g_rec.calls, 1);
  EXPECT_EQ(g_rec.dims[1][0].extent, 12); // Halide order: M*D is dimension 0
  EXPECT_EQ(g_rec.dims[1][1].extent, 2);
  EXPECT_EQ(g_rec.dims[2][1].extent, 12);
}

TEST(ProductDimsTest, WrongExtentNamesTheProductAndItsSizes) {
  Heads t;
  auto outs = t.outs();
  outs[0] = TensorView::f32(t.o.data(), {2, 3, 4}); // the unconcatenated layout
  EXPECT_EQ(validate_call(kHeads, t.ins(), outs).message(),
            "heads: output 'o' has rank 3, expected 2 (N, M*D)");
  outs[0] = TensorView::f32(t.o.data(), {2, 11});
  EXPECT_EQ(validate_call(kHeads, t.ins(), outs).message(),
            "heads: output 'o' dimension 1 (M*D) is 11, but M*D = 12 (M = 3, D = 4)");
  outs = t.outs();
  outs[1] = TensorView::f32(t.p.data(), {6, 3});
  EXPECT_EQ(validate_call(kHeads, t.ins(), outs).message(),
            "heads: output 'p' dimension 0 (2*N*M) is 6, but 2*N*M = 12 (N = 2, M = 3)");
  outs = t.outs();
  outs[0].shape[1] = -12;
  EXPECT_EQ(validate_call(kHeads, t.ins(), outs).message(),
            "heads: output 'o' dimension 1 (M*D) is -12; sizes must be non-negative");
}

TEST(ProductDimsTest, ProductOfLiteralsAndRepeatedSizes) {
  const char *const in_dims[] = {"N"};
  const char *const out_dims[] = {"2*3", "N*N"};
  const ParamDesc in[] = {{"x", DType::F32, 1, in_dims}};
  const ParamDesc out[] = {{"y", DType::F32, 2, out_dims}};
  const KernelDesc k = {"lit", "host", 1, in, 1, out, fake_vec_argv};
  std::vector<float> x(3), y(6 * 9);
  std::vector<std::vector<int64_t>> shapes;
  ASSERT_TRUE(output_shapes(k, {{"N", 3}}, &shapes).ok());
  EXPECT_EQ(shapes[0], (std::vector<int64_t>{6, 9}));
  // Only sizes are listed, each once; a product of literals has none to list.
  EXPECT_EQ(validate_call(k, {TensorView::f32(x.data(), {3})}, {TensorView::f32(y.data(), {6, 8})})
                .message(),
            "lit: output 'y' dimension 1 (N*N) is 8, but N*N = 9 (N = 3)");
  EXPECT_EQ(validate_call(k, {TensorView::f32(x.data(), {3})}, {TensorView::f32(y.data(), {5, 9})})
                .message(),
            "lit: output 'y' dimension 0 (2*3) is 5, but 2*3 = 6");
}

TEST(ProductDimsTest, UnboundFactor) {
  std::vector<std::vector<int64_t>> shapes;
  Status s = output_shapes(kHeads, {{"N", 2}, {"M", 3}}, &shapes);
  EXPECT_EQ(s.message(), "heads: output 'o' dimension 1 uses size 'D', which no input binds");
}

TEST(ProductDimsTest, OverflowIsAnError) {
  std::vector<std::vector<int64_t>> shapes;
  const int64_t big = int64_t{1} << 32;
  Status s = output_shapes(kHeads, {{"N", 2}, {"M", big}, {"D", big}}, &shapes);
  EXPECT_EQ(
      s.message(),
      "heads: output 'o' dimension 1 (M*D) overflows 64 bits (M = 4294967296, D = 4294967296)");
  const char *const in_dims[] = {"N"};
  const char *const out_dims[] = {"4294967296*4294967296"};
  const ParamDesc in[] = {{"x", DType::F32, 1, in_dims}};
  const ParamDesc out[] = {{"y", DType::F32, 1, out_dims}};
  const KernelDesc k = {"lit", "host", 1, in, 1, out, fake_vec_argv};
  s = output_shapes(k, {{"N", 1}}, &shapes);
  EXPECT_EQ(s.message(), "lit: output 'y' dimension 0 (4294967296*4294967296) overflows 64 bits");
}

TEST(ProductDimsTest, MalformedProducts) {
  const char *const in_dims[] = {"N"};
  const ParamDesc in[] = {{"x", DType::F32, 1, in_dims}};
  std::vector<float> x(2);
  for (const char *bad : {"N*", "*N", "N**N", "N*3x", "N * N", ""}) {
    const char *const out_dims[] = {bad};
    const ParamDesc out[] = {{"y", DType::F32, 1, out_dims}};
    const KernelDesc k = {"bad", "host", 1, in, 1, out, fake_vec_argv};
    Status s = bind_sizes(k, {TensorView::f32(x.data(), {2})}, nullptr);
    EXPECT_EQ(s.message(),
              std::string("bad: malformed kernel descriptor: output 'y' dimension 0 is '") + bad +
                  "', expected a size symbol, a decimal integer or (outputs only) a product of "
                  "these such as 'M*D'")
        << bad;
  }
}

// bind_sizes reads sizes off input dimensions; a product there could not bind them.
TEST(ProductDimsTest, ProductInAnInputIsMalformed) {
  const char *const in_dims[] = {"N", "M*D"};
  const ParamDesc in[] = {{"x", DType::F32, 2, in_dims}};
  const KernelDesc k = {"bad", "host", 1, in, 0, nullptr, fake_vec_argv};
  std::vector<float> x(6);
  EXPECT_EQ(bind_sizes(k, {TensorView::f32(x.data(), {2, 3})}, nullptr).message(),
            "bad: malformed kernel descriptor: input 'x' dimension 1 is 'M*D', but input "
            "dimensions must be "
            "a size symbol or a decimal integer (products are allowed in outputs only)");
}

// ---------------------------------------------------------------------------
// call

TEST(CallTest, ContiguousDataPathAndBufferLayout) {
  Sdpa t;
  g_rec = Recorded();
  Status s = call(kSdpa, t.ins(), t.outs());
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(g_rec.calls, 1);

  const halide_buffer_t &q = g_rec.bufs[0];
  EXPECT_EQ(q.host, reinterpret_cast<uint8_t *>(t.q.data()));
  EXPECT_EQ(q.device, 0u);
  EXPECT_EQ(q.device_interface, nullptr);
  EXPECT_EQ(q.flags, 0u);
  EXPECT_EQ(q.dimensions, 4);
  EXPECT_EQ(q.type.code, halide_type_float);
  EXPECT_EQ(q.type.bits, 32);
  EXPECT_EQ(q.type.lanes, 1);
  // Halide dim 0 is the innermost C dimension (D).
  const int64_t expect_extent[4] = {t.D, t.Nq, t.H, t.B};
  const int64_t expect_stride[4] = {1, t.D, t.Nq * t.D, t.H * t.Nq * t.D};
  for (int d = 0; d < 4; ++d) {
    EXPECT_EQ(g_rec.dims[0][d].min, 0) << d;
    EXPECT_EQ(g_rec.dims[0][d].extent, expect_extent[d]) << d;
    EXPECT_EQ(g_rec.dims[0][d].stride, expect_stride[d]) << d;
  }
  EXPECT_EQ(g_rec.dims[1][1].extent, t.Nk);
  EXPECT_EQ(g_rec.bufs[3].host, reinterpret_cast<uint8_t *>(t.o.data()));

  for (int64_t b = 0; b < t.B; ++b)
    for (int64_t h = 0; h < t.H; ++h)
      for (int64_t n = 0; n < t.Nq; ++n)
        for (int64_t d = 0; d < t.D; ++d)
          ASSERT_EQ(t.o[((b * t.H + h) * t.Nq + n) * t.D + d], t.expected(b, h, n, d));
}

TEST(CallTest, StridedViews) {
  Sdpa t;
  // q stored as [B, Nq, H, D] and viewed as [B, H, Nq, D] (a transpose).
  std::vector<float> qt(t.q.size());
  for (int64_t b = 0; b < t.B; ++b)
    for (int64_t h = 0; h < t.H; ++h)
      for (int64_t n = 0; n < t.Nq; ++n)
        for (int64_t d = 0; d < t.D; ++d)
          qt[((b * t.Nq + n) * t.H + h) * t.D + d] = t.q[((b * t.H + h) * t.Nq + n) * t.D + d];
  auto ins = t.ins();
  ins[0].data = qt.data();
  ins[0].strides[0] = t.Nq * t.H * t.D;
  ins[0].strides[1] = t.D;
  ins[0].strides[2] = t.H * t.D;
  ins[0].strides[3] = 1;

  // o written into the left half of rows padded to 2*D.
  const int64_t ld = 2 * t.D;
  std::vector<float> opad(t.B * t.H * t.Nq * ld, -7.0f);
  TensorView o = TensorView::f32(opad.data(), {t.B, t.H, t.Nq, t.D});
  o.strides[0] = t.H * t.Nq * ld;
  o.strides[1] = t.Nq * ld;
  o.strides[2] = ld;

  g_rec = Recorded();
  Status s = call(kSdpa, ins, {o});
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(g_rec.dims[0][0].stride, 1);
  EXPECT_EQ(g_rec.dims[0][1].stride, t.H * t.D); // Nq
  EXPECT_EQ(g_rec.dims[0][2].stride, t.D);       // H
  EXPECT_EQ(g_rec.dims[3][1].stride, ld);

  for (int64_t b = 0; b < t.B; ++b)
    for (int64_t h = 0; h < t.H; ++h)
      for (int64_t n = 0; n < t.Nq; ++n)
        for (int64_t d = 0; d < ld; ++d) {
          float got = opad[((b * t.H + h) * t.Nq + n) * ld + d];
          ASSERT_EQ(got, d < t.D ? t.expected(b, h, n, d) : -7.0f);
        }
}

TEST(CallTest, NegativeStrideOutput) {
  Sdpa t;
  t.B = 1;
  t.H = 1;
  t.resize();
  // o with Nq reversed: row n is stored at row Nq-1-n.
  TensorView o = TensorView::f32(t.o.data() + (t.Nq - 1) * t.D, {1, 1, t.Nq, t.D});
  o.strides[2] = -t.D;
  Status s = call(kSdpa, t.ins(), {o});
  ASSERT_TRUE(s.ok()) << s.message();
  for (int64_t n = 0; n < t.Nq; ++n)
    for (int64_t d = 0; d < t.D; ++d)
      ASSERT_EQ(t.o[(t.Nq - 1 - n) * t.D + d], t.expected(0, 0, n, d));
}

TEST(CallTest, BroadcastInput) {
  Sdpa t;
  auto ins = t.ins();
  ins[2].strides[0] = 0; // both batches use v[0]
  ASSERT_TRUE(call(kSdpa, ins, t.outs()).ok());
  EXPECT_EQ(g_rec.dims[2][3].stride, 0);
  // Batch 1 sees batch 0's v.
  EXPECT_EQ(t.o[((1 * t.H + 0) * t.Nq + 0) * t.D + 0],
            t.q[((1 * t.H + 0) * t.Nq + 0) * t.D + 0] + t.v[0]);
}

TEST(CallTest, RankZero) {
  int32_t x = 21, y = 0;
  g_rec = Recorded();
  Status s = call(kScalar, {TensorView::i32(&x, {})}, {TensorView::i32(&y, {})});
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(y, 42);
  EXPECT_EQ(g_rec.bufs[0].dimensions, 0);
  EXPECT_EQ(g_rec.bufs[0].type.code, halide_type_int);
  EXPECT_EQ(g_rec.bufs[0].type.bits, 32);

  s = call(kScalar, {TensorView::f32(nullptr, {})}, {TensorView::i32(&y, {})});
  EXPECT_EQ(s.message(), "twice: input 'x' has dtype f32, expected i32");
}

TEST(CallTest, ZeroSizeNullDataGetsNonNullHost) {
  g_rec = Recorded();
  Status s = call(kVec, {TensorView::f32(nullptr, {0})}, {TensorView::f32(nullptr, {0})});
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(g_rec.calls, 1);
  // A null host would turn the call into a Halide bounds query.
  EXPECT_NE(g_rec.bufs[0].host, nullptr);
  EXPECT_NE(g_rec.bufs[1].host, nullptr);
  EXPECT_EQ(g_rec.dims[0][0].extent, 0);
}

TEST(CallTest, ValidationFailureDoesNotRunKernel) {
  Sdpa t;
  auto ins = t.ins();
  ins[1].shape[0] = 9;
  g_rec = Recorded();
  Status s = call(kSdpa, ins, t.outs());
  EXPECT_EQ(s.message(), "sdpa: input 'k' dimension 0 (B) is 9, but 'q' dimension 0 set B = 2");
  EXPECT_EQ(g_rec.calls, 0);
}

TEST(CallTest, MissingEntryPoint) {
  Sdpa t;
  KernelDesc k = kSdpa;
  k.argv_fn = nullptr;
  Status s = call(k, t.ins(), t.outs());
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("sdpa"));
  EXPECT_THAT(s.message(), HasSubstr("entry point"));
}

struct ErrCase {
  int code;
  const char *name;
};

TEST(CallTest, HalideErrorMapping) {
  const ErrCase cases[] = {
      {halide_error_code_generic_error, "halide_error_code_generic_error"},
      {halide_error_code_bad_type, "halide_error_code_bad_type"},
      {halide_error_code_buffer_extents_too_large, "halide_error_code_buffer_extents_too_large"},
      {halide_error_code_out_of_memory, "halide_error_code_out_of_memory"},
      {halide_error_code_device_malloc_failed, "halide_error_code_device_malloc_failed"},
      {halide_error_code_no_device_interface, "halide_error_code_no_device_interface"},
      {halide_error_code_constraint_violated, "halide_error_code_constraint_violated"},
      {halide_error_code_cannot_profile_pipeline, "halide_error_code_cannot_profile_pipeline"},
  };
  Sdpa t;
  for (const auto &c : cases) {
    g_fail_code = c.code;
    Status s = call(kSdpaFailing, t.ins(), t.outs());
    EXPECT_FALSE(s.ok());
    EXPECT_THAT(s.message(), StartsWith("sdpa: "));
    EXPECT_THAT(s.message(), HasSubstr("Halide error " + std::to_string(c.code) + " ("));
    EXPECT_THAT(s.message(), HasSubstr(c.name));
  }
  g_fail_code = -12345;
  Status s = call(kSdpaFailing, t.ins(), t.outs());
  EXPECT_EQ(s.message(), "sdpa: kernel failed with Halide error -12345 (unknown Halide error)");
  g_fail_code = 0;
  EXPECT_TRUE(call(kSdpaFailing, t.ins(), t.outs()).ok());
}

// Halide's messages name buffers and count dimensions from the innermost; the runtime reports
// them with the kernel's tensor names and the DSL's dimensions (C order) and size names.
TEST(ExplainTest, HalideMessagesInTheDslsTerms) {
  auto explain = [](const std::string &m) { return explain_halide_error(kSdpa, m); };
  EXPECT_EQ(
      explain("Input buffer k is accessed at -32, which is before the min (0) in dimension 1"),
      "input 'k' dimension 2 (Nk) is read at -32, before its first index 0 (a subscript leaves the "
      "tensor)");
  EXPECT_EQ(
      explain(
          "Error: Input buffer q is accessed at 9, which is beyond the max (7) in dimension 3\n"),
      "input 'q' dimension 0 (B) is read at 9, beyond its last index 7 (a subscript leaves the "
      "tensor)");
  EXPECT_EQ(explain("Output buffer o is accessed at 5, which is beyond the max (4) in dimension 0"),
            "output 'o' dimension 3 (D) is written at 5, beyond its last index 4");
  EXPECT_EQ(explain("Constraint violated: k.stride.0 (2) == 1 (1)"),
            "input 'k' dimension 3 (D) has stride 2, but the kernel needs stride 1");
  EXPECT_EQ(explain("Constraint violated: o.extent.1 (5) == q.extent.1 (4)"),
            "output 'o' dimension 2 (Nq) is 5, but must be 4 (input 'q' dimension 2 (Nq))");
  EXPECT_EQ(explain("Constraint violated: v.min.2 (3) == 0 (0)"),
            "input 'v' dimension 1 (H) starts at 3, but must start at 0");
  EXPECT_EQ(explain("Input buffer q requires a buffer of exactly 4 dimensions, but the buffer "
                    "passed in has 2 dimensions"),
            "input 'q' has rank 2, but the kernel takes rank 4");
  EXPECT_EQ(explain("The extents for buffer v dimension 0 is negative (-3)"),
            "input 'v' dimension 3 (D) is negative (-3)");
  EXPECT_EQ(explain("Product of extents for buffer q is 4294967296, which exceeds the maximum size "
                    "of 2147483647"),
            "input 'q' has more elements than a kernel can address with 32-bit indices "
            "(4294967296, which exceeds the maximum "
            "size of 2147483647)");
  EXPECT_EQ(explain("Total allocation for buffer p__exp is 8589934592, which exceeds the maximum "
                    "size of 2147483647"),
            "definition 'p' needs a larger buffer than a kernel can address with 32-bit indices "
            "(8589934592, which exceeds the "
            "maximum size of 2147483647)");
  EXPECT_EQ(
      explain("Requirement Failed: (false) [attnc] f.attn:3:3: requirement failed: C must be even"),
      "f.attn:3:3: requirement failed: C must be even");
  EXPECT_EQ(
      explain("Requirement Failed: ((uint1)0) input k is read at 7 in dimension 2 of extent 5"),
      "input 'k' dimension 2 (Nk) is read at 7, outside its extent 5 (an index read from a tensor "
      "is out of range)");
  EXPECT_EQ(explain("Out of memory (halide_malloc returned NULL)"),
            "out of memory: a buffer of the kernel could not be allocated");
  // Messages about no tensor of the kernel, or of no known form, are left to the caller.
  EXPECT_EQ(explain("Input buffer zz is accessed at 9, which is beyond the max (7) in dimension 0"),
            "");
  EXPECT_EQ(explain("Input buffer q is accessed at 9, which is beyond the max (7) in dimension 4"),
            "");
  EXPECT_EQ(explain("something else entirely"), "");
}

const char *g_fail_message = "";
int fake_bounds_error_argv(void **args) {
  record(args, 4);
  halide_error(nullptr, g_fail_message);
  return halide_error_code_access_out_of_bounds;
}

TEST(CallTest, KernelErrorsAreExplained) {
  Sdpa t;
  KernelDesc k = kSdpa;
  k.argv_fn = fake_bounds_error_argv;
  g_fail_message = "Input buffer k is accessed at 6, which is beyond the max (5) in dimension 2\n";
  EXPECT_EQ(call(k, t.ins(), t.outs()).message(),
            "sdpa: input 'k' dimension 1 (H) is read at 6, beyond its last index 5 (a subscript "
            "leaves the tensor)");
  g_fail_message = "an unknown failure";
  EXPECT_EQ(call(k, t.ins(), t.outs()).message(),
            "sdpa: kernel failed with Halide error -4 (halide_error_code_access_out_of_bounds: the "
            "pipeline would access "
            "memory outside a buffer passed in): an unknown failure");
}

TEST(LimitsTest, TensorSizes) {
  EXPECT_TRUE(check_tensor_size("output 'o'", DType::F32, {1024, 1024}).ok());
  EXPECT_TRUE(check_tensor_size("output 'o'", DType::F32, {0, int64_t(1) << 40}).ok()); // empty
  EXPECT_EQ(check_tensor_size("output 'o'", DType::F32, {65536, 65536}).message(),
            "output 'o' [65536, 65536] has 4294967296 elements, more than a kernel can address "
            "(2147483647, Halide's 32-bit "
            "indexing)");
  EXPECT_THAT(
      check_tensor_size("input 'x'", DType::I32, {int64_t(1) << 40, int64_t(1) << 40}).message(),
      HasSubstr("has more than 2^64 elements"));
  ASSERT_GT(memory_limit_bytes(), 0u);
  EXPECT_TRUE(check_memory("x", 1).ok());
  EXPECT_THAT(check_memory("input 'x'", memory_limit_bytes() + 1).message(),
              ::testing::MatchesRegex(
                  "input 'x' needs [0-9]+ bytes \\([0-9.]+ GiB\\), more than this machine's memory "
                  "\\([0-9.]+ GiB\\)"));
}

// attnc::buffer_alloc keeps blocks of 64 KiB or more for reuse, within its limit.
TEST(BufferCacheTest, KeepsLargeBlocksWithinTheLimit) {
  const size_t oldLimit = buffer_cache_limit();
  set_buffer_cache_limit(size_t(1) << 20);
  ASSERT_EQ(buffer_cache_bytes(), 0u);

  void *a = buffer_alloc(200000);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 128, 0u);
  std::memset(a, 1, 200000);
  buffer_free(a);
  EXPECT_EQ(buffer_cache_bytes(), 200704u); // (rounded up to 4 KiB)
  // A request within the block's size gets it back; the cache is then empty.
  void *b = buffer_alloc(199000);
  EXPECT_EQ(b, a);
  EXPECT_EQ(buffer_cache_bytes(), 0u);
  // Less than half the block is a new block: a small buffer does not pin a large one.
  buffer_free(b);
  void *c = buffer_alloc(65536);
  EXPECT_NE(c, a);
  EXPECT_EQ(buffer_cache_bytes(), 200704u);
  buffer_free(c);
  EXPECT_EQ(buffer_cache_bytes(), 200704u + 65536u);

  // Small blocks are never kept.
  void *d = buffer_alloc(1000);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(d) % 128, 0u);
  buffer_free(d);
  EXPECT_EQ(buffer_cache_bytes(), 200704u + 65536u);
  buffer_free(nullptr);

  // Over the limit, the oldest kept blocks go first.
  void *big = buffer_alloc(900000);
  buffer_free(big);
  EXPECT_EQ(buffer_cache_bytes(), 65536u + 901120u);
  // A block larger than the limit is freed at once.
  void *huge = buffer_alloc(size_t(2) << 20);
  ASSERT_NE(huge, nullptr);
  buffer_free(huge);
  EXPECT_EQ(buffer_cache_bytes(), 65536u + 901120u);
  // An impossible size is refused, not wrapped around.
  EXPECT_EQ(buffer_alloc(SIZE_MAX - 16), nullptr);

  set_buffer_cache_limit(0);
  EXPECT_EQ(buffer_cache_bytes(), 0u);
  set_buffer_cache_limit(oldLimit);
}

// Every AOT kernel linked with this runtime allocates through it: Halide's halide_malloc and
// halide_free are replaced (its own are weak).
TEST(BufferCacheTest, ServesHalideMalloc) {
  const size_t oldLimit = buffer_cache_limit();
  set_buffer_cache_limit(size_t(1) << 20);
  void *p = halide_malloc(nullptr, 70000);
  ASSERT_NE(p, nullptr);
  halide_free(nullptr, p);
  EXPECT_EQ(buffer_cache_bytes(), 73728u);
  set_buffer_cache_limit(0);
  set_buffer_cache_limit(oldLimit);
}

// Threads allocating and freeing at once (Halide's workers do) neither lose nor share blocks.
TEST(BufferCacheTest, ThreadSafe) {
  const size_t oldLimit = buffer_cache_limit();
  set_buffer_cache_limit(size_t(8) << 20);
  std::vector<std::thread> ts;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([t, &bad] {
      for (int n = 0; n < 2000; ++n) {
        const size_t bytes = size_t(65536) * (1 + (n + t) % 4);
        auto *p = static_cast<unsigned char *>(buffer_alloc(bytes));
        std::memset(p, t + 1, bytes);
        for (size_t i = 0; i < bytes; i += 4096)
          bad += p[i] != t + 1;
        buffer_free(p);
      }
    });
  for (std::thread &t : ts)
    t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_LE(buffer_cache_bytes(), size_t(8) << 20);
  set_buffer_cache_limit(0);
  set_buffer_cache_limit(oldLimit);
}

TEST(CallTest, ErrorTableCoversEveryCode) {
  // Every code in HalideRuntime.h has a distinct, explained entry.
  std::set<std::string> seen;
  for (int code = halide_error_code_cannot_profile_pipeline; code <= 0; ++code) {
    std::string d = describe_halide_error(code);
    EXPECT_THAT(d, StartsWith("halide_error_code_")) << code;
    EXPECT_THAT(d, HasSubstr(": ")) << code;
    EXPECT_TRUE(seen.insert(d.substr(0, d.find(':'))).second) << d;
  }
  EXPECT_EQ(describe_halide_error(halide_error_code_out_of_memory)
                .rfind("halide_error_code_out_of_memory:", 0),
            0u);
  EXPECT_EQ(describe_halide_error(1), "unknown Halide error");
  EXPECT_EQ(describe_halide_error(-1000), "unknown Halide error");
}

} // namespace
} // namespace attnc
