// IEEE float semantics for a lowered kernel: strict_float everywhere but the multiply-adds of sums.
//
// Halide's default code generation tells LLVM that no float is ever inf or NaN (module-wide
// NoInfsFPMath/NoNaNsFPMath, and nnan/ninf on every instruction) and lets it contract any
// multiply and add. attnc relies on both: masks are -inf scores, and a NaN input must stay NaN in
// the rows it reaches (docs/language.md §6, "Floating point"). Under those flags LLVM may fold
// `s == -inf` to false or a NaN test to true, and contracting `rsqrt(D) * dot - max` into one
// fused multiply-add makes the exp's copy of a score differ from the max's copy: at scores near
// 1e12 every exp of a row underflowed to 0 (a zero row where the math gives the winning key's
// value). So every float expression is wrapped in strict_float, which also switches the module to
// per-instruction flags. The one exception is the update of a sum whose body is a product
// (`acc + a * b`: contractions, projections, the value GEMM of attention): that multiply and add
// keep Halide's flags so that they become one FMA, which is what makes those loops fast; only
// the product's factors are strict. A fused multiply-add rounds once instead of twice and so is
// no less accurate, and inf/NaN pass through it by IEEE rules in hardware.
#include "IeeeMath.h"
#include "attnc/HalideGen.h"

#include <optional>
#include <set>
#include <stdexcept>

namespace attnc {
namespace {

namespace H = Halide;
namespace HI = Halide::Internal;

// Whether an expression computes anything in floating point (a float-typed node anywhere).
bool hasFloat(const H::Expr &e) {
  struct Finder : HI::IRGraphVisitor {
    bool found = false;
    using HI::IRGraphVisitor::include;
    void include(const H::Expr &x) override {
      if (found)
        return;
      if (x.type().is_float()) {
        found = true;
        return;
      }
      HI::IRGraphVisitor::include(x);
    }
  } f;
  e.accept(&f);
  return f.found;
}

// Halide's strict_float rewrites float arithmetic into strict intrinsics (strict_add, ...), so
// applying it again to its own result changes nothing.
H::Expr strictly(const H::Expr &e) { return e.defined() && hasFloat(e) ? H::strict_float(e) : e; }

// Whether `e` is the update's read of its own value: a call of `self`, or a variable that a
// `let` (Halide's CSE makes them) bound to one.
bool isSelf(const H::Expr &e, const std::string &self, const std::set<std::string> &aliases) {
  if (const auto *c = e.as<HI::Call>())
    return c->call_type == HI::Call::Halide && c->name == self;
  const auto *v = e.as<HI::Variable>();
  return v && aliases.count(v->name);
}

// `self + a * b` with strict factors and a free multiply-add (or `self + select(c, a * b, a' * b')`),
// also under `let`s (whose values are
// made strict) and as `select(c, self + a * b, self)` (an update only some points make, such as
// the online softmax's masked tiles: skipped points add nothing, not even 0 * NaN); nullopt when
// `value` is not of that form.
std::optional<H::Expr> relaxedSumOfProduct(const H::Expr &value, const std::string &self,
                                           std::set<std::string> aliases = {}) {
  if (const auto *let = value.as<HI::Let>()) {
    if (isSelf(let->value, self, aliases))
      aliases.insert(let->name);
    std::optional<H::Expr> body = relaxedSumOfProduct(let->body, self, aliases);
    if (!body)
      return std::nullopt;
    return HI::Let::make(let->name, strictly(let->value), *body);
  }
  if (const auto *sel = value.as<HI::Select>()) {
    if (!isSelf(sel->false_value, self, aliases))
      return std::nullopt;
    std::optional<H::Expr> t = relaxedSumOfProduct(sel->true_value, self, aliases);
    if (!t)
      return std::nullopt;
    return H::select(strictly(sel->condition), *t, sel->false_value);
  }
  const auto *add = value.as<HI::Add>();
  if (!add || !add->type.is_float())
    return std::nullopt;
  for (const auto &[s, p] : {std::pair{add->a, add->b}, std::pair{add->b, add->a}}) {
    if (!isSelf(s, self, aliases))
      continue;
    if (const auto *m = p.as<HI::Mul>())
      return s + strictly(m->a) * strictly(m->b);
    // One product in two spellings, one per specialisation of the loop (cpu-online's bf16 dot
    // products: Halide's casts where it reduces in pairs, integer widening elsewhere).
    if (const auto *sel = p.as<HI::Select>()) {
      const auto *t = sel->true_value.as<HI::Mul>(), *f = sel->false_value.as<HI::Mul>();
      if (t && f)
        return s + H::select(strictly(sel->condition), strictly(t->a) * strictly(t->b),
                             strictly(f->a) * strictly(f->b));
    }
  }
  return std::nullopt;
}

// A Tuple update reads its elements' old values, but Halide (21) stores the elements in order and
// decides whether one element reads another with a visitor that does not look inside calls,
// which strict operations are (strict_max(state.0[0], ...)): an element that reads an earlier
// element would read its new value. HalideGen orders Tuple elements so that each reads only
// itself and later ones (the online softmax's state); this keeps it so.
void checkTupleOrder(const HI::Definition &d, const std::string &self) {
  for (size_t i = 0; i < d.values().size(); ++i) {
    struct Reads : HI::IRVisitor {
      std::string self;
      int earliest = 1 << 30;
      using HI::IRVisitor::visit;
      void visit(const HI::Call *c) override {
        if (c->call_type == HI::Call::Halide && c->name == self)
          earliest = std::min(earliest, c->value_index);
        HI::IRVisitor::visit(c);
      }
    } r;
    r.self = self;
    d.values()[i].accept(&r);
    if (r.earliest < (int)i)
      throw std::logic_error("HalideGen: element " + std::to_string(i) +
                             " of the Tuple update of '" + self + "' reads element " +
                             std::to_string(r.earliest) + ", which Halide stores first");
  }
}

void applyTo(HI::Definition &d, const std::string &self, bool update, bool gpu) {
  if (!d.defined())
    return;
  if (update && d.values().size() > 1)
    checkTupleOrder(d, self);
  // nonPositiveExp's calls become code after the rest is strict: its polynomial keeps Halide's
  // flags (IeeeMath.h).
  for (H::Expr &v : d.values()) {
    if (update) {
      if (std::optional<H::Expr> r = relaxedSumOfProduct(v, self)) {
        v = expandNonPositiveExp(*r, gpu);
        continue;
      }
    }
    v = expandNonPositiveExp(strictly(v), gpu);
  }
  d.predicate() = expandNonPositiveExp(strictly(d.predicate()), gpu);
  for (HI::Specialization &s : d.specializations())
    applyTo(s.definition, self, update, gpu);
}

} // namespace

void applyFloatSemantics(const LoweredKernel &k) {
  std::vector<HI::Function> outs;
  for (const H::Func &f : k.outputs())
    outs.push_back(f.function());
  std::map<std::string, HI::Function> env = HI::build_environment(outs);
  // Wrappers made by schedules (`f.in(g)`) are reached through the wrapped Function's schedule.
  std::vector<HI::Function> work;
  for (auto &[n, f] : env)
    work.push_back(f);
  std::set<std::string> seen;
  while (!work.empty()) {
    HI::Function f = work.back();
    work.pop_back();
    if (!seen.insert(f.name()).second)
      continue;
    for (auto &[n, w] : f.schedule().wrappers())
      work.push_back(HI::Function(w));
    if (f.has_extern_definition() || !k.strictFuncs.insert(f.name()).second)
      continue;
    applyTo(f.definition(), f.name(), false, k.gpu);
    for (size_t u = 0; u < f.updates().size(); ++u)
      applyTo(f.update((int)u), f.name(), true, k.gpu);
  }
}

} // namespace attnc
