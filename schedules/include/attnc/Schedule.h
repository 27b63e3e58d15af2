// Schedule rules: per-pattern, per-target schedules applied to a lowered (unscheduled) pipeline.
#pragma once

#include "attnc/HalideGen.h"

#include <map>
#include <memory>
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

// A rule recognises a pattern in a lowered kernel and schedules it for one kind of target. Rules
// only call Halide's scheduling API, so they can never change what the kernel computes.
class ScheduleRule {
public:
  virtual ~ScheduleRule() = default;
  virtual std::string name() const = 0;
  // Higher wins when several rules apply; the generic fallback has the lowest.
  virtual int priority() const = 0;
  virtual bool applies(const LoweredKernel &k, const Halide::Target &t) const = 0;
  // The knobs `apply` reads for this kernel (empty: nothing to tune).
  virtual std::vector<Knob> knobs(const LoweredKernel &, const Halide::Target &) const {
    return {};
  }
  virtual void apply(LoweredKernel &k, const Halide::Target &t,
                     const ScheduleParams &params) const = 0;
};

std::unique_ptr<ScheduleRule> makeCpuDenseRule();
std::unique_ptr<ScheduleRule> makeCpuWindowRule();
std::unique_ptr<ScheduleRule> makeCpuGenericRule();

// The generic rule's choice for one Func (root storage for reductions and softmax statistics,
// outer indices fused and parallel, innermost vectorized); other rules use it for the Funcs
// outside their pattern.
// Its knobs (`generic.*`, see genericKnobs) come from `params`. Sums of products (projections)
// become register-blocked GEMMs; with the kernel given, their strided inputs get transposed copies.
void scheduleGenericFunc(LoweredFunc &f, const Halide::Target &t, const ScheduleParams &params = {},
                         LoweredKernel *k = nullptr);
std::vector<Knob> genericKnobs(const Halide::Target &t);
// Whether scheduleGenericFunc gives `f` a loop nest of its own (else it is inlined, knobs unused).
bool genericSchedules(const LoweredFunc &f);

// CUDA targets (schedules/cuda/): the generic rule's choice for one Func (root Funcs as grids of
// thread tiles over the two innermost indices, 32 x 8 unless the knobs `cuda.threads_x/y` say
// otherwise, outer indices fused into the third grid dimension, reduction loops inside each
// thread), and one stage scheduled that way with the given thread tile. Other CUDA rules use it
// for the Funcs outside their pattern and offer cudaGenericKnobs where such a Func has loops.
std::unique_ptr<ScheduleRule> makeCudaDenseRule();
std::unique_ptr<ScheduleRule> makeCudaWindowRule();
std::unique_ptr<ScheduleRule> makeCudaSampleRule();
std::unique_ptr<ScheduleRule> makeCudaGenericRule();
void scheduleCudaGenericFunc(LoweredFunc &f, const Halide::Target &t,
                             const ScheduleParams &params = {});
std::vector<Knob> cudaGenericKnobs();
// Whether scheduleCudaGenericFunc gives `f` kernels of its own (else it is inlined).
bool cudaGenericSchedules(const LoweredFunc &f);
void scheduleCudaStage(Halide::Stage st, const LoweredFunc &f, int tileX, int tileY);

// Every rule, best first.
const std::vector<std::unique_ptr<ScheduleRule>> &scheduleRules();

// The rule `choice` names: "auto" (the best applicable rule) or a rule's name; null for "none".
// Throws std::runtime_error for an unknown or inapplicable rule.
const ScheduleRule *selectRule(const LoweredKernel &k, const Halide::Target &t,
                               const std::string &choice);

// Applies `choice`: "auto" (the best applicable rule), "none" (leave the pipeline unscheduled:
// everything inlined into the outputs, as Halide does by default) or a rule's name, with knob
// values from `params`. Returns the name of what was applied; throws std::runtime_error for an
// unknown or inapplicable rule, and for a knob the rule does not have or a value outside 1..(twice
// the largest of the knob's choices).
std::string applySchedule(LoweredKernel &k, const Halide::Target &t, const std::string &choice,
                          const ScheduleParams &params = {});

// The schedule `choice` with `params` would apply, as one canonical string: "cpu-online
// (online.value_rows=2; key tile 64)" lists only the knobs away from the rule's defaults and the
// online softmax's key tile where it is not 128, so two ways of asking for the same schedule (a
// tuning database that found nothing better, say) describe it alike. Call before applySchedule.
std::string describeSchedule(const LoweredKernel &k, const Halide::Target &t,
                             const std::string &choice, const ScheduleParams &params = {});

} // namespace attnc
