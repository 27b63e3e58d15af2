// A lowering pass that refuses, at compile time, GPU blocks whose threads or shared memory can exceed CUDA's limits.
//
// A GPU refuses a launch of more than 1024 threads per block (x and y at most 1024, z at most
// 64), or of more than 48 KiB of shared memory per block unless the kernel opted in to more
// (Halide's CUDA runtime does not), with CUDA_ERROR_INVALID_VALUE. Both sizes are bounds of
// Halide's loops and allocations, which bounds inference may tie to the input sizes: under a
// causal mask cuda-dense's staged numerators were bounded by Nq only, 16 x Nq threads and 197 KiB
// of shared memory per block at Nq = 256. ptxas cannot see launch sizes, so such a kernel
// compiled, passed the offline checks and failed on the first GPU with a real input (an H100,
// 2026-11-26). Every thread loop's extent and every shared allocation must have a constant upper
// bound within the limits; otherwise the compile fails, naming the loop or buffer.
#include "attnc/HalideGen.h"

#include <map>
#include <optional>
#include <stdexcept>
#include <string>

namespace attnc {
namespace {

namespace H = Halide;
namespace HI = Halide::Internal;

// Thread dimension of a GPU thread or lane loop: Halide names them ...thread_id_{x,y,z} (lanes
// run along x).
int threadDim(const HI::For *f) {
  if (f->for_type == HI::ForType::GPULane)
    return 0;
  const std::string &n = f->name;
  if (n.size() >= 2 && n[n.size() - 2] == '_') {
    char c = n.back();
    if (c == 'x')
      return 0;
    if (c == 'y')
      return 1;
    if (c == 'z')
      return 2;
  }
  return 0;
}

class LaunchLimits : public HI::IRVisitor {
public:
  using HI::IRVisitor::visit;

  void visit(const HI::LetStmt *l) override {
    l->value.accept(this);
    HI::ScopedBinding<HI::Interval> b(scope_, l->name,
                                      HI::bounds_of_expr_in_scope(l->value, scope_));
    l->body.accept(this);
  }

  void visit(const HI::Let *l) override {
    l->value.accept(this);
    HI::ScopedBinding<HI::Interval> b(scope_, l->name,
                                      HI::bounds_of_expr_in_scope(l->value, scope_));
    l->body.accept(this);
  }

  void visit(const HI::Allocate *a) override {
    if (inBlock_ && a->memory_type == H::MemoryType::GPUShared) {
      int64_t bytes = a->type.bytes();
      for (const H::Expr &e : a->extents) {
        H::Expr hi = HI::find_constant_bound(HI::simplify(e), HI::Direction::Upper, scope_);
        std::optional<int64_t> c;
        if (hi.defined())
          c = HI::as_const_int(HI::simplify(hi));
        if (!c)
          throw std::runtime_error(
              "the GPU shared buffer '" + a->name + "' (kernel at '" + kernel_ +
              "') has no constant bound on its size, so it grows with the input sizes and "
              "the GPU would refuse large launches: the schedule must bound its storage");
        bytes *= std::max<int64_t>(*c, 0);
      }
      sharedBytes_ += bytes;
    }
    HI::IRVisitor::visit(a);
  }

  void visit(const HI::For *f) override {
    const bool outerBlock = f->for_type == HI::ForType::GPUBlock && !inBlock_;
    if (outerBlock) {
      inBlock_ = true;
      threads_.clear();
      sharedBytes_ = 0;
      kernel_ = f->name;
    }
    if (inBlock_ &&
        (f->for_type == HI::ForType::GPUThread || f->for_type == HI::ForType::GPULane)) {
      H::Expr hi = HI::find_constant_bound(HI::simplify(f->extent), HI::Direction::Upper, scope_);
      std::optional<int64_t> c;
      if (hi.defined())
        c = HI::as_const_int(HI::simplify(hi));
      if (!c)
        throw std::runtime_error(
            "the GPU thread loop '" + f->name + "' (kernel at '" + kernel_ +
            "') has no constant bound on its extent, so its block size grows with the "
            "input sizes and the GPU would refuse large launches: the schedule must "
            "split it by a constant");
      int d = threadDim(f);
      threads_[d] = std::max(threads_[d], *c);
    }
    HI::Interval first = HI::bounds_of_expr_in_scope(f->min, scope_);
    HI::Interval last = HI::bounds_of_expr_in_scope(f->min + f->extent - 1, scope_);
    HI::ScopedBinding<HI::Interval> b(scope_, f->name, HI::Interval(first.min, last.max));
    f->min.accept(this);
    f->extent.accept(this);
    f->body.accept(this);
    if (outerBlock) {
      check();
      inBlock_ = false;
    }
  }

private:
  void check() const {
    static const int64_t kMax[3] = {1024, 1024, 64};
    int64_t total = 1;
    std::string shape;
    for (int d = 0; d < 3; ++d) {
      auto it = threads_.find(d);
      int64_t n = it == threads_.end() ? 1 : it->second;
      total *= n;
      shape += (d ? " x " : "") + std::to_string(n);
      if (n > kMax[d])
        throw std::runtime_error("a GPU block of the kernel at '" + kernel_ + "' has " +
                                 std::to_string(n) + " threads along " + "xyz"[d] +
                                 ", more than CUDA's " + std::to_string(kMax[d]));
    }
    if (total > 1024)
      throw std::runtime_error("a GPU block of the kernel at '" + kernel_ + "' has " + shape +
                               " = " + std::to_string(total) + " threads, more than CUDA's 1024");
    if (sharedBytes_ > kMaxShared)
      throw std::runtime_error("a GPU block of the kernel at '" + kernel_ + "' uses up to " +
                               std::to_string(sharedBytes_) +
                               " bytes of shared memory, more than the " +
                               std::to_string(kMaxShared) + " a kernel gets without opting in");
  }

  static constexpr int64_t kMaxShared = 48 * 1024;
  HI::Scope<HI::Interval> scope_;
  std::map<int, int64_t> threads_;
  int64_t sharedBytes_ = 0;
  std::string kernel_;
  bool inBlock_ = false;
};

// Halide runs a custom pass as a mutator of the whole body; this one only inspects it.
class LaunchLimitsPass : public HI::IRMutator {
public:
  using HI::IRMutator::mutate;
  HI::Stmt mutate(const HI::Stmt &s) override {
    LaunchLimits v;
    s.accept(&v);
    return s;
  }
};

} // namespace

void checkGpuLaunchLimits(H::Pipeline &p) { p.add_custom_lowering_pass(new LaunchLimitsPass); }

} // namespace attnc
