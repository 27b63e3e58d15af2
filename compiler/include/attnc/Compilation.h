// One kernel's compilation: source -> checked AST -> attn dialect -> passes -> lowered kernel -> schedule -> artefact.
//
// Every tool (attnc, attn-run, attn-tune, attn-bench, the fuzz harness) drives its kernel through
// this type instead of calling the stages itself. Each stage runs once and is cached, HalideGen's
// lowering included (once per online tile, which is a pass option); lower() hands out a clone of
// it on every call, because schedule rules mutate the Funcs they schedule, so each schedule
// candidate needs its own copy. The library sits above attnc_schedules (it applies rules), which
// sits above HalideGen.
#pragma once

#include "attnc/Driver.h"
#include "attnc/Schedule.h"
#include "attnc/TuningDb.h"

#include "mlir/IR/MLIRContext.h"

#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

namespace attnc {

// The stages attnc prints or writes (`--emit=`).
enum class Emit { Ast, Mlir, Halide, Stmt, Llvm, Asm, Ptx, Obj, Lib, Runtime, Cost };
// "ast", "mlir", ..., "runtime"; nullopt for anything else.
std::optional<Emit> parseEmit(const std::string &s);

struct CompileOptions {
  std::string path;              // the .attn file
  dsl::FrontEndOptions frontEnd; // -I, -D
  std::string kernel;            // --kernel: empty picks the only kernel
  std::string target = "host";   // 'host' or a Halide target string
  PipelineOptions passes;        // --sizes, --sample-order, --online-tile
  // --online-softmax: nullopt is auto (on for CPU targets; off for GPU targets, whose cuda-dense
  // schedule keeps the unfused scores in shared memory tiles).
  std::optional<bool> onlineSoftmax;
  // --gather-checks=host: a read at an index taken from a tensor is range-checked before the
  // kernel, over the indices it uses where it counts, as GPU targets always do (device code cannot
  // format the message), instead of at the read (lowerToHalide's hostGatherChecks).
  bool hostGatherChecks = false;
  bool runPasses = true; // --no-opt
  // MLIR's thread pool: the fuzz harness turns it off (one input at a time, no threads to leak).
  bool mlirThreading = true;
};

// What to schedule with: a rule ("auto", a rule's name or "none") and its knobs, or one of
// Halide's autoschedulers, which takes `estimates` (every size) as its estimates.
struct ScheduleRequest {
  std::string schedule = "auto";
  ScheduleParams params;
  std::map<std::string, int64_t> estimates;
  // Whether "auto" weighs each rule's plan by its work and declines a recomputing one. Off when
  // the user chose knobs (--online-tile, --schedule-params, a tuned entry): the plan they asked
  // for is the one they get, as for a rule named by --schedule.
  bool weigh = true;
  // For a JIT run (attn-run): "auto" JIT-compiles the plans it weighs, and the chosen one comes
  // back as AppliedSchedule::jitKernel, to run without lowering it again.
  bool jit = false;
  // For a JIT run at known sizes (attn-run: the inputs' sizes): the rules compile only the
  // specialisations these sizes take (Target::runBuffers); the kernel then runs only at them.
  std::optional<std::map<std::string, int64_t>> runSizes;
};

// The schedule a kernel got: `applied` for humans (the stmt header, attn-run's report),
// `described` for the runtime descriptor (KernelDesc::schedule).
struct AppliedSchedule {
  std::string applied, described;
  // "auto"'s warning when every rule's plan recomputes work (Selection::warning), to print.
  std::string warning;
  // The plan as "auto" lowered it to weigh it, when the kernel was scheduled exactly so (default
  // knobs): compileArtefact compiles from it instead of lowering again.
  std::optional<LoweredPlan> lowered;
  // When "auto" weighed the plans: the algorithm's work at the request's estimates (costReport's
  // sizes for the same --sizes), so that --emit=cost does not lower the algorithm again.
  std::optional<WorkCount> algorithm;
  // With ScheduleRequest::jit, when "auto" weighed the plans: the scheduled copy of the kernel
  // whose pipeline (lowered->jit) is already JIT-compiled. Bind the inputs to its parameters
  // and realize lowered->jit; the kernel passed to scheduleKernel is scheduled alike, but would
  // compile again.
  std::shared_ptr<LoweredKernel> jitKernel;
};

// Applies `r` to `k` (a fresh lowering). Throws std::runtime_error for an unknown or inapplicable
// rule, bad knobs, or knobs given to an autoscheduler.
AppliedSchedule scheduleKernel(LoweredKernel &k, const Halide::Target &t, const ScheduleRequest &r);

// Compiles a scheduled kernel to one artefact (Stmt, Llvm, Asm, Ptx, Obj or Lib) and returns its
// files' contents: one, or for Lib the static library, Halide's header and the runtime descriptor
// (`libBase` names the header they include). Temporary files live in a std::filesystem-managed
// directory that is removed on return. Throws Halide::Error or std::runtime_error.
struct ArtefactInfo {
  AppliedSchedule schedule;
  std::string libBase;   // Lib: file name of the prefix (PREFIX.h is included by the descriptor)
  std::string targetKey; // Lib: the target as the descriptor records it (the --target spelling)
  std::string source;    // Lib: the .attn file the descriptor cites
};
std::vector<std::string> compileArtefact(const LoweredKernel &k, Emit e, const Halide::Target &t,
                                         const ArtefactInfo &info);

// The Halide runtime for `t` alone, as a static library's bytes (`attnc --emit=runtime`).
std::string compileRuntime(const Halide::Target &t);

// The tuning database's schedule for this kernel, target and size bucket.
struct TunedSchedule {
  const TuningEntry *entry = nullptr; // null: none applies
  std::string from;                   // "PATH [bucket]", for messages
};

class Compilation {
public:
  explicit Compilation(CompileOptions opts, std::ostream &diag);
  ~Compilation();
  Compilation(const Compilation &) = delete;
  Compilation &operator=(const Compilation &) = delete;

  // The options; a stage reads them when it first runs, so they may change until then.
  CompileOptions &options() { return opts_; }
  std::ostream &diag() { return diag_; }

  // Reads, parses and checks the file and its imports; false after printing diagnostics.
  bool parse();
  const FrontEnd &frontEnd() const { return fe_; }
  // After parse(): whether --kernel (if given) names a kernel of the file; prints an error if not.
  bool checkKernelName();
  // After parse(): --kernel, or the only kernel's name; empty when the file has several.
  std::string kernelName() const;

  // options().target parsed (cached); false after printing the error.
  bool target(Halide::Target *t);

  // MLIRGen's module (the dialect passes not run); null after printing diagnostics.
  mlir::ModuleOp generated();
  // The module after the dialect passes (unless options().runPasses is false), with
  // `onlineTile` >= 0 replacing options().passes.onlineTile; cached per tile. Null after
  // printing diagnostics.
  mlir::ModuleOp optimized(int64_t onlineTile = -1);
  // Forgets the optimized modules and their lowerings, so that the next optimized() or lower()
  // runs the passes with options() as they are now (attn-tune learns its sizes from its inputs'
  // shapes).
  void resetPasses() {
    lowered_.clear();
    optimized_.clear();
  }
  // The selected kernel of `m` (options().kernel, or the only one); null after printing an error.
  attn::KernelOp kernel(mlir::ModuleOp m);

  // The selected kernel of optimized(onlineTile) lowered by HalideGen, once per tile: never
  // scheduled, for reading (rule matching, knobs, inputs). Throws CompileFailed after
  // diagnostics were printed, std::runtime_error for IR with no lowering.
  const LoweredKernel &lowered(int64_t onlineTile = -1);
  // A copy of lowered(onlineTile) of its own (attnc::clone), to schedule. Throws as lowered().
  LoweredKernel lower(int64_t onlineTile = -1) { return clone(lowered(onlineTile)); }

  // The tuning database's entry for this kernel and target: `dbOption` is --tuning-db (empty:
  // attnc-tuning.json beside the file, when present; "none": no database). A named database
  // that cannot be read is an error (false); several size buckets without --sizes is a note and
  // no entry.
  bool findTuning(const std::string &dbOption, TunedSchedule *out);
  // Whether a tuned entry still fits: its rule is still the one `schedule` picks and its knobs
  // apply. Prints a warning naming why not.
  bool tuningFits(const TunedSchedule &tuned, const std::string &schedule);

private:
  CompileOptions opts_;
  std::ostream &diag_;
  std::set<std::string> warned_; // the passes' warnings printed once
  FrontEnd fe_;
  bool parsed_ = false;
  std::optional<Halide::Target> target_;
  mlir::MLIRContext ctx_;
  mlir::OwningOpRef<mlir::ModuleOp> generated_;
  std::map<int64_t, mlir::OwningOpRef<mlir::ModuleOp>> optimized_;
  std::map<int64_t, LoweredKernel> lowered_;
  TuningDb db_;
};

// Thrown by Compilation::lower when a stage failed and already printed its diagnostics.
struct CompileFailed : std::runtime_error {
  CompileFailed() : std::runtime_error("compilation failed (diagnostics printed)") {}
};

} // namespace attnc
