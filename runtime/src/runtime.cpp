// Runtime implementation: descriptor checks, size binding, call validation and the Halide argv bridge.
#include "attnc/runtime.h"

#include "halide_hooks.h"

#include <HalideRuntime.h>
#include <dlfcn.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

namespace attnc {

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank && i < kMaxRank; ++i) {
    if (shape[i] == 0)
      return 0;
  }
  for (int i = 0; i < rank && i < kMaxRank; ++i) {
    // Saturate rather than overflow (UB) on nonsensical shapes; validation
    // rejects those separately.
    if (__builtin_mul_overflow(n, shape[i], &n))
      return std::numeric_limits<int64_t>::max();
  }
  return n;
}

TensorView TensorView::contiguous(void *data, DType dtype, const std::vector<int64_t> &shape) {
  if (shape.size() > static_cast<size_t>(kMaxRank)) {
    throw std::invalid_argument("attnc::TensorView: rank " + std::to_string(shape.size()) +
                                " exceeds kMaxRank " + std::to_string(kMaxRank));
  }
  TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.rank = static_cast<int>(shape.size());
  int64_t stride = 1;
  for (int i = v.rank - 1; i >= 0; --i) {
    v.shape[i] = shape[i];
    v.strides[i] = stride;
    // Zero-size dims would make every outer stride 0, which validate_call
    // would treat as broadcasting; keep strides meaningful instead. Saturates
    // like numel(): an empty tensor's other dims may multiply past int64
    // (validation rejects strides beyond Halide's 32-bit limit anyway).
    if (__builtin_mul_overflow(stride, std::max<int64_t>(shape[i], 1), &stride))
      stride = std::numeric_limits<int64_t>::max();
  }
  return v;
}

TensorView TensorView::f32(float *data, const std::vector<int64_t> &shape) {
  return contiguous(data, DType::F32, shape);
}

TensorView TensorView::i32(int32_t *data, const std::vector<int64_t> &shape) {
  return contiguous(data, DType::I32, shape);
}

// ---------------------------------------------------------------------------
// Registry

Registry &Registry::global() {
  // Function-local static so Registrars in other translation units can run
  // before or after this one without static-initialisation-order problems.
  static Registry *r = new Registry(); // never destroyed: registrars may outlive main's statics
  return *r;
}

namespace {
std::string_view target_of(const KernelDesc *d) {
  return d->target ? std::string_view(d->target) : std::string_view();
}
std::string_view name_of(const KernelDesc *d) {
  return d->name ? std::string_view(d->name) : std::string_view();
}
} // namespace

void Registry::add(const KernelDesc *d) {
  if (d == nullptr)
    return;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto &e : entries_) {
    if (name_of(e) == name_of(d) && target_of(e) == target_of(d)) {
      e = d;
      return;
    }
  }
  entries_.push_back(d);
}

const KernelDesc *Registry::find(std::string_view name, std::string_view target) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto *e : entries_) {
    if (name_of(e) == name && target_of(e) == target)
      return e;
  }
  return nullptr;
}

std::vector<const KernelDesc *> Registry::list() const {
  std::vector<const KernelDesc *> out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    out = entries_;
  }
  std::sort(out.begin(), out.end(), [](const KernelDesc *a, const KernelDesc *b) {
    if (name_of(a) != name_of(b))
      return name_of(a) < name_of(b);
    return target_of(a) < target_of(b);
  });
  return out;
}

Registrar::Registrar(const KernelDesc *d) { Registry::global().add(d); }

// ---------------------------------------------------------------------------
// Descriptor helpers

namespace {

const char *kname(const KernelDesc &k) { return k.name ? k.name : "<unnamed kernel>"; }

std::string pname(const ParamDesc &p) { return p.name ? p.name : "?"; }

std::string label(const char *kind, const ParamDesc &p) {
  return std::string(kind) + " '" + pname(p) + "'";
}

std::string dim_list(const ParamDesc &p) {
  if (p.rank == 0)
    return "scalar";
  std::string s;
  for (int i = 0; i < p.rank; ++i) {
    if (i)
      s += ", ";
    s += p.dims[i];
  }
  return s;
}

std::string name_list(const ParamDesc *ps, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) {
    if (i)
      s += ", ";
    s += pname(ps[i]);
  }
  return s;
}

Status check_params(const KernelDesc &k, const char *kind, const ParamDesc *ps, int n) {
  if (n < 0 || (n > 0 && ps == nullptr)) {
    return Status::Error(std::string(kname(k)) + ": malformed kernel descriptor: bad " + kind +
                         " list");
  }
  for (int i = 0; i < n; ++i) {
    const ParamDesc &p = ps[i];
    if (p.name == nullptr) {
      return Status::Error(std::string(kname(k)) + ": malformed kernel descriptor: " + kind + " " +
                           std::to_string(i) + " has no name");
    }
    if (p.rank < 0 || p.rank > kMaxRank || (p.rank > 0 && p.dims == nullptr)) {
      return Status::Error(std::string(kname(k)) + ": malformed kernel descriptor: " +
                           label(kind, p) + " has rank " + std::to_string(p.rank) +
                           " (must be 0.." + std::to_string(kMaxRank) + " with dims)");
    }
    if (!dtype_info(p.dtype)) {
      return Status::Error(std::string(kname(k)) + ": malformed kernel descriptor: " +
                           label(kind, p) + " has an unknown dtype");
    }
    for (int d = 0; d < p.rank; ++d) {
      Dim dim;
      if (!p.dims[d] || !Dim::parse(p.dims[d], &dim)) {
        return Status::Error(std::string(kname(k)) +
                             ": malformed kernel descriptor: " + label(kind, p) + " dimension " +
                             std::to_string(d) + " is '" + (p.dims[d] ? p.dims[d] : "<null>") +
                             "', expected a size symbol, a decimal integer or (outputs "
                             "only) a product of these such as 'M*D'");
      }
      // bind_sizes reads sizes off input dimensions, which a product cannot give.
      if (dim.product() && std::string(kind) == "input") {
        return Status::Error(std::string(kname(k)) +
                             ": malformed kernel descriptor: " + label(kind, p) + " dimension " +
                             std::to_string(d) + " is '" + p.dims[d] +
                             "', but input dimensions must be a size symbol or "
                             "a decimal integer (products are allowed in outputs only)");
      }
    }
  }
  return Status::Ok();
}

Status check_desc(const KernelDesc &k) {
  if (k.name == nullptr) {
    return Status::Error("attnc: malformed kernel descriptor: missing name");
  }
  Status s = check_params(k, "input", k.inputs, k.num_inputs);
  if (!s.ok())
    return s;
  return check_params(k, "output", k.outputs, k.num_outputs);
}

// " (M = 4, D = 8)": the bound values of a product's size factors, for its messages; each size
// once, literals left out (the dimension's spelling shows them); "" when there are none.
std::string bound_factors(const Dim &dim, const SizeMap &sizes) {
  std::string s;
  std::vector<std::string_view> seen;
  for (const DimFactor &f : dim.factors) {
    if (f.literal() || std::find(seen.begin(), seen.end(), f.symbol) != seen.end())
      continue;
    seen.push_back(f.symbol);
    auto it = sizes.find(f.symbol);
    if (it == sizes.end())
      continue;
    s += (s.empty() ? "" : ", ") + f.symbol + " = " + std::to_string(it->second);
  }
  return s.empty() ? s : " (" + s + ")";
}

Dim dim_of(const ParamDesc &p, int d) {
  Dim dim;
  Dim::parse(p.dims[d], &dim); // already validated by check_desc
  return dim;
}

Status count_error(const KernelDesc &k, const char *kind, const ParamDesc *ps, int expected,
                   size_t got) {
  std::string msg = std::string(kname(k)) + ": expected " + std::to_string(expected) + " " + kind +
                    (expected == 1 ? "" : "s");
  if (expected > 0)
    msg += " (" + name_list(ps, expected) + ")";
  msg += ", got " + std::to_string(got);
  return Status::Error(msg);
}

// Checks every property of one view that does not depend on other tensors.
// Shape values are checked by the caller because inputs bind them and outputs
// are compared against them.
Status check_view_basics(const KernelDesc &k, const char *kind, const ParamDesc &p,
                         const TensorView &v) {
  // Built only for a message: the checks run on every call, where the strings cost microseconds.
  auto who = [&] { return std::string(kname(k)) + ": " + label(kind, p); };
  if (v.rank < 0 || v.rank > kMaxRank) {
    return Status::Error(who() + " has invalid rank " + std::to_string(v.rank) + " (must be 0.." +
                         std::to_string(kMaxRank) + ")");
  }
  if (v.dtype != p.dtype) {
    return Status::Error(who() + " has dtype " + dtype_name(v.dtype) + ", expected " +
                         dtype_name(p.dtype));
  }
  if (v.rank != p.rank) {
    return Status::Error(who() + " has rank " + std::to_string(v.rank) + ", expected " +
                         std::to_string(p.rank) + " (" + dim_list(p) + ")");
  }
  for (int d = 0; d < v.rank; ++d) {
    if (v.shape[d] < 0) {
      Dim dim = dim_of(p, d);
      std::string sym = dim.literal() ? "" : " (" + std::string(p.dims[d]) + ")";
      return Status::Error(who() + " dimension " + std::to_string(d) + sym + " is " +
                           std::to_string(v.shape[d]) + "; sizes must be non-negative");
    }
  }
  // An empty tensor is never dereferenced, and std::vector<T>{}.data() is
  // commonly null, so only non-empty tensors must have storage. call()
  // substitutes a dummy pointer because Halide treats null host pointers as
  // bounds queries.
  if (v.data == nullptr && v.numel() != 0) {
    return Status::Error(who() + " has a null data pointer");
  }
  return Status::Ok();
}

// Halide's halide_dimension_t stores min/extent/stride as int32, and a kernel addresses at most
// 2^31 - 1 elements of a buffer.
Status check_halide_limits(const KernelDesc &k, const char *kind, const ParamDesc &p,
                           const TensorView &v) {
  constexpr int64_t lo = std::numeric_limits<int32_t>::min();
  constexpr int64_t hi = std::numeric_limits<int32_t>::max();
  for (int d = 0; d < v.rank; ++d) {
    if (v.shape[d] > hi) {
      return Status::Error(std::string(kname(k)) + ": " + label(kind, p) + " dimension " +
                           std::to_string(d) + " has extent " + std::to_string(v.shape[d]) +
                           ", which exceeds Halide's 32-bit limit");
    }
    if (v.strides[d] < lo || v.strides[d] > hi) {
      return Status::Error(std::string(kname(k)) + ": " + label(kind, p) + " dimension " +
                           std::to_string(d) + " has stride " + std::to_string(v.strides[d]) +
                           ", which exceeds Halide's 32-bit limit");
    }
  }
  if (v.numel() > hi) {
    return Status::Error(std::string(kname(k)) + ": " + label(kind, p) + " has " +
                         std::to_string(v.numel()) +
                         " elements, more than a kernel can address (2147483647, Halide's "
                         "32-bit indexing)");
  }
  return Status::Ok();
}

// 128-bit so span arithmetic is exact for any int32-limited view (8 dims of
// 2^31 * 2^31 overflow int64); __extension__ keeps -Wpedantic quiet.
__extension__ typedef __int128 i128;

// Byte range [begin, end) that a view can touch; empty for zero-size views.
struct Span {
  bool empty = true;
  i128 begin = 0, end = 0;
};

Span span_of(const TensorView &v) {
  Span s;
  if (v.numel() == 0)
    return s;
  i128 lo = 0, hi = 0;
  for (int d = 0; d < v.rank; ++d) {
    i128 reach = static_cast<i128>(v.shape[d] - 1) * v.strides[d];
    if (reach < 0)
      lo += reach;
    else
      hi += reach;
  }
  const i128 es = static_cast<i128>(dtype_size(v.dtype));
  const i128 base = static_cast<i128>(reinterpret_cast<uintptr_t>(v.data));
  s.empty = false;
  s.begin = base + lo * es;
  s.end = base + (hi + 1) * es;
  return s;
}

bool overlaps(const Span &a, const Span &b) {
  return !a.empty && !b.empty && a.begin < b.end && b.begin < a.end;
}

// Sufficient condition for distinct indices to map to distinct elements:
// sorted by |stride|, each stride must step past everything the smaller
// dimensions can reach. Exotic interleaved layouts that are technically
// injective are rejected too, which is the safe direction for outputs.
bool self_aliases(const TensorView &v) {
  std::vector<std::pair<int64_t, int64_t>> dims; // (|stride|, extent)
  for (int d = 0; d < v.rank; ++d) {
    if (v.shape[d] > 1)
      dims.emplace_back(std::llabs(v.strides[d]), v.shape[d]);
  }
  std::sort(dims.begin(), dims.end());
  i128 reach = 0;
  for (const auto &[stride, extent] : dims) {
    if (stride <= reach)
      return true;
    reach += static_cast<i128>(stride) * (extent - 1);
  }
  return false;
}

} // namespace

// ---------------------------------------------------------------------------
// Validation

Status bind_sizes(const KernelDesc &k, const std::vector<TensorView> &inputs, SizeMap *sizes) {
  Status s = check_desc(k);
  if (!s.ok())
    return s;
  if (inputs.size() != static_cast<size_t>(k.num_inputs)) {
    return count_error(k, "input", k.inputs, k.num_inputs, inputs.size());
  }

  struct Binding {
    int64_t value;
    int input;
    int dim;
  };
  std::map<std::string, Binding, std::less<>> bound;

  for (int i = 0; i < k.num_inputs; ++i) {
    const ParamDesc &p = k.inputs[i];
    const TensorView &v = inputs[i];
    s = check_view_basics(k, "input", p, v);
    if (!s.ok())
      return s;
    for (int d = 0; d < p.rank; ++d) {
      const Dim dim = dim_of(p, d);
      auto where = [&] {
        return std::string(kname(k)) + ": input '" + pname(p) + "' dimension " + std::to_string(d);
      };
      if (dim.literal()) {
        if (v.shape[d] != dim.literal_value()) {
          return Status::Error(where() + " is " + std::to_string(v.shape[d]) + ", expected " +
                               std::to_string(dim.literal_value()));
        }
        continue;
      }
      auto it = bound.find(dim.symbol_name());
      if (it == bound.end()) {
        bound.emplace(dim.symbol_name(), Binding{v.shape[d], i, d});
      } else if (it->second.value != v.shape[d]) {
        const Binding &b = it->second;
        return Status::Error(where() + " (" + dim.symbol_name() + ") is " +
                             std::to_string(v.shape[d]) + ", but '" + pname(k.inputs[b.input]) +
                             "' dimension " + std::to_string(b.dim) + " set " + dim.symbol_name() +
                             " = " + std::to_string(b.value));
      }
    }
  }
  if (sizes) {
    sizes->clear();
    for (const auto &[name, b] : bound)
      (*sizes)[name] = b.value;
  }
  return Status::Ok();
}

Status output_shapes(const KernelDesc &k, const SizeMap &sizes,
                     std::vector<std::vector<int64_t>> *shapes) {
  Status s = check_desc(k);
  if (!s.ok())
    return s;
  std::vector<std::vector<int64_t>> out(static_cast<size_t>(k.num_outputs));
  for (int o = 0; o < k.num_outputs; ++o) {
    const ParamDesc &p = k.outputs[o];
    for (int d = 0; d < p.rank; ++d) {
      const Dim dim = dim_of(p, d);
      auto where = [&] {
        return std::string(kname(k)) + ": output '" + pname(p) + "' dimension " + std::to_string(d);
      };
      int64_t extent = 1;
      std::string unbound;
      // Sizes come from int64 shapes, so a product of them can overflow.
      switch (dim.evaluate(sizes, &extent, &unbound)) {
      case Dim::EvalError::None:
        break;
      case Dim::EvalError::Unbound:
        return Status::Error(where() + " uses size '" + unbound + "', which no input binds");
      case Dim::EvalError::Overflow:
        return Status::Error(where() + " (" + std::string(p.dims[d]) + ") overflows 64 bits" +
                             bound_factors(dim, sizes));
      }
      out[o].push_back(extent);
    }
  }
  if (shapes)
    *shapes = std::move(out);
  return Status::Ok();
}

Status validate_call(const KernelDesc &k, const std::vector<TensorView> &inputs,
                     const std::vector<TensorView> &outputs, SizeMap *sizes_out) {
  SizeMap sizes;
  Status s = bind_sizes(k, inputs, &sizes);
  if (!s.ok())
    return s;
  std::vector<std::vector<int64_t>> expected;
  s = output_shapes(k, sizes, &expected);
  if (!s.ok())
    return s;
  for (int i = 0; i < k.num_inputs; ++i) {
    s = check_halide_limits(k, "input", k.inputs[i], inputs[i]);
    if (!s.ok())
      return s;
  }
  if (outputs.size() != static_cast<size_t>(k.num_outputs)) {
    return count_error(k, "output", k.outputs, k.num_outputs, outputs.size());
  }

  for (int o = 0; o < k.num_outputs; ++o) {
    const ParamDesc &p = k.outputs[o];
    const TensorView &v = outputs[o];
    s = check_view_basics(k, "output", p, v);
    if (!s.ok())
      return s;
    auto who = [&] { return std::string(kname(k)) + ": output '" + pname(p) + "'"; };
    for (int d = 0; d < p.rank; ++d) {
      if (v.shape[d] == expected[o][d])
        continue;
      const Dim dim = dim_of(p, d);
      const std::string at = who() + " dimension " + std::to_string(d);
      if (dim.product()) {
        return Status::Error(at + " (" + std::string(p.dims[d]) + ") is " +
                             std::to_string(v.shape[d]) + ", but " + std::string(p.dims[d]) +
                             " = " + std::to_string(expected[o][d]) + bound_factors(dim, sizes));
      }
      std::string sym = dim.literal() ? "" : " (" + std::string(p.dims[d]) + ")";
      return Status::Error(at + sym + " is " + std::to_string(v.shape[d]) + ", expected " +
                           std::to_string(expected[o][d]));
    }
    // Before the alias check, which relies on strides being int32-sized.
    s = check_halide_limits(k, "output", p, v);
    if (!s.ok())
      return s;
    // Extent-1 dimensions never step, so their stride is irrelevant.
    for (int d = 0; d < p.rank; ++d) {
      if (v.strides[d] == 0 && v.shape[d] > 1) {
        return Status::Error(who() + " dimension " + std::to_string(d) +
                             " has stride 0; outputs cannot be broadcast");
      }
    }
    if (v.numel() > 0 && self_aliases(v)) {
      return Status::Error(who() + " has strides that make distinct elements share memory; outputs "
                                   "must not alias themselves");
    }
  }

  // Halide kernels read inputs while writing outputs, possibly tiled and in
  // parallel, so any shared byte is a potential wrong result. Ranges are
  // compared conservatively (bounding byte intervals).
  std::vector<Span> in_spans, out_spans;
  for (const auto &v : inputs)
    in_spans.push_back(span_of(v));
  for (const auto &v : outputs)
    out_spans.push_back(span_of(v));
  for (int o = 0; o < k.num_outputs; ++o) {
    for (int i = 0; i < k.num_inputs; ++i) {
      if (overlaps(out_spans[o], in_spans[i])) {
        return Status::Error(std::string(kname(k)) + ": output '" + pname(k.outputs[o]) +
                             "' overlaps input '" + pname(k.inputs[i]) +
                             "' in memory; outputs must not alias inputs");
      }
    }
    for (int o2 = 0; o2 < o; ++o2) {
      if (overlaps(out_spans[o], out_spans[o2])) {
        return Status::Error(std::string(kname(k)) + ": output '" + pname(k.outputs[o]) +
                             "' overlaps output '" + pname(k.outputs[o2]) +
                             "' in memory; outputs must not alias each other");
      }
    }
  }

  if (sizes_out)
    *sizes_out = std::move(sizes);
  return Status::Ok();
}

// ---------------------------------------------------------------------------
// Invocation

std::string describe_halide_error(int code) {
  struct Entry {
    int code;
    const char *name;
    const char *what;
  };
  static const Entry kTable[] = {
      {halide_error_code_success, "success", "no error"},
      {halide_error_code_generic_error, "generic_error",
       "uncategorized error; see the message passed to halide_error"},
      {halide_error_code_explicit_bounds_too_small, "explicit_bounds_too_small",
       "an explicit Func::bound is smaller than the region the pipeline uses"},
      {halide_error_code_bad_type, "bad_type",
       "a buffer's element type does not match the kernel parameter's type"},
      {halide_error_code_access_out_of_bounds, "access_out_of_bounds",
       "the pipeline would access memory outside a buffer passed in"},
      {halide_error_code_buffer_allocation_too_large, "buffer_allocation_too_large",
       "a buffer spans more than 2 GB of memory (compile with the large_buffers feature)"},
      {halide_error_code_buffer_extents_too_large, "buffer_extents_too_large",
       "a buffer's extents multiply to more than 2^31-1 elements"},
      {halide_error_code_constraints_make_required_region_smaller,
       "constraints_make_required_region_smaller",
       "buffer constraints shrink a buffer below the region the pipeline accesses"},
      {halide_error_code_constraint_violated, "constraint_violated",
       "a buffer's size or stride does not meet a constraint baked into the kernel (e.g. a "
       "required dense innermost stride or fixed extent)"},
      {halide_error_code_param_too_small, "param_too_small",
       "a scalar parameter is below its declared minimum"},
      {halide_error_code_param_too_large, "param_too_large",
       "a scalar parameter is above its declared maximum"},
      {halide_error_code_out_of_memory, "out_of_memory", "halide_malloc returned NULL"},
      {halide_error_code_buffer_argument_is_null, "buffer_argument_is_null",
       "a halide_buffer_t argument was NULL"},
      {halide_error_code_debug_to_file_failed, "debug_to_file_failed",
       "debug_to_file could not open or write its file"},
      {halide_error_code_copy_to_host_failed, "copy_to_host_failed",
       "copying from device to host failed"},
      {halide_error_code_copy_to_device_failed, "copy_to_device_failed",
       "copying from host to device failed"},
      {halide_error_code_device_malloc_failed, "device_malloc_failed",
       "allocating device memory failed"},
      {halide_error_code_device_sync_failed, "device_sync_failed",
       "synchronizing with the device failed"},
      {halide_error_code_device_free_failed, "device_free_failed",
       "freeing a device allocation failed"},
      {halide_error_code_no_device_interface, "no_device_interface",
       "a buffer has a device handle but no device interface"},
      {halide_error_code_unimplemented, "unimplemented",
       "this part of the Halide runtime is not implemented on this platform"},
      {halide_error_code_symbol_not_found, "symbol_not_found",
       "a runtime symbol (e.g. a GPU driver function) could not be loaded"},
      {halide_error_code_internal_error, "internal_error", "a bug in the Halide compiler"},
      {halide_error_code_device_run_failed, "device_run_failed",
       "launching a device kernel failed"},
      {halide_error_code_unaligned_host_ptr, "unaligned_host_ptr",
       "a host pointer violates the alignment the kernel was compiled to assume"},
      {halide_error_code_bad_fold, "bad_fold",
       "fold_storage used on a dimension that is not accessed monotonically"},
      {halide_error_code_fold_factor_too_small, "fold_factor_too_small",
       "fold_storage factor is too small for the values the consumer needs"},
      {halide_error_code_requirement_failed, "requirement_failed",
       "a require() expression in the kernel was not satisfied"},
      {halide_error_code_buffer_extents_negative, "buffer_extents_negative",
       "a buffer has a negative extent"},
      {halide_error_code_gpu_device_error, "gpu_device_error", "a GPU backend API call failed"},
      {halide_error_code_trace_failed, "trace_failed", "recording trace packets failed"},
      {halide_error_code_specialize_fail, "specialize_fail",
       "a specialize_fail() schedule branch was taken at run time"},
      {halide_error_code_device_wrap_native_failed, "device_wrap_native_failed",
       "wrapping a native device handle failed"},
      {halide_error_code_device_detach_native_failed, "device_detach_native_failed",
       "detaching a native device handle failed"},
      {halide_error_code_host_is_null, "host_is_null",
       "a buffer has a null host pointer but the pipeline uses it on the host"},
      {halide_error_code_bad_extern_fold, "bad_extern_fold",
       "a folded buffer passed to an extern stage wraps around the fold"},
      {halide_error_code_device_interface_no_device, "device_interface_no_device",
       "a buffer has a device interface but no device handle"},
      {halide_error_code_host_and_device_dirty, "host_and_device_dirty",
       "a buffer has both host and device dirty bits set"},
      {halide_error_code_buffer_is_null, "buffer_is_null",
       "a NULL halide_buffer_t was passed to a runtime routine"},
      {halide_error_code_device_buffer_copy_failed, "device_buffer_copy_failed",
       "copying between buffers failed"},
      {halide_error_code_device_crop_unsupported, "device_crop_unsupported",
       "the device interface cannot crop or slice a device buffer"},
      {halide_error_code_device_crop_failed, "device_crop_failed",
       "cropping or slicing a buffer failed"},
      {halide_error_code_incompatible_device_interface, "incompatible_device_interface",
       "a buffer is already allocated on a different device interface"},
      {halide_error_code_bad_dimensions, "bad_dimensions",
       "a buffer's dimension count does not match the kernel parameter's"},
      {halide_error_code_device_dirty_with_no_device_support, "device_dirty_with_no_device_support",
       "a device-dirty buffer was passed to a kernel compiled without device support"},
      {halide_error_code_storage_bound_too_small, "storage_bound_too_small",
       "an explicit storage bound is too small for the values produced"},
      {halide_error_code_split_factor_not_positive, "split_factor_not_positive",
       "a loop split factor was zero or negative at run time"},
      {halide_error_code_vscale_invalid, "vscale_invalid",
       "the CPU's scalable-vector length differs from the one compiled for"},
      {halide_error_code_cannot_profile_pipeline, "cannot_profile_pipeline",
       "profiling the pipeline invocation failed"},
  };
  for (const auto &e : kTable) {
    if (e.code == code)
      return std::string("halide_error_code_") + e.name + ": " + e.what;
  }
  return "unknown Halide error";
}

uint64_t memory_limit_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  uint64_t limit =
      pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
  struct rlimit rl;
  if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
      (limit == 0 || rl.rlim_cur < limit))
    limit = static_cast<uint64_t>(rl.rlim_cur);
  return limit;
}

Status check_memory(const std::string &what, uint64_t bytes) {
  const uint64_t limit = memory_limit_bytes();
  if (limit == 0 || bytes <= limit)
    return Status::Ok();
  auto gib = [](uint64_t b) {
    char s[64];
    std::snprintf(s, sizeof s, "%.1f GiB", static_cast<double>(b) / (1024.0 * 1024.0 * 1024.0));
    return std::string(s);
  };
  return Status::Error(what + " needs " + std::to_string(bytes) + " bytes (" + gib(bytes) +
                       "), more than this machine's memory (" + gib(limit) + ")");
}

Status check_tensor_size(const std::string &what, DType dtype, const std::vector<int64_t> &shape) {
  uint64_t n = 1;
  bool over = false;
  for (int64_t d : shape) {
    if (d <= 0)
      return Status::Ok(); // empty: nothing to allocate or address
    over |= __builtin_mul_overflow(n, static_cast<uint64_t>(d), &n);
  }
  std::string dims;
  for (size_t i = 0; i < shape.size(); ++i)
    dims += (i ? ", " : "") + std::to_string(shape[i]);
  if (over || n > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
    return Status::Error(
        what + " [" + dims + "] has " + (over ? std::string("more than 2^64") : std::to_string(n)) +
        " elements, more than a kernel can address (2147483647, Halide's 32-bit indexing)");
  }
  return check_memory(what + " [" + dims + "]", n * dtype_size(dtype));
}

bool cuda_device_available(std::string *why) {
  static const std::pair<bool, std::string> answer = []() -> std::pair<bool, std::string> {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
      lib = dlopen("libcuda.so", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
      return {false, "no CUDA driver (libcuda.so.1 not found)"};
    using InitFn = int (*)(unsigned);
    using CountFn = int (*)(int *);
    auto init = reinterpret_cast<InitFn>(dlsym(lib, "cuInit"));
    auto count = reinterpret_cast<CountFn>(dlsym(lib, "cuDeviceGetCount"));
    if (!init || !count)
      return {false, "the CUDA driver library lacks cuInit/cuDeviceGetCount"};
    int rc = init(0);
    if (rc != 0)
      return {false, "cuInit failed with CUDA error " + std::to_string(rc) +
                         " (no usable device or driver)"};
    int n = 0;
    rc = count(&n);
    if (rc != 0)
      return {false, "cuDeviceGetCount failed with CUDA error " + std::to_string(rc)};
    if (n < 1)
      return {false, "the CUDA driver reports no device"};
    return {true, std::to_string(n) + " CUDA device(s)"};
  }();
  if (why)
    *why = answer.second;
  return answer.first;
}

std::string tidy_halide_message(const std::string &msg) {
  static const std::string kMarker = "[attnc] ";
  size_t p = msg.find(kMarker);
  if (p == std::string::npos || msg.find("Requirement Failed") == std::string::npos)
    return msg;
  return msg.substr(p + kMarker.size());
}

namespace {

// A tensor of a kernel named by Halide (a buffer of that name): "input 'k'" and its descriptor.
struct NamedTensor {
  const char *kind = nullptr;
  const ParamDesc *p = nullptr;
};

NamedTensor find_tensor(const KernelDesc &k, const std::string &name) {
  for (int i = 0; i < k.num_inputs && k.inputs; ++i)
    if (k.inputs[i].name && name == k.inputs[i].name)
      return {"input", &k.inputs[i]};
  for (int i = 0; i < k.num_outputs && k.outputs; ++i) {
    if (!k.outputs[i].name)
      continue;
    // A bf16/f16 output's buffer is named after the Func that rounds into it, `o__bf16`.
    const std::string o = k.outputs[i].name;
    DType stored;
    if (name == o || (name.size() > o.size() + 2 && name.compare(0, o.size() + 2, o + "__") == 0 &&
                      parse_dtype(name.substr(o.size() + 2), &stored)))
      return {"output", &k.outputs[i]};
  }
  return {};
}

// "input 'k' dimension 2 (Nk)" for Halide's dimension `hdim` of tensor `t`: Halide counts from
// the innermost dimension, the DSL (and C order) from the outermost. Empty if out of range.
std::string dim_label(const NamedTensor &t, long hdim) {
  if (!t.p || hdim < 0 || hdim >= t.p->rank || !t.p->dims)
    return "";
  const int d = t.p->rank - 1 - static_cast<int>(hdim);
  const char *sym = t.p->dims[d];
  const bool literal = sym && std::isdigit(static_cast<unsigned char>(sym[0]));
  return std::string(t.kind) + " '" + t.p->name + "' dimension " + std::to_string(d) +
         (literal || !sym ? std::string() : " (" + std::string(sym) + ")");
}

// The text between `before` and `after` in `s` from `pos` on (pos moves past it); false if absent.
bool between(const std::string &s, size_t *pos, const std::string &before, const std::string &after,
             std::string *out) {
  size_t a = s.find(before, *pos);
  if (a == std::string::npos)
    return false;
  a += before.size();
  size_t b = after.empty() ? s.size() : s.find(after, a);
  if (b == std::string::npos)
    return false;
  *out = s.substr(a, b - a);
  *pos = b + after.size();
  return true;
}

bool to_long(const std::string &s, long *v) {
  char *end = nullptr;
  *v = std::strtol(s.c_str(), &end, 10);
  return !s.empty() && end && *end == '\0';
}

// "k.stride.0" (a buffer's field in a constraint) in the DSL's terms.
std::string field_label(const KernelDesc &k, const std::string &var, const char **field) {
  size_t b = var.rfind('.'), a = b == std::string::npos ? b : var.rfind('.', b - 1);
  long hdim = 0;
  if (a == std::string::npos || !to_long(var.substr(b + 1), &hdim))
    return "";
  std::string f = var.substr(a + 1, b - a - 1);
  *field = f == "stride" ? "stride" : f == "extent" ? "extent" : f == "min" ? "min" : nullptr;
  if (!*field)
    return "";
  return dim_label(find_tensor(k, var.substr(0, a)), hdim);
}

std::string explain(const KernelDesc &k, std::string m) {
  // JIT errors arrive as "Error: ..." (or "Error:\n..."); AOT ones as they are.
  if (m.rfind("Error:", 0) == 0)
    m = m.substr(6);
  while (!m.empty() && (m.front() == ' ' || m.front() == '\n'))
    m.erase(m.begin());
  while (!m.empty() && (m.back() == '\n' || m.back() == ' '))
    m.pop_back();
  size_t pos = 0;
  std::string name, at, limit, dim;
  long hdim = 0;
  // Bounds: "Input buffer k is accessed at -32, which is before the min (0) in dimension 1".
  for (const char *role : {"Input buffer ", "Output buffer "}) {
    pos = 0;
    if (m.rfind(role, 0) == 0 && between(m, &pos, role, " is accessed at ", &name) &&
        between(m, &pos, "", ", which is ", &at)) {
      const bool below = m.compare(pos, 14, "before the min") == 0;
      if (!between(m, &pos, "(", ")", &limit) || !between(m, &pos, " in dimension ", "", &dim) ||
          !to_long(dim, &hdim))
        break;
      std::string where = dim_label(find_tensor(k, name), hdim);
      if (where.empty())
        break;
      const bool input = role[0] == 'I';
      return where + " is " + (input ? "read" : "written") + " at " + at + ", " +
             (below ? "before its first index " : "beyond its last index ") + limit +
             (input ? " (a subscript leaves the tensor)" : "");
    }
  }
  // Gathers (HalideGen): "Requirement Failed: (...) input q is read at 7 in dimension 0 of extent 5",
  // with the DSL's dimension.
  // (Halide prints the condition and the value before the message.)
  size_t read = m.rfind(" is read at ");
  pos = read == std::string::npos ? 0 : m.rfind(" input ", read);
  if (m.rfind("Requirement Failed: ", 0) == 0 && m.find("[attnc] ") == std::string::npos &&
      read != std::string::npos && pos != std::string::npos &&
      between(m, &pos, " input ", " is read at ", &name) &&
      between(m, &pos, "", " in dimension ", &at) && between(m, &pos, "", " of extent ", &dim) &&
      to_long(dim, &hdim)) {
    NamedTensor t = find_tensor(k, name);
    std::string where =
        t.p && hdim >= 0 && hdim < t.p->rank ? dim_label(t, t.p->rank - 1 - hdim) : "";
    if (!where.empty())
      return where + " is read at " + at + ", outside its extent " + m.substr(pos) +
             " (an index read from a tensor is out of range)";
  }
  // Requirements of the kernel: their own message.
  std::string tidy = tidy_halide_message(m);
  if (tidy != m)
    return tidy;
  if (m.rfind("Requirement Failed: ", 0) == 0) {
    size_t marker = m.find("[attnc] ");
    if (marker != std::string::npos)
      return m.substr(marker + 8);
  }
  // "Constraint violated: k.stride.0 (2) == 1 (1)".
  pos = 0;
  std::string var, val, want, wantVal;
  if (between(m, &pos, "Constraint violated: ", " (", &var) &&
      between(m, &pos, "", ") == ", &val) && between(m, &pos, "", " (", &want) &&
      between(m, &pos, "", ")", &wantVal)) {
    const char *field = nullptr;
    std::string where = field_label(k, var, &field);
    if (!where.empty()) {
      const char *other = nullptr;
      std::string of = field_label(k, want, &other);
      std::string need =
          of.empty()
              ? wantVal
              : wantVal + " (" + of +
                    (other && std::string(other) != "extent" ? std::string(" ") + other : "") + ")";
      if (std::string(field) == "extent")
        return where + " is " + val + ", but must be " + need;
      if (std::string(field) == "stride")
        return where + " has stride " + val + ", but the kernel needs stride " + need;
      return where + " starts at " + val + ", but must start at " + need;
    }
  }
  // "x requires a buffer of exactly 4 dimensions, but the buffer passed in has 2 dimensions".
  pos = 0;
  if (between(m, &pos, "", " requires a buffer of exactly ", &name) &&
      between(m, &pos, "", " dimensions", &want) && between(m, &pos, "has ", " dimensions", &val)) {
    for (const char *prefix : {"Input buffer ", "Output buffer "})
      if (name.rfind(prefix, 0) == 0)
        name = name.substr(std::strlen(prefix));
    NamedTensor t = find_tensor(k, name);
    if (t.p)
      return std::string(t.kind) + " '" + name + "' has rank " + val +
             ", but the kernel takes rank " + want;
  }
  // "The extents for buffer k dimension 1 is negative (-3)".
  pos = 0;
  if (between(m, &pos, "The extents for buffer ", " dimension ", &name) &&
      between(m, &pos, "", " is negative (", &dim) && between(m, &pos, "", ")", &val) &&
      to_long(dim, &hdim)) {
    std::string where = dim_label(find_tensor(k, name), hdim);
    if (!where.empty())
      return where + " is negative (" + val + ")";
  }
  // Sizes beyond Halide's 32-bit indexing: "Product of extents for buffer q is 4294967296, which
  // exceeds the maximum size of 2147483647" (or "... is too large (N vs M)"), and "Total
  // allocation for buffer s is N, which exceeds ..." for a tensor or a definition's buffer.
  for (const char *what : {"Product of extents for buffer ", "Total allocation for buffer "}) {
    pos = 0;
    if (!between(m, &pos, what, " is ", &name))
      continue;
    std::string rest = m.substr(pos);
    NamedTensor t = find_tensor(k, name);
    // Halide names a definition's buffers after its Funcs: `s`, `p__exp`, `o__state.0`.
    std::string def = name.substr(0, std::min(name.find("__"), name.find('.')));
    std::string who = t.p ? std::string(t.kind) + " '" + name + "'" : "definition '" + def + "'";
    const bool elements = what[0] == 'P';
    return who + (elements ? " has more elements" : " needs a larger buffer") +
           " than a kernel can address with 32-bit indices (" + rest + ")";
  }
  if (m.rfind("Out of memory", 0) == 0)
    return "out of memory: a buffer of the kernel could not be allocated";
  return "";
}

} // namespace

std::string explain_halide_error(const KernelDesc &k, const std::string &msg) {
  return explain(k, msg);
}

namespace {
halide_type_t halide_type_of(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return halide_type_t(halide_type_float, 32, 1);
  case DType::I32:
    return halide_type_t(halide_type_int, 32, 1);
  case DType::BF16:
    return halide_type_t(halide_type_bfloat, 16, 1);
  case DType::F16:
    return halide_type_t(halide_type_float, 16, 1);
  }
  return halide_type_t();
}

// Backing for empty tensors whose data pointer is null: Halide interprets a
// buffer with host == nullptr and device == 0 as a bounds query and would
// silently skip the computation. Nothing is ever read or written through it.
alignas(128) unsigned char g_empty_storage[128];

void fill_buffer(const TensorView &v, halide_buffer_t *buf, halide_dimension_t *dims) {
  for (int d = 0; d < v.rank; ++d) {
    const int c = v.rank - 1 - d; // Halide dim 0 is the innermost (last C) dimension
    dims[d].min = 0;
    dims[d].extent = static_cast<int32_t>(v.shape[c]);
    dims[d].stride = static_cast<int32_t>(v.strides[c]);
    dims[d].flags = 0;
  }
  buf->device = 0;
  buf->device_interface = nullptr;
  buf->host = static_cast<uint8_t *>(v.data ? v.data : g_empty_storage);
  buf->flags = 0;
  buf->type = halide_type_of(v.dtype);
  buf->dimensions = v.rank;
  buf->dim = dims;
  buf->padding = nullptr;
}
} // namespace

bool request_tile_state() {
  // (The answer is the same for every thread: the permission is the process's.)
  static const bool granted = [] {
#if defined(__linux__) && defined(__x86_64__)
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
    return false;
#endif
  }();
  return granted;
}

Status call(const KernelDesc &k, const std::vector<TensorView> &inputs,
            const std::vector<TensorView> &outputs) {
  request_tile_state();
  Status s = validate_call(k, inputs, outputs);
  if (!s.ok())
    return s;
  if (k.argv_fn == nullptr) {
    return Status::Error(std::string(kname(k)) + ": kernel descriptor has no entry point");
  }

  const size_t n = inputs.size() + outputs.size();
  std::vector<halide_buffer_t> bufs(n);
  std::vector<std::array<halide_dimension_t, kMaxRank>> dims(n);
  std::vector<void *> args(n);
  for (size_t i = 0; i < n; ++i) {
    const TensorView &v = i < inputs.size() ? inputs[i] : outputs[i - inputs.size()];
    fill_buffer(v, &bufs[i], dims[i].data());
    args[i] = &bufs[i];
  }

  detail::clear_halide_error();
  // A GPU kernel gets host memory: marking the inputs host-dirty makes Halide upload them.
  const bool gpu = k.copy_to_host != nullptr && k.device_free != nullptr;
  std::string why;
  if (gpu && !cuda_device_available(&why))
    return Status::Error(std::string(kname(k)) + ": no CUDA device for target " +
                         (k.target ? k.target : "?") + ": " + why);
  if (gpu)
    for (size_t i = 0; i < inputs.size(); ++i)
      bufs[i].flags |= halide_buffer_flag_host_dirty;
  int rc = k.argv_fn(args.data());
  if (gpu) {
    // Results come back to the caller's memory, and nothing stays allocated on the device:
    // the halide_buffer_t structs live only for this call.
    for (size_t i = inputs.size(); rc == 0 && i < n; ++i)
      if (bufs[i].flags & halide_buffer_flag_device_dirty)
        rc = k.copy_to_host(nullptr, &bufs[i]);
    for (size_t i = 0; i < n; ++i)
      if (bufs[i].device != 0)
        k.device_free(nullptr, &bufs[i]);
  }
  if (rc != 0) {
    std::string msg = detail::last_halide_error();
    std::string explained = explain_halide_error(k, msg);
    if (!explained.empty())
      return Status::Error(std::string(kname(k)) + ": " + explained);
    return Status::Error(std::string(kname(k)) + ": kernel failed with Halide error " +
                         std::to_string(rc) + " (" + describe_halide_error(rc) + ")" +
                         (msg.empty() ? "" : ": " + msg));
  }
  return Status::Ok();
}

} // namespace attnc
