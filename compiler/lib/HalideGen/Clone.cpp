// clone(): a copy of a lowered kernel that shares no Halide object with it, for one schedule.
//
// Schedules mutate what they schedule: a Func's schedule, wrappers made by `in()` (stored in the
// called Func, an input's in its ImageParam's implicit Func), specializations, rfactor's new
// definitions, estimates on the inputs. Halide's own deep_copy shares the Parameters (inputs,
// output buffers and their constraints) and the reduction domains, and keeps calls to Funcs
// outside the copied set. So every object is copied here: each Func with its definitions and
// output buffers, each input as an ImageParam of a copied Parameter (same name, type and
// constraints) and a copied implicit Func, every reduction domain (so that RVars and their bounds
// name the copy's Parameters), and every Expr held outside the Funcs (requirements, an online
// softmax's key count and extents). Names stay the same and no new one is made, so the copy
// compiles to what the lowering would have compiled to. LoopLevels stay shared: compute_at and
// store_at replace a Func's LoopLevel rather than change it, and compiling only marks it locked.
#include "attnc/HalideGen.h"

#include <map>
#include <stdexcept>

namespace attnc {

namespace {

namespace H = Halide;
namespace HI = Halide::Internal;

// Every Halide handle of each struct, in one place: the collector reads them, the rebinder
// replaces them. A new member holding an Expr, Func, RVar or ImageParam is added here, or the
// copy shares it with the original (the clone tests find such a member where a rule uses it).
template <typename V> void handles(KernelParam &p, V &v) { v(p.param); }

template <typename V> void handles(LoweredFunc &f, V &v) {
  v(f.func);
  for (H::RVar &r : f.rvars)
    v(r);
}

template <typename V> void handles(TileVisits &t, V &v) { v(t.count); }

template <typename V> void handles(OnlineGroup &g, V &v) {
  v(g.keyCount);
  for (auto &[name, extent] : g.extents)
    v(extent);
  handles(g.visits, v);
}

template <typename V> void handles(LoweredKernel &k, V &v) {
  for (KernelParam &p : k.inputs)
    handles(p, v);
  for (LoweredFunc &f : k.funcs)
    handles(f, v);
  for (auto &[cond, message] : k.requirements)
    v(cond);
  for (OnlineGroup &g : k.onlineGroups)
    handles(g, v);
  for (H::Func &s : k.stores)
    if (s.defined())
      v(s);
}

// The Funcs the kernel reaches: its Funcs, the Funcs they call (in definitions, predicates and
// reduction domains) and the inputs' implicit Funcs.
class Collector : public HI::IRGraphVisitor {
public:
  std::vector<HI::Function> functions; // in the order found
  std::map<HI::FunctionPtr, size_t> index;

  void operator()(H::Func &f) { add(f.function()); }
  void operator()(H::RVar &r) {
    if (r.domain().defined())
      r.domain().accept(this);
  }
  void operator()(H::Expr &e) {
    if (e.defined())
      e.accept(this);
  }
  void operator()(H::ImageParam &p) { add(H::Func(p).function()); }

private:
  using HI::IRGraphVisitor::visit;

  void add(const HI::Function &f) {
    if (!index.emplace(f.get_contents(), functions.size()).second)
      return;
    functions.push_back(f);
    if (f.has_extern_definition())
      throw std::logic_error("clone: Func '" + f.name() + "' is an extern definition");
    if (!f.wrappers().empty())
      throw std::logic_error("clone: Func '" + f.name() +
                             "' has wrappers (clone a kernel before scheduling it)");
    f.accept(this);
  }

  void visit(const HI::Call *op) override {
    HI::IRGraphVisitor::visit(op);
    if (op->call_type == HI::Call::Halide && op->func.defined())
      add(HI::Function(op->func));
  }

  void visit(const HI::Variable *op) override {
    if (op->reduction_domain.defined())
      op->reduction_domain.accept(this);
  }
};

// An ImageParam made of a copied Parameter and implicit Func. ImageParam's public constructor
// would name a new implicit Func with Halide's unique_name, whose counters are shared by every
// name Halide makes (hashed): one more call can renumber a closure in the emitted code. The copy
// makes no new names at all, so a kernel compiles as it did when it was lowered for it alone.
struct ImageParamCopy : H::ImageParam {
  ImageParamCopy(const H::ImageParam &from, const H::Parameter &p, const H::Func &f)
      : H::ImageParam(from) {
    param = p;
    func = f;
  }
};

// Rewrites Exprs of the original to name the copies: calls to the copied Funcs (weak where the
// original's were, as a Func's calls to itself are), Parameters and reduction domains. A
// Parameter or domain met for the first time is copied then.
class Rebinder : public HI::IRGraphMutator {
public:
  std::map<HI::FunctionPtr, HI::Function> functions;
  std::map<H::Parameter, H::Parameter> params;
  std::map<HI::ReductionDomain, HI::ReductionDomain, HI::ReductionDomain::Compare> domains;

  using HI::IRGraphMutator::mutate;

  void operator()(H::Func &f) { f = H::Func(function(f.function().get_contents())); }
  void operator()(H::RVar &r) {
    HI::ReductionDomain d = r.domain();
    if (!d.defined())
      return;
    const std::vector<HI::ReductionVariable> &vars = d.domain();
    for (size_t i = 0; i < vars.size(); ++i)
      if (vars[i].var == r.name()) {
        r = H::RVar(domain(d), (int)i);
        return;
      }
    throw std::logic_error("clone: RVar '" + r.name() + "' is not in its domain");
  }
  void operator()(H::Expr &e) {
    if (e.defined())
      e = mutate(e);
  }
  void operator()(H::ImageParam &p) {
    p = ImageParamCopy(p, param(p.parameter()),
                       H::Func(function(H::Func(p).function().get_contents())));
  }

  HI::Function function(const HI::FunctionPtr &f) const {
    auto it = functions.find(f);
    if (it == functions.end())
      throw std::logic_error("clone: a call to Func '" + HI::Function(f).name() +
                             "' outside the kernel");
    return it->second;
  }

  H::Parameter param(const H::Parameter &p) {
    if (auto it = params.find(p); it != params.end())
      return it->second;
    H::Parameter copy(p.type(), p.is_buffer(), p.dimensions(), p.name());
    params.emplace(p, copy);
    copyConstraints(p, copy);
    return copy;
  }

  // `to`'s constraints, estimates and alignment are `from`'s, naming the copies.
  void copyConstraints(const H::Parameter &from, H::Parameter to) {
    auto m = [&](const H::Expr &e) { return e.defined() ? mutate(e) : e; };
    if (from.is_buffer()) {
      for (int d = 0; d < from.dimensions(); ++d) {
        to.set_min_constraint(d, m(from.min_constraint(d)));
        to.set_extent_constraint(d, m(from.extent_constraint(d)));
        to.set_stride_constraint(d, m(from.stride_constraint(d)));
        to.set_min_constraint_estimate(d, m(from.min_constraint_estimate(d)));
        to.set_extent_constraint_estimate(d, m(from.extent_constraint_estimate(d)));
      }
      if (from.host_alignment() != to.host_alignment())
        to.set_host_alignment(from.host_alignment());
    } else {
      to.set_min_value(m(from.min_value()));
      to.set_max_value(m(from.max_value()));
      to.set_estimate(m(from.estimate()));
      to.set_default_value(m(from.default_value()));
    }
    if (from.memory_type() != to.memory_type())
      to.store_in(from.memory_type());
    if (from.is_tracing_loads())
      to.trace_loads();
    for (const std::string &tag : from.get_trace_tags())
      to.add_trace_tag(tag);
  }

  HI::ReductionDomain domain(const HI::ReductionDomain &d) {
    if (auto it = domains.find(d); it != domains.end())
      return it->second;
    HI::ReductionDomain copy = d.deep_copy();
    domains.emplace(d, copy);
    copy.mutate(this); // bounds and predicate (which names its own RVars without the domain)
    return copy;
  }

  // Fills `copy` (made empty) with `f`'s definitions, schedule and output buffers.
  void fill(const HI::Function &f, HI::Function copy) {
    std::map<HI::FunctionPtr, HI::FunctionPtr> noWrappers; // Collector refused wrappers
    HI::FuncSchedule schedule = f.schedule().deep_copy(noWrappers);
    schedule.mutate(this);
    HI::Definition init;
    if (f.has_pure_definition()) {
      init = f.definition().get_copy();
      init.mutate(this);
    }
    std::vector<HI::Definition> updates;
    for (const HI::Definition &u : f.updates()) {
      updates.push_back(u.get_copy());
      updates.back().mutate(this);
    }
    std::vector<H::Parameter> outputs;
    for (const H::Parameter &p : f.output_buffers())
      outputs.push_back(param(p));
    copy.update_with_deserialization(
        f.name(), f.origin_name(), f.output_types(), f.required_types(), f.required_dimensions(),
        f.args(), schedule, init, updates, f.debug_file(), outputs, f.extern_arguments(),
        f.extern_function_name(), f.extern_definition_name_mangling(),
        f.extern_function_device_api(), f.extern_definition_proxy_expr(), f.is_tracing_loads(),
        f.is_tracing_stores(), f.is_tracing_realizations(), f.get_trace_tags(),
        f.should_not_profile(), f.frozen());
  }

private:
  using HI::IRGraphMutator::visit;

  H::Expr visit(const HI::Variable *op) override {
    H::Parameter p = op->param.defined() ? param(op->param) : op->param;
    HI::ReductionDomain d =
        op->reduction_domain.defined() ? domain(op->reduction_domain) : op->reduction_domain;
    if (p.same_as(op->param) && d.same_as(op->reduction_domain))
      return op;
    return HI::Variable::make(op->type, op->name, op->image, p, d);
  }

  H::Expr visit(const HI::Call *op) override {
    H::Expr e = HI::IRGraphMutator::visit(op);
    const HI::Call *c = e.as<HI::Call>();
    HI::FunctionPtr f = c->func;
    if (c->call_type == HI::Call::Halide && f.defined()) {
      f = function(c->func).get_contents();
      if (c->func.weak)
        f.weaken();
    }
    H::Parameter p = c->param.defined() ? param(c->param) : c->param;
    if (f.same_as(c->func) && p.same_as(c->param))
      return e;
    return HI::Call::make(c->type, c->name, c->args, c->call_type, f, c->value_index, c->image, p);
  }
};

} // namespace

LoweredKernel clone(const LoweredKernel &k) {
  LoweredKernel out = k; // names, types and flags; the Halide handles are replaced below
  Collector found;
  handles(out, found);

  Rebinder r;
  // An empty copy of every Func (the inputs' implicit Funcs too), so that definitions can call
  // any of them; Parameters and domains are copied as the definitions meet them.
  std::vector<std::pair<HI::Function, HI::Function>> copies;
  for (const HI::Function &f : found.functions) {
    HI::Function copy(f.required_types(), f.required_dimensions(), f.name());
    r.functions.emplace(f.get_contents(), copy);
    copies.emplace_back(f, copy);
  }
  for (auto &[f, copy] : copies)
    r.fill(f, copy);

  handles(out, r);
  return out;
}

} // namespace attnc
