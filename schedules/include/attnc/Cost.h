// The arithmetic work of a scheduled plan next to its algorithm's, counted from Halide's loop nests.
//
// A schedule never changes what a kernel computes, but it decides how often: a reduction inlined
// into a loop it does not depend on is recomputed at every iteration of that loop (differential
// attention's sum over two softmaxes inlined into its consumer ran in O(N^4) instead of O(N^2)).
// The algorithm's work is the same pipeline with every Func computed once at root, over the region
// its consumers need; the plan's is the scheduled pipeline. Both are counted the same way from the
// Stmt Halide lowers them to, with the sizes bound, so their ratio shows recomputation and nothing
// else. Counts are deterministic (no timing), so tests may assert them.
#pragma once

#include "attnc/HalideGen.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

namespace attnc {

// Operations a loop nest executes, each vector operation counted once per lane.
struct WorkCount {
  double flops = 0;          // float add, sub, mul, div, min, max, compare, select
  double transcendental = 0; // calls of exp, log, tanh, sin, ... that Halide did not expand
  double loads = 0;          // elements loaded
  double stores = 0;         // elements stored
  // Loops whose trip count depends on data (a key padding mask's tile ranges) were counted at
  // their largest possible extent that the sizes bound, or once where none bounds them.
  bool approximate = false;
  // work() per Func whose values it computes (Halide's producer: an inlined Func's arithmetic
  // counts for its consumer); "" for arithmetic outside any producer.
  std::map<std::string, double> byFunc;
  // flops + transcendental: the figure plans are compared by.
  double work() const { return flops + transcendental; }
};

struct PlanCost {
  WorkCount plan, algorithm;
  // plan.work() / algorithm.work() (1 when both are 0).
  double ratio() const;
  // The DSL definition of `k` whose Funcs do the most work beyond the algorithm's (where the
  // recomputation is), and that excess; empty when there is none.
  std::pair<std::string, double> worstDefinition(const LoweredKernel &k) const;
};

// A scheduled kernel lowered once by Halide: the module every artefact of it compiles from (or,
// for a JIT plan, the pipeline Halide JIT-compiled, which realizes without lowering again), and
// the loop nest (taken where custom lowering passes run) that its work is counted on.
struct LoweredPlan {
  std::shared_ptr<Halide::Module> module;
  std::optional<Halide::Pipeline> jit;
  Halide::Internal::Stmt body;
};
// With `jit`, the plan is JIT-compiled; `keep`, when given, sees the loop nest once lowering is
// done and, by returning false, stops the compile before code generation (the plan is then its
// body alone: no module, no JIT pipeline). "auto" declines a plan that way without paying for
// LLVM's half of a compile it will not run. `keep` runs inside Halide's lowering of the plan (it
// may lower another pipeline: the algorithm's, to weigh the plan against).
LoweredPlan lowerPlan(const LoweredKernel &scheduled, const Halide::Target &t, bool jit = false,
                      const std::function<bool(const Halide::Internal::Stmt &)> &keep = {});

// Representative sizes for `k` when the caller gave none (an AOT build): every size symbol of the
// inputs takes `value`, except where `given` binds it.
std::map<std::string, int64_t>
costSizes(const LoweredKernel &k, const std::map<std::string, int64_t> &given, int64_t value = 64);

// Each buffer's extents and mins at `sizes` (every size symbol bound), named as Halide's front end
// names them: "q.extent.0" is q's innermost (last in the DSL) dimension; mins are 0, as attn-run
// and the runtime's views pass them. Throws std::runtime_error when a size is missing.
std::map<std::string, int64_t> bufferSizes(const LoweredKernel &k,
                                           const std::map<std::string, int64_t> &sizes);
// The value of the integer or boolean expression `e` with the names in `env` bound (as Cost's
// loop extents are evaluated); nullopt when it reads anything else.
std::optional<int64_t> evalWith(const Halide::Expr &e, const std::map<std::string, int64_t> &env);

// The work of `scheduled` (already scheduled by a rule, or unscheduled) on `t`, with the inputs'
// sizes bound by `sizes`. Lowers the pipeline (no code generation). Throws std::runtime_error when
// a size is missing.
WorkCount countWork(const LoweredKernel &scheduled, const Halide::Target &t,
                    const std::map<std::string, int64_t> &sizes);
// The same for a plan already lowered from `scheduled`.
WorkCount countWork(const LoweredKernel &scheduled, const LoweredPlan &plan,
                    const std::map<std::string, int64_t> &sizes);

// The algorithm's work: `unscheduled` (a lowering nobody scheduled; it is cloned, not changed)
// with every Func computed once at root.
WorkCount algorithmWork(const LoweredKernel &unscheduled, const Halide::Target &t,
                        const std::map<std::string, int64_t> &sizes);

// `attnc --emit=cost`: the sizes, the plan's and the algorithm's counts and their ratio, as text.
// `given` are --sizes; sizes it leaves out take costSizes' value. `lowered` and `algorithm`, when
// given, are `scheduled` already lowered and the algorithm's work at those sizes (by "auto"
// weighing the plan), used instead of lowering either again.
std::string costReport(const LoweredKernel &unscheduled, const LoweredKernel &scheduled,
                       const Halide::Target &t, const std::map<std::string, int64_t> &given,
                       const std::string &schedule, const LoweredPlan *lowered = nullptr,
                       const WorkCount *algorithm = nullptr);

// How much more arithmetic a rule's plan may do than the algorithm before the rule declines (in
// `auto`): tiles recompute a few producers at their edges and online softmax rescales its
// accumulator per key tile, which stay well under this; inlining a reduction into a loop it does
// not depend on multiplies the work by that loop's extent (N = 64 at the representative sizes).
constexpr double kMaxPlanWorkRatio = 4.0;

} // namespace attnc
