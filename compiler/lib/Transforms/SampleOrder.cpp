// attn-sample-order: chooses sample-then-project or project-then-sample for projections read by sampling.
//
// A projection v(a...) = sum_c x(..., c) * w(..., c) [+ bias(...)] read by bilinear sampling can
// be computed over the whole map and then sampled (as written), or the sampler can read x and
// project each sampled point: sampling is linear in v, so F[v] = sum_c w(.., c) * F[x(.., c)]
// (+ bias * F[1]). Seed 000 prices the two as N_k * C^2 (project every key) against
// N_q * K * C^2 (project every sampled key); here the first is prod(v's extents) * C and the
// second prod(the reading site's iteration space) * C, which are those numbers for the bundled
// variants and the same rule for any user's kernel.
#include "attnc/Transforms/Passes.h"

#include "IRUtils.h"
#include "attnc/Dialect/AttnOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallBitVector.h"
#include "llvm/ADT/StringSet.h"

#include <optional>

using namespace mlir;

namespace attnc {

bool parseSampleOrder(const std::string &s, SampleOrder *out) {
  if (s == "auto")
    *out = SampleOrder::Auto;
  else if (s == "sample-first")
    *out = SampleOrder::SampleFirst;
  else if (s == "project-first")
    *out = SampleOrder::ProjectFirst;
  else
    return false;
  return true;
}

const char *sampleOrderName(SampleOrder o) {
  switch (o) {
  case SampleOrder::Auto:
    return "auto";
  case SampleOrder::SampleFirst:
    return "sample-first";
  case SampleOrder::ProjectFirst:
    return "project-first";
  }
  llvm_unreachable("unknown SampleOrder");
}

#define GEN_PASS_DEF_SAMPLEORDERPASS
#include "attnc/Transforms/Passes.h.inc"

namespace {

// --- the projection ----------------------------------------------------------------------------

// How one subscript of a read inside the projection is formed.
struct IndexUse {
  enum Kind { Arg, Red, Inv } kind; // v's index `arg`, the contracted index c, or an invariant
  unsigned arg = 0;
  Value inv;
};

// One operand of the product x * w: the read and its subscripts.
struct Factor {
  attn::ReadOp read;
  SmallVector<IndexUse> idx;
  llvm::SmallBitVector args; // the v indices this factor uses
};

struct Projection {
  attn::DefineOp def;
  attn::ReduceOp red;
  Factor f[2]; // in the order of the mulf operands
  std::optional<Factor> bias;
};

// Reads `i` in `body` (v's block) or `rb` (the reduction's) as an IndexUse.
std::optional<IndexUse> classify(Value i, Operation *def, Block *body, Block *rb) {
  if (auto ba = dyn_cast<BlockArgument>(i)) {
    if (ba.getOwner() == body)
      return IndexUse{IndexUse::Arg, ba.getArgNumber(), {}};
    if (ba.getOwner() == rb)
      return IndexUse{IndexUse::Red, 0, {}};
    return std::nullopt;
  }
  Operation *d = i.getDefiningOp();
  if (!def->isAncestor(d) || isa<arith::ConstantOp>(d))
    return IndexUse{IndexUse::Inv, 0, i};
  return std::nullopt;
}

std::optional<Factor> factorOf(attn::ReadOp r, Operation *def, Block *body, Block *rb,
                               unsigned nargs) {
  if (!r || r.getBoundary() != "none")
    return std::nullopt;
  Factor f;
  f.read = r;
  f.args.resize(nargs);
  for (Value i : r.getIndices()) {
    auto u = classify(i, def, body, rb);
    if (!u)
      return std::nullopt;
    if (u->kind == IndexUse::Arg) {
      if (f.args.test(u->arg))
        return std::nullopt; // x(i, i): not a plain contraction
      f.args.set(u->arg);
    }
    f.idx.push_back(*u);
  }
  return f;
}

std::optional<Projection> matchProjection(attn::DefineOp def) {
  Block &body = def.getBody().front();
  Value y = cast<attn::YieldOp>(body.getTerminator()).getValues()[0];
  if (!y.getType().isF32())
    return std::nullopt;
  Projection p;
  p.def = def;
  unsigned nargs = body.getNumArguments();
  attn::ReadOp biasRead;
  p.red = y.getDefiningOp<attn::ReduceOp>();
  if (!p.red) {
    auto add = y.getDefiningOp<arith::AddFOp>();
    if (!add)
      return std::nullopt;
    for (int s = 0; s < 2 && !p.red; ++s)
      if ((p.red = add->getOperand(s).getDefiningOp<attn::ReduceOp>()))
        biasRead = add->getOperand(1 - s).getDefiningOp<attn::ReadOp>();
    if (!p.red || !biasRead || biasRead->getBlock() != &body)
      return std::nullopt;
  }
  if (p.red->getBlock() != &body || p.red.getKind() != "sum" || p.red.getExtents().size() != 1 ||
      !p.red->hasOneUse())
    return std::nullopt;
  Block &rb = p.red.getBody().front();
  auto mul = cast<attn::YieldOp>(rb.getTerminator()).getValues()[0].getDefiningOp<arith::MulFOp>();
  if (!mul || mul->getBlock() != &rb)
    return std::nullopt;
  for (int s = 0; s < 2; ++s) {
    auto r = mul->getOperand(s).getDefiningOp<attn::ReadOp>();
    if (!r || r->getBlock() != &rb)
      return std::nullopt;
    auto f = factorOf(r, def, &body, &rb, nargs);
    if (!f)
      return std::nullopt;
    int reds = 0;
    for (const IndexUse &u : f->idx)
      reds += u.kind == IndexUse::Red;
    if (reds != 1)
      return std::nullopt; // c must subscript both factors exactly once
    p.f[s] = *f;
  }
  // Every index of v subscripts exactly one factor.
  if ((p.f[0].args & p.f[1].args).any() || (p.f[0].args | p.f[1].args).count() != nargs)
    return std::nullopt;
  // The contracted extent must be computable outside v (where the rewrite puts the reduction).
  Value cext = p.red.getExtents()[0];
  if (def->isAncestor(cext.getDefiningOp()) && !cext.getDefiningOp<arith::ConstantOp>())
    return std::nullopt;
  if (biasRead) {
    auto f = factorOf(biasRead, def, &body, &rb, nargs);
    if (!f)
      return std::nullopt;
    for (const IndexUse &u : f->idx)
      if (u.kind == IndexUse::Red)
        return std::nullopt;
    p.bias = *f;
  }
  return p;
}

// --- size estimates ----------------------------------------------------------------------------

// The product of extents, saturating so that absurd estimates cannot overflow.
std::optional<int64_t> volume(ValueRange extents, DictionaryAttr est,
                              llvm::SetVector<StringRef> &missing) {
  int64_t n = 1;
  bool known = true;
  for (Value e : extents) {
    auto x = evalIndex(e, est, missing);
    if (!x)
      known = false;
    else
      n = (*x <= 0 || n > (int64_t(1) << 62) / std::max<int64_t>(*x, 1))
              ? (*x <= 0 ? 0 : int64_t(1) << 62)
              : n * *x;
  }
  if (!known)
    return std::nullopt;
  return n;
}

// --- reading sites -----------------------------------------------------------------------------

// The reads of v in one block, the expression F they feed (linear in v) and how to rebuild it.
struct Site {
  Block *block = nullptr;
  SmallVector<attn::ReadOp> reads;
  Operation *owner = nullptr;        // the kernel-level definition containing the site
  SmallVector<Block *> chain;        // owner's body, the reductions' bodies, ..., block
  Operation *root = nullptr;         // F's root
  llvm::SetVector<Operation *> fOps; // F's operations (in block order, root last)
  int sampled = 0;                   // which factor of the projection is sampled (x)
};

ValueRange extentsOf(Operation *op) {
  if (auto d = dyn_cast<attn::DefineOp>(op))
    return d.getExtents();
  if (auto s = dyn_cast<attn::SoftmaxOp>(op))
    return s.getExtents();
  return cast<attn::ReduceOp>(op).getExtents();
}
ArrayAttr indexNamesOf(Operation *op) {
  if (auto d = dyn_cast<attn::DefineOp>(op))
    return d.getIndices();
  if (auto s = dyn_cast<attn::SoftmaxOp>(op))
    return s.getIndices();
  return cast<attn::ReduceOp>(op).getIndices();
}

bool isZeroConstant(Value v) {
  auto c = v.getDefiningOp<arith::ConstantOp>();
  auto f = c ? dyn_cast<FloatAttr>(c.getValue()) : FloatAttr();
  return f && f.getValue().isZero();
}

// Whether op, one of F's operations, keeps F linear (homogeneous) in the reads of v.
bool isLinearStep(Operation *op, const llvm::SetVector<Operation *> &dep) {
  auto inDep = [&](Value v) { return v.getDefiningOp() && dep.contains(v.getDefiningOp()); };
  if (isa<attn::ReadOp>(op))
    return true;
  if (isa<arith::AddFOp, arith::SubFOp>(op))
    return inDep(op->getOperand(0)) && inDep(op->getOperand(1));
  if (isa<arith::MulFOp>(op))
    return inDep(op->getOperand(0)) != inDep(op->getOperand(1));
  if (isa<arith::DivFOp>(op))
    return inDep(op->getOperand(0)) && !inDep(op->getOperand(1));
  if (isa<arith::NegFOp>(op))
    return true;
  if (auto sel = dyn_cast<arith::SelectOp>(op)) {
    if (inDep(sel.getCondition()))
      return false;
    for (Value b : {sel.getTrueValue(), sel.getFalseValue()})
      if (!inDep(b) && !isZeroConstant(b))
        return false;
    return true;
  }
  return false;
}

// Whether `ext` (an extent of v) and dimension `pos` of `tensor` are the same size.
bool sameExtent(Value ext, Value tensor, unsigned pos, attn::KernelOp kernel) {
  auto constOf = [](Value v) -> std::optional<int64_t> {
    if (auto c = v.getDefiningOp<arith::ConstantIndexOp>())
      return c.value();
    return std::nullopt;
  };
  auto sizeOf = [](Value v) -> std::optional<StringRef> {
    if (auto d = v.getDefiningOp<attn::DimOp>())
      return d.getSize();
    return std::nullopt;
  };
  if (auto ba = dyn_cast<BlockArgument>(tensor)) {
    if (ba.getOwner() != &kernel.getBody().front())
      return false;
    const attnc::Dim dim = kernel.getInputType(ba.getArgNumber()).dims[pos];
    if (auto s = sizeOf(ext))
      return dim.symbol() && *s == dim.symbol_name();
    if (auto c = constOf(ext))
      return dim.literal() && *c == dim.literal_value();
    return false;
  }
  Operation *d = tensor.getDefiningOp();
  if (!isa<attn::DefineOp, attn::SoftmaxOp>(d))
    return false;
  Value other = extentsOf(d)[pos];
  if (other == ext)
    return true;
  if (auto a = sizeOf(ext), b = sizeOf(other); a && b)
    return *a == *b;
  if (auto a = constOf(ext), b = constOf(other); a && b)
    return *a == *b;
  return false;
}

// Finds F for the reads of v in `block`; nullopt when the site is not a linear sampling of v.
std::optional<Site> analyseSite(Block *block, SmallVector<attn::ReadOp> reads, Projection &p,
                                attn::KernelOp kernel) {
  Site s;
  s.block = block;
  s.reads = std::move(reads);
  // The chain of regions up to the kernel-level definition.
  for (Operation *op = block->getParentOp();; op = op->getParentOp()) {
    if (!op || isa<attn::KernelOp>(op))
      return std::nullopt;
    if (!isa<attn::DefineOp, attn::SoftmaxOp, attn::ReduceOp>(op))
      return std::nullopt;
    s.chain.insert(s.chain.begin(), &op->getRegion(0).front());
    if (isa<attn::KernelOp>(op->getParentOp())) {
      s.owner = op;
      break;
    }
  }
  // Which factor is sampled: the one whose subscripts cover every index of v that the reads
  // compute or vary; the other factor's subscripts must be the same values in every read.
  unsigned nargs = p.def.getBody().getNumArguments();
  llvm::SmallBitVector varying(nargs);
  auto isPlain = [&](Value v) {
    if (auto ba = dyn_cast<BlockArgument>(v))
      return llvm::is_contained(s.chain, ba.getOwner());
    return !s.owner->isAncestor(v.getDefiningOp());
  };
  for (attn::ReadOp r : s.reads)
    for (unsigned k = 0; k < nargs; ++k)
      if (!isPlain(r.getIndices()[k]) || r.getIndices()[k] != s.reads[0].getIndices()[k])
        varying.set(k);
  if (varying.none())
    return std::nullopt; // plain reads: nothing is sampled
  s.sampled = -1;
  for (int f = 0; f < 2; ++f)
    if ((varying & ~p.f[f].args).none())
      s.sampled = f;
  if (s.sampled < 0)
    return std::nullopt;
  if (p.bias && (p.bias->args & p.f[s.sampled].args).any())
    return std::nullopt;
  // The sampled factor's tensor must have v's extents on v's sampled indices, so that v's
  // boundary modes mean the same on it.
  Factor &xf = p.f[s.sampled];
  for (auto [pos, u] : llvm::enumerate(xf.idx))
    if (u.kind == IndexUse::Arg &&
        !sameExtent(p.def.getExtents()[u.arg], xf.read.getTensor(), pos, kernel))
      return std::nullopt;

  // F: the operations of the block that depend on the reads, which must stay in the block.
  llvm::SetVector<Operation *> dep;
  llvm::DenseMap<Operation *, llvm::SmallBitVector> cover;
  for (auto [i, r] : llvm::enumerate(s.reads)) {
    cover[r] = llvm::SmallBitVector(s.reads.size());
    cover[r].set(i);
  }
  for (Operation &op : *block) {
    if (cover.count(&op) && isa<attn::ReadOp>(op) &&
        llvm::is_contained(s.reads, cast<attn::ReadOp>(op))) {
      dep.insert(&op);
      if (!s.root && cover[&op].all())
        s.root = &op;
      continue;
    }
    llvm::SmallBitVector c(s.reads.size());
    bool uses = false;
    for (Value o : op.getOperands())
      if (Operation *d = o.getDefiningOp(); d && dep.contains(d)) {
        c |= cover[d];
        uses = true;
      }
    bool nested = false;
    op.walk([&](Operation *inner) {
      if (inner == &op)
        return;
      for (Value o : inner->getOperands())
        if (Operation *d = o.getDefiningOp(); d && dep.contains(d))
          nested = true;
    });
    if (nested)
      return std::nullopt;
    if (!uses)
      continue;
    if (op.hasTrait<OpTrait::IsTerminator>())
      break;
    dep.insert(&op);
    cover[&op] = c;
    if (!s.root && c.all())
      s.root = &op;
  }
  if (!s.root)
    return std::nullopt;
  // F's operations: the root's backward slice within dep. Nothing outside F may use them.
  SmallVector<Operation *> work{s.root};
  llvm::SmallPtrSet<Operation *, 32> inF;
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (!inF.insert(op).second)
      continue;
    for (Value o : op->getOperands())
      if (Operation *d = o.getDefiningOp(); d && dep.contains(d))
        work.push_back(d);
  }
  for (Operation *op : dep)
    if (inF.count(op))
      s.fOps.insert(op);
  for (Operation *op : s.fOps) {
    if (!isLinearStep(op, dep))
      return std::nullopt;
    if (op == s.root)
      continue;
    for (Operation *u : op->getUsers())
      if (!inF.count(u))
        return std::nullopt;
  }
  for (attn::ReadOp r : s.reads)
    if (!inF.count(r))
      return std::nullopt;
  // The other factor's subscripts (and the bias's) are the same values in every read.
  for (attn::ReadOp r : s.reads)
    for (unsigned k = 0; k < nargs; ++k)
      if (!p.f[s.sampled].args.test(k) && r.getIndices()[k] != s.reads[0].getIndices()[k])
        return std::nullopt;
  return s;
}

// --- the rewrite -------------------------------------------------------------------------------

// Recreates `v` (an extent or an invariant subscript) before `at`: values defined outside
// `scope` are used as they are, constants and pure index arithmetic inside it are cloned.
Value hoist(Value v, Operation *scope, OpBuilder &b, IRMapping &m) {
  if (m.contains(v))
    return m.lookup(v);
  Operation *d = v.getDefiningOp();
  if (!d)
    return isa<BlockArgument>(v) &&
                   !scope->isAncestor(cast<BlockArgument>(v).getOwner()->getParentOp())
               ? v
               : Value();
  if (!scope->isAncestor(d))
    return v;
  if (d->getNumRegions() || !isPure(d) || d->getNumResults() != 1)
    return Value();
  for (Value o : d->getOperands())
    if (!hoist(o, scope, b, m))
      return Value();
  Operation *c = b.clone(*d, m);
  return c->getResult(0);
}

// The subscripts of factor `f` at a read of v (`vread`): v's indices become the read's
// subscripts, c becomes `c`, invariants are recreated at the builder's point.
SmallVector<Value> factorIndices(Factor &f, ValueRange vreadIdx, Value c, Operation *def,
                                 OpBuilder &b, IRMapping &m) {
  SmallVector<Value> idx;
  for (const IndexUse &u : f.idx) {
    if (u.kind == IndexUse::Arg)
      idx.push_back(m.lookupOrDefault(vreadIdx[u.arg]));
    else if (u.kind == IndexUse::Red)
      idx.push_back(c);
    else
      idx.push_back(hoist(u.inv, def, b, m));
  }
  return idx;
}

struct Rewriter {
  attn::KernelOp kernel;
  Projection &p;
  int counter = 0;

  // The name of the sampled definition: `<v>__sample`, `<v>__sample2`, ...
  std::string newName() {
    ++counter;
    return p.def.getName().str() + "__sample" + (counter > 1 ? std::to_string(counter) : "");
  }

  // Where the `.zero` read `r` of v is inside v (its sampled subscripts within v's extents),
  // built at `b`; null for a read of another boundary mode, which is always in range.
  Value inRange(attn::ReadOp r, const Factor &xf, OpBuilder &b, IRMapping &m) {
    if (r.getBoundary() != "zero")
      return Value();
    Location loc = r.getLoc();
    Value in, zero;
    for (const IndexUse &u : xf.idx) {
      if (u.kind != IndexUse::Arg)
        continue;
      if (!zero)
        zero = b.create<arith::ConstantIndexOp>(loc, 0);
      Value i = r.getIndices()[u.arg];
      Value ext = hoist(p.def.getExtents()[u.arg], p.def, b, m);
      Value both = b.create<arith::AndIOp>(
          loc, b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::sge, i, zero),
          b.create<arith::CmpIOp>(loc, arith::CmpIPredicate::slt, i, ext));
      in = in ? (Value)b.create<arith::AndIOp>(loc, in, both) : both;
    }
    return in;
  }

  // Where the selects between the read `r` of v and F's root keep r's term: the conjunction of
  // the conditions of those whose other branch is the constant 0 (bilinear_map's corners,
  // `select(inside, w * v.clamp(..), 0)`), taken below the first value with several users (above
  // it, r's term also flows elsewhere). Null where there is none. The conditions are read from
  // clones of F's operations at `b` (made once, into `cm`; r's reads of v become 0).
  Value selectGuard(attn::ReadOp r, Site &s, OpBuilder &b, IRMapping &cm) {
    auto isZero = [](Value v) {
      auto c = v.getDefiningOp<arith::ConstantOp>();
      auto f = c ? dyn_cast<FloatAttr>(c.getValue()) : FloatAttr();
      return f && f.getValue().isZero();
    };
    Location loc = r.getLoc();
    Value guard, v = r.getResult();
    while (v != s.root->getResult(0) && v.hasOneUse()) {
      Operation *user = *v.getUsers().begin();
      if (!s.fOps.contains(user))
        break;
      if (auto sel = dyn_cast<arith::SelectOp>(user)) {
        Value c;
        if (v == sel.getTrueValue() && v != sel.getFalseValue() && isZero(sel.getFalseValue()))
          c = sel.getCondition();
        else if (v == sel.getFalseValue() && v != sel.getTrueValue() && isZero(sel.getTrueValue()))
          c = sel.getCondition();
        if (c) {
          if (cm.getValueMap().empty())
            for (Operation *op : s.fOps) {
              auto rd = dyn_cast<attn::ReadOp>(op);
              if (rd && llvm::is_contained(s.reads, rd))
                cm.map(rd.getResult(), b.create<arith::ConstantOp>(loc, b.getF32FloatAttr(0.0f)));
              else if (op != s.root)
                b.clone(*op, cm);
            }
          c = cm.lookupOrDefault(c);
          if (v == sel.getFalseValue())
            c = b.create<arith::XOrIOp>(loc, c,
                                        b.create<arith::ConstantOp>(loc, b.getBoolAttr(true)));
          guard = guard ? (Value)b.create<arith::AndIOp>(loc, guard, c) : c;
        }
      }
      v = user->getResult(0);
    }
    return guard;
  }

  // Rewrites one site to sample-then-project; false (and nothing changed) if it cannot.
  bool rewrite(Site &s) {
    Operation *owner = s.owner;
    Factor &xf = p.f[s.sampled];
    Factor &wf = p.f[1 - s.sampled];
    // The slice of the owner that F needs, with the chain's indices it uses.
    llvm::SetVector<Operation *> slice;
    llvm::SetVector<Value> usedArgs;
    bool ok = true;
    std::function<void(Value)> visit = [&](Value v) {
      if (auto ba = dyn_cast<BlockArgument>(v)) {
        if (llvm::is_contained(s.chain, ba.getOwner()))
          usedArgs.insert(v);
        return;
      }
      Operation *d = v.getDefiningOp();
      if (!owner->isAncestor(d) || slice.contains(d))
        return;
      if (!llvm::is_contained(s.chain, d->getBlock())) {
        ok = false;
        return;
      }
      slice.insert(d);
      if (auto r = dyn_cast<attn::ReadOp>(d); r && llvm::is_contained(s.reads, r)) {
        for (const IndexUse &u : xf.idx)
          if (u.kind == IndexUse::Arg)
            visit(r.getIndices()[u.arg]);
        return;
      }
      for (Value o : d->getOperands())
        visit(o);
      d->walk([&](Operation *inner) {
        for (Value o : inner->getOperands()) {
          Region *r = o.getParentRegion();
          if (!d->isAncestor(r->getParentOp()))
            visit(o);
        }
      });
    };
    visit(s.root->getResult(0));
    if (!ok)
      return false;
    auto depth = [&](Operation *op) {
      return llvm::find(s.chain, op->getBlock()) - s.chain.begin();
    };
    SmallVector<Operation *> order(slice.begin(), slice.end());
    llvm::sort(order, [&](Operation *a, Operation *b) {
      if (depth(a) != depth(b))
        return depth(a) < depth(b);
      return a->isBeforeInBlock(b);
    });
    SmallVector<Value> args(usedArgs.begin(), usedArgs.end());
    auto argDepth = [&](Value v) {
      return llvm::find(s.chain, cast<BlockArgument>(v).getOwner()) - s.chain.begin();
    };
    llvm::sort(args, [&](Value a, Value b) {
      if (argDepth(a) != argDepth(b))
        return argDepth(a) < argDepth(b);
      return cast<BlockArgument>(a).getArgNumber() < cast<BlockArgument>(b).getArgNumber();
    });

    // The sampled definition, just before the owner.
    OpBuilder b(owner);
    IRMapping hoisted;
    SmallVector<Value> extents;
    SmallVector<int64_t> shape;
    SmallVector<Attribute> names;
    llvm::StringSet<> taken;
    auto uniqueName = [&](StringRef n) {
      std::string name = n.str();
      for (int i = 2; !taken.insert(name).second; ++i)
        name = n.str() + "_" + std::to_string(i);
      return name;
    };
    for (Value a : args) {
      auto ba = cast<BlockArgument>(a);
      Operation *holder = ba.getOwner()->getParentOp();
      Value e = hoist(extentsOf(holder)[ba.getArgNumber()], owner, b, hoisted);
      if (!e)
        return false;
      extents.push_back(e);
      names.push_back(b.getStringAttr(
          uniqueName(cast<StringAttr>(indexNamesOf(holder)[ba.getArgNumber()]).getValue())));
    }
    Value cext = hoist(p.red.getExtents()[0], p.def, b, hoisted);
    extents.push_back(cext);
    names.push_back(
        b.getStringAttr(uniqueName(cast<StringAttr>(p.red.getIndices()[0]).getValue())));
    for (Value e : extents) {
      auto c = e.getDefiningOp<arith::ConstantIndexOp>();
      shape.push_back(c ? c.value() : ShapedType::kDynamic);
    }
    auto type = RankedTensorType::get(shape, b.getF32Type());
    auto xs =
        b.create<attn::DefineOp>(owner->getLoc(), type, newName(), extents, b.getArrayAttr(names));
    {
      Block *body = new Block();
      xs.getBody().push_back(body);
      IRMapping m;
      for (Value a : args)
        m.map(a, body->addArgument(b.getIndexType(), a.getLoc()));
      Value c = body->addArgument(b.getIndexType(), owner->getLoc());
      OpBuilder ib = OpBuilder::atBlockEnd(body);
      for (Operation *op : order) {
        auto r = dyn_cast<attn::ReadOp>(op);
        if (r && llvm::is_contained(s.reads, r)) {
          SmallVector<Value> idx = factorIndices(xf, r.getIndices(), c, p.def, ib, m);
          auto x = ib.create<attn::ReadOp>(r.getLoc(), b.getF32Type(), xf.read.getTensor(), idx,
                                           r.getBoundaryAttr());
          m.map(r.getResult(), x.getResult());
        } else {
          ib.clone(*op, m);
        }
      }
      ib.create<attn::YieldOp>(owner->getLoc(), ValueRange{m.lookup(s.root->getResult(0))});
    }

    // F becomes sum_c w(.., c) * xs(.., c), plus bias * F[1].
    OpBuilder fb(s.root->getBlock(), ++Block::iterator(s.root));
    Location loc = s.root->getLoc();
    IRMapping none;
    ValueRange v0 = s.reads[0].getIndices();
    auto red = fb.create<attn::ReduceOp>(loc, fb.getF32Type(), "sum", ValueRange{cext},
                                         fb.getArrayAttr({names.back()}));
    {
      Block *body = new Block();
      red.getBody().push_back(body);
      Value c = body->addArgument(fb.getIndexType(), loc);
      OpBuilder rb = OpBuilder::atBlockEnd(body);
      SmallVector<Value> xsIdx(args.begin(), args.end());
      xsIdx.push_back(c);
      Value sx = rb.create<attn::ReadOp>(loc, rb.getF32Type(), xs.getResult(), xsIdx,
                                         rb.getStringAttr("none"));
      Value w = rb.create<attn::ReadOp>(loc, rb.getF32Type(), wf.read.getTensor(),
                                        factorIndices(wf, v0, c, p.def, rb, none),
                                        rb.getStringAttr("none"));
      Value prod = s.sampled == 0 ? rb.create<arith::MulFOp>(loc, sx, w)
                                  : rb.create<arith::MulFOp>(loc, w, sx);
      rb.create<attn::YieldOp>(loc, ValueRange{prod});
    }
    Value total = red.getResult();
    if (p.bias) {
      // F[1]: each read of v replaced by 1 where it is in range (its boundary mode decides).
      IRMapping m;
      for (Operation *op : s.fOps) {
        auto r = dyn_cast<attn::ReadOp>(op);
        if (!r || !llvm::is_contained(s.reads, r)) {
          fb.clone(*op, m);
          continue;
        }
        Value one = fb.create<arith::ConstantOp>(loc, fb.getF32FloatAttr(1.0f));
        if (Value in = inRange(r, xf, fb, m))
          one = fb.create<arith::SelectOp>(
              loc, in, one, fb.create<arith::ConstantOp>(loc, fb.getF32FloatAttr(0.0f)));
        m.map(r.getResult(), one);
      }
      Value f1 = m.lookup(s.root->getResult(0));
      Value bias = fb.create<attn::ReadOp>(loc, fb.getF32Type(), p.bias->read.getTensor(),
                                           factorIndices(*p.bias, v0, Value(), p.def, fb, none),
                                           fb.getStringAttr("none"));
      total = fb.create<arith::AddFOp>(loc, total, fb.create<arith::MulFOp>(loc, bias, f1));
    }
    // A sample whose every read of v is a structural zero (docs/language.md §6: a `.zero` read
    // outside v, or one under a select that gives 0 there) is 0 as written, whatever the
    // weights w_k; reordered, it would be sum_c w(.., c) * 0 + bias * 0, NaN for an infinite
    // projection weight or bias. So F is 0 there.
    {
      Value anyIn;
      bool always = false;
      IRMapping m, cm;
      for (attn::ReadOp r : s.reads) {
        Value in = inRange(r, xf, fb, m);
        if (Value g = selectGuard(r, s, fb, cm))
          in = in ? (Value)fb.create<arith::AndIOp>(loc, in, g) : g;
        if (!in) {
          always = true;
          break;
        }
        anyIn = anyIn ? (Value)fb.create<arith::OrIOp>(loc, anyIn, in) : in;
      }
      if (!always && anyIn)
        total = fb.create<arith::SelectOp>(
            loc, anyIn, total, fb.create<arith::ConstantOp>(loc, fb.getF32FloatAttr(0.0f)));
    }
    s.root->getResult(0).replaceAllUsesWith(total);
    for (Operation *op : llvm::reverse(s.fOps))
      op->erase();
    // The coordinates and weights now live in the sampled definition; drop the dead copies.
    for (Block *blk : llvm::reverse(s.chain))
      for (Operation &op : llvm::make_early_inc_range(llvm::reverse(*blk)))
        if (isOpTriviallyDead(&op))
          op.erase();
    return true;
  }
};

void annotate(Operation *owner, StringRef source, StringRef order, std::optional<int64_t> pf,
              std::optional<int64_t> sf, StringRef reason) {
  recordChoice(owner, "attn.sample_order", source, order,
               {{"project_then_sample", pf}, {"sample_then_project", sf}}, reason);
}

void processKernel(attn::KernelOp kernel, SampleOrder mode) {
  auto est = kernel->getAttrOfType<DictionaryAttr>(kEstimatesAttr);
  SmallVector<attn::DefineOp> defs;
  for (auto d : kernel.getBody().front().getOps<attn::DefineOp>())
    defs.push_back(d);
  for (attn::DefineOp def : defs) {
    auto p = matchProjection(def);
    if (!p)
      continue;
    // Every use must be a read in a site that samples v linearly; outputs stay as they are.
    llvm::MapVector<Block *, SmallVector<attn::ReadOp>> byBlock;
    bool allReads = !def.getResult().use_empty();
    for (Operation *u : def.getResult().getUsers()) {
      auto r = dyn_cast<attn::ReadOp>(u);
      if (!r)
        allReads = false;
      else
        byBlock[r->getBlock()].push_back(r);
    }
    if (!allReads)
      continue;
    SmallVector<Site> sites;
    for (auto &[block, reads] : byBlock) {
      auto s = analyseSite(block, reads, *p, kernel);
      if (!s)
        break;
      sites.push_back(std::move(*s));
    }
    if (sites.size() != byBlock.size())
      continue;

    llvm::SetVector<StringRef> missing;
    SmallVector<Value> pfExt(def.getExtents().begin(), def.getExtents().end());
    pfExt.push_back(p->red.getExtents()[0]);
    std::optional<int64_t> pf = volume(pfExt, est, missing), sf = int64_t(0);
    for (const Site &s : sites) {
      SmallVector<Value> ext;
      for (Block *b : s.chain)
        for (Value e : extentsOf(b->getParentOp()))
          ext.push_back(e);
      ext.push_back(p->red.getExtents()[0]);
      auto v = volume(ext, est, missing);
      sf = sf && v ? std::optional<int64_t>(*sf + *v) : std::nullopt;
    }
    bool sample =
        mode == SampleOrder::SampleFirst || (mode == SampleOrder::Auto && pf && sf && *sf < *pf);
    std::string reason;
    if (mode == SampleOrder::SampleFirst)
      reason = "forced by --sample-order=sample-first";
    else if (mode == SampleOrder::ProjectFirst)
      reason = "forced by --sample-order=project-first";
    else if (!pf || !sf) {
      reason = "no size estimate for";
      for (StringRef m : missing)
        reason += " " + m.str();
      reason += "; kept as written";
    }
    StringRef name = def.getName();
    std::string source = name.str();
    if (sample) {
      Rewriter rw{kernel, *p};
      for (Site &s : sites) {
        Operation *owner = s.owner;
        bool done = rw.rewrite(s);
        annotate(owner, source, done ? "sample-then-project" : "project-then-sample", pf, sf,
                 done ? reason
                      : std::string(
                            "the sampled expression could not be rebuilt outside its definition"));
      }
      if (def.getResult().use_empty())
        def->erase();
    } else {
      for (Site &s : sites)
        annotate(s.owner, source, "project-then-sample", pf, sf, reason);
    }
  }
}

struct SampleOrderPass : impl::SampleOrderPassBase<SampleOrderPass> {
  using Base::Base;

  void runOnOperation() override {
    SampleOrder mode;
    if (!parseSampleOrder(order, &mode)) {
      getOperation().emitError("attn-sample-order: unknown order '")
          << order << "' (auto, sample-first or project-first)";
      return signalPassFailure();
    }
    for (auto k : getOperation().getOps<attn::KernelOp>())
      processKernel(k, mode);
  }
};

} // namespace

} // namespace attnc
