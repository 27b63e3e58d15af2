// Public runtime API: kernel descriptors, registry, tensor views, validation and invocation of Halide-compiled kernels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "attnc/tensor_type.h"

struct halide_buffer_t; // HalideRuntime.h

namespace attnc {

class Status {
public:
  static Status Ok() { return Status(true, std::string()); }
  static Status Error(std::string msg) { return Status(false, std::move(msg)); }

  bool ok() const { return ok_; }
  const std::string &message() const { return message_; }

private:
  Status(bool ok, std::string msg) : ok_(ok), message_(std::move(msg)) {}
  bool ok_;
  std::string message_;
};

constexpr int kMaxRank = 8;

// A non-owning view of a strided tensor. Shapes and strides are in C (numpy)
// order: index rank-1 is the fastest-varying dimension. Strides are counted in
// elements, not bytes, and may be negative (reversed views); a stride of 0
// broadcasts and is accepted on inputs only. `data` points at element
// [0, 0, ..., 0].
struct TensorView {
  void *data = nullptr;
  DType dtype = DType::F32;
  int rank = 0;
  int64_t shape[kMaxRank] = {};
  int64_t strides[kMaxRank] = {};

  // Product of the shape; 1 for rank 0, 0 if any dimension is 0 (saturates
  // at INT64_MAX instead of overflowing).
  int64_t numel() const;

  // Dense C-order view. Throws std::invalid_argument if shape.size() > kMaxRank
  // (a programming error, not a data error).
  static TensorView contiguous(void *data, DType dtype, const std::vector<int64_t> &shape);
  static TensorView f32(float *data, const std::vector<int64_t> &shape);
  static TensorView i32(int32_t *data, const std::vector<int64_t> &shape);
};

// One kernel parameter. dims[i] is a dimension in Dim's canonical spelling
// (tensor_type.h): a size symbol (C identifier, e.g. "Nq"), a non-negative
// decimal literal (e.g. "64") or, for outputs only, a product of these joined
// by '*' without blanks (e.g. "M*D", "2*C"); dims is in C order and may be
// null when rank == 0.
struct ParamDesc {
  const char *name;
  DType dtype;
  int rank;
  const char *const *dims;
};

// Everything the runtime needs to validate and invoke one compiled kernel.
// Kept a plain aggregate so generated headers can emit it as constant data.
// argv_fn is the Halide `<name>_argv` entry point: args[i] is a
// halide_buffer_t*, inputs first then outputs, in declaration order.
// GPU kernels also carry the Halide runtime's device entry points from their
// own library (null for CPU kernels): call() uploads inputs, downloads
// outputs and frees the device copies around each call.
struct KernelDesc {
  const char *name;
  const char *target;
  int num_inputs;
  const ParamDesc *inputs;
  int num_outputs;
  const ParamDesc *outputs;
  int (*argv_fn)(void **);
  int (*copy_to_host)(void *user_context, ::halide_buffer_t *buf) = nullptr;
  int (*device_free)(void *user_context, ::halide_buffer_t *buf) = nullptr;
  // What attnc scheduled it with (attnc::Selection::describe: the rule, the knobs it set away from
  // the rule's defaults, the online softmax's key tile); null where unknown.
  const char *schedule = nullptr;
};

// Process-wide table of kernels, keyed by (name, target). Thread-safe. The
// registry stores pointers only: descriptors must outlive their registration
// (generated descriptors are static data, so they do).
class Registry {
public:
  static Registry &global();

  // Registers d, replacing any entry with the same (name, target). A null
  // target is treated as "". Null d is ignored.
  void add(const KernelDesc *d);
  // Exact (name, target) match, or nullptr.
  const KernelDesc *find(std::string_view name, std::string_view target) const;
  // All entries, sorted by (name, target) so output is independent of
  // static-initialisation order.
  std::vector<const KernelDesc *> list() const;

  Registry() = default;
  Registry(const Registry &) = delete;
  Registry &operator=(const Registry &) = delete;

private:
  mutable std::mutex mu_;
  std::vector<const KernelDesc *> entries_;
};

// Registers d with Registry::global() at static-initialisation time. Note that
// a linker drops unreferenced objects from static archives, so a Registrar in
// a library only runs if its object file is linked in (e.g. --whole-archive).
struct Registrar {
  explicit Registrar(const KernelDesc *d);
};

using SizeMap = std::map<std::string, int64_t>;

// Checks the inputs against k (count, null data, dtype, rank, non-negative
// shape, literal dimensions) and binds every size symbol from the first input
// dimension that names it. sizes may be null when only the check is wanted;
// otherwise it is cleared first.
Status bind_sizes(const KernelDesc &k, const std::vector<TensorView> &inputs, SizeMap *sizes);

// Shapes (C order) of k's outputs for the given sizes, with product
// dimensions multiplied out; errors on a symbol that is not in sizes and on a
// product that overflows int64.
Status output_shapes(const KernelDesc &k, const SizeMap &sizes,
                     std::vector<std::vector<int64_t>> *shapes);

// bind_sizes plus output checks (count, null, dtype, rank, exact shape, no
// zero strides, no self-aliasing), Halide's 32-bit extent/stride limits, and
// rejection of outputs whose memory overlaps an input or another output. A
// wrong product dimension is reported with its sizes: "output 'o' dimension 2
// (M*D) is 12, but M*D = 16 (M = 4, D = 4)".
Status validate_call(const KernelDesc &k, const std::vector<TensorView> &inputs,
                     const std::vector<TensorView> &outputs, SizeMap *sizes_out = nullptr);

// validate_call, then runs k.argv_fn on halide_buffer_t wrappers of the views.
// A non-zero Halide return becomes an error naming the kernel and the code.
Status call(const KernelDesc &k, const std::vector<TensorView> &inputs,
            const std::vector<TensorView> &outputs);

// "halide_error_code_<name>: <explanation>" for a halide_error_code_t value,
// or "unknown Halide error" for anything else.
std::string describe_halide_error(int code);

// A failed requirement on input values arrives as Halide's "Requirement Failed: (cond) 0 [attnc]
// FILE:LINE:COL: requirement failed: ..."; this returns the part from FILE on, and any other
// message unchanged.
std::string tidy_halide_message(const std::string &msg);

// Halide's message for a failed call of kernel `k`, in the DSL's terms, or "" when it is not one
// that names the kernel's tensors: bounds errors ("Input buffer k is accessed at -32, which is
// before the min (0) in dimension 1", with Halide's dimensions counted from the innermost) become
// "input 'k' dimension 2 (Nk) is read at -32, before its first index 0"; so do constraint,
// rank, extent and buffer size errors, failed requirements (their own message) and gathers out
// of range. call() and attn-run report with it.
std::string explain_halide_error(const KernelDesc &k, const std::string &msg);

// The memory this process can have: the machine's physical memory (sysconf), or the address-space
// limit (RLIMIT_AS) when that is lower; 0 when neither is known.
uint64_t memory_limit_bytes();

// Ok, or an error "<what> needs N bytes (G GiB), more than this machine's memory (M GiB)" when
// `bytes` exceed memory_limit_bytes(): tools check what they allocate for tensors with it first.
Status check_memory(const std::string &what, uint64_t bytes);

// Ok, or an error naming `what` (such as "output 'o'") when a dense tensor of this dtype and shape
// has more than 2^31 - 1 elements (what a kernel addresses with Halide's 32-bit indexing) or needs
// more memory than check_memory allows. attn-run and attn-tune check every tensor before
// allocating it.
Status check_tensor_size(const std::string &what, DType dtype, const std::vector<int64_t> &shape);

// Heap buffers of kernels. Every program linking this runtime serves the AOT kernels'
// halide_malloc/halide_free with these (attn-run and attn-tune hand them to Halide's JIT too):
// blocks of 64 KiB or more, which glibc would map and unmap per call, are kept for the next call,
// up to a limit (256 MiB by default; 0 under AddressSanitizer, so that it sees every free).
// Pointers are 128-byte aligned. set_buffer_cache_limit(0) frees every kept block.
void *buffer_alloc(size_t bytes);
void buffer_free(void *p);
void set_buffer_cache_limit(size_t bytes);
size_t buffer_cache_limit();
// The bytes kept for reuse now.
size_t buffer_cache_bytes();

// Whether a CUDA driver and at least one device are present (loads libcuda.so.1 and asks it; the
// answer is cached). When not, `why` says what is missing. call() checks this before running a
// CUDA kernel, so a machine without a GPU gets "no CUDA device" rather than a driver error.
bool cuda_device_available(std::string *why = nullptr);

// Asks Linux for the AMX tile state of this process (arch_prctl(ARCH_REQ_XCOMP_PERM,
// XFEATURE_XTILEDATA), Linux 5.16 and later), once; true when granted. Until a process asks, its
// first tile instruction raises SIGILL, and Halide 21's kernels do not ask (halide/Halide#9191).
// call() asks before it runs a kernel; a program that runs kernels another way (Halide's JIT:
// attn-run, attn-tune) calls it itself. False on CPUs without AMX and on other systems.
bool request_tile_state();

} // namespace attnc
