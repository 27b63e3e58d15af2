// attn-split-sums: splits a sum over a linear combination of softmax-weighted terms into one sum per softmax.
//
// Differential attention weighs the values by a difference of two softmaxes:
// `o = sum(j) (p1(.., j) - lam(0) * p2(.., j)) * v(.., j, e)`. attn-online-softmax fuses a softmax
// only into a sum whose body is the probability times a value, so as written neither softmax is
// fused and both become tensors over (rows x keys). A sum is linear, so the same o is
// `sum(j) p1 * v - lam(0) * sum(j) p2 * v`, whose two sums are each the form that fuses. This pass
// writes a sum's body as a sum of products (distributing products over + and -), groups the
// terms by the probability they are weighted by, and gives each group a sum of its own; a group's
// only term has its coefficient (the factors that depend on no summed index) multiplied outside
// the sum, so that the sum's body is the probability times the value alone. Terms without a
// probability stay together in one remaining sum (docs/language.md §20).
//
// It splits only where that changes what fuses: two or more probabilities, one with a coefficient
// (`sum(j) 0.5 * p * v` becomes `0.5 * sum(j) p * v`), or one in several terms written apart
// (`p * v + p * w` becomes `p * (v + w)`). It leaves a body alone when a term multiplies two
// probabilities (no split makes that `p * value`), when a probability is read under something
// other than +, -, * (`exp(p)`), when the products spread to more than kMaxTerms terms, and when
// the body is already `p * value`.
#include "attnc/Transforms/Passes.h"

#include "IRUtils.h"
#include "attnc/Dialect/AttnOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

namespace attnc {

#define GEN_PASS_DEF_SPLITSUMSPASS
#include "attnc/Transforms/Passes.h.inc"

namespace {

// Terms a body may spread to: distributing products over sums multiplies their counts, and past
// a handful of terms the body is no weighted combination of softmaxes that a person wrote.
constexpr size_t kMaxTerms = 8;
// Depth of +, -, * nesting followed; deeper operands are opaque factors (which, if they read a
// probability, make the body be left alone).
constexpr int kMaxDepth = 64;

// A product of factors, negated when `neg`. `whole`, when set, is a value of the IR that computes
// the term (negated when `wholeNeg`): a term written as it is, which the remaining sum reuses
// rather than rebuilding (and reassociating) its product.
struct Term {
  bool neg = false;
  SmallVector<Value, 4> factors;
  Value whole;
  bool wholeNeg = false;
};
using Terms = SmallVector<Term, kMaxTerms>;

// A read of softmax probabilities.
attn::ReadOp probability(Value v) {
  auto r = v.getDefiningOp<attn::ReadOp>();
  return r && r.getTensor().getDefiningOp<attn::SoftmaxOp>() ? r : attn::ReadOp();
}

// Whether two probability reads read the same element: the same tensor at the same subscripts.
bool sameRead(attn::ReadOp a, attn::ReadOp b) {
  return a.getTensor() == b.getTensor() && a.getIndices() == b.getIndices() &&
         a.getBoundary() == b.getBoundary();
}

// The sum of products of one reduce body's yielded value.
class Decomposer {
public:
  explicit Decomposer(Block &body) : body_(body) {}

  // The terms of `v`, or nullopt when they would be more than kMaxTerms.
  std::optional<Terms> decompose(Value v, int depth = 0) {
    Operation *op = v.getDefiningOp();
    bool inBody = op && op->getBlock() == &body_ && depth < kMaxDepth;
    if (inBody && !weighted(v, depth)) {
      // No probability below: one term, kept as written.
      Terms t;
      t.push_back(flatten(v, depth));
      return t;
    }
    if (inBody && isa<arith::AddFOp, arith::SubFOp>(op)) {
      auto a = decompose(op->getOperand(0), depth + 1);
      auto b = a ? decompose(op->getOperand(1), depth + 1) : std::nullopt;
      if (!b || a->size() + b->size() > kMaxTerms)
        return std::nullopt;
      for (Term &t : *b) {
        if (isa<arith::SubFOp>(op))
          t.neg = !t.neg, t.wholeNeg = !t.wholeNeg;
        a->push_back(std::move(t));
      }
      return a;
    }
    if (inBody && isa<arith::NegFOp>(op)) {
      auto a = decompose(op->getOperand(0), depth + 1);
      if (a)
        for (Term &t : *a)
          t.neg = !t.neg, t.wholeNeg = !t.wholeNeg;
      return a;
    }
    if (inBody && isa<arith::MulFOp>(op)) {
      auto a = decompose(op->getOperand(0), depth + 1);
      auto b = a ? decompose(op->getOperand(1), depth + 1) : std::nullopt;
      if (!b || a->size() * b->size() > kMaxTerms)
        return std::nullopt;
      Terms out;
      for (const Term &x : *a)
        for (const Term &y : *b) {
          Term t;
          t.neg = x.neg != y.neg;
          t.factors.append(x.factors);
          t.factors.append(y.factors);
          out.push_back(std::move(t));
        }
      return out;
    }
    Terms t(1);
    t[0].factors.push_back(v);
    t[0].whole = v;
    return t;
  }

private:
  // Whether a probability read is reached from `v` through +, -, * and negation in the body.
  bool weighted(Value v, int depth) {
    if (probability(v))
      return true;
    Operation *op = v.getDefiningOp();
    if (!op || op->getBlock() != &body_ || depth >= kMaxDepth ||
        !isa<arith::AddFOp, arith::SubFOp, arith::NegFOp, arith::MulFOp>(op))
      return false;
    if (auto it = weighted_.find(v); it != weighted_.end())
      return it->second;
    bool w = llvm::any_of(op->getOperands(), [&](Value o) { return weighted(o, depth + 1); });
    return weighted_[v] = w;
  }

  // The factors of a product with no probability in it, through products and negations.
  Term flatten(Value v, int depth) {
    Term t;
    t.whole = v;
    SmallVector<std::pair<Value, int>> work{{v, depth}};
    while (!work.empty()) {
      auto [x, d] = work.pop_back_val();
      Operation *op = x.getDefiningOp();
      bool inBody = op && op->getBlock() == &body_ && d < kMaxDepth;
      if (inBody && isa<arith::MulFOp>(op)) {
        work.push_back({op->getOperand(1), d + 1}); // popped after the left operand's factors
        work.push_back({op->getOperand(0), d + 1});
      } else if (inBody && isa<arith::NegFOp>(op)) {
        t.neg = !t.neg;
        work.push_back({op->getOperand(0), d + 1});
      } else {
        t.factors.push_back(x);
      }
    }
    return t;
  }

  Block &body_;
  DenseMap<Value, bool> weighted_;
};

// Whether `v`, an opaque factor, reads softmax probabilities anywhere in what computes it inside
// `red` (`exp(p)`, a probability inside a nested sum).
bool readsProbability(Value v, attn::ReduceOp red) {
  SmallVector<Value> work{v};
  llvm::SmallPtrSet<Operation *, 16> seen;
  while (!work.empty()) {
    Operation *op = work.pop_back_val().getDefiningOp();
    if (!op || !red->isProperAncestor(op) || !seen.insert(op).second)
      continue;
    bool found = false;
    op->walk([&](Operation *inner) {
      if (auto r = dyn_cast<attn::ReadOp>(inner); r && probability(r.getResult()))
        found = true;
      work.append(inner->getOperands().begin(), inner->getOperands().end());
    });
    if (found)
      return true;
  }
  return false;
}

// One sum of the split: the terms weighted by one probability read.
struct Group {
  Value p;
  SmallVector<unsigned, 2> terms;
};

// The product of `factors` (left to right), each cloned into `b` by `map`; null when there is none.
Value product(ArrayRef<Value> factors, attn::ReduceOp red, IRMapping &map, OpBuilder &b,
              Location loc) {
  Value acc;
  for (Value f : factors) {
    Value c = materialize(f, red, map, b);
    acc = acc ? b.create<arith::MulFOp>(loc, acc, c).getResult() : c;
  }
  return acc;
}

// acc + x (acc - x when `neg`), or x (-x) when there is no acc yet.
Value accumulate(Value acc, Value x, bool neg, OpBuilder &b, Location loc) {
  if (!acc)
    return neg ? b.create<arith::NegFOp>(loc, x).getResult() : x;
  if (neg)
    return b.create<arith::SubFOp>(loc, acc, x);
  return b.create<arith::AddFOp>(loc, acc, x);
}

// Splits `red` when its body is a linear combination worth splitting; returns whether it did.
bool split(attn::ReduceOp red) {
  if (red.getKind() != "sum" || !red.getType().isF32())
    return false;
  Block &body = red.getBody().front();
  Value y = cast<attn::YieldOp>(body.getTerminator()).getValues()[0];
  Decomposer dec(body);
  std::optional<Terms> terms = dec.decompose(y);
  if (!terms)
    return false;

  // Each term has one probability factor (grouped by the element it reads) or none (the rest).
  SmallVector<Group> groups;
  SmallVector<unsigned> rest;
  SmallVector<int> probOf(terms->size(), -1); // the probability factor's position in a term
  for (auto [i, t] : llvm::enumerate(*terms)) {
    for (auto [k, f] : llvm::enumerate(t.factors)) {
      if (!probability(f)) {
        if (readsProbability(f, red))
          return false;
        continue;
      }
      if (probOf[i] >= 0)
        return false; // two probabilities in one product
      probOf[i] = k;
    }
    if (probOf[i] < 0) {
      rest.push_back(i);
      continue;
    }
    attn::ReadOp p = probability(t.factors[probOf[i]]);
    auto g = llvm::find_if(groups, [&](const Group &g) { return sameRead(probability(g.p), p); });
    if (g == groups.end())
      groups.push_back({p.getResult(), {}}), g = std::prev(groups.end());
    g->terms.push_back(i);
  }
  if (groups.empty())
    return false;

  // A coefficient: a factor other than the probability that depends on no summed index.
  auto isCoefficient = [&](unsigned i, unsigned k) {
    Value f = (*terms)[i].factors[k];
    return (int)k != probOf[i] &&
           llvm::none_of(body.getArguments(), [&](BlockArgument a) { return dependsOn(f, a); });
  };
  auto hasCoefficient = [&](unsigned i) {
    if ((*terms)[i].neg)
      return true;
    for (unsigned k = 0; k < (*terms)[i].factors.size(); ++k)
      if (isCoefficient(i, k))
        return true;
    return false;
  };
  if (groups.size() == 1) {
    const Group &g = groups[0];
    // The probability times a value already, or with terms that no probability weighs, which
    // are no reason to split on their own.
    if (g.terms.size() == 1 && !hasCoefficient(g.terms[0]))
      return false;
    // `p * (v + w)` already (`p * v + p * w` becomes it).
    auto mul = y.getDefiningOp<arith::MulFOp>();
    if (g.terms.size() > 1 && mul && (mul.getLhs() == g.p || mul.getRhs() == g.p))
      return false;
  }

  Location loc = red.getLoc();
  OpBuilder b(red);
  // A sum over red's indices of what `yield` builds in its body.
  auto newSum = [&](function_ref<Value(IRMapping &, OpBuilder &)> yield) {
    auto nr = b.create<attn::ReduceOp>(loc, red.getType(), red.getKindAttr(), red.getExtents(),
                                       red.getIndicesAttr());
    Block *nb = new Block();
    nr.getBody().push_back(nb);
    IRMapping map;
    for (BlockArgument a : body.getArguments())
      map.map(a, nb->addArgument(a.getType(), a.getLoc()));
    OpBuilder bb = OpBuilder::atBlockEnd(nb);
    bb.create<attn::YieldOp>(loc, ValueRange{yield(map, bb)});
    return nr.getResult();
  };
  IRMapping outside; // coefficients, computed once before the sums
  Value result;
  for (const Group &g : groups) {
    if (g.terms.size() == 1) {
      unsigned i = g.terms[0];
      const Term &t = (*terms)[i];
      SmallVector<Value> coeffs, values;
      for (unsigned k = 0; k < t.factors.size(); ++k)
        if ((int)k != probOf[i])
          (isCoefficient(i, k) ? coeffs : values).push_back(t.factors[k]);
      Value s = newSum([&](IRMapping &map, OpBuilder &bb) {
        Value p = materialize(g.p, red, map, bb);
        Value v = product(values, red, map, bb, loc);
        return v ? bb.create<arith::MulFOp>(loc, p, v).getResult() : p;
      });
      Value c = product(coeffs, red, outside, b, loc);
      result =
          accumulate(result, c ? b.create<arith::MulFOp>(loc, c, s).getResult() : s, t.neg, b, loc);
      continue;
    }
    // Several terms weighted by one probability: one sum of the probability times their sum.
    Value s = newSum([&](IRMapping &map, OpBuilder &bb) {
      Value p = materialize(g.p, red, map, bb);
      Value v;
      for (unsigned i : g.terms) {
        const Term &t = (*terms)[i];
        SmallVector<Value> values;
        for (unsigned k = 0; k < t.factors.size(); ++k)
          if ((int)k != probOf[i])
            values.push_back(t.factors[k]);
        Value x = product(values, red, map, bb, loc);
        if (!x)
          x = bb.create<arith::ConstantOp>(loc, bb.getF32FloatAttr(1.0f));
        v = accumulate(v, x, t.neg, bb, loc);
      }
      return bb.create<arith::MulFOp>(loc, p, v).getResult();
    });
    result = accumulate(result, s, false, b, loc);
  }
  if (!rest.empty()) {
    Value s = newSum([&](IRMapping &map, OpBuilder &bb) {
      Value v;
      for (unsigned i : rest) {
        const Term &t = (*terms)[i];
        if (t.whole)
          v = accumulate(v, materialize(t.whole, red, map, bb), t.wholeNeg, bb, loc);
        else
          v = accumulate(v, product(t.factors, red, map, bb, loc), t.neg, bb, loc);
      }
      return v;
    });
    result = accumulate(result, s, false, b, loc);
  }
  red.getResult().replaceAllUsesWith(result);
  red.erase();
  return true;
}

struct SplitSumsPass : impl::SplitSumsPassBase<SplitSumsPass> {
  using Base::Base;

  void runOnOperation() override {
    // Innermost first: splitting a sum clones its body, nested sums included, and erases it.
    SmallVector<attn::ReduceOp> sums;
    getOperation().walk([&](attn::ReduceOp r) { sums.push_back(r); });
    for (attn::ReduceOp r : sums)
      split(r);
  }
};

} // namespace

} // namespace attnc
