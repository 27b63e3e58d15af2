// The GPU launch-limit pass: blocks whose thread counts are unbounded or too large fail to compile.
#include "attnc/HalideGen.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <Halide.h>

namespace {

namespace H = Halide;

const H::Target kCuda("x86-64-linux-cuda-cuda_capability_80");

// Compiles `p` for CUDA with the check; returns the error, or "" when it compiled.
std::string compileWithCheck(H::Pipeline p, const std::vector<H::Argument> &args) {
  attnc::checkGpuLaunchLimits(p);
  try {
    p.compile_to_module(args, "k", kCuda);
  } catch (const std::exception &e) {
    return e.what();
  }
  return "";
}

TEST(GpuLaunchLimits, ThreadsTiedToAnInputSizeAreRefused) {
  H::ImageParam in(H::Float(32), 2, "in");
  H::Var x("x"), y("y");
  H::Func f("f");
  f(x, y) = in(x, y) * 2.f;
  f.gpu_blocks(y).gpu_threads(x); // one thread per column: as many as the input is wide
  EXPECT_THAT(compileWithCheck(H::Pipeline(f), {in}),
              ::testing::HasSubstr("has no constant bound on its extent"));
}

TEST(GpuLaunchLimits, MoreThan1024ThreadsAreRefused) {
  H::ImageParam in(H::Float(32), 2, "in");
  H::Var x("x"), y("y"), xo("xo"), yo("yo"), xi("xi"), yi("yi");
  H::Func f("f");
  f(x, y) = in(x, y) * 2.f;
  f.gpu_tile(x, y, xo, yo, xi, yi, 64, 32, H::TailStrategy::GuardWithIf);
  EXPECT_THAT(compileWithCheck(H::Pipeline(f), {in}),
              ::testing::HasSubstr("64 x 32 x 1 = 2048 threads"));
}

TEST(GpuLaunchLimits, SharedMemoryTiedToAParameterIsRefused) {
  H::ImageParam in(H::Float(32), 2, "in");
  H::Param<int> stride("stride");
  H::Var x("x"), y("y"), xo("xo"), yo("yo"), xi("xi"), yi("yi"), gxo("gxo"), gxi("gxi");
  H::Func g("g"), f("f");
  g(x, y) = in(x, y) + 1.f;
  f(x, y) = g(x * stride, y); // a tile of f reads 15 * stride + 1 columns of g
  f.gpu_tile(x, y, xo, yo, xi, yi, 16, 16, H::TailStrategy::GuardWithIf);
  g.compute_at(f, xo).split(x, gxo, gxi, 16, H::TailStrategy::GuardWithIf).gpu_threads(gxi, y);
  EXPECT_THAT(compileWithCheck(H::Pipeline(f), {in, stride}),
              ::testing::HasSubstr("shared buffer"));
}

TEST(GpuLaunchLimits, ConstantBlocksWithinLimitsCompile) {
  H::ImageParam in(H::Float(32), 2, "in");
  H::Var x("x"), y("y"), xo("xo"), yo("yo"), xi("xi"), yi("yi");
  H::Func f("f");
  f(x, y) = in(x, y) * 2.f;
  f.gpu_tile(x, y, xo, yo, xi, yi, 32, 32, H::TailStrategy::GuardWithIf);
  EXPECT_EQ(compileWithCheck(H::Pipeline(f), {in}), "");
}

} // namespace
