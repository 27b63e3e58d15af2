// attn-remainder-bounds: an input subscript `a % N + b` reads at `min(a % N, N - m) + b` where a
// `require` or a constant N makes the two equal, so that Halide's bounds inference sees the rows
// actually read.
//
// Halide bounds a subscript by interval arithmetic: `a % N` lies in [0, N - 1], so `a % N + u`
// with u in 0..4 reaches N + 2, and the input's bounds check stops the kernel although no such
// row is read when a is a multiple of 4 and N is too. Where every coefficient of a is a multiple
// of m, b lies in [0, m) and N is a multiple of m (a constant, or a require says so), a % N is a
// multiple of m below N, so at most N - m: the min changes no value, and bounds the read by
// N - 1.
#include "attnc/Transforms/Passes.h"

#include "IRUtils.h"
#include "attnc/Dialect/AttnOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Pass/PassRegistry.h"

#include <numeric>

using namespace mlir;

namespace attnc {

#define GEN_PASS_DEF_REMAINDERBOUNDSPASS
#include "attnc/Transforms/Passes.h.inc"

namespace {

// The largest value of `b`, a sum of indices of constant extent and constants, or nothing when b
// is not of that form or can be negative.
std::optional<int64_t> maxOfOffset(const LinearIndex &b) {
  int64_t lo = b.constant, hi = b.constant;
  for (auto [v, c] : b.terms) {
    if (c == 0)
      continue;
    auto arg = dyn_cast<BlockArgument>(v);
    if (!arg)
      return std::nullopt;
    // An index of a define, softmax or reduce: its extent is the owner's operand at its position.
    Operation *owner = arg.getOwner()->getParentOp();
    if (!isa<attn::DefineOp, attn::SoftmaxOp, attn::ReduceOp>(owner) ||
        arg.getArgNumber() >= owner->getNumOperands())
      return std::nullopt;
    std::optional<int64_t> extent = constIndex(owner->getOperand(arg.getArgNumber()));
    if (!extent || *extent < 1 || std::abs(c) > 4096 || *extent > 4096)
      return std::nullopt;
    (c > 0 ? hi : lo) += c * (*extent - 1);
  }
  if (lo < 0)
    return std::nullopt;
  return hi;
}

// The gcd of `a`'s coefficients and constant (0 when all are 0).
int64_t commonFactor(const LinearIndex &a) {
  int64_t g = std::abs(a.constant);
  for (auto [v, c] : a.terms)
    g = std::gcd(g, std::abs(c));
  return g;
}

// Whether `n` is a multiple of `m`: a constant one, or a size a `require` says is.
bool dividedBy(attn::KernelOp kernel, Value n, int64_t m) {
  if (std::optional<int64_t> c = constIndex(n))
    return *c > 0 && *c % m == 0;
  return requiresMultiple(kernel, n, m);
}

// The remainders `a % N` that `idx` adds or subtracts (through + - and products by constants).
SmallVector<Value> remainders(Value idx) {
  SmallVector<Value> out, work{idx};
  while (!work.empty() && out.size() < 16) {
    Value v = work.pop_back_val();
    if (matchRem(v)) {
      out.push_back(v);
      continue;
    }
    Operation *op = v.getDefiningOp();
    if (isa_and_nonnull<arith::AddIOp, arith::SubIOp, arith::MulIOp>(op))
      for (Value o : op->getOperands())
        work.push_back(o);
  }
  return out;
}

struct RemainderBoundsPass : impl::RemainderBoundsPassBase<RemainderBoundsPass> {
  using Base::Base;

  void runOnOperation() override {
    getOperation().walk([&](attn::KernelOp kernel) {
      SmallVector<std::pair<Value, int64_t>> bounded; // (a % N, m)
      llvm::SmallDenseSet<Value> seen;
      kernel.walk([&](attn::ReadOp r) {
        if (!isa<BlockArgument>(r.getTensor()) || r.getBoundary() != "none")
          return;
        for (Value idx : r.getIndices()) {
          LinearIndex l = linearIndex(idx);
          for (Value rem : remainders(idx)) {
            auto parts = matchRem(rem);
            if (seen.count(rem))
              continue;
            // b = idx - (a % N), as linear forms (linearIndex sees through the remainder too).
            LinearIndex b = l;
            b.add(linearIndex(rem), -1);
            std::optional<int64_t> top = maxOfOffset(b);
            // (b = 0: a % N itself is bounded by N - 1 already.)
            if (!top || *top == 0)
              continue;
            const int64_t g = commonFactor(linearIndex(parts->first));
            // m: a divisor of a's common factor above b's range that N is a multiple of.
            for (int64_t m = *top + 1; m <= g && m <= 4096; ++m)
              if (g % m == 0 && dividedBy(kernel, parts->second, m)) {
                bounded.push_back({rem, m});
                seen.insert(rem);
                break;
              }
          }
        }
      });
      for (auto [rem, m] : bounded) {
        OpBuilder b(rem.getContext());
        b.setInsertionPointAfterValue(rem);
        Location loc = rem.getLoc();
        Value n = matchRem(rem)->second;
        Value limit =
            b.create<arith::SubIOp>(loc, n, b.create<arith::ConstantIndexOp>(loc, m).getResult());
        auto min = b.create<arith::MinSIOp>(loc, rem, limit);
        rem.replaceAllUsesExcept(min.getResult(), min.getOperation());
      }
    });
  }
};

} // namespace

} // namespace attnc
