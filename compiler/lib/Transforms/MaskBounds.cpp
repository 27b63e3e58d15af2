// attn-mask-bounds: finds affine bounds on softmax axes in softmax masks, and the sums they carry over to.
//
// A causal softmax `softmax(j where j <= i)` gives probability 0 to every key j > i, yet its max
// and sum and the contraction `o = sum(j) p(.., j) * v(.., j, e)` would run over all keys. When a
// conjunct of the mask is a bound on an axis that is affine in the other indices and the sizes,
// the points outside it are masked whatever the data, so those loops may skip them: this pass
// records the bound as `attn.bounds` on the softmax and, for a sum whose body is zero whenever
// such a p is zero, on that sum too. HalideGen turns each bound into an RDom predicate, from
// which Halide tightens the loops. Anything it cannot prove (a data-dependent mask, `||`, `!=`,
// a non-affine index) is left out of the bound and stays a plain masked point.
#include "attnc/Transforms/Passes.h"

#include "IRUtils.h"

#include "attnc/Dialect/AttnOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CheckedArithmetic.h"

#include <map>
#include <optional>

using namespace mlir;

namespace attnc {

#define GEN_PASS_DEF_MASKBOUNDSPASS
#include "attnc/Transforms/Passes.h.inc"

namespace {

// sum(coefficient * atom) + constant, where an atom is a block argument (an index) or a size.
// Coefficients are checked for overflow; an overflow means "not affine".
struct Linear {
  llvm::MapVector<Value, int64_t> args;
  std::map<std::string, int64_t> sizes;
  int64_t constant = 0;

  std::optional<Linear> scaled(int64_t k) const {
    Linear r;
    for (auto &[v, c] : args) {
      auto p = llvm::checkedMul(c, k);
      if (!p)
        return std::nullopt;
      if (*p)
        r.args[v] = *p;
    }
    for (auto &[s, c] : sizes) {
      auto p = llvm::checkedMul(c, k);
      if (!p)
        return std::nullopt;
      if (*p)
        r.sizes[s] = *p;
    }
    auto p = llvm::checkedMul(constant, k);
    if (!p)
      return std::nullopt;
    r.constant = *p;
    return r;
  }
  std::optional<Linear> plus(const Linear &o) const {
    Linear r = *this;
    for (auto &[v, c] : o.args) {
      auto s = llvm::checkedAdd(r.args.lookup(v), c);
      if (!s)
        return std::nullopt;
      r.args[v] = *s;
    }
    for (auto &[n, c] : o.sizes) {
      auto s = llvm::checkedAdd(r.sizes[n], c);
      if (!s)
        return std::nullopt;
      r.sizes[n] = *s;
    }
    auto s = llvm::checkedAdd(r.constant, o.constant);
    if (!s)
      return std::nullopt;
    r.constant = *s;
    r.args.remove_if([](const auto &kv) { return kv.second == 0; });
    for (auto it = r.sizes.begin(); it != r.sizes.end();)
      it = it->second == 0 ? r.sizes.erase(it) : std::next(it);
    return r;
  }
  std::optional<Linear> minus(const Linear &o) const {
    auto n = o.scaled(-1);
    if (!n)
      return std::nullopt;
    return plus(*n);
  }
  int64_t coefficient(Value v) const { return args.lookup(v); }
};

std::optional<int64_t> constantOf(Value v) {
  IntegerAttr a;
  if (auto c = v.getDefiningOp<arith::ConstantOp>())
    a = dyn_cast<IntegerAttr>(c.getValue());
  if (!a)
    return std::nullopt;
  return a.getValue().getSExtValue();
}

// The affine form of an integer value built from indices, sizes and constants with +, - and
// multiplication by a constant; nullopt for anything else (a read, a division, a select, ...).
std::optional<Linear> linearOf(Value v, int depth = 0) {
  if (depth > 64)
    return std::nullopt;
  if (!v.getType().isIndex() && !v.getType().isInteger(32) && !v.getType().isInteger(64))
    return std::nullopt;
  Linear r;
  if (auto ba = dyn_cast<BlockArgument>(v)) {
    r.args[v] = 1;
    return r;
  }
  Operation *d = v.getDefiningOp();
  if (auto dim = dyn_cast<attn::DimOp>(d)) {
    r.sizes[dim.getSize().str()] = 1;
    return r;
  }
  if (auto c = constantOf(v)) {
    r.constant = *c;
    return r;
  }
  if (isa<arith::IndexCastOp>(d))
    return linearOf(d->getOperand(0), depth + 1);
  if (!isa<arith::AddIOp, arith::SubIOp, arith::MulIOp>(d))
    return std::nullopt;
  auto a = linearOf(d->getOperand(0), depth + 1), b = linearOf(d->getOperand(1), depth + 1);
  if (!a || !b)
    return std::nullopt;
  if (isa<arith::AddIOp>(d))
    return a->plus(*b);
  if (isa<arith::SubIOp>(d))
    return a->minus(*b);
  bool aConst = a->args.empty() && a->sizes.empty(), bConst = b->args.empty() && b->sizes.empty();
  if (aConst)
    return b->scaled(a->constant);
  if (bConst)
    return a->scaled(b->constant);
  return std::nullopt; // a product of two variable terms is not affine
}

// The comparisons whose conjunction is `mask` (an `&&` tree); other operands are dropped, which
// only weakens what is known about the masked set.
// Returns false when some operand was dropped.
bool conjuncts(Value mask, SmallVectorImpl<arith::CmpIOp> &out, int depth = 0) {
  if (depth > 64)
    return false;
  if (auto a = mask.getDefiningOp<arith::AndIOp>()) {
    bool l = conjuncts(a.getLhs(), out, depth + 1);
    return conjuncts(a.getRhs(), out, depth + 1) && l;
  }
  if (auto c = mask.getDefiningOp<arith::CmpIOp>()) {
    out.push_back(c);
    return true;
  }
  return false;
}

// A comparison as facts `E >= 0` (two for ==; none for != and unsigned predicates).
SmallVector<Linear> nonNegativeForms(arith::CmpIOp c) {
  auto l = linearOf(c.getLhs()), r = linearOf(c.getRhs());
  if (!l || !r)
    return {};
  Linear one;
  one.constant = 1;
  auto diff = [](std::optional<Linear> x) {
    return x ? SmallVector<Linear>{*x} : SmallVector<Linear>{};
  };
  switch (c.getPredicate()) {
  case arith::CmpIPredicate::sge:
    return diff(l->minus(*r)); // l - r >= 0
  case arith::CmpIPredicate::sle:
    return diff(r->minus(*l));      // r - l >= 0
  case arith::CmpIPredicate::sgt: { // l - r - 1 >= 0
    auto d = l->minus(*r);
    return d ? diff(d->minus(one)) : SmallVector<Linear>{};
  }
  case arith::CmpIPredicate::slt: { // r - l - 1 >= 0
    auto d = r->minus(*l);
    return d ? diff(d->minus(one)) : SmallVector<Linear>{};
  }
  case arith::CmpIPredicate::eq: {
    auto a = l->minus(*r), b = r->minus(*l);
    if (!a || !b)
      return {};
    return {*a, *b};
  }
  default:
    return {};
  }
}

// Builds affine expressions over a fixed list of dimensions (block arguments) and a growing list
// of symbols (size names).
struct AffineBuilder {
  MLIRContext *ctx;
  SmallVector<Value> dims;
  SmallVector<std::string> symbols;

  unsigned symbol(const std::string &name) {
    auto it = llvm::find(symbols, name);
    if (it != symbols.end())
      return it - symbols.begin();
    symbols.push_back(name);
    return symbols.size() - 1;
  }
  std::optional<AffineExpr> build(const Linear &l) {
    AffineExpr e = getAffineConstantExpr(l.constant, ctx);
    for (auto &[v, c] : l.args) {
      auto it = llvm::find(dims, v);
      if (it == dims.end())
        return std::nullopt;
      e = e + getAffineDimExpr(it - dims.begin(), ctx) * c;
    }
    for (auto &[s, c] : l.sizes)
      e = e + getAffineSymbolExpr(symbol(s), ctx) * c;
    return e;
  }
};

// One index's bounds: lower (inclusive, the max of the list) and upper (exclusive, the min).
struct Bounds {
  SmallVector<AffineExpr> lower, upper;
  bool empty() const { return lower.empty() && upper.empty(); }
};

attn::BoundAttr boundsEntry(MLIRContext *ctx, int64_t index, const Bounds &b,
                            const AffineBuilder &ab, StringRef from, bool exact = false) {
  auto map = [&](ArrayRef<AffineExpr> es) {
    if (es.empty())
      return AffineMapAttr();
    SmallVector<AffineExpr> simple;
    for (AffineExpr e : es)
      simple.push_back(simplifyAffineExpr(e, ab.dims.size(), ab.symbols.size()));
    return AffineMapAttr::get(AffineMap::get(ab.dims.size(), ab.symbols.size(), simple, ctx));
  };
  SmallVector<StringAttr> syms;
  for (const std::string &s : ab.symbols)
    syms.push_back(StringAttr::get(ctx, s));
  return attn::BoundAttr::get(ctx, index, map(b.lower), map(b.upper), syms,
                              from.empty() ? StringAttr() : StringAttr::get(ctx, from), exact);
}

// --- softmax axes ------------------------------------------------------------------------------

} // namespace

// The bounds on `axes` (positions among `body`'s arguments, with extents `extents`) that the
// mask `body` yields second implies; null when there are none.
ArrayAttr maskAxisBounds(Block &body, ArrayRef<int64_t> axes, ValueRange extents) {
  SmallVector<arith::CmpIOp> cmps;
  // Exact: the mask is nothing but the facts, so a point inside every bound is unmasked.
  bool allFacts = conjuncts(cast<attn::YieldOp>(body.getTerminator()).getValues()[1], cmps);
  SmallVector<Linear> facts;
  for (arith::CmpIOp c : cmps) {
    SmallVector<Linear> f = nonNegativeForms(c);
    allFacts &= !f.empty();
    facts.append(f);
  }
  if (facts.empty())
    return {};

  MLIRContext *ctx = body.getParentOp()->getContext();
  AffineBuilder ab{
      ctx, SmallVector<Value>(body.getArguments().begin(), body.getArguments().end()), {}};
  SmallVector<Attribute> entries;
  for (int64_t a : axes) {
    // A window axis (constant extent) is short and its loop is unrolled by the window schedules;
    // a bound there would only add per-point arithmetic.
    if (constantOf(extents[a]))
      continue;
    Value axis = body.getArgument(a);
    Bounds b;
    size_t used = 0;
    for (const Linear &f : facts) {
      int64_t c = f.coefficient(axis);
      if (c == 0)
        continue;
      Linear rest = f;
      rest.args.erase(axis);
      // The bound may use the rows (the non-axis indices) and sizes, never another axis: the
      // reduction over several axes is a box, so each axis's range must not depend on the others.
      bool rows = true;
      for (auto &[v, k] : rest.args)
        rows &= llvm::find(axes, (int64_t)cast<BlockArgument>(v).getArgNumber()) == axes.end();
      if (!rows)
        continue;
      auto r = ab.build(rest);
      if (!r)
        continue;
      // c * axis + R >= 0: axis >= ceil(-R / c) for c > 0, axis <= floor(R / -c) for c < 0.
      if (c > 0)
        b.lower.push_back((-*r).ceilDiv(c));
      else
        b.upper.push_back(r->floorDiv(-c) + 1);
      ++used;
    }
    // Exact when every fact became a bound of this axis: the fully visible part of the axis then
    // needs no mask test (the online softmax's full key tiles).
    if (!b.empty())
      entries.push_back(boundsEntry(ctx, a, b, ab, "", allFacts && used == facts.size()));
  }
  return entries.empty() ? ArrayAttr() : ArrayAttr::get(ctx, entries);
}

namespace {

void boundSoftmax(attn::SoftmaxOp op) {
  if (!op.hasMask())
    return;
  if (ArrayAttr b = maskAxisBounds(op.getBody().front(), op.getAxes(), op.getExtents()))
    op->setAttr(attn::kBoundsAttr, b);
}

// --- sums over a bounded axis ------------------------------------------------------------------

// Reads whose value zero makes `v` zero: `v` itself, or a factor of a product, the numerator of
// a quotient, a negation, or both arms of a select.
void zeroFactors(Value v, SmallVectorImpl<attn::ReadOp> &out, int depth = 0) {
  if (depth > 64)
    return;
  Operation *d = v.getDefiningOp();
  if (!d)
    return;
  if (auto r = dyn_cast<attn::ReadOp>(d))
    out.push_back(r);
  else if (isa<arith::MulFOp>(d)) {
    zeroFactors(d->getOperand(0), out, depth + 1);
    zeroFactors(d->getOperand(1), out, depth + 1);
  } else if (isa<arith::DivFOp, arith::NegFOp>(d)) {
    zeroFactors(d->getOperand(0), out, depth + 1);
  } else if (auto s = dyn_cast<arith::SelectOp>(d)) {
    SmallVector<attn::ReadOp> t, f;
    zeroFactors(s.getTrueValue(), t, depth + 1);
    zeroFactors(s.getFalseValue(), f, depth + 1);
    for (attn::ReadOp r : t)
      if (llvm::is_contained(f, r))
        out.push_back(r);
  }
}

Operation *enclosingDefinition(Operation *op) {
  for (Operation *p = op->getParentOp(); p; p = p->getParentOp())
    if (isa<attn::DefineOp, attn::SoftmaxOp>(p))
      return p;
  return nullptr;
}

// The affine expression of the map's result `e` after substituting its dimensions by `dims`
// and its symbols (names `from`) by symbols of `ab`.
AffineExpr substitute(AffineExpr e, ArrayRef<AffineExpr> dims, ArrayRef<StringAttr> from,
                      AffineBuilder &ab) {
  SmallVector<AffineExpr> syms;
  for (StringAttr s : from)
    syms.push_back(getAffineSymbolExpr(ab.symbol(s.getValue().str()), ab.ctx));
  return e.replaceDimsAndSymbols(dims, syms);
}

// For a sum whose body is zero wherever a bounded softmax p it reads is zero, p's bounds become
// bounds of the summed index: `o = sum(j) p(b, h, i, j) * v(b, h, j, e)` may run over j <= i.
void boundSum(attn::ReduceOp red) {
  if (red.getKind() != "sum")
    return;
  Operation *def = enclosingDefinition(red);
  if (!def)
    return;
  Block &rb = red.getBody().front();
  Block &db = def->getRegion(0).front();
  SmallVector<attn::ReadOp> reads;
  zeroFactors(cast<attn::YieldOp>(rb.getTerminator()).getValues()[0], reads);

  AffineBuilder ab{
      red.getContext(), SmallVector<Value>(db.getArguments().begin(), db.getArguments().end()), {}};
  SmallVector<Bounds> perIndex(rb.getNumArguments());
  SmallVector<llvm::SetVector<StringRef>> sources(rb.getNumArguments());
  for (attn::ReadOp r : reads) {
    // A clamped read repeats p's edge value outside its range, which need not be 0.
    if (r.getBoundary() == "clamp")
      continue;
    auto p = r.getTensor().getDefiningOp<attn::SoftmaxOp>();
    if (!p)
      continue;
    auto entries = p->getAttrOfType<ArrayAttr>(attn::kBoundsAttr);
    if (!entries)
      continue;
    // Each subscript as an affine expression of the definition's indices and the sizes; the
    // summed indices are allowed only as `k + A` at one of p's axes.
    SmallVector<std::optional<Linear>> subs;
    for (Value s : r.getIndices())
      subs.push_back(linearOf(s));
    for (Attribute ea : entries) {
      auto entry = cast<attn::BoundAttr>(ea);
      int64_t axis = entry.getIndex();
      if (!subs[axis])
        continue;
      // The summed index k at the axis, with coefficient 1, plus terms A free of summed indices.
      std::optional<unsigned> k;
      bool ok = true;
      for (auto &[v, c] : subs[axis]->args) {
        auto ba = cast<BlockArgument>(v);
        if (ba.getOwner() != &rb)
          continue;
        if (c != 1 || k)
          ok = false;
        k = ba.getArgNumber();
      }
      if (!ok || !k)
        continue;
      Linear offset = *subs[axis];
      offset.args.erase(rb.getArgument(*k));
      auto a = ab.build(offset);
      if (!a)
        continue;
      // p's bounds at this read: its dimensions replaced by the subscripts (the axis itself
      // does not occur in them).
      SmallVector<AffineExpr> dims;
      for (size_t d = 0; d < subs.size() && ok; ++d) {
        std::optional<AffineExpr> x;
        if (subs[d])
          x = ab.build(*subs[d]);
        // Only the subscripts p's bounds use must be affine in the definition's indices.
        dims.push_back(x ? *x : getAffineConstantExpr(0, ab.ctx));
        if (!x && d != (size_t)axis) {
          bool used = false;
          for (AffineMapAttr m : {entry.getLower(), entry.getUpper()})
            if (m)
              used |= m.getValue().isFunctionOfDim(d);
          ok = !used;
        }
      }
      if (!ok)
        continue;
      ArrayRef<StringAttr> syms = entry.getSizes();
      Bounds &b = perIndex[*k];
      // lower <= k + A < upper  <=>  lower - A <= k < upper - A.
      if (AffineMapAttr m = entry.getLower())
        for (AffineExpr e : m.getValue().getResults())
          b.lower.push_back(substitute(e, dims, syms, ab) - *a);
      if (AffineMapAttr m = entry.getUpper())
        for (AffineExpr e : m.getValue().getResults())
          b.upper.push_back(substitute(e, dims, syms, ab) - *a);
      sources[*k].insert(p.getName());
    }
  }
  SmallVector<Attribute> out;
  for (unsigned k = 0; k < perIndex.size(); ++k) {
    if (perIndex[k].empty())
      continue;
    out.push_back(boundsEntry(red.getContext(), k, perIndex[k], ab, llvm::join(sources[k], ",")));
  }
  if (!out.empty())
    red->setAttr(attn::kBoundsAttr, ArrayAttr::get(red.getContext(), out));
}

struct MaskBoundsPass : impl::MaskBoundsPassBase<MaskBoundsPass> {
  void runOnOperation() override {
    // Softmaxes first: a sum reads the bounds of the softmax it multiplies by. Stale bounds
    // from an earlier run are recomputed, never trusted.
    getOperation().walk([](Operation *op) {
      if (isa<attn::SoftmaxOp, attn::ReduceOp>(op))
        op->removeAttr(attn::kBoundsAttr);
    });
    getOperation().walk([](attn::SoftmaxOp op) { boundSoftmax(op); });
    getOperation().walk([](attn::ReduceOp op) { boundSum(op); });
  }
};

} // namespace

} // namespace attnc
