// HalideGen: attn.online_softmax as FlashAttention's streaming form over key tiles.
#include "Lowerer.h"

namespace attnc::lowering {

// attn.online_softmax (attn-online-softmax): FlashAttention's streaming softmax over key tiles
// of `tile` slots. Per tile: the row max of the scores (`__tmax`), their exps against it
// (`__texp`), the exp sum (`__tsum`) and the exps times the value (`__tpv`); the state
// (`__state`: running max, sum, accumulator) folds one tile per step of an RDom over the tiles,
// rescaling by exp(old max - new max).
// Slot r of tile t holds key base(t) + r, base(t) = min(t*T, Nk - T): when T does not divide Nk,
// the last tile is shifted back to end at the last key and masks the slots an earlier tile
// already counted, so every read is its tile's first key plus the slot, never a per-key clamp
// (clamped keys vectorise to gathers that Halide could not partition away under a mask). With
// fewer keys than slots (Nk < T) base is 0 and slots past the last key are masked.
//
// Unnormalised (`unnormalized`: sigmoid or ReLU attention's weights), a chain has no max and no
// exp sum: `__texp` holds the tile's weights (0 in slots the tile does not count) and the state is
// a plain accumulator of the tiles' `__tpv`.
// Whether index `v` is computed from a tensor read (a table lookup).
static bool indexReadsTensor(Value v, int depth = 0) {
  Operation *d = v.getDefiningOp();
  if (!d || depth > 64)
    return false;
  if (isa<attn::ReadOp>(d))
    return true;
  for (Value o : d->getOperands())
    if (indexReadsTensor(o, depth + 1))
      return true;
  return false;
}

// Whether `r` reads a tensor at a coordinate computed from data (a paged cache's
// `kc(pages(b, j / S), ...)`), directly or in the definitions it reads.
static bool gathersThroughTables(Region &r, int depth = 0) {
  bool found = false;
  r.walk([&](attn::ReadOp rd) {
    for (Value i : rd.getIndices())
      found = found || indexReadsTensor(i);
    if (Operation *def = rd.getTensor().getDefiningOp(); !found && def && depth < 8)
      for (Region &inner : def->getRegions())
        found = found || gathersThroughTables(inner, depth + 1);
  });
  return found;
}

// The definitions a masked chain's score reads compute whole tiles of keys (Halide bounds the
// clamped slots loosely, by the whole tile), so a key past the visible range, or one the mask
// hides inside it, is still computed there, and its table lookup (a page id of -1) would stop the
// kernel as an out-of-range read. Each such read's check is relaxed to where `visible` holds (the
// key inside the visible range [floor, ceil), and the mask): elsewhere the read stays clamped
// into the tensor (memory-safe) and its result is never used, since the chain counts only
// visible slots. Follows the calls from `e`, `visible` renamed in each callee to the callee's own
// indices, where the caller passes them as plain indices (the key among them), or the callee is
// left alone.
static void guardTableReadsIn(const H::Expr &e, const std::string &key, const H::Expr &visible,
                              std::set<std::string> &done, int depth) {
  if (depth > 8)
    return;
  struct Calls : H::Internal::IRGraphVisitor {
    std::vector<const H::Internal::Call *> found;
    using H::Internal::IRGraphVisitor::visit;
    void visit(const H::Internal::Call *c) override {
      H::Internal::IRGraphVisitor::visit(c);
      if (c->call_type == H::Internal::Call::Halide && c->func.defined())
        found.push_back(c);
    }
  } calls;
  e.accept(&calls);
  for (const H::Internal::Call *c : calls.found) {
    H::Internal::Function f(c->func);
    std::string innerKey;
    const std::vector<std::string> &args = f.args();
    std::map<std::string, H::Expr> rename;
    for (size_t i = 0; i < c->args.size() && i < args.size(); ++i)
      if (const auto *v = c->args[i].as<H::Internal::Variable>()) {
        if (v->name == key)
          innerKey = args[i];
        rename[v->name] = H::Internal::Variable::make(H::Int(32), args[i]);
      }
    if (innerKey.empty() || done.count(f.name()))
      continue;
    H::Expr inner = H::Internal::substitute(rename, visible);
    struct Free : H::Internal::IRGraphVisitor {
      const std::vector<std::string> &args;
      bool bound = true;
      explicit Free(const std::vector<std::string> &a) : args(a) {}
      using H::Internal::IRGraphVisitor::visit;
      void visit(const H::Internal::Variable *v) override {
        bound = bound && (v->param.defined() || v->reduction_domain.defined() ||
                          std::find(args.begin(), args.end(), v->name) != args.end());
      }
    } free(args);
    inner.accept(&free);
    if (!free.bound)
      continue;
    done.insert(f.name());
    struct Relax : H::Internal::IRMutator {
      H::Expr visible;
      using H::Internal::IRMutator::visit;
      H::Expr visit(const H::Internal::Call *c) override {
        if (!c->is_intrinsic(H::Internal::Call::require))
          return H::Internal::IRMutator::visit(c);
        std::vector<H::Expr> a = c->args;
        a[0] = a[0] || !visible;
        return H::Internal::Call::make(c->type, c->name, a, c->call_type);
      }
    } relax;
    relax.visible = inner;
    // Only the score attn-online-softmax took out of the softmax (`<p>__logits` and the sums
    // inside it): no other Func reads those, so no read outside the chain loses its check. A
    // score definition the user wrote keeps its checks (another output may read it).
    if (f.name().find("__logits") != std::string::npos)
      f.mutate(&relax);
    for (const H::Expr &v : f.values())
      guardTableReadsIn(v, innerKey, inner, done, depth + 1);
    for (const H::Internal::Definition &u : f.updates())
      for (const H::Expr &v : u.values())
        guardTableReadsIn(v, innerKey, inner, done, depth + 1);
  }
}

static void guardTableReads(const H::Expr &score, const std::string &key, const H::Expr &visible) {
  std::set<std::string> done;
  guardTableReadsIn(score, key, visible, done, 0);
}

void Lowerer::lowerOnline(attn::OnlineSoftmaxOp op) {
  // Its tiles' indices have no extents for host gather checks: such a gather is checked where it
  // is read (CPU targets) or refused (GPU targets, which do not fuse softmaxes by default).
  IndexScope scope(indexExtents_, false);
  const std::string name = op.getName().str();
  const bool weights = op.getUnnormalized();
  const int T = (int)op.getTile();
  // Tiles that every slot of counts (no mask, not the shifted last tile) may be longer
  // (whole_tile): a chain of their own then covers the keys up to the last multiple of it, and
  // the tiles of `tile` keys the rest.
  const int TW = (int)op.getWholeTile().value_or(0);
  const int queryGroup = (int)op.getQueryGroup();
  std::vector<std::string> varNames = strings(op.getIndices());
  std::vector<H::Var> vars = makeVars(op.getIndices());
  std::vector<std::string> scoreNames = strings(op.getScoreIndices());
  std::vector<int64_t> rowsMap(op.getRows().begin(), op.getRows().end());
  const unsigned keyPos = op.getKeyPosition();
  auto unique = [&](std::string n) {
    while (std::find(varNames.begin(), varNames.end(), n) != varNames.end())
      n += "_";
    return n;
  };
  const std::string keyName = unique(scoreNames[keyPos]), tileName = unique(keyName + "_tile");
  H::Var key(keyName), kt(tileName);
  Env env;
  H::Expr Nk = H::cast<int32_t>(eval(op.getKeyExtent(), env));
  const H::Expr lo = H::Float(32).min();
  // The lowest finite float: maxes are kept at least this so that -inf - -inf makes no NaN.
  const H::Expr finite = -std::numeric_limits<float>::max();
  // Every exp is scaled by 2^-k, the smallest power of two with 2^k >= the key count (and the
  // tile), so that a row's sum of exps is at most 1 and its sum of exps times values stays within
  // the values' range (each exp is <= 1): the state can then carry that sum unnormalised, divided
  // by the sum of exps once after the last tile instead of after every tile. A power of two
  // scales exactly; it only flushes exps below 2^-126 (relative to the row's largest, 2^-k, they
  // are under 2^-95 for 2^31 keys: far below a float's resolution of the sum).
  const H::Expr tileScale = H::reinterpret<float>(
      (127 - (32 - H::count_leading_zeros(H::max(Nk, std::max(T, TW)) - 1))) << 23);
  // The result's extents, by index.
  std::vector<H::Expr> extents;
  for (Value e : op.getExtents())
    extents.push_back(H::cast<int32_t>(eval(e, env)));

  auto part = [&](const std::string &suffix, FuncRole role) {
    LoweredFunc lf;
    lf.name = suffix.empty() ? name : name + "__" + suffix;
    lf.definition = name;
    lf.role = role;
    lf.func = H::Func(lf.name);
    lf.softmaxAxes = {(int)keyPos};
    return lf;
  };
  // The score's indices: result indices for the rows, the key at its place.
  std::vector<H::Var> svars, rowVars;
  std::vector<std::string> snames, rowNames;
  for (size_t k = 0; k < rowsMap.size(); ++k) {
    if (rowsMap[k] < 0) {
      svars.push_back(key), snames.push_back(keyName);
    } else {
      svars.push_back(vars[rowsMap[k]]), snames.push_back(varNames[rowsMap[k]]);
      rowVars.push_back(vars[rowsMap[k]]), rowNames.push_back(varNames[rowsMap[k]]);
    }
  }
  auto withKey = [&](const std::vector<H::Var> &vs, H::Expr keyExpr) {
    std::vector<H::Expr> c = toExprs(vs);
    c.push_back(keyExpr);
    return reversed(c);
  };
  auto scoreArgs = [&](H::Expr keyExpr) {
    std::vector<H::Expr> c = toExprs(svars);
    c[keyPos] = keyExpr;
    return reversed(c);
  };

  Block &sb = op.getScore().front();
  auto sy = cast<attn::YieldOp>(sb.getTerminator());
  // The score Func of a chain: `masked` keeps the mask (masked scores are -inf), otherwise the
  // raw scores (tiles every row of a group fully sees).
  auto scoreFunc = [&](const std::string &suffix, bool masked) {
    LoweredFunc score = part(suffix, FuncRole::OnlineScore);
    score.vars = svars;
    score.varNames = snames;
    Env senv;
    for (auto [arg, var] : llvm::zip(sb.getArguments(), svars))
      senv[arg] = var;
    // The mask first: a masked chain checks a score's table reads only where its key is visible
    // (a hole in a paged cache, `pages(b, j / S) >= 0`), as Softmax.cpp does.
    H::Expr mask;
    if (masked && sy.getValues().size() == 2)
      mask = eval(sy.getValues()[1], senv);
    H::Expr sv;
    {
      GuardScope guard(readGuard_, mask);
      sv = H::cast<float>(eval(sy.getValues()[0], senv));
    }
    if (mask.defined())
      sv = H::select(mask, sv, weights ? H::Expr(0.0f) : lo);
    score.func(scoreArgs(key)) = sv;
    return score;
  };

  auto tileRDom = [&](const std::string &owner, int T, H::Expr extent = H::Expr()) {
    std::vector<H::Internal::ReductionVariable> rv{
        {owner + "$" + keyName, H::Expr(0), extent.defined() ? extent : H::Expr(T)}};
    return H::RDom(H::Internal::ReductionDomain(rv));
  };
  auto rowsTile = [&](H::Expr t) { return withKey(rowVars, t); };
  auto texpArgs = [&](H::Expr r, H::Expr t) {
    std::vector<H::Expr> a = scoreArgs(r);
    a.push_back(t);
    return a;
  };

  // One chain of per-tile Funcs (max, exps, exp sum, exps x value) over the scores `score`.
  // A full chain counts every slot with no mask test; the other masks the slots that an earlier
  // tile counted (the shifted last tile) and the masked scores.
  struct Chain {
    LoweredFunc score, tmax, texp, tsum, tpv;
    bool full;
    int tile;        // keys per tile
    std::string sfx; // of its Funcs' names and its tile index's (`_whole`, `_full` or none)
  };
  // Under key ranges (`<o>__tkeys`, `<o>__gkeys`), where the scores or values are read through a
  // table (a paged cache's page ids), a masked chain's slots are kept inside the visible keys:
  // a slot past them (the end of the last partly visible tile) reads the last visible key, which
  // its mask then discards, instead of a key whose table entry may be invalid (-1 behind a length
  // mask). A key the mask hides inside the range is read, but its table entries are not looked
  // up: the reads' checks are guarded by the mask (Lowerer::readGuard_).
  H::Expr keyFloor, keyCeil; // the first visible key and one past the last, per row
  // Whether a masked chain's exps x values step may stop at the key count (set below, before
  // the chains are made: not under key ranges, whose score blocks keep their constant bound).
  bool stopAtKeys = false;
  auto makeChain = [&](const std::string &sfx, bool full, int T) {
    Chain c{scoreFunc("score" + sfx, !full),
            weights ? LoweredFunc() : part("tmax" + sfx, FuncRole::OnlineTileMax),
            part("texp" + sfx, FuncRole::OnlineTileExp),
            weights ? LoweredFunc() : part("tsum" + sfx, FuncRole::OnlineTileSum),
            part("tpv" + sfx, FuncRole::OnlineTileValue),
            full,
            T,
            sfx};
    // The first key of tile t, the key in slot r (min(r, Nk - 1) only bites when Nk < T), and
    // whether the slot holds a key this tile counts.
    auto base = [&](H::Expr t) { return H::max(H::min(t * T, Nk - T), 0); };
    // (In a full tile base(t) = t*T and r < Nk; the clamped form keeps Halide's bounds of the
    // key reads inside the keys, since they do not see the tile loop's predicate.) A full chain
    // runs only tiles with t*T + T <= Nk, so there the clamp is a promise: the same bounds, and
    // no min computed. (The schedules' specialisation for Nk >= T then makes the tiles dense.)
    auto slotKey = [&](H::Expr t, H::Expr r) {
      return base(t) + (full ? H::unsafe_promise_clamped(r, 0, Nk - 1) : H::min(r, Nk - 1));
    };
    const bool clamped = !full && keyFloor.defined();
    auto keyAt = [&](H::Expr t, H::Expr r) {
      if (!clamped)
        return slotKey(t, r);
      // The bounds are first clamped into the tile's keys, so that Halide bounds the result by
      // the tile (it bounds data by the whole axis: tiles of 16 keys asked for 128).
      H::Expr first = base(t), last = H::min(base(t) + (T - 1), Nk - 1);
      return H::clamp(slotKey(t, r), H::clamp(keyFloor, first, last),
                      H::clamp(keyCeil - 1, first, last));
    };
    // Whether slot r of tile t is one this tile counts; clamped, also whether its key is inside
    // the visible range (a clamped slot reads another key, whose mask says nothing about it).
    auto slotCounts = [&](H::Expr t, H::Expr r) {
      H::Expr ok = r >= t * T - base(t) && r < Nk;
      if (clamped)
        ok = ok && slotKey(t, r) >= keyFloor && slotKey(t, r) < keyCeil;
      return ok;
    };
    auto scoreAt = [&](H::Expr t, H::Expr r) {
      H::Expr s = c.score.func(scoreArgs(keyAt(t, r)));
      return full ? s : H::select(slotCounts(t, r), s, weights ? H::Expr(0.0f) : lo);
    };
    // Whether slot r of tile t counts and the mask shows its key (a partly visible tile's).
    auto slotVisible = [&](H::Expr t, H::Expr r) {
      H::Expr ok = slotCounts(t, r);
      if (sy.getValues().size() == 2) {
        Env menv;
        for (size_t k = 0; k < rowsMap.size(); ++k)
          menv[sb.getArgument(k)] = rowsMap[k] < 0 ? keyAt(t, r) : H::Expr(vars[rowsMap[k]]);
        ok = ok && eval(sy.getValues()[1], menv);
      }
      return ok;
    };
    // In a partly visible tile, a slot that does not count or whose key the mask hides has the
    // exp (or weight) -0, which nothing else gives (an exp times a positive scale is +0 at the
    // least, and a weight of -0 is stored as +0): the exps x values step then tells those slots
    // by one load and compare per row and key, instead of the slot and mask conditions (2.2x the
    // full chain's time per tile with them, sliding window W512 N4096, Zen 4, Halide profiler).
    // (Both zeros are made at run time from tileScale's bits, whose sign is 0: Halide's CSE and
    // equality take the float constants -0 and 0 for one another, so a constant -0 may become
    // every 0 of the kernel, or the reverse.)
    const H::Expr signBit = H::Internal::make_const(H::UInt(32), 0x80000000u);
    const H::Expr posZero = H::reinterpret<float>(H::reinterpret<uint32_t>(tileScale) & signBit);
    const H::Expr negZero = H::reinterpret<float>(H::reinterpret<uint32_t>(posZero) ^ signBit);
    auto marked = [&](H::Expr e) {
      if (full)
        return e;
      return H::select(slotVisible(kt, key), weights ? H::select(e == 0.0f, posZero, e) : e,
                       negZero);
    };

    // With fewer keys than slots (one tile, base 0) the slots past the last key count for
    // nothing: the masked chain's reductions over the slots stop at the last key (see rp below).
    const H::Expr slotsEnd = full || !stopAtKeys ? H::Expr() : H::min(H::Expr(T), Nk);
    if (weights) {
      c.texp.vars = svars, c.texp.varNames = snames;
      c.texp.vars.push_back(kt), c.texp.varNames.push_back(tileName);
      c.texp.func(texpArgs(key, kt)) = marked(scoreAt(kt, key));
    } else {
      c.tmax.vars = rowVars, c.tmax.varNames = rowNames;
      c.tmax.vars.push_back(kt), c.tmax.varNames.push_back(tileName);
      H::RDom rm = tileRDom(c.tmax.name, T, slotsEnd);
      c.tmax.func(rowsTile(kt)) = lo;
      c.tmax.func(rowsTile(kt)) = H::max(c.tmax.func(rowsTile(kt)), scoreAt(kt, rm));
      c.tmax.rvars = {rm[0]}, c.tmax.rvarNames = {keyName}, c.tmax.reduceKind = "max";

      // The exps by slot (the score's indices with the slot at the key's place) and tile, against
      // the tile's own max (<= 0, so no overflow). A -inf score (masked, or so in the data) gives
      // exp(-inf) = 0; the max is kept finite so that a tile with every score -inf gives 0, not
      // NaN. (No select on the score: Halide cannot skip the tile Funcs of a tile that a key range
      // excludes when a condition reads a Func they compute.)
      c.texp.vars = svars, c.texp.varNames = snames;
      c.texp.vars.push_back(kt), c.texp.varNames.push_back(tileName);
      H::Expr sk = scoreAt(kt, key);
      c.texp.func(texpArgs(key, kt)) =
          marked(nonPositiveExp(sk - H::max(c.tmax.func(rowsTile(kt)), finite)) * tileScale);

      c.tsum.vars = c.tmax.vars, c.tsum.varNames = c.tmax.varNames;
      H::RDom rs = tileRDom(c.tsum.name, T, slotsEnd);
      c.tsum.func(rowsTile(kt)) = 0.0f;
      c.tsum.func(rowsTile(kt)) += c.texp.func(texpArgs(rs, kt));
      c.tsum.rvars = {rs[0]}, c.tsum.rvarNames = {keyName}, c.tsum.reduceKind = "sum";
    }

    c.tpv.vars = vars, c.tpv.varNames = varNames;
    c.tpv.vars.push_back(kt), c.tpv.varNames.push_back(tileName);
    // With fewer keys than slots (one tile, base 0) the slots past the last key count for
    // nothing: the masked chain's exps x values step stops at the last key. B1 H1 N32 D16 at
    // 128-key tiles (a harness, Zen 5): that per-key loop, 128 steps for 32 keys, was 95% of
    // the call. (Full tiles exist only with Nk >= T; a key count there would cost their blocks
    // of valueKeys their constant bounds. Under key ranges the score's storage bound of one
    // tile no longer held: run/key-padding.test.)
    H::RDom rp = tileRDom(c.tpv.name, T, slotsEnd);
    Block &vb = op.getValue().front();
    Env venv;
    for (size_t i = 0; i < vars.size(); ++i)
      venv[vb.getArgument(i)] = vars[i];
    venv[vb.getArgument(vars.size())] = keyAt(kt, rp);
    // A slot another tile counts, or a key the mask hides from this row, is never read: its
    // exp is 0, but 0 times an inf or NaN value would be NaN (docs/language.md, "Structural
    // zeros"). Full tiles have neither.
    H::Expr slotOk;
    if (!full)
      slotOk = slotVisible(kt, rp);
    // Under key ranges a value is read only where its key is inside the visible range: a tile
    // outside it (or a row with no visible key, whose clamp has no key to land on) must not fail
    // a table lookup's check. KeyRangeLoops.cpp drops such tiles, but whether a call succeeds
    // must not depend on it (the scores' reads are relaxed the same way, guardTableReads). In a
    // masked chain, only where the slot counts and the mask shows its key, too (a hole).
    H::Expr where = slotOk;
    if (keyFloor.defined()) {
      H::Expr inRange = slotKey(kt, rp) >= keyFloor && slotKey(kt, rp) < keyCeil;
      where = where.defined() ? inRange && where : inRange;
    }
    H::Expr value;
    {
      GuardScope guard(readGuard_, where);
      value = H::cast<float>(eval(cast<attn::YieldOp>(vb.getTerminator()).getValues()[0], venv));
    }
    std::vector<H::Expr> tpvArgs = withKey(vars, kt);
    H::Expr weighted = c.texp.func(texpArgs(rp, kt)) * value;
    if (!full) {
      // The slot's exp is -0 where it does not count (`marked`). Being a load, the test is also
      // hidden from Halide's (21) trimming of loops to where an update is not a no-op, which lost
      // keys twice when it saw the mask: it solved `j == i` for the tile loop and, hoisting the
      // bound out of the slot loop, simplified `(32*g - slot) / 2` as if the slot were 0 (2-key
      // tiles lost the odd rows' key: fuzz seed 1054729161, regressions/online-band-tile2.test),
      // and it kept only the first row block of a `j == i` mask once rows were unrolled
      // (regressions/online-equality-mask.test).
      // The test is `bits > INT_MIN` (signed), not `bits != 0x80000000`: Halide's simplifier
      // turns a select on `!=` into one on `==` with its arms swapped, and LLVM then keeps the
      // old accumulator where the mask holds, an FMA plus a masked move and register copies
      // (~40 instructions per key for 2 rows x 4 vectors). Selecting the new value where the
      // mask holds is one masked FMA per vector. A/B in one process, Zen 4, 2 threads: sliding
      // window W512 N4096 35.1 -> 34.0 ms, soft-capped 42.3 -> 40.8, causal N2048 unchanged.
      // Selecting the whole update (not the product) keeps its multiply-add one FMA; an `if`
      // (an RDom predicate) instead kept the accumulators in memory (soft-capped 8.0 -> 8.3 ms
      // at N1024).
      H::Expr shown = H::reinterpret<int32_t>(c.texp.func(texpArgs(rp, kt))) > H::Int(32).min();
      c.tpv.func(tpvArgs) = 0.0f;
      c.tpv.func(tpvArgs) = H::select(shown, c.tpv.func(tpvArgs) + weighted, c.tpv.func(tpvArgs));
    } else {
      c.tpv.func(tpvArgs) = 0.0f;
      c.tpv.func(tpvArgs) += weighted;
    }
    c.tpv.rvars = {rp[0]}, c.tpv.rvarNames = {keyName}, c.tpv.reduceKind = "sum";
    return c;
  };

  // Mask bounds (attn.bounds on the key) skip whole tiles: tile t has a visible key in
  // [lower, upper) iff t*T < upper and t*T + T > lower, and every key of it is visible iff
  // t*T >= lower and t*T + T <= upper (and the tile is not the shifted last one). The bounds are
  // taken over groups of queryGroup query rows (the innermost row index), at both ends
  // of the group (they are affine), so each group visits its tiles with all its rows: the
  // state is indexed by (group, row in group), and its tile loops run inside the group loop.
  // Rows as a plain index would let Halide narrow every tile's rows to a tile-dependent range,
  // with a guard per row in the tiles' register blocks (2x slower per tile, measured).
  // Exact bounds (the mask is nothing but them) give the fully visible tiles a chain of their
  // own without the mask test: the state folds those tiles first, then the partly visible ones.
  H::Expr visible, fully;
  int qpos = -1, rq = -1;
  for (int k = 0; k < (int)rowsMap.size(); ++k)
    if (rowsMap[k] >= 0)
      qpos = k, rq = (int)rowsMap[k];
  auto entries = op->getAttrOfType<ArrayAttr>(attn::kBoundsAttr);
  H::Var ig(unique(varNames.empty() ? "g" : varNames[std::max(rq, 0)] + "_group")),
      il(unique(varNames.empty() ? "l" : varNames[std::max(rq, 0)] + "_lane"));
  auto tilePreds = [&](H::Expr t) {
    std::vector<H::Expr> dims = toExprs(svars), first = dims, last = dims;
    first[qpos] = H::Expr(ig) * queryGroup;
    last[qpos] = H::Expr(ig) * queryGroup + (queryGroup - 1);
    bool exact = false;
    // (t < Nk / T: the same as t*T + T <= Nk, in a form from which Halide's simplifier does not
    // drop the clamps of the key reads; bounds inference applies the simplified reads to the
    // tile loop's range even when it is empty, Nk < T, and would read keys below 0.)
    H::Expr vis, full = t < Nk / T;
    for (auto entry : entries.getAsRange<attn::BoundAttr>()) {
      if (entry.getIndex() != (int64_t)keyPos)
        continue;
      exact = entry.getExact();
      for (bool lower : {true, false}) {
        AffineMapAttr map = lower ? entry.getLower() : entry.getUpper();
        if (!map)
          continue;
        for (AffineExpr e : map.getValue().getResults()) {
          H::Expr b0 = affine(e, first, entry.getSizes()), b1 = affine(e, last, entry.getSizes());
          if (!b0.defined() || !b1.defined()) {
            exact = false;
            continue;
          }
          H::Expr v = lower ? t * T + T > H::min(b0, b1) : t * T < H::max(b0, b1);
          H::Expr f = lower ? t * T >= H::max(b0, b1) : t * T + T <= H::min(b0, b1);
          vis = vis.defined() ? vis && v : v;
          full = full && f;
        }
      }
    }
    return std::make_pair(vis, exact && vis.defined() ? full : H::Expr());
  };
  if (entries && qpos >= 0)
    std::tie(visible, fully) = tilePreds(H::Expr(0));

  // A mask that reads a tensor at the query row (packed sequences' `seg(b, i) == seg(b, j)`, a
  // 2-D `keep(i, j)`; attn.group_keys) is FlexAttention's block mask, summarised per call in two
  // steps: `<o>__rkeys`, per query row its first visible key, one past its last and how many it
  // sees (O(Nq Nk) mask tests against the tiles' O(Nq Nk D) work), then `<o>__gkeys`, per group
  // of queryGroup rows (min first, max end, max first, min end, whether every row's visible keys
  // are one run). The group's tiles are then three ranges: where every row is dense, the tiles
  // inside every row's run are fully visible and take the chain without the mask test; the
  // partly visible tiles before and after them take the masked chain, whose tile loop
  // KeyRangeLoops.cpp runs over each of the two ranges. A group with a row that sees nothing or
  // has holes tests the mask on every tile of its range.
  // Packed sequences, H8 D64, Zen 4 (attn-bench and a C++ harness, alternating runs): lengths
  // 1024,512,256,1536,768 (N4096) visit 8448 tiles, none with the mask test (all of them before),
  // 66.5 -> 59-62 ms; lengths 128,300,77,511 (N1016) 400 of 960 with the mask test, 8.5 -> 7.5-7.8.
  // Tiles a whole group cannot see between two runs of its rows are visited too (a range, not a
  // list: Halide bounds a loop, it cannot skip tiles of it without computing their Funcs).
  LoweredFunc rkeys, gkeys;
  H::Expr groupLo, groupHi; // [first tile, end tile) of the group's visible keys
  // The group's fully visible tiles [gFs, gFe) and the masked ones before and after them,
  // [groupLo, gHe) and [gTs, groupHi).
  H::Expr gFs, gFe, gHe, gTs;
  // With whole tiles (whole_tile), the group's whole tiles of TW keys inside its fully visible
  // ones, [gWs, gWe) in tiles of TW, and, in tiles of T, the fully visible tiles before and after
  // them, [gFs, gWs * TW / T) and [gWe * TW / T, gFe).
  H::Expr gWs, gWe;
  auto groupKeys = op->getAttrOfType<DenseI64ArrayAttr>(attn::kGroupKeysAttr);
  if (groupKeys && qpos >= 0 && sy.getValues().size() == 2) {
    // Both are scheduled with the tiles (OnlineGroup::groupKeys, OnlineGroup::rowKeys).
    rkeys = part("rkeys", FuncRole::Reduction);
    gkeys = part("gkeys", FuncRole::Reduction);
    for (size_t k = 0; k < rowVars.size(); ++k)
      if (llvm::is_contained(groupKeys.asArrayRef(), (int64_t)(k < keyPos ? k : k + 1))) {
        rkeys.vars.push_back(rowVars[k]), rkeys.varNames.push_back(rowNames[k]);
        gkeys.vars.push_back(rowVars[k]), gkeys.varNames.push_back(rowNames[k]);
      }
    H::Var qv = vars[rq];
    rkeys.vars.push_back(qv), rkeys.varNames.push_back(varNames[rq]);
    gkeys.vars.push_back(ig), gkeys.varNames.push_back(ig.name());
    {
      std::vector<H::Internal::ReductionVariable> rv{{rkeys.name + "$" + keyName, H::Expr(0), Nk}};
      H::RDom r{H::Internal::ReductionDomain(rv)};
      Env cenv;
      for (size_t k = 0; k < svars.size(); ++k)
        cenv[sb.getArgument(k)] = (int)k == (int)keyPos ? H::Expr(r.x) : H::Expr(svars[k]);
      H::Expr cond = eval(sy.getValues()[1], cenv);
      std::vector<H::Expr> args = reversed(toExprs(rkeys.vars));
      rkeys.func(args) = H::Tuple(Nk, 0, 0);
      // (min and max of selects, which Halide can vectorize, rather than selects of them.)
      rkeys.func(args) = H::Tuple(H::min(rkeys.func(args)[0], H::select(cond, r.x, Nk)),
                                  H::max(rkeys.func(args)[1], H::select(cond, r.x + 1, 0)),
                                  rkeys.func(args)[2] + H::select(cond, 1, 0));
      rkeys.rvars = {r[0]}, rkeys.rvarNames = {keyName};
    }
    std::vector<H::Internal::ReductionVariable> rv{
        {gkeys.name + "$" + il.name(), H::Expr(0), H::Expr(queryGroup)}};
    H::RDom r{H::Internal::ReductionDomain(rv)};
    H::Expr Nq = extents[rq];
    std::vector<H::Expr> rowAt = toExprs(rkeys.vars);
    rowAt.back() = H::min(H::Expr(ig) * queryGroup + r.x, Nq - 1);
    rowAt = reversed(rowAt);
    H::Expr f = rkeys.func(rowAt)[0], e = rkeys.func(rowAt)[1], n = rkeys.func(rowAt)[2];
    std::vector<H::Expr> gargs = reversed(toExprs(gkeys.vars));
    gkeys.func(gargs) = H::Tuple(Nk, 0, 0, Nk, 1);
    H::FuncRef g = gkeys.func(gargs);
    gkeys.func(gargs) = H::Tuple(H::min(g[0], f), H::max(g[1], e), H::max(g[2], f), H::min(g[3], e),
                                 H::select(n == e - f && n > 0, g[4], 0));
    gkeys.rvars = {r[0]}, gkeys.rvarNames = {il.name()};
    // Empty without a visible key (first = Nk, last + 1 = 0).
    groupLo = g[0] / T, groupHi = (g[1] + T - 1) / T;
    // Full tiles lie inside every row's run, and never the shifted last tile (t = Nk / T).
    H::Expr fs = (g[2] + T - 1) / T, fe = H::min(g[3] / T, Nk / T);
    H::Expr hasFull = g[4] != 0 && fs < fe;
    H::Expr z(0);
    gFs = H::select(hasFull, fs, z), gFe = H::select(hasFull, fe, z);
    gHe = H::select(hasFull, fs, groupHi);
    gTs = H::select(hasFull, fe, groupHi);
    if (TW > 0 && !entries) {
      H::Expr ws = (g[2] + TW - 1) / TW, we = H::min(g[3] / TW, Nk / TW);
      H::Expr hasWhole = hasFull && ws < we;
      gWs = H::select(hasWhole, ws, z), gWe = H::select(hasWhole, we, z);
    }
  }
  const bool grouped = visible.defined() || groupLo.defined();

  // Conjuncts of the mask that do not depend on the query row (a key padding mask,
  // `mask(b, j) == 0`) give, per entry of the other row indices (the batch), the keys they let
  // through: `<o>__tkeys` = (first, last + 1, count). Tiles outside [first, last] are skipped
  // by every row, whatever else the mask says. The skip must be a range of tiles, linear in the
  // tile index: KeyRangeLoops.cpp then bounds the tile loop by it, so the tile Funcs computed in
  // that loop run only for visible tiles (Halide 21 does not bound a loop by a predicate that
  // reads a Func; a data-dependent `if` would skip the state update but not them). When the
  // mask is nothing but such conjuncts, `<o>__tranges` splits the tiles into a range of fully
  // visible ones (no mask test) and a range of the others: the partly visible tiles at either
  // end (the shifted last tile among them), or every visible tile where the keys have holes or
  // both ends are partly visible.
  LoweredFunc tkeys, tranges;
  bool keyOnly = false;
  H::Expr keyLo, keyHi;        // [first tile, end tile) holding visible keys
  std::vector<H::Expr> ranges; // fs, fe, ps, pe
  // Which conjuncts those are, attn-online-softmax found (attn.key_mask); they are fetched here
  // by their position among the mask's `&&` leaves.
  auto keyMask = op->getAttrOfType<attn::KeyMaskAttr>(attn::kKeyMaskAttr);
  // (A group's key range already covers the mask's key conjuncts.)
  if (sy.getValues().size() == 2 && keyMask && !groupLo.defined()) {
    SmallVector<Value> leaves, keyLeaves;
    attn::maskConjuncts(sy.getValues()[1], leaves);
    for (int64_t i : keyMask.getConjuncts())
      keyLeaves.push_back(leaves[i]);
    keyOnly = keyMask.getKeyOnly();
    {
      // Indexed by the row indices other than the query that the key conjuncts read.
      std::vector<H::Var> kvars;
      std::vector<std::string> knames;
      for (size_t k = 0; k < rowVars.size(); ++k)
        if (llvm::is_contained(keyMask.getIndices(), (int64_t)(k < keyPos ? k : k + 1)))
          kvars.push_back(rowVars[k]), knames.push_back(rowNames[k]);
      auto keyFunc = [&](const std::string &suffix) {
        LoweredFunc f = part(suffix, FuncRole::Reduction);
        f.definition = f.name; // scheduled as any reduction, not with the tiles
        f.vars = kvars, f.varNames = knames;
        return f;
      };
      tkeys = keyFunc("tkeys");
      std::vector<H::Internal::ReductionVariable> rv{{tkeys.name + "$" + keyName, H::Expr(0), Nk}};
      H::RDom r{H::Internal::ReductionDomain(rv)};
      Env cenv;
      for (size_t k = 0; k < svars.size(); ++k)
        cenv[sb.getArgument(k)] = (int)k == (int)keyPos ? H::Expr(r.x)
                                  : (int)k == qpos      ? H::Expr(0)
                                                        : H::Expr(svars[k]);
      H::Expr cond;
      for (Value l : keyLeaves)
        cond = cond.defined() ? cond && eval(l, cenv) : eval(l, cenv);
      std::vector<H::Expr> kargs = reversed(toExprs(kvars));
      tkeys.func(kargs) = H::Tuple(Nk, 0, 0);
      tkeys.func(kargs) =
          H::Tuple(H::select(cond, H::min(tkeys.func(kargs)[0], r.x), tkeys.func(kargs)[0]),
                   H::select(cond, H::max(tkeys.func(kargs)[1], r.x + 1), tkeys.func(kargs)[1]),
                   tkeys.func(kargs)[2] + H::select(cond, 1, 0));
      tkeys.rvars = {r[0]}, tkeys.rvarNames = {keyName};
      H::Expr lo = tkeys.func(kargs)[0], hi = tkeys.func(kargs)[1], n = tkeys.func(kargs)[2];
      H::Expr loT = lo / T, loC = (lo + T - 1) / T, hiC = (hi + T - 1) / T;
      if (keyOnly && !grouped) {
        // Full tiles [loC, fullEnd) (the shifted last tile, t = Nk / T, is never full); a partly
        // visible first tile when lo is not a multiple of T; partly visible tiles [fullEnd, hiC)
        // at the end. Both ends partly visible, or holes: one masked range over them all.
        tranges = keyFunc("tranges");
        tranges.role = FuncRole::Define;
        H::Expr fullEnd = H::max(H::min(hi / T, Nk / T), loC), dense = n == hi - lo && n > 0;
        H::Expr head = lo % T != 0, tail = fullEnd < hiC;
        H::Expr z(0);
        H::Expr fs = H::select(!dense || (head && tail), z, loC),
                fe = H::select(!dense || (head && tail), z, fullEnd);
        // (With no visible key, lo = Nk and hi = 0: [loT, hiC) is empty, and so is the full range.)
        H::Expr ps = H::select(dense && !head, fullEnd, loT),
                pe = H::select(dense && head && !tail, loC, hiC);
        tranges.func(kargs) = H::Tuple(fs, fe, ps, pe);
        for (int c = 0; c < 4; ++c)
          ranges.push_back(tranges.func(kargs)[c]);
        if (TW > 0) {
          // Whole tiles of TW keys inside the fully visible range.
          const int R = TW / T;
          H::Expr ws = (ranges[0] + R - 1) / R, we = ranges[1] / R;
          gWs = H::select(ws < we, ws, z), gWe = H::select(ws < we, we, z);
        }
      } else {
        keyLo = loT, keyHi = hiC; // empty without a visible key (lo = Nk, hi = 0)
      }
    }
  }
  // The tile predicates of the state updates: affine bounds per group, then the key ranges.
  auto allPreds = [&](H::Expr t) {
    H::Expr vis, full;
    if (groupLo.defined()) {
      // (The group's ranges come from the whole mask, its affine bounds among it.)
      vis = (t >= groupLo && t < gHe) || (t >= gTs && t < groupHi);
      full = t >= gFs && t < gFe;
    } else if (grouped && entries) {
      std::tie(vis, full) = tilePreds(t);
    }
    if (!ranges.empty()) {
      vis = t >= ranges[2] && t < ranges[3];
      full = t >= ranges[0] && t < ranges[1];
    } else if (keyLo.defined()) {
      H::Expr inKeys = t >= keyLo && t < keyHi;
      vis = vis.defined() ? vis && inKeys : inKeys;
    }
    return std::make_pair(vis, full);
  };
  std::tie(visible, fully) = allPreds(H::Expr(0));
  // Whole tiles of TW keys: with no mask, the tiles [0, Nk / TW) (every slot a key no other tile
  // counts), then the tiles of T keys after them.
  const bool whole = TW > 0 && sy.getValues().size() == 1 && !fully.defined() && !visible.defined();
  const bool split = fully.defined() || whole;
  // Whole tiles of TW keys inside a group's fully visible ones (packed sequences): a chain of
  // their own, besides the fully visible and the masked chains of tiles of T keys.
  const bool groupWhole = gWs.defined();
  // The masked and the fully visible chain's tiles are disjoint by construction.
  const bool disjoint = !ranges.empty() || groupLo.defined();

  if (gathersThroughTables(op.getScore()) || gathersThroughTables(op.getValue())) {
    if (gkeys.func.defined()) {
      std::vector<H::Expr> at;
      for (const H::Var &v : gkeys.vars)
        at.push_back(v.same_as(ig) ? H::Expr(vars[rq]) / queryGroup : H::Expr(v));
      at = reversed(at);
      keyFloor = gkeys.func(at)[0], keyCeil = gkeys.func(at)[1];
    } else if (tkeys.func.defined()) {
      std::vector<H::Expr> at = reversed(toExprs(tkeys.vars));
      keyFloor = tkeys.func(at)[0], keyCeil = tkeys.func(at)[1];
    }
  }

  LoweredFunc state = part("state", FuncRole::OnlineState);
  // The state's indices: the result's, with the query row as (group, row in group) when grouped.
  std::vector<H::Var> stVars;
  std::vector<std::string> stNames;
  for (size_t k = 0; k < vars.size(); ++k) {
    if (grouped && (int)k == rq) {
      stVars.push_back(ig), stNames.push_back(ig.name());
      stVars.push_back(il), stNames.push_back(il.name());
    } else {
      stVars.push_back(vars[k]), stNames.push_back(varNames[k]);
    }
  }
  state.vars = stVars, state.varNames = stNames;
  std::vector<H::Expr> stArgs = reversed(toExprs(stVars));
  // (output so far, sum of exps, max). Each element reads only itself and the elements after
  // it: Halide stores a Tuple update's elements in order, and under strict floats it does not
  // see that an element reads an earlier one (FloatSemantics.cpp checks the order).
  if (weights)
    state.func(stArgs) = 0.0f;
  else
    state.func(stArgs) = H::Tuple(0.0f, 0.0f, lo);
  // What the state reads at (group, row in group): the row itself, kept inside the query range
  // for the last group's rows past its end (their state is computed and never read).
  std::vector<H::Expr> rowExprs = toExprs(vars);
  if (grouped) {
    H::Expr Nq = extents[rq];
    rowExprs[rq] = H::min(H::Expr(ig) * queryGroup + il, Nq - 1);
  }
  auto stateRows = [&](H::Expr t) {
    std::vector<H::Expr> c;
    for (int64_t r : rowsMap)
      if (r >= 0)
        c.push_back(rowExprs[r]);
    c.push_back(t);
    return reversed(c);
  };
  auto stateIndices = [&](H::Expr t) {
    std::vector<H::Expr> c = rowExprs;
    c.push_back(t);
    return reversed(c);
  };

  std::vector<Chain> chains;
  stopAtKeys = ranges.empty() && !keyLo.defined() && !groupLo.defined();
  if (groupWhole)
    chains.push_back(makeChain("_whole", true, TW));
  if (split)
    chains.push_back(makeChain("_full", true, whole ? TW : T));
  chains.push_back(makeChain("", false, T));
  {
    // Where the masked chain's score may look up tables: inside the visible range, where the
    // mask shows the key.
    H::Expr visible;
    if (keyFloor.defined())
      visible = H::Expr(key) >= keyFloor && H::Expr(key) < keyCeil;
    if (sy.getValues().size() == 2) {
      Env menv;
      for (auto [arg, var] : llvm::zip(sb.getArguments(), svars))
        menv[arg] = var;
      H::Expr mask = eval(sy.getValues()[1], menv);
      visible = visible.defined() ? visible && mask : mask;
    }
    if (visible.defined())
      guardTableReads(chains.back().score.func.value(), keyName, visible);
  }
  for (Chain &c : chains) {
    // Whole tiles: [0, Nk / TW) as a predicate, not the extent, which keeps the clamps of the key
    // reads (as tilePreds' `t < Nk / T`): over an empty extent (Nk < TW) Halide bounded the reads
    // of the loop's t = -1, keys below 0. The tiles of T keys start after the whole ones.
    const bool wholeChain = c.tile != T;
    H::Expr first = 0, tiles = (Nk + c.tile - 1) / c.tile;
    if (whole && !c.full) {
      first = Nk / TW * (TW / T);
      tiles = tiles - first;
    }
    std::vector<H::Internal::ReductionVariable> rtv{
        {state.name + "$" + tileName + c.sfx, first, tiles}};
    H::RDom rt{H::Internal::ReductionDomain(rtv)};
    if (whole && c.full)
      rt.where(rt.x < Nk / TW);
    if (groupWhole && wholeChain) {
      // (`t < Nk / TW` as well: Halide bounds the loop by it, so that where a specialisation
      // has fewer keys than a whole tile the chain is dropped, not compiled.)
      rt.where(rt.x >= gWs && rt.x < gWe && rt.x < Nk / TW);
      state.maskBounded = grouped;
    } else if (groupWhole && c.full) {
      // The fully visible tiles of T keys around the whole ones: two ranges, which
      // KeyRangeLoops.cpp runs as two loops.
      H::Expr t = rt.x, R = TW / T;
      H::Expr fs = ranges.empty() ? gFs : ranges[0], fe = ranges.empty() ? gFe : ranges[1];
      H::Expr a = H::select(gWs < gWe, gWs * R, fe), b = H::select(gWs < gWe, gWe * R, fe);
      rt.where(((t >= fs && t < a) || (t >= b && t < fe)) && t < Nk / T);
      state.maskBounded = grouped;
    } else if (visible.defined()) {
      auto [vis, full] = allPreds(rt);
      // (Key ranges are disjoint already: `vis && !full` would be a union that Halide cannot
      // solve for loop bounds. A group's masked tiles are two ranges, before and after its
      // fully visible ones: KeyRangeLoops.cpp runs the loop over each.)
      rt.where(!split ? vis : c.full ? full : disjoint ? vis : vis && !full);
      state.maskBounded = grouped;
    }
    if (weights) {
      state.func(stArgs) = state.func(stArgs) + c.tpv.func(stateIndices(rt));
      state.rvars.push_back(rt[0]), state.rvarNames.push_back(tileName);
      continue;
    }
    H::Expr acc = state.func(stArgs)[0], l = state.func(stArgs)[1], mo = state.func(stArgs)[2];
    H::Expr mt = c.tmax.func(stateRows(rt));
    // One exp per step: exp(-|old - tile max|) rescales whichever of the two is smaller. Maxes
    // are kept finite so that -inf - -inf (nothing seen yet, a tile with every key masked)
    // makes no NaN: such a tile's sum and values are 0, so either weight adds nothing. The
    // weights blend by a 0/1 factor, not a select: a select whose condition reads the tile's
    // max would stop Halide from skipping the tile Funcs of tiles a key range excludes.
    H::Expr mof = H::max(mo, finite), mtf = H::max(mt, finite);
    H::Expr cf = nonPositiveExp(-H::abs(mof - mtf)), g = H::cast<float>(mof >= mtf);
    H::Expr a = g + (1.0f - g) * cf, b = g * cf + (1.0f - g);
    // The output so far is the sum of the exps times the values, not yet divided by the sum of
    // exps: with every exp scaled by tileScale (<= 1 / the key count) the sum of exps is at most
    // 1, so that sum stays within the values' range and never overflows where the result does
    // not. Dividing once per row after the last tile, not per tile, took a division and three
    // multiplies per output element out of every tile's update.
    H::Expr ln = l * a + c.tsum.func(stateRows(rt)) * b;
    state.func(stArgs) = H::Tuple(acc * a + c.tpv.func(stateIndices(rt)) * b, ln, H::max(mo, mt));
    state.rvars.push_back(rt[0]), state.rvarNames.push_back(tileName);
  }
  OnlineGroup group;
  group.name = name;
  group.normalized = !weights;
  group.tile = T, group.keyCount = Nk, group.grouped = grouped, group.queryGroup = queryGroup;
  group.keyRanged = !ranges.empty() || keyLo.defined() || groupLo.defined();
  for (size_t k = 0; k < vars.size(); ++k)
    group.extents.push_back({varNames[k], extents[k]});

  // The pairs of (row block, key tile) the updates above visit, counted by the same predicates.
  {
    TileLoops loops;
    loops.name = name, loops.tileName = tileName, loops.tiles = (Nk + T - 1) / T;
    loops.masked = sy.getValues().size() == 2;
    size_t k = 0;
    for (int64_t r : rowsMap) {
      if (r < 0)
        continue;
      H::Expr ext = extents[r];
      if (grouped && r == rq)
        ext = (ext + queryGroup - 1) / queryGroup;
      loops.rows.push_back({rowNames[k], grouped && r == rq ? ig : rowVars[k], ext});
      ++k;
    }
    loops.predicates = allPreds;
    loops.split = fully.defined(); // (whole tiles count as the tiles of T keys they hold)
    loops.disjoint = disjoint;
    group.visits = lowerTileVisits(loops);
  }

  LoweredFunc out = part("", FuncRole::Online);
  out.vars = vars, out.varNames = varNames;
  std::vector<H::Expr> outState = toExprs(vars);
  if (grouped) {
    H::Expr i = vars[rq];
    outState[rq] = i % queryGroup;
    outState.insert(outState.begin() + rq, i / queryGroup);
  }
  outState = reversed(outState);
  // The sum of exps is 0 only where every key the row saw was masked (the accumulator is then 0
  // too); it is kept at least the smallest normal float so that such a row is 0, not NaN.
  H::Expr result = weights ? H::Expr(state.func(outState))
                           : state.func(outState)[0] /
                                 H::max(state.func(outState)[1], std::numeric_limits<float>::min());
  if (op.hasSink()) {
    // The sink joins the normalisation once, after the last tile: `result` is the mean of the
    // values weighted by the keys' exps (their sum l, relative to the running max m,
    // scaled by tileScale as every tile's exps are), so with the sink's exp added to the sum it
    // is scaled by l / (l + exp(sink - m)), both exps taken against max(m, sink) so that neither
    // overflows. Folding at the end, not in the state, leaves the tile loops and their skipping
    // as they are; a row that saw no key (l = 0, every tile skipped or masked) stays 0.
    Block &kb = op.getSink().front();
    Env kenv;
    for (size_t k = 0; k < rowsMap.size(); ++k)
      kenv[kb.getArgument(k)] = rowsMap[k] < 0 ? H::Expr(0) : H::Expr(vars[rowsMap[k]]);
    H::Expr sink =
        H::cast<float>(eval(cast<attn::YieldOp>(kb.getTerminator()).getValues()[0], kenv));
    H::Expr l = state.func(outState)[1], m = H::max(state.func(outState)[2], finite);
    H::Expr top = H::max(m, sink);
    // (A -inf sink adds exp(-inf) = 0: the factor is l / l = 1. A NaN or +inf sink makes its
    // exp NaN and the row NaN, as in the unfused softmax.)
    H::Expr kept = l * nonPositiveExp(m - top), den = kept + tileScale * nonPositiveExp(sink - top);
    result = H::select(l == 0.0f, 0.0f, result * (kept / den));
  }
  out.func(reversed(toExprs(vars))) = guarded(op.getResult(), result);

  funcNames_[op.getResult()] = name;
  auto add = [&](LoweredFunc &f) {
    addFunc(std::move(f));
    return out_.funcs.size() - 1;
  };
  for (auto [stage, c] : llvm::enumerate(chains)) {
    OnlineChain oc;
    oc.score = add(c.score);
    // (Producers first: the exps read the tile max, the sum reads the exps.)
    if (!weights)
      oc.tmax = add(c.tmax);
    oc.texp = add(c.texp);
    if (!weights)
      oc.tsum = add(c.tsum);
    oc.tpv = add(c.tpv);
    oc.stage = (int)stage, oc.full = c.full, oc.groupWhole = groupWhole && c.tile != T;
    oc.tile = c.tile;
    group.chains.push_back(oc);
  }
  for (LoweredFunc *f : {&tkeys, &tranges, &rkeys, &gkeys})
    if (f->func.defined()) {
      group.predicateInputs.push_back(add(*f));
      if (f == &rkeys)
        group.rowKeys = group.predicateInputs.back();
      if (f == &gkeys)
        group.groupKeys = group.predicateInputs.back();
    }
  group.state = add(state);
  group.output = add(out);
  out_.onlineGroups.push_back(std::move(group));
}

} // namespace attnc::lowering
