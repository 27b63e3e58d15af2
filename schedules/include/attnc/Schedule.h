// Schedule rules: per-pattern, per-target schedules applied to a lowered (unscheduled) pipeline.
#pragma once

#include "attnc/HalideGen.h"

#include <memory>
#include <string>
#include <vector>

namespace attnc {

// A rule recognises a pattern in a lowered kernel and schedules it for one kind of target. Rules
// only call Halide's scheduling API, so they can never change what the kernel computes.
class ScheduleRule {
public:
  virtual ~ScheduleRule() = default;
  virtual std::string name() const = 0;
  // Higher wins when several rules apply; the generic fallback has the lowest.
  virtual int priority() const = 0;
  virtual bool applies(const LoweredKernel& k, const Halide::Target& t) const = 0;
  virtual void apply(LoweredKernel& k, const Halide::Target& t) const = 0;
};

std::unique_ptr<ScheduleRule> makeCpuDenseRule();
std::unique_ptr<ScheduleRule> makeCpuWindowRule();
std::unique_ptr<ScheduleRule> makeCpuGenericRule();

// The generic rule's choice for one Func (root storage for reductions and softmax statistics,
// outer indices fused and parallel, innermost vectorized); other rules use it for the Funcs
// outside their pattern.
void scheduleGenericFunc(LoweredFunc& f, const Halide::Target& t);

// CUDA targets (schedules/cuda/): the generic rule's choice for one Func (root Funcs as grids of
// 32 x 8 thread tiles over the two innermost indices, outer indices fused into the third grid
// dimension, reduction loops inside each thread), and one stage scheduled that way with the
// given thread tile.
std::unique_ptr<ScheduleRule> makeCudaDenseRule();
std::unique_ptr<ScheduleRule> makeCudaWindowRule();
std::unique_ptr<ScheduleRule> makeCudaSampleRule();
std::unique_ptr<ScheduleRule> makeCudaGenericRule();
void scheduleCudaGenericFunc(LoweredFunc& f, const Halide::Target& t);
void scheduleCudaStage(Halide::Stage st, const LoweredFunc& f, int tileX, int tileY);

// Every rule, best first.
const std::vector<std::unique_ptr<ScheduleRule>>& scheduleRules();

// Applies `choice`: "auto" (the best applicable rule), "none" (leave the pipeline unscheduled:
// everything inlined into the outputs, as Halide does by default) or a rule's name. Returns the
// name of what was applied; throws std::runtime_error for an unknown or inapplicable rule.
std::string applySchedule(LoweredKernel& k, const Halide::Target& t, const std::string& choice);

} // namespace attnc
