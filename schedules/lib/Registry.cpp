// The schedule registry: picks the best rule that applies, with the generic rule as fallback.
#include "attnc/Schedule.h"

#include <algorithm>
#include <stdexcept>

namespace attnc {

// Declared here rather than in Schedule.h: only the registry constructs rules.
std::unique_ptr<ScheduleRule> makeCpuSampleRule();
std::unique_ptr<ScheduleRule> makeCpuOnlineRule();

const std::vector<std::unique_ptr<ScheduleRule>>& scheduleRules() {
  static const std::vector<std::unique_ptr<ScheduleRule>> rules = [] {
    std::vector<std::unique_ptr<ScheduleRule>> r;
    r.push_back(makeCpuOnlineRule());
    r.push_back(makeCpuDenseRule());
    r.push_back(makeCpuWindowRule());
    r.push_back(makeCpuSampleRule());
    r.push_back(makeCpuGenericRule());
    r.push_back(makeCudaDenseRule());
    r.push_back(makeCudaWindowRule());
    r.push_back(makeCudaSampleRule());
    r.push_back(makeCudaGenericRule());
    std::stable_sort(r.begin(), r.end(), [](const auto& a, const auto& b) { return a->priority() > b->priority(); });
    return r;
  }();
  return rules;
}

// Checks on input values (`require` over tables) are scalars computed once per call: whatever
// the rule did, they and the reductions they use are computed at root, never inlined into the
// outputs (which would redo them per element).
static void scheduleChecks(LoweredKernel& k) {
  for (LoweredFunc& f : k.funcs)
    if (f.role == FuncRole::Check || f.definition == "kernel") f.func.compute_root();
}

std::string applySchedule(LoweredKernel& k, const Halide::Target& t, const std::string& choice) {
  if (choice == "none") return "none";
  for (const auto& r : scheduleRules()) {
    if (choice != "auto" && r->name() != choice) continue;
    if (!r->applies(k, t)) {
      if (choice == "auto") continue;
      throw std::runtime_error("schedule '" + choice + "' does not apply to kernel '" + k.name + "' for target " + t.to_string());
    }
    r->apply(k, t);
    scheduleChecks(k);
    return r->name();
  }
  if (choice == "auto") throw std::runtime_error("no schedule applies to kernel '" + k.name + "' for target " + t.to_string());
  std::string names;
  for (const auto& r : scheduleRules()) names += (names.empty() ? "" : ", ") + r->name();
  throw std::runtime_error("unknown schedule '" + choice + "' (expected none, auto, " + names + ")");
}

} // namespace attnc
