// attn-contraction-order: reassociates a sum over keys of a factored score, linear attention's phi(q) (phi(k)^T v).
//
// Linear attention (Katharopoulos et al., 2020) writes a score that is a contraction of a query
// feature and a key feature, `s(.., i, j) = c * sum(d) A(.., i, d) * B(.., j, d)`, and sums it over
// the keys: `o(.., i, e) = sum(j) s(.., i, j) * X(.., j, e)` (X = v; X = 1 for the normaliser).
// As written that is N_q * N_k * (D + E) per head. The two sums commute, so the same o is
// `c * sum(d) A(.., i, d) * kx(.., d, e)` with `kx(.., d, e) = sum(j) B(.., j, d) * X(.., j, e)`,
// N_k * D * E + N_q * D * E: linear in the sequence lengths. Which one is cheaper depends on the
// sizes (D * E against N_q * N_k * (D + E) / (N_q + N_k)), so, as attn-sample-order does, the
// pass prices both from the kernel's `attn.estimates` (attnc's --sizes, attn-run's input shapes)
// and keeps the kernel as written when an estimate is missing. It rewrites a score only when
// every read of it is such a sum, so that the N_q x N_k score is not computed at all.
// A non-trivial feature (`elu(x) + 1`) becomes a definition of its own (`<s>__lhs`, `<s>__rhs`),
// computed once per point instead of once per use. The consumer records the decision and both
// costs in `attn.contraction_order` (docs/language.md §19).
//
// A key sum under a mask that ties i and j (causal linear attention) does not factor this way:
// its body is not `s * X`, so it is left as written.
#include "attnc/Transforms/Passes.h"

#include "IRUtils.h"
#include "attnc/Dialect/AttnOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

#include <optional>

using namespace mlir;

namespace attnc {

#define GEN_PASS_DEF_CONTRACTIONORDERPASS
#include "attnc/Transforms/Passes.h.inc"

namespace {

// s(args) = [c *] sum(d) A * B [/ c]: the score and its two factors.
struct Score {
  attn::DefineOp def;
  attn::ReduceOp red; // the sum over d
  Value a, b;         // the factors, inside red's body
  Value scale;        // c, invariant in s's indices (null when there is none)
  bool divide = false;
};

// A read `s(subs)` in `o(..) = .. sum(j) s(subs) [* X] ..`.
struct Site {
  attn::ReadOp read;
  attn::ReduceOp red; // the sum over j
  attn::DefineOp owner;
  Value x;                    // X, inside red's body or owner's (null: 1)
  unsigned jPos = 0;          // the position of j among s's subscripts
  SmallVector<unsigned> keep; // owner's indices kx keeps (those B or X depend on), in owner's order
};

bool invariantIn(Value v, Block &body) {
  for (BlockArgument a : body.getArguments())
    if (dependsOn(v, a))
      return false;
  return true;
}

std::optional<Score> matchScore(attn::DefineOp def) {
  Block &body = def.getBody().front();
  auto yield = dyn_cast<attn::YieldOp>(body.getTerminator());
  if (!yield || yield.getValues().size() != 1)
    return std::nullopt;
  Score s;
  s.def = def;
  Value y = yield.getValues()[0];
  auto red = y.getDefiningOp<attn::ReduceOp>();
  if (!red) {
    Operation *op = y.getDefiningOp();
    if (!op || !isa<arith::MulFOp, arith::DivFOp>(op))
      return std::nullopt;
    for (unsigned k = 0; k < 2 && !red; ++k) {
      if (isa<arith::DivFOp>(op) && k == 1)
        break;
      if (auto r = op->getOperand(k).getDefiningOp<attn::ReduceOp>()) {
        red = r;
        s.scale = op->getOperand(1 - k);
        s.divide = isa<arith::DivFOp>(op);
      }
    }
    if (!red || !invariantIn(s.scale, body))
      return std::nullopt;
  }
  if (red->getBlock() != &body || red.getKind() != "sum" || red.getExtents().size() != 1 ||
      !red->hasOneUse())
    return std::nullopt;
  // The extent is used by the new definitions, which live outside s.
  if (Operation *e = red.getExtents()[0].getDefiningOp(); !e || def->isAncestor(e))
    return std::nullopt;
  Block &rb = red.getBody().front();
  auto ry = dyn_cast<attn::YieldOp>(rb.getTerminator());
  if (!ry || ry.getValues().size() != 1)
    return std::nullopt;
  auto mul = ry.getValues()[0].getDefiningOp<arith::MulFOp>();
  if (!mul)
    return std::nullopt;
  s.red = red;
  s.a = mul.getLhs();
  s.b = mul.getRhs();
  return s;
}

// The positions among `body`'s arguments that `v` depends on.
SmallVector<unsigned> argsUsed(Value v, Block &body) {
  SmallVector<unsigned> out;
  for (BlockArgument a : body.getArguments())
    if (dependsOn(v, a))
      out.push_back(a.getArgNumber());
  return out;
}

std::optional<Site> matchSite(attn::ReadOp r, Score s) {
  Site site;
  site.read = r;
  site.red = dyn_cast<attn::ReduceOp>(r->getParentOp());
  if (!site.red || site.red.getKind() != "sum" || site.red.getExtents().size() != 1 ||
      r.getBoundary() != "none" || !r->hasOneUse())
    return std::nullopt;
  // A bounded or otherwise annotated sum is some other pass's form.
  if (!site.red->getDiscardableAttrDictionary().empty())
    return std::nullopt;
  site.owner = dyn_cast<attn::DefineOp>(site.red->getParentOp());
  if (!site.owner)
    return std::nullopt;
  if (Operation *e = site.red.getExtents()[0].getDefiningOp(); !e || site.owner->isAncestor(e))
    return std::nullopt;
  Block &rb = site.red.getBody().front();
  Block &ob = site.owner.getBody().front();
  Value j = rb.getArgument(0);
  auto ry = cast<attn::YieldOp>(rb.getTerminator());
  Value y = ry.getValues()[0];
  if (y != r.getResult()) {
    auto mul = y.getDefiningOp<arith::MulFOp>();
    if (!mul || mul->getBlock() != &rb)
      return std::nullopt;
    if (mul.getLhs() == r.getResult())
      site.x = mul.getRhs();
    else if (mul.getRhs() == r.getResult())
      site.x = mul.getLhs();
    else
      return std::nullopt;
    if (dependsOn(site.x, r.getResult()))
      return std::nullopt;
  }
  // Subscripts: j once, every other one an index of the owner.
  bool seenJ = false;
  for (auto [p, sub] : llvm::enumerate(r.getIndices())) {
    if (sub == j) {
      if (seenJ)
        return std::nullopt;
      seenJ = true;
      site.jPos = p;
      continue;
    }
    auto ba = dyn_cast<BlockArgument>(sub);
    if (!ba || ba.getOwner() != &ob)
      return std::nullopt;
  }
  if (!seenJ)
    return std::nullopt;
  // A must not depend on j; B and X decide which of the owner's indices kx keeps.
  Block &sb = s.def.getBody().front();
  if (dependsOn(s.a, sb.getArgument(site.jPos)))
    return std::nullopt;
  llvm::SmallSetVector<unsigned, 8> keep;
  for (unsigned p : argsUsed(s.b, sb))
    if (p != site.jPos)
      keep.insert(cast<BlockArgument>(r.getIndices()[p]).getArgNumber());
  if (site.x)
    for (unsigned p : argsUsed(site.x, ob))
      keep.insert(p);
  site.keep.assign(keep.begin(), keep.end());
  llvm::sort(site.keep);
  return site;
}

// --- sizes -------------------------------------------------------------------------------------

// Products of extents, in double: only compared, and absurd sizes must not overflow.
struct Volume {
  DictionaryAttr est;
  llvm::SetVector<StringRef> missing;
  bool known = true;

  double operator()(ArrayRef<Value> extents) {
    double n = 1;
    for (Value e : extents) {
      auto x = evalIndex(e, est, missing);
      if (!x)
        known = false;
      else
        n *= double(std::max<int64_t>(*x, 0));
    }
    return n;
  }
};

SmallVector<Value> pick(ValueRange all, ArrayRef<unsigned> positions) {
  SmallVector<Value> out;
  for (unsigned p : positions)
    out.push_back(all[p]);
  return out;
}

// --- the rewrite -------------------------------------------------------------------------------

std::string indexName(Operation *holder, unsigned pos) {
  ArrayAttr names = isa<attn::DefineOp>(holder) ? cast<attn::DefineOp>(holder).getIndices()
                                                : cast<attn::ReduceOp>(holder).getIndices();
  return cast<StringAttr>(names[pos]).getValue().str();
}

// A sum over `extent` (index `name`) built at `b` by `build` from its index.
Value makeSum(OpBuilder &b, Location loc, Value extent, StringRef name,
              function_ref<Value(OpBuilder &, Value)> build) {
  auto red = b.create<attn::ReduceOp>(loc, b.getF32Type(), b.getStringAttr("sum"),
                                      ValueRange{extent}, b.getStrArrayAttr({name}));
  Block *body = new Block();
  red.getBody().push_back(body);
  Value arg = body->addArgument(b.getIndexType(), loc);
  OpBuilder rb = OpBuilder::atBlockEnd(body);
  rb.create<attn::YieldOp>(loc, ValueRange{build(rb, arg)});
  return red.getResult();
}

// A factor of s as its own pointwise definition over the indices it uses and d, or (a plain
// read) cloned where it is used.
struct Factor {
  Value v;
  SmallVector<unsigned> args; // s's indices it depends on
  bool dependsOnD = false;
  attn::DefineOp def; // null: cloned at each use

  // The factor at s's indices `sArgs` (mapped values) and d = `d`, built at `b`.
  Value at(OpBuilder &b, Score s, ArrayRef<Value> sArgs, Value d) {
    Location loc = s.def.getLoc();
    if (def) {
      SmallVector<Value> idx = pick(sArgs, args);
      if (dependsOnD)
        idx.push_back(d);
      return b.create<attn::ReadOp>(loc, b.getF32Type(), def.getResult(), idx,
                                    b.getStringAttr("none"));
    }
    IRMapping m;
    Block &sb = s.def.getBody().front();
    for (unsigned p = 0; p < sb.getNumArguments(); ++p)
      if (sArgs[p])
        m.map(sb.getArgument(p), sArgs[p]);
    m.map(s.red.getBody().front().getArgument(0), d);
    return materialize(v, s.def, m, b);
  }
};

Factor makeFactor(Value v, Score s, StringRef suffix) {
  Factor f;
  f.v = v;
  Block &sb = s.def.getBody().front();
  f.args = argsUsed(v, sb);
  Value d = s.red.getBody().front().getArgument(0);
  f.dependsOnD = dependsOn(v, d);
  Operation *op = v.getDefiningOp();
  bool trivial = !op || isa<attn::ReadOp, arith::ConstantOp>(op);
  if (trivial)
    return f;
  SmallVector<Value> extents = pick(s.def.getExtents(), f.args);
  SmallVector<std::string> names;
  llvm::StringSet<> taken;
  for (unsigned p : f.args)
    names.push_back(uniqueName(indexName(s.def, p), taken));
  if (f.dependsOnD) {
    extents.push_back(s.red.getExtents()[0]);
    names.push_back(uniqueName(indexName(s.red, 0), taken));
  }
  f.def = makeDefine(s.def, (s.def.getName() + suffix).str(), extents, names,
                     [&](OpBuilder &b, ValueRange args) {
                       IRMapping m;
                       for (auto [k, p] : llvm::enumerate(f.args))
                         m.map(sb.getArgument(p), args[k]);
                       if (f.dependsOnD)
                         m.map(d, args.back());
                       return materialize(v, s.def, m, b);
                     });
  return f;
}

void annotate(Operation *owner, StringRef source, StringRef order, std::optional<double> asWritten,
              std::optional<double> reassociated, StringRef reason) {
  auto count = [](std::optional<double> c) -> std::optional<int64_t> {
    return c ? std::optional<int64_t>(int64_t(*c)) : std::nullopt;
  };
  recordChoice(owner, "attn.contraction_order", source, order,
               {{"as_written", count(asWritten)}, {"reassociated", count(reassociated)}}, reason);
}

void rewriteSite(Site &site, Score &s, Factor &fa, Factor &fb, int n) {
  Block &ob = site.owner.getBody().front();
  Location loc = site.red.getLoc();
  Value dExt = s.red.getExtents()[0], jExt = site.red.getExtents()[0];
  std::string dName = indexName(s.red, 0), jName = indexName(site.red, 0);

  // kx(keep.., d, last) = sum(j) B * X, with the owner's innermost index kept innermost (the
  // vectorised one: both contractions then read their last operand contiguously).
  SmallVector<Value> extents = pick(site.owner.getExtents(), site.keep);
  llvm::StringSet<> taken;
  SmallVector<std::string> names;
  for (unsigned p : site.keep)
    names.push_back(uniqueName(indexName(site.owner, p), taken));
  unsigned dPos = extents.size();
  if (!site.keep.empty() && site.keep.back() == ob.getNumArguments() - 1)
    dPos = extents.size() - 1;
  extents.insert(extents.begin() + dPos, dExt);
  names.insert(names.begin() + dPos, uniqueName(dName, taken));
  std::string kxName = (s.def.getName() + "__kx_" + site.owner.getName()).str();
  ValueRange subs = site.read.getIndices();
  auto kx = makeDefine(site.owner, kxName, extents, names, [&](OpBuilder &b, ValueRange args) {
    SmallVector<Value> keepArgs(args.begin(), args.end());
    Value d = keepArgs[dPos];
    keepArgs.erase(keepArgs.begin() + dPos);
    return makeSum(b, loc, jExt, jName, [&](OpBuilder &rb, Value j) {
      // s's indices: j at jPos, the owner's kept indices elsewhere (those B uses are kept).
      SmallVector<Value> sArgs;
      IRMapping om;
      for (auto [k, p] : llvm::enumerate(site.keep))
        om.map(ob.getArgument(p), keepArgs[k]);
      om.map(site.red.getBody().front().getArgument(0), j);
      for (auto [p, sub] : llvm::enumerate(subs))
        sArgs.push_back(p == site.jPos ? j : om.lookupOrDefault(sub));
      Value bv = fb.at(rb, s, sArgs, d);
      if (!site.x)
        return bv;
      Value x = materialize(site.x, site.owner, om, rb);
      return rb.create<arith::MulFOp>(loc, bv, x).getResult();
    });
  });

  // The sum over j becomes [c *] sum(d) A(subs, d) * kx(keep.., d, ..).
  OpBuilder b(site.red);
  llvm::StringSet<> ownerNames;
  for (unsigned p = 0; p < ob.getNumArguments(); ++p)
    ownerNames.insert(indexName(site.owner, p));
  Value total = makeSum(b, loc, dExt, uniqueName(dName, ownerNames), [&](OpBuilder &rb, Value d) {
    SmallVector<Value> sArgs(subs.begin(), subs.end());
    sArgs[site.jPos] = Value(); // A does not use j
    Value av = fa.at(rb, s, sArgs, d);
    SmallVector<Value> idx = pick(ob.getArguments(), site.keep);
    idx.insert(idx.begin() + dPos, d);
    Value k = rb.create<attn::ReadOp>(loc, rb.getF32Type(), kx.getResult(), idx,
                                      rb.getStringAttr("none"));
    return rb.create<arith::MulFOp>(loc, av, k).getResult();
  });
  if (s.scale) {
    IRMapping none;
    Value c = materialize(s.scale, s.def, none, b);
    total = s.divide ? b.create<arith::DivFOp>(loc, total, c).getResult()
                     : b.create<arith::MulFOp>(loc, c, total).getResult();
  }
  site.red.getResult().replaceAllUsesWith(total);
  site.red->erase();
}

void processKernel(attn::KernelOp kernel) {
  auto est = kernel->getAttrOfType<DictionaryAttr>(kEstimatesAttr);
  SmallVector<attn::DefineOp> defs;
  for (auto d : kernel.getBody().front().getOps<attn::DefineOp>())
    defs.push_back(d);
  for (attn::DefineOp def : defs) {
    auto s = matchScore(def);
    if (!s)
      continue;
    SmallVector<Site> sites;
    bool all = !def.getResult().use_empty();
    for (Operation *u : def.getResult().getUsers()) {
      auto r = dyn_cast<attn::ReadOp>(u);
      std::optional<Site> site = r ? matchSite(r, *s) : std::nullopt;
      if (!site) {
        all = false;
        break;
      }
      sites.push_back(std::move(*site));
    }
    if (!all)
      continue;

    // Multiply-adds of each order: the score and its sums, against the factors, kx and the new
    // sums over d.
    Volume vol{est};
    Value dExt = s->red.getExtents()[0];
    SmallVector<Value> ext(def.getExtents());
    ext.push_back(dExt);
    double asWritten = vol(ext), reassociated = 0;
    Block &sb = def.getBody().front();
    for (Value f : {s->a, s->b}) {
      Operation *op = f.getDefiningOp();
      if (op && !isa<attn::ReadOp, arith::ConstantOp>(op)) {
        SmallVector<Value> fe = pick(def.getExtents(), argsUsed(f, sb));
        fe.push_back(dExt);
        reassociated += vol(fe);
      }
    }
    for (Site &site : sites) {
      SmallVector<Value> oe(site.owner.getExtents());
      oe.push_back(site.red.getExtents()[0]);
      asWritten += vol(oe);
      oe.back() = dExt;
      reassociated += vol(oe);
      SmallVector<Value> ke = pick(site.owner.getExtents(), site.keep);
      ke.push_back(dExt);
      ke.push_back(site.red.getExtents()[0]);
      reassociated += vol(ke);
    }
    std::string source = def.getName().str();
    if (!vol.known) {
      std::string reason = "no size estimate for";
      for (StringRef m : vol.missing)
        reason += " " + m.str();
      reason += "; kept as written";
      for (Site &site : sites)
        annotate(site.owner, source, "as-written", std::nullopt, std::nullopt, reason);
      continue;
    }
    if (!(reassociated < asWritten)) {
      for (Site &site : sites)
        annotate(site.owner, source, "as-written", asWritten, reassociated, "");
      continue;
    }
    Factor fa = makeFactor(s->a, *s, "__lhs"), fb = makeFactor(s->b, *s, "__rhs");
    for (auto [n, site] : llvm::enumerate(sites)) {
      annotate(site.owner, source, "reassociated", asWritten, reassociated, "");
      rewriteSite(site, *s, fa, fb, int(n));
    }
    if (def.getResult().use_empty())
      def->erase();
  }
}

struct ContractionOrderPass : impl::ContractionOrderPassBase<ContractionOrderPass> {
  void runOnOperation() override {
    for (auto k : getOperation().getOps<attn::KernelOp>())
      processKernel(k);
  }
};

} // namespace

} // namespace attnc
