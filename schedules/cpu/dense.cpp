// CPU schedule for dense attention: o = sum_j softmax_j(s) * v with s a contraction over d.
#include "attnc/Patterns.h"
#include "attnc/Schedule.h"

#include <algorithm>

namespace attnc {
namespace {

namespace H = Halide;

class CpuDenseRule : public ScheduleRule {
public:
  std::string name() const override { return "cpu-dense"; }

  std::optional<Match> match(const LoweredKernel &k, const Target &t) const override {
    if (t.gpu)
      return std::nullopt;
    if (std::optional<DensePattern> p = findDensePattern(k))
      return Match(std::move(*p));
    return std::nullopt;
  }

  std::vector<Knob> knobs(const Match &, const LoweredKernel &, const Target &) const override {
    return {{"dense.rows", {2, 4, 8}, 4}, {"dense.key_vectors", {1, 2, 4, 8}, 4}};
  }

  void apply(const Match &m, LoweredKernel &k, const Target &t,
             const ScheduleParams &params) const override {
    const DensePattern &pat = std::get<DensePattern>(m);
    std::vector<LoweredFunc *> softmax;
    for (FuncIndex f : pat.softmax)
      softmax.push_back(&k.funcs[f]);
    const int vec = t.floatLanes;
    // Query rows per tile. 4 rows x 4 vectors of keys keeps 16 accumulators in registers for the
    // score contraction (AVX2 has 16 ymm registers; AVX-512 has 32 and could take 8 rows).
    const int rows = params.get("dense.rows", 4);
    const int keyBlock = params.get("dense.key_vectors", 4) * vec;

    LoweredFunc &O = k.funcs[pat.out];
    const size_t n = O.vars.size();
    H::Var i = O.vars[n - 2], e = O.vars[n - 1];
    H::RVar j = O.rvars[0];
    H::Var io("io"), ii("ii"), eo("eo"), ei("ei"), batch("batch");

    // Batch-like outer indices (b, h, ...) fuse into one parallel loop: B*H heads are plenty of
    // parallelism for a 2-16 core CPU and keep each head's K/V in one core's cache.
    auto fuseBatch = [&](H::Stage st) {
      if (n == 2)
        return;
      H::Var fused = O.vars[n - 3];
      for (int b = (int)n - 4; b >= 0; --b) {
        H::Var next("fused_" + O.vars[b].name());
        st.fuse(fused, O.vars[b], next);
        fused = next;
      }
      st.rename(fused, batch);
      st.parallel(batch);
    };

    H::Func o = O.func;
    H::Stage init = o;
    init.split(i, io, ii, rows, H::TailStrategy::GuardWithIf)
        .vectorize(e, vec, H::TailStrategy::GuardWithIf);
    fuseBatch(init);
    H::Stage upd = o.update();
    upd.split(i, io, ii, rows, H::TailStrategy::GuardWithIf)
        .split(e, eo, ei, vec, H::TailStrategy::GuardWithIf)
        .reorder(ei, ii, j, eo, io)
        .vectorize(ei)
        .unroll(ii);
    fuseBatch(upd);
    H::LoopLevel tile(o, io);

    // Scores for one tile of query rows against every key (under a mask bound, every key that
    // one of its rows may see).
    LoweredFunc &S = k.funcs[pat.score];
    H::Var si = S.vars[n - 2], sj = S.vars[n - 1];
    H::RVar d = S.rvars[0];
    H::Var jo("jo"), ji("ji");
    S.func.compute_at(tile).vectorize(sj, vec, H::TailStrategy::GuardWithIf);
    H::Stage su = S.func.update();
    su.split(sj, jo, ji, keyBlock, H::TailStrategy::GuardWithIf);
    const bool bounded =
        O.maskBounded || std::any_of(softmax.begin(), softmax.end(),
                                     [](const LoweredFunc *f) { return f->maskBounded; });
    if (!bounded) {
      su.reorder(ji, si, d, jo).vectorize(ji, vec).unroll(si);
    } else {
      // A mask bound (attn.bounds, e.g. causal) gives each tile its own key range, and Halide
      // derives from the bound which of the tile's rows need scores at all, so their count is no
      // longer a constant it can unroll: the rows are split by `rows`, with a guard each. The
      // per-tile key range also makes Halide's main loop the one over all tiles but the last,
      // where it would not split the key blocks into full blocks and a tail by itself.
      H::Var sio("sio"), sii("sii");
      su.split(si, sio, sii, rows, H::TailStrategy::GuardWithIf)
          .reorder(ji, sii, d, jo, sio)
          .vectorize(ji, vec)
          .unroll(sii)
          .partition(jo, H::Partition::Always);
    }
    // K is read along the key axis; a per-head transposed copy makes those reads contiguous.
    for (KernelParam &in : k.inputs) {
      if (in.name != pat.keyInput)
        continue;
      H::Func kT = in.param.in(S.func);
      std::vector<H::Var> a = kT.args();
      std::swap(a[0], a[1]);
      kT.compute_at(o, n > 2 ? batch : io)
          .reorder_storage(a)
          .reorder(std::vector<H::VarOrRVar>(a.begin(), a.end()))
          .vectorize(a[0], vec, H::TailStrategy::GuardWithIf);
    }

    for (LoweredFunc *f : softmax) {
      switch (f->role) {
      case FuncRole::SoftmaxMax:
      case FuncRole::SoftmaxSum:
        f->func.compute_at(tile);
        break;
      case FuncRole::SoftmaxExp:
        f->func.compute_at(tile).vectorize(f->vars.back(), vec, H::TailStrategy::GuardWithIf);
        break;
      default:
        break; // scores and probabilities are inlined into their consumers
      }
    }
  }
};

} // namespace

std::unique_ptr<ScheduleRule> makeCpuDenseRule() { return std::make_unique<CpuDenseRule>(); }

} // namespace attnc
