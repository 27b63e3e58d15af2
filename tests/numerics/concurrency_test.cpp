// One AOT kernel called from 8 threads at once on distinct buffers gives, bitwise, what one call alone gives.
//
// attnc::call is documented as thread-safe (each call owns its buffers; Halide's thread pool is
// shared). Each thread runs every kernel several times on its own inputs, interleaved with the
// other threads, and every result must equal, bit for bit, a single-threaded call on the same
// inputs made before the threads start. Run under the ASan build too (make test-asan).
#include "dense_causal_attention.attnc.h"
#include "dense_padding_mask.attnc.h"
#include "sdpa_auto.attnc.h"
#include "sdpa_unfused.attnc.h"

#include "numerics/numerics_support.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using attnc_test::In;

constexpr int kThreads = 8, kRounds = 4;
constexpr int B = 2, H = 3, N = 45, D = 24;

struct Job {
  const attnc::KernelDesc *desc;
  std::vector<In> ins;
  std::vector<float> expected; // the single-threaded result
};

std::vector<float> run(const Job &job, attnc::Status *st) {
  std::vector<float> out((size_t)B * H * N * D, -1.f);
  std::vector<In> ins = job.ins; // each call reads its own copy
  *st = attnc::call(*job.desc, attnc_test::viewsOf(ins),
                    {attnc::TensorView::f32(out.data(), {B, H, N, D})});
  return out;
}

// The inputs of thread t's job for `desc`: different data per thread.
Job makeJob(const attnc::KernelDesc *desc, unsigned seed) {
  Job j{desc, {}, {}};
  j.ins = {attnc_test::randn({B, H, N, D}, seed), attnc_test::randn({B, H, N, D}, seed + 1),
           attnc_test::randn({B, H, N, D}, seed + 2)};
  if (desc == &attnc_kernels::padding_mask()) {
    std::vector<int32_t> pad((size_t)B * N, 0);
    for (int k = 0; k < N; ++k)
      pad[(size_t)(seed % B) * N + k] = (k * 7 + (int)seed) % 5 == 0;
    j.ins.push_back(attnc_test::ints({B, N}, pad));
  }
  return j;
}

TEST(Concurrency, EightThreadsMatchSingleThreadedCallsBitwise) {
  const attnc::KernelDesc *kernels[] = {&attnc_kernels::sdpa_auto(), &attnc_kernels::sdpa_unfused(),
                                        &attnc_kernels::causal_attention(),
                                        &attnc_kernels::padding_mask()};
  // jobs[t][k]: thread t's inputs for kernel k, with the expected output from a lone call.
  std::vector<std::vector<Job>> jobs(kThreads);
  for (int t = 0; t < kThreads; ++t)
    for (const attnc::KernelDesc *desc : kernels) {
      Job j = makeJob(desc, 1000 + 10 * t);
      attnc::Status st = attnc::Status::Ok();
      j.expected = run(j, &st);
      ASSERT_TRUE(st.ok()) << desc->name << ": " << st.message();
      jobs[t].push_back(std::move(j));
    }

  std::atomic<int> ready{0}, mismatches{0}, failures{0};
  std::vector<std::string> firstError(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      // Start together, so that the calls overlap.
      ready.fetch_add(1);
      while (ready.load() < kThreads)
        std::this_thread::yield();
      for (int r = 0; r < kRounds; ++r)
        for (size_t k = 0; k < jobs[t].size(); ++k) {
          // Rotate the kernel order per thread and round: different kernels run side by side.
          const Job &j = jobs[t][(k + t + r) % jobs[t].size()];
          attnc::Status st = attnc::Status::Ok();
          std::vector<float> got = run(j, &st);
          if (!st.ok()) {
            failures.fetch_add(1);
            if (firstError[t].empty())
              firstError[t] = std::string(j.desc->name) + ": " + st.message();
          } else if (std::memcmp(got.data(), j.expected.data(), got.size() * sizeof(float)) != 0) {
            mismatches.fetch_add(1);
            if (firstError[t].empty())
              firstError[t] = std::string(j.desc->name) + ": differs from the lone call";
          }
        }
    });
  for (std::thread &th : threads)
    th.join();
  for (int t = 0; t < kThreads; ++t)
    EXPECT_TRUE(firstError[t].empty()) << "thread " << t << ": " << firstError[t];
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(mismatches.load(), 0);
}

} // namespace
