// CPU schedule for deformable sampling: a sum over sampling points of weights times reads of a
// tensor at coordinates computed from data (ifloor of a sampling location), as in Deformable
// DETR's core op  sampled(b, q, m, d) = sum(l, p) aw * bilinear(value(b, ., m, d) at loc(b, q, m,
// l, p)), and the pointwise samples that sample-then-project pipelines materialise (v__sample).
//
// Measured on the 2-core Zen 4 (AVX-512) with attn-bench's ms_deform_attn_core shapes
// (Deformable DETR encoder: B=1, Q=20097, M=8, D=32, L=4, P=4), one thread, minimum CPU time
// over 30 runs while the machine was shared (differences under ~10% are noise). With the sum as
// the kernel's output ([B, Q, M, D]):
//   cpu-generic (16-wide d vectors outside the point loops, coordinates computed per vector)  108 ms
//   this rule                                                                                   70 ms
//   the same with 16-wide vectors (coordinates computed twice per point)                      101 ms
//   the same with p and l swapped (l-invariant shapes/start loads hoisted out of p)             66 ms
//   the same with the P loop unrolled by 4                                                      85 ms
//   the same with the heads outside the queries (one head's slice of value in L2)              137 ms
//   the same with every location at one point (everything in L1: the compute alone)            36 ms
// About half the time is waiting for the four corner reads (perf: most samples on the first
// vector load of a point); the rest is the ~100 scalar instructions per point that compute the
// coordinates, bounds and clamped indices. The p/l swap is not taken: it changes the order of
// the floating-point sum (results would differ from every other schedule in the last bits) for
// a gain inside the noise. With the op's [B, Q, M*D] output read from the sum (the variant as it
// is now), the sum computed per output task and the specialised copy below: 72-74 ms.
#include "attnc/Patterns.h"
#include "attnc/Schedule.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

namespace attnc {
namespace {

namespace H = Halide;
namespace HI = Halide::Internal;

// Whether every read of `f` in `e` passes the reader's outer indices straight through as f's
// outer indices (b, q of o(b, q, c) reading sampled(b, q, ., .)): one task of the reader's rows
// then needs only those rows of f.
class RowsPassedThrough : public HI::IRVisitor {
public:
  RowsPassedThrough(const LoweredFunc &f, const LoweredFunc &reader) : f_(f), reader_(reader) {}
  bool ok = true;

private:
  using HI::IRVisitor::visit;
  void visit(const HI::Call *c) override {
    if (c->name == f_.name) {
      // Halide's argument order is innermost first; f's outer indices are its last n - 2.
      const size_t n = f_.vars.size(), outer = reader_.vars.size() - 1;
      if (c->args.size() != n || outer != n - 2)
        ok = false;
      for (size_t i = 0; ok && i < outer; ++i) {
        const HI::Variable *v = c->args[n - 1 - i].as<HI::Variable>();
        ok = v && v->name == reader_.vars[i].name();
      }
    }
    HI::IRVisitor::visit(c);
  }
  const LoweredFunc &f_;
  const LoweredFunc &reader_;
};

// The only reader of a sampling Func when that reader is a pointwise output over the same rows,
// typically the op's [B, Q, M*D] view of a [B, Q, M, D] sum (o(b, q, c) = sampled(b, q, c / D,
// c % D)). The sum is then computed per task of the output, into a buffer that stays in L1/L2,
// instead of into a 20 MB root buffer that costs a page fault per 4 KB on every call (8% of the
// run in perf) and a second pass over memory: 120 ms with one thread at root, 93 ms per task.
LoweredFunc *reshapingConsumer(LoweredKernel &k, const LoweredFunc &f) {
  if (f.role != FuncRole::Reduction)
    return nullptr;
  LoweredFunc *consumer = nullptr;
  for (LoweredFunc &g : k.funcs) {
    if (std::find(g.reads.begin(), g.reads.end(), f.name) == g.reads.end())
      continue;
    if (consumer)
      return nullptr;
    consumer = &g;
  }
  if (!consumer || !consumer->isOutput || consumer->role != FuncRole::Define ||
      consumer->vars.size() < 2 || consumer->func.has_update_definition())
    return nullptr;
  RowsPassedThrough rows(f, *consumer);
  consumer->func.value().accept(&rows);
  return rows.ok ? consumer : nullptr;
}

// The one non-constant divisor of the Divs and Mods in e (the head size D of c / D, c % D), if any.
std::optional<H::Expr> sizeDivisor(const H::Expr &e) {
  class Finder : public HI::IRVisitor {
  public:
    std::vector<H::Expr> found;

  private:
    using HI::IRVisitor::visit;
    void note(H::Expr b) {
      // Truncating division lowers to select(D > 0, c / D, (0 - c) / (0 - D)): one divisor.
      if (const HI::Sub *neg = b.as<HI::Sub>(); neg && HI::is_const_zero(neg->a))
        b = neg->b;
      if (HI::is_const(b) || !b.type().is_int() || !b.type().is_scalar())
        return;
      for (const H::Expr &f : found)
        if (HI::equal(f, b))
          return;
      found.push_back(b);
    }
    void visit(const HI::Div *d) override {
      note(d->b);
      HI::IRVisitor::visit(d);
    }
    void visit(const HI::Mod *m) override {
      note(m->b);
      HI::IRVisitor::visit(m);
    }
  } f;
  e.accept(&f);
  if (f.found.size() != 1)
    return {};
  return f.found[0];
}

class CpuSampleRule : public ScheduleRule {
public:
  std::string name() const override { return "cpu-sample"; }
  std::optional<Match> match(const LoweredKernel &k, const Target &t) const override {
    if (t.gpu)
      return std::nullopt;
    SamplingPattern p{findSampling(k)};
    if (p.funcs.empty())
      return std::nullopt;
    return p;
  }

  // Its own loops are fixed; the Funcs outside its pattern (projections) take the generic knobs.
  std::vector<Knob> knobs(const Match &, const LoweredKernel &, const Target &t) const override {
    return genericKnobs(t);
  }

  void apply(const Match &m, LoweredKernel &k, const Target &t,
             const ScheduleParams &params) const override {
    std::vector<LoweredFunc *> sampling, homes;
    for (FuncIndex f : std::get<SamplingPattern>(m).funcs)
      sampling.push_back(&k.funcs[f]);
    for (LoweredFunc *s : sampling)
      homes.push_back(s->isOutput ? nullptr : reshapingConsumer(k, *s));
    for (size_t i = 0; i < homes.size();
         ++i) // a consumer of two samplings is scheduled once: neither lives in it
      for (size_t j = 0; j < homes.size(); ++j)
        if (i != j && homes[i] && homes[i] == homes[j])
          homes[i] = homes[j] = nullptr;
    for (LoweredFunc &f : k.funcs) {
      bool mine = std::find(sampling.begin(), sampling.end(), &f) != sampling.end() ||
                  std::find(homes.begin(), homes.end(), &f) != homes.end();
      if (!mine)
        scheduleGenericFunc(f, t, params, &k);
    }
    const int vec = t.floatLanes;
    // Channels per vector: two native vectors (32 floats with AVX-512) cover a Deformable DETR
    // head (D = 32) at once, so a point's coordinates, bounds and weights are computed once and
    // its four corners are two contiguous loads each (70 ms against 101 ms with 16-wide vectors).
    const int width = 2 * vec;
    // Rows (every index but the channel, fused: (b, q, m)) per parallel task. The time was flat
    // from 8 to 512 (34-37 ms of main-thread CPU with two threads); 64 rows are 8 queries of 8
    // heads, 2.5k tasks on the encoder's shapes, plenty to balance 2-16 cores.
    const int grain = 64;
    // The same for a consumer's rows (a query of o(b, q, m*D + d) holds all M heads): 8 queries.
    const int homeGrain = 8;
    for (size_t si = 0; si < sampling.size(); ++si) {
      LoweredFunc &f = *sampling[si];
      // Rows (every index but the innermost) fused into one loop: (b, q, m) for the sum. With a
      // consumer to live in, its tasks carry the parallelism and the sum is computed per task.
      LoweredFunc *home = homes[si];
      const size_t n = f.vars.size();
      H::Var d = f.vars[n - 1];
      H::Var ro(f.name + "_ro"), ri(f.name + "_ri"), dOut(f.name + "_do"), dIn(f.name + "_di");
      // Queries in order with all heads of a query together: neighbouring queries sample
      // neighbouring pixels, and a pixel's heads share its pages (value is [b, s, m, d]). Heads
      // outside the queries (137 ms above) make the loc, aw and output streams strided.
      auto rows = [&](H::Stage st) {
        if (home)
          return; // per task of the consumer: (b, q, m) in their natural order
        H::VarOrRVar row = f.vars[n - 2];
        for (int i = (int)n - 3; i >= 0; --i) {
          H::Var fused(f.name + "_row" + std::to_string(i));
          st.fuse(row, f.vars[i], fused);
          row = fused;
        }
        st.split(row, ro, ri, grain, H::TailStrategy::GuardWithIf).parallel(ro);
      };
      if (home) {
        // The consumer's rows (q of o(b, q, c)) split into parallel tasks; the indices outside
        // (b) stay serial loops: fusing them would make the sum's region per task a division
        // and remainder that bounds inference widens to every query.
        H::Func &h = home->func;
        const size_t hn = home->vars.size();
        H::Var c = home->vars[hn - 1];
        H::Var hro(home->name + "_ro"), hri(home->name + "_ri"), co(home->name + "_co"),
            ci(home->name + "_ci");
        H::Stage(h)
            .split(home->vars[hn - 2], hro, hri, homeGrain, H::TailStrategy::GuardWithIf)
            .parallel(hro);
        // c / D and c % D with D a size: x86 has no vector integer division, so each lane is a
        // scalar idiv (21% of the kernel in perf, 95-102 ms with one thread). For D one, two or
        // four vectors and c starting at 0 (every call through the runtime), a specialised copy
        // divides by a constant and a block of D lanes of c is one contiguous row of the sum,
        // copied with plain vector loads (72-74 ms).
        if (std::optional<H::Expr> D = sizeDivisor(h.value())) {
          const int blks[] = {vec, 2 * vec, 4 * vec};
          std::vector<H::Expr> conds;
          for (int blk : blks)
            conds.push_back(*D == blk && k.outputBuffer(*home).dim(0).min() == 0);
          std::vector<std::optional<H::Stage>> s = specializeFor(h, conds, t);
          for (size_t i = 0; i < s.size(); ++i)
            if (s[i])
              s[i]->split(c, co, ci, blks[i]).vectorize(ci);
        }
        H::Stage(h).vectorize(c, vec, H::TailStrategy::GuardWithIf);
        f.func.compute_at(home->func, hro);
      } else if (!f.isOutput) {
        // Materialised: a sum has to be, and a pointwise sample inlined into a contraction over
        // its channels would be recomputed for every output channel of the contraction.
        f.func.compute_root();
      }
      if (f.role == FuncRole::Define) {
        H::Stage st(f.func);
        st.vectorize(d, width, H::TailStrategy::GuardWithIf);
        rows(st);
        continue;
      }
      H::Stage init(f.func);
      init.vectorize(d, vec, H::TailStrategy::GuardWithIf);
      rows(init);
      // The point loops inside the channel block, in the algorithm's order (so the sum is
      // added up exactly as under every other schedule); the block's accumulators can stay in
      // registers across them (LLVM keeps the two vectors there: one store per row and block).
      H::Stage upd = f.func.update();
      upd.split(d, dOut, dIn, width, H::TailStrategy::GuardWithIf);
      std::vector<H::VarOrRVar> order{dIn};
      for (const H::RVar &r : f.rvars)
        order.push_back(r);
      order.push_back(dOut);
      upd.reorder(order).vectorize(dIn);
      rows(upd);
    }
  }
};

} // namespace

std::unique_ptr<ScheduleRule> makeCpuSampleRule() { return std::make_unique<CpuSampleRule>(); }

} // namespace attnc
