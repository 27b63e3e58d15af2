// Schedule rules: per-pattern, per-target schedules applied to a lowered (unscheduled) pipeline.
#pragma once

#include "attnc/Cost.h"
#include "attnc/HalideGen.h"
#include "attnc/Patterns.h"
#include "attnc/Target.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace attnc {

// Values for a rule's tunable knobs (tile sizes, register blocks, vector widths, how many loops
// run in parallel): what attn-tune searches and the tuning database stores. A knob left unset
// takes the rule's hand-picked default, so empty params are the default schedule.
struct ScheduleParams {
  std::map<std::string, int> values;
  int get(const std::string &knob, int dflt) const {
    auto it = values.find(knob);
    return it == values.end() ? dflt : it->second;
  }
  bool empty() const { return values.empty(); }
  // "knob=value,knob=value" (sorted by knob), "default" when empty.
  std::string str() const;
  // Parses str()'s form ("default" or empty: no values); false with a message otherwise.
  static bool parse(const std::string &text, ScheduleParams *out, std::string *err);
};

// One knob of a rule's search space: its candidate values and the default among them.
struct Knob {
  std::string name;
  std::vector<int> choices;
  int dflt;
};

// A rule schedules one pattern for one kind of target, in two steps, as TVM's dlight rules do:
// `match` finds the pattern once (nothing when the rule does not apply), then `knobs` and `apply`
// work from that match without looking for it again. Rules only call Halide's scheduling API, so
// they can never change what the kernel computes. Which rule wins is the order of scheduleRules(),
// not a property of the rule. Rules read the target through attnc::Target (Target.h), never
// Halide::Target's features.
class ScheduleRule {
public:
  virtual ~ScheduleRule() = default;
  virtual std::string name() const = 0;
  // The rule's pattern in `k` (see Patterns.h), or nothing when the rule does not apply to `k`
  // on `t`.
  virtual std::optional<Match> match(const LoweredKernel &k, const Target &t) const = 0;
  // The knobs `apply` reads for this match (empty: nothing to tune).
  virtual std::vector<Knob> knobs(const Match &, const LoweredKernel &, const Target &) const {
    return {};
  }
  // Schedules the kernel `m` was found in.
  virtual void apply(const Match &m, LoweredKernel &k, const Target &t,
                     const ScheduleParams &params) const = 0;
};

// The generic rule's choice for one Func (root storage for reductions and softmax statistics,
// outer indices fused and parallel, innermost vectorized); other rules use it for the Funcs
// outside their pattern.
// Its knobs (`generic.*`, see genericKnobs) come from `params`. Sums of products (projections)
// become register-blocked GEMMs; with the kernel given, their strided inputs get transposed copies.
void scheduleGenericFunc(LoweredFunc &f, const Target &t, const ScheduleParams &params = {},
                         LoweredKernel *k = nullptr);
std::vector<Knob> genericKnobs(const Target &t);
// Computes the sum `f` (a pure definition and one update over `r`) at `at`, a loop of its
// consumer over blocks of `e`, one block of up to `rows` rows of `i` by `vectors` vectors of `e`
// at a time, into storage of constant size (on the stack with `stack`) that LLVM keeps in
// registers across `r`; `tail` splits the block's vectors. A sum accumulated in a buffer whose
// rows lie a distance apart known only at run time loaded and stored every accumulator per step
// of `r` (cpu-window's and cpu-online's weighted sums at head dimensions not known when compiled).
void sumInRegisterBlock(Halide::Func f, const Halide::Var &e, const Halide::Var &i,
                        const Halide::RVar &r, const Halide::LoopLevel &at, int vec, int vectors,
                        int rows, Halide::TailStrategy tail, bool stack);
// Whether scheduleGenericFunc gives `f` a loop nest of its own (else it is inlined, knobs unused).
bool genericSchedules(const LoweredFunc &f);
// Whether `f`'s values call a float math function (exp, log, ...: what --emit=cost counts as
// transcendental) or divide by a float, with an argument or divisor that varies with f's indices.
bool callsTranscendental(const LoweredFunc &f);

// CUDA targets (schedules/cuda/): the generic rule's choice for one Func (root Funcs as grids of
// thread tiles over the two innermost indices, 32 x 8 unless the knobs `cuda.threads_x/y` say
// otherwise, outer indices fused into the third grid dimension, reduction loops inside each
// thread), and one stage scheduled that way with the given thread tile. Other CUDA rules use it
// for the Funcs outside their pattern and offer cudaGenericKnobs where such a Func has loops.
void scheduleCudaGenericFunc(LoweredFunc &f, const ScheduleParams &params = {});
std::vector<Knob> cudaGenericKnobs();
// Whether scheduleCudaGenericFunc gives `f` kernels of its own (else it is inlined).
bool cudaGenericSchedules(const LoweredFunc &f);
void scheduleCudaStage(Halide::Stage st, const LoweredFunc &f, int tileX, int tileY);

// Specialisations of `s` on `conds`, in order (Halide takes the first that holds), as
// s.specialize(c) for each would give them; each returned stage is to be scheduled like the one it
// specialises. In a JIT compile at known sizes (Target::runBuffers) a condition those sizes make
// false gets a copy that only fails (nullopt here) and the first they make true is the last copy:
// every other case of `s` then fails at run time (specialize_fail), so none of them is compiled.
// Call it once per stage, after the stage's other specialisations.
std::vector<std::optional<Halide::Stage>>
specializeFor(Halide::Stage s, const std::vector<Halide::Expr> &conds, const Target &t);

// The online softmax's key tiles attn-tune searches beside a rule's knobs (0: the pass's default).
inline const std::vector<int> kTunedOnlineTiles = {0, 64, 256};

// What a tuning database entry was searched over, as one short string: the rule, a revision of
// its meaning (kScheduleSpaceRevision: raise it when a knob keeps its name and values but
// schedules differently) and a hash of its knobs (names, candidates, defaults) and, for a
// kernel with an online softmax, of kTunedOnlineTiles. A knob added, removed, renamed, given
// other candidates or another default is another space, and attnc ignores entries of the old one.
inline constexpr int kScheduleSpaceRevision = 1;
// FNV-1a over `text`, 64 bits: the same on every build and machine (std::hash is not), for names
// and seeds that tuning databases and shards must agree on.
uint64_t stableHash(const std::string &text);
std::string scheduleSpaceKey(const std::string &rule, const std::vector<Knob> &knobs,
                             bool onlineTile);

// Every rule, in priority order: the first whose match finds its pattern schedules the kernel;
// each target's generic rule, last among its rules, matches every kernel.
const std::vector<std::unique_ptr<ScheduleRule>> &scheduleRules();

// A schedule choice resolved for one kernel and target: the rule (null for "none") and what it
// matched, so that describing, listing knobs and applying find the pattern once between them.
// The match names Funcs by index: it holds for the kernel it was found in.
struct Selection {
  const ScheduleRule *rule = nullptr;
  Match match;
  Target target;
  // Set when "auto" weighed the plans by their work (selectSchedule with sizes): the chosen
  // plan's cost, the rules declined before it as "name (ratio x)", the plan with default knobs
  // lowered once (an artefact may compile from it), and a warning when no rule's plan stayed
  // within kMaxPlanWorkRatio of the algorithm's work.
  std::optional<PlanCost> cost;
  std::vector<std::string> declined;
  std::optional<LoweredPlan> lowered;
  // The copy of the kernel that plan was scheduled on: a JIT plan runs with its parameters.
  std::shared_ptr<LoweredKernel> planKernel;
  std::string warning;

  // The rule's name, or "none".
  std::string name() const;
  // The rule's knobs for this kernel (none for "none").
  std::vector<Knob> knobs(const LoweredKernel &k) const;
  // The schedule with `params`, as one canonical string: "cpu-online (online.value_rows=2; key
  // tile 64)" lists only the knobs away from the rule's defaults and the online softmax's key
  // tile where it is not kDefaultOnlineTile, so two ways of asking for the same schedule (a
  // tuning database that found nothing better, say) describe it alike. Call before apply.
  std::string describe(const LoweredKernel &k, const ScheduleParams &params = {}) const;
  // Schedules `k` with knob values from `params` ("none" leaves the pipeline unscheduled:
  // everything inlined into the outputs, as Halide does by default) and returns name(). Throws
  // std::runtime_error for a knob the rule does not have or a value outside 1..(twice the
  // largest of the knob's choices), and for params given to "none".
  std::string apply(LoweredKernel &k, const ScheduleParams &params = {}) const;
};

// Resolves `choice`: "auto" (the first rule in scheduleRules() that matches), "none", or a
// rule's name. Throws std::runtime_error for an unknown or inapplicable rule.
// With `sizes` (for "auto"), each matching rule's plan is lowered and its work counted at those
// sizes (costSizes fills in the rest) against the algorithm's: a rule whose plan does more than
// kMaxPlanWorkRatio times the algorithm's work declines and the next rule is weighed; when every
// rule would, the least costly plan is taken with a warning naming the definition recomputed.
// With `jit`, each weighed plan is JIT-compiled (lowered once, as Pipeline::realize would) rather
// than only lowered: the chosen one then runs without lowering again, and only a declined plan,
// the exception, costs a code generation. With `runSizes` (a JIT compile that runs once, at
// those sizes), the selection's Target carries them (Target::runBuffers).
Selection selectSchedule(const LoweredKernel &k, const Halide::Target &t, const std::string &choice,
                         const std::map<std::string, int64_t> *sizes = nullptr, bool jit = false,
                         const std::map<std::string, int64_t> *runSizes = nullptr);

// selectSchedule(k, t, choice).apply(k, params): the kernel searched once, then scheduled; with
// `runSizes`, for a JIT compile that runs only at those sizes (Target::runBuffers).
std::string applySchedule(LoweredKernel &k, const Halide::Target &t, const std::string &choice,
                          const ScheduleParams &params = {},
                          const std::map<std::string, int64_t> *runSizes = nullptr);

} // namespace attnc
