// CPU schedule for online-softmax attention (attn.online_softmax): FlashAttention's loop nest on cores.
//
// Per tile of `rows` query rows (one parallel task), the state (running max, sum, accumulator)
// lives in L1; per key tile of that task, the score contraction (a small GEMM, rows x T keys over
// the head dimension), the tile's max, exps and exp sum, and the exps times V (a second small
// GEMM) are computed into buffers allocated once per task, then folded into the state. Nothing
// is ever sized by all keys. Measured on the 2-core Zen 4 (AVX-512) development machine, B=1,
// H=8, N=2048, D=64, first on a standalone Halide copy of this nest on a quiet machine:
//  - 32-row query tiles with 128-key tiles: 145 GFLOP/s; 64-key tiles 119; 256-key tiles 106;
//    64-row query tiles 136.
//  - Scores 2 rows x 128 keys (16 zmm accumulators): 145; 4 rows: 93 (spills).
//  - The tile's max and sum are reduced 16 lanes at a time (rfactor) into a buffer whose lane index
//    is innermost: storing it lane-outermost made each step a scatter and cost 40%.
//  - A head dimension known at compile time was worth 1.5x (unknown: ~90 GFLOP/s), so outputs had
//    specialisations for D = 64 and 128; since the exps x V product accumulates in register
//    blocks of constant size (below), only decode steps keep them (end of scheduleGroup).
// then in attnc (attn-bench, with a fuzzer loading the second core, so single-thread profiles):
//  - Tile buffers hoisted to the task were sized by every key the task visits (32 x 2048 floats,
//    rows 8 KiB apart); bounding their storage to one tile made them L1-resident.
//  - Exps x V with 4 rows x 4 vectors of D (16 accumulators) rather than 8 rows x 1 vector: the
//    row guards that causal tiles need then cost one test per 4 FMAs, not one per FMA.
//  - Whole tiles of 256 keys (HalideGen's whole_tile chain: no mask, no slot test; the score and
//    value GEMMs in blocks of 128 keys, online.score_keys) then tiles of 128 for the
//    rest (the exps x V GEMM now runs a whole tile per register block, see below), against
//    128-key tiles throughout (and 256 throughout), A/B in one process, Zen 4,
//    2 threads, B1 H8 D64: N2048 56.4 vs 60.7 (57.5) ms, N1030 17.1 vs 19.8 (20.1), N384 2.26
//    vs 2.28 (3.02); attn-bench sdpa N2048 52.3 ms, 70% of the FMA peak (57% before). The whole
//    chain's buffers are bounded by the task's rows (constant: on the stack) and not hoisted.
#include "attnc/Patterns.h"
#include "attnc/Schedule.h"
#include "attnc/Transforms/Passes.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>

namespace attnc {
namespace {

namespace H = Halide;

// Whether every call to a Func named in `names` (an input's: its ImageParam's and its wrapper's
// name) in `values` reads the key dimension (Halide's dimension 1, the
// DSL's second to last) at the key variable `key` itself.
bool readsAtKey(const std::vector<H::Expr> &values, const std::set<std::string> &names,
                const std::string &key) {
  struct Calls : H::Internal::IRVisitor {
    std::set<std::string> names;
    std::string key;
    bool plain = true;
    using H::Internal::IRVisitor::visit;
    void visit(const H::Internal::Call *c) override {
      if (names.count(c->name)) {
        const auto *v = c->args.size() >= 2 ? c->args[1].as<H::Internal::Variable>() : nullptr;
        plain = plain && v && v->name == key;
      }
      H::Internal::IRVisitor::visit(c);
    }
  } calls;
  calls.names = names;
  calls.key = key;
  for (const H::Expr &e : values)
    e.accept(&calls);
  return calls.plain;
}

// The product `a * b` of a sum's only update `f(...) + a * b` (one reduction variable), or null.
const H::Internal::Mul *updateProduct(const LoweredFunc &f) {
  namespace I = H::Internal;
  if (f.func.num_update_definitions() != 1 || f.rvars.size() != 1 ||
      f.func.update_values(0).size() != 1)
    return nullptr;
  const auto *add = f.func.update_value(0).as<I::Add>();
  const auto *self = add ? add->a.as<I::Call>() : nullptr;
  if (!self || self->name != f.func.name())
    return nullptr;
  return add->b.as<I::Mul>();
}

// Whether `e` is the variable `name`.
bool isVar(const H::Expr &e, const std::string &name) {
  const auto *v = e.as<H::Internal::Variable>();
  return v && v->name == name;
}

// The kernel input that a call reads (by its Func's name), or null.
const KernelParam *inputCalled(const LoweredKernel &k, const std::string &callName) {
  for (const KernelParam &p : k.inputs)
    if (callName == H::Func(p.param).name())
      return &p;
  return nullptr;
}

// A copy of key input `p` in pairs of its head dimension: pairs(dl, key, dp, ...) =
// p(2 dp + dl, key, ...), d clamped to the last (at an odd head dimension the last pair's second
// value repeats the last d's). With `zeroFrom` defined (tileScore's copy, which its whole tiles
// read past D and, where a chain has no tile, past the keys), values at d >= zeroFrom are zero
// and the key is clamped to the last one.
H::Func pairsCopy(const KernelParam &p, const std::string &name, H::Expr zeroFrom = H::Expr()) {
  const std::string n = p.param.name();
  std::vector<H::Var> a{H::Var(n + "_dl"), H::Var(n + "_j"), H::Var(n + "_dp")};
  H::Expr dv = 2 * a[2] + a[0];
  std::vector<H::Expr> from{H::min(dv, p.param.dim(0).extent() - 1), a[1]};
  if (zeroFrom.defined())
    from[1] = H::min(a[1], p.param.dim(1).extent() - 1);
  for (int d = 2; d < p.param.dimensions(); ++d) {
    a.push_back(H::Var(n + "_" + std::to_string(d)));
    from.push_back(a.back());
  }
  H::Func pairs(name);
  H::Expr value = H::Func(p.param)(from);
  pairs(a) = zeroFrom.defined()
                 ? H::select(dv < zeroFrom, value, H::Internal::make_zero(value.type()))
                 : value;
  return pairs;
}

// The bf16 input that contraction `C` reads along the key in a product of two bf16 values,
// `C + f32(x(d, key, ...)) * f32(y(...))` with `d` its reduction variable, or null: such a sum
// can run on the target's bf16 dot product (see keyPairs in scheduleGroup).
const KernelParam *pairableKeyRead(const LoweredFunc &C, LoweredKernel &k,
                                   const std::vector<std::string> &keyInputs,
                                   const std::string &key) {
  namespace I = H::Internal;
  const I::Mul *mul = updateProduct(C);
  if (!mul)
    return nullptr;
  const I::Call *x = widenedBF16Read(mul->a), *y = widenedBF16Read(mul->b);
  if (!x || !y)
    return nullptr;
  for (const I::Call *c : {x, y})
    if (const KernelParam *p = inputCalled(k, c->name);
        p && std::find(keyInputs.begin(), keyInputs.end(), p->name) != keyInputs.end() &&
        p->param.dimensions() >= 2 && c->args.size() >= 2 && isVar(c->args[0], C.rvars[0].name()) &&
        isVar(c->args[1], key))
      return p;
  return nullptr;
}

// Whether any of `values` calls `name`.
bool callsAny(const std::vector<H::Expr> &values, const std::string &name) {
  struct Calls : H::Internal::IRVisitor {
    std::string name;
    bool found = false;
    using H::Internal::IRVisitor::visit;
    void visit(const H::Internal::Call *c) override {
      found = found || c->name == name;
      H::Internal::IRVisitor::visit(c);
    }
  } calls;
  calls.name = name;
  for (const H::Expr &e : values)
    e.accept(&calls);
  return calls.found;
}

// `e` with every call to `src` (x(d, j, ...)) read from `pairs` (pairs(d % 2, j, d / 2, ...)).
H::Expr readPairs(const H::Expr &e, const std::string &src, H::Func pairs) {
  struct Mutator : H::Internal::IRMutator {
    std::string src;
    H::Func pairs;
    using H::Internal::IRMutator::visit;
    H::Expr visit(const H::Internal::Call *c) override {
      if (c->name != src)
        return H::Internal::IRMutator::visit(c);
      std::vector<H::Expr> a{c->args[0] % 2, c->args[1], c->args[0] / 2};
      a.insert(a.end(), c->args.begin() + 2, c->args.end());
      return pairs(a);
    }
  } m;
  m.src = src;
  m.pairs = pairs;
  return m.mutate(e);
}

// The head dimensions at which a pairable contraction reduces in pairs, as conditions on its
// reduction's extent: the contraction gets a specialisation for each.
std::vector<H::Expr> pairDims(const LoweredFunc &C) {
  const H::Expr D = C.rvars[0].extent();
  return {D == 64, D == 128};
}

// A pairable contraction's update (pairableKeyRead) reading `src` from `pairs`, its product
// spelt with Halide's casts (the form its bf16 dot-product pattern matches) under pairDims, the
// specialisations that reduce in pairs, and with HalideGen's integer widening elsewhere (a cast
// that no dot product consumes Halide emulates with the same integer operations, but warns on
// stderr), so each copy of the loop keeps one form.
H::Expr pairedUpdate(const LoweredFunc &C, const std::string &src, H::Func pairs) {
  namespace I = H::Internal;
  const std::vector<H::Expr> dims = pairDims(C);
  H::Expr dot = dims[0];
  for (size_t i = 1; i < dims.size(); ++i)
    dot = dot || dims[i];
  const auto *add = C.func.update_value(0).as<I::Add>();
  const auto *mul = add->b.as<I::Mul>();
  H::Expr cast = H::cast<float>(H::Expr(widenedBF16Read(mul->a))) *
                 H::cast<float>(H::Expr(widenedBF16Read(mul->b)));
  return add->a + readPairs(H::select(dot, cast, add->b), src, pairs);
}

// Query rows per parallel task (measured above: 32-row tiles ran at 145 GFLOP/s, 64-row ones at
// 136), where the online softmax's query groups do not decide it (no mask bounds).
constexpr int kQueryTile = 32;
// Rows per task of a decode step (rows with keys of their own): a few rows so that a batch of
// one still has a task per core, and GQA's query heads of one kv head read its key tile while it
// is in cache.
constexpr int kDecodeRows = 4;

struct OnlineParams {
  int queryTile = kQueryTile; // query rows per parallel task
  int scoreRows = 2;          // rows of the score GEMM kept in registers
  int valueRows = 4;          // rows of the exp x V GEMM kept in registers
  int valueVectors = 4; // vectors of the value index per row in registers (at most; see defaults)
  int scoreKeys = 128;  // keys per block of the score GEMM (a tile or more: the whole tile;
                        // defaults() sets it from the target)
  // The score block of whole tiles (longer than the group's tile: no mask, no row guard).
  int wholeScoreRows = 2, wholeScoreKeys = 128;
};

H::Var varNamed(const LoweredFunc &f, const std::string &n) {
  for (size_t i = 0; i < f.varNames.size(); ++i)
    if (f.varNames[i] == n)
      return f.vars[i];
  return H::Var();
}
bool hasVar(const LoweredFunc &f, const std::string &n) {
  return std::find(f.varNames.begin(), f.varNames.end(), n) != f.varNames.end();
}

// Clones of the pattern's contractions for the chain whose scores are `score`, and of the
// pointwise definitions between them, so that the chain's tiles compute their own copies.
// Each clone is returned as a view of its original (same names of indices).
std::vector<LoweredFunc> cloneContractions(LoweredKernel &k, const OnlinePattern &g,
                                           const LoweredFunc &score) {
  std::vector<const LoweredFunc *> contractions;
  for (FuncIndex c : g.contractions)
    contractions.push_back(&k.funcs[c]);
  std::vector<LoweredFunc> out;
  std::function<void(const LoweredFunc &, H::Func, int)> walk = [&](const LoweredFunc &reader,
                                                                    H::Func consumer, int depth) {
    if (depth > 8)
      return;
    for (const std::string &rn : reader.reads) {
      LoweredFunc *f = k.find(rn);
      if (!f || f->isOutput)
        continue;
      bool contraction =
          std::find(contractions.begin(), contractions.end(), f) != contractions.end();
      if (!contraction && f->role != FuncRole::Define)
        continue;
      // Halide (21) cannot deep-copy a Func that already has a clone (an earlier chain's):
      // its schedule's wrappers are copied too, and the earlier clone is not in the copy's map
      // (an internal error naming it). The wrappers are set aside while it clones, then put back.
      std::map<std::string, H::Internal::FunctionPtr> &wrappers =
          f->func.function().schedule().wrappers();
      std::map<std::string, H::Internal::FunctionPtr> earlier;
      earlier.swap(wrappers);
      H::Func clone = f->func.clone_in(consumer);
      wrappers.insert(earlier.begin(), earlier.end());
      if (contraction) {
        LoweredFunc view = *f;
        view.func = clone;
        out.push_back(std::move(view));
      } else {
        walk(*f, clone, depth + 1);
      }
    }
  };
  walk(score, score.func, 0);
  return out;
}

// AMX score tiles (Target::amx; online.bf16_dot = 3, its default there): a pairable contraction
// (pairableKeyRead) of a chain whose tiles are whole (every tile T keys from a multiple of T:
// sdpa's 256-key tiles) computed by Halide's AMX tiles. Its consumers read a wrapper (the score
// tile, 16 x 16 blocks) that stores each block of `A`, the product kept in a tile register:
// A(key, row) += f32(qa(d, row)) * f32(panel(d % 2, key, d / 2)) over d in [0, D rounded up to
// 32), tdpbf16ps's 32 values of d per step. The operands:
// - panel: the key input per head in pairs of d ([d / 2][key][d % 2], pairsCopy, zero past D),
//   the layout of tdpbf16ps's right operand, read through a copy per tile (tilePanel): Halide 21
//   recognises the product only where that operand's rows (one per pair of d) lie a constant
//   stride apart, and the per-head copy's stride is the key count ("Store to AMX tile
//   allocation of a non-tile value"); the tile's copy has T keys per row.
// - qa: the query rows of the task, rows past the last clamped to it and d past D zero (as the
//   panel's): the blocks are whole 16 x 16 tiles (rounded up, AMX has no partial tile here), and
//   zeros add nothing to a sum.
// tdpbf16ps multiplies exactly (a product of two bf16 values fits an f32) and, like vdpbf16ps,
// reads bf16 subnormals as zero.
// Route (#22 item 3): Halide's own AMX support, not a library micro-kernel called as an extern
// stage, keeps the tile products inside the online softmax's tile loop, next to its exps, with
// no call per tile. What Halide 21's AMX pass needs, found by trying (its failures are compile
// errors, so the rule offers only what matches): whole 16 x 16 result tiles (align_bounds, and
// copies that read rows and keys past the ends clamped), a reduction split in steps of 32 bf16
// values exactly (zero-padded), a right operand whose rows lie a constant stride apart and whose
// index is one ramp (a whole-head copy in panels of 16 keys left key / 16 as a separate term and
// was not recognised; so a copy per tile, from the whole-head one, with a constant extent).
// Measured on an Intel Xeon with AMX (family 6 model 167, 2 threads), attn-bench, sdpa bf16 B1
// H8 N2048 D64: 57.0 ms with vdpbf16ps pairs (the f32 build 53.2: on this core vdpbf16ps issues
// at half an FMA's rate, so pairs gain nothing), 52.3 with the scores on AMX tiles, 35.5 with
// the exps x V product too (1.40x the f32 build; PyTorch's bf16 SDPA 15.1 ms). Halide's
// profiler after: the exps 25%, splitting them into parts ~15%, the per-tile copies ~10%.
struct TileScore {
  H::Func panel, tilePanel, qa, product, scores;
  H::RDom d; // the product's reduction
};
std::optional<TileScore> tileScore(LoweredFunc &C, LoweredKernel &k, const KernelParam &keyIn,
                                   const std::string &key, const std::string &queryVar,
                                   std::map<std::string, H::Func> &panels) {
  namespace I = H::Internal;
  const std::vector<H::Var> args = C.func.args();
  if (args.size() < 2 || args[0].name() != varNamed(C, key).name() ||
      args[1].name() != varNamed(C, queryVar).name())
    return std::nullopt;
  const I::Mul *mul = updateProduct(C); // (pairableKeyRead matched it)
  const I::Call *x = widenedBF16Read(mul->a), *y = widenedBF16Read(mul->b);
  const std::string keyName = H::Func(keyIn.param).name();
  if (x->name != keyName)
    std::swap(x, y);
  // The other operand: an input read at (d, row, ...), d only there.
  const KernelParam *qIn = inputCalled(k, y->name);
  const H::RVar d = C.rvars[0];
  if (!qIn || qIn->name == keyIn.name || y->args.size() < 2 || !isVar(y->args[0], d.name()) ||
      !isVar(y->args[1], varNamed(C, queryVar).name()) || x->args.size() < 2)
    return std::nullopt;
  for (size_t n = 2; n < y->args.size(); ++n)
    if (I::expr_uses_var(y->args[n], d.name()))
      return std::nullopt;
  for (size_t n = 2; n < x->args.size(); ++n)
    if (I::expr_uses_var(x->args[n], d.name()))
      return std::nullopt;

  const H::Expr D = d.extent(), Dp = (D + 31) / 32 * 32;
  const H::Expr zero = I::make_zero(H::BFloat(16));
  TileScore ts;
  auto it = panels.find(keyName);
  if (it == panels.end())
    it = panels.emplace(keyName, pairsCopy(keyIn, keyIn.param.name() + "_amx_pairs", D)).first;
  ts.panel = it->second;
  {
    const std::string n = C.name + "_rows";
    std::vector<H::Var> a;
    std::vector<H::Expr> from;
    for (size_t e = 0; e < y->args.size(); ++e) {
      a.push_back(H::Var(n + "_" + std::to_string(e)));
      from.push_back(a.back());
    }
    from[0] = H::min(a[0], qIn->param.dim(0).extent() - 1);
    from[1] = H::min(a[1], qIn->param.dim(1).extent() - 1);
    ts.qa = H::Func(n);
    ts.qa(a) = H::select(a[0] < D, H::Func(qIn->param)(from), zero);
  }
  H::RDom r(0, Dp, C.name + "_amx_d");
  ts.d = r;
  std::vector<H::Expr> kAt{r.x % 2, args[0], r.x / 2};
  kAt.insert(kAt.end(), x->args.begin() + 2, x->args.end());
  std::vector<H::Expr> qAt{r.x};
  qAt.insert(qAt.end(), y->args.begin() + 1, y->args.end());
  ts.product = H::Func(C.name + "_amx");
  ts.product(args) = 0.0f;
  ts.product(args) += H::cast<float>(ts.qa(qAt)) * H::cast<float>(ts.panel(kAt));
  ts.tilePanel = ts.panel.in(ts.product);
  // The consumers read the tile wrapper, which stores the product's tiles.
  ts.scores = C.func.in();
  std::vector<H::Expr> at;
  for (const H::Var &v : ts.scores.args())
    at.push_back(v);
  ts.scores.function().definition().values()[0] = ts.product(at);
  return ts;
}

// AMX exps x values (the tiles of a chain whose scores tileScore computes): the tile's exps are
// f32, and AMX multiplies bf16, so each exp is split into three bf16 parts, t = hi + mid + lo
// exactly (hi = bf16(t); mid = bf16(t - hi), exact in f32 as it has at most 16 significant bits;
// lo = t - hi - mid, at most 8), and the tile's product is three AMX products into one tile
// register: the f32 product's result to f32 rounding, not bf16's (PyTorch and FlashAttention
// round the exps to bf16 instead). The values' right operand is a copy per block of 16 value
// indices in pairs of keys ([key / 2][e % 16][key % 2], a constant 64-byte row stride, as
// tileScore's panels), zero past D.
struct TileValues {
  H::Func values, parts[3], product, sums;
  H::RDom u;
};
std::optional<TileValues> tileValues(LoweredFunc &tpv, const LoweredFunc &texp, LoweredKernel &k,
                                     const std::string &valueVar, const std::string &queryVar,
                                     H::Expr Nq, int T) {
  namespace I = H::Internal;
  const I::Mul *mul = updateProduct(tpv);
  if (T % 32 != 0 || !Nq.defined() || !mul)
    return std::nullopt;
  const I::Call *e = mul->a.as<I::Call>(), *v = widenedBF16Read(mul->b);
  if (!e || !v) {
    e = mul->b.as<I::Call>(), v = widenedBF16Read(mul->a);
    if (!e || !v)
      return std::nullopt;
  }
  const KernelParam *vIn = inputCalled(k, v->name);
  const std::string un = tpv.rvars[0].name();
  H::Var ev = varNamed(tpv, valueVar), iv = varNamed(tpv, queryVar);
  if (ev.name().empty() || iv.name().empty() || e->name != texp.func.name() || !vIn ||
      v->args.size() < 2 || !isVar(v->args[0], ev.name()))
    return std::nullopt;
  int keyArgs = 0, rowArgs = 0;
  for (const H::Expr &a : e->args) {
    keyArgs += isVar(a, un);
    rowArgs += isVar(a, iv.name());
    if (!isVar(a, un) && I::expr_uses_var(a, un))
      return std::nullopt;
  }
  for (size_t n = 2; n < v->args.size(); ++n)
    if (I::expr_uses_var(v->args[n], un))
      return std::nullopt;
  if (keyArgs != 1 || rowArgs != 1)
    return std::nullopt;

  std::vector<H::Var> others; // tpv's indices but the value index and the row
  for (const H::Var &a : tpv.func.args())
    if (a.name() != ev.name() && a.name() != iv.name())
      others.push_back(a);
  const std::string n = tpv.name;
  const H::Expr zero = I::make_zero(H::BFloat(16));
  TileValues tv;
  {
    H::Var kl(n + "_kl"), kp(n + "_kp");
    std::vector<H::Var> a{kl, ev, kp};
    a.insert(a.end(), others.begin(), others.end());
    const H::Expr De = vIn->param.dim(0).extent();
    std::vector<H::Expr> from{H::min(ev, De - 1)};
    // The key without HalideGen's promise that it is inside the keys (a per-lane call to Halide:
    // the two keys of a pair were two strided stores, not one interleaved vector), clamped
    // instead (scalar here), as Halide bounds the reads of a chain that has no tile (Nk < T).
    struct Unpromise : I::IRMutator {
      using I::IRMutator::visit;
      H::Expr visit(const I::Call *c) override {
        if (c->is_intrinsic(I::Call::unsafe_promise_clamped))
          return mutate(c->args[0]);
        return I::IRMutator::visit(c);
      }
    } unpromise;
    from.push_back(H::min(unpromise.mutate(I::substitute(un, 2 * kp + kl, v->args[1])),
                          vIn->param.dim(1).extent() - 1));
    for (size_t m = 2; m < v->args.size(); ++m)
      from.push_back(v->args[m]);
    tv.values = H::Func(n + "_amx_values");
    tv.values(a) = H::select(ev < De, H::Func(vIn->param)(from), zero);
  }
  {
    H::Var uu(n + "_u");
    std::vector<H::Var> a{uu, iv};
    a.insert(a.end(), others.begin(), others.end());
    std::vector<H::Expr> at;
    for (const H::Expr &x : e->args)
      at.push_back(isVar(x, un) ? H::Expr(uu) : isVar(x, iv.name()) ? H::min(iv, Nq - 1) : x);
    H::Expr t = texp.func(at);
    const char *part[3] = {"_hi", "_mid", "_lo"};
    for (int m = 0; m < 3; ++m)
      tv.parts[m] = H::Func(n + "_amx" + part[m]);
    tv.parts[0](a) = narrowStorage(t, DType::BF16);
    H::Expr hi = widenStorage(tv.parts[0](a));
    tv.parts[1](a) = narrowStorage(t - hi, DType::BF16);
    tv.parts[2](a) = narrowStorage(t - hi - widenStorage(tv.parts[1](a)), DType::BF16);
  }
  std::vector<H::Var> pa{ev, iv};
  pa.insert(pa.end(), others.begin(), others.end());
  H::RDom r(0, T, n + "_amx_u");
  tv.u = r;
  std::vector<H::Expr> pAt{r.x, iv}, vAt{r.x % 2, ev, r.x / 2};
  pAt.insert(pAt.end(), others.begin(), others.end());
  vAt.insert(vAt.end(), others.begin(), others.end());
  tv.product = H::Func(n + "_amx");
  tv.product(pa) = 0.0f;
  for (int m = 0; m < 3; ++m)
    tv.product(pa) += H::cast<float>(tv.parts[m](pAt)) * H::cast<float>(tv.values(vAt));
  tv.sums = tpv.func.in();
  std::vector<H::Expr> at;
  for (const H::Var &a : pa)
    at.push_back(a);
  tv.sums.function().definition().values()[0] = tv.product(at);
  return tv;
}

// A tile product (tileScore's, tileValues'): one 16 x 16 f32 tile register (x the columns, y
// the rows), zeroed, then each update's reduction in steps of 32 bf16 values, the form Halide's
// AMX pass turns into tilezero and tdpbf16ps.
void scheduleTileProduct(H::Func product, H::Var x, H::Var y, H::RVar r, const std::string &n) {
  H::Var px(n + "_px"), py(n + "_py"), zx(n + "_zx"), zy(n + "_zy");
  product.store_in(H::MemoryType::AMXTile);
  for (int m = 0; m < product.num_update_definitions(); ++m) {
    H::RVar rO(n + "_amx_ro"), rI(n + "_amx_ri");
    product.update(m)
        .tile(x, y, px, py, 16, 16, H::TailStrategy::GuardWithIf)
        .split(r, rO, rI, 32)
        .reorder({rI, px, py, rO, x, y})
        .atomic()
        .vectorize(rI)
        .vectorize(px)
        .vectorize(py);
  }
  product.tile(x, y, zx, zy, 16, 16).vectorize(zx).vectorize(zy);
}

void scheduleGroup(LoweredKernel &k, const OnlinePattern &g, const Target &t,
                   const OnlineParams &prm, const ScheduleParams &params) {
  const int vec = t.floatLanes;
  auto at = [&](FuncIndex i) { return &k.funcs[i]; };
  // A chain's keys per tile (whole tiles are longer than the group's), if constant.
  auto chainKeys = [&](const OnlineChain &c) -> std::optional<int> {
    return c.tile > 0 ? std::optional<int>(c.tile) : std::nullopt;
  };
  const OnlineGroup &G = k.onlineGroups[g.group];
  LoweredFunc &O = *at(G.output);
  LoweredFunc &S = *at(G.state);
  const OnlineChain &masked = G.masked();
  const LoweredFunc &texp = *at(masked.texp);
  const std::string key = texp.varNames[texp.softmaxAxes[0]];

  if (!O.isOutput)
    O.func.compute_root();
  if (g.queryVar.empty()) {
    // No row index (a single query row): the output as any Func; the state and tiles are then
    // computed per output element, where Halide puts unscheduled reductions.
    scheduleGenericFunc(O, t, params);
    return;
  }
  H::Var i = varNamed(O, g.queryVar);
  H::Var io(O.name + "_qo"), ii(O.name + "_qi");
  O.func.split(i, io, ii, prm.queryTile, H::TailStrategy::GuardWithIf);
  // Loops, innermost first: the value indices, the query rows of a tile, the tiles, then the
  // other row indices (batch, heads), all but the value indices parallel.
  std::vector<H::VarOrRVar> order;
  std::vector<H::Var> batch;
  // The rows: the score's indices but the key (texp's, less the key and the tile).
  std::vector<std::string> rows;
  for (size_t n = 0; n + 1 < texp.varNames.size(); ++n)
    if ((int)n != texp.softmaxAxes[0])
      rows.push_back(texp.varNames[n]);
  auto isRow = [&](const std::string &n) {
    return std::find(rows.begin(), rows.end(), n) != rows.end();
  };
  for (auto it = O.varNames.rbegin(); it != O.varNames.rend(); ++it)
    if (!isRow(*it))
      order.push_back(varNamed(O, *it));
  order.push_back(ii);
  order.push_back(io);
  for (auto it = O.varNames.rbegin(); it != O.varNames.rend(); ++it)
    if (isRow(*it) && *it != g.queryVar) {
      order.push_back(varNamed(O, *it));
      batch.push_back(varNamed(O, *it));
    }
  O.func.reorder(order);
  if (!g.valueVar.empty())
    O.func.vectorize(varNamed(O, g.valueVar), vec, H::TailStrategy::GuardWithIf);
  // The heads (and batch entries) run in parallel as well as each head's query tiles. With the
  // tiles alone, a parallel loop of N/32 tasks was started and joined per head after the head's
  // transposed K was copied on one thread: at N=256 each thread ran 4 tasks between joins.
  // attn-bench on the 2-core Zen 4 (B1 H8 D64), tiles alone vs nested, alternating runs (ms):
  // sdpa N256 1.09-1.55 vs 1.02-1.19, causal N256 1.38-1.40 vs 0.93-0.98, rotary_attention N256
  // 2.05-2.14 vs 1.01-1.08; sdpa N2048 59.8-62.1 vs 58.9-62.9 (the same). The 45% of waiting an
  // earlier profile showed at N2048 with nested loops did not reappear. One parallel loop over
  // (head, tile) fused measured about the same, but it needs a split that rounds up (Halide 21
  // mis-bounds a fused loop of a guarded split: q was read past its end at N=256), so a
  // specialisation for whole tiles, which tripled compile times.
  O.func.parallel(io);
  for (const H::Var &bv : batch)
    O.func.parallel(bv);
  H::LoopLevel task(O.func, io), hoist(O.func, io);

  S.func.compute_at(task);
  // A pointwise definition the scores read along the query (rotary embeddings' rotated q), once
  // per task: inlined, each key tile recomputed it for every broadcast operand of the score loops
  // (4 scalar loads and 3 operations in place of one load), and rotary_attention ran at 1.33x
  // causal_attention's time (B1 H8 N2048 D64, Skylake-SP, attn-bench).
  if (!g.queryVar.empty())
    for (const std::string &fn : g.queryFuncs)
      if (LoweredFunc *f = k.find(fn); f && !f->vars.empty()) {
        f->func.compute_at(task).vectorize(f->func.args()[0], vec, H::TailStrategy::GuardWithIf);
      }
  // The state's loops, innermost first: the value indices, the rows, the key tiles, then (grouped
  // under mask bounds) the query group, so each group decides once per tile whether to visit it.
  std::string groupName, laneName;
  if (G.grouped)
    for (const std::string &n : S.varNames)
      if (std::find(O.varNames.begin(), O.varNames.end(), n) == O.varNames.end())
        (groupName.empty() ? groupName : laneName) = n;
  const std::string rowName = G.grouped ? laneName : g.queryVar;
  if (!g.valueVar.empty())
    S.func.vectorize(varNamed(S, g.valueVar), vec, H::TailStrategy::GuardWithIf);
  // Under key ranges, where the value extent is a multiple of the vector, the value loop rounds
  // up instead of guarding each vector store with an `if` of its own next to the range's.
  H::Expr valueExtent;
  for (auto &[n, e] : G.extents)
    if (n == g.valueVar)
      valueExtent = e;
  // The value extent as the output's buffer states it where the online softmax is the output
  // (the bounds Halide infers for the output are in terms of it, so conditions on it fold); the
  // exps x V blocks and a decode step's specialisations test it.
  H::Expr blockDe = valueExtent;
  if (O.isOutput && !g.valueVar.empty() && O.varNames.back() == g.valueVar)
    blockDe = k.outputBuffer(O).dim(0).extent();
  for (int s = 0; s < S.func.num_update_definitions(); ++s) {
    H::Stage su = S.func.update(s);
    std::vector<H::VarOrRVar> sorder;
    for (auto it = S.varNames.rbegin(); it != S.varNames.rend(); ++it)
      if (!isRow(*it) && *it != groupName && *it != laneName)
        sorder.push_back(varNamed(S, *it));
    sorder.push_back(varNamed(S, rowName));
    sorder.push_back(S.rvars[s]);
    if (!groupName.empty())
      sorder.push_back(varNamed(S, groupName));
    if (G.keyRanged && valueExtent.defined())
      if (std::optional<H::Stage> whole = specializeFor(su, {valueExtent % vec == 0}, t)[0])
        whole->reorder(sorder).vectorize(varNamed(S, g.valueVar), vec, H::TailStrategy::RoundUp);
    su.reorder(sorder);
    if (!g.valueVar.empty())
      su.vectorize(varNamed(S, g.valueVar), vec, H::TailStrategy::GuardWithIf);
  }

  // Each chain's tile Funcs are computed per step of its own state update. A chain other than the
  // masked one reads clones of the contractions (a Func is computed at one loop level only).
  std::vector<std::vector<LoweredFunc>> clones(G.chains.size());
  std::vector<std::vector<LoweredFunc *>> chainContractions(G.chains.size());
  std::vector<H::Func> keyReaders;
  std::vector<H::Expr> keyReadValues; // what they compute, where K is read
  // bf16 dot products (Target::bf16Dot): a contraction of a bf16 key input with another bf16
  // operand reads the key input from a per-head copy whose head dimension is split in pairs
  // (keyPairs: pairs(dl, key, dp) = k(2 dp + dl, key)), so that a vector of keys holds, per lane,
  // the two bf16 values a vdpbf16ps lane multiplies. online.bf16_dot: products summed per lane and
  // instruction, 2 (vdpbf16ps's pairs, the default) or 1 (f32 multiply-adds, as without it).
  // vdpbf16ps does twice an FMA's multiplies per instruction; the products of two bf16 values are
  // exact in f32, and it treats subnormal bf16 inputs as 0. A/B in one process, AMD Zen 5 (EPYC
  // family 26, AVX512_BF16), 2 threads, B1 H8 N2048 D64, medians of 9 interleaved runs: sdpa
  // bf16 21.3 ms with pairs, 26.6 without, f32 29.4; causal 15.3, 18.0, f32 21.2. Halide's
  // profiler, sdpa: the score GEMM 8.7 ms in f32 (~490 GFLOP/s, the FMA peak), 5.4 ms in pairs
  // (~800 GFLOP/s); the exps x V GEMM (f32 exps, bf16 V) is the same in both.
  // online.bf16_dot = 3: AMX tiles (tileScore) where the target has them and a chain's tiles
  // allow, pairs elsewhere.
  const int dotKind = params.get("online.bf16_dot", t.amx ? 3 : 2);
  const bool pairsOn = t.bf16Dot && g.rowsShareKeys && dotKind >= 2;
  const bool tilesOn = pairsOn && t.amx && dotKind == 3;
  std::map<std::string, H::Func> keyPairs;  // by the key input's Func name (k_im)
  std::map<std::string, H::Func> keyPanels; // tileScore's, likewise
  for (const OnlineChain &c : G.chains) {
    std::vector<LoweredFunc *> &mine = chainContractions[c.stage];
    if (c.score == masked.score) {
      for (FuncIndex f : g.contractions)
        mine.push_back(at(f));
    } else {
      clones[c.stage] = cloneContractions(k, g, *at(c.score));
      for (LoweredFunc &f : clones[c.stage])
        mine.push_back(&f);
    }
  }
  for (const OnlineChain &c : G.chains) {
    H::LoopLevel tile(S.func, S.rvars[c.stage]);
    LoweredFunc &ctexp = *at(c.texp), &ctpv = *at(c.tpv);
    const int T = chainKeys(c).value_or((int)kDefaultOnlineTile);
    const bool wholeTiles = T > G.tile; // (only whole tiles are longer than the group's)
    const int scoreRows = wholeTiles ? prm.wholeScoreRows : prm.scoreRows;
    const int scoreKeys = wholeTiles ? prm.wholeScoreKeys : prm.scoreKeys;
    // Tile buffers: allocated once per task, except the fully visible chain's, which Halide may
    // drop from a specialisation (N < tile) and then cannot hoist; grouped, a tile has the rows
    // of one group, so those buffers have a constant size (stack, not heap).
    // Under key ranges (a padding mask), KeyRangeLoops.cpp bounds a tile loop to the tiles in
    // range only where nothing computed in it outlives an iteration: the buffers stay in the
    // loop, sized by the task's rows so that they are constant (on the stack), as are the fully
    // visible chain's (unbounded, whole tiles of sdpa's were heap allocations, one per tile). A one-key tile (--online-tile=1)
    // is not hoisted either: Halide drops the extent-1 buffer's Realize and then cannot hoist it.
    // A group's whole tiles' are on the stack by request: Halide guards each of their iterations,
    // producers included, by the range's test, which made their buffers conditional allocations,
    // on the heap (one malloc per tile: packed sequences, H8 N4096, 59 ms against 58 with no
    // whole tiles); hoisting them fails as above. Nor are they with a constant key count (a
    // window of 512 keys: its whole tiles take every key, Halide drops the empty rest chain's
    // loop and Realize, and then cannot hoist); their buffers have a constant size there.
    const bool constantKeys = G.keyCount.defined() && H::Internal::as_const_int(G.keyCount);
    auto place = [&](H::Func f, const std::vector<H::Var> &fvars) {
      f.compute_at(tile);
      if (!c.full && !G.keyRanged && T > 1 && !constantKeys)
        f.hoist_storage(hoist);
      if (c.groupWhole)
        f.store_in(H::MemoryType::Stack);
      for (const H::Var &a : fvars)
        if (a.name() == g.queryVar && (G.grouped || G.keyRanged || c.full))
          f.bound_storage(a, G.grouped ? G.queryGroup : prm.queryTile);
    };
    // Scores: rows x T keys per step, the keys as one T-wide vector (T/vec registers per row).
    bool tiledScores = false; // by tileScore
    for (LoweredFunc *C : chainContractions[c.stage]) {
      if (!hasVar(*C, key)) {
        C->func.compute_at(tile);
        continue;
      }
      place(C->func, C->vars);
      // A bf16 key input multiplied by a bf16 operand is read from its copy in pairs of the head
      // dimension (keyPairs) when the target has a bf16 dot product; other reads go through the
      // transposed copy below.
      const KernelParam *paired = pairsOn ? pairableKeyRead(*C, k, g.keyInputs, key) : nullptr;
      std::optional<TileScore> ts;
      if (paired && tilesOn && wholeTiles && c.full && !c.groupWhole && !G.grouped &&
          !G.keyRanged && T % 16 == 0 && prm.queryTile % 16 == 0)
        ts = tileScore(*C, k, *paired, key, g.queryVar, keyPanels);
      if (ts) {
        tiledScores = true;
        H::Func W = ts->scores;
        place(W, C->vars);
        H::Var kv = varNamed(*C, key), qv = varNamed(*C, g.queryVar);
        W.bound_storage(kv, T).store_in(H::MemoryType::Stack);
        const std::string n = C->name;
        H::Var kvi(n + "_tk"), qvi(n + "_tq");
        W.align_bounds(kv, 16).align_bounds(qv, 16);
        W.tile(kv, qv, kvi, qvi, 16, 16, H::TailStrategy::RoundUp).vectorize(kvi).vectorize(qvi);
        ts->product.compute_at(W, kv);
        scheduleTileProduct(ts->product, kv, qv, ts->d.x, n);
        ts->qa.compute_at(task).vectorize(ts->qa.args()[0], 2 * vec, H::TailStrategy::GuardWithIf);
        {
          std::vector<H::Var> a = ts->tilePanel.args();
          ts->tilePanel.compute_at(tile)
              .bound_storage(a[1], T)
              .store_in(H::MemoryType::Stack)
              .vectorize(a[0])
              .vectorize(a[1], vec, H::TailStrategy::GuardWithIf);
        }
        continue;
      }
      if (paired) {
        // (The clamped last pair's second value is never multiplied: the score loop runs over
        // d < D.)
        auto it = keyPairs.find(H::Func(paired->param).name());
        if (it == keyPairs.end())
          it = keyPairs
                   .emplace(H::Func(paired->param).name(),
                            pairsCopy(*paired, paired->param.name() + "_pairs"))
                   .first;
        C->func.function().update(0).values()[0] = pairedUpdate(*C, it->first, it->second);
      } else {
        keyReaders.push_back(C->func);
        keyReadValues.push_back(C->func.update_value(0));
      }
      // Bounded to one key tile: Halide would size a hoisted allocation by all the keys the task
      // visits (256 KiB for 32 rows at N = 2048), with rows 8 KiB apart.
      C->func.bound_storage(varNamed(*C, key), T);
      H::Var kv = varNamed(*C, key);
      C->func.vectorize(kv, vec, H::TailStrategy::GuardWithIf);
      H::Stage cu = C->func.update();
      if (!g.rowsShareKeys) {
        // Each row its own keys (a decode step): a dot product per (row, key) along the head
        // dimension, which K holds contiguously, in vec-wide partial sums (rfactor), then one sum
        // of the lanes per key. Vectorised along the keys as above, every lane read another K
        // row: gathers (through a page table, a gather per element). B4 H32 N2048 D128, Zen 4,
        // 2 threads, C++ harness: 65 ms with the keys vectorised and K's transposed copy (the
        // unfused plan: 67 ms), 9 ms this way (PyTorch's SDPA: 18 ms); partial sums for 2 or 4
        // keys at a time, as independent FMA chains, ran at 21 and 25 ms.
        H::RVar d = C->rvars[0], dO(C->name + "_do"), dI(C->name + "_di");
        H::Var u(C->name + "_lane");
        H::Func intm = cu.split(d, dO, dI, vec, H::TailStrategy::GuardWithIf).rfactor(dI, u);
        cu.reorder(dI, kv);
        intm.compute_at(C->func, kv).vectorize(u);
        intm.update().reorder(u, dO).vectorize(u);
        continue;
      }
      // With pairs, the head dimension d = 2 dp + dl: dl innermost, reduced in the vector
      // (atomic) into the keys' lanes, which Halide emits as one vdpbf16ps per vector of keys
      // and (row, dp). Only at a head dimension known at compile time (64 or 128, as the output
      // is specialised): at another, Halide would guard each pair by d < D, which breaks the
      // pattern; those keep the f32 multiply-adds, reading the pairs' copy. Grouped query tiles
      // (causal) take one row at a time: in blocks of two rows Halide (21) gave up reducing in
      // the vector and left scalar loops (causal bf16 N2048 378 ms, against 15 ms by rows): the
      // row's index there carries the group's clamps as lets, named differently in the store and
      // in the value's load, so its atomic vectoriser did not see `f[x] = f[x] + e`.
      auto scheduleScore = [&](H::Stage su, bool pairs) {
        H::RVar d = C->rvars[0], dp(C->name + "_dp"), dl(C->name + "_dl");
        H::VarOrRVar red = d;
        std::vector<H::VarOrRVar> first;
        if (pairs) {
          su.split(d, dp, dl, 2, H::TailStrategy::GuardWithIf);
          red = dp;
          first.push_back(dl);
        }
        auto reorder = [&](std::vector<H::VarOrRVar> loops) {
          loops.insert(loops.begin(), first.begin(), first.end());
          su.reorder(loops);
          if (pairs)
            su.atomic().vectorize(dl);
        };
        if (hasVar(*C, g.queryVar) && scoreRows > 1 && !(pairs && G.grouped)) {
          H::Var ci = varNamed(*C, g.queryVar), cio(C->func.name() + "_ro"),
                 cii(C->func.name() + "_ri");
          su.split(ci, cio, cii, scoreRows, H::TailStrategy::GuardWithIf);
          if (scoreKeys > 0 && scoreKeys < T && T % scoreKeys == 0 && scoreKeys % vec == 0) {
            H::Var kvo(C->func.name() + "_ko"), kvi(C->func.name() + "_ki");
            su.split(kv, kvo, kvi, scoreKeys, H::TailStrategy::GuardWithIf);
            reorder({kvi, cii, red, cio, kvo});
            su.vectorize(kvi, scoreKeys).unroll(cii);
          } else {
            reorder({kv, cii, red, cio});
            su.vectorize(kv, T % vec == 0 ? T : vec, H::TailStrategy::GuardWithIf).unroll(cii);
          }
        } else {
          // One row at a time (no split: a split by 1 under compute_at makes Halide's bounds
          // inference ask for query rows past the end, measured by attn-tune).
          reorder({kv, red});
          su.vectorize(kv, T % vec == 0 ? T : vec, H::TailStrategy::GuardWithIf);
        }
      };
      if (paired) {
        for (const std::optional<H::Stage> &b : specializeFor(cu, pairDims(*C), t))
          if (b)
            scheduleScore(*b, true);
      }
      scheduleScore(cu, false);
    }

    // A score that calls a transcendental or divides (a soft cap's tanh) is stored per tile, next to the
    // contraction's: inlined, the tile's max and its exps each computed it. Soft-capped sliding
    // window, B1 H8 N4096 D64 W512, Zen 4, attn-bench, per visited tile against sdpa: 1.67x
    // inlined, 1.41x stored. Computing the contraction per 2-row block of the stored score (no
    // tile buffer of its own) measured 1.56x: its accumulators went through memory.
    // A plain score (a scale, a bias) stays inlined: storing it costs more than recomputing it.
    if (c.tmax != kNoFunc && callsTranscendental(*at(c.score))) {
      LoweredFunc &sc = *at(c.score);
      place(sc.func, sc.vars);
      sc.func.bound_storage(varNamed(sc, key), T)
          .vectorize(varNamed(sc, key), vec, H::TailStrategy::GuardWithIf);
    }

    // The tile's exps, and its max and sum reduced a vector of keys at a time.
    place(ctexp.func, ctexp.vars);
    ctexp.func.bound_storage(varNamed(ctexp, key), T)
        .bound_storage(ctexp.vars.back(), 1)
        .vectorize(varNamed(ctexp, key), vec, H::TailStrategy::GuardWithIf);
    for (FuncIndex fi : {c.tmax, c.tsum}) {
      if (fi == kNoFunc) // unnormalised: no max, no sum
        continue;
      LoweredFunc *f = at(fi);
      place(f->func, f->vars);
      f->func.bound_storage(f->vars.back(), 1);
      if (T % vec != 0)
        continue;
      H::Var u(f->name + "_lane");
      H::RVar ro(f->name + "_ro"), ri(f->name + "_ri");
      H::Func intm = f->func.update().split(f->rvars[0], ro, ri, vec).rfactor(ri, u);
      std::vector<H::Var> st{u};
      for (const H::Var &a : intm.args())
        if (a.name() != u.name())
          st.push_back(a);
      intm.reorder_storage(st);
      place(intm, intm.args());
      intm.vectorize(u);
      for (const H::Var &a : intm.args())
        if (a.name() == f->vars.back().name())
          intm.bound_storage(a, 1);
      intm.update().vectorize(u);
    }

    // Exps x values: valueRows rows x valueVectors vectors of the value index in registers per key,
    // accumulated over the tile's keys in a block of constant size (a stack array that LLVM keeps
    // in registers), then copied into a wrapper that the state update reads. Accumulated in the
    // tile's buffer instead, whose rows lie D floats apart, every key loaded and stored each
    // accumulator wherever D was not known at compile time (LLVM cannot tell the rows apart):
    // sdpa B1 H8 N2048 at D = 32 ran at 87 GFLOP/s, 0.57x PyTorch (D = 64, specialised: 303).
    // A block must also be whole: one wider than D, or a last one narrower than the rest, guarded
    // each vector per key, and Halide computed a partial vector as a scalar loop per key
    // (TailStrategy::Predicate made no difference): D = 32 in 4-vector blocks 120 GFLOP/s, D = 24
    // 55. So the wrapper is specialised: valueVectors-wide blocks where they divide D, else blocks
    // of 2 (then 1) vectors shifted inwards (the last one ends at D, overlapping its neighbour:
    // D = 40 computes 0..31 and 8..39), else (D under a vector) one guarded vector. 1-vector
    // blocks where 16 divides D were tried and were slower than shifted 2-vector ones (D = 80:
    // 238 against 265 GFLOP/s). Zen 5 (family 26), 2 threads, B1 H8 N2048, against PyTorch's
    // SDPA in one process, GFLOP/s before -> after (ratio after): D = 16 74 -> 137 (1.11x),
    // 24 43 -> 143 (1.07x), 32 92 -> 221 (1.40x), 40 56 -> 203 (1.29x), 48 95 -> 234 (1.39x),
    // 80 180 -> 265 (1.52x), 96 163 -> 294 (1.68x); 64 and 128 unchanged (294-303, 318-352);
    // D = 8 stays at 21 (0.46x). The whole tile's keys run inside a block, so there is no key
    // block knob for this GEMM.
    std::optional<TileValues> tv;
    if (tiledScores && !g.valueVar.empty()) {
      H::Expr Nq;
      for (auto &[n, x] : G.extents)
        if (n == g.queryVar)
          Nq = x;
      tv = tileValues(ctpv, ctexp, k, g.valueVar, g.queryVar, Nq, T);
    }
    if (tv) {
      H::Func W = tv->sums;
      place(W, ctpv.vars);
      ctexp.func.store_in(H::MemoryType::Stack);
      const H::Var jt = ctpv.vars.back();
      W.bound_storage(jt, 1);
      H::Var e = varNamed(ctpv, g.valueVar), qi = varNamed(ctpv, g.queryVar);
      const std::string n = ctpv.name;
      H::Var ei(n + "_te"), qii(n + "_tq");
      W.align_bounds(e, 16).align_bounds(qi, 16);
      W.tile(e, qi, ei, qii, 16, 16, H::TailStrategy::RoundUp)
          .reorder(ei, qii, jt, qi, e)
          .vectorize(ei)
          .vectorize(qii);
      tv->product.compute_at(W, qi);
      scheduleTileProduct(tv->product, e, qi, tv->u.x, n);
      std::vector<H::Var> va = tv->values.args();
      // (A vector of 16 value indices per key, the two keys of a pair unrolled: Halide stores
      // the two as one interleaved vector; vectorised along the pairs, each pair was a gather.)
      tv->values.compute_at(W, e)
          .bound_storage(va[1], 16)
          .store_in(H::MemoryType::Stack)
          .reorder(va[1], va[0], va[2])
          .vectorize(va[1])
          .unroll(va[0]);
      for (H::Func &part : tv->parts) {
        std::vector<H::Var> a = part.args();
        place(part, a);
        part.bound_storage(a[0], T)
            .store_in(H::MemoryType::Stack)
            .vectorize(a[0], 2 * vec, H::TailStrategy::GuardWithIf);
      }
      continue;
    }
    place(ctpv.func, ctpv.vars);
    ctpv.func.bound_storage(ctpv.vars.back(), 1);
    if (!g.valueVar.empty()) {
      H::Var e = varNamed(ctpv, g.valueVar), qi = varNamed(ctpv, g.queryVar);
      H::Func tw = ctpv.func.in();
      place(tw, ctpv.vars);
      tw.bound_storage(ctpv.vars.back(), 1);
      H::Var eo(ctpv.name + "_vo"), ei(ctpv.name + "_vi"), qo(ctpv.name + "_ro"),
          qii(ctpv.name + "_ri");
      auto blocks = [&](H::Stage st, int vectors,
                        H::TailStrategy tail = H::TailStrategy::GuardWithIf) {
        st.split(e, eo, ei, vec * vectors, tail)
            .split(qi, qo, qii, prm.valueRows, H::TailStrategy::GuardWithIf)
            .reorder(ei, qii, eo, qo)
            .vectorize(ei, vec, H::TailStrategy::GuardWithIf)
            .unroll(qii);
      };
      if (blockDe.defined()) {
        struct Block {
          H::Expr when;
          int vectors;
          H::TailStrategy tail;
        };
        std::vector<Block> choices{{blockDe % (prm.valueVectors * vec) == 0, prm.valueVectors,
                                    H::TailStrategy::GuardWithIf}};
        for (int b = std::min(prm.valueVectors, 2); b >= 1; b /= 2)
          choices.push_back({blockDe >= b * vec, b, H::TailStrategy::ShiftInwards});
        std::vector<H::Expr> conds;
        for (const Block &c : choices)
          conds.push_back(c.when);
        std::vector<std::optional<H::Stage>> br = specializeFor(H::Stage(tw), conds, t);
        for (size_t i = 0; i < br.size(); ++i)
          if (br[i])
            blocks(*br[i], choices[i].vectors, choices[i].tail);
      }
      blocks(H::Stage(tw), 1);
      // (Predicated vectors only in the one-vector block under D's width; they did not make a
      // partial vector's loop vectorised.)
      sumInRegisterBlock(ctpv.func, e, qi, ctpv.rvars[0], H::LoopLevel(tw, eo), vec,
                         prm.valueVectors, prm.valueRows, H::TailStrategy::Predicate, true);
    }
  }

  // K is read along the keys: a per-head transposed copy (one for every chain) makes those reads
  // contiguous, whether K is an input or a definition (mhsa's projection: without the copy its
  // score GEMM ran at 4 GFLOP/s).
  std::vector<H::Func> keySources;
  std::set<std::string> keySourceNames; // each source's, as the key readers call it
  for (const std::string &in : g.keyInputs)
    for (KernelParam &p : k.inputs)
      if (p.name == in && p.param.dimensions() >= 2 &&
          (!keyPairs.count(H::Func(p.param).name()) ||
           callsAny(keyReadValues, H::Func(p.param).name()))) {
        keySources.push_back(H::Func(p.param));
        keySourceNames.insert({p.param.name(), H::Func(p.param).name()});
      }
  for (const std::string &fn : g.keyFuncs)
    if (LoweredFunc *f = k.find(fn); f && f->vars.size() >= 2) {
      // A projection blocked by the generic rule is computed inside its result wrapper's loops;
      // the copy reads that wrapper (every call to the projection goes through it).
      const auto &wrappers = f->func.function().wrappers();
      auto w = wrappers.find("");
      keySources.push_back(w != wrappers.end() ? H::Func(H::Internal::Function(w->second))
                                               : f->func);
      keySourceNames.insert({f->func.name(), keySources.back().name()});
    }
  if (keyReaders.empty() || !g.rowsShareKeys)
    keySources.clear(); // nothing reads K along the keys, or its rows already are contiguous
  // The per-head copies below (transposed K, pairs, panels) are computed once per head.
  const H::LoopLevel perHead =
      batch.empty() ? H::LoopLevel::root() : H::LoopLevel(O.func, batch.front());
  for (H::Func src : keySources) {
    H::Func kT = src.in(keyReaders);
    std::vector<H::Var> a = kT.args();
    std::swap(a[0], a[1]);
    // A vector of keys at a time, all of its head dimensions before the next: the vector's rows
    // (4 KiB at D=64) stay in L1 while their gathers run, where a pass over every key per
    // dimension brought each row in from L2 once per dimension. A/B in one process, Zen 4, 2
    // threads: sliding window W512 N4096 42.1 -> 41.2 ms; sdpa N2048 unchanged (51.1 ms).
    H::Var jo(a[0].name() + "_o"), ji(a[0].name() + "_i");
    std::vector<H::VarOrRVar> order{ji, a[1], jo};
    order.insert(order.end(), a.begin() + 2, a.end());
    kT.compute_at(perHead)
        .reorder_storage(a)
        .split(a[0], jo, ji, vec, H::TailStrategy::GuardWithIf)
        .reorder(order)
        .vectorize(ji);
    // Rows of the copy (one per head-dimension index) one cache line longer than the keys: at
    // a power-of-two key count they would be a multiple of 4 KiB apart, so a tile's 64 rows
    // would share one L1 set and evict each other. Measured on Zen 5, B1 H8 N2048 D64, one
    // thread: the score GEMM 33 -> 22 ms, the kernel 75 -> 54 ms (Halide profiler).
    // Only where K is read at the key index itself: read at `(w * W + j + shift) % N` (a window
    // of a cyclically shifted sequence, attn-window-partition's form) the copy holds every row
    // of the head, and a bound of keyCount + 16 refused the call.
    if (G.keyCount.defined() && readsAtKey(keyReadValues, keySourceNames, key))
      kT.bound_storage(a[0], G.keyCount + 16);
  }

  // The pairs' copies, per head as the transposed copy: a vector of keys at a time, for each dp
  // its pairs (dl innermost), so that a vector of the copy is 16 keys' two bf16 values of d.
  for (auto &[name, pairs] : keyPairs) {
    std::vector<H::Var> a = pairs.args();
    H::Var jo(a[1].name() + "_o"), ji(a[1].name() + "_i");
    std::vector<H::VarOrRVar> order{a[0], ji, a[2], jo};
    order.insert(order.end(), a.begin() + 3, a.end());
    pairs.compute_at(perHead)
        .split(a[1], jo, ji, vec, H::TailStrategy::GuardWithIf)
        .reorder(order)
        .vectorize(a[0])
        .vectorize(ji);
    // Rows (a dp's pairs) one cache line longer than the keys, as the transposed copy's above.
    if (G.keyCount.defined())
      pairs.bound_storage(a[1], G.keyCount + 16);
  }

  // tileScore's panels, per head as the pairs' copies: 16 keys' pairs (32 bf16) per vector.
  for (auto &[name, panel] : keyPanels) {
    std::vector<H::Var> a = panel.args();
    panel.compute_at(perHead).vectorize(a[0]).vectorize(a[1], vec, H::TailStrategy::GuardWithIf);
  }

  // A group's key ranges test the mask at every (query row, key): the rows side by side in a
  // vector (the key's table entry a broadcast, the rows' a vector load), vectors of rows in
  // parallel; the groups then reduce their rows' ranges, a few operations per row. Computed at
  // root (HalideGen's predicates read them).
  // (Each is a reduction whose first index, vectorised, is the row or the group.)
  auto vectorOverFirst = [&](FuncIndex fi, bool parallel) {
    LoweredFunc &f = k.funcs[fi];
    H::Var x = f.func.args()[0], xo(f.name + "_o"), xi(f.name + "_i");
    f.func.compute_root();
    H::Stage u = f.func.update();
    u.split(x, xo, xi, vec, H::TailStrategy::GuardWithIf).reorder(xi, f.rvars[0], xo).vectorize(xi);
    if (parallel)
      u.parallel(xo);
  };
  if (G.rowKeys != kNoFunc)
    vectorOverFirst(G.rowKeys, true);
  if (G.groupKeys != kNoFunc)
    vectorOverFirst(G.groupKeys, false);

  // With at least a tile of keys, every key read is the tile's first key plus the slot (HalideGen
  // clamps slots only for fewer keys), so the tile loops are dense vector loads; causal attention
  // without this read its scores through gathers and ran at 0.9x sdpa's time instead of ~0.55x.
  // Whole tiles under key ranges or query groups (padding, packed sequences) get a
  // specialisation of their own for at least a whole tile of keys: their loops over the tiles
  // are bounded by data, so Halide cannot learn Nk >= 256 from them (as it does from sdpa's
  // `t < Nk / 256`), and under Nk >= 128 alone every score row of a whole tile had a guard per
  // vector. Zen 4, 2 threads, B1/B2 H8 D64, against 128-key tiles, A/B in one process (ms):
  // packed sequences N4096 54.9 vs 58.2 (was 58.6 vs 60.7), padding N1536 39.7 vs 42.0 (was
  // 40.5 vs 42.6). It costs a copy of the code: AOT compiles of padding_mask 16 -> 20-23 s,
  // varlen_attention 13.5 -> 19-22 s. Dropping the Nk >= 128 copy instead made padding at
  // N = 200 1.5x slower (2.9 -> 4.5 ms).
  std::optional<H::Stage> full;
  const bool tiled = G.keyCount.defined() && G.tile > 0;
  int longest = G.tile;
  for (const OnlineChain &c : G.chains)
    longest = std::max(longest, chainKeys(c).value_or(G.tile));
  std::vector<std::optional<H::Stage>> branches;
  if (tiled && longest > G.tile && (G.grouped || G.keyRanged))
    branches = specializeFor(O.func, {G.keyCount >= longest, G.keyCount >= G.tile}, t);
  else if (tiled)
    branches = specializeFor(O.func, {G.keyCount >= G.tile}, t);
  for (const std::optional<H::Stage> &b : branches)
    if (b)
      full = b;

  // A decode step's (rows with keys of their own) dot products along the head dimension, its
  // exps x V and its state update are vector loops over D with a guarded tail: specialised for D =
  // 64 and 128 there (paged_decode B8 H32 D128, Zen 5, one process: 12.2 ms with, 16.0 without).
  // Rows that share keys accumulate in register blocks of constant size (the exps x V block
  // above) and gain nothing from it (sdpa N2048, without / with: D64 0.998, D128 0.982; causal
  // D64 0.999, D128 0.971), while its copies cost compile time (padding_mask 22.9 -> 28-34 s).
  // The copies are the whole-tile copy's where there is one.
  if (!g.rowsShareKeys && !g.valueVar.empty() && O.varNames.back() == g.valueVar &&
      (full || !tiled)) {
    if (!full)
      specializeFor(H::Stage(O.func), {blockDe == 64, blockDe == 128}, t);
    for (const std::optional<H::Stage> &b : branches)
      if (b)
        specializeFor(*b, {blockDe == 64, blockDe == 128}, t);
  }
}

class CpuOnlineRule : public ScheduleRule {
public:
  std::string name() const override { return "cpu-online"; }

  std::optional<Match> match(const LoweredKernel &k, const Target &t) const override {
    if (t.gpu)
      return std::nullopt;
    OnlineGroups g{findOnline(k)};
    if (g.groups.empty())
      return std::nullopt;
    return g;
  }

  std::vector<Knob> knobs(const Match &m, const LoweredKernel &k, const Target &t) const override {
    const OnlineGroups &g = std::get<OnlineGroups>(m);
    OnlineParams d = defaults(g, k, t);
    std::vector<int> queryTiles =
        decodeStep(g) ? std::vector<int>{1, 2, 4, 8, 16} : std::vector<int>{16, 32, 64};
    std::vector<int> scoreKeyChoices = {32, 64, 128};
    if (std::find(scoreKeyChoices.begin(), scoreKeyChoices.end(), d.scoreKeys) ==
        scoreKeyChoices.end()) // (SSE's 4 lanes: 16)
      scoreKeyChoices.insert(scoreKeyChoices.begin(), d.scoreKeys);
    std::vector<Knob> ks = {{"online.query_tile", queryTiles, d.queryTile},
                            {"online.score_rows", {1, 2, 4}, d.scoreRows},
                            {"online.value_rows", {2, 4, 8}, d.valueRows},
                            {"online.value_vectors", {1, 2, 4}, d.valueVectors},
                            {"online.score_keys", scoreKeyChoices, d.scoreKeys}};
    // bf16 dot products where the target has them and a kernel input is bf16 (scheduleGroup).
    if (t.bf16Dot && std::any_of(k.inputs.begin(), k.inputs.end(),
                                 [](const KernelParam &p) { return p.param.type().is_bfloat(); }))
      ks.push_back(t.amx ? Knob{"online.bf16_dot", {1, 2, 3}, 3}
                         : Knob{"online.bf16_dot", {1, 2}, 2});
    // The generic knobs only where Funcs outside the online groups (projections) take them.
    std::vector<bool> grouped = groupedFuncs(g, k);
    for (FuncIndex i = 0; i < k.funcs.size(); ++i)
      if (!grouped[i] && genericSchedules(k.funcs[i])) {
        for (Knob kb : genericKnobs(t))
          ks.push_back(kb);
        break;
      }
    return ks;
  }

  void apply(const Match &m, LoweredKernel &k, const Target &t,
             const ScheduleParams &params) const override {
    const OnlineGroups &g = std::get<OnlineGroups>(m);
    std::vector<bool> grouped = groupedFuncs(g, k);
    for (FuncIndex i = 0; i < k.funcs.size(); ++i)
      if (!grouped[i])
        scheduleGenericFunc(k.funcs[i], t, params, &k);
    OnlineParams prm = defaults(g, k, t);
    prm.queryTile = params.get("online.query_tile", prm.queryTile);
    prm.scoreRows = params.get("online.score_rows", prm.scoreRows);
    prm.valueRows = params.get("online.value_rows", prm.valueRows);
    prm.valueVectors = params.get("online.value_vectors", prm.valueVectors);
    prm.scoreKeys = params.get("online.score_keys", prm.scoreKeys);
    // Whole tiles' scores in blocks of 4 vectors of keys by as many rows as keep the accumulators
    // at half the vector registers (4 rows with AVX-512's 32, 2 with AVX2's 16): per head-dimension
    // step, 4 key loads and a broadcast per row for rows x 4 FMAs, against 8 loads and 2
    // broadcasts for 16 FMAs in 2 rows x 8 vectors. Zen 4, 2 threads, A/B in one process (ms):
    // sdpa B1 H8 N2048 D64 57.2 -> 54.7, N256 1.80 -> 1.13, packed sequences H8 N4096
    // 59.8 -> 55.6. Not for the masked tiles: causal N2048 31.2 -> 34.5 (its row guards).
    // online.score_rows / online.score_keys, when given, set every chain's.
    prm.wholeScoreRows = params.get("online.score_rows", t.avx512 ? 4 : 2);
    prm.wholeScoreKeys = params.get("online.score_keys", 4 * t.floatLanes);
    for (const OnlinePattern &group : g.groups)
      scheduleGroup(k, group, t, prm, params);
  }

private:
  // Under a mask bound (causal), the tiles' row ranges depend on the tile, so every row block of
  // the exps x V product carries a guard: 2-row blocks keep them cheap. attn-tune, causal B1 H8
  // N2048 D64: value rows 2 33.5 ms, 4 37.6 ms (sdpa: no difference). There a query tile is one
  // group of rows (OnlineGroup::queryGroup), so that a tile's rows are all computed or all skipped.
  // Whether a group's rows have keys of their own (a decode step): its query tiles are a few
  // rows (kDecodeRows), not a block that shares key tiles.
  static bool decodeStep(const OnlineGroups &g) {
    return std::any_of(g.groups.begin(), g.groups.end(),
                       [](const OnlinePattern &p) { return !p.rowsShareKeys; });
  }

  static OnlineParams defaults(const OnlineGroups &g, const LoweredKernel &k, const Target &t) {
    OnlineParams d;
    // The score block's accumulators take half the vector registers (AVX-512 has 32, AVX2 16):
    // 2 rows x 8 vectors of keys with AVX-512 (128 keys), 2 x 4 with AVX2 (32). AVX2 with
    // 2 x 16 (all 16 registers): causal B1 H8 N2048 D64, Zen 4 running the AVX2 target, A/B in
    // one process: 69.5 ms, against 41.5 at 2 x 4 and 59.8 at 2 x 8.
    d.scoreKeys = (t.avx512 ? 8 : 4) * t.floatLanes;
    if (decodeStep(g))
      d.queryTile = kDecodeRows;
    for (const OnlinePattern &p : g.groups)
      if (const OnlineGroup &group = k.onlineGroups[p.group]; group.grouped) {
        d.valueRows = 2;
        d.queryTile = group.queryGroup;
      }
    // The exps x V block's accumulators, too, take at most half the vector registers (the rest
    // hold a row of V and the broadcast exps): 4 rows x 4 vectors with AVX-512's 32, and 4 x 2
    // with AVX2's 16, where 4 x 4 took every register and spilled. Zen 3 (AVX2), sdpa B1 H8
    // N2048 D64, 2 threads, A/B in one process: 4 x 4 141-158 ms, 4 x 2 97-111 ms, 2 x 4
    // 103-116 ms, 4 x 1 125 ms. Grouped rows (causal: 2 rows) keep 4 vectors on both.
    d.valueVectors = std::max(1, std::min(d.valueVectors, t.vectorRegisters / 2 / d.valueRows));
    return d;
  }

  // The Funcs this rule schedules itself (by index): every part of each online softmax and its
  // contractions.
  static std::vector<bool> groupedFuncs(const OnlineGroups &g, const LoweredKernel &k) {
    std::vector<bool> grouped(k.funcs.size(), false);
    for (const OnlinePattern &group : g.groups) {
      for (FuncIndex i = 0; i < k.funcs.size(); ++i)
        if (k.funcs[i].definition == k.onlineGroups[group.group].name)
          grouped[i] = true;
      for (FuncIndex c : group.contractions)
        grouped[c] = true;
    }
    return grouped;
  }
};

} // namespace

std::unique_ptr<ScheduleRule> makeCpuOnlineRule() { return std::make_unique<CpuOnlineRule>(); }

} // namespace attnc
