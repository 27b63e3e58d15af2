// One kernel's compilation, stage by stage, for every tool (see Compilation.h).
#include "attnc/Compilation.h"

#include "attnc/output.h"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace attnc {

namespace {

std::string slurp(const std::filesystem::path &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Without opening it: opening a FIFO for reading waits for a writer.
bool pathExists(const std::string &path) {
  std::error_code ec;
  return std::filesystem::exists(std::filesystem::status(path, ec));
}

// A fresh temporary directory, removed with everything in it when the object goes. TempDir
// (runtime/output.h) registers it with the signal handlers, so an interrupted compile removes it too.
struct ScratchDir {
  TempDir dir;
  ScratchDir() {
    if (Status st = dir.create("attnc"); !st.ok())
      throw std::runtime_error(st.message());
  }
  std::filesystem::path operator/(const std::string &name) const {
    return std::filesystem::path(dir.path()) / name;
  }
};

} // namespace

std::optional<Emit> parseEmit(const std::string &s) {
  static const std::pair<const char *, Emit> kEmits[] = {
      {"ast", Emit::Ast},         {"mlir", Emit::Mlir}, {"halide", Emit::Halide},
      {"stmt", Emit::Stmt},       {"llvm", Emit::Llvm}, {"asm", Emit::Asm},
      {"ptx", Emit::Ptx},         {"obj", Emit::Obj},   {"lib", Emit::Lib},
      {"runtime", Emit::Runtime}, {"cost", Emit::Cost}};
  for (const auto &[name, e] : kEmits)
    if (s == name)
      return e;
  return std::nullopt;
}

AppliedSchedule scheduleKernel(LoweredKernel &k, const Halide::Target &t,
                               const ScheduleRequest &r) {
  AppliedSchedule out;
  // Halide formats a `require`'s message with string calls that device code lacks (an internal
  // error `append_string`, which reached users as an empty "Halide: Error:"): GPU kernels check
  // gathers on the host before the launch (lowerToHalide's hostGatherChecks); a gather whose
  // index uses an index of unknown extent is refused here, at the read.
  if (t.has_gpu_feature() && !k.inputGathers.empty()) {
    const auto &[at, tensor] = k.inputGathers.front();
    throw std::runtime_error(at + ": error: '" + tensor +
                             "' is read at an index taken from a tensor where GPU targets cannot "
                             "check it (a score that an online softmax computes only at the keys "
                             "its mask shows; device code cannot format the check's message): "
                             "compile with --online-softmax=off or for a CPU target");
  }
  if (isAutoscheduler(r.schedule)) {
    if (!r.params.empty())
      throw std::runtime_error("--schedule-params are a rule's knobs; " + r.schedule +
                               " takes none");
    out.described = r.schedule;
    applyAutoscheduler(k, t, r.schedule, r.estimates);
    out.applied = r.schedule + " (Halide's autoscheduler)";
    return out;
  }
  Selection sel =
      selectSchedule(k, t, r.schedule, r.weigh && r.params.empty() ? &r.estimates : nullptr, r.jit,
                     r.runSizes ? &*r.runSizes : nullptr);
  out.described = sel.describe(k, r.params);
  out.applied = sel.apply(k, r.params);
  if (!sel.declined.empty()) {
    std::string d;
    for (const std::string &x : sel.declined)
      d += (d.empty() ? "" : ", ") + x;
    out.applied += " (declined, recomputing work: " + d + ")";
  }
  out.warning = sel.warning;
  if (sel.cost)
    out.algorithm = sel.cost->algorithm;
  if (r.params.empty()) {
    out.lowered = std::move(sel.lowered);
    if (out.lowered && out.lowered->jit)
      out.jitKernel = std::move(sel.planKernel);
  }
  return out;
}

std::vector<std::string> compileArtefact(const LoweredKernel &k, Emit e, const Halide::Target &t,
                                         const ArtefactInfo &info) {
  using OFT = Halide::OutputFileType;
  Halide::Pipeline p = k.pipeline();
  std::vector<Halide::Argument> args = k.arguments();
  // What Pipeline::compile_to_* do: lower to a module, then generate each output from it. The
  // plan "auto" lowered to weigh it is that module (same Funcs, schedule, arguments, name and
  // target), so code is generated from it rather than lowered again.
  auto compile = [&](const std::map<OFT, std::string> &outputs) {
    if (info.schedule.lowered && info.schedule.lowered->module)
      info.schedule.lowered->module->compile(outputs);
    else
      p.compile_to(outputs, args, k.name, t);
  };
  ScratchDir tmp;
  switch (e) {
  case Emit::Stmt: {
    compile({{OFT::stmt, (tmp / "out").string()}});
    return {"# schedule: " + info.schedule.applied + "\n" + slurp(tmp / "out")};
  }
  case Emit::Llvm:
    compile({{OFT::llvm_assembly, (tmp / "out").string()}});
    return {slurp(tmp / "out")};
  case Emit::Asm:
    compile({{OFT::assembly, (tmp / "out").string()}});
    return {slurp(tmp / "out")};
  case Emit::Ptx: {
    // The device code Halide embeds in the host object: one PTX module per kernel, every GPU
    // loop nest an entry. Without a CUDA target there is none, which is an error, not empty output.
    if (!t.has_feature(Halide::Target::CUDA))
      throw std::runtime_error(
          "--emit=ptx needs a CUDA target, e.g. --target=x86-64-linux-cuda-cuda_capability_80");
    compile({{OFT::device_code, (tmp / "out.ptx").string()}});
    std::string text = slurp(tmp / "out.ptx");
    if (text.find(".entry") == std::string::npos)
      throw std::runtime_error("kernel '" + k.name + "' has no GPU code for " + t.to_string() +
                               " (schedule: " + info.schedule.applied + ")");
    return {text};
  }
  case Emit::Obj:
    compile({{OFT::object, (tmp / "out.o").string()}});
    return {slurp(tmp / "out.o")};
  case Emit::Lib: {
    // <prefix>.a (kernel + Halide runtime), <prefix>.h (Halide's C API), <prefix>.attnc.h.
    const std::string prefix = (tmp / info.libBase).string();
    compile({{OFT::c_header, prefix + ".h"}, {OFT::static_library, prefix + ".a"}});
    std::string desc = runtimeDescriptorHeader(k, info.libBase + ".h", info.targetKey, t,
                                               info.source, info.schedule.described);
    return {slurp(tmp / (info.libBase + ".a")), slurp(tmp / (info.libBase + ".h")), desc};
  }
  default:
    throw std::logic_error("compileArtefact: not a compiled artefact");
  }
}

std::string compileRuntime(const Halide::Target &t) {
  ScratchDir tmp;
  Halide::compile_standalone_runtime(
      {{Halide::OutputFileType::static_library, (tmp / "runtime.a").string()}}, t);
  return slurp(tmp / "runtime.a");
}

Compilation::Compilation(CompileOptions opts, std::ostream &diag)
    : opts_(std::move(opts)), diag_(diag),
      ctx_(opts_.mlirThreading ? mlir::MLIRContext::Threading::ENABLED
                               : mlir::MLIRContext::Threading::DISABLED) {}
Compilation::~Compilation() = default;

bool Compilation::parse() {
  if (parsed_)
    return true;
  if (!runFrontEnd(opts_.path, opts_.frontEnd, diag_, &fe_))
    return false;
  parsed_ = true;
  return true;
}

bool Compilation::checkKernelName() {
  if (opts_.kernel.empty())
    return true;
  for (const auto &k : fe_.module->kernels)
    if (k->name == opts_.kernel)
      return true;
  diag_ << "error: no kernel named '" << opts_.kernel << "'\n";
  return false;
}

std::string Compilation::kernelName() const {
  if (!opts_.kernel.empty())
    return opts_.kernel;
  if (fe_.module && fe_.module->kernels.size() == 1)
    return fe_.module->kernels[0]->name;
  return "";
}

bool Compilation::target(Halide::Target *t) {
  if (!target_) {
    Halide::Target parsed;
    std::string err;
    if (!parseTarget(opts_.target, &parsed, &err)) {
      diag_ << "error: " << err << "\n";
      return false;
    }
    target_ = parsed;
  }
  *t = *target_;
  return true;
}

mlir::ModuleOp Compilation::generated() {
  if (!generated_) {
    if (!parse())
      return nullptr;
    generated_ = generateMLIR(ctx_, fe_, diag_);
  }
  return generated_ ? *generated_ : nullptr;
}

mlir::ModuleOp Compilation::optimized(int64_t onlineTile) {
  auto it = optimized_.find(onlineTile);
  if (it != optimized_.end())
    return *it->second;
  mlir::ModuleOp gen = generated();
  if (!gen)
    return nullptr;
  mlir::OwningOpRef<mlir::ModuleOp> m(gen.clone());
  if (opts_.runPasses) {
    PipelineOptions po = opts_.passes;
    if (onlineTile >= 0)
      po.onlineTile = onlineTile;
    if (opts_.onlineSoftmax) {
      po.onlineSoftmax = *opts_.onlineSoftmax;
    } else {
      // The CUDA dense schedule tiles the unfused form in shared memory; CPU targets stream. An
      // unparsable target is reported by the stage that needs it.
      Halide::Target t;
      std::string ignored;
      po.onlineSoftmax = !(parseTarget(opts_.target, &t, &ignored) && t.has_gpu_feature());
    }
    if (!runPasses(*m, po, diag_, &warned_))
      return nullptr;
  }
  mlir::ModuleOp out = *m;
  optimized_.emplace(onlineTile, std::move(m));
  return out;
}

attn::KernelOp Compilation::kernel(mlir::ModuleOp m) {
  return selectKernel(m, opts_.kernel, diag_);
}

const LoweredKernel &Compilation::lowered(int64_t onlineTile) {
  if (auto it = lowered_.find(onlineTile); it != lowered_.end())
    return it->second;
  mlir::ModuleOp m = optimized(onlineTile);
  if (!m)
    throw CompileFailed();
  attn::KernelOp k = kernel(m);
  if (!k)
    throw CompileFailed();
  // GPU kernels check gathers on the host (device code cannot format a check's message).
  Halide::Target t;
  std::string ignored;
  const bool gpu = parseTarget(opts_.target, &t, &ignored) && t.has_gpu_feature();
  return lowered_.emplace(onlineTile, lowerToHalide(k, gpu || opts_.hostGatherChecks))
      .first->second;
}

bool Compilation::findTuning(const std::string &dbOption, TunedSchedule *out) {
  *out = {};
  if (dbOption == "none")
    return true;
  const bool named = !dbOption.empty();
  const std::string path = named ? dbOption : defaultTuningDbPath(opts_.path);
  // exists(), not opening it: a FIFO would block here (TuningDb::load refuses it).
  if (!named && !pathExists(path))
    return true;
  if (named && !pathExists(path)) {
    diag_ << "error: cannot read the tuning database '" << path << "'\n";
    return false;
  }
  std::string err;
  if (!TuningDb::load(path, &db_, &err)) {
    diag_ << "error: " << err << "\n";
    return false;
  }
  const std::string kname = kernelName();
  Halide::Target t;
  std::string ignored;
  if (kname.empty() || !parseTarget(opts_.target, &t, &ignored))
    return true;
  const std::string variant = tuningVariantKey(opts_.path, kname, opts_.frontEnd.sema.defines),
                    target = tuningTargetKey(t);
  if (!opts_.passes.estimates.empty()) {
    out->entry = db_.find(variant, target, bucketOf(opts_.passes.estimates));
  } else {
    std::vector<const TuningEntry *> all = db_.all(variant, target);
    if (all.size() == 1)
      out->entry = all[0];
    else if (all.size() > 1)
      diag_ << "attnc: note: " << path << " tunes " << variant << " for " << all.size()
            << " size buckets on this target; pass --sizes to pick one (using the default "
               "schedule)\n";
  }
  if (out->entry)
    out->from = path + " [" + out->entry->bucket + "]";
  return true;
}

bool Compilation::tuningFits(const TunedSchedule &tuned, const std::string &schedule) {
  Halide::Target t;
  if (!tuned.entry || !target(&t))
    return false;
  // An entry from another attnc (or rule) may not fit any more: say so, keep the default.
  Selection sel = selectSchedule(lowered(), t, schedule, &opts_.passes.estimates);
  if (tuned.entry->rule != sel.name()) {
    diag_ << "attnc: warning: " << tuned.from << " was tuned for schedule '" << tuned.entry->rule
          << "', which no longer applies first; using the default schedule (rerun attn-tune)\n";
    return false;
  }
  try {
    ScheduleParams sp;
    sp.values = tuned.entry->params;
    LoweredKernel probe = lower();
    sel.apply(probe, sp);
  } catch (const std::runtime_error &e) {
    diag_ << "attnc: warning: " << tuned.from << ": " << e.what()
          << "; using the default schedule (rerun attn-tune)\n";
    return false;
  }
  // Knobs that fit, but measured by another attnc, over another schedule space, or (compiling for this machine) on
  // another CPU: its times say nothing about this build's schedules here (docs/tuning.md).
  const LoweredKernel &lk = lowered();
  const std::string space = scheduleSpaceKey(sel.name(), sel.knobs(lk), !lk.onlineGroups.empty());
  std::string stale;
  if (tuned.entry->attncVersion != attncVersion())
    stale =
        "was tuned by attnc " +
        (tuned.entry->attncVersion.empty() ? std::string("(unknown)") : tuned.entry->attncVersion) +
        ", this is attnc " + attncVersion();
  else if (tuned.entry->space != space)
    stale = "was tuned over schedule space " +
            (tuned.entry->space.empty() ? std::string("(unknown)") : tuned.entry->space) +
            ", which is now " + space;
  else if (opts_.target == "host" && tuned.entry->machine != tuningMachineName())
    stale = "was measured on " + tuned.entry->machine + ", this machine is " + tuningMachineName() +
            " (naming its target with --target uses it)";
  if (!stale.empty()) {
    diag_ << "attnc: note: " << tuned.from << " " << stale
          << "; using the default schedule (rerun attn-tune)\n";
    return false;
  }
  return true;
}

} // namespace attnc
