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

#include "ToolMain.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
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

namespace cl = llvm::cl;
using attnc::tool::fail;

cl::OptionCategory category("attn-bench options");
// A wrong command line exits with 2, a failed run with 1.
attnc::tool::CommandLine cli(category,
                             "attn-bench [--reps=N] [--quick] [--json=PATH] [--budget=S] "
                             "[--python=PATH] [ENTRY...]",
                             "attn-bench: ", /*usageStatus=*/2);

cl::list<std::string> selected(cl::Positional, cl::desc("ENTRY"), cl::cat(category),
                               cl::callback([](const std::string &entry) {
                                 bool known = false;
                                 for (const Variant &v : variants())
                                   known |= entry == v.name;
                                 if (!known)
                                   cli.error(selected, "unknown entry '" + entry +
                                                           "' (attn-bench --help lists them)");
                               }));

cl::opt<int> reps("reps", cl::desc("timed runs per implementation (default 10; --quick: 3)"),
                  cl::value_desc("N"), cl::cat(category), cl::callback([](const int &n) {
                    if (n < 1)
                      cli.error(reps, "--reps must be at least 1");
                  }));

cl::opt<bool> quick("quick", cl::desc("small shapes and few runs: a smoke run, not a measurement"),
                    cl::ValueDisallowed, cl::cat(category));

cl::opt<std::string>
    json("json",
         cl::desc("also write the results as JSON (scripts/bench_table.py makes Markdown of it)"),
         cl::value_desc("PATH"), cl::cat(category));

cl::opt<double> budget(
    "budget",
    cl::desc("stop timing an implementation after S seconds and 3 runs (default 4; --quick: 0.5)"),
    cl::value_desc("S"), cl::cat(category), cl::callback([](const double &s) {
      if (!(s > 0))
        cli.error(budget, "--budget must be a positive number of seconds");
    }));

cl::opt<std::string>
    python("python", cl::desc("the Python that may import torch (default " ATTN_BENCH_PYTHON ")"),
           cl::value_desc("PATH"), cl::init(ATTN_BENCH_PYTHON), cl::cat(category));

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
  attnc::tool::Usage usage;
  usage.options = {reps, quick, json, budget, python};
  usage.column = 17;
  usage.epilogue = "entries (default: all):";
  for (const Variant &v : variants())
    usage.epilogue += std::string(" ") + v.name;
  usage.epilogue += "\n";
  if (std::optional<int> rc = cli.parse(argc, argv, usage))
    return *rc;

  Options o;
  o.quick = quick;
  o.reps = reps.getNumOccurrences() ? reps : o.quick ? 3 : 10;
  o.budget = budget.getNumOccurrences() ? budget : o.quick ? 0.5 : 4.0;
  o.warmup = o.quick ? 0.0 : 0.25;
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
      "median of up to %d timed runs per implementation (at most ~%.1f s each after 3 runs, "
      "after %.2f s of untimed runs)%s\n\n",
      o.reps, o.budget, o.warmup, o.quick ? "; --quick: small shapes, a smoke run" : "");
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
    if (!writeJson(json, results, info, &err))
      return fail(err);
    std::printf("\nwrote %s\n", json.c_str());
  }
  bool agree = true;
  for (const CaseResult &c : results)
    agree &= c.agree;
  std::fflush(stdout);
  if (!agree)
    return fail("some implementations disagree with the reference (see above)");
  return 0;
}
