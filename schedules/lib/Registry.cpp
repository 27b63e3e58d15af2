// The schedule registry: the ordered rule list, and the first rule whose pattern matches applied.
#include "attnc/Schedule.h"

#include "attnc/Transforms/Passes.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

namespace attnc {

// Declared here rather than in Schedule.h: only the registry constructs rules.
std::unique_ptr<ScheduleRule> makeCpuSampleRule();
std::unique_ptr<ScheduleRule> makeCpuOnlineRule();
std::unique_ptr<ScheduleRule> makeCpuDenseRule();
std::unique_ptr<ScheduleRule> makeCpuWindowRule();
std::unique_ptr<ScheduleRule> makeCpuGenericRule();
std::unique_ptr<ScheduleRule> makeCudaSampleRule();
std::unique_ptr<ScheduleRule> makeCudaDenseRule();
std::unique_ptr<ScheduleRule> makeCudaWindowRule();
std::unique_ptr<ScheduleRule> makeCudaGenericRule();

// The priority: "auto" takes the first rule that matches. A CPU and a CUDA rule never both
// match, so only the order among each target's rules matters (the interleaving is the order
// that `--schedule` lists them in, best first).
//  - sample first: a kernel that also holds a dense attention over sampled keys (DAT-style) is
//    better off under cpu-sample, where every other Func gets the generic choice, than under
//    cpu-dense, which schedules its pattern only and leaves the sampling sum to be recomputed
//    inside its consumer's innermost loop. Dense and windowed kernels never match it.
//  - online before dense: a kernel with an online softmax is scheduled by cpu-online as a whole,
//    whatever else it holds (other Funcs take the generic choice).
//  - dense before window: a softmax over a small constant axis that a dense attention reads
//    (o = sum_j p * v) is scheduled as dense attention.
//  - the generic rules last: they match every kernel of their target.
const std::vector<std::unique_ptr<ScheduleRule>> &scheduleRules() {
  static const std::vector<std::unique_ptr<ScheduleRule>> rules = [] {
    std::vector<std::unique_ptr<ScheduleRule>> r;
    r.push_back(makeCpuSampleRule());
    r.push_back(makeCudaSampleRule());
    r.push_back(makeCpuOnlineRule());
    r.push_back(makeCpuDenseRule());
    r.push_back(makeCudaDenseRule());
    r.push_back(makeCpuWindowRule());
    r.push_back(makeCudaWindowRule());
    r.push_back(makeCpuGenericRule());
    r.push_back(makeCudaGenericRule());
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
  for (const OnlineGroup &g : k.onlineGroups)
    for (FuncIndex i : g.predicateInputs)
      k.funcs[i].func.compute_root();
}

// A bf16/f16 output's rounding Func (LoweredKernel::stores) reads its f32 definition once per
// element: the definition is computed at root as the rule scheduled it (as an output it would
// have been), and the conversion is a memory-bound pass over the output, a small part of any
// attention kernel. CPU: 16 lanes (one AVX-512 f32 vector, two AVX2 ones), every outer dimension
// fused into one parallel loop (B = 1 still uses every core); GPU: 32 x 8 threads per block, the
// outer dimensions fused into the blocks' z. Guarded tails: outputs may be smaller than a tile.
// The f32 definitions of bf16/f16 outputs at root: a definition with updates cannot be inlined
// into the Func that rounds it.
static void rootStoredOutputs(LoweredKernel &k) {
  for (size_t i = 0; i < k.stores.size(); ++i)
    if (k.stores[i].defined())
      k.find(k.outputNames[i])->func.compute_root();
}

static void scheduleStores(LoweredKernel &k, bool gpu) {
  rootStoredOutputs(k);
  for (Halide::Func &st : k.stores) {
    if (!st.defined())
      continue;
    std::vector<Halide::Var> v = st.args(); // innermost first
    const auto guard = Halide::TailStrategy::GuardWithIf;
    Halide::Var outer = v.size() > 2 ? v[2] : Halide::Var();
    for (size_t d = 3; d < v.size(); ++d) {
      Halide::Var f(st.name() + "_fused" + std::to_string(d));
      st.fuse(outer, v[d], f);
      outer = f;
    }
    if (gpu) {
      Halide::Var bx, by, tx, ty;
      if (v.size() >= 2)
        st.gpu_tile(v[0], v[1], bx, by, tx, ty, 32, 8, guard);
      else if (v.size() == 1)
        st.gpu_tile(v[0], bx, tx, 256, guard);
      if (v.size() > 2)
        st.gpu_blocks(outer);
      continue;
    }
    if (v.empty())
      continue;
    if (v.size() >= 2) {
      Halide::Var rows(st.name() + "_rows");
      if (v.size() > 2)
        st.fuse(v[1], outer, rows);
      else
        rows = v[1];
      // Tasks of 32 rows: one row per task (B1 H8 N2048 D64: 16384 tasks of 64 values) left
      // the conversion on one thread in Halide's profiler (0.55 ms of sdpa's 24 in bf16, Zen 5).
      st.parallel(rows, 32, guard);
    }
    st.vectorize(v[0], 16, guard);
  }
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

namespace {

std::string ratioText(double r) {
  std::ostringstream os;
  os.precision(r < 100 ? 2 : 3);
  os << r << "x";
  return os.str();
}

// "auto" weighed by work: the first matching rule whose plan stays within kMaxPlanWorkRatio of
// the algorithm's work, else the least costly plan with a warning.
Selection selectByWork(const LoweredKernel &k, const Halide::Target &ht,
                       const std::map<std::string, int64_t> &given, bool jit, const Target &tt) {
  const std::map<std::string, int64_t> sizes = costSizes(k, given);
  std::optional<WorkCount> algorithm;
  std::optional<Selection> best;
  std::vector<std::string> declined;
  // Lowered after the first plan, never before it: a lowering takes fresh names from Halide's
  // counters, and the first plan's loop nest (what --emit=stmt prints) keeps the names it has
  // without weighing.
  auto algorithmAt = [&]() -> const WorkCount & {
    if (!algorithm)
      algorithm = algorithmWork(k, ht, sizes);
    return *algorithm;
  };
  for (const auto &r : scheduleRules()) {
    Selection s{r.get(), WholeKernel{}, tt};
    std::optional<Match> m = r->match(k, s.target);
    if (!m)
      continue;
    s.match = std::move(*m);
    s.planKernel = std::make_shared<LoweredKernel>(clone(k));
    LoweredKernel &plan = *s.planKernel;
    s.apply(plan);
    // For a JIT run each plan is weighed where Halide's lowering ends: one that declines stops
    // there, before code generation, and the one taken is compiled once (dat_attn's test sizes,
    // where cpu-sample declines: two lowerings and a code generation less, 26-29 -> 13-15 s on
    // Zen 5).
    s.lowered = lowerPlan(plan, ht, jit, [&](const Halide::Internal::Stmt &body) {
      s.cost =
          PlanCost{countWork(plan, LoweredPlan{nullptr, std::nullopt, body}, sizes), algorithmAt()};
      return s.cost->ratio() <= kMaxPlanWorkRatio;
    });
    if (!s.cost)
      s.cost = PlanCost{countWork(plan, *s.lowered, sizes), algorithmAt()};
    const double ratio = s.cost->ratio();
    if (ratio <= kMaxPlanWorkRatio) {
      s.declined = declined;
      return s;
    }
    declined.push_back(r->name() + " (" + ratioText(ratio) + ")");
    if (!best || ratio < best->cost->ratio())
      best = std::move(s);
  }
  if (!best)
    throw std::runtime_error("no schedule applies to kernel '" + k.name + "' for target " +
                             ht.to_string());
  best->declined = declined;
  const std::string taken = best->rule->name() + " (" + ratioText(best->cost->ratio()) + ")";
  best->declined.erase(std::remove(best->declined.begin(), best->declined.end(), taken),
                       best->declined.end());
  auto [def, excess] = best->cost->worstDefinition(k);
  auto loc = k.definitionLocs.find(def);
  std::string where = loc == k.definitionLocs.end() ? "" : loc->second + ": ";
  std::string plans;
  for (const std::string &d : declined)
    plans += (plans.empty() ? "" : ", ") + d;
  best->warning = where + "warning: every schedule of kernel '" + k.name + "' recomputes " +
                  (def.empty() ? std::string("its reductions") : "'" + def + "'") +
                  ": its plans do more than " + ratioText(kMaxPlanWorkRatio) +
                  " the arithmetic of computing each definition once (" + plans + "); taking " +
                  best->rule->name() +
                  ". Write the sum it is part of as its own definition, or see "
                  "docs/language.md, \"Writing fast variants\"";
  return *best;
}

} // namespace

Selection selectSchedule(const LoweredKernel &k, const Halide::Target &ht,
                         const std::string &choice, const std::map<std::string, int64_t> *sizes,
                         bool jit, const std::map<std::string, int64_t> *runSizes) {
  Selection sel{nullptr, WholeKernel{}, Target(ht)};
  if (choice == "none")
    return sel; // no rule: nothing reads the run's sizes
  if (runSizes)
    sel.target.runBuffers = bufferSizes(k, *runSizes);
  if (choice == "auto" && sizes)
    return selectByWork(k, ht, *sizes, jit, sel.target);
  for (const auto &r : scheduleRules()) {
    if (choice != "auto" && r->name() != choice)
      continue;
    std::optional<Match> m = r->match(k, sel.target);
    if (!m) {
      if (choice == "auto")
        continue;
      throw std::runtime_error("schedule '" + choice + "' does not apply to kernel '" + k.name +
                               "' for target " + ht.to_string());
    }
    sel.rule = r.get();
    sel.match = std::move(*m);
    return sel;
  }
  if (choice == "auto")
    throw std::runtime_error("no schedule applies to kernel '" + k.name + "' for target " +
                             ht.to_string());
  std::string names;
  for (const auto &r : scheduleRules())
    names += (names.empty() ? "" : ", ") + r->name();
  throw std::runtime_error("unknown schedule '" + choice + "' (expected none, auto, " + names +
                           ")");
}

std::optional<bool> Target::atRun(const Halide::Expr &cond) const {
  if (runBuffers.empty())
    return std::nullopt;
  std::optional<int64_t> v = evalWith(cond, runBuffers);
  return v ? std::optional<bool>(*v != 0) : std::nullopt;
}

const char *const kRunSizesOnly =
    "attnc: this JIT-compiled kernel runs only at the sizes it was compiled for";

void sumInRegisterBlock(Halide::Func f, const Halide::Var &e, const Halide::Var &i,
                        const Halide::RVar &r, const Halide::LoopLevel &at, int vec, int vectors,
                        int rows, Halide::TailStrategy tail, bool stack) {
  f.compute_at(at);
  if (stack)
    f.store_in(Halide::MemoryType::Stack);
  f.bound_storage(e, vec * vectors)
      .bound_storage(i, rows)
      .vectorize(e, vec, tail)
      .unroll(i, rows, Halide::TailStrategy::GuardWithIf);
  // (The rows' block loop outside the sum, as in cpu-generic: inside it, LLVM could not keep the
  // accumulators in registers across the sum's steps.)
  Halide::Var bo(f.name() + "_bo"), bi(f.name() + "_bi"), ro(f.name() + "_bro"),
      ri(f.name() + "_bri");
  f.update()
      .split(e, bo, bi, vec, tail)
      .split(i, ro, ri, rows, Halide::TailStrategy::GuardWithIf)
      .reorder(bi, bo, ri, r, ro)
      .vectorize(bi)
      .unroll(bo)
      .unroll(ri);
}

std::vector<std::optional<Halide::Stage>>
specializeFor(Halide::Stage s, const std::vector<Halide::Expr> &conds, const Target &t) {
  std::vector<std::optional<Halide::Stage>> out(conds.size());
  for (size_t i = 0; i < conds.size(); ++i) {
    std::optional<bool> holds = t.atRun(conds[i]);
    // A condition the sizes make false keeps its branch, emptied to a failure: the copies after it
    // are then lowered knowing it is false, as ahead of time. Without that branch, the general copy
    // of an online softmax with fewer keys than a tile read its shifted last tile from before the
    // first key (Halide bounded the read without the clamp the condition lets it drop).
    if (holds && !*holds) {
      s.specialize(conds[i]).specialize_fail(kRunSizesOnly);
      continue;
    }
    out[i] = s.specialize(conds[i]);
    if (holds) {
      s.specialize_fail(kRunSizesOnly);
      break;
    }
  }
  return out;
}

uint64_t stableHash(const std::string &text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text)
    h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string scheduleSpaceKey(const std::string &rule, const std::vector<Knob> &knobs,
                             bool onlineTile) {
  std::string text = std::to_string(kScheduleSpaceRevision);
  auto list = [&](const std::vector<int> &v) {
    for (int x : v)
      text += std::to_string(x) + ",";
  };
  if (onlineTile) {
    text += "|tile:";
    list(kTunedOnlineTiles);
  }
  for (const Knob &k : knobs) {
    text += "|" + k.name + ":";
    list(k.choices);
    text += "=" + std::to_string(k.dflt);
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", (unsigned long long)stableHash(text));
  return rule + "/" + std::to_string(kScheduleSpaceRevision) + "/" + hex;
}

std::string Selection::name() const { return rule ? rule->name() : "none"; }

std::vector<Knob> Selection::knobs(const LoweredKernel &k) const {
  return rule ? rule->knobs(match, k, target) : std::vector<Knob>{};
}

std::string Selection::describe(const LoweredKernel &k, const ScheduleParams &params) const {
  std::string out = name();
  std::vector<std::string> parts;
  std::string set;
  for (const Knob &kb : knobs(k)) {
    int v = params.get(kb.name, kb.dflt);
    if (v != kb.dflt)
      set += (set.empty() ? "" : ",") + kb.name + "=" + std::to_string(v);
  }
  if (!set.empty())
    parts.push_back(set);
  for (const OnlineGroup &g : k.onlineGroups)
    if (g.tile != kDefaultOnlineTile) {
      parts.push_back("key tile " + std::to_string(g.tile));
      break;
    }
  for (size_t i = 0; i < parts.size(); ++i)
    out += (i ? "; " : " (") + parts[i] + (i + 1 == parts.size() ? ")" : "");
  return out;
}

std::string Selection::apply(LoweredKernel &k, const ScheduleParams &params) const {
  if (!rule) {
    if (!params.empty())
      throw std::runtime_error("schedule parameters (" + params.str() +
                               ") need a schedule, not 'none'");
    rootStoredOutputs(k);
    schedulePredicateInputs(k);
    return "none";
  }
  // A knob the rule does not read would be ignored silently: refuse it, naming the ones it has.
  std::vector<Knob> ks = knobs(k);
  for (const auto &[name, value] : params.values) {
    const Knob *knob = nullptr;
    for (const Knob &kb : ks)
      if (kb.name == name)
        knob = &kb;
    if (!knob) {
      std::string names;
      for (const Knob &kb : ks)
        names += (names.empty() ? "" : ", ") + kb.name;
      throw std::runtime_error(
          "schedule '" + rule->name() + "' has no knob '" + name + "' for kernel '" + k.name + "'" +
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
  k.gpu = target.gpu;
  rule->apply(match, k, target, params);
  scheduleStores(k, target.gpu);
  scheduleChecks(k);
  schedulePredicateInputs(k);
  return rule->name();
}

std::string applySchedule(LoweredKernel &k, const Halide::Target &t, const std::string &choice,
                          const ScheduleParams &params,
                          const std::map<std::string, int64_t> *runSizes) {
  return selectSchedule(k, t, choice, nullptr, false, runSizes).apply(k, params);
}

} // namespace attnc
