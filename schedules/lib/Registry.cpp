// The schedule registry: picks the best rule that applies, with the generic rule as fallback.
#include "attnc/Schedule.h"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

namespace attnc {

// Declared here rather than in Schedule.h: only the registry constructs rules.
std::unique_ptr<ScheduleRule> makeCpuSampleRule();
std::unique_ptr<ScheduleRule> makeCpuOnlineRule();

const std::vector<std::unique_ptr<ScheduleRule>> &scheduleRules() {
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
    std::stable_sort(r.begin(), r.end(),
                     [](const auto &a, const auto &b) { return a->priority() > b->priority(); });
    return r;
  }();
  return rules;
}

// Checks on input values (`require` over tables) are scalars computed once per call: whatever
// the rule did, they and the reductions they use are computed at root, never inlined into the
// outputs (which would redo them per element). Funcs read by reduction predicates can only be
// computed at root.
static void scheduleChecks(LoweredKernel &k) {
  for (LoweredFunc &f : k.funcs)
    if (f.role == FuncRole::Check || f.definition == "kernel")
      f.func.compute_root();
}
static void schedulePredicateInputs(LoweredKernel &k) {
  for (LoweredFunc &f : k.funcs)
    if (f.predicateInput)
      f.func.compute_root();
}

std::string ScheduleParams::str() const {
  if (values.empty())
    return "default";
  std::string s;
  for (const auto &[k, v] : values)
    s += (s.empty() ? "" : ",") + k + "=" + std::to_string(v);
  return s;
}

bool ScheduleParams::parse(const std::string &text, ScheduleParams *out, std::string *err) {
  out->values.clear();
  if (text.empty() || text == "default")
    return true;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string item =
        text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    size_t eq = item.find('=');
    std::string name = eq == std::string::npos ? item : item.substr(0, eq);
    std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
    char *end = nullptr;
    long v = value.empty() ? 0 : std::strtol(value.c_str(), &end, 10);
    if (name.empty() || value.empty() || *end || v < 1 || v > 4096) {
      *err = "schedule parameter '" + item + "' is not KNOB=VALUE with VALUE in 1..4096";
      return false;
    }
    if (!out->values.emplace(name, (int)v).second) {
      *err = "schedule parameter '" + name + "' is given twice";
      return false;
    }
    if (comma == std::string::npos)
      break;
    pos = comma + 1;
  }
  return true;
}

const ScheduleRule *selectRule(const LoweredKernel &k, const Halide::Target &t,
                               const std::string &choice) {
  if (choice == "none")
    return nullptr;
  for (const auto &r : scheduleRules()) {
    if (choice != "auto" && r->name() != choice)
      continue;
    if (!r->applies(k, t)) {
      if (choice == "auto")
        continue;
      throw std::runtime_error("schedule '" + choice + "' does not apply to kernel '" + k.name +
                               "' for target " + t.to_string());
    }
    return r.get();
  }
  if (choice == "auto")
    throw std::runtime_error("no schedule applies to kernel '" + k.name + "' for target " +
                             t.to_string());
  std::string names;
  for (const auto &r : scheduleRules())
    names += (names.empty() ? "" : ", ") + r->name();
  throw std::runtime_error("unknown schedule '" + choice + "' (expected none, auto, " + names +
                           ")");
}

std::string describeSchedule(const LoweredKernel &k, const Halide::Target &t,
                             const std::string &choice, const ScheduleParams &params) {
  const ScheduleRule *r = selectRule(k, t, choice);
  std::string out = r ? r->name() : "none";
  std::vector<std::string> parts;
  if (r) {
    std::string set;
    for (const Knob &kb : r->knobs(k, t)) {
      int v = params.get(kb.name, kb.dflt);
      if (v != kb.dflt)
        set += (set.empty() ? "" : ",") + kb.name + "=" + std::to_string(v);
    }
    if (!set.empty())
      parts.push_back(set);
  }
  for (const LoweredFunc &f : k.funcs)
    if (f.role == FuncRole::OnlineState && f.onlineTile != 128) {
      parts.push_back("key tile " + std::to_string(f.onlineTile));
      break;
    }
  for (size_t i = 0; i < parts.size(); ++i)
    out += (i ? "; " : " (") + parts[i] + (i + 1 == parts.size() ? ")" : "");
  return out;
}

std::string applySchedule(LoweredKernel &k, const Halide::Target &t, const std::string &choice,
                          const ScheduleParams &params) {
  const ScheduleRule *r = selectRule(k, t, choice);
  if (!r) {
    if (!params.empty())
      throw std::runtime_error("schedule parameters (" + params.str() +
                               ") need a schedule, not 'none'");
    schedulePredicateInputs(k);
    return "none";
  }
  // A knob the rule does not read would be ignored silently: refuse it, naming the ones it has.
  std::vector<Knob> knobs = r->knobs(k, t);
  for (const auto &[name, value] : params.values) {
    const Knob *knob = nullptr;
    for (const Knob &kb : knobs)
      if (kb.name == name)
        knob = &kb;
    if (!knob) {
      std::string names;
      for (const Knob &kb : knobs)
        names += (names.empty() ? "" : ", ") + kb.name;
      throw std::runtime_error(
          "schedule '" + r->name() + "' has no knob '" + name + "' for kernel '" + k.name + "'" +
          (names.empty() ? std::string(" (it has none)") : " (it has " + names + ")"));
    }
    // Far beyond what attn-tune tries, knobs unroll and vectorise so widely that compiling takes
    // hours (generic.vector_mult=4096 asks for 65536-lane vectors): at most twice its largest try.
    int most = 2 * *std::max_element(knob->choices.begin(), knob->choices.end());
    if (value < 1 || value > most)
      throw std::runtime_error("schedule knob '" + name + "' = " + std::to_string(value) +
                               " is outside 1.." + std::to_string(most) +
                               " (at most twice the largest value attn-tune tries)");
  }
  r->apply(k, t, params);
  scheduleChecks(k);
  schedulePredicateInputs(k);
  return r->name();
}

} // namespace attnc
