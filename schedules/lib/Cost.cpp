// Counts the arithmetic a lowered Halide pipeline executes, with the sizes bound (Cost.h).
//
// The Stmt is taken where Halide runs custom lowering passes: after bounds inference, loop
// partitioning and vectorization, before parallel loops become closures and GPU loops kernels, so
// one walk sees every loop with its extent. Loop extents are evaluated with the buffers' shapes
// bound; a loop whose body's control flow (inner loop bounds, conditions) depends on its variable,
// such as a causal mask's key tiles per query tile, is summed over its iterations, exactly up to
// 32 of them and by the trapezoid rule over 9 samples beyond (work that varies linearly with the
// variable, as triangular masks make it, is then still exact).
#include "attnc/Cost.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace attnc {
namespace {

namespace H = Halide;
namespace HI = Halide::Internal;

using Env = std::map<std::string, int64_t>;

// The shape of each buffer of the pipeline, Halide's dimension order (innermost first).
using Shapes = std::map<std::string, std::vector<int64_t>>;

// Integer value of `e` under `env`, or nothing (a load, an unbound name, a float).
class IntEval {
public:
  IntEval(const Env &env, const Shapes &shapes) : env_(env), shapes_(shapes) {}

  std::optional<int64_t> operator()(const H::Expr &e) {
    if (!e.defined() || !(e.type().is_int() || e.type().is_uint() || e.type().is_bool()) ||
        e.type().is_vector())
      return std::nullopt;
    return eval(e);
  }

private:
  const Env &env_;
  const Shapes &shapes_;
  Env lets_;

  static int64_t div(int64_t a, int64_t b) {
    if (b == 0)
      return 0;
    int64_t q = a / b, r = a % b;
    if (r < 0)
      q += b > 0 ? -1 : 1; // Euclidean, as Halide divides
    return q;
  }
  static int64_t mod(int64_t a, int64_t b) {
    if (b == 0)
      return 0;
    int64_t r = a % b;
    return r < 0 ? r + std::llabs(b) : r;
  }

  std::optional<int64_t> buffer(const HI::Call *c) {
    if (c->args.empty())
      return std::nullopt;
    const auto *v = c->args[0].as<HI::Variable>();
    if (!v)
      return std::nullopt;
    std::string name = v->name;
    if (size_t dot = name.rfind(".buffer"); dot != std::string::npos)
      name = name.substr(0, dot);
    auto it = shapes_.find(name);
    if (it == shapes_.end())
      return std::nullopt;
    const std::vector<int64_t> &dims = it->second;
    if (c->name == "_halide_buffer_get_dimensions")
      return (int64_t)dims.size();
    std::optional<int64_t> d = c->args.size() > 1 ? eval(c->args[1]) : std::nullopt;
    if (!d || *d < 0 || *d >= (int64_t)dims.size())
      return std::nullopt;
    if (c->name == "_halide_buffer_get_min")
      return 0;
    if (c->name == "_halide_buffer_get_extent")
      return dims[*d];
    if (c->name == "_halide_buffer_get_max")
      return dims[*d] - 1;
    if (c->name == "_halide_buffer_get_stride") {
      int64_t s = 1;
      for (int64_t i = 0; i < *d; ++i)
        s *= std::max<int64_t>(dims[i], 1);
      return s;
    }
    return std::nullopt;
  }

  std::optional<int64_t> eval(const H::Expr &e) {
    auto bin = [&](const H::Expr &a, const H::Expr &b,
                   const std::function<int64_t(int64_t, int64_t)> &f) -> std::optional<int64_t> {
      std::optional<int64_t> x = eval(a), y = eval(b);
      if (!x || !y)
        return std::nullopt;
      return f(*x, *y);
    };
    if (const auto *i = e.as<HI::IntImm>())
      return i->value;
    if (const auto *u = e.as<HI::UIntImm>())
      return (int64_t)u->value;
    if (const auto *v = e.as<HI::Variable>()) {
      if (auto it = lets_.find(v->name); it != lets_.end())
        return it->second;
      if (auto it = env_.find(v->name); it != env_.end())
        return it->second;
      return std::nullopt;
    }
    if (const auto *c = e.as<HI::Cast>()) {
      if (!(c->value.type().is_int() || c->value.type().is_uint() || c->value.type().is_bool()))
        return std::nullopt;
      return eval(c->value);
    }
    if (const auto *o = e.as<HI::Add>())
      return bin(o->a, o->b, [](int64_t a, int64_t b) { return a + b; });
    if (const auto *o = e.as<HI::Sub>())
      return bin(o->a, o->b, [](int64_t a, int64_t b) { return a - b; });
    if (const auto *o = e.as<HI::Mul>())
      return bin(o->a, o->b, [](int64_t a, int64_t b) { return a * b; });
    if (const auto *o = e.as<HI::Div>())
      return bin(o->a, o->b, div);
    if (const auto *o = e.as<HI::Mod>())
      return bin(o->a, o->b, mod);
    if (const auto *o = e.as<HI::Min>())
      return bin(o->a, o->b, [](int64_t a, int64_t b) { return std::min(a, b); });
    if (const auto *o = e.as<HI::Max>())
      return bin(o->a, o->b, [](int64_t a, int64_t b) { return std::max(a, b); });
    if (const auto *o = e.as<HI::EQ>())
      return bin(o->a, o->b, [](int64_t a, int64_t b) -> int64_t { return a == b; });
    if (const auto *o = e.as<HI::NE>())
      return bin(o->a, o->b, [](int64_t a, int64_t b) -> int64_t { return a != b; });
    if (const auto *o = e.as<HI::LT>())
      return bin(o->a, o->b, [](int64_t a, int64_t b) -> int64_t { return a < b; });
    if (const auto *o = e.as<HI::LE>())
      return bin(o->a, o->b, [](int64_t a, int64_t b) -> int64_t { return a <= b; });
    if (const auto *o = e.as<HI::GT>())
      return bin(o->a, o->b, [](int64_t a, int64_t b) -> int64_t { return a > b; });
    if (const auto *o = e.as<HI::GE>())
      return bin(o->a, o->b, [](int64_t a, int64_t b) -> int64_t { return a >= b; });
    if (const auto *o = e.as<HI::And>()) {
      std::optional<int64_t> x = eval(o->a);
      if (x && !*x)
        return 0;
      std::optional<int64_t> y = eval(o->b);
      if (y && !*y)
        return 0;
      if (!x || !y)
        return std::nullopt;
      return 1;
    }
    if (const auto *o = e.as<HI::Or>()) {
      std::optional<int64_t> x = eval(o->a);
      if (x && *x)
        return 1;
      std::optional<int64_t> y = eval(o->b);
      if (y && *y)
        return 1;
      if (!x || !y)
        return std::nullopt;
      return 0;
    }
    if (const auto *o = e.as<HI::Not>()) {
      std::optional<int64_t> x = eval(o->a);
      return x ? std::optional<int64_t>(!*x) : std::nullopt;
    }
    if (const auto *s = e.as<HI::Select>()) {
      std::optional<int64_t> c = eval(s->condition);
      if (!c)
        return std::nullopt;
      return *c ? eval(s->true_value) : eval(s->false_value);
    }
    if (const auto *l = e.as<HI::Let>()) {
      std::optional<int64_t> v = eval(l->value);
      if (!v)
        return std::nullopt;
      std::optional<int64_t> old;
      if (auto it = lets_.find(l->name); it != lets_.end())
        old = it->second;
      lets_[l->name] = *v;
      std::optional<int64_t> r = eval(l->body);
      if (old)
        lets_[l->name] = *old;
      else
        lets_.erase(l->name);
      return r;
    }
    if (const auto *c = e.as<HI::Call>()) {
      if (c->name == "_halide_buffer_is_bounds_query")
        return 0; // a call with buffers, not a bounds query
      if (c->name.rfind("_halide_buffer_get_", 0) == 0)
        return buffer(c);
      // Markers around a value: likely, promise_clamped and friends.
      if ((c->is_intrinsic(HI::Call::likely) || c->is_intrinsic(HI::Call::likely_if_innermost) ||
           c->is_intrinsic(HI::Call::promise_clamped) ||
           c->is_intrinsic(HI::Call::unsafe_promise_clamped)) &&
          !c->args.empty())
        return eval(c->args[0]);
      if (c->is_intrinsic(HI::Call::return_second) && c->args.size() == 2)
        return eval(c->args[1]);
      if (c->is_intrinsic(HI::Call::if_then_else) && c->args.size() == 3) {
        std::optional<int64_t> cond = eval(c->args[0]);
        if (!cond)
          return std::nullopt;
        return *cond ? eval(c->args[1]) : eval(c->args[2]);
      }
      return std::nullopt;
    }
    return std::nullopt;
  }
};

// The arithmetic of one expression, each operation once per lane.
class ExprWork : public HI::IRVisitor {
public:
  WorkCount w;
  using HI::IRVisitor::visit;

private:
  void arith(const H::Type &t, double n = 1) {
    if (t.is_float())
      w.flops += n * t.lanes();
  }
  void visit(const HI::Add *o) override { arith(o->type), HI::IRVisitor::visit(o); }
  void visit(const HI::Sub *o) override { arith(o->type), HI::IRVisitor::visit(o); }
  void visit(const HI::Mul *o) override { arith(o->type), HI::IRVisitor::visit(o); }
  void visit(const HI::Div *o) override { arith(o->type), HI::IRVisitor::visit(o); }
  void visit(const HI::Mod *o) override { arith(o->type), HI::IRVisitor::visit(o); }
  void visit(const HI::Min *o) override { arith(o->type), HI::IRVisitor::visit(o); }
  void visit(const HI::Max *o) override { arith(o->type), HI::IRVisitor::visit(o); }
  void visit(const HI::LT *o) override { arith(o->a.type()), HI::IRVisitor::visit(o); }
  void visit(const HI::LE *o) override { arith(o->a.type()), HI::IRVisitor::visit(o); }
  void visit(const HI::GT *o) override { arith(o->a.type()), HI::IRVisitor::visit(o); }
  void visit(const HI::GE *o) override { arith(o->a.type()), HI::IRVisitor::visit(o); }
  void visit(const HI::EQ *o) override { arith(o->a.type()), HI::IRVisitor::visit(o); }
  void visit(const HI::NE *o) override { arith(o->a.type()), HI::IRVisitor::visit(o); }
  void visit(const HI::Select *o) override { arith(o->type), HI::IRVisitor::visit(o); }
  void visit(const HI::VectorReduce *o) override {
    // A horizontal reduction of its value's lanes into its own.
    if (o->type.is_float())
      w.flops += o->value.type().lanes() - o->type.lanes();
    HI::IRVisitor::visit(o);
  }
  void visit(const HI::Load *o) override {
    w.loads += o->type.lanes();
    HI::IRVisitor::visit(o);
  }
  void visit(const HI::Call *c) override {
    if (c->is_strict_float_intrinsic())
      arith(c->args.empty() ? c->type : c->args[0].type());
    else if ((c->call_type == HI::Call::PureExtern || c->call_type == HI::Call::Extern) &&
             c->type.is_float())
      w.transcendental += c->type.lanes();
    HI::IRVisitor::visit(c);
  }
};

WorkCount &operator+=(WorkCount &a, const WorkCount &b) {
  a.flops += b.flops, a.transcendental += b.transcendental, a.loads += b.loads,
      a.stores += b.stores, a.approximate |= b.approximate;
  for (const auto &[f, w] : b.byFunc)
    a.byFunc[f] += w;
  return a;
}
WorkCount scaled(WorkCount w, double s) {
  w.flops *= s, w.transcendental *= s, w.loads *= s, w.stores *= s;
  for (auto &[f, x] : w.byFunc)
    x *= s;
  return w;
}

// Names a Stmt's control flow (loop bounds, conditions) reads, through the lets that feed them.
std::set<std::string> controlNames(const HI::Stmt &s) {
  struct Collect : HI::IRVisitor {
    std::set<std::string> control;
    std::map<std::string, std::set<std::string>> letUses;
    using HI::IRVisitor::visit;
    static std::set<std::string> names(const H::Expr &e) {
      struct Vars : HI::IRVisitor {
        std::set<std::string> out;
        using HI::IRVisitor::visit;
        void visit(const HI::Variable *v) override { out.insert(v->name); }
      } vars;
      e.accept(&vars);
      return vars.out;
    }
    void add(const H::Expr &e) {
      std::set<std::string> n = names(e);
      control.insert(n.begin(), n.end());
    }
    void visit(const HI::For *f) override {
      add(f->min), add(f->extent);
      f->body.accept(this);
    }
    void visit(const HI::IfThenElse *i) override {
      add(i->condition);
      HI::IRVisitor::visit(i);
    }
    void visit(const HI::LetStmt *l) override {
      letUses[l->name] = names(l->value);
      l->body.accept(this);
    }
  } c;
  s.accept(&c);
  // Close over the lets: a let that control flow reads makes its own inputs control.
  bool grew = true;
  while (grew) {
    grew = false;
    for (const auto &[name, uses] : c.letUses)
      if (c.control.count(name))
        for (const std::string &u : uses)
          grew |= c.control.insert(u).second;
  }
  return c.control;
}

class StmtWork {
public:
  explicit StmtWork(const Shapes &shapes) : shapes_(shapes) {}

  WorkCount cost(const HI::Stmt &s) {
    WorkCount w;
    if (!s.defined())
      return w;
    if (const auto *l = s.as<HI::LetStmt>()) {
      w += exprWork(l->value);
      std::optional<int64_t> v = IntEval(env_, shapes_)(l->value);
      std::optional<int64_t> old;
      if (auto it = env_.find(l->name); it != env_.end())
        old = it->second;
      if (v)
        env_[l->name] = *v;
      else
        env_.erase(l->name);
      w += cost(l->body);
      if (old)
        env_[l->name] = *old;
      else
        env_.erase(l->name);
      return w;
    }
    if (const auto *f = s.as<HI::For>())
      return loop(f);
    if (const auto *b = s.as<HI::Block>()) {
      w += cost(b->first);
      w += cost(b->rest);
      return w;
    }
    if (const auto *i = s.as<HI::IfThenElse>()) {
      std::optional<int64_t> c = IntEval(env_, shapes_)(i->condition);
      if (c)
        return *c ? cost(i->then_case) : cost(i->else_case);
      // A condition on data: the costlier branch.
      WorkCount a = cost(i->then_case), b = cost(i->else_case);
      WorkCount r = a.work() >= b.work() ? a : b;
      r.approximate = true;
      return r;
    }
    if (const auto *st = s.as<HI::Store>()) {
      w += exprWork(st->value);
      w.stores += st->value.type().lanes();
      // A vector loop's tail (GuardWithIf) computes all lanes and stores those its predicate
      // keeps: one vector instruction each, so the lanes it drops cost nothing more than a
      // scalar would. Only the kept lanes count, or a reduction into a single element
      // vectorized by 16 would seem to do 16 times its work.
      return scaled(w, activeFraction(st->predicate));
    }
    if (const auto *p = s.as<HI::Provide>()) {
      for (const H::Expr &v : p->values)
        w += exprWork(v), w.stores += v.type().lanes();
      return w;
    }
    if (const auto *e = s.as<HI::Evaluate>())
      return exprWork(e->value);
    if (const auto *a = s.as<HI::Allocate>())
      return cost(a->body);
    if (const auto *r = s.as<HI::Realize>())
      return cost(r->body);
    if (const auto *pc = s.as<HI::ProducerConsumer>()) {
      if (!pc->is_producer)
        return cost(pc->body);
      std::string outer = producer_;
      producer_ = pc->name;
      w = cost(pc->body);
      producer_ = outer;
      return w;
    }
    if (const auto *a = s.as<HI::Atomic>())
      return cost(a->body);
    if (const auto *fo = s.as<HI::Fork>()) {
      w += cost(fo->first);
      w += cost(fo->rest);
      return w;
    }
    if (const auto *a = s.as<HI::Acquire>())
      return cost(a->body);
    if (const auto *h = s.as<HI::HoistedStorage>())
      return cost(h->body);
    return w; // asserts, frees, prefetches: no arithmetic
  }

private:
  const Shapes &shapes_;
  Env env_;
  std::map<const HI::BaseStmtNode *, std::set<std::string>> control_;

  std::string producer_; // the Func whose values the current Stmt computes

  WorkCount exprWork(const H::Expr &e) const {
    ExprWork v;
    if (e.defined())
      e.accept(&v);
    if (v.w.work() > 0)
      v.w.byFunc[producer_] += v.w.work();
    return v.w;
  }

  // An extent the sizes do not fix (it reads data): its largest value over what the loop
  // variables and sizes bound, if that is finite.
  std::optional<int64_t> upperBound(const H::Expr &e) {
    H::Expr s = e;
    std::map<std::string, H::Expr> known;
    for (const auto &[n, v] : env_)
      known[n] = H::Expr((int)std::clamp<int64_t>(v, INT32_MIN, INT32_MAX));
    s = HI::simplify(HI::substitute(known, s));
    HI::Scope<HI::Interval> scope;
    H::Expr hi = HI::find_constant_bound(s, HI::Direction::Upper, scope);
    if (!hi.defined())
      return std::nullopt;
    std::optional<int64_t> c = HI::as_const_int(HI::simplify(hi));
    if (!c || *c > (int64_t)1 << 31)
      return std::nullopt;
    return c;
  }

  // The share of a store's lanes its predicate keeps: `ramp(base, 1, n) <= x(limit)` (or `<`),
  // as vectorizing with GuardWithIf writes it; 1 for no predicate or any other.
  double activeFraction(const H::Expr &predicate) {
    if (!predicate.defined() || HI::is_const_one(predicate))
      return 1.0;
    H::Expr a, b;
    bool strict = false;
    if (const auto *lt = predicate.as<HI::LT>())
      a = lt->a, b = lt->b, strict = true;
    else if (const auto *le = predicate.as<HI::LE>())
      a = le->a, b = le->b;
    else
      return 1.0;
    const auto *ramp = a.as<HI::Ramp>();
    const auto *bc = b.as<HI::Broadcast>();
    if (!ramp || !bc || !HI::is_const_one(ramp->stride) || ramp->lanes <= 0)
      return 1.0;
    IntEval ev(env_, shapes_);
    std::optional<int64_t> base = ev(ramp->base), limit = ev(bc->value);
    if (!base || !limit)
      return 1.0;
    int64_t kept = std::clamp<int64_t>(*limit - *base + (strict ? 0 : 1), 0, ramp->lanes);
    return (double)kept / ramp->lanes;
  }

  WorkCount loop(const HI::For *f) {
    IntEval ev(env_, shapes_);
    std::optional<int64_t> mn = ev(f->min), ext = ev(f->extent);
    bool approximate = false;
    if (!ext) {
      ext = upperBound(f->extent);
      approximate = true;
      if (!ext)
        ext = 1;
    }
    if (!mn)
      mn = 0, approximate = true;
    WorkCount w;
    if (*ext <= 0)
      return w;
    auto &ctl = control_[f->body.get()];
    if (ctl.empty())
      ctl = controlNames(f->body), ctl.insert(""); // "" marks it computed
    auto at = [&](int64_t i) {
      std::optional<int64_t> old;
      if (auto it = env_.find(f->name); it != env_.end())
        old = it->second;
      env_[f->name] = i;
      WorkCount b = cost(f->body);
      if (old)
        env_[f->name] = *old;
      else
        env_.erase(f->name);
      return b;
    };
    if (!ctl.count(f->name)) {
      w = scaled(at(*mn), (double)*ext);
    } else if (*ext <= 32) {
      for (int64_t i = 0; i < *ext; ++i)
        w += at(*mn + i);
    } else {
      // Trapezoid rule over 9 samples, first and last iterations included.
      constexpr int kSamples = 9;
      std::vector<WorkCount> s;
      std::vector<int64_t> xs;
      for (int k = 0; k < kSamples; ++k) {
        int64_t i = *mn + (*ext - 1) * k / (kSamples - 1);
        xs.push_back(i);
        s.push_back(at(i));
      }
      for (int k = 0; k + 1 < kSamples; ++k) {
        double span = (double)(xs[k + 1] - xs[k]);
        w += scaled(s[k], span / 2);
        w += scaled(s[k + 1], span / 2);
      }
      w += scaled(s.front(), 0.5);
      w += scaled(s.back(), 0.5);
    }
    w.approximate |= approximate;
    return w;
  }
};

// Thrown by Capture when its `keep` turns the plan down: unwinds Halide's compile before code
// generation (lowerPlan catches it).
struct PlanNotKept {};

// Captures the lowered body where custom passes run, and leaves it unchanged.
// Shared storage: a JIT plan's pipeline keeps its custom passes (removing one would drop the
// compiled code), so the pass may outlive the LoweredPlan it first wrote to.
class Capture : public HI::IRMutator {
public:
  explicit Capture(std::shared_ptr<HI::Stmt> out, std::function<bool(const HI::Stmt &)> keep = {})
      : out_(std::move(out)), keep_(std::move(keep)) {}
  using HI::IRMutator::mutate;
  HI::Stmt mutate(const HI::Stmt &s) override {
    *out_ = s;
    // Asked once: what `keep` reads belongs to the caller of lowerPlan, and a pipeline that lowers
    // again (a JIT plan realized for another target) must not reach it.
    if (std::function<bool(const HI::Stmt &)> keep = std::exchange(keep_, nullptr);
        keep && !keep(s))
      throw PlanNotKept{};
    return s;
  }

private:
  std::shared_ptr<HI::Stmt> out_;
  std::function<bool(const HI::Stmt &)> keep_;
};

Shapes shapesOf(const LoweredKernel &k, const std::map<std::string, int64_t> &sizes) {
  Shapes shapes;
  auto add = [&](const std::string &name, const TensorType &type) {
    std::vector<int64_t> dims;
    for (auto it = type.dims.rbegin(); it != type.dims.rend(); ++it) {
      int64_t v = 0;
      std::string unbound;
      if (it->evaluate(sizes, &v, &unbound) != Dim::EvalError::None)
        throw std::runtime_error(unbound.empty()
                                     ? "the size of '" + name + "' (" + type.str() + ") overflows"
                                     : "no value for size '" + unbound + "' of '" + name +
                                           "' (give it with --sizes)");
      dims.push_back(v);
    }
    shapes[name] = dims;
  };
  for (const KernelParam &p : k.inputs)
    add(p.param.name(), p.type);
  for (size_t i = 0; i < k.outputNames.size(); ++i) {
    add(k.outputNames[i], k.outputTypes[i]);
    // A bf16/f16 output's buffer belongs to its rounding Func (`o__bf16`), the same shape.
    if (i < k.stores.size() && k.stores[i].defined())
      add(k.stores[i].name(), k.outputTypes[i]);
  }
  return shapes;
}

} // namespace

std::pair<std::string, double> PlanCost::worstDefinition(const LoweredKernel &k) const {
  // Producers are Funcs of the kernel, or copies of them and of inputs that schedules make
  // (`k_im`, `f$1`): those are named after what they copy, up to a suffix.
  auto definition = [&](const std::string &producer) -> std::string {
    if (const LoweredFunc *f = k.find(producer))
      return f->definition;
    const LoweredFunc *best = nullptr;
    for (const LoweredFunc &f : k.funcs)
      if (producer.rfind(f.name, 0) == 0 && (!best || f.name.size() > best->name.size()))
        best = &f;
    return best ? best->definition : std::string();
  };
  std::map<std::string, double> excess;
  for (const auto &[f, w] : plan.byFunc)
    excess[definition(f)] += w;
  for (const auto &[f, w] : algorithm.byFunc)
    excess[definition(f)] -= w;
  std::pair<std::string, double> worst{"", 0.0};
  for (const auto &[d, w] : excess)
    if (!d.empty() && w > worst.second)
      worst = {d, w};
  return worst;
}

double PlanCost::ratio() const {
  double a = algorithm.work(), p = plan.work();
  if (a <= 0)
    return p <= 0 ? 1.0 : INFINITY;
  return p / a;
}

std::map<std::string, int64_t>
costSizes(const LoweredKernel &k, const std::map<std::string, int64_t> &given, int64_t value) {
  std::map<std::string, int64_t> sizes = given;
  for (const KernelParam &p : k.inputs)
    for (const Dim &d : p.type.dims)
      for (const DimFactor &f : d.factors)
        if (!f.literal())
          sizes.emplace(f.symbol, value);
  return sizes;
}

LoweredPlan lowerPlan(const LoweredKernel &k, const Halide::Target &t, bool jit,
                      const std::function<bool(const HI::Stmt &)> &keep) {
  LoweredPlan plan;
  H::Pipeline p = k.pipeline();
  auto body = std::make_shared<HI::Stmt>();
  p.add_custom_lowering_pass(new Capture(body, jit ? keep : nullptr));
  if (jit) {
    try {
      p.compile_jit(t);
      plan.jit = p;
    } catch (const PlanNotKept &) {
      plan.body = *body;
      return plan;
    } catch (const H::Error &) {
      // Code generation can fail where lowering does not (LLVM's constant folding of an int32
      // overflow, say): weigh the plan as lowered, as without `jit`; if it is chosen, the run
      // compiles it again and reports the error in its own terms.
    }
  }
  if (!plan.jit)
    plan.module = std::make_shared<H::Module>(p.compile_to_module(k.arguments(), k.name, t));
  plan.body = *body;
  if (!plan.body.defined())
    throw std::runtime_error("Halide's lowering of '" + k.name + "' produced no body");
  return plan;
}

std::map<std::string, int64_t> bufferSizes(const LoweredKernel &k,
                                           const std::map<std::string, int64_t> &sizes) {
  std::map<std::string, int64_t> env;
  for (const auto &[name, dims] : shapesOf(k, sizes))
    for (size_t d = 0; d < dims.size(); ++d) {
      env[name + ".extent." + std::to_string(d)] = dims[d];
      env[name + ".min." + std::to_string(d)] = 0;
    }
  return env;
}

std::optional<int64_t> evalWith(const Halide::Expr &e, const std::map<std::string, int64_t> &env) {
  static const Shapes none;
  return IntEval(env, none)(e);
}

WorkCount countWork(const LoweredKernel &k, const LoweredPlan &plan,
                    const std::map<std::string, int64_t> &sizes) {
  Shapes shapes = shapesOf(k, sizes);
  return StmtWork(shapes).cost(plan.body);
}

WorkCount countWork(const LoweredKernel &k, const Halide::Target &t,
                    const std::map<std::string, int64_t> &sizes) {
  return countWork(k, lowerPlan(k, t), sizes);
}

WorkCount algorithmWork(const LoweredKernel &unscheduled, const Halide::Target &t,
                        const std::map<std::string, int64_t> &sizes) {
  LoweredKernel k = clone(unscheduled);
  for (LoweredFunc &f : k.funcs)
    f.func.compute_root();
  // Without a GPU schedule nothing may run on the device: the algorithm is counted on the host.
  H::Target host = t.without_feature(H::Target::CUDA);
  return countWork(k, host, sizes);
}

std::string costReport(const LoweredKernel &unscheduled, const LoweredKernel &scheduled,
                       const Halide::Target &t, const std::map<std::string, int64_t> &given,
                       const std::string &schedule, const LoweredPlan *lowered,
                       const WorkCount *algorithm) {
  std::map<std::string, int64_t> sizes = costSizes(unscheduled, given);
  PlanCost c{lowered ? countWork(scheduled, *lowered, sizes) : countWork(scheduled, t, sizes),
             algorithm ? *algorithm : algorithmWork(unscheduled, t, sizes)};
  std::ostringstream os;
  os.precision(4);
  os << "kernel " << scheduled.name << "\nschedule " << schedule << "\nsizes";
  for (const auto &[name, v] : sizes)
    os << " " << name << "=" << v << (given.count(name) ? "" : "(default)");
  auto row = [&](const char *what, const WorkCount &w) {
    os << "\n"
       << what << " flops " << w.flops << " transcendental " << w.transcendental << " loads "
       << w.loads << " stores " << w.stores
       << (w.approximate ? " (data-dependent loops at their bound)" : "");
  };
  row("plan", c.plan);
  row("algorithm", c.algorithm);
  os << "\nratio " << c.ratio();
  auto [def, excess] = c.worstDefinition(scheduled);
  if (!def.empty() && c.algorithm.work() > 0 && excess > 0.01 * c.algorithm.work()) {
    auto loc = scheduled.definitionLocs.find(def);
    os << "\nmost recomputed '" << def << "'"
       << (loc == scheduled.definitionLocs.end() ? "" : " at " + loc->second) << ": "
       << excess / c.algorithm.work() << "x the algorithm's work beyond it";
  }
  os << "\n";
  return os.str();
}

} // namespace attnc
