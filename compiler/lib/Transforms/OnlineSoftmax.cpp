// attn-online-softmax: fuses a softmax with the weighted sum that reads it into attn.online_softmax.
//
// `p = softmax(j) s` followed by `o(..) = sum(j) p(.., j) * v(.., j, ..)` needs, as written, every
// score of a row before the first probability exists: p's max and sum run over all keys, then the
// sum over keys runs again. FlashAttention's rewrite streams keys instead: per tile of keys, the
// tile's scores, their max and exp-sum, and the tile's weighted values, folded into a running
// max, sum and accumulator that are rescaled whenever the max grows. HalideGen lowers the fused op
// to those per-tile Funcs, none of which spans (rows x all keys), so a schedule can keep one key
// tile of one query tile in cache (docs/language.md §20).
//
// It applies when p has one axis with a symbolic or large extent, p is read exactly once, by a sum
// over that axis directly inside a definition, whose body is p times a value, and p's other
// subscripts are distinct indices of that definition. Otherwise p stays as it is, and the softmax
// records why in `attn.online` (so `--emit=mlir` shows it). Small constant axes (windows) are left
// alone: their scores fit in registers and the window schedules expect the unfused form.
//
// On every attn.online_softmax it also records which conjuncts of the mask are key padding
// (`attn.key_mask`), the analysis HalideGen's tile skipping needs (recordKeyMask).
#include "attnc/Transforms/Passes.h"

#include "IRUtils.h"
#include "attnc/Dialect/AttnOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/ADT/StringSet.h"

#include <string>

using namespace mlir;

namespace attnc {

#define GEN_PASS_DEF_ONLINESOFTMAXPASS
#include "attnc/Transforms/Passes.h.inc"

namespace {

// Softmax axes up to this many points are windows (the same limit as schedules' findWindow).
constexpr int64_t kSmallAxis = 256;
// A symbolic axis estimated at up to this many points is a handful of sampling points
// (deformable attention's K, 4 to 32 in the seeds) rather than a sequence of keys.
constexpr int64_t kFewPoints = 32;
// Keys per tile when the key count is unknown or large. On the 2-core Zen 4 development machine,
// SDPA at N=2048, D=64 ran at 145 GFLOP/s with 128-key tiles, 119 with 64 and 106 with 256 (the
// cpu-online schedule; docs/status.md).
constexpr int64_t kDefaultTile = kDefaultOnlineTile;

const char *kOnlineAttr = "attn.online";

struct Match {
  attn::SoftmaxOp p;
  attn::ReadOp read;
  attn::ReduceOp red;
  attn::DefineOp def;
  Value factor;
  SmallVector<int64_t> rows;
};

// Whether a read's subscripts are computed from float data (a float read or a float-to-int
// conversion upstream): a sample, as in bilinear sampling. An integer table looked up at
// indices (a paged cache's page ids, `kc(pages(b, j / S), j % S, ...)`) is no sampling: the keys
// are still every key of the axis, in pages, and stream like any others.
bool gathers(attn::ReadOp r) {
  SmallVector<Value> work(r.getIndices().begin(), r.getIndices().end());
  llvm::SmallPtrSet<Operation *, 16> seen;
  while (!work.empty()) {
    Operation *op = work.pop_back_val().getDefiningOp();
    if (!op || !seen.insert(op).second)
      continue;
    if (isa<arith::FPToSIOp>(op))
      return true;
    if (auto rd = dyn_cast<attn::ReadOp>(op); rd && !rd.getResult().getType().isInteger(32))
      return true;
    op->walk([&](Operation *inner) {
      work.append(inner->getOperands().begin(), inner->getOperands().end());
    });
  }
  return false;
}

// The extent `ext` when it is a constant, also one written as arithmetic on constants
// (`j in 0..ws * ws` of a window-partitioned Swin, with `const ws = 7`: MLIRGen emits the product,
// which nothing folds before this pass).
std::optional<int64_t> constantExtent(Value ext) {
  llvm::SetVector<StringRef> sizes;
  return evalIndex(ext, nullptr, sizes);
}

// Whether a key axis of extent `ext` (in the kernel holding `at`) is a window (a small constant)
// or a few sampling points by the size estimates, which stay unfused; `why` then says so, naming
// the axis `noun` (a window's reason followed by `windowNote`).
bool tooFewKeys(Value ext, Operation *at, StringRef noun, StringRef windowNote, std::string &why) {
  if (std::optional<int64_t> c = constantExtent(ext); c && *c <= kSmallAxis) {
    why = ("the " + noun + " has a small constant extent (" + std::to_string(*c) + ")" +
           windowNote + ", kept unfused")
              .str();
    return true;
  }
  if (auto d = ext.getDefiningOp<attn::DimOp>())
    if (auto est =
            at->getParentOfType<attn::KernelOp>()->getAttrOfType<DictionaryAttr>(kEstimatesAttr))
      if (auto n = est.getAs<IntegerAttr>(d.getSize()); n && n.getInt() <= kFewPoints) {
        why = ("the " + noun + " has few points (" + d.getSize() + " = " +
               std::to_string(n.getInt()) + " by the size estimates), kept unfused")
                  .str();
        return true;
      }
  return false;
}

// The match, or the reason it does not apply in `why`.
std::optional<Match> match(attn::SoftmaxOp p, std::string &why) {
  Match m;
  m.p = p;
  ArrayRef<int64_t> axes = p.getAxes();
  if (axes.size() != 1) {
    why = "softmax over more than one axis";
    return std::nullopt;
  }
  int64_t axis = axes[0];
  Value ext = p.getExtents()[axis];
  if (tooFewKeys(ext, p, "axis", ": a window", why))
    return std::nullopt;
  SmallVector<attn::ReadOp> reads;
  for (Operation *user : p.getResult().getUsers()) {
    auto r = dyn_cast<attn::ReadOp>(user);
    if (!r) {
      why = "the probabilities are a kernel output";
      return std::nullopt;
    }
    reads.push_back(r);
  }
  if (reads.size() != 1) {
    why = "the probabilities are read in " + std::to_string(reads.size()) + " places, not once";
    return std::nullopt;
  }
  m.read = reads[0];
  if (m.read.getBoundary() != "none") {
    why = "the probabilities are read with a boundary condition";
    return std::nullopt;
  }
  m.red = dyn_cast<attn::ReduceOp>(m.read->getParentOp());
  if (!m.red || m.red.getKind() != "sum" || m.red.getExtents().size() != 1) {
    why = "the probabilities are not read directly by a sum over one index";
    return std::nullopt;
  }
  BlockArgument key = m.red.getBody().front().getArgument(0);
  if (m.read.getIndices()[axis] != key || !attn::sameExtent(m.red.getExtents()[0], ext)) {
    why = "the sum does not run over the softmax axis";
    return std::nullopt;
  }
  Value y = cast<attn::YieldOp>(m.red.getBody().front().getTerminator()).getValues()[0];
  auto mul = y.getDefiningOp<arith::MulFOp>();
  if (!mul || (mul.getLhs() != m.read.getResult() && mul.getRhs() != m.read.getResult())) {
    why = "the sum's body is not the probability times a value";
    return std::nullopt;
  }
  m.factor = mul.getLhs() == m.read.getResult() ? mul.getRhs() : mul.getLhs();
  // Sampled values or scores (deformable attention) have few keys per row at data-dependent
  // places: the sampling schedules handle those, and streaming buys nothing.
  bool sampled = false;
  for (Region *r : {&m.red.getBody(), &p.getBody()})
    r->walk([&](attn::ReadOp rd) { sampled |= gathers(rd); });
  if (sampled) {
    why = "the scores or values are sampled at data-dependent positions";
    return std::nullopt;
  }
  m.def = dyn_cast<attn::DefineOp>(m.red->getParentOp());
  if (!m.def) {
    why = "the sum is nested in another reduction";
    return std::nullopt;
  }
  Block &db = m.def.getBody().front();
  llvm::SmallDenseSet<unsigned> used;
  for (auto [k, idx] : llvm::enumerate(m.read.getIndices())) {
    if ((int64_t)k == axis) {
      m.rows.push_back(-1);
      continue;
    }
    auto ba = dyn_cast<BlockArgument>(idx);
    if (!ba || ba.getOwner() != &db || !used.insert(ba.getArgNumber()).second) {
      why = "the probabilities' row subscripts are not distinct indices of '" +
            m.def.getName().str() + "'";
      return std::nullopt;
    }
    m.rows.push_back(ba.getArgNumber());
  }
  return m;
}

// The points of an axis of extent `ext` in the kernel holding `at`: a constant, or the size
// estimate (--sizes); -1 when neither says.
int64_t estimatedExtent(Value ext, Operation *at) {
  if (std::optional<int64_t> c = constantExtent(ext))
    return *c;
  if (auto d = ext.getDefiningOp<attn::DimOp>()) {
    auto kernel = at->getParentOfType<attn::KernelOp>();
    if (auto est = kernel->getAttrOfType<DictionaryAttr>(kEstimatesAttr))
      if (auto v = est.getAs<IntegerAttr>(d.getSize()))
        return v.getInt();
  }
  return -1;
}

// Keys per tile for a key axis of extent `ext` in the kernel holding `at`.
int64_t chooseTile(Value ext, Operation *at, int64_t forced) {
  if (forced > 0)
    return forced;
  int64_t n = estimatedExtent(ext, at);
  // Fewer keys than a tile: one tile of the keys rounded up to a vector multiple.
  if (n > 0 && n < kDefaultTile)
    return std::max<int64_t>(16, (n + 15) / 16 * 16);
  return kDefaultTile;
}

// Whether the softmax's score (its yield's first value) is computed by a reduction inside the
// softmax. (An `.exclude` read there is already a `.zero` read whose range test MLIRGen joined
// to the mask, which stays in the softmax.)
bool scoreReduces(attn::SoftmaxOp p) {
  Block &body = p.getBody().front();
  Value score = cast<attn::YieldOp>(body.getTerminator()).getValues()[0];
  bool reduces = false;
  SmallVector<Value> work{score};
  llvm::SmallPtrSet<Operation *, 16> seen;
  while (!work.empty() && !reduces) {
    Operation *op = work.pop_back_val().getDefiningOp();
    if (!op || op->getBlock() != &body || !seen.insert(op).second)
      continue;
    reduces = isa<attn::ReduceOp>(op);
    work.append(op->getOperands().begin(), op->getOperands().end());
  }
  return reduces;
}

// Canonical form (#20): a score contraction written inside the softmax,
// `p = softmax(j) rsqrt(D) * sum(d) q(i, d) * k(j, d)`, becomes the definition `<p>__logits`
// that the softmax reads, as if written `s = ...; p = softmax(j) s` (sdpa.attn's form). Inline,
// HalideGen lowers the sum into the tile's score Func, which the online schedules inline into
// every use (the tile max, the exps): SDPA ran 13x slower. Its own definition is a contraction
// that cpu-online computes once per (query tile, key tile), the same plan as the separate form.
// The mask stays in the softmax; the ops only the score used leave it.
void hoistScore(attn::SoftmaxOp p) {
  Block &body = p.getBody().front();
  auto yield = cast<attn::YieldOp>(body.getTerminator());
  Value score = yield.getValues()[0];
  OpBuilder b(p);
  auto def =
      b.create<attn::DefineOp>(p.getLoc(), p.getResult().getType(),
                               (p.getName() + "__logits").str(), p.getExtents(), p.getIndices());
  Block *db = new Block();
  def.getBody().push_back(db);
  IRMapping map;
  for (BlockArgument a : body.getArguments())
    map.map(a, db->addArgument(a.getType(), a.getLoc()));
  OpBuilder dbld = OpBuilder::atBlockEnd(db);
  Value s = materialize(score, p, map, dbld);
  dbld.create<attn::YieldOp>(yield.getLoc(), ValueRange{s});
  auto rb = OpBuilder::atBlockBegin(&body); // the score first, as a separate definition reads
  auto rd = rb.create<attn::ReadOp>(score.getLoc(), score.getType(), def.getResult(),
                                    ValueRange(body.getArguments()), rb.getStringAttr("none"));
  yield->setOperand(0, rd.getResult());
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    ops.push_back(&op);
  for (Operation *op : llvm::reverse(ops)) // users before what they use
    if (op->use_empty() && (isa<attn::ReadOp, attn::ReduceOp>(op) || isPure(op)))
      op->erase();
}

// The name of a fused sum that is one part of `def`'s expression: `<def>__online`, or
// `<def>__online2`, ... when `def` has several (attn-split-sums gives a difference of softmaxes
// one sum each). HalideGen names Funcs after it, so it must be unique in the kernel.
std::string partName(attn::DefineOp def) {
  llvm::StringSet<> taken;
  def->getParentOfType<attn::KernelOp>().walk([&](Operation *op) {
    if (auto d = dyn_cast<attn::DefineOp>(op))
      taken.insert(d.getName());
    else if (auto s = dyn_cast<attn::SoftmaxOp>(op))
      taken.insert(s.getName());
    else if (auto o = dyn_cast<attn::OnlineSoftmaxOp>(op))
      taken.insert(o.getName());
  });
  std::string base = def.getName().str() + "__online", name = base;
  for (int n = 2; taken.contains(name); ++n)
    name = base + std::to_string(n);
  return name;
}

// The rest of a fusion of `red` (a sum in `def`) into `op`: the value region (`factor` over the
// definition's indices, then the key), and the definition replaced by `op` when it is the fused
// sum itself (`whole`), otherwise the sum by a read of `op`.
void finishFused(attn::OnlineSoftmaxOp op, attn::DefineOp def, attn::ReduceOp red, Value factor,
                 bool whole) {
  Block &db = def.getBody().front();
  Block *vb = new Block();
  op.getValue().push_back(vb);
  IRMapping map;
  for (BlockArgument a : db.getArguments())
    map.map(a, vb->addArgument(a.getType(), a.getLoc()));
  BlockArgument key = red.getBody().front().getArgument(0);
  map.map(key, vb->addArgument(key.getType(), key.getLoc()));
  OpBuilder vbld = OpBuilder::atBlockEnd(vb);
  Value f = materialize(factor, def, map, vbld);
  vbld.create<attn::YieldOp>(red.getLoc(), ValueRange{f});
  if (whole) {
    def.getResult().replaceAllUsesWith(op.getResult());
    def.erase();
  } else {
    OpBuilder rb(red);
    auto rd = rb.create<attn::ReadOp>(red.getLoc(), rb.getF32Type(), op.getResult(),
                                      ValueRange(db.getArguments()), rb.getStringAttr("none"));
    red.getResult().replaceAllUsesWith(rd.getResult());
    red.erase();
  }
}

void rewrite(Match &m, int64_t tile, int64_t queryGroup) {
  if (scoreReduces(m.p))
    hoistScore(m.p);
  MLIRContext *ctx = m.p.getContext();
  OpBuilder b(m.def);
  Block &db = m.def.getBody().front();
  auto defYield = cast<attn::YieldOp>(db.getTerminator());
  // The definition is the fused sum itself, or reads it where the sum was.
  bool whole = defYield.getValues()[0] == m.red.getResult() &&
               m.def.getResult().getType().getElementType().isF32();
  std::string name = whole ? m.def.getName().str() : partName(m.def);
  auto defType = m.def.getResult().getType();
  auto type = RankedTensorType::get(defType.getShape(), Float32Type::get(ctx));
  Value keyExtent = m.p.getExtents()[m.p.getAxes()[0]];
  auto op = b.create<attn::OnlineSoftmaxOp>(m.def.getLoc(), type, name, m.def.getExtents(),
                                            keyExtent, m.def.getIndices(), m.p.getIndices(), m.rows,
                                            tile, queryGroup, /*unnormalized=*/false,
                                            /*whole_tile=*/nullptr);
  op.getScore().takeBody(m.p.getBody());
  if (m.p.hasSink())
    op.getSink().takeBody(m.p.getSink());
  if (auto bounds = m.p->getAttr(attn::kBoundsAttr))
    op->setAttr(attn::kBoundsAttr, bounds);
  // What earlier passes recorded on the definition (attn.sample_order) stays visible.
  if (whole)
    for (NamedAttribute a : m.def->getDiscardableAttrs())
      if (a.getName().getValue().starts_with("attn."))
        op->setAttr(a.getName(), a.getValue());

  finishFused(op, m.def, m.red, m.factor, whole);
  m.p.erase();
}

// Unnormalised weightings (#20): `o(..) = sum(j) w(.., j) * v(.., j, ..)` whose weight applies a
// function to a score contraction read at the key, as sigmoid attention's
// `sigmoid(s(b, h, i, j) - c)` or ReLU attention's `relu(s(b, h, i, j))`. As written, HalideGen
// computes the scores at root (an Nq x Nk buffer, 32 MiB at B1 H8 N1024) and the sum reads them
// back: 3-9x SDPA's time. Fused into an `unnormalized` attn.online_softmax, the key tiles compute
// one query tile's scores and weights at a time, as for a softmax, into a plain accumulator.
// A weight linear in the score (the score itself, a product of two projections, an MLP's second
// GEMM, a scaled projection) is a GEMM, left to the generic rule; so is a sum whose weight reads
// no contraction at the key.
struct WeightMatch {
  attn::DefineOp def;
  attn::ReduceOp red;
  Value weight, factor;
  SmallVector<int64_t> rows; // the definition's indices the weight reads, in order
};

// Whether `w` reads, at the key `key`, a definition computed by a reduction (a score
// contraction), or computes such a reduction itself, looking through the ops of `scope`'s regions.
bool readsScoreAt(Value w, Value key, Operation *scope) {
  SmallVector<Value> work{w};
  llvm::SmallPtrSet<Operation *, 16> seen;
  while (!work.empty()) {
    Operation *op = work.pop_back_val().getDefiningOp();
    if (!op || !scope->isProperAncestor(op) || !seen.insert(op).second)
      continue;
    if (isa<attn::ReduceOp>(op) && dependsOn(op->getResult(0), key))
      return true;
    if (auto rd = dyn_cast<attn::ReadOp>(op))
      if (auto src = rd.getTensor().getDefiningOp<attn::DefineOp>()) {
        bool contraction = false;
        src.getBody().walk([&](attn::ReduceOp) { contraction = true; });
        if (contraction && llvm::is_contained(rd.getIndices(), key))
          return true;
      }
    op->walk([&](Operation *inner) {
      work.append(inner->getOperands().begin(), inner->getOperands().end());
    });
  }
  return false;
}

// Whether `w` applies a non-linear function (anything but + - * / and negation: an exp, a
// comparison, a select, a max) to a value that reads a score at the key. A weight linear in the
// score (`q(i, d) * rsqrt(D)` read along d, a projection scaled) makes the sum a chain of GEMMs,
// which the generic rule blocks; it is a nonlinearity that forces the scores to be materialised.
bool nonlinearInScore(Value w, Value key, Operation *scope) {
  SmallVector<Value> work{w};
  llvm::SmallPtrSet<Operation *, 16> seen;
  while (!work.empty()) {
    Operation *op = work.pop_back_val().getDefiningOp();
    if (!op || !scope->isProperAncestor(op) || !seen.insert(op).second ||
        isa<attn::ReadOp, attn::ReduceOp>(op))
      continue;
    if (!isa<arith::MulFOp, arith::AddFOp, arith::SubFOp, arith::NegFOp, arith::DivFOp>(op) &&
        llvm::any_of(op->getOperands(), [&](Value o) { return readsScoreAt(o, key, scope); }))
      return true;
    work.append(op->getOperands().begin(), op->getOperands().end());
  }
  return false;
}

// The match; std::nullopt with `why` empty when the sum is no candidate at all, with the reason
// when it is one that cannot be fused.
std::optional<WeightMatch> matchWeighted(attn::ReduceOp red, std::string &why) {
  WeightMatch m;
  m.red = red;
  m.def = dyn_cast<attn::DefineOp>(red->getParentOp());
  if (!m.def || red.getKind() != "sum" || red.getExtents().size() != 1)
    return std::nullopt;
  Block &rb = red.getBody().front();
  BlockArgument key = rb.getArgument(0);
  auto mul = cast<attn::YieldOp>(rb.getTerminator()).getValues()[0].getDefiningOp<arith::MulFOp>();
  if (!mul)
    return std::nullopt;
  for (auto [w, f] : {std::pair{mul.getLhs(), mul.getRhs()}, std::pair{mul.getRhs(), mul.getLhs()}})
    if (nonlinearInScore(w, key, m.def)) {
      m.weight = w, m.factor = f;
      break;
    }
  if (!m.weight)
    return std::nullopt;
  // A product of a (rows x keys) matrix of weights and a (keys x values) matrix: the factor reads
  // an index of the definition that the weight does not (the value index). Without one (a layer
  // norm's variance, sum(k) (x(i, k) - mu(i))^2) it is a row reduction, streamed as it is.
  Block &db = m.def.getBody().front();
  if (llvm::none_of(db.getArguments(), [&](BlockArgument a) {
        return dependsOn(m.factor, a) && !dependsOn(m.weight, a);
      }))
    return std::nullopt;
  bool inner = false, sampled = false;
  SmallVector<Value> work{m.weight};
  llvm::SmallPtrSet<Operation *, 16> seen;
  while (!work.empty()) {
    Operation *op = work.pop_back_val().getDefiningOp();
    if (!op || !red->isProperAncestor(op) || !seen.insert(op).second)
      continue;
    inner |= isa<attn::ReduceOp>(op);
    work.append(op->getOperands().begin(), op->getOperands().end());
  }
  if (inner) {
    why = "the weight computes a reduction inside the sum (give the score its own definition)";
    return std::nullopt;
  }
  red.getBody().walk([&](attn::ReadOp rd) { sampled |= gathers(rd); });
  if (sampled) {
    why = "the weights or values are sampled at data-dependent positions";
    return std::nullopt;
  }
  if (tooFewKeys(red.getExtents()[0], red, "key", "", why))
    return std::nullopt;
  for (BlockArgument a : db.getArguments())
    if (dependsOn(m.weight, a))
      m.rows.push_back(a.getArgNumber());
  if (m.rows.empty()) {
    why = "the weight reads none of the definition's indices";
    return std::nullopt;
  }
  return m;
}

// Returns whether the definition itself became the fused op (and is gone).
bool rewriteWeighted(WeightMatch &m, int64_t tile, int64_t queryGroup) {
  MLIRContext *ctx = m.def.getContext();
  OpBuilder b(m.def);
  Block &db = m.def.getBody().front();
  auto defYield = cast<attn::YieldOp>(db.getTerminator());
  bool whole = defYield.getValues()[0] == m.red.getResult() &&
               m.def.getResult().getType().getElementType().isF32();
  std::string name = whole ? m.def.getName().str() : partName(m.def);
  auto type = RankedTensorType::get(m.def.getResult().getType().getShape(), Float32Type::get(ctx));
  SmallVector<StringRef> scoreNames;
  SmallVector<int64_t> rows = m.rows;
  for (int64_t r : m.rows)
    scoreNames.push_back(cast<StringAttr>(m.def.getIndices()[r]).getValue());
  scoreNames.push_back(cast<StringAttr>(m.red.getIndices()[0]).getValue());
  rows.push_back(-1);
  auto op = b.create<attn::OnlineSoftmaxOp>(m.def.getLoc(), type, name, m.def.getExtents(),
                                            m.red.getExtents()[0], m.def.getIndices(),
                                            b.getStrArrayAttr(scoreNames), rows, tile, queryGroup,
                                            /*unnormalized=*/true, /*whole_tile=*/nullptr);
  if (whole)
    for (NamedAttribute a : m.def->getDiscardableAttrs())
      if (a.getName().getValue().starts_with("attn."))
        op->setAttr(a.getName(), a.getValue());
  BlockArgument key = m.red.getBody().front().getArgument(0);
  {
    Block *sb = new Block();
    op.getScore().push_back(sb);
    IRMapping map;
    for (int64_t r : m.rows)
      map.map(db.getArgument(r), sb->addArgument(b.getIndexType(), m.def.getLoc()));
    map.map(key, sb->addArgument(key.getType(), key.getLoc()));
    OpBuilder sbld = OpBuilder::atBlockEnd(sb);
    // A weight `select(c, w, 0.0)` is `w` under the mask `c`: keys it hides weigh 0, as masked
    // keys do, and an affine `c` (causal `j <= i`) bounds the key tiles as a softmax mask does.
    Value w = m.weight, mask;
    if (auto sel = w.getDefiningOp<arith::SelectOp>()) {
      auto zero = sel.getFalseValue().getDefiningOp<arith::ConstantOp>();
      auto f = zero ? dyn_cast<FloatAttr>(zero.getValue()) : FloatAttr();
      if (f && f.getValue().isZero() && sel.getCondition().getType().isInteger(1))
        w = sel.getTrueValue(), mask = sel.getCondition();
    }
    SmallVector<Value> yields{materialize(w, m.def, map, sbld)};
    if (mask)
      yields.push_back(materialize(mask, m.def, map, sbld));
    sbld.create<attn::YieldOp>(m.red.getLoc(), yields);
    if (mask) {
      SmallVector<Value> extents;
      for (int64_t r : m.rows)
        extents.push_back(m.def.getExtents()[r]);
      extents.push_back(m.red.getExtents()[0]);
      if (ArrayAttr bounds =
              maskAxisBounds(*sb, ArrayRef<int64_t>{(int64_t)m.rows.size()}, ValueRange(extents)))
        op->setAttr(attn::kBoundsAttr, bounds);
    }
  }
  finishFused(op, m.def, m.red, m.factor, whole);
  return whole;
}

// Records on `op` the conjuncts of its mask that depend on the key but not on the query row (a
// key padding mask, `mask(b, j) == 0`), as `attn.key_mask`. This belongs here rather than in
// attn-mask-bounds: "the query row" is a role the fusion gives a score index (the innermost row,
// the one HalideGen groups the tiles' rows by); a plain softmax has no such row, and the
// conjuncts matter only to the tiles of the streaming form.
void recordKeyMask(attn::OnlineSoftmaxOp op) {
  op->removeAttr(attn::kKeyMaskAttr);
  if (!op.hasMask())
    return;
  Block &sb = op.getScore().front();
  Value keyArg = sb.getArgument(op.getKeyPosition());
  int qpos = op.getQueryPosition();
  Value qArg = qpos >= 0 ? Value(sb.getArgument(qpos)) : Value();
  SmallVector<Value> leaves;
  attn::maskConjuncts(sb.getTerminator()->getOperand(1), leaves);
  SmallVector<int64_t> keyLeaves, indices;
  bool keyOnly = true;
  for (auto [i, l] : llvm::enumerate(leaves)) {
    bool key = (!qArg || !dependsOn(l, qArg)) && dependsOn(l, keyArg);
    // key_only means the key conjuncts are the whole mask: HalideGen then tests no mask in the
    // tiles they fully let through. A conjunct that reads neither the query row nor the key
    // (`flag(b) > 0`) is no key conjunct, and must keep those tests
    // (regressions/key-mask-batch-conjunct.test).
    keyOnly &= key;
    if (key)
      keyLeaves.push_back(i);
  }
  if (keyLeaves.empty())
    return;
  // The other row indices the key conjuncts read: HalideGen reduces them once per entry of those.
  for (int64_t k = 0; k < (int64_t)sb.getNumArguments(); ++k)
    if (k != op.getKeyPosition() && k != qpos &&
        llvm::any_of(keyLeaves, [&](int64_t i) { return dependsOn(leaves[i], sb.getArgument(k)); }))
      indices.push_back(k);
  op->setAttr(attn::kKeyMaskAttr,
              attn::KeyMaskAttr::get(op.getContext(), keyLeaves, indices, keyOnly));
}

// Records on `op` (`attn.group_keys`) that its mask reads a tensor at the query row, with the other
// score indices the mask reads: such a mask has no affine bounds and is no key padding mask, so
// only a reduction of the mask itself (per group of query rows, at run time) can tell which key
// tiles a group visits. Affine conjuncts next to it (causal) keep bounding the tiles as well.
void recordGroupKeys(attn::OnlineSoftmaxOp op) {
  op->removeAttr(attn::kGroupKeysAttr);
  int qpos = op.getQueryPosition();
  if (!op.hasMask() || qpos < 0)
    return;
  Block &sb = op.getScore().front();
  Value mask = sb.getTerminator()->getOperand(1), qArg = sb.getArgument(qpos);
  SmallVector<Value> leaves;
  attn::maskConjuncts(mask, leaves);
  if (llvm::none_of(leaves, [&](Value l) { return dependsOn(l, qArg) && readsTensor(l); }))
    return;
  SmallVector<int64_t> indices;
  for (int64_t k = 0; k < (int64_t)sb.getNumArguments(); ++k)
    if (k != (int64_t)op.getKeyPosition() && k != qpos && dependsOn(mask, sb.getArgument(k)))
      indices.push_back(k);
  op->setAttr(attn::kGroupKeysAttr, DenseI64ArrayAttr::get(op.getContext(), indices));
}

struct OnlineSoftmaxPass : impl::OnlineSoftmaxPassBase<OnlineSoftmaxPass> {
  using Base::Base;

  void runOnOperation() override {
    if (tile < 0 || (tile != 0 && (tile < kMinOnlineTile || tile > kMaxOnlineTile))) {
      getOperation().emitError("attn-online-softmax: tile " + std::to_string(tile) +
                               " is outside " + std::to_string(kMinOnlineTile) + ".." +
                               std::to_string(kMaxOnlineTile));
      return signalPassFailure();
    }
    if (queryGroup < 0) {
      getOperation().emitError("attn-online-softmax: query group " + std::to_string(queryGroup) +
                               " is negative");
      return signalPassFailure();
    }
    llvm::SmallPtrSet<Operation *, 8> before;
    getOperation().walk([&](attn::OnlineSoftmaxOp op) { before.insert(op); });
    SmallVector<attn::SoftmaxOp> softmaxes;
    getOperation().walk([&](attn::SoftmaxOp p) { softmaxes.push_back(p); });
    for (attn::SoftmaxOp p : softmaxes) {
      std::string why;
      auto m = match(p, why);
      if (!m) {
        p->setAttr(kOnlineAttr, StringAttr::get(p.getContext(), "not fused: " + why));
        continue;
      }
      p->removeAttr(kOnlineAttr);
      rewrite(*m, chooseTile(p.getExtents()[p.getAxes()[0]], p, tile),
              queryGroup ? queryGroup : kDefaultOnlineQueryGroup);
    }
    // Weighted sums, a definition at a time (a fused whole definition is erased with its sums).
    SmallVector<attn::DefineOp> defs;
    getOperation().walk([&](attn::DefineOp d) { defs.push_back(d); });
    for (attn::DefineOp d : defs) {
      SmallVector<attn::ReduceOp> sums;
      for (Operation &op : d.getBody().front())
        if (auto r = dyn_cast<attn::ReduceOp>(op))
          sums.push_back(r);
      for (attn::ReduceOp r : sums) {
        std::string why;
        auto m = matchWeighted(r, why);
        if (!m) {
          if (!why.empty())
            r->setAttr(kOnlineAttr, StringAttr::get(r.getContext(), "not fused: " + why));
          continue;
        }
        if (rewriteWeighted(*m, chooseTile(r.getExtents()[0], r, tile),
                            queryGroup ? queryGroup : kDefaultOnlineQueryGroup))
          break;
      }
    }
    // Every online softmax, fused now or by an earlier run: a recorded analysis is recomputed,
    // never trusted.
    getOperation().walk([&](attn::OnlineSoftmaxOp op) {
      recordKeyMask(op);
      recordGroupKeys(op);
      // A softmax fused now with the default tile and no mask, or a mask whose visible keys are
      // taken per query group (packed sequences), streams its keys in longer tiles where they
      // are whole (Passes.h, kWholeOnlineTile). Weighted sums (no softmax) keep theirs.
      if (tile == 0 && !before.contains(op) && !op.getUnnormalized() &&
          (!op.hasMask() || op.hasRangedKeys()) && op.getTile() == kDefaultTile) {
        int64_t n = estimatedExtent(op.getKeyExtent(), op);
        if (n < 0 || n >= kWholeOnlineTile)
          op.setWholeTile(kWholeOnlineTile);
      }
    });
  }
};

} // namespace

} // namespace attnc
