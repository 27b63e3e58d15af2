// Sema's subscript bounds: what each subscript can reach, and the 32-bit overflow it can cause.
#include "SemaInternal.h"

#include <algorithm>
#include <numeric>

namespace attnc::dsl::sema {

namespace {

// Subscripts stay strictly between -2^30 and 2^30 where they are constants: Halide's bounds
// inference takes the difference of a subscript's highest and lowest value, in 32 bits as well.
constexpr int64_t kSubscriptLimit = int64_t(1) << 30;

// A bound (c + sum(coefficient * size)) / den on what an integer expression can reach, in terms of
// the sizes (which are never negative). The denominator keeps `h * hd` exact for `h in 0..C / hd`
// (at most C - hd), where rounding each step would make it C * hd. Arithmetic that would leave 64
// bits gives no bound (nullopt).
struct Affine {
  int64_t c = 0;
  std::map<std::string, int64_t> terms;
  int64_t den = 1;
  bool isConst() const { return terms.empty(); }
  bool nonNegative() const {
    if (c < 0)
      return false;
    for (const auto &t : terms)
      if (t.second < 0)
        return false;
    return true;
  }
  // Divides out common factors (den stays positive).
  void normalize() {
    int64_t g = std::gcd(c, den);
    for (const auto &t : terms)
      g = std::gcd(g, t.second);
    if (g > 1) {
      c /= g, den /= g;
      for (auto &t : terms)
        t.second /= g;
    }
  }
  // The same bound with integer coefficients, rounded up: an upper bound of it.
  Affine ceiled() const {
    Affine r = *this;
    // C++ division truncates, which rounds a negative quotient up already.
    auto up = [&](int64_t x) { return x / den + (x > 0 && x % den != 0); };
    r.c = up(c);
    for (auto &t : r.terms)
      t.second = up(t.second);
    r.den = 1;
    return r;
  }
  std::string str() const {
    std::string s;
    for (const auto &[name, a] : terms) {
      if (!s.empty())
        s += a < 0 ? " - " : " + ";
      else if (a < 0)
        s += "-";
      int64_t m = a < 0 ? -a : a;
      s += (m == 1 ? "" : std::to_string(m) + "*") + name;
    }
    if (s.empty())
      s = std::to_string(c);
    else if (c != 0)
      s += (c < 0 ? " - " : " + ") + std::to_string(c < 0 ? -c : c);
    return den == 1 ? s : "(" + s + ")/" + std::to_string(den);
  }
};
using Bound = std::optional<Affine>;

Bound scaled(const Bound &a, int64_t k) {
  if (!a)
    return std::nullopt;
  Affine r;
  r.den = a->den;
  // INT64_MIN counts as overflow too: it has no negation (normalize's gcd, scaled(-1)).
  if (__builtin_mul_overflow(a->c, k, &r.c) || r.c == INT64_MIN)
    return std::nullopt;
  for (const auto &[n, x] : a->terms) {
    int64_t v;
    if (__builtin_mul_overflow(x, k, &v) || v == INT64_MIN)
      return std::nullopt;
    if (v)
      r.terms[n] = v;
  }
  r.normalize();
  return r;
}

// a / k as a real number, k > 0: an upper bound of floor(a / k) when `a` is an upper bound.
Bound divided(const Bound &a, int64_t k) {
  if (!a)
    return std::nullopt;
  Affine r = *a;
  if (__builtin_mul_overflow(r.den, k, &r.den))
    return std::nullopt;
  r.normalize();
  return r;
}

Bound sum(const Bound &a, const Bound &b) {
  if (!a || !b)
    return std::nullopt;
  int64_t g = std::gcd(a->den, b->den), den;
  if (__builtin_mul_overflow(a->den / g, b->den, &den))
    return std::nullopt;
  Bound x = scaled(a, den / a->den), y = scaled(b, den / b->den);
  if (!x || !y)
    return std::nullopt;
  Affine r = *x;
  r.den = den;
  if (__builtin_add_overflow(r.c, y->c, &r.c) || r.c == INT64_MIN)
    return std::nullopt;
  for (const auto &[n, v] : y->terms) {
    int64_t t;
    if (__builtin_add_overflow(r.terms[n], v, &t) || t == INT64_MIN)
      return std::nullopt;
    if (t)
      r.terms[n] = t;
    else
      r.terms.erase(n);
  }
  r.normalize();
  return r;
}

Bound constant(int64_t v) {
  Affine a;
  a.c = v;
  return a;
}

// [lo, hi] of an integer expression; either end may be unknown.
struct Bounds {
  Bound lo, hi;
};

} // namespace

// Integer arithmetic is 32-bit at run time, and Halide refuses (or, where sizes are involved,
// miscompiles) index arithmetic that overflows. What is known at compile time is checked here and
// in foldInt (ConstFold.cpp): constant expressions must fit, and so must constant subscripts with
// room for their spans.
// Subscripts that a boundary mode (or a computed read of a definition) clamps may go far outside
// the tensor, and Halide multiplies them by the tensor's strides: where that can overflow for
// some sizes, a requirement on the sizes is added, checked when the kernel is called.

// Bounds one definition's subscripts once every index range is settled.
class SubscriptCheck {
public:
  // `listsOnly`: only the reads of constant lists (in a requirement, whose tensor reads are
  // checked when it runs).
  SubscriptCheck(KernelSema &s, bool listsOnly)
      : s_(s), k_(s.k_), diags_(s.diags_), listsOnly_(listsOnly) {}

  void checkSubscripts(const Expr &e) {
    if (!listsOnly_ && e.kind == ExprKind::Read && e.tensor && e.args.size() == e.tensor->rank())
      for (size_t d = 0; d < e.args.size(); ++d)
        checkSubscript(e, d);
    if (e.kind == ExprKind::ListRead)
      checkListSubscript(e);
    for (const auto &a : e.args)
      checkSubscripts(*a);
    if (e.body)
      checkSubscripts(*e.body);
    if (e.where)
      checkSubscripts(*e.where);
    if (e.sink)
      checkSubscripts(*e.sink);
  }

private:
  KernelSema &s_;
  Kernel &k_;
  DiagEngine &diags_;
  bool listsOnly_;
  std::map<const Expr *, Bounds> letBounds_; // bounds() of `let` values

  // What an int expression can reach, from the ranges of the indices it uses.
  Bounds bounds(const Expr &e) {
    if (e.type != ScalarType::Int)
      return {};
    if (e.hasIntValue)
      return {constant(e.intValue), constant(e.intValue)};
    switch (e.kind) {
    case ExprKind::Number:
      if (e.isIntLiteral)
        return {constant((int64_t)e.number), constant((int64_t)e.number)};
      return {};
    case ExprKind::Ident:
      if (e.identKind == IdentKind::Const)
        return {constant((int64_t)e.constValue), constant((int64_t)e.constValue)};
      if (e.identKind == IdentKind::Size) {
        Affine a;
        a.terms[e.name] = 1;
        return {a, a};
      }
      if (e.identKind == IdentKind::Let && e.let) {
        // A `let` value may be large and used many times: bounded once.
        auto it = letBounds_.find(e.let);
        if (it == letBounds_.end())
          it = letBounds_.emplace(e.let, bounds(*e.let->args[0])).first;
        return it->second;
      }
      if (e.identKind == IdentKind::Index && e.index && e.index->range)
        return {bounds(*e.index->range->lo).lo, sum(bounds(*e.index->range->hi).hi, constant(-1))};
      return {};
    case ExprKind::Let:
      return bounds(*e.body);
    case ExprKind::ListRead: {
      // Any element: a dilation read from a list bounds a window's reach as a constant would.
      auto [lo, hi] = std::minmax_element(e.listValues.begin(), e.listValues.end());
      return {constant((int64_t)*lo), constant((int64_t)*hi)};
    }
    case ExprKind::Unary:
      if (e.name == "-") {
        Bounds a = bounds(*e.args[0]);
        return {scaled(a.hi, -1), scaled(a.lo, -1)};
      }
      return {};
    case ExprKind::Binary: {
      const std::string &op = e.name;
      Bounds a = bounds(*e.args[0]), b = bounds(*e.args[1]);
      if (op == "+")
        return {sum(a.lo, b.lo), sum(a.hi, b.hi)};
      if (op == "-")
        return {sum(a.lo, scaled(b.hi, -1)), sum(a.hi, scaled(b.lo, -1))};
      const Expr &rhs = *e.args[1];
      if (op == "*") {
        const Expr *k = rhs.hasIntValue ? &rhs : e.args[0]->hasIntValue ? e.args[0].get() : nullptr;
        if (k) {
          Bounds x = k == &rhs ? a : b;
          return k->intValue >= 0 ? Bounds{scaled(x.lo, k->intValue), scaled(x.hi, k->intValue)}
                                  : Bounds{scaled(x.hi, k->intValue), scaled(x.lo, k->intValue)};
        }
        // Two constant ranges (a window offset times a constant range, say): the extreme products.
        auto whole = [](const Bound &x) { return x && x->isConst() && x->den == 1; };
        if (whole(a.lo) && whole(a.hi) && whole(b.lo) && whole(b.hi)) {
          int64_t p[4];
          bool over = __builtin_mul_overflow(a.lo->c, b.lo->c, &p[0]) |
                      __builtin_mul_overflow(a.lo->c, b.hi->c, &p[1]) |
                      __builtin_mul_overflow(a.hi->c, b.lo->c, &p[2]) |
                      __builtin_mul_overflow(a.hi->c, b.hi->c, &p[3]);
          if (over)
            return {};
          return {constant(*std::min_element(p, p + 4)), constant(*std::max_element(p, p + 4))};
        }
        return {};
      }
      if ((op == "/" || op == "%") && rhs.hasIntValue && rhs.intValue > 0) {
        int64_t k = rhs.intValue;
        if (op == "%")
          return {constant(0), constant(k - 1)};
        // floor(x / k) lies in [(lo - (k - 1)) / k, hi / k].
        return {divided(sum(a.lo, constant(1 - k)), k), divided(a.hi, k)};
      }
      return {};
    }
    default:
      return {};
    }
  }

  // Whether b <= 0 for every size (sizes are >= 0).
  static bool provablyNonPositive(const Bound &b) {
    return b && scaled(b, -1) && scaled(b, -1)->nonNegative();
  }

  static ExprPtr intNode(ExprKind k, Loc loc, const std::string &name = "") {
    auto e = std::make_unique<Expr>(k, loc);
    e->name = name;
    e->type = ScalarType::Int;
    return e;
  }
  static ExprPtr number(int64_t v, Loc loc) {
    ExprPtr e = intNode(ExprKind::Number, loc);
    e->number = (double)v;
    e->isIntLiteral = true;
    return e;
  }
  static ExprPtr sizeRef(const std::string &name, Loc loc) {
    ExprPtr e = intNode(ExprKind::Ident, loc, name);
    e->identKind = IdentKind::Size;
    return e;
  }
  static ExprPtr binary(const std::string &op, ExprPtr a, ExprPtr b) {
    ExprPtr e = intNode(ExprKind::Binary, a->loc, op);
    bool cond = op == "<=" || op == "&&" || op == "||";
    e->type = cond ? ScalarType::Bool : ScalarType::Int;
    e->depth = std::max(a->depth, b->depth) + 1;
    e->args.push_back(std::move(a));
    e->args.push_back(std::move(b));
    return e;
  }

  // The factors of an extent: a size, a literal, or (outputs, locals) a product or other expression.
  static void factorsOf(const Expr &e, std::vector<const Expr *> &out) {
    if (e.kind == ExprKind::Binary && e.name == "*") {
      factorsOf(*e.args[0], out);
      factorsOf(*e.args[1], out);
    } else {
      out.push_back(&e);
    }
  }

  // A read of a constant list must stay in the list. Where the subscript's bounds are constants,
  // that is decided here; where they depend on sizes (an index over a tensor's dimension), a
  // requirement on the sizes, checked at every call, states it. A subscript without bounds (one
  // read from a tensor, say) cannot be checked before it is read and is refused.
  void checkListSubscript(const Expr &read) {
    const Expr &sub = *read.args[0];
    if (sub.hasIntValue)
      return; // checked where it is read (Check.cpp)
    int64_t n = (int64_t)read.listValues.size();
    auto what = [&] {
      return "the subscript of constant list '" + read.name + "' (" + std::to_string(n) +
             (n == 1 ? " element), " : " elements), ") + exprToString(sub);
    };
    Bounds b = bounds(sub);
    Bound neg = scaled(b.lo, -1);
    if (!b.hi || !neg) {
      if (s_.overflowChecks_.insert("list " + read.name + " unbounded " + exprToString(sub)).second)
        diags_.error(sub.loc, what() +
                                  ", cannot be bounded before it is read: a list subscript may use "
                                  "indices, sizes and constants with + - *, and / or % by a "
                                  "constant, so that every read can be checked against the list");
      return;
    }
    std::string range = "0.." + std::to_string(n - 1);
    // Certainly outside the list whenever it is read (an empty range reads nothing; a compile-time
    // error is still the useful answer, as for a tensor read before its first element).
    auto outside = [&](const std::string &reaches) {
      if (s_.overflowChecks_.insert("list " + read.name + " " + exprToString(sub)).second)
        diags_.error(sub.loc, what() + ", " + reaches + s_.constNote(sub) +
                                  ": it must stay within " + range);
    };
    if (b.lo->isConst() && b.lo->ceiled().c > n - 1)
      return outside("is at least " + b.lo->str());
    if (b.hi->isConst() && b.hi->c < 0)
      return outside("is at most " + b.hi->str());
    ExprPtr cond;
    std::string reaches;
    // x <= limit for every size, with x an upper bound of the subscript (or of its negation).
    auto atMost = [&](const Affine &x, int64_t limit, const std::string &desc) {
      if (x.isConst()) {
        if (x.c > limit)
          outside(desc);
        return x.c <= limit;
      }
      if (provablyNonPositive(sum(x, constant(-limit))))
        return true;
      reaches += (reaches.empty() ? "" : " and ") + desc;
      Loc loc = sub.loc;
      // c + a1*S1 + a2*S2 + ... <= limit, term by term so that no step overflows; terms that
      // lower the bound are left out, which makes the check stricter, never wrong.
      int64_t room = std::clamp<int64_t>(limit - x.c, -1, kInt32Max);
      ExprPtr rest = number(room, loc);
      for (const auto &[name, a] : x.terms) {
        if (a <= 0)
          continue;
        ExprPtr bound = a == 1 ? rest->clone() : binary("/", rest->clone(), number(a, loc));
        ExprPtr c = binary("<=", sizeRef(name, loc), std::move(bound));
        cond = cond ? binary("&&", std::move(cond), std::move(c)) : std::move(c);
        ExprPtr used =
            a == 1 ? sizeRef(name, loc) : binary("*", number(a, loc), sizeRef(name, loc));
        rest = binary("-", std::move(rest), std::move(used));
      }
      return true;
    };
    bool ok = atMost(b.hi->ceiled(), n - 1, "reaches " + b.hi->str());
    ok &= atMost(neg->ceiled(), 0, "goes down to " + b.lo->str());
    if (!ok || !cond)
      return;
    if (!s_.overflowChecks_.insert(exprToString(*cond) + " list " + read.name).second)
      return;
    Kernel::Requirement req;
    req.loc = read.loc;
    req.cond = std::move(cond);
    req.message = what() + ", " + reaches + s_.constNote(sub) + ": it must stay within " + range;
    k_.requirements.push_back(std::move(req));
  }

  void checkSubscript(const Expr &read, size_t d) {
    const Expr &sub = *read.args[d];
    const TensorDecl &t = *read.tensor;
    Bounds b = bounds(sub);
    // Printed only for a message: subscripts of large expanded kernels are long.
    auto where = [&] {
      return "subscript " + std::to_string(d) + " of '" + read.name + "', " + exprToString(sub);
    };
    for (const Bound &x : {b.lo, b.hi})
      if (x && (x->c / x->den >= kSubscriptLimit || x->c / x->den <= -kSubscriptLimit)) {
        // Once per subscript: the same window read from k and v is one mistake.
        if (!s_.overflowChecks_.insert("subscript " + exprToString(sub) + " " + x->str()).second)
          return;
        diags_.error(sub.loc, where() + ", reaches " + x->str() + s_.constNote(sub) +
                                  ": subscripts must stay between -2^30 and 2^30, so that their "
                                  "spans fit in 32 bits");
        return;
      }
    // A plain read of an input at `i - c` (or a negative constant) reads before the tensor's first
    // element in every call where i takes its first value: Halide would only warn at compile
    // time and fail each call.
    if (read.boundary.empty() && t.role == TensorRole::Input) {
      const Expr *index = nullptr;
      int64_t offset = 0;
      auto isIndex = [](const Expr &x) {
        return x.kind == ExprKind::Ident && x.identKind == IdentKind::Index && x.index;
      };
      if (isIndex(sub))
        index = &sub;
      else if (sub.kind == ExprKind::Binary && (sub.name == "+" || sub.name == "-") &&
               isIndex(*sub.args[0]) && sub.args[1]->hasIntValue)
        index = sub.args[0].get(),
        offset = sub.name == "+" ? sub.args[1]->intValue : -sub.args[1]->intValue;
      else if (sub.kind == ExprKind::Binary && sub.name == "+" && sub.args[0]->hasIntValue &&
               isIndex(*sub.args[1]))
        index = sub.args[1].get(), offset = sub.args[0]->intValue;
      Bound first =
          index && index->index->range ? bounds(*index->index->range->lo).lo : std::nullopt;
      if (sub.hasIntValue && sub.intValue < 0) {
        diags_.error(sub.loc, where() + ", is " + std::to_string(sub.intValue) + s_.constNote(sub) +
                                  ": a read before the first element of '" + read.name +
                                  "' (a boundary mode such as '" + read.name +
                                  ".zero(...)' reads zeros there)");
        return;
      }
      if (first && first->isConst() && first->den == 1 && first->c + offset < 0) {
        diags_.error(sub.loc, where() + ", is " + std::to_string(first->c + offset) + " where '" +
                                  s_.shown(index->name) + "' is " + std::to_string(first->c) +
                                  s_.constNote(sub) + ": a read before the first element of '" +
                                  read.name + "' (a boundary mode such as '" + read.name +
                                  ".zero(...)' reads zeros there)");
        return;
      }
    }
    // Only clamped subscripts can leave the tensor: a plain read outside it is an error the
    // kernel reports. Halide clamps reads with a boundary mode and computed reads of definitions.
    bool computed = !(sub.kind == ExprKind::Ident && sub.identKind == IdentKind::Index);
    if (read.boundary.empty() && (t.role == TensorRole::Input || !computed))
      return;
    // Halide already limits a tensor to 2^31 - 1 elements, so reaching at most the dimension's
    // extent is safe; what can go further must stay below 2^31 once multiplied by the stride.
    Bound extent = d < t.extents.size() ? bounds(*t.extents[d]).hi : std::nullopt;
    std::vector<Affine> reach; // how far above and below 0 it goes, where that matters
    std::string reaches;
    Bound sides[2] = {b.hi, scaled(b.lo, -1)};
    for (int i = 0; i < 2; ++i) {
      const Bound &side = sides[i];
      if (!side || provablyNonPositive(side))
        continue;
      if (side->isConst() && side->c <= side->den)
        continue;
      if (extent && provablyNonPositive(sum(side, scaled(extent, -1))))
        continue;
      reach.push_back(side->ceiled());
      reaches +=
          (reaches.empty() ? "" : " and ") + (i == 0 ? side->str() : scaled(side, -1)->str());
    }
    if (reach.empty())
      return;
    // The stride: the extents of the inner dimensions. Literal factors divide the limit now,
    // sizes (and other extents) at call time; an empty dimension makes the reads moot.
    int64_t limit = kInt32Max;
    std::vector<const Expr *> factors, symbolic;
    for (size_t e = d + 1; e < t.extents.size(); ++e)
      factorsOf(*t.extents[e], factors);
    for (const Expr *f : factors) {
      if (f->hasIntValue || f->kind == ExprKind::Number) {
        int64_t v = f->hasIntValue ? f->intValue : (int64_t)f->number;
        if (v > 0)
          limit /= v;
      } else {
        symbolic.push_back(f);
      }
    }
    Loc loc = sub.loc;
    auto limitExpr = [&] {
      ExprPtr k = number(limit, loc);
      for (const Expr *f : symbolic)
        k = binary("/", std::move(k), f->clone());
      return k;
    };
    ExprPtr cond;
    auto conj = [&](ExprPtr c) {
      cond = cond ? binary("&&", std::move(cond), std::move(c)) : std::move(c);
    };
    for (Affine &r : reach) {
      // Terms that lower the bound are left out: the check is then stricter, never wrong.
      int64_t c = std::max<int64_t>(r.c, 0);
      std::vector<std::pair<std::string, int64_t>> terms;
      for (const auto &[n, a] : r.terms)
        if (a > 0)
          terms.push_back({n, a});
      if (terms.empty() && symbolic.empty()) {
        if (c > limit) {
          diags_.error(loc, where() + ", reaches " + reaches + s_.constNote(sub) +
                                ", which times the stride of '" + read.name + "' dimension " +
                                std::to_string(d) + " overflows 32 bits");
          return;
        }
        continue;
      }
      // c + a1*S1 + a2*S2 + ... <= limit, tested term by term so that no step overflows.
      if (c > 0 && !symbolic.empty())
        conj(binary("<=", number(c, loc), limitExpr()));
      ExprPtr rest = c > 0 ? binary("-", limitExpr(), number(c, loc)) : limitExpr();
      for (const auto &[n, a] : terms) {
        // a * S <= rest <= limit < a leaves S = 0 (and a does not fit a 32-bit literal).
        if (a > limit) {
          conj(binary("<=", sizeRef(n, loc), number(0, loc)));
          continue;
        }
        ExprPtr room = a == 1 ? rest->clone() : binary("/", rest->clone(), number(a, loc));
        conj(binary("<=", sizeRef(n, loc), std::move(room)));
        ExprPtr used = a == 1 ? sizeRef(n, loc) : binary("*", number(a, loc), sizeRef(n, loc));
        rest = binary("-", std::move(rest), std::move(used));
      }
    }
    if (!cond)
      return;
    for (auto it = symbolic.rbegin(); it != symbolic.rend(); ++it)
      cond = binary("||", binary("<=", (*it)->clone(), number(0, loc)), std::move(cond));
    std::string key = exprToString(*cond);
    if (!s_.overflowChecks_.insert(key).second)
      return;
    std::string stride;
    for (const Expr *f : factors)
      stride += (stride.empty() ? "" : " * ") + exprToString(*f);
    Kernel::Requirement req;
    req.loc = loc;
    req.cond = std::move(cond);
    req.message = "32-bit index overflow: " + where() + ", reaches " + reaches + s_.constNote(sub) +
                  ", and that times " + (stride.empty() ? "1" : stride) + " (the stride of '" +
                  read.name + "' dimension " + std::to_string(d) + ") must stay below 2^31";
    k_.requirements.push_back(std::move(req));
  }
};

void KernelSema::checkSubscripts(const Expr &rhs, bool listsOnly) {
  SubscriptCheck(*this, listsOnly).checkSubscripts(rhs);
}

} // namespace attnc::dsl::sema
