// Shared driver steps for attnc, attn-run and tests: read, analyse, lower, schedule, describe.
#pragma once

#include "attnc/HalideGen.h"
#include "attnc/Transforms/Passes.h"
#include "attnc/dsl/AST.h"
#include "attnc/dsl/FrontEnd.h"
#include "attnc/dsl/Sema.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <map>
#include <memory>
#include <ostream>
#include <set>
#include <string>

namespace attnc {

struct FrontEnd {
  std::shared_ptr<dsl::SourceFile> file;
  std::unique_ptr<dsl::Module> module;
};

// Reads `path` and its imports, parses and analyses them (dsl::loadModule). Prints
// `file:line:col: error: ...` diagnostics (or a plain `error:` for unreadable files) to `err`;
// returns false on any error.
bool runFrontEnd(const std::string &path, const dsl::FrontEndOptions &opts, std::ostream &err,
                 FrontEnd *out);
bool runFrontEnd(const std::string &path, const dsl::SemaOptions &opts, std::ostream &err,
                 FrontEnd *out);

// MLIRGen with diagnostics routed to `err`; null on failure.
mlir::OwningOpRef<mlir::ModuleOp> generateMLIR(mlir::MLIRContext &ctx, const FrontEnd &fe,
                                               std::ostream &err);

// Runs attnc's dialect passes (attnc::runPassPipeline) with diagnostics routed to `err`; a
// warning already in `warned` (when given) is not printed again (the passes may run once per
// online tile size on one kernel).
bool runPasses(mlir::ModuleOp module, const PipelineOptions &opts, std::ostream &err,
               std::set<std::string> *warned = nullptr);

// Parses "NAME=VALUE,NAME=VALUE" (integers in 1..2^31-1, as tensor extents are) into `out`; false
// with a message otherwise.
bool parseSizes(const std::string &s, std::map<std::string, int64_t> *out, std::string *err);

// Picks kernel `name` (or the only one) from the module; prints an error and returns null otherwise.
attn::KernelOp selectKernel(mlir::ModuleOp m, const std::string &name, std::ostream &err);

// "host" means this machine (Halide's get_host_target); anything else must be a valid Halide
// target string such as x86-64-linux-avx2-fma.
bool parseTarget(const std::string &s, Halide::Target *t, std::string *err);

// Whether code for `t` can run here, as JIT compilation (attn-run, attn-tune) needs: the host's
// architecture, bit width and OS, and no instruction set the host CPU lacks. False with a message
// that names the difference; compiling ahead of time for another machine stays allowed.
bool checkJitTarget(const Halide::Target &t, std::string *err);

// The target as the tuning database keys it: the architecture and CPU/GPU features, without the
// features that only change how code is packaged or checked (no_runtime, jit, profile, ...).
std::string tuningTargetKey(const Halide::Target &t);

// Halide's autoschedulers, which attnc can apply instead of a schedule rule (`--schedule=NAME`):
// Mullapudi2016 and Adams2019 for CPU targets, Anderson2021 for CUDA.
bool isAutoscheduler(const std::string &name);
// Applies autoscheduler `name` (its plugin is loaded from beside libHalide) with `sizes` as the
// estimate of every input and output dimension and this machine's thread count as parallelism.
// Throws std::runtime_error naming a size the estimates lack, or a plugin that cannot be loaded.
void applyAutoscheduler(LoweredKernel &k, const Halide::Target &t, const std::string &name,
                        const std::map<std::string, int64_t> &sizes);

// An online softmax's tile visits at one call's inputs (OnlineGroup::visits, evaluated):
// how much of the key loop its mask bounds and key padding counts let the kernel skip.
struct TileVisitCount {
  std::string output;
  int tile = 0, rowsPerBlock = 1;
  bool masked = false;
  int64_t visited = 0, maskTested = 0, total = 0;
};
// Realizes the TileVisits of every online softmax of `k` on the host CPU (JIT); the kernel's input params must be set.
// Throws Halide::Error as realize does (a failed requirement of the inputs, say).
std::vector<TileVisitCount> countTileVisits(const LoweredKernel &k);
// "o: key tiles visited 19 of 28 (67.9%), 7 with the mask test (blocks of 32 query rows x 16 keys)".
std::string describeTileVisits(const TileVisitCount &c);

// True when both paths name the same existing file (compared by device and inode, so `./x`,
// absolute paths and links all match); used to refuse overwriting inputs.
bool sameFile(const std::string &a, const std::string &b);

// The C++ header that describes a compiled kernel to the runtime (`<prefix>.attnc.h`).
// `schedule` is recorded in the descriptor (KernelDesc::schedule; attnc passes
// Selection::describe's).
std::string runtimeDescriptorHeader(const LoweredKernel &k, const std::string &halideHeader,
                                    const std::string &targetKey, const Halide::Target &target,
                                    const std::string &source, const std::string &schedule = "");

} // namespace attnc
