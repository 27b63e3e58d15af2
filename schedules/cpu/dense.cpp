// CPU schedule for dense attention: o = sum_j softmax_j(s) * v with s a contraction over d.
#include "attnc/Schedule.h"

#include <algorithm>

namespace attnc {
namespace {

namespace H = Halide;

// The Funcs of one dense attention pattern, found by role, not by name.
struct DensePattern {
  LoweredFunc* out = nullptr;   // o(..., i, e) = sum_j p(..., i, j) * v(..., j, e)
  LoweredFunc* score = nullptr; // s__sum*(..., i, j) = sum_d q(..., i, d) * k(..., j, d)
  std::vector<LoweredFunc*> softmax; // score, max, exp, sum, p
  std::vector<LoweredFunc*> inlined; // pointwise Funcs between the contraction and the softmax
  std::string keyInput;              // the input read along the softmax axis inside `score`
};

// Names of the kernel inputs read with `var` somewhere in their coordinates. Halide reads an
// ImageParam `k` through an implicit Func named `k_im`.
class InputsUsingVar : public H::Internal::IRVisitor {
public:
  InputsUsingVar(const LoweredKernel& k, std::string var) : k_(k), var_(std::move(var)) {}
  std::vector<std::string> found;

private:
  using H::Internal::IRVisitor::visit;
  void visit(const H::Internal::Call* c) override {
    for (const KernelParam& p : k_.inputs) {
      if (c->name != p.name && c->name != p.name + "_im") continue;
      for (const H::Expr& a : c->args)
        if (H::Internal::expr_uses_var(a, var_)) {
          found.push_back(p.name);
          break;
        }
    }
    H::Internal::IRVisitor::visit(c);
  }
  const LoweredKernel& k_;
  std::string var_;
};

bool findPattern(LoweredKernel& k, DensePattern* pat) {
  for (LoweredFunc& o : k.funcs) {
    if (!o.isOutput || o.role != FuncRole::Reduction || o.reduceKind != "sum" || o.rvars.size() != 1 || o.vars.size() < 2)
      continue;
    for (const std::string& r : o.reads) {
      LoweredFunc* p = k.find(r);
      if (!p || p->role != FuncRole::Softmax || p->softmaxAxes.size() != 1) continue;
      if (p->softmaxAxes[0] != (int)p->vars.size() - 1 || p->vars.size() != o.vars.size()) continue;
      DensePattern d;
      d.out = &o;
      for (LoweredFunc& f : k.funcs)
        if (f.definition == p->definition) d.softmax.push_back(&f);
      // Walk from the softmax scores through pointwise definitions to the contraction.
      LoweredFunc* cur = k.find(p->definition + "__score");
      for (int depth = 0; cur && depth < 8 && !d.score; ++depth) {
        LoweredFunc* next = nullptr;
        for (const std::string& rn : cur->reads) {
          LoweredFunc* f = k.find(rn);
          if (!f) continue;
          if (f->role == FuncRole::Reduction && f->reduceKind == "sum" && f->rvars.size() == 1 &&
              f->vars.size() == p->vars.size() && !f->isOutput) {
            d.score = f;
            break;
          }
          if (f->role == FuncRole::Define && !f->isOutput) next = f;
        }
        if (!d.score && next) d.inlined.push_back(next);
        cur = next;
      }
      if (!d.score) continue;
      // Every Func the rule places inside the query tile must be consumed only there.
      std::vector<const LoweredFunc*> members(d.softmax.begin(), d.softmax.end());
      members.push_back(d.out);
      members.push_back(d.score);
      members.insert(members.end(), d.inlined.begin(), d.inlined.end());
      auto isMember = [&](const LoweredFunc* f) { return std::find(members.begin(), members.end(), f) != members.end(); };
      bool private_ = true;
      for (const LoweredFunc* m : members) {
        if (m == d.out) continue;
        if (m->isOutput) private_ = false;
        for (const LoweredFunc& f : k.funcs)
          if (!isMember(&f) && std::find(f.reads.begin(), f.reads.end(), m->name) != f.reads.end()) private_ = false;
      }
      if (!private_) continue;
      InputsUsingVar v(k, d.score->vars.back().name());
      d.score->func.update_value(0).accept(&v);
      if (v.found.size() != 1) continue;
      d.keyInput = v.found[0];
      *pat = d;
      return true;
    }
  }
  return false;
}

class CpuDenseRule : public ScheduleRule {
public:
  std::string name() const override { return "cpu-dense"; }
  int priority() const override { return 10; }

  bool applies(const LoweredKernel& k, const H::Target& t) const override {
    DensePattern p;
    return !t.has_gpu_feature() && findPattern(const_cast<LoweredKernel&>(k), &p);
  }

  void apply(LoweredKernel& k, const H::Target& t) const override {
    DensePattern pat;
    findPattern(k, &pat);
    const int vec = t.natural_vector_size<float>();
    // Query rows per tile. 4 rows x 4 vectors of keys keeps 16 accumulators in registers for the
    // score contraction (AVX2 has 16 ymm registers; AVX-512 has 32 and could take 8 rows).
    const int rows = 4;
    const int keyBlock = 4 * vec;

    LoweredFunc& O = *pat.out;
    const size_t n = O.vars.size();
    H::Var i = O.vars[n - 2], e = O.vars[n - 1];
    H::RVar j = O.rvars[0];
    H::Var io("io"), ii("ii"), eo("eo"), ei("ei"), batch("batch");

    // Batch-like outer indices (b, h, ...) fuse into one parallel loop: B*H heads are plenty of
    // parallelism for a 2-16 core CPU and keep each head's K/V in one core's cache.
    auto fuseBatch = [&](H::Stage st) {
      if (n == 2) return;
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
    init.split(i, io, ii, rows, H::TailStrategy::GuardWithIf).vectorize(e, vec, H::TailStrategy::GuardWithIf);
    fuseBatch(init);
    H::Stage upd = o.update();
    upd.split(i, io, ii, rows, H::TailStrategy::GuardWithIf)
        .split(e, eo, ei, vec, H::TailStrategy::GuardWithIf)
        .reorder(ei, ii, j, eo, io)
        .vectorize(ei)
        .unroll(ii);
    fuseBatch(upd);
    H::LoopLevel tile(o, io);

    // Scores for one tile of query rows against every key.
    LoweredFunc& S = *pat.score;
    H::Var si = S.vars[n - 2], sj = S.vars[n - 1];
    H::RVar d = S.rvars[0];
    H::Var jo("jo"), ji("ji");
    S.func.compute_at(tile).vectorize(sj, vec, H::TailStrategy::GuardWithIf);
    S.func.update()
        .split(sj, jo, ji, keyBlock, H::TailStrategy::GuardWithIf)
        .reorder(ji, si, d, jo)
        .vectorize(ji, vec)
        .unroll(si);
    // K is read along the key axis; a per-head transposed copy makes those reads contiguous.
    for (KernelParam& in : k.inputs) {
      if (in.name != pat.keyInput) continue;
      H::Func kT = in.param.in(S.func);
      std::vector<H::Var> a = kT.args();
      std::swap(a[0], a[1]);
      kT.compute_at(o, n > 2 ? batch : io).reorder_storage(a).reorder(std::vector<H::VarOrRVar>(a.begin(), a.end())).vectorize(a[0], vec, H::TailStrategy::GuardWithIf);
    }

    for (LoweredFunc* f : pat.softmax) {
      switch (f->role) {
      case FuncRole::SoftmaxMax:
      case FuncRole::SoftmaxSum: f->func.compute_at(tile); break;
      case FuncRole::SoftmaxExp:
        f->func.compute_at(tile).vectorize(f->vars.back(), vec, H::TailStrategy::GuardWithIf);
        break;
      default: break; // scores and probabilities are inlined into their consumers
      }
    }
  }
};

} // namespace

std::unique_ptr<ScheduleRule> makeCpuDenseRule() { return std::make_unique<CpuDenseRule>(); }

} // namespace attnc
