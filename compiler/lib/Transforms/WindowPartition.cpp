// attn-window-partition: rewrites attention over non-overlapping windows written on the image (keys at `(ry / ws) * ws + u`) into window coordinates.
//
// Swin's window attention is most naturally written per pixel: the query at (y, x) attends to
// the ws x ws keys of the window it lies in after a cyclic shift, `ry = (y + Y - shift) % Y`,
// keys at `((ry / ws) * ws + u + shift) % Y` (examples/swin_on_image.attn). Every pixel then
// finds its window's keys through runtime divisions, and no schedule sees that the 49 pixels of
// a window read the same 49 keys. Written in window coordinates (dsl/variants/swin_attention.attn:
// scores over (window, position in the window, key), the output read back per pixel), the key
// reads depend on the window alone; attn-gather-reads makes them dense copies per window and
// cpu-window's batched plan computes a window at a time, 2-4x faster (docs/status.md, Zen 4).
// This pass makes the first form the second, so that both reach the same plan (issue #20's
// canonical forms).
//
// It matches an output `o(..., y, x, e) = sum(u, t) ... p(..., y, x, u, t) ...` whose softmax p
// (and the definitions p reads at its own indices, the scores) is read only there, where some of
// o's indices (the pixel axes, one per key axis of the sum, in order) are used through
// `ry = (y + c) % Y` (c from sizes and constants; or ry = y) divided by a constant ws equal to
// the extent of the paired key axis, and a `require` of the kernel states `Y % ws == 0`. The
// softmax chain and the sum are re-indexed by (window w, position i, key j), with
// y = (w * ws + iy - c) % Y (the inverse of y -> ry, exact for every use of y), iy, ix the
// row-major digits of i and u, t those of j; where a body computes that ry (the same c) it takes
// w * ws + iy, and `ry / ws` takes w. o becomes a pointwise read of the windowed sum at
// (ry / ws, (ry % ws, rx % ws) flattened). Only indices change: every element is computed by the
// same operations on the same operands as before.
#include "attnc/Transforms/Passes.h"

#include "IRUtils.h"
#include "attnc/Dialect/AttnOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Iterators.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringSet.h"

#include <optional>

using namespace mlir;

namespace attnc {

#define GEN_PASS_DEF_WINDOWPARTITIONPASS
#include "attnc/Transforms/Passes.h.inc"

namespace {

// What the window of one pixel axis is: ry = (y + c) % Y (mod) or y, windows of ws.
struct PixelAxis {
  unsigned pos;               // among o's indices
  bool mod = false;           // ry = (y + c) % Y, else ry = y
  LinearIndex c;              // its offset, over values outside the chain and constants
  Value e;                    // where it was found: y + c
  Operation *owner = nullptr; // the chain op whose index y is, for materialize
  BlockArgument y;
  int64_t ws = 0;
};

// A value of `body`'s arguments `arg` as ry for pixel axis `a` (same offset), where `inside`
// says which values are the chain's own (atoms must not be).
bool isRy(Value r, BlockArgument y, const PixelAxis &a, Value modulus,
          function_ref<bool(Value)> inside) {
  if (!a.mod)
    return r == y;
  auto rem = matchRem(r);
  if (!rem || rem->second != modulus)
    return false;
  LinearIndex l = linearIndex(rem->first);
  if (l.terms.lookup(y) != 1)
    return false;
  l.terms[y] = 0;
  // (Every atom but y from outside, those of coefficient 0 too: `e - e` must not carry e out.)
  return l == a.c &&
         llvm::none_of(l.terms, [&](auto &t) { return t.first != y && inside(t.first); });
}

struct Match {
  attn::DefineOp o;
  attn::ReduceOp red;
  attn::SoftmaxOp p;
  SmallVector<attn::DefineOp> scores; // read by p at its own indices, p's only readers
  SmallVector<PixelAxis> axes;        // in o's order, paired with red's indices in order
  SmallVector<Operation *> chain;     // o, p and the scores, once the scores are known

  // Whether `v` is computed inside o, p or a score (an offset must come from outside them).
  bool inside(Value v) const {
    Operation *def = v.getDefiningOp();
    if (!def)
      def = cast<BlockArgument>(v).getOwner()->getParentOp();
    return llvm::any_of(chain, [&](Operation *c) { return c == def || c->isProperAncestor(def); });
  }
};

// Whether `w` (ry / ws) starts a window of keys: some value adds the key index to w * ws.
bool startsWindow(Value w, int64_t ws, Value key) {
  for (Operation *u : w.getUsers())
    if (auto mul = dyn_cast<arith::MulIOp>(u);
        mul && (constIndex(mul.getLhs()) == ws || constIndex(mul.getRhs()) == ws))
      for (Operation *a : mul.getResult().getUsers())
        for (Value r : a->getResults()) {
          LinearIndex l = linearIndex(r);
          if (l.terms.lookup(key) == 1 && l.terms.lookup(w) == ws)
            return true;
        }
  return false;
}

// Whether the extents are the same values or equal constants.
bool sameExtents(ValueRange a, ValueRange b) {
  return a.size() == b.size() && llvm::all_of(llvm::zip(a, b), [](auto p) {
           auto [x, y] = p;
           return x == y || (constIndex(x) && constIndex(x) == constIndex(y));
         });
}

// Whether `r` reads `t` at exactly `args` (in order).
bool readsAt(attn::ReadOp r, Value t, ValueRange args) {
  return r.getTensor() == t && r.getIndices().size() == args.size() &&
         llvm::equal(r.getIndices(), args);
}

std::optional<Match> match(attn::DefineOp o, attn::KernelOp kernel) {
  Match m;
  m.o = o;
  Block &ob = o.getBody().front();
  auto yield = cast<attn::YieldOp>(ob.getTerminator());
  if (yield.getNumOperands() != 1)
    return std::nullopt;
  m.red = yield.getOperand(0).getDefiningOp<attn::ReduceOp>();
  if (!m.red || m.red->getBlock() != &ob || m.red.getKind() != "sum")
    return std::nullopt;
  const unsigned n = ob.getNumArguments(), K = m.red.getBody().front().getNumArguments();
  if (n < 2 || K == 0)
    return std::nullopt;
  // The probabilities: one softmax read in the sum at (o's indices but the last, the sum's).
  Block &rb = m.red.getBody().front();
  SmallVector<Value> pArgs(ob.getArguments().take_front(n - 1));
  pArgs.append(rb.getArguments().begin(), rb.getArguments().end());
  rb.walk([&](attn::ReadOp r) {
    if (auto p = r.getTensor().getDefiningOp<attn::SoftmaxOp>())
      if (!m.p && readsAt(r, p.getResult(), pArgs))
        m.p = p;
  });
  if (!m.p || m.p.getExtents().size() != n - 1 + K)
    return std::nullopt;
  for (Operation *u : m.p.getResult().getUsers()) {
    auto r = dyn_cast<attn::ReadOp>(u);
    if (!r || r->getParentOp() == nullptr || !m.red->isProperAncestor(r) ||
        !readsAt(r, m.p.getResult(), pArgs))
      return std::nullopt;
  }
  for (unsigned k = 0; k < K; ++k)
    if (m.p.getAxes().size() != K || m.p.getAxes()[k] != (int64_t)(n - 1 + k))
      return std::nullopt;
  if (!sameExtents(m.p.getExtents().take_front(n - 1), o.getExtents().take_front(n - 1)))
    return std::nullopt;
  SmallVector<int64_t> keyExtent;
  for (unsigned k = 0; k < K; ++k) {
    auto a = constIndex(m.red.getExtents()[k]), b = constIndex(m.p.getExtents()[n - 1 + k]);
    if (!a || !b || *a != *b || *a < 1)
      return std::nullopt;
    keyExtent.push_back(*a);
  }
  // The scores: definitions p reads at its own indices, read nowhere else.
  Block &pb = m.p.getBody().front();
  llvm::SetVector<Operation *> candidates;
  m.p.walk([&](attn::ReadOp r) {
    if (auto d = r.getTensor().getDefiningOp<attn::DefineOp>())
      if (readsAt(r, d.getResult(), pb.getArguments()))
        candidates.insert(d);
  });
  for (Operation *c : candidates) {
    auto d = cast<attn::DefineOp>(c);
    bool only =
        sameExtents(d.getExtents(), m.p.getExtents()) &&
        llvm::all_of(d.getResult().getUsers(), [&](Operation *u) {
          auto r = dyn_cast<attn::ReadOp>(u);
          return r && m.p->isProperAncestor(r) &&
                 readsAt(r, d.getResult(),
                         r->getParentOfType<attn::SoftmaxOp>().getBody().front().getArguments());
        });
    if (only && d->getBlock() == o->getBlock())
      m.scores.push_back(d);
  }
  llvm::sort(m.scores, [](attn::DefineOp a, attn::DefineOp b) { return a->isBeforeInBlock(b); });

  m.chain = {o.getOperation(), m.p.getOperation()};
  for (attn::DefineOp d : m.scores)
    m.chain.push_back(d);
  auto inside = [&](Value v) { return m.inside(v); };

  // Pixel axes: an index of o (not the last) that a chain body divides, as ry, by the extent of
  // the next key axis.
  for (unsigned pos = 0; pos + 1 < n && m.axes.size() < K; ++pos) {
    const int64_t ws = keyExtent[m.axes.size()];
    Value extent = o.getExtents()[pos];
    std::optional<PixelAxis> found;
    for (Operation *c : m.chain) {
      BlockArgument y = c->getRegion(0).front().getArgument(pos);
      // The key axis paired with this pixel axis, as c's body names it.
      Value keyArg = c == o.getOperation()
                         ? m.red.getBody().front().getArgument(m.axes.size())
                         : c->getRegion(0).front().getArgument(n - 1 + m.axes.size());
      c->walk([&](arith::FloorDivSIOp div) {
        if (found || constIndex(div.getRhs()) != ws || !startsWindow(div.getResult(), ws, keyArg))
          return;
        Value r = div.getLhs();
        PixelAxis a;
        a.pos = pos;
        a.ws = ws;
        a.y = y;
        a.owner = c;
        if (r == y) {
          a.e = y;
        } else if (auto rem = matchRem(r); rem && rem->second == extent) {
          LinearIndex l = linearIndex(rem->first);
          if (l.terms.lookup(y) != 1)
            return;
          l.terms[y] = 0;
          if (llvm::any_of(l.terms, [&](auto &t) { return t.first != y && inside(t.first); }))
            return;
          a.mod = true;
          a.c = l;
          a.e = rem->first;
        } else {
          return;
        }
        found = a;
      });
      if (found)
        break;
    }
    if (found)
      m.axes.push_back(*found);
  }
  if (m.axes.size() != K)
    return std::nullopt;
  // Whole windows only: with a partial last window, w ws + iy would pass the image's end.
  for (const PixelAxis &a : m.axes) {
    Value extent = o.getExtents()[a.pos];
    if (requiresMultiple(kernel, extent, a.ws))
      continue;
    std::string size = "the size";
    if (auto d = extent.getDefiningOp<attn::DimOp>())
      size = d.getSize().str();
    o.emitWarning() << "'" << o.getName() << "' reads windows of " << a.ws << " along '"
                    << cast<StringAttr>(o.getIndices()[a.pos]).getValue()
                    << "', computed per position: add `require " << size << " % " << a.ws
                    << " == 0` for the plan per window (docs/language.md §22)";
    return std::nullopt;
  }
  return m;
}

// `a % m` as the DSL writes it (floor modulo).
Value floorMod(OpBuilder &b, Location loc, Value a, Value m) {
  Value q = b.create<arith::FloorDivSIOp>(loc, a, m);
  return b.create<arith::SubIOp>(loc, a, b.create<arith::MulIOp>(loc, q, m));
}

Value cst(OpBuilder &b, Location loc, int64_t v) {
  return b.create<arith::ConstantIndexOp>(loc, v);
}

// The row-major digits of `flat` over `extents`.
SmallVector<Value> digits(OpBuilder &b, Location loc, Value flat, ArrayRef<int64_t> extents) {
  SmallVector<Value> out;
  int64_t stride = 1;
  for (int64_t e : extents)
    stride *= e;
  for (auto [k, e] : llvm::enumerate(extents)) {
    stride /= e;
    Value q = stride == 1 ? flat : b.create<arith::FloorDivSIOp>(loc, flat, cst(b, loc, stride));
    // (The leading digit is below its extent already: flat < the product.)
    out.push_back(k == 0 ? q : floorMod(b, loc, q, cst(b, loc, e)));
  }
  return out;
}

// Erases ops of `block` (nested ones too) that nothing uses. Visited last to first with nested
// ops before their parent: a user goes before what it uses, and an erased parent never leaves a
// visited op behind it already freed.
void removeDeadOps(Block &block) {
  bool changed = true;
  while (changed) {
    changed = false;
    SmallVector<Operation *> ops;
    block.walk<WalkOrder::PostOrder, ReverseIterator>([&](Operation *op) { ops.push_back(op); });
    for (Operation *op : ops)
      if (op->getParentOp() && isOpTriviallyDead(op)) {
        op->erase();
        changed = true;
      }
  }
}

struct WindowPartitionPass : impl::WindowPartitionPassBase<WindowPartitionPass> {
  using Base::Base;

  void runOnOperation() override {
    getOperation().walk([&](attn::KernelOp kernel) {
      SmallVector<attn::DefineOp> defs(kernel.getBody().front().getOps<attn::DefineOp>());
      for (attn::DefineOp d : defs)
        if (std::optional<Match> m = match(d, kernel))
          rewrite(*m, kernel);
    });
  }

  // In a new body over (outer with windows, i[, j]): the values that stand for the old
  // indices, and per pixel axis w * ws + iy (ry) and w.
  struct Subst {
    SmallVector<Value> ry, w, iy;
  };

  // Maps `old`'s pixel arguments (positions of m.axes) to y = (w ws + iy - c) % Y and the rest
  // of the first n - 1 to `outer`'s, in `b` at a new body's start; returns ry and w per axis.
  Subst mapPixels(Match &m, OpBuilder &b, Location loc, Block &old, ValueRange outer, Value i,
                  IRMapping &map) {
    Subst s;
    SmallVector<int64_t> ws;
    for (const PixelAxis &a : m.axes)
      ws.push_back(a.ws);
    SmallVector<Value> iy = digits(b, loc, i, ws);
    for (unsigned k = 0; k < outer.size(); ++k)
      map.map(old.getArgument(k), outer[k]);
    for (auto [a, d] : llvm::zip(m.axes, iy)) {
      Value w = outer[a.pos];
      Value ry =
          b.create<arith::AddIOp>(loc, b.create<arith::MulIOp>(loc, w, cst(b, loc, a.ws)), d);
      Value y = ry;
      if (a.mod) {
        // c = (y + c) with y = 0, cloned from where the axis was found.
        IRMapping cm;
        cm.map(a.y, cst(b, loc, 0));
        Value c = materialize(a.e, a.owner, cm, b);
        y = floorMod(b, loc, b.create<arith::SubIOp>(loc, ry, c), m.o.getExtents()[a.pos]);
      }
      map.map(old.getArgument(a.pos), y);
      s.ry.push_back(ry);
      s.w.push_back(w);
      s.iy.push_back(d);
    }
    return s;
  }

  // After a body's clone: its copies of ry (same offset) take w ws + iy and `ry / ws` takes w.
  void fixRy(Match &m, Operation *oldOp, Block &old, IRMapping &map, const Subst &s) {
    auto inside = [&](Value v) { return m.inside(v); };
    SmallVector<std::pair<Value, Value>> repl;
    auto visit = [&](Value r) {
      Value clone = map.lookupOrNull(r);
      if (!clone)
        return;
      for (auto [k, a] : llvm::enumerate(m.axes)) {
        BlockArgument y = old.getArgument(a.pos);
        if (!isRy(r, y, a, m.o.getExtents()[a.pos], inside))
          continue;
        // (ry = y itself: y already maps to w ws + iy; only the divisions change.)
        if (a.mod)
          repl.push_back({clone, s.ry[k]});
        // `ry / ws` is w and `ry % ws` is iy: written as such, not as (w ws + iy) - w ws,
        // whose bounds Halide's interval arithmetic widens (w's range counted twice).
        for (Operation *u : r.getUsers()) {
          if (auto div = dyn_cast<arith::FloorDivSIOp>(u))
            if (div.getLhs() == r && constIndex(div.getRhs()) == a.ws)
              if (Value dc = map.lookupOrNull(div.getResult()))
                repl.push_back({dc, s.w[k]});
          if (auto sub = dyn_cast<arith::SubIOp>(u))
            if (auto rem = matchRem(sub.getResult());
                rem && rem->first == r && constIndex(rem->second) == a.ws)
              if (Value rc = map.lookupOrNull(sub.getResult()))
                repl.push_back({rc, s.iy[k]});
        }
      }
    };
    for (const PixelAxis &a : m.axes)
      visit(old.getArgument(a.pos));
    oldOp->walk([&](Operation *op) {
      for (Value r : op->getResults())
        visit(r);
    });
    for (auto [from, to] : repl)
      from.replaceAllUsesWith(to);
  }

  // A new body of `dst` over (outer, i, last) whose start maps `old`'s outer and pixel
  // indices (mapPixels); the caller maps the rest and clones.
  Block *beginBody(Match &m, Region &dst, Block &old, IRMapping &map, Subst &s) {
    const unsigned n = m.o.getBody().front().getNumArguments();
    Location loc = m.o.getLoc();
    Block *nb = new Block();
    dst.push_back(nb);
    for (unsigned k = 0; k < n + 1; ++k)
      nb->addArgument(IndexType::get(m.o.getContext()), loc);
    OpBuilder b = OpBuilder::atBlockBegin(nb);
    s = mapPixels(m, b, loc, old, nb->getArguments().take_front(n - 1), nb->getArgument(n - 1),
                  map);
    return nb;
  }

  // `r`'s clone (through `map`) becomes a read of `tensor` at `at`.
  static void redirectRead(attn::ReadOp r, IRMapping &map, Value tensor, ValueRange at) {
    auto c = map.lookup(r.getResult()).getDefiningOp<attn::ReadOp>();
    OpBuilder b(c);
    Value nr = b.create<attn::ReadOp>(c.getLoc(), c.getType(), tensor, at, c.getBoundaryAttr());
    c.getResult().replaceAllUsesWith(nr);
    c.erase();
  }

  void rewrite(Match &m, attn::KernelOp kernel) {
    llvm::StringSet<> taken;
    kernel.walk([&](attn::DefineOp d) { taken.insert(d.getName()); });
    kernel.walk([&](attn::SoftmaxOp s) { taken.insert(s.getName()); });
    Location loc = m.o.getLoc();
    const unsigned n = m.o.getBody().front().getNumArguments();
    const unsigned K = m.axes.size();
    OpBuilder kb(m.o);
    int64_t nI = 1, nJ = 1;
    for (const PixelAxis &a : m.axes)
      nI *= a.ws;
    SmallVector<int64_t> keyExt;
    for (Value e : m.red.getExtents()) {
      keyExt.push_back(*constIndex(e));
      nJ *= keyExt.back();
    }
    // Outer extents: o's, the pixel axes' Y / ws.
    SmallVector<Value> outerExt(m.o.getExtents().take_front(n - 1));
    SmallVector<std::string> outerNames;
    for (unsigned k = 0; k + 1 < n; ++k)
      outerNames.push_back(cast<StringAttr>(m.o.getIndices()[k]).getValue().str());
    llvm::StringSet<> local;
    for (const std::string &nm : outerNames)
      local.insert(nm);
    for (const PixelAxis &a : m.axes) {
      outerExt[a.pos] = kb.create<arith::FloorDivSIOp>(loc, outerExt[a.pos], cst(kb, loc, a.ws));
      local.erase(outerNames[a.pos]);
      outerNames[a.pos] = uniqueName("w" + outerNames[a.pos], local);
    }
    std::string iName = uniqueName("i", local), jName = uniqueName("j", local);
    std::string eName =
        uniqueName(cast<StringAttr>(m.o.getIndices()[n - 1]).getValue().str(), local);
    Value iExt = cst(kb, loc, nI), jExt = cst(kb, loc, nJ);

    // (The element type of the definition it replaces: a score may be an integer.)
    auto tensorType = [&](ArrayRef<Value> ext, Value of) {
      SmallVector<int64_t> shape;
      for (Value e : ext)
        shape.push_back(constIndex(e).value_or(ShapedType::kDynamic));
      return RankedTensorType::get(shape, cast<mlir::TensorType>(of.getType()).getElementType());
    };
    SmallVector<Value> pExt(outerExt);
    pExt.append({iExt, jExt});
    SmallVector<std::string> pNames(outerNames);
    pNames.append({iName, jName});
    auto namesAttr = [&](ArrayRef<std::string> names) {
      SmallVector<StringRef> refs(names.begin(), names.end());
      return kb.getStrArrayAttr(refs);
    };

    // Re-indexes one region of a chain op (old indices: n - 1 outer, K keys) into `dst` (new:
    // outer, i, j); `reads` maps the chain's tensors to their re-indexed copies.
    llvm::DenseMap<Value, Value> copies;
    auto reindex = [&](Operation *oldOp, Region &src, Region &dst) {
      Block &old = src.front();
      IRMapping map;
      Subst s;
      Block *nb = beginBody(m, dst, old, map, s);
      OpBuilder b = OpBuilder::atBlockEnd(nb);
      SmallVector<Value> u = digits(b, loc, nb->getArgument(n), keyExt);
      for (unsigned k = 0; k < K; ++k)
        map.map(old.getArgument(n - 1 + k), u[k]);
      for (Operation &op : old)
        b.clone(op, map);
      fixRy(m, oldOp, old, map, s);
      // Reads of the chain at the old indices: the copies at the new ones.
      SmallVector<attn::ReadOp> reads;
      src.walk([&](attn::ReadOp r) {
        if (copies.count(r.getTensor()) && readsAt(r, r.getTensor(), old.getArguments()))
          reads.push_back(r);
      });
      for (attn::ReadOp r : reads)
        redirectRead(r, map, copies[r.getTensor()], nb->getArguments());
      removeDeadOps(*nb);
    };

    // The scores, then the softmax, over (outer, i, j).
    for (attn::DefineOp d : m.scores) {
      auto nd = kb.create<attn::DefineOp>(d.getLoc(), tensorType(pExt, d.getResult()),
                                          d.getNameAttr(), pExt, namesAttr(pNames));
      reindex(d, d.getBody(), nd.getBody());
      copies[d.getResult()] = nd.getResult();
    }
    auto np = kb.create<attn::SoftmaxOp>(m.p.getLoc(), tensorType(pExt, m.p.getResult()),
                                         m.p.getNameAttr(), pExt, namesAttr(pNames),
                                         kb.getDenseI64ArrayAttr({(int64_t)n}));
    reindex(m.p, m.p.getBody(), np.getBody());
    if (!m.p.getSink().empty())
      reindex(m.p, m.p.getSink(), np.getSink());
    copies[m.p.getResult()] = np.getResult();

    // The windowed sum over (outer, i, e): sum(j) of the sum's body, re-indexed.
    SmallVector<Value> wExt(outerExt);
    wExt.append({iExt, m.o.getExtents()[n - 1]});
    SmallVector<std::string> wNames(outerNames);
    wNames.append({iName, eName});
    std::string wName = uniqueName((m.o.getName() + "__win").str(), taken);
    auto ow = kb.create<attn::DefineOp>(loc, tensorType(wExt, m.o.getResult()),
                                        kb.getStringAttr(wName), wExt, namesAttr(wNames));
    {
      Block &old = m.o.getBody().front();
      IRMapping map;
      Subst s;
      Block *nb = beginBody(m, ow.getBody(), old, map, s);
      OpBuilder b = OpBuilder::atBlockEnd(nb);
      map.map(old.getArgument(n - 1), nb->getArgument(n));
      for (Operation &op : old)
        if (&op != m.red.getOperation() && !isa<attn::YieldOp>(op))
          b.clone(op, map);
      auto red = b.create<attn::ReduceOp>(m.red.getLoc(), m.red.getType(), m.red.getKindAttr(),
                                          ValueRange{jExt}, b.getStrArrayAttr({jName}));
      Block *rb = new Block();
      red.getBody().push_back(rb);
      Value j = rb->addArgument(b.getIndexType(), loc);
      {
        OpBuilder ib = OpBuilder::atBlockBegin(rb);
        SmallVector<Value> u = digits(ib, loc, j, keyExt);
        Block &oldRb = m.red.getBody().front();
        for (unsigned k = 0; k < K; ++k)
          map.map(oldRb.getArgument(k), u[k]);
        for (Operation &op : oldRb)
          ib.clone(op, map);
        SmallVector<attn::ReadOp> reads;
        m.red.walk([&](attn::ReadOp r) {
          if (r.getTensor() == m.p.getResult())
            reads.push_back(r);
        });
        SmallVector<Value> at(nb->getArguments().take_front(n));
        at.push_back(j);
        for (attn::ReadOp r : reads)
          redirectRead(r, map, np.getResult(), at);
      }
      fixRy(m, m.o, old, map, s);
      b.setInsertionPointToEnd(nb);
      b.create<attn::YieldOp>(loc, ValueRange{red.getResult()});
      removeDeadOps(*nb);
    }
    std::string note;
    for (const PixelAxis &a : m.axes)
      note += (note.empty() ? "" : ", ") +
              cast<StringAttr>(m.o.getIndices()[a.pos]).getValue().str() + " in windows of " +
              std::to_string(a.ws);
    ow->setAttr("attn.window_partition", kb.getStringAttr(note));

    // o: the windowed sum read back per pixel, at (ry / ws, flattened ry % ws, e).
    SmallVector<std::string> oNames;
    for (Attribute a : m.o.getIndices())
      oNames.push_back(cast<StringAttr>(a).getValue().str());
    SmallVector<Value> oExt(m.o.getExtents());
    attn::DefineOp no =
        makeDefine(m.o, m.o.getName(), oExt, oNames, [&](OpBuilder &b, ValueRange args) {
          SmallVector<Value> idx(args.take_front(n - 1));
          Value i;
          for (const PixelAxis &a : m.axes) {
            Value ry = args[a.pos];
            if (a.mod) {
              IRMapping cm;
              cm.map(a.y, args[a.pos]);
              ry = floorMod(b, loc, materialize(a.e, a.owner, cm, b), m.o.getExtents()[a.pos]);
            }
            Value wsv = cst(b, loc, a.ws);
            Value w = b.create<arith::FloorDivSIOp>(loc, ry, wsv);
            idx[a.pos] = w;
            Value d = b.create<arith::SubIOp>(loc, ry, b.create<arith::MulIOp>(loc, w, wsv));
            i = i ? b.create<arith::AddIOp>(loc, b.create<arith::MulIOp>(loc, i, wsv), d) : d;
          }
          idx.push_back(i);
          idx.push_back(args[n - 1]);
          return b
              .create<attn::ReadOp>(loc, b.getF32Type(), ow.getResult(), idx,
                                    b.getStringAttr("none"))
              .getResult();
        });
    no->setAttrs(m.o->getAttrs());
    m.o.getResult().replaceAllUsesWith(no.getResult());
    m.o.erase();
    m.p.erase();
    for (attn::DefineOp d : llvm::reverse(m.scores))
      d.erase();
  }
};

} // namespace

} // namespace attnc
