// attn-bench: the project's benchmark; bundled AOT kernels against baselines measured in the same run.
//
// For each variant and shape (entries_*.cpp): the median time of the kernel under the default
// schedule (auto), its GFLOP/s (GB/s for memory-bound variants; each entry says which and writes
// its FLOP count down), its percent of this CPU's fp32 FMA peak (fma_peak.cpp, measured at the
// start), and its speedup over baselines timed in the same process: the naive C++ reference of
// tests/reference (fp32, single-threaded as written), the unscheduled pipeline (SCHEDULE none,
// single-threaded, on the small shapes only), further schedules and plain C++ formulations where
// an entry has them, and PyTorch (torch_baseline.py) where torch is importable. Every
// implementation is first checked against the reference (max |diff| printed); a disagreement
// skips the case's timing and makes the exit status 1. No speed is ever asserted.
//
// usage: attn-bench [--reps=N] [--quick] [--json=PATH] [--budget=S] [--python=PATH] [ENTRY...]
#include "entries.h"
#include "fma_peak.h"
#include "report.h"
#include "torch_baseline.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#ifndef ATTN_BENCH_PYTHON
#define ATTN_BENCH_PYTHON "python3"
#endif
#ifndef ATTN_BENCH_TORCH_SCRIPT
#error "ATTN_BENCH_TORCH_SCRIPT must name tools/attn-bench/torch_baseline.py"
#endif

namespace {

using namespace attn_bench;

void usage(FILE *f) {
  std::fprintf(f,
               "usage: attn-bench [--reps=N] [--quick] [--json=PATH] [--budget=S] [--python=PATH] "
               "[ENTRY...]\n"
               "  --reps=N       timed runs per implementation (default 10; --quick: 3)\n"
               "  --quick        small shapes and few runs: a smoke run, not a measurement\n"
               "  --json=PATH    also write the results as JSON (scripts/bench_table.py makes "
               "Markdown of it)\n"
               "  --budget=S     stop timing an implementation after S seconds and 3 runs (default "
               "4; --quick: 0.5)\n"
               "  --python=PATH  the Python that may import torch (default %s)\n"
               "entries (default: all):",
               ATTN_BENCH_PYTHON);
  for (const Variant &v : variants())
    std::fprintf(f, " %s", v.name);
  std::fprintf(f, "\n");
}

std::string cpuModel() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      const size_t c = line.find(':');
      if (c != std::string::npos)
        return line.substr(line.find_first_not_of(' ', c + 1));
    }
  return "unknown CPU";
}

// The kernels' thread pool: Halide starts one worker per core unless HL_NUM_THREADS says otherwise.
int kernelThreads() {
  if (const char *e = std::getenv("HL_NUM_THREADS"))
    if (std::atoi(e) > 0)
      return std::atoi(e);
  return std::max(1u, std::thread::hardware_concurrency());
}

} // namespace

int main(int argc, char **argv) {
  Options o;
  int reps = 0;
  double budget = 0;
  std::string json, python = ATTN_BENCH_PYTHON;
  std::vector<std::string> selected;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--reps=", 0) == 0) {
      reps = std::atoi(a.c_str() + 7);
      if (reps < 1) {
        std::fprintf(stderr, "attn-bench: --reps must be at least 1\n");
        return 2;
      }
    } else if (a == "--quick") {
      o.quick = true;
    } else if (a.rfind("--json=", 0) == 0) {
      json = a.substr(7);
    } else if (a.rfind("--budget=", 0) == 0) {
      budget = std::atof(a.c_str() + 9);
      if (!(budget > 0)) {
        std::fprintf(stderr, "attn-bench: --budget must be a positive number of seconds\n");
        return 2;
      }
    } else if (a.rfind("--python=", 0) == 0) {
      python = a.substr(9);
    } else if (a == "-h" || a == "--help") {
      usage(stdout);
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "attn-bench: unknown option '%s'\n", a.c_str());
      usage(stderr);
      return 2;
    } else {
      bool known = false;
      for (const Variant &v : variants())
        known |= a == v.name;
      if (!known) {
        std::fprintf(stderr, "attn-bench: unknown entry '%s' (attn-bench --help lists them)\n",
                     a.c_str());
        return 2;
      }
      selected.push_back(a);
    }
  }
  o.reps = reps ? reps : o.quick ? 3 : 10;
  o.budget = budget ? budget : o.quick ? 0.5 : 4.0;
  o.threads = kernelThreads();

  RunInfo info;
  info.cpu = cpuModel();
  info.cores = (int)std::thread::hardware_concurrency();
  info.loadStart = loadAverage();
  std::printf("attn-bench: %s, %d hardware threads, kernels on %d threads; load average %.2f%s\n",
              info.cpu.c_str(), info.cores, o.threads, info.loadStart,
              info.loadStart > 0.5 ? " (other work is running: timings are pessimistic)" : "");
  std::fflush(stdout);
  info.peak = measureFmaPeak(o.threads, o.quick ? 0.02 : 0.2, o.quick ? 2 : 5);
  o.peakGflops = info.peak.gflops;
  std::printf("fp32 FMA peak (microkernel, %s, %d lanes): %.1f GFLOP/s on %d threads, %.1f GFLOP/s "
              "on 1 thread\n",
              info.peak.isa.c_str(), info.peak.lanes, info.peak.gflops, info.peak.threads,
              info.peak.gflops1);
  // Cores of one CPU share nothing the microkernel uses, so all threads should reach about
  // threads x one thread's rate; much less means other processes held cores during the measurement
  // (and will during the kernels'), which inflates every "% of peak" below.
  if (info.peak.threads > 1 && info.peak.gflops < 0.8 * info.peak.threads * info.peak.gflops1)
    std::printf("  (the all-thread peak is below %d x the 1-thread peak: other work held cores "
                "while it ran)\n",
                info.peak.threads);
  const std::unique_ptr<TorchBaseline> torch =
      TorchBaseline::detect(python, ATTN_BENCH_TORCH_SCRIPT);
  o.torch = torch.get();
  if (torch)
    info.torchVersion = torch->version();
  std::printf(
      "median of up to %d timed runs per implementation (at most ~%.1f s each after 3 runs)%s\n\n",
      o.reps, o.budget, o.quick ? "; --quick: small shapes, a smoke run" : "");
  std::fflush(stdout);

  std::vector<CaseResult> results;
  for (const Variant &v : variants())
    if (selected.empty() || std::find(selected.begin(), selected.end(), v.name) != selected.end())
      v.run(o, &results);

  info.options = o;
  info.loadEnd = loadAverage();
  printSummary(results, info);

  if (!json.empty()) {
    std::string err;
    if (!writeJson(json, results, info, &err)) {
      std::fprintf(stderr, "attn-bench: %s\n", err.c_str());
      return 1;
    }
    std::printf("\nwrote %s\n", json.c_str());
  }
  bool agree = true;
  for (const CaseResult &c : results)
    agree &= c.agree;
  std::fflush(stdout);
  if (!agree)
    std::fprintf(stderr,
                 "attn-bench: some implementations disagree with the reference (see above)\n");
  return agree ? 0 : 1;
}
