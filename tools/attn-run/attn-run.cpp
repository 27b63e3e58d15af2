// attn-run: JIT-compiles a .attn kernel through Halide and runs it on float32/int32 .npy files, or
// (--reference) evaluates it with the fp64 reference interpreter instead.
#include "attnc/Compilation.h"
#include "attnc/Schedule.h"
#include "attnc/Transforms/Passes.h"
#include "attnc/dsl/Interpreter.h"
#include "attnc/float16.h"
#include "attnc/npy.h"
#include "attnc/output.h"
#include "attnc/runtime.h"

#include "JitBuffers.h"
#include "ToolMain.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace {

bool splitAssign(const std::string &s, std::string *name, std::string *path);

namespace cl = llvm::cl;
using attnc::tool::fail;

cl::OptionCategory category("attn-run options");
attnc::tool::CommandLine cli(category,
                             "attn-run FILE.attn --input NAME=IN.npy ... [--output NAME=OUT.npy "
                             "...] [options]",
                             "error: ");

cl::list<std::string> kernelFiles(cl::Positional, cl::desc("FILE.attn"), cl::cat(category),
                                  cl::callback([](const std::string &file) {
                                    if (kernelFiles.size() > 1)
                                      cli.error(kernelFiles, "more than one kernel file ('" +
                                                                 kernelFiles[0] + "' and '" + file +
                                                                 "')");
                                  }));

cl::list<std::string> inputArgs("input", cl::desc("an input of the kernel (repeated for each)"),
                                cl::value_desc("NAME=IN.npy"), cl::cat(category),
                                cl::callback([](const std::string &v) {
                                  std::string name, path;
                                  if (!splitAssign(v, &name, &path))
                                    cli.error(inputArgs,
                                              "--input expects NAME=FILE.npy, got '" + v + "'");
                                }));

cl::list<std::string>
    outputArgs("output", cl::desc("write this output to OUT.npy"), cl::value_desc("NAME=OUT.npy"),
               cl::cat(category), cl::callback([](const std::string &v) {
                 std::string name, path;
                 if (!splitAssign(v, &name, &path))
                   cli.error(outputArgs, "--output expects NAME=FILE.npy, got '" + v + "'");
               }));

cl::opt<std::string>
    targetStr("target",
              cl::desc("'host' (default), a Halide CPU target string, or a CUDA target\n"
                       "(x86-64-linux-cuda-cuda_capability_80|86: needs a CUDA device and driver)"),
              cl::value_desc("T"), cl::init("host"), cl::cat(category));

cl::opt<std::string> schedule("schedule", cl::desc("auto (default), none, or a rule name"),
                              cl::value_desc("S"), cl::init("auto"), cl::cat(category));

cl::opt<std::string> kernelName("kernel", cl::desc("kernel to run when the file has several"),
                                cl::value_desc("NAME"), cl::cat(category));

cl::list<std::string> defines("D", cl::desc("override a kernel constant"),
                              cl::value_desc("NAME=VALUE"), cl::Prefix, cl::cat(category),
                              cl::callback([](const std::string &def) {
                                std::string name, value;
                                if (!splitAssign(def, &name, &value))
                                  cli.error(defines, "-D expects NAME=VALUE, got '" + def + "'");
                              }));

cl::list<std::string> importDirs("I", cl::desc("also search DIR for imported .attn files"),
                                 cl::value_desc("DIR"), cl::Prefix, cl::cat(category),
                                 cl::callback([](const std::string &dir) {
                                   if (dir.empty())
                                     cli.error(importDirs, "-I needs a directory");
                                 }));

cl::opt<std::string> sampleOrder(
    "sample-order",
    cl::desc("auto (default: by cost at the inputs' sizes), sample-first or project-first"),
    cl::value_desc("O"), cl::init("auto"), cl::cat(category),
    cl::callback([](const std::string &o) {
      attnc::SampleOrder parsed;
      if (!attnc::parseSampleOrder(o, &parsed))
        cli.error(sampleOrder, "unknown --sample-order '" + o +
                                   "' (expected auto, sample-first or project-first)");
    }));

cl::opt<std::string>
    onlineSoftmax("online-softmax",
                  cl::desc("on (default) or off: fuse softmax and the weighted sum over its axis"),
                  cl::value_desc("M"), cl::cat(category), cl::callback([](const std::string &m) {
                    if (m != "on" && m != "off")
                      cli.error(onlineSoftmax,
                                "unknown --online-softmax '" + m + "' (expected on or off)");
                  }));

cl::opt<std::string> gatherChecks(
    "gather-checks",
    cl::desc(
        "where a read at an index taken from a tensor (a page table's entry) is range-checked: "
        "read (default: where it is read) or host (before the kernel, over the indices it "
        "uses where it counts, as GPU kernels check it)"),
    cl::value_desc("W"), cl::init("read"), cl::cat(category),
    cl::callback([](const std::string &m) {
      if (m != "read" && m != "host")
        cli.error(gatherChecks, "unknown --gather-checks '" + m + "' (expected read or host)");
    }));

// The default tile comes from its one definition (Passes.h).
const std::string onlineTileDesc =
    "keys per tile of the online softmax (default " + std::to_string(attnc::kDefaultOnlineTile) +
    ", or the key count rounded\nup to 16 when the inputs have fewer)";
attnc::tool::IntOption onlineTile(cli, category, "online-tile", onlineTileDesc, "a key count",
                                  attnc::kMinOnlineTile, attnc::kMaxOnlineTile);

cl::opt<bool> tileStats(
    "tile-stats",
    cl::desc("also print, per online softmax, how many (row block, key tile) pairs the kernel\n"
             "visits at these inputs and how many of those test the mask"),
    cl::ValueDisallowed, cl::cat(category));

cl::opt<bool> reference(
    "reference",
    cl::desc("evaluate with the fp64 reference interpreter instead of Halide (outputs are\n"
             "written in the kernel's element types like the compiled ones; --target and\n"
             "--schedule are ignored)"),
    cl::ValueDisallowed, cl::cat(category));

bool splitAssign(const std::string &s, std::string *name, std::string *path) {
  size_t eq = s.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == s.size())
    return false;
  *name = s.substr(0, eq);
  *path = s.substr(eq + 1);
  return true;
}

// NAME=VALUE arguments (checked by splitAssign as they were parsed) as pairs.
using Assignments = std::vector<std::pair<std::string, std::string>>;

Assignments assignments(const std::vector<std::string> &args) {
  Assignments pairs;
  std::string name, value;
  for (const std::string &a : args) {
    splitAssign(a, &name, &value);
    pairs.emplace_back(name, value);
  }
  return pairs;
}

// A Halide buffer over caller memory; Halide's dimension 0 is the innermost (last C) one.
// Zero-initialised storage aligned to 128 bytes.
class AlignedBytes {
public:
  explicit AlignedBytes(size_t n)
      : p_(static_cast<char *>(std::aligned_alloc(128, (n + 127) / 128 * 128)), &std::free) {
    if (!p_)
      throw std::bad_alloc();
    std::memset(p_.get(), 0, n);
  }
  char *data() { return p_.get(); }
  const char *data() const { return p_.get(); }

private:
  std::unique_ptr<char, decltype(&std::free)> p_;
};

Halide::Buffer<> wrap(attnc::TensorView &t) {
  std::vector<halide_dimension_t> dims(t.rank);
  for (int d = 0; d < t.rank; ++d) {
    int c = t.rank - 1 - d;
    dims[d] = halide_dimension_t(0, (int32_t)t.shape[c], (int32_t)t.strides[c]);
  }
  return Halide::Buffer<>(attnc::halideType(t.dtype), t.data, t.rank, dims.data());
}

// Two-byte values of unstated format ('<V2', '<u2': bf16 as numpy writes it) where the kernel
// declares a four-byte type: said as what the file holds, not as the bf16 they were read as.
std::string raw16Mismatch(const attnc::NpyArray &a, attnc::DType declared) {
  if (!a.raw16 || attnc::dtype_size(declared) == 2)
    return "";
  return std::string("the file holds two-byte values (numpy '<V2' or '<u2', as bf16 is saved), "
                     "but the kernel declares ") +
         attnc::dtype_name(declared);
}

// Checks the --input/--output names against the kernel's and fills name -> path maps; returns an
// error message, or "" when they are fine.
std::string matchPaths(const std::string &kernel, const std::vector<std::string> &inNames,
                       const std::vector<std::string> &outNames, const Assignments &ins,
                       const Assignments &outs, std::map<std::string, std::string> *inPaths,
                       std::map<std::string, std::string> *outPaths) {
  for (auto &[n, p] : ins) {
    if (std::find(inNames.begin(), inNames.end(), n) == inNames.end())
      return "kernel '" + kernel + "' has no input named '" + n + "'";
    if (!inPaths->emplace(n, p).second)
      return "input '" + n + "' is given twice";
  }
  for (auto &[n, p] : outs) {
    if (std::find(outNames.begin(), outNames.end(), n) == outNames.end())
      return "kernel '" + kernel + "' has no output named '" + n + "'";
    if (!outPaths->emplace(n, p).second)
      return "output '" + n + "' is given twice";
  }
  for (const std::string &n : inNames)
    if (!inPaths->count(n))
      return "missing --input " + n + "=FILE.npy";
  return "";
}

// The --output files, checked before any work and written together or not at all.
struct OutputFiles {
  attnc::OutputSet set;
  std::map<std::string, size_t> file; // output name -> its file in `set`
};

// Prints `name: [shape]`, and for float outputs ` min .. max .. mean ..`.
template <typename T>
void summarise(const std::string &name, const std::vector<int64_t> &shape, bool isFloat,
               const T *data, int64_t count) {
  std::cout << name << ": [";
  for (size_t d = 0; d < shape.size(); ++d)
    std::cout << (d ? ", " : "") << shape[d];
  std::cout << "]";
  if (isFloat) {
    double lo = 0, hi = 0, sum = 0;
    for (int64_t j = 0; j < count; ++j) {
      double v = (double)data[j];
      lo = j ? std::min(lo, v) : v;
      hi = j ? std::max(hi, v) : v;
      sum += v;
    }
    std::cout << " min " << lo << " max " << hi << " mean " << (count ? sum / count : 0);
  }
}

// --reference: the checked kernel evaluated by the fp64 interpreter (no MLIR, no Halide).
int runReference(const attnc::dsl::Module &m, const std::string &kernelName, const Assignments &ins,
                 const Assignments &outs, OutputFiles &files) {
  const attnc::dsl::Kernel *k = nullptr;
  if (!kernelName.empty()) {
    for (const auto &c : m.kernels)
      if (c->name == kernelName)
        k = c.get();
    if (!k)
      return fail("no kernel named '" + kernelName + "'");
  } else if (m.kernels.size() == 1) {
    k = m.kernels[0].get();
  } else {
    return fail("the file has " + std::to_string(m.kernels.size()) +
                " kernels; choose one with --kernel=NAME");
  }
  std::vector<std::string> inNames, outNames;
  for (const auto &t : k->inputs)
    inNames.push_back(t->name);
  for (const auto &t : k->outputs)
    outNames.push_back(t->name);
  std::map<std::string, std::string> inPaths, outPaths;
  std::string err = matchPaths(k->name, inNames, outNames, ins, outs, &inPaths, &outPaths);
  if (!err.empty())
    return fail(err);

  std::vector<attnc::dsl::RefTensor> inputs;
  for (const std::string &n : inNames) {
    attnc::NpyArray a;
    attnc::Status st = attnc::read_npy(inPaths[n], &a);
    if (!st.ok())
      return fail("input '" + n + "': " + st.message());
    const attnc::DType declared = k->inputs[inputs.size()]->elemType;
    if (std::string why = raw16Mismatch(a, declared); !why.empty())
      return fail("input '" + n + "': " + why);
    attnc::retype_raw16(a, declared);
    attnc::dsl::RefTensor t;
    t.shape = a.shape;
    t.isInt = a.dtype == attnc::DType::I32;
    // f32 against i32 is the interpreter's to report; a two-byte type must match exactly, as
    // the runtime says it for compiled kernels.
    if (a.dtype != declared &&
        (attnc::dtype_size(a.dtype) == 2 || attnc::dtype_size(declared) == 2))
      return fail(k->name + ": input '" + n + "' has dtype " + attnc::dtype_name(a.dtype) +
                  ", expected " + attnc::dtype_name(declared));
    const size_t width = attnc::dtype_size(a.dtype);
    size_t count = a.data.size() / width;
    // The interpreter holds every value as a double.
    st = attnc::check_memory("input '" + n + "' in fp64", count * sizeof(double));
    if (!st.ok())
      return fail(st.message());
    t.data.resize(count);
    for (size_t j = 0; j < count; ++j) {
      if (t.isInt) {
        int32_t v;
        std::memcpy(&v, a.data.data() + 4 * j, 4);
        t.data[j] = v;
      } else if (width == 2) {
        uint16_t v;
        std::memcpy(&v, a.data.data() + 2 * j, 2);
        t.data[j] = attnc::half_bits_to_float(v, a.dtype);
      } else {
        float v;
        std::memcpy(&v, a.data.data() + 4 * j, 4);
        t.data[j] = v;
      }
    }
    inputs.push_back(std::move(t));
  }
  std::vector<attnc::dsl::RefTensor> results;
  try {
    if (!attnc::dsl::interpret(*k, inputs, &results, &err))
      return fail(k->name + ": " + err);
  } catch (const std::bad_alloc &) {
    return fail(
        k->name +
        ": the fp64 reference interpreter ran out of memory (it keeps every definition whole)");
  }

  // Every file is staged before the first summary is printed: they appear together or not at all.
  for (size_t i = 0; i < results.size(); ++i) {
    const attnc::dsl::RefTensor &r = results[i];
    const std::string &n = outNames[i];
    if (outPaths.count(n)) {
      const attnc::DType dt = k->outputs[i]->elemType;
      const size_t width = attnc::dtype_size(dt);
      std::vector<char> bytes(std::max<size_t>(r.data.size(), 1) * width);
      for (size_t j = 0; j < r.data.size(); ++j) {
        if (width == 2) { // the interpreter rounded it to the type already: exact
          uint16_t x = attnc::float_to_half_bits((float)r.data[j], dt);
          std::memcpy(bytes.data() + 2 * j, &x, 2);
        } else if (r.isInt) {
          double v = r.data[j];
          if (!(v >= -2147483648.0 && v <= 2147483647.0))
            return fail("output '" + n + "' element " + std::to_string(j) + " is " +
                        std::to_string(v) + ", which does not fit in i32");
          int32_t x = (int32_t)v;
          std::memcpy(bytes.data() + 4 * j, &x, 4);
        } else {
          float x = (float)r.data[j];
          std::memcpy(bytes.data() + 4 * j, &x, 4);
        }
      }
      attnc::Status ws = attnc::write_npy(files.set, files.file.at(n), dt, r.shape, bytes.data());
      if (!ws.ok())
        return fail(ws.message());
    }
  }
  if (attnc::Status st = files.set.commit(); !st.ok())
    return fail(st.message());
  for (size_t i = 0; i < results.size(); ++i) {
    const attnc::dsl::RefTensor &r = results[i];
    const std::string &n = outNames[i];
    // The summary describes what is written: f32 outputs rounded to float32.
    if (r.isInt) {
      summarise(n, r.shape, false, r.data.data(), (int64_t)r.data.size());
    } else {
      std::vector<float> f(r.data.begin(), r.data.end());
      summarise(n, r.shape, true, f.data(), (int64_t)f.size());
    }
    auto it = outPaths.find(n);
    if (it != outPaths.end())
      std::cout << " -> " << it->second;
    std::cout << "\n";
  }
  std::cerr << "reference: fp64 interpreter\n";
  return 0;
}

// The compilation the options ask for (their values were checked as they were parsed).
attnc::CompileOptions compileOptions() {
  attnc::CompileOptions co;
  co.path = kernelFiles.empty() ? std::string() : kernelFiles[0];
  co.target = targetStr;
  co.kernel = kernelName;
  for (const auto &[name, value] : assignments(defines))
    co.frontEnd.sema.defines.emplace_back(name, value);
  co.frontEnd.importPaths.assign(importDirs.begin(), importDirs.end());
  attnc::parseSampleOrder(sampleOrder, &co.passes.sampleOrder);
  if (onlineSoftmax.getNumOccurrences())
    co.onlineSoftmax = onlineSoftmax == "on";
  co.hostGatherChecks = gatherChecks == "host";
  if (auto tile = onlineTile.value())
    co.passes.onlineTile = *tile;
  return co;
}

// The run's descriptor, built from the lowering as attnc writes one for an AOT library, so that
// attn-run checks shapes and explains Halide's errors as attnc::call does (it owns the strings
// the descriptor points to).
class RuntimeDesc {
public:
  RuntimeDesc(const attnc::LoweredKernel &lk, const std::string &target) {
    dimTexts_.reserve(lk.inputs.size() + lk.outputNames.size());
    dimPtrs_.reserve(lk.inputs.size() + lk.outputNames.size());
    for (auto &p : lk.inputs)
      inputs_.push_back(param(p.name, p.type));
    for (size_t i = 0; i < lk.outputNames.size(); ++i)
      outputs_.push_back(param(lk.outputNames[i], lk.outputTypes[i]));
    desc_ = attnc::KernelDesc{lk.name.c_str(), target.c_str(),       (int)inputs_.size(),
                              inputs_.data(),  (int)outputs_.size(), outputs_.data(),
                              nullptr};
  }
  const attnc::KernelDesc &get() const { return desc_; }

private:
  attnc::ParamDesc param(const std::string &name, const attnc::TensorType &t) {
    dimTexts_.emplace_back();
    dimPtrs_.emplace_back();
    for (const attnc::Dim &d : t.dims)
      dimTexts_.back().push_back(d.str());
    for (const std::string &d : dimTexts_.back())
      dimPtrs_.back().push_back(d.c_str());
    return {name.c_str(), t.dtype, (int)t.rank(), dimPtrs_.back().data()};
  }
  std::vector<std::vector<std::string>> dimTexts_;
  std::vector<std::vector<const char *>> dimPtrs_;
  std::vector<attnc::ParamDesc> inputs_, outputs_;
  attnc::KernelDesc desc_{};
};

// No output may be a file the run reads (the kernel source, an import, an input), another
// output or a directory: all checked before any work.
attnc::Status protectFiles(const std::string &source, const attnc::dsl::Module &m,
                           const Assignments &ins, const Assignments &outs, OutputFiles *files) {
  attnc::Status st = files->set.protect(source, "the kernel source");
  for (const auto &f : m.files)
    if (st.ok())
      st = files->set.protect(f->path, "the imported file");
  for (const auto &[n, p] : ins)
    if (st.ok())
      st = files->set.protect(p, "input file");
  for (const auto &[n, p] : outs) {
    size_t i = 0;
    if (st.ok())
      st = files->set.add(p, "output '" + n + "'", &i);
    files->file.emplace(n, i);
  }
  return st;
}

// Every tensor fits Halide's 32-bit indexing and this machine's memory, or is named here before
// anything is allocated for it.
attnc::Status checkSizes(const attnc::LoweredKernel &lk, const std::vector<attnc::NpyArray> &arrays,
                         const std::vector<std::vector<int64_t>> &shapes) {
  uint64_t total = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    attnc::Status st = attnc::check_tensor_size("output '" + lk.outputNames[i] + "'",
                                                lk.outputTypes[i].dtype, shapes[i]);
    if (!st.ok())
      return st;
    total +=
        (uint64_t)attnc::TensorView::contiguous(nullptr, attnc::DType::F32, shapes[i]).numel() *
        attnc::dtype_size(lk.outputTypes[i].dtype);
  }
  for (size_t i = 0; i < lk.inputs.size(); ++i) {
    attnc::Status st = attnc::check_tensor_size("input '" + lk.inputs[i].name + "'",
                                                arrays[i].dtype, arrays[i].shape);
    if (!st.ok())
      return st;
    total += arrays[i].data.size();
  }
  return attnc::check_memory("kernel '" + lk.name + "' (its inputs and outputs)", total);
}

// The buffers handed to Halide. Every one is 128-byte aligned, as Halide's own allocations are:
// code vectorised for AVX-512 may use aligned vector loads and stores.
struct Buffers {
  std::vector<AlignedBytes> inData, outData;
  std::vector<Halide::Buffer<>> outBufs;
  std::vector<attnc::TensorView> outViews;

  // Moves each input into aligned memory (the .npy bytes are freed) and binds it to its param.
  attnc::Status bindInputs(attnc::LoweredKernel &lk, std::vector<attnc::NpyArray> &arrays,
                           std::vector<attnc::TensorView> &views) {
    for (size_t i = 0; i < lk.inputs.size(); ++i) {
      try {
        inData.emplace_back(std::max<size_t>(arrays[i].data.size(), 1));
      } catch (const std::bad_alloc &) {
        return attnc::Status::Error("input '" + lk.inputs[i].name + "': cannot allocate " +
                                    std::to_string(arrays[i].data.size()) + " bytes");
      }
      std::copy(arrays[i].data.begin(), arrays[i].data.end(), inData.back().data());
      std::vector<char>().swap(arrays[i].data); // only the aligned copy is used from here on
      views[i].data = inData.back().data();
      Halide::Buffer<> b = wrap(views[i]);
      b.set_host_dirty(); // on a GPU target Halide uploads host-dirty inputs
      lk.inputs[i].param.set(b);
    }
    return attnc::Status::Ok();
  }

  attnc::Status allocateOutputs(const attnc::LoweredKernel &lk,
                                const std::vector<std::vector<int64_t>> &shapes) {
    for (size_t i = 0; i < shapes.size(); ++i) {
      attnc::DType dt = lk.outputTypes[i].dtype;
      attnc::TensorView probe = attnc::TensorView::contiguous(nullptr, dt, shapes[i]);
      const int64_t bytes = probe.numel() * (int64_t)attnc::dtype_size(dt);
      try {
        outData.emplace_back(std::max<int64_t>(bytes, 1));
      } catch (const std::bad_alloc &) {
        return attnc::Status::Error("output '" + lk.outputNames[i] + "': cannot allocate " +
                                    std::to_string(bytes) + " bytes");
      }
      outViews.push_back(attnc::TensorView::contiguous(outData[i].data(), dt, shapes[i]));
      outBufs.push_back(wrap(outViews.back()));
    }
    return attnc::Status::Ok();
  }
};

// The outputs: every file staged before the first summary is printed (they appear together or
// not at all), then one summary line per output.
attnc::Status writeOutputs(const attnc::LoweredKernel &lk, const Buffers &b,
                           const std::vector<std::vector<int64_t>> &shapes,
                           const std::map<std::string, std::string> &outPaths, OutputFiles &files) {
  for (size_t i = 0; i < shapes.size(); ++i) {
    const std::string &n = lk.outputNames[i];
    if (!outPaths.count(n))
      continue;
    attnc::Status ws = attnc::write_npy(files.set, files.file.at(n), b.outViews[i].dtype, shapes[i],
                                        b.outData[i].data());
    if (!ws.ok())
      return ws;
  }
  if (attnc::Status st = files.set.commit(); !st.ok())
    return st;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const std::string &n = lk.outputNames[i];
    const attnc::DType dt = lk.outputTypes[i].dtype;
    if (attnc::dtype_size(dt) == 2) { // summarised as the float values it holds
      std::vector<float> f(b.outViews[i].numel());
      for (size_t j = 0; j < f.size(); ++j) {
        uint16_t x;
        std::memcpy(&x, b.outData[i].data() + 2 * j, 2);
        f[j] = attnc::half_bits_to_float(x, dt);
      }
      summarise(n, shapes[i], true, f.data(), (int64_t)f.size());
    } else if (lk.outputTypes[i].is_float())
      summarise(n, shapes[i], true, reinterpret_cast<const float *>(b.outData[i].data()),
                b.outViews[i].numel());
    else
      summarise(n, shapes[i], false, reinterpret_cast<const int32_t *>(b.outData[i].data()),
                b.outViews[i].numel());
    auto it = outPaths.find(n);
    if (it != outPaths.end())
      std::cout << " -> " << it->second;
    std::cout << "\n";
  }
  return attnc::Status::Ok();
}

// The kernel JIT-compiled for --target with its schedule, run on the inputs.
int runCompiled(attnc::Compilation &comp, const Assignments &ins, const Assignments &outs,
                OutputFiles &files) {
  mlir::ModuleOp generated = comp.generated();
  if (!generated)
    return 1;
  attnc::attn::KernelOp kernel = comp.kernel(generated);
  if (!kernel)
    return 1;
  Halide::Target target;
  std::string err;
  if (!comp.target(&target))
    return 1;
  if (!attnc::checkJitTarget(target, &err))
    return fail(err);

  std::string why;
  if (target.has_feature(Halide::Target::CUDA) && !attnc::cuda_device_available(&why))
    return fail(kernel.getSymName().str() + ": no CUDA device for target " + targetStr + ": " +
                why);

  // The inputs are read before the passes: their shapes are the sizes the cost model uses.
  std::map<std::string, std::string> inPaths, outPaths;
  std::vector<std::string> inNames, outNames;
  for (unsigned i = 0; i < kernel.getArgumentTypes().size(); ++i)
    inNames.push_back(kernel.getInputName(i).str());
  for (unsigned i = 0; i < kernel.getResultTypes().size(); ++i)
    outNames.push_back(kernel.getOutputName(i).str());
  std::string ioErr =
      matchPaths(kernel.getSymName().str(), inNames, outNames, ins, outs, &inPaths, &outPaths);
  if (!ioErr.empty())
    return fail(ioErr);
  std::vector<attnc::NpyArray> arrays(inNames.size());
  for (size_t i = 0; i < inNames.size(); ++i) {
    attnc::Status st = attnc::read_npy(inPaths[inNames[i]], &arrays[i]);
    if (!st.ok())
      return fail("input '" + inNames[i] + "': " + st.message());
    if (std::string why = raw16Mismatch(arrays[i], kernel.getInputType(i).dtype); !why.empty())
      return fail("input '" + inNames[i] + "': " + why);
    attnc::retype_raw16(arrays[i], kernel.getInputType(i).dtype);
    std::vector<attnc::Dim> dims = kernel.getInputType(i).dims;
    for (size_t d = 0; d < dims.size() && d < arrays[i].shape.size(); ++d)
      if (dims[d].symbol())
        comp.options().passes.estimates.emplace(dims[d].symbol_name(), arrays[i].shape[d]);
  }
  const std::string kernelSym = kernel.getSymName().str();

  try {
    attnc::LoweredKernel lk = comp.lower();
    RuntimeDesc desc(lk, targetStr);
    std::vector<attnc::TensorView> views;
    for (size_t i = 0; i < lk.inputs.size(); ++i)
      views.push_back(arrays[i].view());
    attnc::SizeMap sizes;
    attnc::Status st = attnc::bind_sizes(desc.get(), views, &sizes);
    std::vector<std::vector<int64_t>> shapes;
    if (st.ok())
      st = attnc::output_shapes(desc.get(), sizes, &shapes);
    if (st.ok())
      st = checkSizes(lk, arrays, shapes);
    if (!st.ok())
      return fail(st.message());

    attnc::AppliedSchedule scheduled =
        attnc::scheduleKernel(lk, target,
                              attnc::ScheduleRequest{schedule,
                                                     {},
                                                     comp.options().passes.estimates,
                                                     /*weigh=*/!onlineTile.value(),
                                                     /*jit=*/true,
                                                     /*runSizes=*/sizes});
    if (!scheduled.warning.empty())
      std::cerr << scheduled.warning << "\n";
    const std::string &applied = scheduled.applied;
    // The plan "auto" weighed is JIT-compiled already: run that copy rather than compile lk.
    attnc::LoweredKernel &run = scheduled.jitKernel ? *scheduled.jitKernel : lk;
    Buffers b;
    st = b.bindInputs(run, arrays, views);
    if (st.ok())
      st = b.allocateOutputs(run, shapes);
    if (!st.ok())
      return fail(st.message());
    Halide::Pipeline p = scheduled.jitKernel ? *scheduled.lowered->jit : lk.pipeline();
    attnc::tool::useRuntimeBuffers(p);
    try {
      p.realize(Halide::Realization(b.outBufs), target);
    } catch (const Halide::RuntimeError &e) {
      // In the DSL's terms (tensor names, DSL dimensions), as attnc::call reports AOT kernels.
      std::string msg = e.what(), why = attnc::explain_halide_error(desc.get(), msg);
      if (msg.rfind("Error: ", 0) == 0)
        msg = msg.substr(7);
      return fail(lk.name + ": " + (why.empty() ? attnc::tidy_halide_message(msg) : why));
    }
    // GPU results stay on the device until asked for (a no-op on CPU targets).
    for (Halide::Buffer<> &buf : b.outBufs)
      buf.copy_to_host();

    if (attnc::Status ws = writeOutputs(lk, b, shapes, outPaths, files); !ws.ok())
      return fail(ws.message());
    if (tileStats) {
      for (const attnc::TileVisitCount &c : attnc::countTileVisits(run))
        std::cout << "tiles " << attnc::describeTileVisits(c) << "\n";
      if (lk.onlineGroups.empty())
        std::cout << "tiles: none (no online softmax in " << lk.name << ")\n";
    }
    std::cerr << "schedule: " << applied << "\n";
    return 0;
  } catch (const attnc::CompileFailed &) {
    return 1;
  } catch (const Halide::Error &e) {
    std::string tidy = attnc::tidy_halide_message(e.what());
    if (tidy != e.what())
      return fail(kernelSym + ": " + tidy);
    return fail(std::string("Halide: ") + e.what());
  } catch (const std::exception &e) {
    return fail(e.what());
  }
}

} // namespace

int main(int argc, char **argv) {
  attnc::install_cleanup_handlers();
  attnc::tool::Usage usage;
  usage.options = {inputArgs,    outputArgs, targetStr,   schedule,      kernelName,
                   defines,      importDirs, sampleOrder, onlineSoftmax, onlineTile,
                   gatherChecks, tileStats,  reference};
  usage.epilogue =
      "Inputs must be little-endian, C-order arrays of the kernel's element types:\n"
      "float32, int32, float16 ('<f2'), bfloat16 (as ml_dtypes saves it, '<V2', or its\n"
      "raw bits, '<u2'). Every output is summarised; those named with --output are\n"
      "written.\n";
  if (std::optional<int> rc = cli.parse(argc, argv, usage))
    return *rc;

  const attnc::CompileOptions co = compileOptions();
  const Assignments ins = assignments(inputArgs), outs = assignments(outputArgs);
  if (co.path.empty())
    return cli.failWithUsage("no kernel file");

  attnc::Compilation comp(co, std::cerr);
  if (!comp.parse())
    return 1;
  OutputFiles files;
  if (attnc::Status st = protectFiles(co.path, *comp.frontEnd().module, ins, outs, &files);
      !st.ok())
    return fail(st.message());
  if (reference)
    return runReference(*comp.frontEnd().module, kernelName, ins, outs, files);
  return runCompiled(comp, ins, outs, files);
}
