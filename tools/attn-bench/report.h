// attn-bench's outputs: the summary table on stdout and the JSON file (--json) for scripts/bench_table.py.
#pragma once

#include "bench.h"
#include "fma_peak.h"

#include <string>
#include <vector>

namespace attn_bench {

struct RunInfo {
  std::string cpu; // /proc/cpuinfo's model name
  int cores = 0;   // hardware threads online
  FmaPeak peak;
  Options options;
  std::string torchVersion; // empty: torch not importable
  double loadStart = -1, loadEnd = -1;
};

void printSummary(const std::vector<CaseResult> &results, const RunInfo &info);
bool writeJson(const std::string &path, const std::vector<CaseResult> &results, const RunInfo &info,
               std::string *err);

} // namespace attn_bench
