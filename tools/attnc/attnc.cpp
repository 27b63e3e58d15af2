// attnc: compiles a .attn kernel and prints or writes any stage (ast, mlir, halide, stmt, llvm, asm, ptx, obj, lib).
#include "attnc/Compilation.h"
#include "attnc/Cost.h"
#include "attnc/Transforms/Passes.h"
#include "attnc/dsl/Names.h"
#include "attnc/output.h"

#include "ToolMain.h"

#include "mlir/IR/AsmState.h"
#include "llvm/Support/raw_ostream.h"

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

namespace {

namespace cl = llvm::cl;
using attnc::tool::fail;

cl::OptionCategory category("attnc options");
attnc::tool::CommandLine cli(category, "attnc FILE.attn [options]", "error: ");

cl::list<std::string> inputs(cl::Positional, cl::desc("FILE.attn"), cl::cat(category),
                             cl::callback([](const std::string &file) {
                               if (inputs.size() > 1)
                                 cli.error(inputs, "more than one input file ('" + inputs[0] +
                                                       "' and '" + file + "')");
                             }));

cl::opt<attnc::Emit, false, attnc::tool::EnumParser<attnc::Emit>> emit(
    "emit",
    cl::desc("stage to print or write (default: mlir;\n"
             "ptx: the CUDA device code, for a CUDA target;\n"
             "cost: the scheduled plan's arithmetic next to the algorithm's, at --sizes)"),
    cl::value_desc("ast|mlir|halide|stmt|llvm|asm|ptx|obj|lib|cost"), cl::init(attnc::Emit::Mlir),
    cl::values(clEnumValN(attnc::Emit::Ast, "ast", ""), clEnumValN(attnc::Emit::Mlir, "mlir", ""),
               clEnumValN(attnc::Emit::Halide, "halide", ""),
               clEnumValN(attnc::Emit::Stmt, "stmt", ""), clEnumValN(attnc::Emit::Llvm, "llvm", ""),
               clEnumValN(attnc::Emit::Asm, "asm", ""), clEnumValN(attnc::Emit::Ptx, "ptx", ""),
               clEnumValN(attnc::Emit::Obj, "obj", ""), clEnumValN(attnc::Emit::Lib, "lib", ""),
               clEnumValN(attnc::Emit::Runtime, "runtime", ""),
               clEnumValN(attnc::Emit::Cost, "cost", "")),
    cl::cat(category));

cl::opt<std::string> outPath("o",
                             cl::desc("output file (obj) or prefix (lib: PATH.a, PATH.h, "
                                      "PATH.attnc.h); default stdout"),
                             cl::value_desc("PATH"), cl::Prefix, cl::cat(category),
                             cl::callback([](const std::string &path) {
                               if (path.empty())
                                 cli.error(outPath, "-o needs a path");
                             }));

cl::opt<std::string>
    targetStr("target",
              cl::desc("'host' (default) or a Halide target string, e.g. x86-64-linux-avx2-fma or\n"
                       "x86-64-linux-cuda-cuda_capability_80 (CUDA: capability 80 or 86, always "
                       "spelt)"),
              cl::value_desc("T"), cl::init("host"), cl::cat(category));

cl::opt<std::string> schedule(
    "schedule",
    cl::desc("auto (default), none, or a rule name (cpu-online, cpu-sample, cpu-dense, "
             "cpu-window,\n"
             "cpu-generic; cuda-sample, cuda-dense, cuda-window, cuda-generic for CUDA targets), "
             "or\n"
             "Halide's autoscheduler Mullapudi2016 or Adams2019 (Anderson2021 for CUDA), which\n"
             "takes every size from --sizes as its estimates"),
    cl::value_desc("S"), cl::init("auto"), cl::cat(category));

cl::opt<std::string> kernelName("kernel", cl::desc("kernel to compile when the file has several"),
                                cl::value_desc("NAME"), cl::cat(category));

cl::opt<std::string>
    fnName("function-name", cl::desc("C symbol of the compiled kernel (default: the kernel name)"),
           cl::value_desc("F"), cl::cat(category), cl::callback([](const std::string &name) {
             bool ok = !name.empty() && !std::isdigit((unsigned char)name[0]);
             for (char c : name)
               ok &= std::isalnum((unsigned char)c) || c == '_';
             if (!ok)
               cli.error(fnName, "--function-name must be a C identifier, got '" + name + "'");
             else if (std::string why = attnc::dsl::reservedSymbolReason(name); !why.empty())
               cli.error(fnName, "--function-name '" + name + "' is reserved: " + why);
           }));

cl::list<std::string> defines("D", cl::desc("override a kernel constant"),
                              cl::value_desc("NAME=VALUE"), cl::Prefix, cl::cat(category),
                              cl::callback([](const std::string &def) {
                                size_t eq = def.find('=');
                                if (def.empty() || eq == std::string::npos || eq == 0)
                                  cli.error(defines, "-D expects NAME=VALUE, got '" + def + "'");
                              }));

cl::list<std::string>
    importDirs("I", cl::desc("also search DIR for 'import name' (before the standard library)"),
               cl::value_desc("DIR"), cl::Prefix, cl::cat(category),
               cl::callback([](const std::string &dir) {
                 if (dir.empty())
                   cli.error(importDirs, "-I needs a directory");
               }));

cl::opt<std::string>
    depfile("depfile",
            cl::desc("write a Make-style dependency file (the input and every imported file)"),
            cl::value_desc("PATH"), cl::cat(category), cl::callback([](const std::string &path) {
              if (path.empty())
                cli.error(depfile, "--depfile needs a path");
            }));

cl::list<std::string>
    sizes("sizes",
          cl::desc("typical sizes (e.g. --sizes=B=1,Q=300) for the cost-model passes; repeatable"),
          cl::value_desc("N=V,..."), cl::cat(category), cl::callback([](const std::string &text) {
            std::map<std::string, int64_t> parsed;
            std::string err;
            if (!attnc::parseSizes(text, &parsed, &err))
              cli.error(sizes, err);
          }));

cl::opt<std::string>
    sampleOrder("sample-order",
                cl::desc("auto (default: by cost from --sizes), sample-first or project-first"),
                cl::value_desc("O"), cl::init("auto"), cl::cat(category),
                cl::callback([](const std::string &o) {
                  attnc::SampleOrder parsed;
                  if (!attnc::parseSampleOrder(o, &parsed))
                    cli.error(sampleOrder, "unknown --sample-order '" + o +
                                               "' (expected auto, sample-first or project-first)");
                }));

cl::opt<std::string> onlineSoftmax(
    "online-softmax",
    cl::desc("auto (default: on for CPU targets, off for CUDA), on or off: fuse softmax\n"
             "and the weighted sum over its axis into a streaming online softmax"),
    cl::value_desc("M"), cl::init("auto"), cl::cat(category),
    cl::callback([](const std::string &m) {
      if (m != "auto" && m != "on" && m != "off")
        cli.error(onlineSoftmax, "unknown --online-softmax '" + m + "' (expected auto, on or off)");
    }));

// The default tile comes from its one definition (Passes.h).
const std::string onlineTileDesc = "keys per tile of the online softmax (default " +
                                   std::to_string(attnc::kDefaultOnlineTile) +
                                   ", or the key count from --sizes)";
attnc::tool::IntOption onlineTile(cli, category, "online-tile", onlineTileDesc, "a key count",
                                  attnc::kMinOnlineTile, attnc::kMaxOnlineTile);

cl::opt<std::string>
    scheduleParamsArg("schedule-params",
                      cl::desc("knob values for the schedule rule (what attn-tune searches; see\n"
                               "docs/tuning.md); unset knobs keep the rule's defaults"),
                      cl::value_desc("K=V,..."), cl::cat(category),
                      cl::callback([](const std::string &text) {
                        attnc::ScheduleParams parsed;
                        std::string err;
                        if (!attnc::ScheduleParams::parse(text, &parsed, &err))
                          cli.error(scheduleParamsArg, err);
                      }));

cl::opt<std::string> tuningDbPath(
    "tuning-db",
    cl::desc("tuning database from attn-tune (default: attnc-tuning.json beside FILE, when\n"
             "present; 'none' for no database). Its entry for this kernel, target and the\n"
             "--sizes bucket sets the schedule knobs and the online tile, unless --schedule,\n"
             "--schedule-params or --online-tile is given"),
    cl::value_desc("PATH"), cl::cat(category), cl::callback([](const std::string &path) {
      if (path.empty())
        cli.error(tuningDbPath, "--tuning-db needs a path (or 'none')");
    }));

cl::opt<bool> noOpt("no-opt",
                    cl::desc("skip the dialect passes (--emit=mlir then shows MLIRGen's output)"),
                    cl::ValueDisallowed, cl::cat(category));

cl::opt<bool>
    noRuntime("no-runtime",
              cl::desc("leave the Halide runtime out of obj/lib (link one from --emit=runtime)"),
              cl::ValueDisallowed, cl::cat(category));

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

// The compilation the options ask for (their values were checked as they were parsed).
attnc::CompileOptions compileOptions() {
  attnc::CompileOptions co;
  co.path = inputs.empty() ? std::string() : inputs[0];
  co.target = targetStr;
  co.kernel = kernelName;
  co.runPasses = !noOpt;
  for (const std::string &def : defines) {
    size_t eq = def.find('=');
    co.frontEnd.sema.defines.emplace_back(def.substr(0, eq), def.substr(eq + 1));
  }
  co.frontEnd.importPaths.assign(importDirs.begin(), importDirs.end());
  std::string err;
  for (const std::string &s : sizes)
    attnc::parseSizes(s, &co.passes.estimates, &err);
  attnc::parseSampleOrder(sampleOrder, &co.passes.sampleOrder);
  if (auto tile = onlineTile.value())
    co.passes.onlineTile = *tile;
  if (onlineSoftmax != "auto")
    co.onlineSoftmax = onlineSoftmax == "on";
  return co;
}

// --emit=runtime: the Halide runtime for one target as its own library, shared by every kernel
// compiled for that target with --no-runtime (attnc_add_library does this).
int emitRuntime() {
  if (!inputs.empty())
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

// The tuning database the run reads, if any.
std::optional<std::string> tuningDb(const std::string &input) {
  if (tuningDbPath == "none")
    return std::nullopt;
  return tuningDbPath.empty() ? attnc::defaultTuningDbPath(input) : std::string(tuningDbPath);
}

// Every file this run writes is checked before any work: none may be a file it reads (the input,
// the tuning database, and later every import), another of its outputs or a directory.
attnc::Status openOutputs(const std::string &input, attnc::Emit emitKind, Outputs *outs) {
  attnc::Status st = outs->set.protect(input, "the input file");
  if (std::optional<std::string> db = tuningDb(input); db && st.ok())
    st = outs->set.protect(*db, "the tuning database");
  std::vector<std::string> files;
  if (!outPath.empty())
    files = {outPath};
  if (!outPath.empty() && emitKind == attnc::Emit::Lib)
    files = {outPath + ".a", outPath + ".h", outPath + ".attnc.h"};
  for (const std::string &f : files) {
    outs->out.emplace_back();
    if (st.ok())
      st = outs->set.add(f, "the output", &outs->out.back());
  }
  if (!depfile.empty() && st.ok())
    st = outs->set.add(depfile, "the dependency file", &outs->dep);
  return st;
}

// --depfile's Make rule: the first artefact depends on the input, every imported file and the
// tuning database that set the schedule (a retuned database rebuilds the kernel; one created after
// this build is not noticed).
std::string dependencyRule(const std::string &input, const attnc::FrontEnd &fe,
                           attnc::Emit emitKind, bool explicitSchedule) {
  // Make syntax: spaces in paths are escaped.
  auto esc = [](const std::string &p) {
    std::string o;
    for (char c : p)
      o += c == ' '   ? std::string("\\ ")
           : c == '#' ? std::string("\\#")
           : c == '$' ? std::string("$$")
                      : std::string(1, c);
    return o;
  };
  std::string target = emitKind == attnc::Emit::Lib ? outPath + ".a"
                       : outPath.empty()            ? input
                                                    : std::string(outPath);
  std::string text = esc(target) + ":";
  text += " " + esc(input);
  for (const auto &f : fe.module->files)
    text += " " + esc(f->path);
  std::optional<std::string> db = tuningDb(input);
  if (db && !explicitSchedule && pathExists(*db))
    text += " " + esc(*db);
  return text + "\n";
}

} // namespace

int main(int argc, char **argv) {
  attnc::install_cleanup_handlers();
  attnc::tool::Usage usage;
  usage.options = {emit,        outPath,       targetStr,  schedule,          kernelName,
                   fnName,      defines,       importDirs, depfile,           sizes,
                   sampleOrder, onlineSoftmax, onlineTile, scheduleParamsArg, tuningDbPath,
                   noOpt,       noRuntime};
  usage.epilogue = "  --emit=runtime -o PREFIX   write the Halide runtime for --target as PREFIX.a "
                   "(no input file)\n";
  if (std::optional<int> rc = cli.parse(argc, argv, usage))
    return *rc;
  if (std::optional<std::string> bad = emit.getParser().unknown)
    return fail("unknown --emit value '" + *bad +
                "' (expected ast, mlir, halide, stmt, llvm, asm, ptx, obj, lib, runtime or cost)");
  const attnc::Emit emitKind = emit;
  if (emitKind == attnc::Emit::Runtime)
    return emitRuntime();
  const attnc::CompileOptions co = compileOptions();
  const std::string &input = co.path;
  if (input.empty())
    return cli.failWithUsage("no input file");
  if ((emitKind == attnc::Emit::Obj || emitKind == attnc::Emit::Lib) && outPath.empty())
    return fail(std::string("--emit=") + (emitKind == attnc::Emit::Obj ? "obj" : "lib") +
                " needs -o PATH");
  attnc::ScheduleParams scheduleParams; // --schedule-params, or the tuning database's entry
  std::string err;
  attnc::ScheduleParams::parse(scheduleParamsArg, &scheduleParams, &err);
  // An explicit schedule choice leaves the tuning database alone.
  const bool explicitSchedule =
      schedule != "auto" || scheduleParamsArg.getNumOccurrences() || onlineTile.getNumOccurrences();
  Outputs outs;
  auto check = [](const attnc::Status &st) { return st.ok() ? 0 : fail(st.message()); };
  if (int rc = check(openOutputs(input, emitKind, &outs)))
    return rc;

  attnc::Compilation comp(co, std::cerr);
  if (!comp.parse())
    return 1;
  const attnc::FrontEnd &fe = comp.frontEnd();
  for (const auto &f : fe.module->files)
    if (int rc = check(outs.set.protect(f->path, "the imported file")))
      return rc;
  if (!depfile.empty())
    if (int rc =
            check(outs.set.append(outs.dep, dependencyRule(input, fe, emitKind, explicitSchedule))))
      return rc;
  // Checked for every stage, so a misspelt --kernel never passes silently.
  if (!comp.checkKernelName())
    return 1;
  if (emitKind == attnc::Emit::Ast) {
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
  if (emitKind == attnc::Emit::Mlir) {
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
    if (emitKind == attnc::Emit::Halide)
      return outs.finish(attnc::printAlgorithm(lk));
    if (tuned.entry && !comp.tuningFits(tuned, schedule)) {
      scheduleParams = {};
      tuned = {};
    }
    attnc::ScheduleRequest req{schedule, scheduleParams, co.passes.estimates,
                               /*weigh=*/!onlineTile.value()};
    attnc::ArtefactInfo info;
    info.schedule = attnc::scheduleKernel(lk, target, req);
    if (!info.schedule.warning.empty())
      std::cerr << info.schedule.warning << "\n";
    // A tuned entry shows even when its fastest configuration was the default's knobs: the
    // database was read and its measurement chose them.
    std::vector<std::string> notes;
    if (!scheduleParams.empty())
      notes.push_back(scheduleParams.str());
    if (tuned.entry)
      notes.push_back("tuned: " + tuned.from);
    for (size_t i = 0; i < notes.size(); ++i)
      info.schedule.applied += (i ? ", " : " (") + notes[i] + (i + 1 == notes.size() ? ")" : "");
    if (emitKind == attnc::Emit::Cost)
      return outs.finish(
          attnc::costReport(comp.lowered(), lk, target, co.passes.estimates, info.schedule.applied,
                            info.schedule.lowered ? &*info.schedule.lowered : nullptr,
                            info.schedule.algorithm ? &*info.schedule.algorithm : nullptr));
    info.libBase = outPath.substr(outPath.find_last_of('/') + 1);
    info.targetKey = co.target;
    info.source = input;
    return outs.finish(attnc::compileArtefact(lk, emitKind, target, info));
  } catch (const attnc::CompileFailed &) {
    return 1;
  } catch (const Halide::Error &e) {
    return fail(std::string("Halide: ") + e.what());
  } catch (const std::exception &e) {
    return fail(e.what());
  }
}
