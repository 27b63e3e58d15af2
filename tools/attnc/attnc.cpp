// attnc: compiles a .attn kernel and prints or writes any stage (ast, mlir, halide, stmt, llvm, asm, ptx, obj, lib).
#include "attnc/Compilation.h"
#include "attnc/Transforms/Passes.h"
#include "attnc/dsl/Names.h"
#include "attnc/output.h"

#include "mlir/IR/AsmState.h"
#include "llvm/Support/raw_ostream.h"

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

namespace {

const char *kUsage =
    "usage: attnc FILE.attn [options]\n"
    "  --emit=ast|mlir|halide|stmt|llvm|asm|ptx|obj|lib   stage to print or write (default: mlir;\n"
    "                    ptx: the CUDA device code, for a CUDA target)\n"
    "  -o PATH           output file (obj) or prefix (lib: PATH.a, PATH.h, PATH.attnc.h); default "
    "stdout\n"
    "  --target=T        'host' (default) or a Halide target string, e.g. x86-64-linux-avx2-fma "
    "or\n"
    "                    x86-64-linux-cuda-cuda_capability_80 (CUDA: capability 80 or 86, always "
    "spelt)\n"
    "  --schedule=S      auto (default), none, or a rule name (cpu-online, cpu-sample, cpu-dense, "
    "cpu-window,\n"
    "                    cpu-generic; cuda-sample, cuda-dense, cuda-window, cuda-generic for CUDA "
    "targets), or\n"
    "                    Halide's autoscheduler Mullapudi2016 or Adams2019 (Anderson2021 for "
    "CUDA), which\n"
    "                    takes every size from --sizes as its estimates\n"
    "  --kernel=NAME     kernel to compile when the file has several\n"
    "  --function-name=F C symbol of the compiled kernel (default: the kernel name)\n"
    "  -D NAME=VALUE     override a kernel constant\n"
    "  -I DIR            also search DIR for 'import name' (before the standard library)\n"
    "  --depfile=PATH    write a Make-style dependency file (the input and every imported file)\n"
    "  --sizes=N=V,...   typical sizes (e.g. --sizes=B=1,Q=300) for the cost-model passes; "
    "repeatable\n"
    "  --sample-order=O  auto (default: by cost from --sizes), sample-first or project-first\n"
    "  --online-softmax=M  auto (default: on for CPU targets, off for CUDA), on or off: fuse "
    "softmax\n"
    "                    and the weighted sum over its axis into a streaming online softmax\n"
    "  --online-tile=N   keys per tile of the online softmax (default 128, or the key count from "
    "--sizes)\n"
    "  --schedule-params=K=V,...  knob values for the schedule rule (what attn-tune searches; see\n"
    "                    docs/tuning.md); unset knobs keep the rule's defaults\n"
    "  --tuning-db=PATH  tuning database from attn-tune (default: attnc-tuning.json beside FILE, "
    "when\n"
    "                    present; 'none' for no database). Its entry for this kernel, target and "
    "the\n"
    "                    --sizes bucket sets the schedule knobs and the online tile, unless "
    "--schedule,\n"
    "                    --schedule-params or --online-tile is given\n"
    "  --no-opt          skip the dialect passes (--emit=mlir then shows MLIRGen's output)\n"
    "  --no-runtime      leave the Halide runtime out of obj/lib (link one from --emit=runtime)\n"
    "  --emit=runtime -o PREFIX   write the Halide runtime for --target as PREFIX.a (no input "
    "file)\n";

int fail(const std::string &msg) {
  std::cerr << "error: " << msg << "\n";
  return 1;
}

// Without opening it: opening a FIFO for reading waits for a writer.
bool pathExists(const std::string &path) {
  std::error_code ec;
  return std::filesystem::exists(std::filesystem::status(path, ec));
}

// Every file of the run (-o's, or --emit=lib's three, and --depfile's) in one set: checked
// before any work, then put in place together or not at all.
struct Outputs {
  attnc::OutputSet set;
  std::vector<size_t> out; // -o's files
  size_t dep = 0;          // --depfile's

  // Stages data[i] as -o's i-th file (prints it without -o), then commits the whole set.
  int finish(const std::vector<std::string> &data) {
    attnc::Status st = attnc::Status::Ok();
    if (out.empty()) {
      for (const std::string &d : data)
        std::cout << d;
    } else {
      for (size_t i = 0; i < out.size() && st.ok(); ++i)
        st = set.append(out[i], data.at(i));
    }
    if (st.ok())
      st = set.commit();
    return st.ok() ? 0 : fail(st.message());
  }
  int finish(const std::string &text) { return finish(std::vector<std::string>{text}); }
};

} // namespace

int main(int argc, char **argv) {
  attnc::install_cleanup_handlers();
  attnc::CompileOptions co;
  std::string &input = co.path;
  std::string &targetStr = co.target;
  std::string &kernelName = co.kernel;
  attnc::dsl::FrontEndOptions &feOpts = co.frontEnd;
  attnc::dsl::SemaOptions &sema = feOpts.sema;
  attnc::PipelineOptions &passOpts = co.passes;
  std::string emit = "mlir", outPath, schedule = "auto", fnName;
  std::string depfile;
  bool noRuntime = false;
  std::string online = "auto";
  std::string tuningDbPath;
  attnc::ScheduleParams scheduleParams; // --schedule-params, or the tuning database's entry
  bool explicitSchedule = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const std::string &flag) -> std::string {
      if (a.size() > flag.size() && a.compare(0, flag.size() + 1, flag + "=") == 0)
        return a.substr(flag.size() + 1);
      return {};
    };
    if (a == "-h" || a == "--help") {
      std::cout << kUsage;
      return 0;
    } else if (a.rfind("--emit=", 0) == 0) {
      emit = value("--emit");
    } else if (a.rfind("--target=", 0) == 0) {
      targetStr = value("--target");
    } else if (a.rfind("--schedule=", 0) == 0) {
      schedule = value("--schedule");
      explicitSchedule |= schedule != "auto";
    } else if (a.rfind("--schedule-params=", 0) == 0) {
      explicitSchedule = true;
      std::string err;
      if (!attnc::ScheduleParams::parse(value("--schedule-params"), &scheduleParams, &err))
        return fail(err);
    } else if (a.rfind("--tuning-db=", 0) == 0) {
      tuningDbPath = value("--tuning-db");
      if (tuningDbPath.empty())
        return fail("--tuning-db needs a path (or 'none')");
    } else if (a.rfind("--kernel=", 0) == 0) {
      kernelName = value("--kernel");
    } else if (a.rfind("--function-name=", 0) == 0) {
      fnName = value("--function-name");
      bool ok = !fnName.empty() && !std::isdigit((unsigned char)fnName[0]);
      for (char c : fnName)
        ok &= std::isalnum((unsigned char)c) || c == '_';
      if (!ok)
        return fail("--function-name must be a C identifier, got '" + fnName + "'");
      if (std::string why = attnc::dsl::reservedSymbolReason(fnName); !why.empty())
        return fail("--function-name '" + fnName + "' is reserved: " + why);
    } else if (a.rfind("--sizes=", 0) == 0) {
      std::string err;
      if (!attnc::parseSizes(value("--sizes"), &passOpts.estimates, &err))
        return fail(err);
    } else if (a.rfind("--sample-order=", 0) == 0) {
      if (!attnc::parseSampleOrder(value("--sample-order"), &passOpts.sampleOrder))
        return fail("unknown --sample-order '" + value("--sample-order") +
                    "' (expected auto, sample-first or project-first)");
    } else if (a.rfind("--online-softmax=", 0) == 0) {
      online = value("--online-softmax");
      if (online != "auto" && online != "on" && online != "off")
        return fail("unknown --online-softmax '" + online + "' (expected auto, on or off)");
    } else if (a.rfind("--online-tile=", 0) == 0) {
      std::string t = value("--online-tile");
      char *end = nullptr;
      long v = t.empty() ? 0 : std::strtol(t.c_str(), &end, 10);
      if (t.empty() || *end || v < attnc::kMinOnlineTile || v > attnc::kMaxOnlineTile)
        return fail("--online-tile expects a key count in " +
                    std::to_string(attnc::kMinOnlineTile) + ".." +
                    std::to_string(attnc::kMaxOnlineTile) + ", got '" + t + "'");
      passOpts.onlineTile = v;
      explicitSchedule = true;
    } else if (a == "--no-runtime") {
      noRuntime = true;
    } else if (a == "--no-opt") {
      co.runPasses = false;
    } else if (a == "-o") {
      if (++i >= argc)
        return fail("-o needs a path");
      outPath = argv[i];
    } else if (a.rfind("--depfile=", 0) == 0) {
      depfile = value("--depfile");
      if (depfile.empty())
        return fail("--depfile needs a path");
    } else if (a == "-I" || a.rfind("-I", 0) == 0) {
      std::string dir =
          a == "-I" ? (i + 1 < argc && argv[i + 1][0] != '-' ? argv[++i] : "") : a.substr(2);
      if (dir.empty())
        return fail("-I needs a directory");
      feOpts.importPaths.push_back(dir);
    } else if (a == "-D" || a.rfind("-D", 0) == 0) {
      std::string def =
          a == "-D" ? (i + 1 < argc && argv[i + 1][0] != '-' ? argv[++i] : "") : a.substr(2);
      size_t eq = def.find('=');
      if (def.empty() || eq == std::string::npos || eq == 0)
        return fail("-D expects NAME=VALUE, got '" + def + "'");
      sema.defines.emplace_back(def.substr(0, eq), def.substr(eq + 1));
    } else if (!a.empty() && a[0] == '-') {
      return fail("unknown option '" + a + "'\n" + kUsage);
    } else if (input.empty()) {
      input = a;
    } else {
      return fail("more than one input file ('" + input + "' and '" + a + "')");
    }
  }
  std::optional<attnc::Emit> emitKind = attnc::parseEmit(emit);
  if (!emitKind)
    return fail("unknown --emit value '" + emit +
                "' (expected ast, mlir, halide, stmt, llvm, asm, ptx, obj, lib or runtime)");
  if (online != "auto")
    co.onlineSoftmax = online == "on";
  if (emit == "runtime") {
    // The Halide runtime for one target as its own library, shared by every kernel compiled
    // for that target with --no-runtime (attnc_add_library does this).
    if (!input.empty())
      return fail("--emit=runtime takes no input file");
    if (outPath.empty())
      return fail("--emit=runtime needs -o PREFIX (writes PREFIX.a)");
    Halide::Target target;
    std::string err;
    if (!attnc::parseTarget(targetStr, &target, &err))
      return fail(err);
    Outputs outs;
    outs.out.emplace_back();
    if (attnc::Status st = outs.set.add(outPath + ".a", "the output", &outs.out[0]); !st.ok())
      return fail(st.message());
    try {
      return outs.finish(attnc::compileRuntime(target));
    } catch (const Halide::Error &e) {
      return fail(std::string("Halide: ") + e.what());
    } catch (const std::exception &e) {
      return fail(e.what());
    }
  }
  if (input.empty())
    return fail(std::string("no input file\n") + kUsage);
  if ((emit == "obj" || emit == "lib") && outPath.empty())
    return fail("--emit=" + emit + " needs -o PATH");
  // Every file this run writes is checked before any work: none may be a file it reads (the
  // input, the tuning database, and below every import), another of its outputs or a directory.
  Outputs outs;
  auto check = [](const attnc::Status &st) { return st.ok() ? 0 : fail(st.message()); };
  if (int rc = check(outs.set.protect(input, "the input file")))
    return rc;
  if (tuningDbPath != "none") {
    std::string db = tuningDbPath.empty() ? attnc::defaultTuningDbPath(input) : tuningDbPath;
    if (int rc = check(outs.set.protect(db, "the tuning database")))
      return rc;
  }
  if (!outPath.empty()) {
    std::vector<std::string> files{outPath};
    if (emit == "lib")
      files = {outPath + ".a", outPath + ".h", outPath + ".attnc.h"};
    for (const std::string &f : files) {
      outs.out.emplace_back();
      if (int rc = check(outs.set.add(f, "the output", &outs.out.back())))
        return rc;
    }
  }
  if (!depfile.empty()) {
    if (int rc = check(outs.set.add(depfile, "the dependency file", &outs.dep)))
      return rc;
  }

  attnc::Compilation comp(co, std::cerr);
  if (!comp.parse())
    return 1;
  const attnc::FrontEnd &fe = comp.frontEnd();
  for (const auto &f : fe.module->files)
    if (int rc = check(outs.set.protect(f->path, "the imported file")))
      return rc;
  if (!depfile.empty()) {
    // Make syntax: spaces in paths are escaped; the rule names the first artefact.
    auto esc = [](const std::string &p) {
      std::string o;
      for (char c : p)
        o += c == ' '   ? std::string("\\ ")
             : c == '#' ? std::string("\\#")
             : c == '$' ? std::string("$$")
                        : std::string(1, c);
      return o;
    };
    std::string target = emit == "lib" ? outPath + ".a" : outPath.empty() ? input : outPath;
    std::string text = esc(target) + ":";
    text += " " + esc(input);
    for (const auto &f : fe.module->files)
      text += " " + esc(f->path);
    // A retuned database rebuilds the kernel (one created after this build is not noticed).
    std::string db = tuningDbPath.empty() ? attnc::defaultTuningDbPath(input) : tuningDbPath;
    if (tuningDbPath != "none" && !explicitSchedule && pathExists(db))
      text += " " + esc(db);
    text += "\n";
    if (int rc = check(outs.set.append(outs.dep, text)))
      return rc;
  }
  // Checked for every stage, so a misspelt --kernel never passes silently.
  if (!comp.checkKernelName())
    return 1;
  if (emit == "ast") {
    std::ostringstream os;
    attnc::dsl::printModule(os, *fe.module);
    return outs.finish(os.str());
  }

  // The tuning database: attn-tune's knobs for this kernel, target and size bucket.
  attnc::TunedSchedule tuned;
  if (!explicitSchedule && !comp.findTuning(tuningDbPath, &tuned))
    return 1;
  if (tuned.entry) {
    scheduleParams.values = tuned.entry->params;
    if (tuned.entry->onlineTile > 0)
      comp.options().passes.onlineTile = tuned.entry->onlineTile;
  }

  mlir::ModuleOp module = comp.optimized();
  if (!module)
    return 1;
  if (emit == "mlir") {
    std::string s;
    llvm::raw_string_ostream os(s);
    module.print(os, mlir::OpPrintingFlags().enableDebugInfo(false));
    return outs.finish(s);
  }

  Halide::Target target;
  if (!comp.target(&target))
    return 1;
  if (!comp.kernel(module))
    return 1;
  if (noRuntime)
    target = target.with_feature(Halide::Target::NoRuntime);

  try {
    attnc::LoweredKernel lk = comp.lower();
    if (!fnName.empty())
      lk.name = fnName;
    if (emit == "halide")
      return outs.finish(attnc::printAlgorithm(lk));
    if (tuned.entry && !comp.tuningFits(tuned, schedule)) {
      scheduleParams = {};
      tuned = {};
    }
    attnc::ScheduleRequest req{schedule, scheduleParams, passOpts.estimates};
    attnc::ArtefactInfo info;
    info.schedule = attnc::scheduleKernel(lk, target, req);
    if (!scheduleParams.empty())
      info.schedule.applied += " (" + scheduleParams.str() +
                               (tuned.entry ? ", tuned: " + tuned.from : std::string()) + ")";
    info.libBase = outPath.substr(outPath.find_last_of('/') + 1);
    info.targetKey = targetStr;
    info.source = input;
    return outs.finish(attnc::compileArtefact(lk, *emitKind, target, info));
  } catch (const attnc::CompileFailed &) {
    return 1;
  } catch (const Halide::Error &e) {
    return fail(std::string("Halide: ") + e.what());
  } catch (const std::exception &e) {
    return fail(e.what());
  }
}
