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
#include "llvm/ADT/MapVector.h"

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

// The smallest m above `top` that divides `g` and that `n` is a multiple of (a constant n, or a
// size a `require` says is a multiple of a constant M); 0 when there is none. `moduli` caches
// each size's Ms, so a kernel's requires are read once per size.
int64_t windowOf(attn::KernelOp kernel, Value n, int64_t top, int64_t g,
                 llvm::DenseMap<Value, SmallVector<int64_t>> &moduli) {
  SmallVector<int64_t> ms;
  if (std::optional<int64_t> c = constIndex(n)) {
    if (*c > 0)
      ms.push_back(*c);
  } else {
    auto it = moduli.find(n);
    if (it == moduli.end())
      it = moduli.try_emplace(n, requiredModuli(kernel, n)).first;
    ms = it->second;
  }
  int64_t best = 0;
  for (int64_t mm : ms) {
    const int64_t h = std::gcd(g, mm); // m must divide both
    for (int64_t m = top + 1; m <= h && m <= 4096 && (best == 0 || m < best); ++m)
      if (h % m == 0)
        best = m;
  }
  return best;
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
      // a % N -> (N, m), each remainder once however many reads add it.
      llvm::MapVector<Value, std::pair<Value, int64_t>> bounded;
      llvm::DenseMap<Value, SmallVector<int64_t>> moduli;
      kernel.walk([&](attn::ReadOp r) {
        if (!isa<BlockArgument>(r.getTensor()) || r.getBoundary() != "none")
          return;
        for (Value idx : r.getIndices()) {
          LinearIndex l = linearIndex(idx);
          for (Value rem : remainders(idx)) {
            if (bounded.count(rem))
              continue;
            // b = idx - (a % N), as linear forms (linearIndex sees through the remainder too).
            LinearIndex b = l;
            b.add(linearIndex(rem), -1);
            std::optional<int64_t> top = maxOfOffset(b);
            // (b = 0: a % N itself is bounded by N - 1 already.)
            if (!top || *top == 0)
              continue;
            auto [a, n] = *matchRem(rem);
            // m: a divisor of a's common factor above b's range that N is a multiple of.
            const int64_t g = commonFactor(linearIndex(a));
            if (int64_t m = g == 0 ? 0 : windowOf(kernel, n, *top, g, moduli))
              bounded.insert({rem, {n, m}});
          }
        }
      });
      for (auto &[rem, nm] : bounded) {
        auto [n, m] = nm;
        OpBuilder b(rem.getContext());
        b.setInsertionPointAfterValue(rem);
        Location loc = rem.getLoc();
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
