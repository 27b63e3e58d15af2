// Shared by the numerics tests: inputs, the variants for the fp64 interpreter, and the common check.
#pragma once

#include "attnc/dsl/FrontEnd.h"
#include "attnc/dsl/Interpreter.h"
#include "attnc/runtime.h"
#include "reference/sdpa_ref.h"

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

namespace attnc_test {

using Defines = std::vector<std::pair<std::string, std::string>>;

// The checked kernel `kernel` of dsl/variants/<file> compiled with `defines`; null with a
// message in `err` if the file does not load or has no such kernel.
inline const attnc::dsl::Kernel *interpreterKernel(const std::string &file,
                                                   const std::string &kernel,
                                                   const Defines &defines, std::string *err) {
  static std::map<std::pair<std::string, Defines>, attnc::dsl::LoadedModule> modules;
  auto key = std::make_pair(file, defines);
  auto it = modules.find(key);
  if (it == modules.end()) {
    attnc::dsl::FrontEndOptions opts;
    opts.sema.defines = defines;
    attnc::dsl::LoadedModule loaded;
    std::ostringstream diags;
    const std::string path = std::string(ATTNC_VARIANTS_DIR) + "/" + file;
    if (!attnc::dsl::loadModule(path, opts, diags, &loaded) || !loaded.module) {
      std::string d;
      for (const auto &[n, v] : defines)
        d += " -D " + n + "=" + v;
      *err = "cannot load " + path + d + ":\n" + diags.str();
      return nullptr;
    }
    it = modules.emplace(key, std::move(loaded)).first;
  }
  for (const auto &k : it->second.module->kernels)
    if (k->name == kernel)
      return k.get();
  *err = "no kernel '" + kernel + "' in " + file;
  return nullptr;
}

// Runs the fp64 interpreter on kernel `k` (null when loading failed, with `loadErr`) and checks
// its single output: the shape `outShape`, finite values and a distance of at most `tol` from the
// fp64 reference `ref`. Returns that distance (-1 when there is no output to compare) and stores
// the output in `out`.
inline double checkInterpreter(const attnc::dsl::Kernel *k, const std::string &loadErr,
                               const std::vector<attnc::dsl::RefTensor> &inputs,
                               const std::vector<int64_t> &outShape, const std::vector<double> &ref,
                               double tol, const std::string &label, std::vector<double> *out) {
  EXPECT_NE(k, nullptr) << label << ": " << loadErr;
  if (!k)
    return -1;
  std::vector<attnc::dsl::RefTensor> outs;
  std::string err;
  const bool ok = attnc::dsl::interpret(*k, inputs, &outs, &err);
  EXPECT_TRUE(ok) << label << ": interpreter: " << err;
  if (!ok)
    return -1;
  if (outs.size() != 1 || outs[0].shape != outShape || outs[0].data.size() != ref.size()) {
    ADD_FAILURE() << label << ": interpreter returned " << outs.size()
                  << " outputs of the wrong shape";
    return -1;
  }
  *out = outs[0].data;
  size_t nonFinite = 0;
  double err2 = 0;
  for (size_t i = 0; i < out->size(); ++i) {
    nonFinite += !std::isfinite((*out)[i]);
    err2 = std::max(err2, std::abs((*out)[i] - ref[i]));
  }
  EXPECT_EQ(nonFinite, 0u) << label << ": non-finite outputs of the interpreter";
  EXPECT_LE(err2, tol) << label << ": interpreter vs fp64 reference";
  return err2;
}

inline size_t numel(const std::vector<int64_t> &shape) {
  size_t n = 1;
  for (int64_t d : shape)
    n *= (size_t)d;
  return n;
}

// One kernel input: f32 (f) or i32 (i) data of a contiguous C-order shape.
struct In {
  std::vector<int64_t> shape;
  std::vector<float> f;
  std::vector<int32_t> i;
  bool isInt = false;

  size_t numel() const { return attnc_test::numel(shape); }
  const float *fp() const { return f.data(); }
  const int32_t *ip() const { return i.data(); }
};

// f32 entries of the given shape drawn from `dist`, seeded.
template <typename Dist> In drawn(std::vector<int64_t> shape, unsigned seed, Dist dist) {
  std::mt19937 rng(seed);
  In t;
  t.shape = std::move(shape);
  t.f.resize(t.numel());
  for (float &e : t.f)
    e = dist(rng);
  return t;
}

// N(mean, scale^2) f32 entries of the given shape.
inline In randn(std::vector<int64_t> shape, unsigned seed, float mean = 0.f, float scale = 1.f) {
  return drawn(std::move(shape), seed, std::normal_distribution<float>(mean, scale));
}

// U(lo, hi) f32 entries of the given shape.
inline In uniform(std::vector<int64_t> shape, unsigned seed, float lo, float hi) {
  return drawn(std::move(shape), seed, std::uniform_real_distribution<float>(lo, hi));
}

// An i32 input holding `values`.
inline In ints(std::vector<int64_t> shape, std::vector<int32_t> values) {
  In t;
  t.shape = std::move(shape);
  t.isInt = true;
  t.i = std::move(values);
  EXPECT_EQ(t.i.size(), t.numel());
  return t;
}

// Views of `ins` for attnc::call (they point into `ins`, which must outlive them).
inline std::vector<attnc::TensorView> viewsOf(std::vector<In> &ins) {
  std::vector<attnc::TensorView> views;
  for (In &t : ins)
    views.push_back(t.isInt ? attnc::TensorView::i32(t.i.data(), t.shape)
                            : attnc::TensorView::f32(t.f.data(), t.shape));
  return views;
}

// `ins` as the reference interpreter's inputs.
inline std::vector<attnc::dsl::RefTensor> refTensorsOf(const std::vector<In> &ins) {
  std::vector<attnc::dsl::RefTensor> out;
  for (const In &t : ins) {
    attnc::dsl::RefTensor rt;
    rt.shape = t.shape;
    rt.isInt = t.isInt;
    if (t.isInt)
      rt.data.assign(t.i.begin(), t.i.end());
    else
      rt.data.assign(t.f.begin(), t.f.end());
    out.push_back(std::move(rt));
  }
  return out;
}

// The CUDA build of `desc` (`<name>_cuda`, linked by tests/CMakeLists.txt's attnc_cuda_twins):
// with a CUDA device it must match the fp64 reference within the same tolerance as the CPU
// kernel; without one, calling it must fail cleanly with "no CUDA device" and leave the output
// untouched. Returns a note for the summary line.
inline std::string checkCudaTwin(const attnc::KernelDesc &desc,
                                 const std::vector<attnc::TensorView> &views,
                                 const std::vector<int64_t> &outShape,
                                 const std::vector<double> &ref, double tol,
                                 const std::string &label) {
#ifdef ATTNC_CUDA_TWIN_TARGET
  const attnc::KernelDesc *twin =
      attnc::Registry::global().find(std::string(desc.name) + "_cuda", ATTNC_CUDA_TWIN_TARGET);
  if (!twin)
    return "";
  const size_t n = numel(outShape);
  std::string why;
  if (!attnc::cuda_device_available(&why)) {
    std::vector<float> out(n, -7.f);
    attnc::Status st = attnc::call(*twin, views, {attnc::TensorView::f32(out.data(), outShape)});
    EXPECT_FALSE(st.ok()) << label << ": the CUDA build ran without a device";
    EXPECT_NE(st.message().find("no CUDA device"), std::string::npos)
        << label << ": " << st.message();
    for (float x : out)
      EXPECT_EQ(x, -7.f) << label << ": the CUDA build wrote its output without a device";
    return "  GPU skipped";
  }
  std::vector<float> out(n, std::numeric_limits<float>::quiet_NaN());
  attnc::Status st = attnc::call(*twin, views, {attnc::TensorView::f32(out.data(), outShape)});
  EXPECT_TRUE(st.ok()) << label << " (CUDA): " << st.message();
  if (!st.ok())
    return "  GPU failed";
  size_t nonFinite = 0;
  for (float x : out)
    nonFinite += !std::isfinite(x);
  EXPECT_EQ(nonFinite, 0u) << label << " (CUDA): non-finite (or unwritten) outputs";
  const double err = attnc_ref::maxAbsDiff(out, ref);
  EXPECT_LE(err, tol) << label << " (CUDA): GPU kernel vs fp64 reference";
  char buf[64];
  std::snprintf(buf, sizeof buf, "  GPU err %.3g", err);
  return buf;
#else
  (void)desc, (void)views, (void)outShape, (void)ref, (void)tol, (void)label;
  return "";
#endif
}

struct Outcome {
  bool ran = false;           // the AOT kernel ran (the call returned ok)
  std::vector<float> aot;     // the AOT kernel's output
  std::vector<double> interp; // the interpreter's output (empty if it failed)
  std::vector<double> ref;    // the fp64 reference
  double tol = 0;             // the allowed error, from the plain fp32 reference's error
};

// Runs `ins` through the AOT kernel `desc` (its output pre-filled with a NaN sentinel), the
// reference `ref` (a generic callable taking a double or float tag and returning std::vector<T>)
// in fp64 and fp32, and the interpreter on `k` (null when loading failed, with `loadErr`);
// checks finiteness and agreement within attnc_ref::tolerance, and prints one summary line.
template <typename RefFn>
Outcome checkKernel(const attnc::KernelDesc &desc, const attnc::dsl::Kernel *k,
                    const std::string &loadErr, std::vector<In> ins,
                    const std::vector<int64_t> &outShape, RefFn ref, const std::string &label) {
  Outcome r;
  const size_t n = numel(outShape);

  // fp64 ground truth and the plain fp32 baseline that sets the tolerance.
  r.ref = ref(double{});
  const std::vector<float> plain = ref(float{});
  EXPECT_EQ(r.ref.size(), n) << label << ": reference size";
  EXPECT_EQ(plain.size(), n) << label << ": fp32 reference size";
  const double plainErr = attnc_ref::maxAbsDiff(plain, r.ref);
  r.tol = attnc_ref::tolerance(plainErr);
  for (double x : r.ref)
    EXPECT_TRUE(std::isfinite(x)) << label << ": the fp64 reference is not finite";

  r.aot.assign(n, std::numeric_limits<float>::quiet_NaN());
  std::vector<attnc::TensorView> views = viewsOf(ins);
  attnc::Status st = attnc::call(desc, views, {attnc::TensorView::f32(r.aot.data(), outShape)});
  EXPECT_TRUE(st.ok()) << label << ": " << st.message();
  double aotErr = -1;
  if (st.ok()) {
    r.ran = true;
    size_t nonFinite = 0;
    for (float x : r.aot)
      nonFinite += !std::isfinite(x);
    EXPECT_EQ(nonFinite, 0u) << label << ": non-finite (or unwritten) outputs of the AOT kernel";
    aotErr = attnc_ref::maxAbsDiff(r.aot, r.ref);
    EXPECT_LE(aotErr, r.tol) << label << ": AOT kernel vs fp64 reference (plain fp32 error "
                             << plainErr << ")";
  }

  const double interpErr =
      checkInterpreter(k, loadErr, refTensorsOf(ins), outShape, r.ref, r.tol, label, &r.interp);
  const std::string gpu = checkCudaTwin(desc, views, outShape, r.ref, r.tol, label);
  std::printf("[ numerics ] %-60s AOT err %.3g  interp err %.3g  tol %.3g%s\n", label.c_str(),
              aotErr, interpErr, r.tol, gpu.c_str());
  return r;
}

// checkKernel with the interpreter on kernel `kernel` of dsl/variants/<file>, without -D.
template <typename RefFn>
Outcome check(const attnc::KernelDesc &desc, const std::string &file, const std::string &kernel,
              std::vector<In> ins, const std::vector<int64_t> &outShape, RefFn ref,
              const std::string &label) {
  std::string err;
  const attnc::dsl::Kernel *k = interpreterKernel(file, kernel, {}, &err);
  return checkKernel(desc, k, err, std::move(ins), outShape, ref, label);
}

} // namespace attnc_test

#ifdef ATTNC_CUDA_TWIN_TARGET
// Reports, as a skipped test, that this binary's CUDA builds were compiled but could not run.
TEST(GpuTwins, CudaDevice) {
  std::string why;
  if (!attnc::cuda_device_available(&why))
    GTEST_SKIP() << "no CUDA device (" << why
                 << "): the CUDA builds of this binary's kernels (target " << ATTNC_CUDA_TWIN_TARGET
                 << ") were compiled and checked to fail cleanly, not run";
  std::printf("[ gpu      ] %s: the CUDA builds run on the device\n", why.c_str());
}
#endif
