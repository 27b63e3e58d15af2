// Shared driver steps: file reading, front end, MLIRGen with diagnostics, targets, descriptors.
#include "attnc/Driver.h"

#include "attnc/MLIRGen.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace attnc {

bool runFrontEnd(const std::string &path, const dsl::FrontEndOptions &opts, std::ostream &err,
                 FrontEnd *out) {
  dsl::LoadedModule loaded;
  if (!dsl::loadModule(path, opts, err, &loaded))
    return false;
  out->file = loaded.file;
  out->module = std::move(loaded.module);
  return true;
}

bool runFrontEnd(const std::string &path, const dsl::SemaOptions &opts, std::ostream &err,
                 FrontEnd *out) {
  dsl::FrontEndOptions fo;
  fo.sema = opts;
  return runFrontEnd(path, fo, err, out);
}

mlir::OwningOpRef<mlir::ModuleOp> generateMLIR(mlir::MLIRContext &ctx, const FrontEnd &fe,
                                               std::ostream &err) {
  mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic &d) {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << d.getLocation() << ": error: " << d;
    err << s << "\n";
    return mlir::success();
  });
  return mlirGen(ctx, *fe.module, fe.file->path);
}

bool runPasses(mlir::ModuleOp module, const PipelineOptions &opts, std::ostream &err,
               std::set<std::string> *warned) {
  mlir::ScopedDiagnosticHandler handler(module.getContext(), [&](mlir::Diagnostic &d) {
    std::string s;
    llvm::raw_string_ostream os(s);
    // (A pass warns where a form misses its fast plan, attn-window-partition.)
    const char *severity = d.getSeverity() == mlir::DiagnosticSeverity::Warning  ? "warning"
                           : d.getSeverity() == mlir::DiagnosticSeverity::Note   ? "note"
                           : d.getSeverity() == mlir::DiagnosticSeverity::Remark ? "remark"
                                                                                 : "error";
    if (auto fl = mlir::dyn_cast<mlir::FileLineColLoc>(d.getLocation()))
      os << fl.getFilename().getValue() << ":" << fl.getLine() << ":" << fl.getColumn();
    else
      os << d.getLocation();
    os << ": " << severity << ": " << d;
    if (d.getSeverity() == mlir::DiagnosticSeverity::Warning && warned && !warned->insert(s).second)
      return mlir::success();
    err << s << "\n";
    return mlir::success();
  });
  return mlir::succeeded(runPassPipeline(module, opts));
}

bool parseSizes(const std::string &s, std::map<std::string, int64_t> *out, std::string *err) {
  std::stringstream in(s);
  std::string item;
  bool any = false;
  while (std::getline(in, item, ',')) {
    size_t eq = item.find('=');
    std::string name = item.substr(0, eq == std::string::npos ? 0 : eq);
    std::string value = eq == std::string::npos ? "" : item.substr(eq + 1);
    bool ok = !name.empty() && !value.empty() && value.size() <= 12;
    for (char c : value)
      ok &= std::isdigit((unsigned char)c) != 0;
    if (!ok || std::stoll(value) <= 0) {
      *err = "--sizes expects NAME=VALUE,... with positive integer values, got '" + item + "'";
      return false;
    }
    if (std::stoll(value) > 2147483647) {
      *err =
          "--sizes: " + item + " is more than 2147483647, the largest extent of a tensor dimension";
      return false;
    }
    (*out)[name] = std::stoll(value);
    any = true;
  }
  if (!any) {
    *err = "--sizes expects NAME=VALUE,... (e.g. --sizes=B=1,Q=300)";
    return false;
  }
  return true;
}

attn::KernelOp selectKernel(mlir::ModuleOp m, const std::string &name, std::ostream &err) {
  std::vector<attn::KernelOp> all;
  for (auto k : m.getOps<attn::KernelOp>())
    all.push_back(k);
  if (!name.empty()) {
    for (auto k : all)
      if (k.getSymName() == name)
        return k;
    err << "error: no kernel named '" << name << "'\n";
    return nullptr;
  }
  if (all.size() == 1)
    return all[0];
  err << "error: the file has " << all.size() << " kernels; choose one with --kernel=NAME\n";
  return nullptr;
}

std::vector<TileVisitCount> countTileVisits(const LoweredKernel &k) {
  std::vector<TileVisitCount> out;
  for (const OnlineGroup &g : k.onlineGroups) {
    const TileVisits &tv = g.visits;
    Halide::Buffer<int64_t> v = Halide::Buffer<int64_t>::make_scalar(),
                            m = Halide::Buffer<int64_t>::make_scalar(),
                            a = Halide::Buffer<int64_t>::make_scalar();
    Halide::Func f = tv.count;
    f.realize(Halide::Realization(std::vector<Halide::Buffer<>>{v, m, a}),
              Halide::get_host_target());
    out.push_back({g.name, g.tile, g.grouped ? g.queryGroup : 1, tv.masked, v(), m(), a()});
  }
  return out;
}

std::string describeTileVisits(const TileVisitCount &c) {
  std::ostringstream s;
  s << c.output << ": key tiles visited " << c.visited << " of " << c.total;
  char pct[32];
  std::snprintf(pct, sizeof pct, " (%.1f%%)",
                c.total ? 100.0 * (double)c.visited / (double)c.total : 0.0);
  s << pct << ", " << c.maskTested << " with the mask test (blocks of " << c.rowsPerBlock
    << (c.rowsPerBlock == 1 ? " query row" : " query rows") << " x " << c.tile << " keys)";
  return s.str();
}

bool sameFile(const std::string &a, const std::string &b) {
  struct stat sa, sb;
  if (stat(a.c_str(), &sa) != 0 || stat(b.c_str(), &sb) != 0)
    return false;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

bool isAutoscheduler(const std::string &name) {
  return name == "Mullapudi2016" || name == "Adams2019" || name == "Anderson2021";
}

namespace {
// The plugins sit beside libHalide: in the wheel for the build tree, in the install's library
// directory for an installed attnc (found from the executable's own path).
std::string pluginPath(const std::string &name) {
  std::string lib = name;
  std::transform(lib.begin(), lib.end(), lib.begin(), ::tolower);
  lib = "libautoschedule_" + lib + ".so";
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    std::string dir(exe, n);
    dir = dir.substr(0, dir.find_last_of('/')) + "/../" ATTNC_INSTALL_LIBDIR "/";
    if (std::ifstream(dir + lib))
      return dir + lib;
  }
  return std::string(ATTNC_HALIDE_LIBDIR) + "/" + lib;
}

int64_t sizeOf(const Dim &dim, const std::map<std::string, int64_t> &sizes,
               const std::string &what) {
  int64_t v = 0;
  std::string unbound;
  // Halide's estimates are 32-bit extents, as a tensor's dimensions are.
  switch (dim.evaluate(sizes, &v, &unbound, 2147483647)) {
  case Dim::EvalError::None:
    return v;
  case Dim::EvalError::Unbound:
    throw std::runtime_error(
        "the autoscheduler needs every size as an estimate: --sizes has no value for '" + unbound +
        "' (" + what + ")");
  case Dim::EvalError::Overflow:
    break;
  }
  throw std::runtime_error("the autoscheduler's estimate of " + what + " (" + dim.str() +
                           ") is more than 2147483647 at these --sizes");
}
} // namespace

void applyAutoscheduler(LoweredKernel &k, const Halide::Target &t, const std::string &name,
                        const std::map<std::string, int64_t> &sizes) {
  if (!isAutoscheduler(name))
    throw std::runtime_error("unknown autoscheduler '" + name + "'");
  if (t.has_gpu_feature() != (name == "Anderson2021"))
    throw std::runtime_error(name + (t.has_gpu_feature()
                                         ? " schedules CPU targets only (use Anderson2021 for CUDA)"
                                         : " schedules GPU targets only"));
  k.checkGpuLaunches = false;
  k.gpu = t.has_gpu_feature();
  for (KernelParam &p : k.inputs) {
    std::vector<Halide::Range> est;
    for (size_t d = p.type.rank(); d-- > 0;)
      est.push_back({0, (int)sizeOf(p.type.dims[d], sizes, "input " + p.name)});
    p.param.set_estimates(est);
  }
  std::vector<Halide::Func> outs = k.outputs();
  for (size_t i = 0; i < outs.size(); ++i) {
    std::vector<Halide::Range> est;
    const std::vector<Dim> &dims = k.outputTypes[i].dims;
    for (size_t d = dims.size(); d-- > 0;)
      est.push_back({0, (int)sizeOf(dims[d], sizes, "output " + k.outputNames[i])});
    outs[i].set_estimates(est);
  }
  std::string path = pluginPath(name);
  if (!std::ifstream(path))
    throw std::runtime_error("cannot find Halide's " + name + " plugin at " + path);
  Halide::load_plugin(path);
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  k.pipeline().apply_autoscheduler(
      t, Halide::AutoschedulerParams(name, {{"parallelism", std::to_string(threads)}}));
}

std::string tuningTargetKey(const Halide::Target &t) {
  using F = Halide::Target::Feature;
  Halide::Target k = t;
  for (F f :
       {F::NoRuntime, F::JIT, F::Profile, F::Debug, F::NoAsserts, F::NoBoundsQuery, F::UserContext,
        F::TraceLoads, F::TraceStores, F::TraceRealizations, F::TracePipeline, F::ProfileByTimer})
    k = k.without_feature(f);
  return k.to_string();
}

bool checkJitTarget(const Halide::Target &t, std::string *err) {
  using F = Halide::Target::Feature;
  const Halide::Target host = Halide::get_host_target();
  auto hostName = [&] {
    return " (this machine is " + host.to_string() +
           "); compile it ahead of time with attnc --emit=lib instead";
  };
  if (t.arch != host.arch || t.bits != host.bits || t.os != host.os) {
    *err = "target '" + t.to_string() + "' cannot run here" + hostName();
    return false;
  }
  // Instruction sets: code using one the CPU lacks dies of SIGILL.
  static const F kIsa[] = {F::SSE41,
                           F::AVX,
                           F::AVX2,
                           F::AVXVNNI,
                           F::FMA,
                           F::FMA4,
                           F::F16C,
                           F::AVX512,
                           F::AVX512_KNL,
                           F::AVX512_Skylake,
                           F::AVX512_Cannonlake,
                           F::AVX512_SapphireRapids,
                           F::AVX512_Zen4,
                           F::AVX512_Zen5,
                           F::AVX10_1,
                           F::X86APX,
                           F::ARMv7s,
                           F::VSX,
                           F::POWER_ARCH_2_07,
                           F::SVE,
                           F::SVE2,
                           F::ARMDotProd,
                           F::ARMFp16,
                           F::RVV,
                           F::ARMv81a,
                           F::ARMv82a,
                           F::ARMv83a,
                           F::ARMv84a,
                           F::ARMv85a,
                           F::ARMv86a,
                           F::ARMv87a,
                           F::ARMv88a,
                           F::ARMv89a};
  for (F f : kIsa)
    if (t.has_feature(f) && !host.has_feature(f)) {
      *err = "target '" + t.to_string() + "' uses " + Halide::Target::feature_to_name(f) +
             ", which this CPU lacks" + hostName();
      return false;
    }
  return true;
}

bool parseTarget(const std::string &s, Halide::Target *t, std::string *err) {
  if (s == "host") {
    *t = Halide::get_host_target();
    return true;
  }
  if (!Halide::Target::validate_target_string(s)) {
    *err = "invalid target '" + s +
           "' (use 'host' or a Halide target string such as x86-64-linux-avx2-fma)";
    return false;
  }
  Halide::Target target(s);
  // Halide's bare `avx512` (without a CPU generation) makes its LLVM abort on ordinary kernels.
  using F = Halide::Target::Feature;
  if (target.has_feature(F::AVX512) &&
      !target.features_any_of({F::AVX512_KNL, F::AVX512_Skylake, F::AVX512_Cannonlake,
                               F::AVX512_SapphireRapids, F::AVX512_Zen4, F::AVX512_Zen5})) {
    *err = "target '" + s +
           "': 'avx512' alone is not supported; name the CPU generation (avx512_skylake, "
           "avx512_cannonlake, avx512_sapphirerapids, avx512_zen4, avx512_zen5) or use 'host'";
    return false;
  }
  if (target.has_gpu_feature()) {
    if (!target.has_feature(F::CUDA)) {
      *err =
          "target '" + s +
          "': only CUDA GPU targets are supported (OpenCL, Metal, Vulkan, D3D12, WebGPU are not)";
      return false;
    }
    // Without a capability Halide asks the CUDA driver which one the GPU has, which fails (or
    // differs) on a build machine; with it the PTX is fixed and can be checked offline.
    if (!target.features_any_of({F::CUDACapability80, F::CUDACapability86})) {
      bool other = target.features_any_of(
          {F::CUDACapability30, F::CUDACapability32, F::CUDACapability35, F::CUDACapability50,
           F::CUDACapability61, F::CUDACapability70, F::CUDACapability75});
      *err = "target '" + s + "': " +
             (other ? std::string("attnc supports CUDA capabilities 8.0 and 8.6 (sm_80, sm_86; "
                                  "their PTX also runs on sm_90)")
                    : std::string(
                          "name the CUDA capability, e.g. x86-64-linux-cuda-cuda_capability_80 or "
                          "..._cuda_capability_86 (a bare 'cuda' makes Halide query a driver at "
                          "compile time)"));
      return false;
    }
  }
  *t = target;
  return true;
}

// Descriptors spell each dimension canonically (Dim::str), which the runtime parses back with
// Dim::parse: descriptors are plain constant data that hand-written callers can build too.
static std::string dimsArray(const std::string &var, const std::vector<Dim> &dims) {
  std::ostringstream os;
  os << "  static const char* const " << var << "[] = {";
  for (size_t i = 0; i < dims.size(); ++i)
    os << (i ? ", " : "") << "\"" << dims[i].str() << "\"";
  if (dims.empty())
    os << "nullptr";
  os << "};\n";
  return os.str();
}

std::string runtimeDescriptorHeader(const LoweredKernel &k, const std::string &halideHeader,
                                    const std::string &targetKey, const Halide::Target &target,
                                    const std::string &source, const std::string &schedule) {
  std::ostringstream os;
  os << "// Generated by attnc from " << source << ": runtime descriptor of kernel '" << k.name
     << "' for target " << target.to_string() << ".\n";
  os << "#pragma once\n\n#include \"attnc/runtime.h\"\n#include \"" << halideHeader << "\"\n";
  if (target.has_gpu_feature())
    os << "#include <HalideRuntime.h> // halide_copy_to_host, halide_device_free\n";
  os << "\n";
  os << "namespace attnc_kernels {\n\n";
  os << "// Shapes are C order; each dimension is a size symbol bound at call time, a literal, or "
        "(outputs only) a\n"
        "// product of these such as \"M*D\".\n";
  os << "inline const attnc::KernelDesc& " << k.name << "() {\n";
  for (const auto &p : k.inputs)
    os << dimsArray("in_" + p.name + "_dims", p.type.dims);
  for (size_t i = 0; i < k.outputNames.size(); ++i)
    os << dimsArray("out_" + k.outputNames[i] + "_dims", k.outputTypes[i].dims);
  os << "  static const attnc::ParamDesc kInputs[] = {\n";
  for (const auto &p : k.inputs)
    os << "      {\"" << p.name << "\", attnc::DType::" << dtype_info(p.type.dtype)->enumerator
       << ", " << p.type.rank() << ", "
       << "in_" << p.name << "_dims},\n";
  if (k.inputs.empty())
    os << "      {nullptr, attnc::DType::F32, 0, nullptr},\n";
  os << "  };\n  static const attnc::ParamDesc kOutputs[] = {\n";
  for (size_t i = 0; i < k.outputNames.size(); ++i)
    os << "      {\"" << k.outputNames[i]
       << "\", attnc::DType::" << dtype_info(k.outputTypes[i].dtype)->enumerator << ", "
       << k.outputTypes[i].rank() << ", " << "out_" << k.outputNames[i] << "_dims},\n";
  os << "  };\n";
  os << "  static const attnc::KernelDesc desc = {\"" << k.name << "\", \"" << targetKey << "\", "
     << k.inputs.size() << ", kInputs, " << k.outputNames.size() << ", kOutputs, &" << k.name
     << "_argv";
  // GPU kernels: the device entry points of the Halide runtime this kernel links with.
  if (target.has_gpu_feature())
    os << ", &halide_copy_to_host, &halide_device_free";
  else if (!schedule.empty())
    os << ", nullptr, nullptr";
  if (!schedule.empty()) {
    std::string q;
    for (char c : schedule)
      q += c == '"' || c == '\\' ? std::string("\\") + c : std::string(1, c);
    os << ", \"" << q << "\"";
  }
  os << "};\n";
  os << "  return desc;\n}\n\n";
  os << "// Including this header registers the kernel under (\"" << k.name << "\", \"" << targetKey
     << "\").\n";
  os << "inline const attnc::Registrar " << k.name << "_registrar{&" << k.name << "()};\n\n";
  os << "} // namespace attnc_kernels\n";
  return os.str();
}

} // namespace attnc
