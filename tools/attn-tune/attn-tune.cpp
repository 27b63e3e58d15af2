// attn-tune: measures a kernel's schedule knobs at given sizes and keeps the best in the tuning database.
//
// The search space is the applicable rule's knobs (Selection::knobs: tile sizes, register
// blocks, vector widths, parallel fusion) and, for an online softmax, its key tile. The search
// first samples the whole space in a pseudo-random order (--sample: a share of the budget), then
// goes by coordinate descent from the fastest configuration found: each knob in turn takes each of
// its other values with the rest at the best so far, keeping any change that is faster by more
// than 1%, until a whole round changes nothing or the budget runs out. Every measured
// configuration is saved to the database at once, so an interrupted run resumes where it stopped.
// A job too large for one machine's budget is split: `--shard=I/N` measures the I-th of N
// disjoint slices of the whole space (one pseudo-random order that every shard computes alike),
// `--merge=OUT DB...` pools the shards' databases, and a last unsharded run resumes from the
// pooled measurements (docs/tuning.md, "Tuning at scale").
// Every candidate's output is compared with the default schedule's (a schedule must never change
// results). Halide's own autoschedulers run on the same pipeline as baselines.
#include "attnc/Compilation.h"
#include "attnc/Schedule.h"
#include "attnc/TuningDb.h"
#include "attnc/float16.h"
#include "attnc/npy.h"
#include "attnc/output.h"
#include "attnc/runtime.h"

#include "JitBuffers.h"
#include "ToolMain.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>
#include <unistd.h>

namespace {

namespace H = Halide;
using Clock = std::chrono::steady_clock;

// Confirming a winner: alternating runs of it and the default (medians), and the margin by which it
// must win. attn-bench measured winners kept at 1% after 3 rounds at 0.87-1.24x of the default,
// so a win now has to be larger than this machine's run-to-run noise between neighbouring runs.
constexpr int kConfirmRounds = 7;
constexpr double kConfirmMargin = 0.03;
// A sharded search orders the whole space in memory (4 bytes per configuration); every rule's
// space is far smaller (cpu-online with the generic knobs: under 60000).
constexpr uint64_t kMaxShardedSpace = uint64_t(1) << 24;

namespace cl = llvm::cl;
using attnc::tool::fail;

cl::OptionCategory category("attn-tune options");
attnc::tool::CommandLine cli(category,
                             "attn-tune FILE.attn --sizes=N=V,... [options]\n"
                             "       attn-tune --merge=OUT.json DB.json ...",
                             "attn-tune: error: ");

// `text` as a number in lo..hi, or nullopt.
std::optional<double> parseNumber(const std::string &text, double lo, double hi) {
  char *end = nullptr;
  double d = text.empty() ? 0 : std::strtod(text.c_str(), &end);
  if (text.empty() || *end || !(d >= lo && d <= hi))
    return std::nullopt;
  return d;
}
// ... and a whole one.
std::optional<int> parseCount(const std::string &text, int hi) {
  std::optional<double> d = parseNumber(text, 1, hi);
  if (!d || *d != std::floor(*d))
    return std::nullopt;
  return (int)*d;
}

// FILE.attn, or with --merge the databases to pool (checked in main: --merge may come last).
cl::list<std::string> inputs(cl::Positional, cl::desc("FILE.attn"), cl::cat(category));

cl::list<std::string> sizesArgs(
    "sizes", cl::desc("the sizes to tune for (every size the inputs use, unless -i gives it)"),
    cl::value_desc("N=V,..."), cl::cat(category), cl::callback([](const std::string &text) {
      std::map<std::string, int64_t> parsed;
      std::string err;
      if (!attnc::parseSizes(text, &parsed, &err))
        cli.error(sizesArgs, err);
    }));

cl::opt<std::string> kernelArg("kernel", cl::desc("kernel to tune when the file has several"),
                               cl::value_desc("NAME"), cl::cat(category));

cl::opt<std::string> targetArg(
    "target",
    cl::desc("'host' (default), a Halide CPU target string, or a CUDA target (see below)"),
    cl::value_desc("T"), cl::init("host"), cl::cat(category));

cl::opt<std::string> budgetArg(
    "budget",
    cl::desc("wall-clock time for the search (default 60); the autoschedulers come after"),
    cl::value_desc("SECONDS"), cl::init("60"), cl::cat(category),
    cl::callback([](const std::string &v) {
      if (!parseNumber(v, 1, 7 * 24 * 3600))
        cli.error(budgetArg, "--budget expects seconds in 1..604800, got '" + v + "'");
    }));

cl::opt<std::string> maxTrialsArg(
    "max-trials",
    cl::desc("also stop after N configurations besides the default (a search of fixed\n"
             "size whatever the machine's speed)"),
    cl::value_desc("N"), cl::cat(category), cl::callback([](const std::string &v) {
      if (!parseCount(v, 1000000))
        cli.error(maxTrialsArg, "--max-trials expects a count in 1..1000000, got '" + v + "'");
    }));

cl::opt<std::string>
    dbArg("db", cl::desc("tuning database to update (default: attnc-tuning.json beside FILE)"),
          cl::value_desc("PATH"), cl::cat(category), cl::callback([](const std::string &path) {
            if (path.empty())
              cli.error(dbArg, "--db needs a path");
          }));

cl::opt<std::string>
    repsArg("reps", cl::desc("timed runs per configuration, median taken (default 5)"),
            cl::value_desc("N"), cl::init("5"), cl::cat(category),
            cl::callback([](const std::string &v) {
              if (!parseCount(v, 1000))
                cli.error(repsArg, "--reps expects a count in 1..1000, got '" + v + "'");
            }));

cl::list<std::string>
    inputFiles("i", cl::desc("an input's values (needed for integer inputs such as level tables)"),
               cl::value_desc("NAME=FILE.npy"), cl::Prefix, cl::cat(category),
               cl::callback([](const std::string &s) {
                 size_t eq = s.find('=');
                 if (s.empty())
                   cli.error(inputFiles, "-i needs NAME=FILE.npy");
                 else if (eq == std::string::npos || eq == 0 || eq + 1 == s.size())
                   cli.error(inputFiles, "-i expects NAME=FILE.npy, got '" + s + "'");
               }));

// "I/N" with 0 <= I < N.
std::optional<std::pair<int, int>> parseShard(const std::string &text) {
  size_t slash = text.find('/');
  if (slash == std::string::npos)
    return std::nullopt;
  std::optional<int> n = parseCount(text.substr(slash + 1), 100000);
  std::optional<int> i = text.substr(0, slash) == "0" ? std::optional<int>(0)
                                                      : parseCount(text.substr(0, slash), 99999);
  if (!i || !n || *i >= *n)
    return std::nullopt;
  return std::make_pair(*i, *n);
}

cl::opt<std::string> shardArg(
    "shard",
    cl::desc("measure only slice I of N of the whole space (a job array's task); pool the\n"
             "slices' databases with --merge, then run once more without --shard"),
    cl::value_desc("I/N"), cl::cat(category), cl::callback([](const std::string &v) {
      if (!parseShard(v))
        cli.error(shardArg, "--shard expects I/N with 0 <= I < N <= 100000, got '" + v + "'");
    }));

cl::opt<std::string> sampleArg(
    "sample",
    cl::desc("share of the budget and of --max-trials spent on a broad random sample of the\n"
             "whole space before the local search (default 0.5; 0: local search only)"),
    cl::value_desc("F"), cl::init("0.5"), cl::cat(category), cl::callback([](const std::string &v) {
      if (!parseNumber(v, 0, 1))
        cli.error(sampleArg, "--sample expects a share in 0..1, got '" + v + "'");
    }));

cl::opt<std::string> mergeArg(
    "merge",
    cl::desc("pool the tuning databases given as the arguments (shards of one job) into OUT"),
    cl::value_desc("OUT.json"), cl::cat(category), cl::callback([](const std::string &path) {
      if (path.empty())
        cli.error(mergeArg, "--merge needs a path");
    }));

cl::opt<bool> restartArg("restart",
                         cl::desc("forget this entry's earlier measurements instead of resuming"),
                         cl::ValueDisallowed, cl::cat(category));

cl::opt<bool> noBaselines("no-baselines", cl::desc("skip Halide's autoschedulers"),
                          cl::ValueDisallowed, cl::cat(category));

cl::opt<std::string>
    ptxasArg("ptxas",
             cl::desc("ptxas for CUDA targets (default: on PATH, or /usr/local/cuda/bin/ptxas)"),
             cl::value_desc("PATH"), cl::cat(category));

cl::list<std::string> defines("D", cl::desc("override a kernel constant, as for attnc"),
                              cl::value_desc("NAME=VALUE"), cl::Prefix, cl::cat(category),
                              cl::callback([](const std::string &def) {
                                size_t eq = def.find('=');
                                if (eq == std::string::npos || eq == 0)
                                  cli.error(defines, "-D expects NAME=VALUE, got '" + def + "'");
                              }));

cl::list<std::string> importDirs("I", cl::desc("also search DIR for imports, as for attnc"),
                                 cl::value_desc("DIR"), cl::Prefix, cl::cat(category),
                                 cl::callback([](const std::string &dir) {
                                   if (dir.empty())
                                     cli.error(importDirs, "-I needs a directory");
                                 }));

// Merges this run's entry into the database as it is on disk now, under its lock: another
// attn-tune on the same database keeps its entries and measurements.
bool saveEntry(const std::string &dbPath, const attnc::TuningEntry &entry, bool result,
               bool forgetMeasurements, std::string *err) {
  attnc::MergeOptions opts;
  opts.result = result, opts.forgetMeasurements = forgetMeasurements;
  return attnc::TuningDb::update(
      dbPath, [&](attnc::TuningDb &disk) { disk.merge(entry, opts); }, err);
}

std::string nowIso() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

// One point of the search: the online tile (0: the pass's default) and the knob values that
// differ from the rule's defaults.
struct Config {
  int tile = 0;
  std::map<std::string, int> params;
  std::string key() const { return attnc::configKey(tile, params); }
  std::string str() const {
    std::string s = "tile=" + (tile ? std::to_string(tile) : std::string("default"));
    for (const auto &[k, v] : params)
      s += " " + k + "=" + std::to_string(v);
    return s;
  }
};

class Tuner {
public:
  std::unique_ptr<attnc::Compilation> comp;
  std::string kernelName;
  H::Target target;
  std::map<std::string, int64_t> sizes;
  std::map<std::string, attnc::NpyArray> given; // -i inputs
  int reps = 5;

  // A copy of the kernel's lowering to schedule (schedules mutate Funcs, so every configuration
  // needs its own); the front end, MLIRGen, the passes and HalideGen run once per online tile
  // (Compilation caches them, and clones the lowering).
  attnc::LoweredKernel lower(int tile) { return comp->lower(tile); }
  // The lowering itself, unscheduled, for reading.
  const attnc::LoweredKernel &lowered(int tile) { return comp->lowered(tile); }

  // Inputs (random floats unless -i gives them) and outputs, made once from the first lowering.
  bool prepare(const attnc::LoweredKernel &lk, std::string *err) {
    for (const auto &[name, arr] : given) {
      const attnc::KernelParam *p = nullptr;
      for (const auto &in : lk.inputs)
        if (in.name == name)
          p = &in;
      if (!p)
        return *err = "-i " + name + ": the kernel has no input named '" + name + "'", false;
      const std::vector<attnc::Dim> &dims = p->type.dims;
      if (arr.shape.size() != dims.size())
        return *err = "-i " + name + ": rank " + std::to_string(arr.shape.size()) +
                      ", the kernel wants " + std::to_string(dims.size()),
               false;
      for (size_t d = 0; d < dims.size(); ++d) {
        const std::string sym = dims[d].str();
        if (arr.shape[d] > INT32_MAX)
          return *err = "-i " + name + ": dimension " + std::to_string(d) + " is " +
                        std::to_string(arr.shape[d]) + ", more than 2147483647",
                 false;
        if (dims[d].literal()) {
          if (arr.shape[d] != dims[d].literal_value())
            return *err = "-i " + name + ": dimension " + std::to_string(d) + " is " +
                          std::to_string(arr.shape[d]) + ", the kernel wants " + sym,
                   false;
          continue;
        }
        auto it = sizes.find(sym);
        if (it == sizes.end())
          sizes[sym] = arr.shape[d];
        else if (it->second != arr.shape[d])
          return *err = "-i " + name + ": dimension " + std::to_string(d) + " (" + sym + ") is " +
                        std::to_string(arr.shape[d]) + " but --sizes says " +
                        std::to_string(it->second),
                 false;
      }
    }
    std::mt19937 rng(12345);
    std::normal_distribution<float> normal(0.f, 1.f);
    for (const auto &in : lk.inputs) {
      std::vector<int64_t> shape;
      for (size_t d = 0; d < in.type.rank(); ++d) {
        int64_t v = 0;
        std::string unbound;
        if (in.type.dims[d].evaluate(sizes, &v, &unbound) == attnc::Dim::EvalError::Unbound)
          return *err = "--sizes has no value for '" + unbound + "' (input " + in.name +
                        ", dimension " + std::to_string(d) + ")",
                 false;
        shape.push_back(v);
      }
      // Named before anything is allocated: more than Halide addresses, or than this machine has.
      attnc::Status st =
          attnc::check_tensor_size("input '" + in.name + "' at these sizes", in.type.dtype, shape);
      if (!st.ok())
        return *err = st.message(), false;
      std::vector<int> hshape(shape.rbegin(), shape.rend());
      auto g = given.find(in.name);
      if (in.type.is_float()) {
        const attnc::DType dt = in.type.dtype;
        H::Buffer<> b(attnc::halideType(dt), hshape);
        if (g != given.end()) {
          attnc::retype_raw16(g->second, dt);
          if (g->second.dtype != dt)
            return *err = "-i " + in.name + ": the kernel wants " + attnc::dtype_name(dt) +
                          ", the file holds " + attnc::dtype_name(g->second.dtype),
                   false;
          if (g->second.data.size() != b.size_in_bytes())
            return *err = "-i " + in.name + ": its size does not match the kernel's", false;
          std::memcpy(b.data(), g->second.data.data(), g->second.data.size());
        } else if (dt == attnc::DType::F32) {
          H::Buffer<float>(b).for_each_value([&](float &x) { x = normal(rng); });
        } else { // bf16/f16: the bits of normal values rounded to the type
          uint16_t *bits = static_cast<uint16_t *>(b.data());
          for (size_t e = 0; e < b.number_of_elements(); ++e)
            bits[e] = attnc::float_to_half_bits(normal(rng), dt);
        }
        inputs.push_back(b);
      } else {
        if (g == given.end())
          return *err = "input '" + in.name +
                        "' holds integers (indices, tables): give its values with -i " + in.name +
                        "=FILE.npy",
                 false;
        if (g->second.dtype != attnc::DType::I32)
          return *err = "-i " + in.name + ": the kernel wants int32", false;
        H::Buffer<int32_t> b(hshape);
        if (g->second.data.size() != b.size_in_bytes())
          return *err = "-i " + in.name + ": its size does not match the kernel's", false;
        std::memcpy(b.data(), g->second.data.data(), g->second.data.size());
        inputs.push_back(b);
      }
    }
    for (size_t i = 0; i < lk.outputTypes.size(); ++i) {
      std::vector<int64_t> shape;
      for (const attnc::Dim &dim : lk.outputTypes[i].dims) {
        int64_t v = 0;
        std::string unbound;
        switch (dim.evaluate(sizes, &v, &unbound)) {
        case attnc::Dim::EvalError::None:
          break;
        case attnc::Dim::EvalError::Unbound:
          return *err = "--sizes has no value for '" + unbound + "' (output " + lk.outputNames[i] +
                        ")",
                 false;
        case attnc::Dim::EvalError::Overflow:
          v = INT64_MAX; // check_tensor_size reports it
          break;
        }
        shape.push_back(v);
      }
      attnc::Status st = attnc::check_tensor_size(
          "output '" + lk.outputNames[i] + "' at these sizes", lk.outputTypes[i].dtype, shape);
      if (!st.ok())
        return *err = st.message(), false;
      for (int64_t v : shape)
        if (v > INT32_MAX)
          return *err = "output '" + lk.outputNames[i] + "' at these sizes has a dimension of " +
                        std::to_string(v) + ", more than 2147483647",
                 false;
      std::vector<int> hshape(shape.rbegin(), shape.rend());
      outputs.push_back(H::Buffer<>(attnc::halideType(lk.outputTypes[i].dtype), hshape));
    }
    return true;
  }

  // Median ms of `reps` runs after a warm-up; fills `out` copies for the result check.
  double run(attnc::LoweredKernel &lk, H::Pipeline &p, std::vector<std::vector<char>> *out) {
    for (size_t i = 0; i < lk.inputs.size(); ++i)
      lk.inputs[i].param.set(inputs[i]);
    attnc::tool::useRuntimeBuffers(p);
    H::Realization r(outputs);
    p.realize(r, target);
    std::vector<double> ts;
    auto start = Clock::now();
    for (int n = 0; n < reps; ++n) {
      auto t0 = Clock::now();
      p.realize(r, target);
      ts.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      // A very slow candidate (seconds per run) is not worth five runs.
      if (n >= 1 && std::chrono::duration<double>(Clock::now() - start).count() > 10)
        break;
    }
    std::sort(ts.begin(), ts.end());
    if (out) {
      out->clear();
      for (const H::Buffer<> &b : outputs) {
        const char *d = (const char *)b.data();
        out->emplace_back(d, d + b.size_in_bytes());
      }
    }
    return ts[ts.size() / 2];
  }

  // Largest |a - b| over the float outputs (bf16/f16 widened), relative to the largest |b|.
  double relDiff(const std::vector<std::vector<char>> &a,
                 const std::vector<std::vector<char>> &b) const {
    double diff = 0, scale = 1e-30;
    for (size_t i = 0; i < a.size() && i < b.size() && i < outputs.size(); ++i) {
      const H::Type t = outputs[i].type();
      if (!t.is_float()) { // integers must agree exactly
        if (a[i] != b[i])
          return INFINITY;
        continue;
      }
      const size_t width = t.bytes(), n = std::min(a[i].size(), b[i].size()) / width;
      auto at = [&](const std::vector<char> &v, size_t k) -> double {
        if (width == 4) {
          float f;
          std::memcpy(&f, v.data() + 4 * k, 4);
          return f;
        }
        uint16_t h;
        std::memcpy(&h, v.data() + 2 * k, 2);
        return attnc::half_bits_to_float(h, t.is_bfloat() ? attnc::DType::BF16 : attnc::DType::F16);
      };
      for (size_t k = 0; k < n; ++k) {
        const double x = at(a[i], k), y = at(b[i], k);
        if (std::isnan(x) != std::isnan(y))
          return INFINITY;
        if (std::isnan(x))
          continue;
        diff = std::max(diff, std::fabs(x - y));
        scale = std::max(scale, std::fabs(y));
      }
    }
    return diff / scale;
  }

  std::vector<H::Buffer<>> inputs, outputs;
};

// ptxas's resources for one PTX module: the largest register count and shared memory of any entry,
// and the spill bytes of all of them.
struct Resources {
  int regs = 0, smem = 0, spills = 0, entries = 0;
};

bool runPtxas(const std::string &ptxas, const std::string &ptx, const std::string &arch,
              Resources *r, std::string *err) {
  // ptxas's report (stdout and stderr together) beside the PTX it assembles.
  const std::string log = ptx + ".log";
  std::string why;
  int rc = llvm::sys::ExecuteAndWait(ptxas, {ptxas, "-arch=" + arch, "-v", ptx, "-o", "/dev/null"},
                                     /*Env=*/std::nullopt, {std::nullopt, log, log},
                                     /*SecondsToWait=*/0, /*MemoryLimit=*/0, &why);
  std::string text = why;
  if (auto buf = llvm::MemoryBuffer::getFile(log))
    text = (*buf)->getBuffer().str() + text;
  llvm::sys::fs::remove(log);
  if (rc != 0)
    return *err = "ptxas failed: " + text.substr(0, 300), false;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find("Compiling entry function") != std::string::npos)
      ++r->entries;
    size_t p;
    if ((p = line.find("bytes spill stores")) != std::string::npos ||
        (p = line.find("bytes spill loads")) != std::string::npos) {
      // "N bytes stack frame, S bytes spill stores, L bytes spill loads"
      std::istringstream ls(line.substr(line.find(',') + 1));
      int st = 0, ld = 0;
      std::string w;
      ls >> st >> w >> w >> w >> ld;
      r->spills += st + ld;
    }
    if ((p = line.find("Used ")) != std::string::npos) {
      int regs = std::atoi(line.c_str() + p + 5);
      r->regs = std::max(r->regs, regs);
      size_t sm = line.find("bytes smem");
      if (sm != std::string::npos) {
        size_t c = line.rfind(',', sm);
        r->smem = std::max(r->smem, std::atoi(line.c_str() + c + 1));
      }
    }
  }
  return true;
}

// CUDA targets without a GPU: every configuration of the rule's knobs compiled to PTX and assembled
// by ptxas; the database records what each one needs, the schedule stays the default.
int tuneOffline(Tuner &tu, const std::string &input, const std::string &dbPath, attnc::TuningDb &db,
                std::string ptxas, bool baselines) {
  if (ptxas.empty()) {
    if (llvm::ErrorOr<std::string> onPath = llvm::sys::findProgramByName("ptxas"))
      ptxas = *onPath;
    else if (llvm::sys::fs::can_execute("/usr/local/cuda/bin/ptxas"))
      ptxas = "/usr/local/cuda/bin/ptxas";
    if (ptxas.empty())
      return fail(
          "a CUDA target is checked with ptxas, which is not installed (give --ptxas=PATH)");
  } else if (access(ptxas.c_str(), X_OK) != 0) {
    return fail("cannot run ptxas '" + ptxas + "'");
  }
  using F = H::Target::Feature;
  const std::string arch = tu.target.has_feature(F::CUDACapability86) ? "sm_86" : "sm_80";
  std::string err;
  try {
    tu.comp->options().passes.estimates = tu.sizes;
    tu.comp->options().onlineSoftmax = false; // as attnc's auto for CUDA targets
    tu.comp->resetPasses();
    const attnc::LoweredKernel &probe = tu.lowered(0);
    const attnc::Selection selection =
        attnc::selectSchedule(probe, tu.target, "auto", &tu.sizes); // the rule attnc picks
    const attnc::ScheduleRule *rule = selection.rule;
    std::vector<attnc::Knob> knobs = selection.knobs(probe);
    const std::string variant =
        attnc::tuningVariantKey(input, tu.kernelName, tu.comp->options().frontEnd.sema.defines);
    const std::string targetKey = attnc::tuningTargetKey(tu.target);
    const std::string bucket = attnc::bucketOf(tu.sizes);
    attnc::TuningEntry *entry = &db.upsert(variant, targetKey, bucket);
    const std::string space = attnc::scheduleSpaceKey(rule->name(), knobs, false);
    if (entry->space != space || entry->attncVersion != attnc::attncVersion())
      entry->offline.clear();
    entry->rule = rule->name(), entry->sizes = tu.sizes,
    entry->machine = "offline (ptxas " + arch + ")";
    entry->space = space, entry->attncVersion = attnc::attncVersion();
    std::cout << "attn-tune " << variant << " for " << targetKey
              << " (no GPU here: checked by ptxas for " << arch << ", nothing timed)\n  rule "
              << rule->name() << ", " << knobs.size() << " knobs\n";
    if (knobs.empty()) {
      std::cout << "  the rule has no knobs: nothing to check\n";
      return 0;
    }
    // Every combination of the knobs' values, defaults first.
    std::vector<std::map<std::string, int>> configs(1);
    for (const attnc::Knob &kb : knobs) {
      std::vector<std::map<std::string, int>> next;
      for (const auto &c : configs)
        for (int v : kb.choices) {
          auto d = c;
          if (v != kb.dflt)
            d[kb.name] = v;
          next.push_back(d);
        }
      configs = next;
    }
    std::stable_partition(configs.begin(), configs.end(),
                          [](const std::map<std::string, int> &c) { return c.empty(); });
    attnc::TempDir tmpDir;
    if (attnc::Status st = tmpDir.create("attn-tune"); !st.ok())
      return fail(st.message());
    const std::string &tmp = tmpDir.path();
    int fits = 0;
    // What the pipeline needs in the same terms; `lk` scheduled by `schedule` (a rule's knobs,
    // or Halide's CUDA autoscheduler).
    auto assemble = [&](const std::function<void(attnc::LoweredKernel &)> &schedule,
                        Resources *r) -> std::string {
      try {
        attnc::LoweredKernel lk = tu.lower(0);
        schedule(lk);
        const std::string ptx = tmp + "/k.ptx";
        lk.pipeline().compile_to({{H::OutputFileType::device_code, ptx}}, lk.arguments(), lk.name,
                                 tu.target);
        std::string why;
        if (!runPtxas(ptxas, ptx, arch, r, &why))
          return "failed: " + why;
        return "regs=" + std::to_string(r->regs) + " spills=" + std::to_string(r->spills) +
               " smem=" + std::to_string(r->smem);
      } catch (const H::Error &e) {
        return "failed: " + attnc::tidy_halide_message(e.what()).substr(0, 200);
      } catch (const std::exception &e) {
        return std::string("failed: ") + e.what();
      }
    };
    // The configuration kept: the default while it assembles without spills (nothing timed says
    // another is faster); else the spill-free one with the fewest registers, then the least shared
    // memory (the most threads an SM can hold).
    const std::map<std::string, int> *best = nullptr;
    Resources bestRes;
    bool defaultFits = false;
    for (const auto &params : configs) {
      Config c;
      c.params = params;
      Resources r;
      std::string result = assemble(
          [&](attnc::LoweredKernel &lk) {
            attnc::ScheduleParams sp;
            sp.values = params;
            attnc::applySchedule(lk, tu.target, rule->name(), sp);
          },
          &r);
      if (result.rfind("failed", 0) != 0 && r.spills == 0) {
        ++fits;
        defaultFits |= params.empty();
        if (!best || r.regs < bestRes.regs || (r.regs == bestRes.regs && r.smem < bestRes.smem))
          best = &params, bestRes = r;
      }
      entry->offline[c.key()] = result;
      std::cout << "  " << c.str() << ": " << result << "\n";
      std::cout.flush();
    }
    // Halide's GPU autoscheduler on the same pipeline, in the same terms (the baseline a timing on
    // a GPU would compare against).
    if (baselines) {
      Resources r;
      std::string result = assemble(
          [&](attnc::LoweredKernel &lk) {
            attnc::applyAutoscheduler(lk, tu.target, "Anderson2021", tu.sizes);
          },
          &r);
      entry->offline["Halide Anderson2021"] = result;
      std::cout << "  Halide Anderson2021 (autoscheduler): " << result << "\n";
    }
    tmpDir.remove();
    entry->params.clear();
    for (const attnc::Knob &kb : knobs)
      entry->params[kb.name] = kb.dflt;
    std::string kept = "The schedule stays the default.";
    if (!defaultFits && best) {
      for (const auto &[name, value] : *best)
        entry->params[name] = value;
      Config c;
      c.params = *best;
      kept = "The default spills or fails; kept " + c.str() + " (fewest registers without spills).";
    } else if (!defaultFits) {
      kept = "None assembles without spills; the schedule stays the default.";
    }
    entry->updated = nowIso();
    if (!saveEntry(dbPath, *entry, true, false, &err))
      return fail(err);
    std::cout << fits << " of " << configs.size()
              << " configurations assemble without spills; recorded in " << dbPath << " [" << bucket
              << "] for timing on a GPU. " << kept << "\n";
    return 0;
  } catch (const H::Error &e) {
    return fail(attnc::tidy_halide_message(e.what()));
  } catch (const std::exception &e) {
    return fail(e.what());
  }
}

// The help text: the options in their order, and what a CUDA target gets instead of timing.
attnc::tool::Usage usage() {
  attnc::tool::Usage usage;
  usage.options = {sizesArgs, kernelArg, targetArg,  budgetArg,  maxTrialsArg,
                   dbArg,     repsArg,   inputFiles, restartArg, noBaselines,
                   shardArg,  mergeArg,  ptxasArg,   defines,    importDirs};
  usage.column = 21;
  usage.epilogue =
      "A CUDA target (x86-64-linux-cuda-cuda_capability_80|86) is checked offline: every "
      "configuration\n"
      "of the rule's block and thread knobs is compiled to PTX and assembled by ptxas; the "
      "resources\n"
      "are recorded in the database for a run on a GPU. Nothing is timed: the default stays unless "
      "it\n"
      "spills, else the spill-free configuration with the fewest registers is kept.\n";
  return usage;
}

// What the command line asks for, in the terms the run uses.
struct Request {
  std::string input, targetStr, dbPath, kernelName, ptxasPath;
  double budget = 0, sample = 0.5;
  int reps = 0, maxTrials = 0;
  int shardIndex = 0, shardCount = 0; // --shard=I/N (N = 0: the whole search)
  bool restart = false, baselines = true;
  attnc::dsl::FrontEndOptions feOpts;
  std::map<std::string, int64_t> sizes;
  std::map<std::string, std::string> inPaths; // -i NAME=FILE.npy
};

// The options checked their values as they were parsed: what is left is putting them together.
Request request() {
  Request rq;
  rq.input = inputs.empty() ? std::string() : inputs[0];
  rq.targetStr = targetArg, rq.dbPath = dbArg, rq.kernelName = kernelArg;
  rq.budget = *parseNumber(budgetArg, 1, 7 * 24 * 3600);
  rq.reps = *parseCount(repsArg, 1000);
  rq.maxTrials = maxTrialsArg.getNumOccurrences() ? *parseCount(maxTrialsArg, 1000000) : 0;
  rq.restart = restartArg, rq.baselines = !noBaselines;
  rq.sample = *parseNumber(sampleArg, 0, 1);
  if (shardArg.getNumOccurrences())
    std::tie(rq.shardIndex, rq.shardCount) = *parseShard(shardArg);
  rq.ptxasPath = ptxasArg;
  for (const std::string &def : defines) {
    size_t eq = def.find('=');
    rq.feOpts.sema.defines.emplace_back(def.substr(0, eq), def.substr(eq + 1));
  }
  rq.feOpts.importPaths.assign(importDirs.begin(), importDirs.end());
  std::string parseErr;
  for (const std::string &text : sizesArgs)
    attnc::parseSizes(text, &rq.sizes, &parseErr);
  for (const std::string &s : inputFiles) {
    size_t eq = s.find('=');
    rq.inPaths[s.substr(0, eq)] = s.substr(eq + 1);
  }
  return rq;
}

// 0 for a good status, else the error reported as the exit code.
int checked(const attnc::Status &st) { return st.ok() ? 0 : fail(st.message()); }

// The database is checked like an output before any work: not a file the run reads (the input,
// below every import and -i file) nor a directory. TuningDb::update writes it.
int protectDatabase(Request &rq, attnc::OutputSet *files) {
  if (rq.dbPath.empty())
    rq.dbPath = attnc::defaultTuningDbPath(rq.input);
  size_t dbIndex = 0;
  if (int rc = checked(files->protect(rq.input, "the input file")))
    return rc;
  return checked(files->add(rq.dbPath, "the tuning database", &dbIndex));
}

// Once the file is parsed: its imports and the -i files are protected from the database too, and
// the tuner learns the kernel, its given inputs and the sizes.
int bindKernel(Request &rq, attnc::OutputSet *files, Tuner &tu) {
  const attnc::FrontEnd &fe = tu.comp->frontEnd();
  for (const auto &f : fe.module->files)
    if (int rc = checked(files->protect(f->path, "the imported file")))
      return rc;
  for (const auto &[name, path] : rq.inPaths)
    if (int rc = checked(files->protect(path, "the input file")))
      return rc;
  if (rq.kernelName.empty()) {
    if (fe.module->kernels.size() != 1)
      return fail("the file has several kernels: pick one with --kernel=NAME");
    rq.kernelName = fe.module->kernels[0]->name;
  }
  tu.kernelName = rq.kernelName;
  tu.comp->options().kernel = rq.kernelName;
  for (const auto &[name, path] : rq.inPaths) {
    attnc::NpyArray arr;
    attnc::Status st = attnc::read_npy(path, &arr);
    if (!st.ok())
      return fail("-i " + name + ": " + st.message());
    tu.given[name] = std::move(arr);
  }
  tu.sizes = rq.sizes;
  return 0;
}

// Host targets: the timed search, its confirmation, the baselines and the table, around one
// database entry that every measurement is saved to at once.
class TimedTuning {
public:
  TimedTuning(Tuner &tu, const Request &rq, attnc::TuningDb &db) : tu(tu), rq(rq), db(db) {}

  // The default first (every candidate's results are compared with it), then the search; a
  // winner is kept only once it is confirmed and saved.
  int run() {
    if (int rc = begin())
      return rc;
    Config best;
    double defaultMs = measure(best);
    if (defaultMs < 0)
      return fail("the default schedule does not run at these sizes (see above)");
    double bestMs = defaultMs;
    bool outOfTime;
    if (rq.shardCount) {
      outOfTime = sample(&best, &bestMs);
    } else {
      // Broad, then local: a share of the budget samples the whole space (shard 0 of 1), the rest
      // refines the fastest configuration found (or measured by an earlier run) by descent.
      startFromEarlier(&best, &bestMs);
      if (rq.sample > 0) {
        limitBudget = rq.budget * rq.sample;
        limitTrials = rq.maxTrials > 0 ? (int)std::floor(rq.maxTrials * rq.sample) : 0;
        if (rq.maxTrials == 0 || limitTrials > 0)
          sample(&best, &bestMs);
      }
      limitBudget = rq.budget, limitTrials = rq.maxTrials;
      outOfTime = search(&best, &bestMs);
    }
    // A shard's best is not confirmed against the default: the shards' pooled best is, by the
    // unsharded run that resumes from them.
    if (!rq.shardCount)
      confirm(&best, &bestMs, &defaultMs);
    if (int rc = record(best, bestMs, defaultMs, outOfTime))
      return rc;
    // The autoschedulers are the same on every shard: the first measures them.
    if (rq.baselines && rq.shardIndex == 0)
      if (int rc = measureBaselines())
        return rc;
    printTable(best, bestMs, defaultMs);
    return 0;
  }

private:
  // The search's axes: the online tile first (it changes every tile loop), then each knob.
  struct Axis {
    std::string name; // "" for the online tile
    std::vector<int> choices;
    int dflt;
  };

  // The rule and knobs at the tuned sizes, the database entry (started afresh when it was measured
  // on another machine or rule, or with --restart) and the header.
  int begin() {
    if (!tu.prepare(tu.lowered(0), &err))
      return fail(err);
    tu.comp->options().passes.estimates =
        tu.sizes; // the cost-model passes see the tuned sizes, as attnc --sizes does
    tu.comp->resetPasses();
    const attnc::LoweredKernel &probe = tu.lowered(0);
    const attnc::Selection selection =
        attnc::selectSchedule(probe, tu.target, "auto", &tu.sizes); // the rule attnc picks
    rule = selection.rule;
    knobs = selection.knobs(probe);
    online = !probe.onlineGroups.empty();

    variant = attnc::tuningVariantKey(rq.input, rq.kernelName, rq.feOpts.sema.defines);
    const std::string targetKey = attnc::tuningTargetKey(tu.target);
    bucket = attnc::bucketOf(tu.sizes);
    entry = &db.upsert(variant, targetKey, bucket);
    space = attnc::scheduleSpaceKey(rule->name(), knobs, online);
    if (rq.restart || entry->machine != machine || entry->rule != rule->name() ||
        entry->space != space || entry->attncVersion != attnc::attncVersion()) {
      if (!entry->tried.empty() && !rq.restart)
        std::cout << "earlier measurements were on another machine, rule or schedule space, or by "
                     "another attnc: starting afresh\n";
      entry->tried.clear();
      entry->baselines.clear();
      fresh = true;
    }
    entry->machine = machine, entry->rule = rule->name(), entry->sizes = tu.sizes;
    entry->space = space, entry->attncVersion = attnc::attncVersion();

    std::cout << "attn-tune " << variant << " on " << machine << "\n  target " << targetKey
              << "\n  sizes " << bucket << " (bucket), rule " << rule->name() << ", "
              << knobs.size() << " knobs" << (online ? " + the online key tile" : "") << ", budget "
              << rq.budget << " s, database " << rq.dbPath << "\n";

    t0 = Clock::now();
    for (const auto &[key, ms] : entry->tried)
      earlier.insert(key);
    return 0;
  }

  // The budget's clock: it starts with the search, not with the compilation before it.
  double elapsed() const { return std::chrono::duration<double>(Clock::now() - t0).count(); }

  // Merges the entry into the database on disk; the first save that succeeds drops the database's
  // earlier measurements of it when the run started afresh.
  bool save(bool result) {
    bool ok = saveEntry(rq.dbPath, *entry, result, fresh, &err);
    fresh = fresh && !ok;
    return ok;
  }

  // Measures one configuration (or reuses its saved time); < 0 when it fails.
  double measure(const Config &c) {
    auto it = entry->tried.find(c.key());
    if (it != entry->tried.end() && !reference.empty()) {
      if (earlier.erase(c.key()))
        ++reused;
      return it->second;
    }
    double ms = -1;
    std::string why;
    try {
      attnc::LoweredKernel lk = tu.lower(c.tile);
      attnc::ScheduleParams sp;
      sp.values = c.params;
      // Timed at tu.sizes only: the copy the AOT kernel runs at them, alone (Target::runBuffers).
      attnc::applySchedule(lk, tu.target, rule->name(), sp, &tu.sizes);
      H::Pipeline p = lk.pipeline();
      p.compile_jit(tu.target);
      std::vector<std::vector<char>> out;
      ms = tu.run(lk, p, &out);
      if (reference.empty()) {
        reference = out;
      } else {
        double d = tu.relDiff(out, reference);
        if (!(d <= 1e-3)) {
          why = "its results differ from the default schedule's (relative " + std::to_string(d) +
                "): rejected";
          ms = -1;
        }
      }
    } catch (const H::Error &e) {
      why = attnc::tidy_halide_message(e.what());
    } catch (const std::exception &e) {
      why = e.what();
    }
    ++measured;
    entry->tried[c.key()] = ms;
    entry->updated = nowIso();
    if (!save(false))
      throw std::runtime_error(err);
    std::cout << "  [" << std::fixed << std::setprecision(1) << std::setw(6) << elapsed() << " s] "
              << c.str() << ": ";
    if (ms >= 0)
      std::cout << std::setprecision(3) << ms << " ms\n";
    else
      std::cout << "failed: " << why.substr(0, 300) << "\n";
    std::cout.flush();
    return ms;
  }

  // A resumed search (after --merge of shards, or an interrupted run) refines the fastest
  // configuration measured so far, not the default: the descent is the local step after a broad
  // sample. Its time is the earlier run's; confirm() measures it again against the default. The
  // default was just measured again, and on a noisy machine that new time can beat every earlier
  // one: the line then says the search starts from the default, so a resumed run always reports
  // what it resumed from.
  void startFromEarlier(Config *best, double *bestMs) {
    std::string bestKey;
    double earliestBest = std::numeric_limits<double>::infinity();
    for (const auto &[key, ms] : entry->tried)
      if (ms >= 0 && ms < earliestBest && earlier.count(key) && key != Config{}.key())
        earliestBest = ms, bestKey = key;
    Config c;
    if (bestKey.empty() || !attnc::parseConfigKey(bestKey, &c.tile, &c.params))
      return;
    std::cout << std::fixed << std::setprecision(3);
    if (earliestBest < *bestMs) {
      *best = c, *bestMs = earliestBest;
      std::cout << "starting from the fastest of " << entry->tried.size()
                << " earlier measurements: " << c.str() << " (" << earliestBest << " ms)\n";
    } else {
      std::cout << "starting from the default (" << *bestMs
                << " ms now), faster than the fastest of " << entry->tried.size()
                << " earlier measurements: " << c.str() << " (" << earliestBest << " ms)\n";
    }
  }

  // The online tile (attnc::kTunedOnlineTiles) first, then the rule's knobs.
  std::vector<Axis> searchAxes() const {
    std::vector<Axis> axes;
    if (online)
      axes.push_back({"", attnc::kTunedOnlineTiles, 0});
    for (const attnc::Knob &k : knobs)
      axes.push_back({k.name, k.choices, k.dflt});
    return axes;
  }

  // True once the budget or --max-trials says to stop before measuring `c`.
  bool stopBefore(const Config &c) const {
    return !entry->tried.count(c.key()) &&
           (elapsed() > limitBudget || (limitTrials > 0 && measured - 1 >= limitTrials));
  }

  // --shard=I/N: every configuration of the space in one pseudo-random order, the same in every
  // shard (Fisher-Yates driven by mt19937_64, whose output the standard fixes, seeded by the
  // entry's key and space), and this shard's positions I, I + N, ...: the slices are disjoint and
  // together cover the space, and each is spread over all of it. True when stopped early.
  bool sample(Config *best, double *bestMs) {
    const std::vector<Axis> axes = searchAxes();
    uint64_t total = 1;
    for (const Axis &ax : axes) {
      total *= ax.choices.size();
      if (total > kMaxShardedSpace)
        throw std::runtime_error("the schedule space has more than " +
                                 std::to_string(kMaxShardedSpace) +
                                 " configurations: too many to split into shards");
    }
    std::vector<uint32_t> order(total);
    for (uint32_t k = 0; k < total; ++k)
      order[k] = k;
    std::mt19937_64 rng(
        attnc::stableHash(variant + "|" + entry->target + "|" + bucket + "|" + space));
    for (uint64_t k = total - 1; k > 0; --k)
      std::swap(order[k], order[rng() % (k + 1)]);
    const uint64_t first = rq.shardIndex, step = rq.shardCount ? rq.shardCount : 1;
    if (rq.shardCount) {
      uint64_t mine = 0;
      for (uint64_t pos = first; pos < total; pos += step)
        mine += decode(order[pos], axes).key() != Config{}.key();
      std::cout << "shard " << rq.shardIndex << "/" << rq.shardCount << ": " << mine << " of "
                << total - 1 << " configurations besides the default\n";
    } else {
      std::cout << "broad sample of the " << total - 1
                << " configurations besides the default (up to " << std::fixed
                << std::setprecision(0) << limitBudget << " s"
                << (limitTrials ? " or " + std::to_string(limitTrials) + " configuration" +
                                      (limitTrials == 1 ? "" : "s")
                                : "")
                << "), then a local search\n";
    }
    for (uint64_t pos = first; pos < total; pos += step) {
      Config c = decode(order[pos], axes);
      if (c.key() == Config{}.key())
        continue;
      if (stopBefore(c))
        return true;
      double ms = measure(c);
      if (ms >= 0 && ms < *bestMs)
        *best = c, *bestMs = ms;
    }
    return false;
  }

  // The configuration numbered `index` in the mixed radix of the axes' choice counts.
  static Config decode(uint64_t index, const std::vector<Axis> &axes) {
    Config c;
    for (const Axis &ax : axes) {
      int v = ax.choices[index % ax.choices.size()];
      index /= ax.choices.size();
      if (ax.name.empty())
        c.tile = v;
      else if (v != ax.dflt)
        c.params[ax.name] = v;
    }
    return c;
  }

  // Coordinate descent from `best`; true when the budget or --max-trials stopped it.
  bool search(Config *best, double *bestMs) {
    const std::vector<Axis> axes = searchAxes();
    bool outOfTime = false;
    for (int round = 0; !outOfTime; ++round) {
      bool improved = false;
      for (const Axis &ax : axes) {
        for (int v : ax.choices) {
          Config c = *best;
          int cur =
              ax.name.empty() ? c.tile : (c.params.count(ax.name) ? c.params[ax.name] : ax.dflt);
          if (v == cur)
            continue;
          if (ax.name.empty())
            c.tile = v;
          else if (v == ax.dflt)
            c.params.erase(ax.name);
          else
            c.params[ax.name] = v;
          if (stopBefore(c)) {
            outOfTime = true;
            break;
          }
          double ms = measure(c);
          if (ms >= 0 && ms < *bestMs * 0.99) {
            *best = c, *bestMs = ms, improved = true;
          }
        }
        if (outOfTime)
          break;
      }
      if (!improved)
        break;
    }
    return outOfTime;
  }

  // A copy of the lowering scheduled as `c` and its pipeline, compiled.
  H::Pipeline build(const Config &c, attnc::LoweredKernel *lk) {
    *lk = tu.lower(c.tile);
    attnc::ScheduleParams sp;
    sp.values = c.params;
    attnc::applySchedule(*lk, tu.target, rule->name(), sp, &tu.sizes);
    H::Pipeline p = lk->pipeline();
    p.compile_jit(tu.target);
    return p;
  }

  // The search compares single medians, and a 2-core machine's run-to-run noise is several
  // percent: measure the winner against the default again, alternating, before keeping it.
  void confirm(Config *best, double *bestMs, double *defaultMs) {
    if (best->key() == Config{}.key())
      return;
    attnc::LoweredKernel lkD, lkB;
    H::Pipeline pD = build(Config{}, &lkD), pB = build(*best, &lkB);
    std::vector<double> d, b;
    for (int round = 0; round < kConfirmRounds; ++round) {
      d.push_back(tu.run(lkD, pD, nullptr));
      b.push_back(tu.run(lkB, pB, nullptr));
    }
    std::sort(d.begin(), d.end());
    std::sort(b.begin(), b.end());
    *defaultMs = d[kConfirmRounds / 2], *bestMs = b[kConfirmRounds / 2];
    std::cout << "re-measured, alternating: default " << std::fixed << std::setprecision(3)
              << *defaultMs << " ms, " << best->str() << " " << *bestMs << " ms\n";
    if (!(*bestMs < *defaultMs * (1 - kConfirmMargin))) {
      std::cout << "no configuration beats the default by more than " << kConfirmMargin * 100
                << "%: keeping the default\n";
      *best = Config{}, *bestMs = *defaultMs;
    }
  }

  // Every knob's value, defaults included: a later change of a rule's defaults must not change
  // what was tuned.
  int record(const Config &best, double bestMs, double defaultMs, bool outOfTime) {
    entry->params.clear();
    for (const attnc::Knob &kb : knobs)
      entry->params[kb.name] = best.params.count(kb.name) ? best.params.at(kb.name) : kb.dflt;
    entry->onlineTile = best.tile;
    entry->timeMs = bestMs;
    entry->defaultMs = defaultMs;
    entry->updated = nowIso();
    if (!save(true))
      return fail(err);
    std::cout << (rq.shardCount ? "shard" : "search") << ": " << measured << " measured, " << reused
              << " reused from the database"
              << (outOfTime       ? ", stopped by the budget or --max-trials (run again to go on)"
                  : rq.shardCount ? ", slice done (not confirmed: merge the shards, then run "
                                    "attn-tune once more without --shard)"
                                  : ", converged")
              << "\n";
    return 0;
  }

  // Halide's autoschedulers on the same pipeline, with the tuned sizes as estimates.
  int measureBaselines() {
    for (const std::string name : {"Mullapudi2016", "Adams2019"}) {
      if (entry->baselines.count(name))
        continue;
      double ms = -1;
      std::string why;
      try {
        attnc::LoweredKernel lk = tu.lower(0);
        attnc::applyAutoscheduler(lk, tu.target, name, tu.sizes);
        H::Pipeline p = lk.pipeline();
        p.compile_jit(tu.target);
        std::vector<std::vector<char>> out;
        ms = tu.run(lk, p, &out);
        double d = tu.relDiff(out, reference);
        if (!(d <= 1e-3))
          why = "results differ from attnc's (relative " + std::to_string(d) + ")", ms = -1;
      } catch (const H::Error &e) {
        why = attnc::tidy_halide_message(e.what());
      } catch (const std::exception &e) {
        why = e.what();
      }
      entry->baselines[name] = ms;
      if (!save(false))
        return fail(err);
      if (ms < 0)
        std::cout << "  " << name << ": failed: " << why.substr(0, 300) << "\n";
    }
    return 0;
  }

  // The tuned schedule beside the default and the baselines, and where it was written.
  void printTable(const Config &best, double bestMs, double defaultMs) {
    std::cout << std::fixed << std::setprecision(3)
              << "\n  schedule                      median ms   vs tuned\n";
    auto row = [&](const std::string &what, double ms) {
      std::cout << "  " << std::left << std::setw(28) << what << std::right;
      if (ms < 0)
        std::cout << std::setw(11) << "failed" << "\n";
      else
        std::cout << std::setw(11) << ms << std::setw(10) << std::setprecision(2) << ms / bestMs
                  << "x\n"
                  << std::setprecision(3);
    };
    row("tuned (" + rule->name() + ")", bestMs);
    row("default (" + rule->name() + ")", defaultMs);
    for (const auto &[name, ms] : entry->baselines)
      row("Halide " + name, ms);
    std::cout << "  tuned: " << best.str() << "\n  written to " << rq.dbPath << " [" << bucket
              << "]; attnc uses it for " << variant
              << " on this target with --sizes in this bucket\n";
  }

  Tuner &tu;
  const Request &rq;
  attnc::TuningDb &db;
  const std::string machine = attnc::tuningMachineName();
  std::string err, variant, bucket, space;
  const attnc::ScheduleRule *rule = nullptr;
  std::vector<attnc::Knob> knobs;
  bool online = false;
  attnc::TuningEntry *entry = nullptr;
  bool fresh = false; // the first save drops the database's measurements of the entry
  Clock::time_point t0;
  std::vector<std::vector<char>> reference; // the default schedule's outputs
  int measured = 0, reused = 0;
  // The current phase's limits (the broad sample's share, then the whole budget and trials).
  double limitBudget = rq.budget;
  int limitTrials = rq.maxTrials;
  std::set<std::string> earlier; // configurations an earlier run measured
};

// Host targets are timed; a Halide or other error anywhere in the run is the tool's error.
int tuneTimed(Tuner &tu, const Request &rq, attnc::TuningDb &db) {
  try {
    return TimedTuning(tu, rq, db).run();
  } catch (const H::Error &e) {
    return fail(attnc::tidy_halide_message(e.what()));
  } catch (const std::exception &e) {
    return fail(e.what());
  }
}

// --merge=OUT DB...: the databases pooled into OUT (created when missing), under its lock.
int mergeDatabases(const std::string &out, const std::vector<std::string> &dbs) {
  if (dbs.empty())
    return fail(
        "--merge needs the databases to pool: attn-tune --merge=OUT.json A.json B.json ...");
  std::vector<attnc::TuningDb> loaded(dbs.size());
  std::string err;
  for (size_t n = 0; n < dbs.size(); ++n) {
    if (!llvm::sys::fs::exists(dbs[n]))
      return fail("cannot read the tuning database '" + dbs[n] + "'");
    if (!attnc::TuningDb::load(dbs[n], &loaded[n], &err))
      return fail(err);
  }
  std::string mergeErr;
  size_t entries = 0, measurements = 0;
  bool ok = attnc::TuningDb::update(
      out,
      [&](attnc::TuningDb &disk) {
        attnc::TuningDb pooled = disk;
        for (size_t n = 0; n < dbs.size() && mergeErr.empty(); ++n)
          pooled.combine(loaded[n], dbs[n], &mergeErr);
        if (!mergeErr.empty())
          return; // the database on disk stays as it was
        disk = std::move(pooled);
        entries = disk.entries.size();
        for (const attnc::TuningEntry &e : disk.entries)
          measurements += e.tried.size();
      },
      &err);
  if (!mergeErr.empty())
    return fail(mergeErr);
  if (!ok)
    return fail(err);
  std::cout << "merged " << dbs.size() << " database" << (dbs.size() == 1 ? "" : "s") << " into "
            << out << ": " << entries << " entr" << (entries == 1 ? "y" : "ies") << ", "
            << measurements << " measured configurations; each entry's result is its fastest "
            << "(run attn-tune once more without --shard to confirm it)\n";
  return 0;
}

bool isGpuTarget(const std::string &targetStr) {
  H::Target t;
  std::string err;
  return attnc::parseTarget(targetStr, &t, &err) && t.has_gpu_feature();
}

} // namespace

int main(int argc, char **argv) {
  attnc::install_cleanup_handlers();
  if (std::optional<int> rc = cli.parse(argc, argv, usage()))
    return *rc;

  if (mergeArg.getNumOccurrences())
    return mergeDatabases(mergeArg, std::vector<std::string>(inputs.begin(), inputs.end()));
  if (inputs.size() > 1)
    return fail("more than one input file ('" + inputs[0] + "' and '" + inputs[1] + "')");
  Request rq = request();
  if (rq.input.empty())
    return cli.failWithUsage("no input file");
  if (rq.shardCount && isGpuTarget(rq.targetStr))
    return fail("--shard splits a timed search; a CUDA target's offline check is not timed "
                "(run it whole)");
  if (rq.sizes.empty() && rq.inPaths.empty())
    return fail(
        "attn-tune needs --sizes: the shapes to tune for (e.g. --sizes=B=1,H=8,N=2048,D=64)");
  attnc::OutputSet files;
  if (int rc = protectDatabase(rq, &files))
    return rc;

  Tuner tu;
  tu.reps = rq.reps;
  std::string err;
  if (!attnc::parseTarget(rq.targetStr, &tu.target, &err))
    return fail(err);
  attnc::CompileOptions co;
  co.path = rq.input, co.frontEnd = rq.feOpts, co.target = rq.targetStr;
  tu.comp = std::make_unique<attnc::Compilation>(co, std::cerr);
  if (!tu.comp->parse())
    return 1;
  if (int rc = bindKernel(rq, &files, tu))
    return rc;

  attnc::TuningDb db;
  if (!attnc::TuningDb::load(rq.dbPath, &db, &err))
    return fail(err);
  if (tu.target.has_gpu_feature())
    return tuneOffline(tu, rq.input, rq.dbPath, db, rq.ptxasPath, rq.baselines);
  if (!attnc::checkJitTarget(tu.target, &err))
    return fail(err);
  return tuneTimed(tu, rq, db);
}
