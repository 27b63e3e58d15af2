// Times the sdpa kernel called directly (attnc::call) and through PyTorch's dispatcher (torch.ops).
//
// scripts/torch_overhead.py runs this beside the same operator called from Python, so the cost of
// the PyTorch entry (#21: at most 10 us over the direct C++ call) is measured in one run. Prints
// one JSON object per shape: median microseconds per call of each way, rounds alternating.
#include "attnc/torch_ops.h"
#include "sdpa.attnc.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

namespace {

attnc::TensorView view(const at::Tensor &t) {
  attnc::TensorView v;
  v.data = t.data_ptr();
  v.dtype = attnc::DType::F32;
  v.rank = static_cast<int>(t.dim());
  for (int d = 0; d < v.rank; ++d)
    v.shape[d] = t.size(d), v.strides[d] = t.stride(d);
  return v;
}

// Median over `rounds` of the mean time per call of `iters` calls, in microseconds; the ways are
// timed in turns within each round so that frequency and load changes hit them alike.
std::vector<double> timeInTurns(const std::vector<std::function<void()>> &ways, int iters,
                                int rounds) {
  std::vector<std::vector<double>> t(ways.size());
  for (const auto &w : ways)
    for (int i = 0; i < iters; ++i)
      w();
  for (int r = 0; r < rounds; ++r)
    for (size_t w = 0; w < ways.size(); ++w) {
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < iters; ++i)
        ways[w]();
      auto t1 = std::chrono::steady_clock::now();
      t[w].push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / iters);
    }
  std::vector<double> med;
  for (auto &v : t) {
    std::sort(v.begin(), v.end());
    med.push_back(v[v.size() / 2]);
  }
  return med;
}

} // namespace

// Shapes B,H,N,D from the arguments (default: 1,1,32,16 and 1,8,256,64).
int main(int argc, char **argv) {
  const attnc::KernelDesc &k = attnc_kernels::sdpa();
  attnc::Status st = attnc::register_torch_op(k);
  if (!st.ok()) {
    std::fprintf(stderr, "attn-torch-overhead: %s\n", st.message().c_str());
    return 1;
  }
  auto op = c10::Dispatcher::singleton()
                .findSchemaOrThrow("attnc::sdpa", "")
                .typed<at::Tensor(const at::Tensor &, const at::Tensor &, const at::Tensor &)>();
  std::vector<std::vector<int64_t>> shapes;
  for (int a = 1; a < argc; ++a) {
    std::vector<int64_t> s;
    long long b, h, n, d;
    if (std::sscanf(argv[a], "%lld,%lld,%lld,%lld", &b, &h, &n, &d) != 4 || b < 1 || h < 1 ||
        n < 1 || d < 1) {
      std::fprintf(stderr, "attn-torch-overhead: '%s' is not B,H,N,D (positive)\n", argv[a]);
      return 2;
    }
    shapes.push_back({b, h, n, d});
  }
  if (shapes.empty())
    shapes = {{1, 1, 32, 16}, {1, 8, 256, 64}};
  for (const auto &s : shapes) {
    at::Tensor q = at::randn(s), kk = at::randn(s), v = at::randn(s), o = at::empty(s);
    const std::vector<attnc::TensorView> ins = {view(q), view(kk), view(v)};
    const std::vector<attnc::TensorView> outs = {view(o)};
    const int iters = s[2] <= 32 ? 2000 : 20;
    auto t = timeInTurns({[&] { (void)attnc::call(k, ins, outs); },
                          [&] {
                            at::Tensor out = at::empty(s);
                            (void)attnc::call(k, ins, {view(out)});
                          },
                          [&] { (void)op.call(q, kk, v); }},
                         iters, 15);
    std::printf("{\"shape\": [%lld, %lld, %lld, %lld], \"direct_us\": %.3f, "
                "\"direct_alloc_us\": %.3f, \"dispatcher_us\": %.3f}\n",
                (long long)s[0], (long long)s[1], (long long)s[2], (long long)s[3], t[0], t[1],
                t[2]);
  }
  return 0;
}
