// Registers attnc kernels as PyTorch operators: schema, CPU kernel and Meta (shape) kernel.
#include "attnc/torch_ops.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#include <torch/library.h>

#include <memory>
#include <mutex>
#include <set>
#include <sstream>

namespace attnc {
namespace {

std::optional<at::ScalarType> scalarType(DType d) {
  switch (d) {
  case DType::F32:
    return at::kFloat;
  case DType::I32:
    return at::kInt;
  case DType::BF16:
    return at::kBFloat16;
  case DType::F16:
    return at::kHalf;
  }
  return std::nullopt;
}

std::optional<DType> dtypeOf(at::ScalarType s) {
  for (const DTypeInfo &i : kDTypes)
    if (scalarType(i.dtype) == s)
      return i.dtype;
  return std::nullopt;
}

std::string argName(const char *name) {
  // Python keywords and the names PyTorch's schemas give a meaning (`self`, `out`).
  static const std::set<std::string> reserved = {
      "self",   "out",    "False",   "None",     "True",     "and",    "as",   "assert",
      "async",  "await",  "break",   "class",    "continue", "def",    "del",  "elif",
      "else",   "except", "finally", "for",      "from",     "global", "if",   "import",
      "in",     "is",     "lambda",  "nonlocal", "not",      "or",     "pass", "raise",
      "return", "try",    "while",   "with",     "yield"};
  std::string n = name;
  return reserved.count(n) ? n + "_" : n;
}

std::string kernelName(const KernelDesc &k) { return k.name ? k.name : "<unnamed>"; }

std::string describeTensor(const at::Tensor &t) {
  std::ostringstream os;
  os << "[";
  for (int64_t d = 0; d < t.dim(); ++d)
    os << (d ? ", " : "") << t.sym_size(d);
  os << "]";
  return os.str();
}

// The device, dtype and rank checks PyTorch can make before attnc's own (which need a
// TensorView, so a dtype attnc has no name for is reported here in PyTorch's spelling).
void checkTensor(const KernelDesc &k, const ParamDesc &p, const at::Tensor &t, bool meta) {
  // Built only for a message (this runs on every call).
  auto who = [&] { return kernelName(k) + ": input '" + p.name + "'"; };
  TORCH_CHECK_VALUE(t.defined(), who(), " is an undefined tensor");
  // The Meta kernel runs for meta tensors and for torch.compile's fake tensors (meta inside);
  // a meta tensor among CPU ones must not turn the call into a shape computation.
  if (meta) {
    TORCH_CHECK_VALUE(t.device().is_meta(), who(), " is on ", t.device(),
                      ", but the other inputs are meta tensors");
  } else {
    TORCH_CHECK_VALUE(t.device().is_cpu(), who(), " is on ", t.device(), ", but kernel '",
                      kernelName(k), "' was built for the CPU (target ",
                      k.target ? k.target : "host", ")");
  }
  std::optional<DType> d = dtypeOf(t.scalar_type());
  TORCH_CHECK_TYPE(d && *d == p.dtype, who(), " has dtype ", t.scalar_type(), ", expected ",
                   dtype_name(p.dtype), " (", *scalarType(p.dtype), ")");
  TORCH_CHECK_VALUE(t.dim() == p.rank, who(), " has rank ", t.dim(), " (shape ", describeTensor(t),
                    "), expected ", p.rank);
}

TensorView viewOf(const at::Tensor &t) {
  TensorView v;
  v.data = t.data_ptr();
  v.dtype = *dtypeOf(t.scalar_type());
  v.rank = static_cast<int>(t.dim());
  for (int d = 0; d < v.rank; ++d) {
    v.shape[d] = t.size(d);
    v.strides[d] = t.stride(d);
  }
  return v;
}

// The CPU kernel: inputs (contiguous ones as they are, others copied), outputs allocated from the
// descriptor's shapes, then attnc::call.
class CpuKernel final : public c10::OperatorKernel {
public:
  explicit CpuKernel(const KernelDesc &k) : k_(k) {}

  void operator()(const c10::OperatorHandle &, c10::DispatchKeySet, torch::jit::Stack *stack) {
    const int n = k_.num_inputs;
    std::vector<at::Tensor> inputs;
    std::vector<TensorView> views;
    inputs.reserve(n);
    for (int i = 0; i < n; ++i) {
      at::Tensor t = torch::jit::peek(*stack, i, n).toTensor();
      checkTensor(k_, k_.inputs[i], t, /*meta=*/false);
      inputs.push_back(t.is_contiguous() ? t : t.contiguous());
      views.push_back(viewOf(inputs.back()));
    }
    SizeMap sizes;
    Status st = bind_sizes(k_, views, &sizes);
    TORCH_CHECK_VALUE(st.ok(), st.message());
    std::vector<std::vector<int64_t>> shapes;
    st = output_shapes(k_, sizes, &shapes);
    TORCH_CHECK_VALUE(st.ok(), st.message());
    std::vector<at::Tensor> outputs;
    std::vector<TensorView> outViews;
    for (int o = 0; o < k_.num_outputs; ++o) {
      outputs.push_back(at::empty(
          shapes[o], at::TensorOptions().dtype(*scalarType(k_.outputs[o].dtype)).device(at::kCPU)));
      outViews.push_back(viewOf(outputs.back()));
    }
    // call() validates once more; only on failure is it asked whether the call itself was bad
    // (ValueError: 32-bit limits and the like) or the kernel failed (RuntimeError: a requirement
    // on input values, a read out of range). Validating twice cost 4 us a call (Zen 4).
    st = call(k_, views, outViews);
    if (!st.ok()) {
      Status v = validate_call(k_, views, outViews);
      TORCH_CHECK_VALUE(v.ok(), v.message());
      TORCH_CHECK(false, st.message());
    }
    torch::jit::drop(*stack, n);
    for (at::Tensor &t : outputs)
      torch::jit::push(*stack, std::move(t));
  }

private:
  const KernelDesc &k_;
};

// The Meta kernel: the outputs' shapes from the sizes the inputs bind, with PyTorch's symbolic
// sizes (torch.compile's dynamic shapes) kept symbolic. Sizes that are concrete are checked as the
// CPU kernel would; symbolic ones are checked by the real call.
class MetaKernel final : public c10::OperatorKernel {
public:
  explicit MetaKernel(const KernelDesc &k) : k_(k) {}

  void operator()(const c10::OperatorHandle &, c10::DispatchKeySet, torch::jit::Stack *stack) {
    const int n = k_.num_inputs;
    std::map<std::string, c10::SymInt> sizes;
    std::map<std::string, std::string> boundBy;
    for (int i = 0; i < n; ++i) {
      const ParamDesc &p = k_.inputs[i];
      at::Tensor t = torch::jit::peek(*stack, i, n).toTensor();
      checkTensor(k_, p, t, /*meta=*/true);
      for (int d = 0; d < p.rank; ++d) {
        Dim dim;
        TORCH_CHECK(Dim::parse(p.dims[d], &dim), kernelName(k_), ": input '", p.name,
                    "' has a malformed dimension '", p.dims[d], "'");
        const c10::SymInt &s = t.sym_size(d);
        const std::string where = "input '" + std::string(p.name) + "' dimension " +
                                  std::to_string(d) + " (" + p.dims[d] + ")";
        if (dim.literal()) {
          if (auto c = s.maybe_as_int())
            TORCH_CHECK_VALUE(*c == dim.literal_value(), kernelName(k_), ": ", where, " is ", *c,
                              ", expected ", dim.literal_value());
          continue;
        }
        const std::string &sym = dim.symbol_name();
        auto it = sizes.find(sym);
        if (it == sizes.end()) {
          sizes.emplace(sym, s);
          boundBy.emplace(sym, "'" + std::string(p.name) + "' dimension " + std::to_string(d));
        } else if (auto a = it->second.maybe_as_int()) {
          if (auto b = s.maybe_as_int())
            TORCH_CHECK_VALUE(*a == *b, kernelName(k_), ": ", where, " is ", *b, ", but ",
                              boundBy[sym], " set ", sym, " = ", *a); // the runtime's words
        }
      }
    }
    torch::jit::drop(*stack, n);
    for (int o = 0; o < k_.num_outputs; ++o) {
      const ParamDesc &p = k_.outputs[o];
      std::vector<c10::SymInt> shape;
      for (int d = 0; d < p.rank; ++d) {
        Dim dim;
        TORCH_CHECK(Dim::parse(p.dims[d], &dim), kernelName(k_), ": output '", p.name,
                    "' has a malformed dimension '", p.dims[d], "'");
        c10::SymInt v(1);
        for (const DimFactor &f : dim.factors) {
          if (f.literal()) {
            v = v * c10::SymInt(f.value);
            continue;
          }
          auto it = sizes.find(f.symbol);
          TORCH_CHECK_VALUE(it != sizes.end(), kernelName(k_), ": output '", p.name, "' dimension ",
                            d, " uses size ", f.symbol, ", which no input binds");
          v = v * it->second;
        }
        shape.push_back(v);
      }
      torch::jit::push(
          *stack, at::empty_symint(
                      shape, at::TensorOptions().dtype(*scalarType(p.dtype)).device(at::kMeta)));
    }
  }

private:
  const KernelDesc &k_;
};

std::string jsonString(const std::string &s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      o += '\\', o += c;
    else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      o += buf;
    } else
      o += c;
  }
  return o + "\"";
}

std::string paramsJson(const ParamDesc *ps, int n) {
  std::string o = "[";
  for (int i = 0; i < n; ++i) {
    const ParamDesc &p = ps[i];
    o += std::string(i ? ", " : "") + "{\"name\": " + jsonString(p.name) +
         ", \"arg\": " + jsonString(argName(p.name)) +
         ", \"dtype\": " + jsonString(dtype_name(p.dtype)) + ", \"dims\": [";
    for (int d = 0; d < p.rank; ++d)
      o += std::string(d ? ", " : "") + jsonString(p.dims[d]);
    o += "]}";
  }
  return o + "]";
}

struct ModuleState {
  std::mutex mu;
  std::vector<std::unique_ptr<torch::Library>> libraries;
  std::string errors;
  std::string kernels = "[]";
  std::vector<std::string> kernelJson;
};

ModuleState &state() {
  static ModuleState *s = new ModuleState; // never destroyed: PyTorch may outlive static dtors
  return *s;
}

} // namespace

std::string torch_schema(const KernelDesc &k) {
  std::string s = kernelName(k) + "(";
  for (int i = 0; i < k.num_inputs; ++i)
    s += std::string(i ? ", " : "") + "Tensor " + argName(k.inputs[i].name);
  s += ") -> ";
  if (k.num_outputs == 1)
    return s + "Tensor";
  s += "(";
  for (int o = 0; o < k.num_outputs; ++o)
    s += std::string(o ? ", " : "") + "Tensor";
  return s + ")";
}

Status register_torch_op(const KernelDesc &k) {
  if (k.name == nullptr || k.argv_fn == nullptr)
    return Status::Error("attnc: a kernel descriptor without a name or entry point");
  if (k.copy_to_host != nullptr)
    return Status::Error(kernelName(k) +
                         ": kernels built for a GPU target cannot be registered with PyTorch yet "
                         "(target " +
                         std::string(k.target ? k.target : "") + ")");
  ModuleState &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  try {
    auto lib = std::make_unique<torch::Library>(torch::Library::FRAGMENT, "attnc", std::nullopt,
                                                __FILE__, __LINE__);
    lib->def(torch_schema(k).c_str());
    lib->impl(k.name,
              torch::dispatch(c10::DispatchKey::CPU, torch::CppFunction::makeFromBoxedFunctor(
                                                         std::make_unique<CpuKernel>(k))));
    lib->impl(k.name,
              torch::dispatch(c10::DispatchKey::Meta, torch::CppFunction::makeFromBoxedFunctor(
                                                          std::make_unique<MetaKernel>(k))));
    // CUDA tensors reach the CPU kernel too, which refuses them in the runtime's words (without
    // it PyTorch reports a missing CUDA kernel); a CUDA build's own kernel is future work.
    lib->impl(k.name,
              torch::dispatch(c10::DispatchKey::CUDA, torch::CppFunction::makeFromBoxedFunctor(
                                                          std::make_unique<CpuKernel>(k))));
    // No derivatives yet: an output that needs a gradient gets PyTorch's "derivative for
    // attnc::<name> is not implemented" on backward (without this, PyTorch's fallback for custom
    // operators warns and treats the kernel as constant: silently wrong gradients).
    lib->impl(k.name, torch::dispatch(c10::DispatchKey::Autograd,
                                      torch::autograd::autogradNotImplementedFallback()));
    s.libraries.push_back(std::move(lib));
  } catch (const std::exception &e) {
    return Status::Error(kernelName(k) + ": registering torch.ops.attnc." + kernelName(k) +
                         " failed: " + e.what());
  }
  s.kernelJson.push_back("{\"name\": " + jsonString(k.name) +
                         ", \"target\": " + jsonString(k.target ? k.target : "") +
                         ", \"schedule\": " + jsonString(k.schedule ? k.schedule : "") +
                         ", \"schema\": " + jsonString(torch_schema(k)) +
                         ", \"inputs\": " + paramsJson(k.inputs, k.num_inputs) +
                         ", \"outputs\": " + paramsJson(k.outputs, k.num_outputs) + "}");
  s.kernels = "[";
  for (size_t i = 0; i < s.kernelJson.size(); ++i)
    s.kernels += (i ? ", " : "") + s.kernelJson[i];
  s.kernels += "]";
  return Status::Ok();
}

TorchRegistrar::TorchRegistrar(const KernelDesc *k) {
  Status st = k ? register_torch_op(*k) : Status::Error("attnc: null kernel descriptor");
  if (!st.ok()) {
    ModuleState &s = state();
    std::lock_guard<std::mutex> lock(s.mu);
    s.errors += st.message() + "\n";
  }
}

const char *torch_registration_errors() {
  ModuleState &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.errors.c_str();
}

const char *torch_kernels_json() {
  ModuleState &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.kernels.c_str();
}

} // namespace attnc
