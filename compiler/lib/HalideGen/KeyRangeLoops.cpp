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

  // Fails on anything that could be observable from an iteration outside the bounds.
  bool scan(const HI::Stmt &s, std::vector<H::Expr> &lo, std::vector<H::Expr> &hi) {
    if (!ok_ || !s.defined())
      return ok_;
    if (const auto *l = s.as<HI::LetStmt>()) {
      // A let that is the loop variable plus an invariant (a rebased loop) names it too.
      if (std::optional<H::Expr> off = offsetOf(l->value))
        offsets_[l->name] = *off;
      local_.insert(l->name);
      return scan(l->body, lo, hi);
    }
    if (const auto *f = s.as<HI::For>()) {
      local_.insert(f->name);
      return scan(f->body, lo, hi);
    }
    if (const auto *b = s.as<HI::Block>())
      return scan(b->first, lo, hi) && scan(b->rest, lo, hi);
    if (const auto *a = s.as<HI::Allocate>()) {
      inner_.insert(a->name);
      return scan(a->body, lo, hi);
    }
    if (const auto *i = s.as<HI::IfThenElse>()) {
      std::vector<H::Expr> lo2 = lo, hi2 = hi;
      bounds(i->condition, lo2, hi2);
      return scan(i->then_case, lo2, hi2) && scan(i->else_case, lo, hi);
    }
    if (const auto *st = s.as<HI::Store>()) {
      stored_.insert(st->name);
      if (inner_.count(st->name))
        return ok_;
      if (lo.empty() || hi.empty())
        return ok_ = false;
      sites_.push_back({lo, hi});
      return ok_;
    }
    if (const auto *pc = s.as<HI::ProducerConsumer>())
      return scan(pc->body, lo, hi);
    if (const auto *e = s.as<HI::Evaluate>())
      return ok_ = ok_ && HI::is_pure(e->value);
    if (s.as<HI::Free>() || s.as<HI::Prefetch>())
      return ok_;
    if (const auto *a = s.as<HI::Atomic>())
      return scan(a->body, lo, hi);
    if (const auto *h = s.as<HI::HoistedStorage>())
      return scan(h->body, lo, hi);
    // An assert inside the loop checks the iteration's own work (a tile buffer's storage bound
    // when the tile's key range is data-dependent): a dropped iteration has none to check.
    if (s.as<HI::AssertStmt>())
      return ok_;
    return ok_ = false; // provides, forks, acquires: left alone
  }

  // The union of the stores' ranges, or nothing when the loop cannot be bounded.
  std::optional<std::pair<H::Expr, H::Expr>> range() const {
    if (!ok_ || sites_.empty())
      return std::nullopt;
    H::Expr lo, hi;
    for (const auto &[l, h] : sites_) {
      H::Expr a = maxOf(l), b = minOf(h);
      lo = lo.defined() ? H::min(lo, a) : a;
      hi = hi.defined() ? H::max(hi, b) : b;
    }
    // A bound read from a buffer the loop writes would not be invariant.
    for (const H::Expr &e : {lo, hi})
      if (readsAny(e, stored_))
        return std::nullopt;
    return std::make_pair(HI::simplify(lo), HI::simplify(hi));
  }

private:
  bool ok_ = true;
  std::map<std::string, H::Expr> offsets_; // names equal to the loop variable plus an offset
  std::set<std::string> local_, inner_, stored_;
  std::vector<std::pair<std::vector<H::Expr>, std::vector<H::Expr>>> sites_;

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
    std::vector<H::Expr> lo, hi;
    scan.scan(f->body, lo, hi);
    std::optional<std::pair<H::Expr, H::Expr>> r = scan.range();
    if (!r)
      return s;
    // The extent stays at most the old one in a form whose constant bound attnc::planWork
    // finds (min of the old extent and the range's).
    std::string mn = f->name + ".range_min", ex = f->name + ".range_extent";
    H::Expr lo2 = H::max(f->min, r->first);
    H::Expr end = H::min(f->min + f->extent, r->second);
    H::Expr lov = HI::Variable::make(H::Int(32), mn);
    HI::Stmt loop = HI::For::make(f->name, lov, HI::Variable::make(H::Int(32), ex), f->for_type,
                                  f->partition_policy, f->device_api, f->body);
    loop = HI::LetStmt::make(ex, H::min(f->extent, H::max(end - lov, 0)), loop);
    return HI::LetStmt::make(mn, lo2, loop);
  }
};

} // namespace

void boundKeyRangeLoops(H::Pipeline &p, const std::vector<std::string> &loops) {
  p.add_custom_lowering_pass(new KeyRangeLoops(std::set<std::string>(loops.begin(), loops.end())));
}

} // namespace attnc
