// A lowering pass that bounds an online softmax's key-tile loops by their data-dependent key ranges.
//
// Under a key padding mask the state's tile updates carry a domain predicate over `<o>__tranges`
// or `<o>__tkeys` (OnlineSoftmax.cpp). Halide (21) neither lifts a predicate that calls a Func out
// of the update's inner loops nor uses it to bound the loop or the Funcs computed in it, so every
// tile's score, exp and sum Funcs were computed and only the state's store was skipped:
// padding_mask at 2/3 visible keys took 1.8x sdpa's time (attn-bench, Zen 4), not 2/3 of it.
// This pass finds, in each such loop, the loop-invariant bounds that every store the loop makes
// to a buffer outliving an iteration sits under (`lo <= t`, `t < hi`, from the enclosing ifs),
// and runs the loop over [max(min, lo), min(end, hi)) only. The iterations it drops store
// nothing that outlives them, so results are unchanged; the ifs stay (they now always hold).
// A loop whose body does anything else outside those ifs (an impure call, a store elsewhere) is
// left as it was; asserts inside it check only the iteration's own work.
// A condition that is one of two ranges (`a <= t < b || c <= t < d`: a query group's partly
// visible tiles before and after its fully visible ones, OnlineSoftmax.cpp) becomes two loops,
// one per range, the second skipping the first's iterations, so every iteration that stores runs
// once. The iterations may then run out of order; the loops named here are online-softmax state
// updates, whose steps commute (up to rounding).
#include "attnc/HalideGen.h"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace attnc {
namespace {

namespace H = Halide;
namespace HI = Halide::Internal;

// What a loop body needs for its loop to be bounded: per store to an outer buffer, the bounds
// on the loop variable the enclosing ifs impose.
class RangeScan {
public:
  explicit RangeScan(const std::string &var) { offsets_[var] = H::Expr(0); }

  // A store's bounds on the loop variable: lower and upper bounds that all hold.
  struct Range {
    std::vector<H::Expr> lo, hi;
  };
  // Fails on anything that could be observable from an iteration outside the bounds; `alts`
  // are the bounds the enclosing ifs impose (a store runs where any of them holds).
  bool scan(const HI::Stmt &s, const std::vector<Range> &alts) {
    if (!ok_ || !s.defined())
      return ok_;
    if (const auto *l = s.as<HI::LetStmt>()) {
      // A let that is the loop variable plus an invariant (a rebased loop) names it too.
      if (std::optional<H::Expr> off = offsetOf(l->value))
        offsets_[l->name] = *off;
      local_.insert(l->name);
      return scan(l->body, alts);
    }
    if (const auto *f = s.as<HI::For>()) {
      local_.insert(f->name);
      return scan(f->body, alts);
    }
    if (const auto *b = s.as<HI::Block>())
      return scan(b->first, alts) && scan(b->rest, alts);
    if (const auto *a = s.as<HI::Allocate>()) {
      inner_.insert(a->name);
      return scan(a->body, alts);
    }
    if (const auto *i = s.as<HI::IfThenElse>())
      return scan(i->then_case, within(alts, i->condition)) && scan(i->else_case, alts);
    if (const auto *st = s.as<HI::Store>()) {
      stored_.insert(st->name);
      if (inner_.count(st->name))
        return ok_;
      for (const Range &r : alts)
        if (r.lo.empty() || r.hi.empty())
          return ok_ = false;
      sites_.push_back(alts);
      return ok_;
    }
    if (const auto *pc = s.as<HI::ProducerConsumer>())
      return scan(pc->body, alts);
    if (const auto *e = s.as<HI::Evaluate>())
      return ok_ = ok_ && (HI::is_pure(e->value) || profilerCall(e->value));
    if (s.as<HI::Free>() || s.as<HI::Prefetch>())
      return ok_;
    if (const auto *a = s.as<HI::Atomic>())
      return scan(a->body, alts);
    if (const auto *h = s.as<HI::HoistedStorage>())
      return scan(h->body, alts);
    // An assert inside the loop checks the iteration's own work (a tile buffer's storage bound
    // when the tile's key range is data-dependent): a dropped iteration has none to check.
    if (s.as<HI::AssertStmt>())
      return ok_;
    return ok_ = false; // provides, forks, acquires: left alone
  }

  // The loop's ranges: one, the union of the stores' ranges, or two where the stores run under
  // two alternatives (the k-th range the union of the stores' k-th); nothing when the loop
  // cannot be bounded.
  std::vector<std::pair<H::Expr, H::Expr>> ranges() const {
    if (!ok_ || sites_.empty())
      return {};
    size_t n = 1;
    for (const std::vector<Range> &site : sites_)
      n = std::max(n, site.size());
    std::vector<std::pair<H::Expr, H::Expr>> out;
    for (size_t k = 0; k < n; ++k) {
      H::Expr lo, hi;
      for (const std::vector<Range> &site : sites_) {
        const Range &r = site[std::min(k, site.size() - 1)];
        H::Expr a = maxOf(r.lo), b = minOf(r.hi);
        lo = lo.defined() ? H::min(lo, a) : a;
        hi = hi.defined() ? H::max(hi, b) : b;
      }
      // A bound read from a buffer the loop writes would not be invariant.
      for (const H::Expr &e : {lo, hi})
        if (readsAny(e, stored_))
          return {};
      out.push_back({HI::simplify(lo), HI::simplify(hi)});
    }
    return out;
  }

private:
  bool ok_ = true;
  std::map<std::string, H::Expr> offsets_; // names equal to the loop variable plus an offset
  std::set<std::string> local_, inner_, stored_;
  std::vector<std::vector<Range>> sites_; // per store, its alternatives

  // A call the profiler injects (`--target=host-profile`: which Func runs, its allocations):
  // a dropped iteration only leaves it out of the profile. Left alone, such a loop ran every
  // tile, and a paged decode read the page table's -1 entries past each length.
  static bool profilerCall(const H::Expr &e) {
    const auto *c = e.as<HI::Call>();
    return c && c->name.rfind("halide_profiler_", 0) == 0;
  }

  static H::Expr maxOf(const std::vector<H::Expr> &v) {
    H::Expr r = v[0];
    for (size_t i = 1; i < v.size(); ++i)
      r = H::max(r, v[i]);
    return r;
  }
  static H::Expr minOf(const std::vector<H::Expr> &v) {
    H::Expr r = v[0];
    for (size_t i = 1; i < v.size(); ++i)
      r = H::min(r, v[i]);
    return r;
  }

  static bool readsAny(const H::Expr &e, const std::set<std::string> &buffers) {
    struct Reads : HI::IRGraphVisitor {
      const std::set<std::string> &buffers;
      bool found = false;
      explicit Reads(const std::set<std::string> &b) : buffers(b) {}
      using HI::IRGraphVisitor::visit;
      void visit(const HI::Load *l) override {
        found = found || buffers.count(l->name);
        HI::IRGraphVisitor::visit(l);
      }
    } r(buffers);
    e.accept(&r);
    return r.found;
  }

  // Uses no name the loop body defines (nor the loop variable).
  bool invariant(const H::Expr &e) const {
    struct Uses : HI::IRGraphVisitor {
      const RangeScan &scan;
      bool found = false;
      explicit Uses(const RangeScan &s) : scan(s) {}
      using HI::IRGraphVisitor::visit;
      void visit(const HI::Variable *v) override {
        found = found || scan.local_.count(v->name) || scan.offsets_.count(v->name);
      }
    } u(*this);
    e.accept(&u);
    return !u.found && e.type() == H::Int(32);
  }

  // `t + c` for the loop variable t (or a name for t plus an offset) and an invariant c.
  std::optional<H::Expr> offsetOf(const H::Expr &e) const {
    if (const auto *v = e.as<HI::Variable>())
      if (auto it = offsets_.find(v->name); it != offsets_.end())
        return it->second;
    if (const auto *a = e.as<HI::Add>()) {
      if (std::optional<H::Expr> o = offsetOf(a->a); o && invariant(a->b))
        return HI::simplify(*o + a->b);
      if (std::optional<H::Expr> o = offsetOf(a->b); o && invariant(a->a))
        return HI::simplify(*o + a->a);
    }
    return std::nullopt;
  }

  static H::Expr unwrap(const H::Expr &e) {
    if (const auto *c = e.as<HI::Call>();
        c && (c->is_intrinsic(HI::Call::likely) || c->is_intrinsic(HI::Call::likely_if_innermost)))
      return unwrap(c->args[0]);
    return e;
  }

  // `alts` narrowed by the condition `c0`: its conjuncts' bounds added to each, and a disjunction
  // of two bounded ranges (at most two alternatives in all) splitting each in two.
  std::vector<Range> within(const std::vector<Range> &alts, const H::Expr &c0) const {
    // (Lets CSE put into the condition are substituted: the bounds are then read from it whole.)
    H::Expr c = unwrap(c0.as<HI::Let>() ? HI::substitute_in_all_lets(c0) : c0);
    if (const auto *a = c.as<HI::And>())
      return within(within(alts, a->a), a->b);
    if (const auto *o = c.as<HI::Or>(); o && alts.size() == 1) {
      std::vector<Range> l = within(alts, o->a), r = within(alts, o->b);
      if (l.size() == 1 && r.size() == 1 && l[0].lo.size() > alts[0].lo.size() &&
          l[0].hi.size() > alts[0].hi.size() && r[0].lo.size() > alts[0].lo.size() &&
          r[0].hi.size() > alts[0].hi.size())
        return {l[0], r[0]};
      return alts; // (an unbounded side: the disjunction bounds nothing)
    }
    std::vector<Range> out = alts;
    for (Range &r : out)
      bounds(c, r.lo, r.hi);
    return out;
  }

  // The conjuncts of `c` that bound the loop variable by an invariant.
  void bounds(const H::Expr &c0, std::vector<H::Expr> &lo, std::vector<H::Expr> &hi) const {
    H::Expr c = unwrap(c0);
    if (const auto *a = c.as<HI::And>()) {
      bounds(a->a, lo, hi);
      bounds(a->b, lo, hi);
      return;
    }
    if (c.type() != H::Bool())
      return;
    // t + off < x  <=>  t < x - off;  t + off <= x  <=>  t < x - off + 1;
    // x < t + off  <=>  t >= x - off + 1;  x <= t + off  <=>  t >= x - off.
    auto compare = [&](const H::Expr &a, const H::Expr &b, bool strict) {
      if (std::optional<H::Expr> o = offsetOf(a); o && invariant(b))
        hi.push_back(strict ? b - *o : b - *o + 1);
      else if (std::optional<H::Expr> o = offsetOf(b); o && invariant(a))
        lo.push_back(strict ? a - *o + 1 : a - *o);
    };
    if (const auto *lt = c.as<HI::LT>())
      compare(lt->a, lt->b, true);
    else if (const auto *le = c.as<HI::LE>())
      compare(le->a, le->b, false);
    else if (const auto *gt = c.as<HI::GT>())
      compare(gt->b, gt->a, true);
    else if (const auto *ge = c.as<HI::GE>())
      compare(ge->b, ge->a, false);
  }
};

class KeyRangeLoops : public HI::IRMutator {
public:
  explicit KeyRangeLoops(std::set<std::string> loops) : loops_(std::move(loops)) {}

private:
  std::set<std::string> loops_;
  using HI::IRMutator::visit;

  HI::Stmt visit(const HI::For *op) override {
    HI::Stmt s = HI::IRMutator::visit(op);
    const auto *f = s.as<HI::For>();
    if (!f || !loops_.count(f->name) || f->for_type != HI::ForType::Serial)
      return s;
    RangeScan scan(f->name);
    scan.scan(f->body, {RangeScan::Range{}});
    std::vector<std::pair<H::Expr, H::Expr>> r = scan.ranges();
    if (r.empty())
      return s;
    HI::Stmt out = bounded(*f, r[0], f->body, "");
    if (r.size() == 2) {
      // The second range's loop skips what the first ran.
      H::Expr t = HI::Variable::make(H::Int(32), f->name);
      HI::Stmt body = HI::IfThenElse::make(!(t >= r[0].first && t < r[0].second), f->body);
      out = HI::Block::make(out, bounded(*f, r[1], body, ".second"));
    }
    return out;
  }

  // The loop `f` over [lo, hi) within its own range, with `body`.
  static HI::Stmt bounded(const HI::For &f, const std::pair<H::Expr, H::Expr> &r, HI::Stmt body,
                          const std::string &tag) {
    // The extent stays at most the old one in a form whose constant bound attnc::planWork
    // finds (min of the old extent and the range's).
    std::string mn = f.name + tag + ".range_min", ex = f.name + tag + ".range_extent";
    H::Expr lo2 = H::max(f.min, r.first);
    H::Expr end = H::min(f.min + f.extent, r.second);
    H::Expr lov = HI::Variable::make(H::Int(32), mn);
    HI::Stmt loop = HI::For::make(f.name, lov, HI::Variable::make(H::Int(32), ex), f.for_type,
                                  f.partition_policy, f.device_api, body);
    loop = HI::LetStmt::make(ex, H::min(f.extent, H::max(end - lov, 0)), loop);
    return HI::LetStmt::make(mn, lo2, loop);
  }
};

} // namespace

void boundKeyRangeLoops(H::Pipeline &p, const std::vector<std::string> &loops) {
  p.add_custom_lowering_pass(new KeyRangeLoops(std::set<std::string>(loops.begin(), loops.end())));
}

} // namespace attnc
