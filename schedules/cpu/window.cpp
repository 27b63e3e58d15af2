// CPU schedule for windowed attention: a softmax over a small constant window around each query.
//
// Measured with attn-bench on the 2-core Zen 4 machine (msda, B=1, C=72, 56x56, dilations
// [1, 2, 3], medians of 5-9 runs): cpu-generic with batch-only parallelism 40.9 ms; cpu-generic
// with fused outer parallel loops 28.5 ms; this rule 21.5-25 ms; the plain C++ unfold
// formulation 39-47 ms in the same runs (1.8-1.9x). Most of the remaining time is the qkv and
// output projections (130 of the 140 MFLOP), still scheduled by the generic rule (issue #7).
#include "attnc/Patterns.h"
#include "attnc/Schedule.h"

#include <algorithm>
#include <optional>
#include <set>

namespace attnc {
namespace {

namespace H = Halide;

// Whether update `s` of `f` reads a Func or input at a coordinate that does not move by a
// constant when `var` moves by one (a gather per vector lane along `var`).
bool gathersAlong(const LoweredFunc &f, int s, const std::string &var) {
  struct Reads : H::Internal::IRGraphVisitor {
    const std::string &var;
    bool gather = false;
    explicit Reads(const std::string &v) : var(v) {}
    using H::Internal::IRGraphVisitor::visit;
    void visit(const H::Internal::Call *c) override {
      H::Internal::IRGraphVisitor::visit(c);
      // (Inputs are read through wrapper Funcs, `k_im`: any Func or image.)
      if (c->call_type != H::Internal::Call::Image && c->call_type != H::Internal::Call::Halide)
        return;
      H::Expr v = H::Internal::Variable::make(H::Int(32), var);
      for (const H::Expr &a : c->args) {
        if (!H::Internal::expr_uses_var(a, var))
          continue;
        H::Expr step = H::Internal::simplify(H::Internal::substitute(var, v + 1, a) - a);
        gather = gather || !H::Internal::is_const(step);
      }
    }
  } r(var);
  const H::Tuple values = f.func.update_values(s);
  for (const H::Expr &v : values.as_vector())
    v.accept(&r);
  return r.gather;
}

// Whether every read in `f`'s update that uses the reduction variable `r` uses it in its
// innermost dimension only (Halide's first argument), so that vectorizing along `r` loads
// contiguous vectors.
bool readsAlongInnermost(const LoweredFunc &f, const std::string &r) {
  struct Reads : H::Internal::IRGraphVisitor {
    const std::string &r;
    bool along = true, any = false;
    explicit Reads(const std::string &v) : r(v) {}
    using H::Internal::IRGraphVisitor::visit;
    void visit(const H::Internal::Call *c) override {
      H::Internal::IRGraphVisitor::visit(c);
      if (c->call_type != H::Internal::Call::Image && c->call_type != H::Internal::Call::Halide)
        return;
      for (size_t i = 0; i < c->args.size(); ++i) {
        const bool uses = H::Internal::expr_uses_var(c->args[i], r);
        any = any || uses;
        along = along && (i == 0 || !uses);
      }
    }
  } v(r);
  const H::Tuple values = f.func.update_values(0); // (a temporary's vector would dangle)
  for (const H::Expr &e : values.as_vector())
    e.accept(&v);
  return v.any && v.along;
}

// A read of a kernel input, in `f`'s update `s`, whose coordinate `arg` (Halide's order, not
// the innermost) moves with `var` by one per step once clamps to bounds free of `var` are set
// aside: NATTEN's keys at `min(max(x - ks / 2, 0), X - ks) + t` along the row x, its queries at
// x. Vectorised along `var`, such a read is a strided load (or, clamped, a gather) from the input
// as it is stored, and a contiguous one from a copy with that coordinate innermost; Halide's
// loop partitioning (its clamped ramps are marked likely) runs the border vectors apart.
struct RowRead {
  size_t input; // in LoweredKernel::inputs
  size_t arg;
};

// The reads of update `s` of `f` that use `var`, when every one of them is a kernel input's
// read along `var` in its innermost coordinate (contiguous as it is) or a RowRead; else none.
std::optional<std::vector<RowRead>> rowReads(const LoweredFunc &f, int s, const std::string &var,
                                             const LoweredKernel &k) {
  // `e` with each min/max against a bound free of `var` replaced by its other operand.
  struct Unclamp : H::Internal::IRMutator {
    const std::string &var;
    explicit Unclamp(const std::string &v) : var(v) {}
    using H::Internal::IRMutator::visit;
    H::Expr unclamp(const H::Expr &a, const H::Expr &b, const H::Expr &whole) {
      if (!H::Internal::expr_uses_var(b, var))
        return mutate(a);
      if (!H::Internal::expr_uses_var(a, var))
        return mutate(b);
      return whole;
    }
    H::Expr visit(const H::Internal::Min *op) override { return unclamp(op->a, op->b, op); }
    H::Expr visit(const H::Internal::Max *op) override { return unclamp(op->a, op->b, op); }
  };
  struct Reads : H::Internal::IRGraphVisitor {
    const std::string &var, &self; // (the update reads its own accumulator)
    const LoweredKernel &k;
    std::vector<RowRead> found;
    bool ok = true;
    Reads(const std::string &v, const std::string &f, const LoweredKernel &kk)
        : var(v), self(f), k(kk) {}
    using H::Internal::IRGraphVisitor::visit;
    void visit(const H::Internal::Call *c) override {
      H::Internal::IRGraphVisitor::visit(c);
      if ((c->call_type != H::Internal::Call::Image && c->call_type != H::Internal::Call::Halide) ||
          c->name == self)
        return;
      std::vector<size_t> uses;
      for (size_t a = 0; a < c->args.size(); ++a)
        if (H::Internal::expr_uses_var(c->args[a], var))
          uses.push_back(a);
      if (uses.empty())
        return;
      if (uses.size() != 1) {
        ok = false;
        return;
      }
      H::Expr v = H::Internal::Variable::make(H::Int(32), var);
      Unclamp un(var);
      H::Expr a = un.mutate(c->args[uses[0]]);
      H::Expr step = H::Internal::simplify(H::Internal::substitute(var, v + 1, a) - a);
      if (!H::Internal::is_const_one(step)) {
        ok = false;
        return;
      }
      if (uses[0] == 0 && H::Internal::is_const_one(H::Internal::simplify(
                              H::Internal::substitute(var, v + 1, c->args[0]) - c->args[0])))
        return; // contiguous as stored
      for (size_t i = 0; i < k.inputs.size(); ++i)
        if (c->name == k.inputs[i].param.name() || c->name == H::Func(k.inputs[i].param).name()) {
          if (uses[0] == 0) {
            ok = false; // clamped along the innermost: no copy would make it contiguous
            return;
          }
          found.push_back({i, uses[0]});
          return;
        }
      ok = false;
    }
  } r(var, f.func.name(), k);
  const H::Tuple values = f.func.update_values(s);
  for (const H::Expr &e : values.as_vector())
    e.accept(&r);
  if (!r.ok || r.found.empty())
    return std::nullopt;
  for (const RowRead &a : r.found)
    for (const RowRead &b : r.found)
      if (a.input == b.input && a.arg != b.arg)
        return std::nullopt; // one copy cannot put two coordinates innermost
  return r.found;
}

// `f`'s indices in Halide's storage order with `x` innermost and the others as they were.
std::vector<H::Var> innermostFirst(const H::Func &f, const H::Var &x) {
  std::vector<H::Var> storage{x};
  for (const H::Var &a : f.args())
    if (a.name() != x.name())
      storage.push_back(a);
  return storage;
}

// The partial sums of a channel dot product by default: half a vector, at least 4 lanes (the
// measurements are at the rfactor in CpuWindowRule::apply).
int defaultDotLanes(const Target &t) { return std::max(t.floatLanes / 2, 4); }

// The constant extent of the consumer's row index (its second innermost) when every row of a
// window sees the same keys: a window-partitioned softmax (Swin's 49 positions per window, each
// attending to the window's 49), a small dense attention per batch point.
std::optional<int64_t> batchedRows(const LoweredFunc &c) {
  const size_t n = c.vars.size();
  if (n < 3 || c.rvars.size() != 1 || c.extents.size() != n)
    return std::nullopt;
  std::optional<int64_t> rows = H::Internal::as_const_int(c.extents[n - 2]);
  if (!rows || *rows < 1 || *rows > 256)
    return std::nullopt;
  return rows;
}

// The Funcs outside the window's pattern (projections), by the generic rule.
void scheduleOutside(const WindowPattern &w, LoweredKernel &k, const Target &t,
                     const ScheduleParams &params) {
  auto in = [](const std::vector<FuncIndex> &v, FuncIndex f) {
    return std::find(v.begin(), v.end(), f) != v.end();
  };
  for (FuncIndex f = 0; f < k.funcs.size(); ++f)
    if (!in(w.parts, f) && !in(w.consumers, f) && !in(w.scoreDefs, f))
      scheduleGenericFunc(k.funcs[f], t, params, &k);
}

class CpuWindowRule : public ScheduleRule {
public:
  std::string name() const override { return "cpu-window"; }
  std::optional<Match> match(const LoweredKernel &k, const Target &t) const override {
    if (t.gpu)
      return std::nullopt;
    if (std::optional<WindowPattern> w = findWindow(k))
      return Match(std::move(*w));
    return std::nullopt;
  }

  // Its own loops are fixed; the Funcs outside its pattern (projections) take the generic knobs,
  // with defaults of their own: one vector per GEMM block and one parallel loop. attn-tune on msda
  // (B1 56x56 C72, Zen 5, 7 alternating runs each): 3.06 ms with the generic defaults, 2.56 ms
  // with these; 72 channels fill 4.5 vectors, so two-vector blocks carried a half-empty tail.
  static constexpr std::pair<const char *, int> kDefaults[] = {{"generic.gemm_vectors", 1},
                                                               {"generic.parallel_fuse", 1}};

  std::vector<Knob> knobs(const Match &m, const LoweredKernel &k, const Target &t) const override {
    std::vector<Knob> ks = genericKnobs(t);
    if (batchedRows(k.funcs[std::get<WindowPattern>(m).consumers[0]])) {
      // The window's register blocks: 4 rows x 4 key vectors of scores (16 of AVX-512's 32
      // registers), 4 rows x 2 value vectors of the weighted sum (D = 32: one row's values).
      ks.push_back({"window.rows", {2, 4, 6, 8}, 4});
      ks.push_back({"window.key_vectors", {1, 2, 4}, 4});
      ks.push_back({"window.value_vectors", {1, 2, 4}, 2});
      return ks;
    }
    for (Knob &kb : ks)
      for (auto [name, v] : kDefaults)
        if (kb.name == name)
          kb.dflt = v;
    // The partial sums of a dot product along the channels (below, where the row gathers).
    ks.push_back({"window.dot_lanes", {4, 8, 16}, defaultDotLanes(t)});
    // The lanes of a contraction vectorised along the row (vectorizeAlongRow).
    ks.push_back({"window.row_lanes", {4, 8, 16}, kRowLanes});
    return ks;
  }

  void apply(const Match &m, LoweredKernel &k, const Target &t,
             const ScheduleParams &given) const override {
    const WindowPattern &w = std::get<WindowPattern>(m);
    if (batchedRows(k.funcs[w.consumers[0]])) {
      applyBatched(w, k, t, given);
      return;
    }
    ScheduleParams params = given;
    for (auto [name, v] : kDefaults)
      params.values.emplace(name, v);
    const int vec = t.floatLanes;
    scheduleOutside(w, k, t, params);
    LoweredFunc &c = k.funcs[w.consumers[0]];
    // The consumer: parallel over (batch, row) fused, vectorized over its innermost index.

    c.func.compute_root();
    H::Var row(c.name + "_row"), bh(c.name + "_bh");
    // With a score definition of its own (Swin), image rows too: computed per (batch, head) the
    // contraction held the whole image's scores (614 KB at 56x56, 49 offsets) and three heads
    // made three tasks for two threads (41% of the time waiting, Halide profiler, Zen 4).
    // A score contraction written inside the softmax's body is a part of the softmax
    // (`p__sum0`); on such a map it takes the score definition's plan below, so that both forms
    // run alike (issue #20's canonical forms). NATTEN's neighbourhoods (B1 NH16 14x14 D32 ks 7,
    // Zen 4, Halide profiler): inline 12.3 ms with the part's plan (vectorized along the row:
    // q and k gathered per lane), 2.9 ms written as its own definition.
    // Only where the contraction reads its operands along their innermost dimension (q and k
    // of `[..., D]` inputs) and would gather them along the row: msda's contraction reads its
    // projections along the row, and its part's plan is 14% faster (4.7 against 5.5 ms at
    // 56x56, Zen 4, alternating runs in one process).
    std::vector<FuncIndex> contractions = w.scoreDefs;
    bool alongRow = false; // a contraction vectorised along the row (vectorizeAlongRow)
    if (c.vars.size() >= 5)
      for (FuncIndex part : w.parts) {
        const LoweredFunc &f = k.funcs[part];
        auto row = std::find(f.varNames.begin(), f.varNames.end(), w.rowVar);
        if (f.role == FuncRole::Reduction && f.rvars.size() == 1 &&
            f.func.num_update_definitions() == 1 && row != f.varNames.end() &&
            gathersAlong(f, 0, f.vars[row - f.varNames.begin()].name()) &&
            readsAlongInnermost(f, f.rvars[0].name()))
          contractions.push_back(part);
      }
    const bool imageRows = !contractions.empty() && c.vars.size() >= 5;
    for (int s = 0; s <= c.func.num_update_definitions(); ++s) {
      H::Stage st = s == 0 ? H::Stage(c.func) : c.func.update(s - 1);
      if (imageRows && s > 0) {
        // The value vectors outside the window's offsets: each vector of the output sums the
        // whole window in one register. With the offsets outside (each probability and key
        // row made once for all D / 16 vectors), every offset loaded, added to and stored the
        // output's vectors, and those stores stalled the next offset's loads: 42% of NATTEN's
        // samples on one store in attn-bench (perf, Zen 4). attn-bench, Zen 4, two alternating
        // builds each: neighborhood_attention 56x56 NH2 1.59-1.95 ms against 2.57-2.92 (14x14
        // NH8 0.44-0.86 against 0.69-1.60: noisy); JIT in one process, examples/swin_on_image
        // 2.94-3.08 against 3.05-3.35 ms.
        H::Var e = c.vars.back(), eo(c.name + "_eo"), ei(c.name + "_ei");
        std::vector<H::VarOrRVar> order{ei};
        for (const H::RVar &r : c.rvars)
          order.push_back(r);
        order.push_back(eo);
        order.push_back(c.vars[c.vars.size() - 2]);
        st.split(e, eo, ei, vec, H::TailStrategy::GuardWithIf).vectorize(ei).reorder(order);
      } else {
        st.vectorize(c.vars.back(), vec, H::TailStrategy::GuardWithIf);
      }
      if (imageRows)
        st.fuse(c.vars[1], c.vars[0], bh).fuse(c.vars[2], bh, row).parallel(row);
      else
        st.fuse(c.vars[1], c.vars[0], row).parallel(row);
    }
    // A score written as its own definition (Swin's `s`): its pointwise part inlined into the
    // softmax's, its contraction computed per consumer row with the row index innermost in
    // storage, so that the statistics, vectorized along the row, load it densely. The
    // contraction itself is vectorized along the row where its input reads move with the row
    // (msda's `x + dilation * (t - 1)`), else along its reduction: Swin's keys are read at
    // `((x - shift) % X / ws) * ws + t`, a gather per lane along the row. Measured (attn-bench,
    // swin_attention B1 NH3 56x56 D32, Zen 4, Halide profiler): as a root Func vectorized along
    // the window's 7 offsets, the contraction took 18.4 of 21.4 ms on one thread.
    for (FuncIndex d : contractions) {
      LoweredFunc &f = k.funcs[d];
      if (f.func.num_update_definitions() == 0) {
        f.func.compute_inline();
        continue;
      }
      f.func.compute_at(c.func, row);
      auto it = std::find(f.varNames.begin(), f.varNames.end(), w.rowVar);
      if (it == f.varNames.end())
        continue;
      H::Var x = f.vars[it - f.varNames.begin()];
      const std::vector<H::Var> storage = innermostFirst(f.func, x);
      if (f.func.num_update_definitions() == 1 && f.rvars.size() == 1 &&
          it + 1 != f.varNames.end() && gathersAlong(f, 0, x.name()))
        if (std::optional<std::vector<RowRead>> reads = rowReads(f, 0, x.name(), k)) {
          vectorizeAlongRow(f, x, storage, *reads, H::LoopLevel(c.func, row), k,
                            params.get("window.row_lanes", kRowLanes));
          alongRow = true;
          continue;
        }
      f.func.reorder_storage(storage);
      f.func.vectorize(x, vec, H::TailStrategy::GuardWithIf);
      for (int s = 0; s < f.func.num_update_definitions(); ++s) {
        H::Stage st = f.func.update(s);
        if (!gathersAlong(f, s, x.name()) || f.rvars.size() != 1) {
          st.vectorize(x, vec, H::TailStrategy::GuardWithIf);
          continue;
        }
        // Each score is a dot product along the channels: multiply-adds into `lanes` partial
        // sums (an rfactor), then one horizontal sum. Strict floats make that sum a chain of
        // `lanes` dependent adds (in order), which was the whole cost with full vectors: at 16
        // lanes (AVX-512) half of NATTEN's samples were on it (perf, Zen 4). Alternating runs
        // in one process, Zen 4, 2 threads: neighborhood_attention B1 NH2 56x56 D32 2.51 ms with
        // the atomic 16-lane reduction, 2.57 with 16 partial sums, 1.81-1.84 with 8, 1.84-1.91
        // with 4; swin_on_image NH3 56x56 4.3-4.6, 3.7, 3.06-3.09, 3.37-3.44 ms. Half a vector
        // (at least 4 lanes) by default.
        const int lanes = params.get("window.dot_lanes", defaultDotLanes(t));
        H::RVar r = f.rvars[0], ro(r.name() + "_o"), ri(r.name() + "_i");
        H::Var lane(f.name + "_lane");
        H::Func partial =
            st.split(r, ro, ri, lanes, H::TailStrategy::GuardWithIf).rfactor(ri, lane);
        partial.compute_at(f.func, f.vars.back()).vectorize(lane);
        partial.update(0).vectorize(lane);
        st.atomic().vectorize(ri);
      }
    }
    // The window's scores and statistics: computed per consumer row, for that row only, and
    // vectorized along the row (the map's width), which every window offset shares.
    for (FuncIndex part : w.parts) {
      LoweredFunc *f = &k.funcs[part];
      if (f->role == FuncRole::SoftmaxScore)
        continue; // pointwise: inlined into max and exp
      if (std::find(contractions.begin(), contractions.end(), part) != contractions.end())
        continue;
      f->func.compute_at(c.func, row);
      auto it = std::find(f->varNames.begin(), f->varNames.end(), w.rowVar);
      if (it == f->varNames.end())
        continue;
      H::Var x = f->vars[it - f->varNames.begin()];
      // With a contraction along the row, its statistics and exps are stored row innermost too:
      // stored as declared, each vector of the row was a scatter (49 floats apart at ks 7).
      if (alongRow)
        f->func.reorder_storage(innermostFirst(f->func, x));
      for (int s = 0; s <= f->func.num_update_definitions(); ++s) {
        H::Stage st = s == 0 ? H::Stage(f->func) : f->func.update(s - 1);
        st.vectorize(x, vec, H::TailStrategy::GuardWithIf);
      }
    }
    // With a contraction along the row, the probabilities once per row, vectorised along it:
    // inlined into the weighted sum they were a scalar division per multiply-add. NATTEN (B1
    // NH2 56x56 D32 ks 7, Xeon with AMX, in one process against the dot products along the
    // channels): 0.72x the time without this and the storage above, 0.64x with them; 14x14
    // NH8 1.06x and 0.98x.
    if (alongRow)
      for (FuncIndex part : w.parts)
        if (k.funcs[part].role == FuncRole::SoftmaxMax)
          if (LoweredFunc *p = k.find(k.funcs[part].definition); p && !p->isOutput) {
            auto it = std::find(p->varNames.begin(), p->varNames.end(), w.rowVar);
            if (it == p->varNames.end())
              continue;
            H::Var x = p->vars[it - p->varNames.begin()];
            p->func.compute_at(c.func, row)
                .reorder_storage(innermostFirst(p->func, x))
                .vectorize(x, vec, H::TailStrategy::GuardWithIf);
          }
  }

private:
  // A window's score contraction (a dot product per query and offset) vectorised along the row
  // (the queries), with the inputs it reads along the row copied so that the row is their
  // innermost coordinate: each step of the reduction is then one vector of queries times one
  // vector of keys per window offset, with no horizontal sum. The last offset index (the window's
  // columns) is unrolled, one accumulator per column, so that the reduction's multiply-adds are
  // independent chains held in registers; each query vector is loaded once for them all.
  // Where a window's start is clamped (NATTEN's borders), the vectors whose queries straddle the
  // clamp read their keys lane by lane (Halide's loop partitioning keeps the others dense), so
  // their cost grows with the lanes while the rest do not: the vectors are kRowLanes wide. NATTEN
  // (B1 NH2 56x56 and B1 NH8 14x14, D32 ks 7; Intel Xeon with AMX, family 6 model 167, 2
  // threads), time against the dot products along the channels in one process, with the
  // probabilities and storage below: 16 lanes 0.99x and 1.97x, 4 lanes 0.64x and 0.98x (8 lanes
  // without them 0.85x and 1.54x, 4 lanes 0.72x and 1.06x).
  static void vectorizeAlongRow(LoweredFunc &f, const H::Var &x, const std::vector<H::Var> &storage,
                                const std::vector<RowRead> &reads, const H::LoopLevel &row,
                                LoweredKernel &k, int vec) {
    std::set<size_t> copied;
    for (const RowRead &r : reads) {
      if (!copied.insert(r.input).second)
        continue;
      H::Func cp = k.inputs[r.input].param.in(f.func);
      std::vector<H::Var> cs = cp.args();
      std::swap(cs[0], cs[r.arg]);
      // Copied in square tiles, vectorised along the copy's rows and unrolled along its columns,
      // as cpu-generic copies a transposed weight: Halide loads the source as dense vectors and
      // transposes them in registers. Once per call, every tile in parallel.
      H::Var xo(cp.name() + "_xo"), yo(cp.name() + "_yo"), xi(cp.name() + "_xi"),
          yi(cp.name() + "_yi");
      std::vector<H::VarOrRVar> order{xi, yi, xo, yo};
      std::vector<H::Var> outer;
      for (size_t j = 1; j < cs.size(); ++j)
        if (j != r.arg)
          outer.push_back(cs[j]);
      order.insert(order.end(), outer.begin(), outer.end());
      cp.compute_root()
          .reorder_storage(cs)
          .tile(cs[0], cs[r.arg], xo, yo, xi, yi, vec, vec, H::TailStrategy::GuardWithIf)
          .reorder(order)
          .vectorize(xi)
          .unroll(yi);
      H::VarOrRVar last = outer.empty() ? H::VarOrRVar(yo) : H::VarOrRVar(outer.back());
      for (int j = (int)outer.size() - 2; j >= 0; --j) {
        H::Var fused(cp.name() + "_f" + std::to_string(j));
        cp.fuse(outer[j], last.var, fused);
        last = fused;
      }
      cp.parallel(last);
    }
    // The sum one block at a time (a vector of queries by kRowColumns columns of the window),
    // in registers across the reduction; a wrapper at the consumer's row holds the row's scores,
    // the row innermost, for the softmax (vectorised along the row too).
    H::Func res = f.func.in();
    H::Var col = f.vars.back(), xo(f.name + "_xo"), xv(f.name + "_xv"), co(f.name + "_co"),
           ci(f.name + "_ci");
    // (Innermost first: the query vector, the block's columns, the blocks of columns, the other
    // offsets, the query vectors, then the rest: one point of them per row.)
    const size_t xi =
        std::find(f.varNames.begin(), f.varNames.end(), x.name()) - f.varNames.begin();
    std::vector<H::VarOrRVar> order{xv, ci, co};
    for (size_t j = f.vars.size() - 2; j > xi; --j)
      order.push_back(f.vars[j]);
    order.push_back(xo);
    for (size_t j = xi; j-- > 0;)
      order.push_back(f.vars[j]);
    res.compute_at(row)
        .reorder_storage(storage)
        .split(x, xo, xv, vec, H::TailStrategy::GuardWithIf)
        .split(col, co, ci, kRowColumns, H::TailStrategy::GuardWithIf)
        .reorder(order)
        .vectorize(xv)
        .unroll(ci);
    f.func.reorder_storage(storage);
    sumInRegisterBlock(f.func, x, col, f.rvars[0], H::LoopLevel(res, co), vec, 1, kRowColumns,
                       H::TailStrategy::GuardWithIf, true);
  }
  // Window columns per unrolled block: NATTEN's 7 (ks) fit one block of 8 accumulators, which
  // leave registers for the query vector and the keys' on every x86 target (16 or 32).
  static constexpr int kRowColumns = 8;
  // Lanes of a contraction vectorised along the row (knob window.row_lanes; see above).
  static constexpr int kRowLanes = 4;

  // A window-partitioned softmax: per batch point (b, h, window), a whole small attention of
  // `rows` queries against the window's keys, scheduled as cpu-dense schedules a query tile: the
  // scores of the window (rows x keys) and their statistics computed per batch point, the copies
  // of the inputs gathered at computed subscripts (attn-gather-reads' definitions) computed once
  // per batch point into dense buffers, the keys' transposed, so both contractions run on
  // contiguous vectors with register blocks. Swin in window coordinates (56x56 NH3 D32, Zen 4, 2
  // threads): 1.2-1.3 ms, against 2.6 ms for the per-row plan below with its reads inlined.
  void applyBatched(const WindowPattern &w, LoweredKernel &k, const Target &t,
                    const ScheduleParams &params) const {
    const int vec = t.floatLanes;
    // (The copies attn-gather-reads made and the probabilities are placed below.)
    scheduleOutside(w, k, t, params);
    const int rowBlock = params.get("window.rows", 4);
    const int keyBlock = params.get("window.key_vectors", 4) * vec;
    const int valueVectors = params.get("window.value_vectors", 2);
    LoweredFunc &c = k.funcs[w.consumers[0]];
    const size_t n = c.vars.size();
    H::Var i = c.vars[n - 2], e = c.vars[n - 1];
    H::RVar j = c.rvars[0];
    H::Var io("io"), ii("ii"), eo("eo"), ei("ei");
    // Fuses the outer indices c.vars[0, m) into one loop, returned (m >= 1).
    auto fuseOuter = [&](H::Stage st, size_t m, const std::string &prefix) {
      H::Var fused = c.vars[m - 1];
      for (int b = (int)m - 2; b >= 0; --b) {
        H::Var next(prefix + c.vars[b].name());
        st.fuse(fused, c.vars[b], next);
        fused = next;
      }
      return fused;
    };
    const size_t outer = n - 2; // (b, h, wy, wx)
    // The weighted sum, like cpu-generic's GEMMs, one block (rows x value vectors) at a time
    // into a buffer of constant size that LLVM keeps in registers, a wrapper holding the result
    // for the consumers. Accumulated in the root buffer, whose rows lie D floats apart (D known
    // only at run time, so rows might overlap for all LLVM knows), every step loaded and stored
    // each accumulator and the next step's FMA waited on that store: the weighted sum took a
    // third of Swin's time (56x56 NH3 D32, Zen 5, Halide profiler: 0.27 of 0.81 ms, 55 GFLOP/s
    // per core against the score contraction's ~250). In registers, in one process, alternating
    // (Zen 5, 2 threads): 0.62 against 0.76 ms. An output is the caller's buffer: blocked in
    // place, as before.
    H::Func res = c.isOutput ? c.func : c.func.in();
    res.compute_root();
    H::Stage upd = c.isOutput ? c.func.update() : H::Stage(res);
    if (c.isOutput) {
      H::Stage init = c.func;
      init.vectorize(e, vec, H::TailStrategy::GuardWithIf);
      init.parallel(fuseOuter(init, outer, "init_"));
      H::Var ev("ev"), el("el");
      upd.split(i, io, ii, rowBlock, H::TailStrategy::GuardWithIf)
          .split(e, eo, ei, vec * valueVectors, H::TailStrategy::GuardWithIf)
          .split(ei, ev, el, vec)
          .reorder(el, ev, ii, j, eo, io)
          .vectorize(el)
          .unroll(ev)
          .unroll(ii);
    } else {
      upd.split(i, io, ii, rowBlock, H::TailStrategy::GuardWithIf)
          .split(e, eo, ei, vec * valueVectors, H::TailStrategy::GuardWithIf)
          .reorder(ei, ii, eo, io)
          .vectorize(ei, vec, H::TailStrategy::GuardWithIf)
          .unroll(ii);
      sumInRegisterBlock(c.func, e, i, j, H::LoopLevel(res, eo), vec, valueVectors, rowBlock,
                         H::TailStrategy::GuardWithIf, false);
    }
    // One window per step of the innermost outer index (wx), serial; the next (wy) and the rest,
    // fused (b, h), in parallel loops of their own. Fusing wy or wx with the others made Halide
    // size each window's buffers over the rest of the fused range (Swin 56x56: 614 KB of
    // exponentials, a heap allocation, per window of 9.6 KB); with the weighted sum in
    // registers, (b, h, wy) fused into one parallel loop was still slower (0.69 against 0.63 ms,
    // Zen 5).
    if (outer >= 3)
      upd.parallel(fuseOuter(upd, outer - 2, "fused_"));
    if (outer >= 2)
      upd.parallel(c.vars[outer - 2]);
    else
      upd.parallel(c.vars[0]);
    H::LoopLevel at(res, c.vars[outer - 1]);

    // The softmax's row and key indices, by name in the score's Funcs (findWindow's score
    // definitions share the probabilities' index names).
    const LoweredFunc *mx = nullptr;
    for (FuncIndex f : w.parts)
      if (k.funcs[f].role == FuncRole::SoftmaxMax)
        mx = &k.funcs[f];
    std::string keyVar;
    for (FuncIndex f : w.parts)
      if (k.funcs[f].role == FuncRole::SoftmaxExp)
        for (const std::string &v : k.funcs[f].varNames)
          if (std::find(mx->varNames.begin(), mx->varNames.end(), v) == mx->varNames.end())
            keyVar = v;
    auto varOf = [](LoweredFunc &f, const std::string &name) -> std::optional<H::Var> {
      auto it = std::find(f.varNames.begin(), f.varNames.end(), name);
      if (it == f.varNames.end())
        return std::nullopt;
      return f.vars[it - f.varNames.begin()];
    };
    auto keyInnermost = [](LoweredFunc &f, const H::Var &x) {
      f.func.reorder_storage(innermostFirst(f.func, x));
    };

    for (FuncIndex d : w.scoreDefs) {
      LoweredFunc &f = k.funcs[d];
      std::optional<H::Var> x = varOf(f, keyVar), r = varOf(f, w.rowVar);
      f.func.compute_at(at);
      if (!x || !r) {
        continue;
      }
      keyInnermost(f, *x);
      f.func.vectorize(*x, vec, H::TailStrategy::GuardWithIf);
      if (f.func.num_update_definitions() == 0 || f.rvars.size() != 1) {
        for (int s = 0; s < f.func.num_update_definitions(); ++s)
          f.func.update(s).vectorize(*x, vec, H::TailStrategy::GuardWithIf);
        continue;
      }
      // The contraction as cpu-dense's score tile: rowBlock rows x keyBlock keys of accumulators,
      // the window's keys (49: 3 vectors and one lane) in unrolled vectors, the last one
      // predicated, so that the accumulators stay in registers along d.
      H::Var xo("jo"), xi("ji"), xv("jv"), ro("sio"), ri("sii");
      f.func.update()
          .split(*x, xo, xi, keyBlock, H::TailStrategy::GuardWithIf)
          .split(xi, xv, xi, vec, H::TailStrategy::GuardWithIf)
          .split(*r, ro, ri, rowBlock, H::TailStrategy::GuardWithIf)
          .reorder(xi, xv, ri, f.rvars[0], xo, ro)
          .vectorize(xi)
          .unroll(xv)
          .unroll(ri);
    }
    for (FuncIndex part : w.parts) {
      LoweredFunc &f = k.funcs[part];
      switch (f.role) {
      case FuncRole::SoftmaxMax:
      case FuncRole::SoftmaxSum:
        f.func.compute_at(at);
        break;
      case FuncRole::SoftmaxExp:
        f.func.compute_at(at);
        if (std::optional<H::Var> x = varOf(f, keyVar)) {
          keyInnermost(f, *x);
          f.func.vectorize(*x, vec, H::TailStrategy::GuardWithIf);
        }
        break;
      default:
        break; // scores are inlined into their consumers
      }
    }
    // The probabilities once per window, vectorized along the keys: inlined, the weighted sum
    // divided each once per value vector, a scalar division per multiply-add. With the two value
    // vectors per row block: Swin 56x56 NH3 2.06 -> 1.70 ms; the score contraction's keys in
    // unrolled vectors then 1.70 -> 1.24 ms (a C++ harness, medians of 30, Zen 4, 2 threads).
    if (LoweredFunc *p = k.find(mx->definition)) {
      p->func.compute_at(at);
      if (std::optional<H::Var> x = varOf(*p, keyVar)) {
        keyInnermost(*p, *x);
        p->func.vectorize(*x, vec, H::TailStrategy::GuardWithIf);
      }
    }
    // attn-gather-reads' copies the window reads: once per batch point, the key-indexed ones
    // (read along the key in the score contraction) stored key-innermost.
    for (LoweredFunc &f : k.funcs) {
      if (!f.gather)
        continue;
      bool read = false;
      for (FuncIndex d : w.scoreDefs)
        if (std::find(k.funcs[d].reads.begin(), k.funcs[d].reads.end(), f.name) !=
            k.funcs[d].reads.end())
          read = true;
      if (std::find(c.reads.begin(), c.reads.end(), f.name) != c.reads.end())
        read = true;
      if (!read)
        continue;
      f.func.compute_at(at);
      std::optional<H::Var> x;
      for (FuncIndex d : w.scoreDefs)
        if (!x)
          x = argAlong(k.funcs[d], f, keyVar);
      if (x) {
        keyInnermost(f, *x);
        f.func.vectorize(*x, vec, H::TailStrategy::GuardWithIf);
      } else {
        f.func.vectorize(f.vars.back(), vec, H::TailStrategy::GuardWithIf);
      }
    }
  }

  // The index of `callee` that `f`'s updates call it with `var` at (`kw(b, h, wy, wx, j, d)`
  // read by a score of (.., i, j): kw's own index at j's position), if any.
  static std::optional<H::Var> argAlong(const LoweredFunc &f, const LoweredFunc &callee,
                                        const std::string &var) {
    struct Find : H::Internal::IRGraphVisitor {
      const std::string &name, &var;
      int pos = -1;
      Find(const std::string &n, const std::string &v) : name(n), var(v) {}
      using H::Internal::IRGraphVisitor::visit;
      void visit(const H::Internal::Call *c) override {
        H::Internal::IRGraphVisitor::visit(c);
        if (c->name != name)
          return;
        for (size_t a = 0; a < c->args.size(); ++a)
          if (const auto *v = c->args[a].as<H::Internal::Variable>(); v && v->name == var)
            pos = (int)a;
      }
    } find(callee.func.name(), var);
    for (int s = 0; s < f.func.num_update_definitions(); ++s) {
      const H::Tuple values = f.func.update_values(s);
      for (const H::Expr &v : values.as_vector())
        v.accept(&find);
    }
    if (find.pos < 0)
      return std::nullopt;
    // Halide's argument order is the DSL's reversed.
    return callee.vars[callee.vars.size() - 1 - find.pos];
  }
};

} // namespace

std::unique_ptr<ScheduleRule> makeCpuWindowRule() { return std::make_unique<CpuWindowRule>(); }

} // namespace attnc
