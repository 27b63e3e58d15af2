// Semantic analysis of .attn kernels: every rule here has a diagnostic with a source location.
#include "attnc/dsl/Sema.h"

#include "attnc/dsl/Names.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <optional>
#include <set>

namespace attnc::dsl {

namespace {

struct Builtin {
  const char *name;
  int arity;
};
const Builtin kBuiltins[] = {
    {"exp", 1},    {"log", 1},  {"sqrt", 1}, {"rsqrt", 1}, {"sin", 1},
    {"cos", 1},    {"tanh", 1}, {"erf", 1},  {"abs", 1},   {"floor", 1},
    {"ifloor", 1}, {"pow", 2},  {"min", 2},  {"max", 2},   {"select", 3},
};

const Builtin *findBuiltin(const std::string &n) {
  for (const auto &b : kBuiltins)
    if (n == b.name)
      return &b;
  return nullptr;
}

// Extent of a dimension whose range was already reported as unknown; never compared.
const char *const kUnknownExtent = "<unknown>";

bool isReservedKeyword(const std::string &n) {
  return n == "sum" || n == "mean" || n == "softmax" || n == "f32" || n == "i32";
}

// Functions (`def`) of a module, with what each parameter is: found once, before any kernel.
struct FunctionInfo {
  enum class Param { Unused, Scalar, Tensor };
  FunctionDef *def = nullptr;
  std::vector<Param> params;
  std::vector<Loc> paramUse;     // first use of each parameter
  std::vector<size_t> paramUses; // number of uses of each parameter in the body
  int state = 0;                 // 0: not analysed, 1: in progress, 2: done
  bool ok = false;               // analysed without errors
};
using FunctionTable = std::map<std::string, FunctionInfo>;

// A name visible in an expression: an index, or a value bound by `let`.
struct ScopeEntry {
  std::string name;
  IndexDecl *index = nullptr;
  Expr *let = nullptr;
};

// Limits on function expansion, so that no input makes Sema (or any later recursive walk) run
// out of stack or memory.
constexpr int kMaxExpansionDepth = 32;
constexpr int kMaxCheckDepth = 4000;
constexpr size_t kMaxExpandedNodes = 1000000;
// Definitions per kernel: Halide's compile time grows faster than their number (a chain of 1000
// pointwise definitions compiles in about a minute, 10000 not in hours).
constexpr size_t kMaxDefinitions = 1000;

constexpr int64_t kInt32Max = 2147483647, kInt32Min = -2147483647 - 1;
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

int64_t floorDiv(int64_t a, int64_t b) {
  int64_t q = a / b, r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q;
}

size_t countNodes(const Expr &e) {
  size_t n = 1;
  for (const auto &a : e.args)
    n += countNodes(*a);
  if (e.body)
    n += countNodes(*e.body);
  if (e.where)
    n += countNodes(*e.where);
  for (const auto &d : e.reduceIndices)
    if (d.range)
      n += countNodes(*d.range->lo) + countNodes(*d.range->hi);
  return n;
}

// Every identifier spelled in a kernel, so that names made up for expanded functions are new.
void collectNames(const Expr &e, std::set<std::string> &out) {
  if (!e.name.empty())
    out.insert(e.name);
  for (const auto &a : e.args)
    collectNames(*a, out);
  if (e.body)
    collectNames(*e.body, out);
  if (e.where)
    collectNames(*e.where, out);
  for (const auto &d : e.reduceIndices) {
    out.insert(d.name);
    if (d.range)
      collectNames(*d.range->lo, out), collectNames(*d.range->hi, out);
  }
}

// A number as the language writes it, with an optional sign: digits, an optional fraction and an
// optional exponent (no hex, no blanks, no inf or nan).
bool isLanguageNumber(const std::string &s) {
  size_t i = 0, n = s.size();
  if (i < n && (s[i] == '-' || s[i] == '+'))
    ++i;
  size_t digits = 0;
  while (i < n && std::isdigit((unsigned char)s[i]))
    ++i, ++digits;
  if (i < n && s[i] == '.') {
    ++i;
    while (i < n && std::isdigit((unsigned char)s[i]))
      ++i, ++digits;
  }
  if (digits == 0)
    return false;
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < n && (s[i] == '-' || s[i] == '+'))
      ++i;
    size_t exp = 0;
    while (i < n && std::isdigit((unsigned char)s[i]))
      ++i, ++exp;
    if (exp == 0)
      return false;
  }
  return i == n;
}

bool isReductionName(const std::string &n) {
  return n == "sum" || n == "mean" || n == "max" || n == "min";
}

// Candidate extents of an index from its uses as a bare tensor subscript.
struct RangeUse {
  std::string extent; // printed extent expression
  const Expr *extentExpr;
  std::string origin; // "k dimension 2 (Nk)"
  Loc loc;
};

class KernelSema {
public:
  KernelSema(Kernel &k, DiagEngine &d, const SemaOptions &o, FunctionTable &fns)
      : k_(k), diags_(d), opts_(o), functions_(fns) {}

  void run() {
    for (auto *list : {&k_.inputs, &k_.outputs})
      for (auto &t : *list) {
        usedNames_.insert(t->name);
        for (const DimSpec &d : t->dims) {
          usedNames_.insert(d.symbol);
          for (const DimFactor &f : d.factors)
            usedNames_.insert(f.symbol);
        }
      }
    for (auto &c : k_.consts)
      usedNames_.insert(c.name);
    for (auto &def : k_.defs) {
      usedNames_.insert(def->name);
      for (auto &idx : def->indices)
        usedNames_.insert(idx.name);
      collectNames(*def->rhs, usedNames_);
    }
    declareTensors();
    declareConsts();
    for (auto &def : k_.defs)
      definitionNames_.insert(def->name);
    for (auto &r : k_.requirements)
      checkRequirement(r);
    if (k_.defs.size() > kMaxDefinitions)
      diags_.error(k_.defs[kMaxDefinitions]->loc,
                   "kernel '" + k_.name + "' has more than " + std::to_string(kMaxDefinitions) +
                       " definitions, the most a kernel may have (compiling it would take hours)");
    for (size_t i = 0; i < k_.defs.size(); ++i)
      analyzeDefinition(*k_.defs[i]);
    for (auto &o : k_.outputs)
      if (!o->def)
        diags_.error(o->loc, "output '" + o->name + "' is never defined");
  }

private:
  Kernel &k_;
  DiagEngine &diags_;
  const SemaOptions &opts_;
  std::map<std::string, TensorDecl *> tensors_;
  std::map<std::string, Loc> sizeLocs_;
  std::map<std::string, ConstDecl *> consts_;
  FunctionTable &functions_;
  std::set<std::string> definitionNames_;
  std::vector<ScopeEntry> scope_;
  std::map<const IndexDecl *, std::vector<RangeUse>> uses_;
  const Definition *current_ = nullptr;
  std::set<std::string> usedNames_;       // for fresh names of expanded functions' binders
  std::map<std::string, int> nextSuffix_; // freshName: the first suffix not yet tried per base
  std::vector<const FunctionInfo *> expanding_; // calls being expanded, outermost first
  size_t expandedNodes_ = 0;
  int checkDepth_ = 0;
  bool tooDeepReported_ = false;
  bool inSoftmax_ = false; // checking a softmax score or mask: `.exclude` reads are allowed
  std::set<const IndexDecl *> badRange_;       // indices whose explicit range was rejected
  std::map<std::string, std::string> spelled_; // fresh name of an expanded binder -> its spelling
  std::set<std::string> overflowChecks_;       // conditions of the generated 32-bit requirements
  std::map<const Expr *, Bounds> letBounds_;   // bounds() of `let` values, per definition

  // How diagnostics name an index: as the source spells it, not as renamed by an expansion.
  const std::string &shown(const std::string &n) const {
    auto it = spelled_.find(n);
    return it == spelled_.end() ? n : it->second;
  }

  // --- names -------------------------------------------------------------------------------
  bool checkNewName(const std::string &name, Loc loc, const char *what) {
    if (name.find("__") != std::string::npos) {
      diags_.error(loc, std::string(what) + " name '" + name +
                            "' contains '__', which is reserved for compiler-generated names");
      return false;
    }
    if (findBuiltin(name) || isReservedKeyword(name)) {
      diags_.error(loc, std::string(what) + " name '" + name +
                            "' is reserved (a builtin function or keyword)");
      return false;
    }
    if (auto it = functions_.find(name); it != functions_.end()) {
      diags_.error(loc, std::string(what) + " name '" + name + "' is the name of a function");
      diags_.note(it->second.def->loc, "function '" + name + "' is defined here");
      return false;
    }
    return true;
  }

  void declareTensors() {
    // A name rejected here is still declared, so later uses report no follow-on errors.
    auto declare = [&](TensorDecl &t) {
      checkNewName(t.name, t.loc, t.role == TensorRole::Input ? "input" : "output");
      auto it = tensors_.find(t.name);
      if (it != tensors_.end()) {
        diags_.error(t.loc, "redefinition of tensor '" + t.name + "'");
        diags_.note(it->second->loc, "'" + t.name + "' was first declared here");
        return;
      }
      tensors_[t.name] = &t;
    };
    for (auto &t : k_.inputs)
      declare(*t);
    for (auto &t : k_.outputs)
      declare(*t);
    // Sizes are bound by the inputs, in order; outputs may only use bound sizes.
    for (auto &t : k_.inputs) {
      for (size_t i = 0; i < t->dims.size(); ++i) {
        const DimSpec &d = t->dims[i];
        if (d.symbol.empty() || sizeLocs_.count(d.symbol))
          continue;
        if (tensors_.count(d.symbol)) {
          diags_.error(d.loc, "size '" + d.symbol + "' has the name of a tensor");
          continue;
        }
        checkNewName(d.symbol, d.loc, "size"); // declared even when rejected: no follow-on errors
        sizeLocs_[d.symbol] = d.loc;
        k_.sizes.push_back({d.symbol, t.get(), (int)i});
      }
    }
    for (auto &t : k_.outputs)
      for (const DimSpec &d : t->dims) {
        auto unbound = [&](const std::string &sym, Loc loc) {
          if (!sym.empty() && !sizeLocs_.count(sym))
            diags_.error(loc, "size '" + sym + "' of output '" + t->name +
                                  "' is not a dimension of any input");
        };
        unbound(d.symbol, d.loc);
        for (const DimFactor &f : d.factors)
          unbound(f.symbol, f.loc);
      }
    for (auto *list : {&k_.inputs, &k_.outputs})
      for (auto &t : *list)
        for (const DimSpec &d : t->dims)
          t->extents.push_back(dimExpr(d));
  }

  // The extent of a declared dimension as an integer expression. A product `M * D` becomes the
  // left-nested product of its factors, spelled "(M * D)" by exprToString, exactly as a range
  // bound `0..M * D` is: the consistency checks compare extents by that spelling.
  ExprPtr dimExpr(const DimSpec &d) {
    if (d.isProduct()) {
      ExprPtr e;
      for (const DimFactor &f : d.factors) {
        ExprPtr x = factorExpr(f.symbol, f.value, f.loc);
        if (!e) {
          e = std::move(x);
          continue;
        }
        auto m = std::make_unique<Expr>(ExprKind::Binary, d.loc);
        m->name = "*";
        m->type = ScalarType::Int;
        m->depth = std::max(e->depth, x->depth) + 1;
        m->args.push_back(std::move(e));
        m->args.push_back(std::move(x));
        e = std::move(m);
      }
      return e;
    }
    return factorExpr(d.symbol, d.value, d.loc);
  }

  static ExprPtr factorExpr(const std::string &symbol, long long value, Loc loc) {
    if (symbol.empty()) {
      auto e = std::make_unique<Expr>(ExprKind::Number, loc);
      e->number = (double)value;
      e->isIntLiteral = true;
      e->type = ScalarType::Int;
      return e;
    }
    auto e = std::make_unique<Expr>(ExprKind::Ident, loc);
    e->name = symbol;
    e->identKind = IdentKind::Size;
    e->type = ScalarType::Int;
    return e;
  }

  void declareConsts() {
    for (auto &c : k_.consts) {
      checkNewName(c.name, c.loc, "constant"); // declared even when rejected: no follow-on errors
      if (tensors_.count(c.name) || sizeLocs_.count(c.name) || consts_.count(c.name)) {
        diags_.error(c.loc, "redefinition of '" + c.name + "'");
        continue;
      }
      std::string err;
      bool isInt = true;
      double v = fold(*c.value, &isInt, &err);
      if (!err.empty()) {
        if (err == kOverflow)
          diags_.error(c.value->loc,
                       "constant '" + c.name +
                           "' does not fit in a 32-bit integer (an intermediate value overflows)");
        else
          diags_.error(c.value->loc,
                       "constant '" + c.name + "' must be a compile-time number: " + err);
        c.folded = 0; // still declared, so its uses report no follow-on errors
        c.isInt = isInt;
        consts_[c.name] = &c;
        continue;
      }
      c.folded = v;
      c.isInt = isInt;
      // A -D override replaces the value before later constants are computed from it.
      for (const auto &[name, value] : opts_.defines) {
        if (name != c.name)
          continue;
        char *end = nullptr;
        double dv = std::strtod(value.c_str(), &end);
        if (!isLanguageNumber(value) || *end != '\0' || !std::isfinite(dv)) {
          diags_.error(Loc{}, "-D " + name + "=" + value + ": '" + value + "' is not a number");
        } else if (!c.isInt && std::abs(dv) > 3.4028234663852886e38) {
          diags_.error(Loc{}, "-D " + name + "=" + value + ": " + value +
                                  " is not finite as a 32-bit float");
        } else if (c.isInt && value.find_first_of(".eE") != std::string::npos) {
          diags_.error(Loc{}, "-D " + name + "=" + value + ": constant '" + name +
                                  "' is an integer; write it without '.' or an exponent");
        } else if (c.isInt && (dv > 2147483647.0 || dv < -2147483648.0)) {
          diags_.error(Loc{}, "-D " + name + "=" + value + ": " + value +
                                  " does not fit in a 32-bit integer");
        } else {
          c.folded = dv;
          c.overridden = true;
        }
      }
      if (c.isInt && (c.folded > 2147483647.0 || c.folded < -2147483648.0))
        diags_.error(c.loc, "constant '" + c.name + "' does not fit in a 32-bit integer");
      consts_[c.name] = &c;
    }
  }

  static constexpr const char *kOverflow = "an intermediate value does not fit in a 32-bit integer";

  // Folds a compile-time constant expression (numbers, earlier constants, arithmetic). Integer
  // arithmetic is 32-bit, as at run time: every intermediate integer must fit.
  double fold(const Expr &e, bool *isInt, std::string *err) {
    double v = foldNode(e, isInt, err);
    if (err->empty() && *isInt && (v > 2147483647.0 || v < -2147483648.0) &&
        e.kind != ExprKind::Number && e.kind != ExprKind::Ident)
      *err = kOverflow;
    return v;
  }

  double foldNode(const Expr &e, bool *isInt, std::string *err) {
    switch (e.kind) {
    case ExprKind::Number:
      *isInt = e.isIntLiteral;
      return e.number;
    case ExprKind::Ident: {
      auto it = consts_.find(e.name);
      if (it == consts_.end()) {
        *err = "'" + e.name + "' is not an earlier constant";
        return 0;
      }
      *isInt = it->second->isInt;
      return it->second->folded;
    }
    case ExprKind::Unary: {
      double v = fold(*e.args[0], isInt, err);
      if (e.name == "-")
        return -v;
      *err = "operator '" + e.name + "' is not allowed here";
      return 0;
    }
    case ExprKind::Binary: {
      bool ia = true, ib = true;
      double a = fold(*e.args[0], &ia, err), b = fold(*e.args[1], &ib, err);
      *isInt = ia && ib;
      if (!err->empty())
        return 0;
      if (e.name == "+")
        return a + b;
      if (e.name == "-")
        return a - b;
      if (e.name == "*")
        return a * b;
      if (e.name == "/" || e.name == "%") {
        if (b == 0) {
          *err = "division by zero";
          return 0;
        }
        if (!*isInt)
          return e.name == "/" ? a / b : std::fmod(a, b);
        long long x = (long long)a, y = (long long)b;
        long long q = x / y, r = x % y;
        if (r != 0 && ((r < 0) != (y < 0)))
          q -= 1, r += y; // floor semantics, as Halide's
        return e.name == "/" ? (double)q : (double)r;
      }
      *err = "operator '" + e.name + "' is not allowed here";
      return 0;
    }
    default:
      *err = "only numbers, earlier constants and + - * / % are allowed";
      return 0;
    }
  }

  // --- requirements --------------------------------------------------------------------------
  static bool usesSize(const Expr &e) {
    if (e.kind == ExprKind::Ident && e.identKind == IdentKind::Size)
      return true;
    for (const auto &a : e.args)
      if (usesSize(*a))
        return true;
    return e.body && usesSize(*e.body);
  }

  // The value of a checked condition over constants; nullopt for anything else.
  static std::optional<double> evalStatic(const Expr &e) {
    auto arg = [&](size_t i) { return evalStatic(*e.args[i]); };
    switch (e.kind) {
    case ExprKind::Number:
      return e.number;
    case ExprKind::Ident:
      if (e.identKind == IdentKind::Const)
        return e.constValue;
      return std::nullopt;
    case ExprKind::Unary: {
      auto x = arg(0);
      if (!x)
        return std::nullopt;
      return e.name == "!" ? (double)(*x == 0) : -*x;
    }
    case ExprKind::Binary: {
      auto a = arg(0), b = arg(1);
      if (!a || !b)
        return std::nullopt;
      const std::string &op = e.name;
      bool ints = e.args[0]->type == ScalarType::Int && e.args[1]->type == ScalarType::Int;
      if (op == "+")
        return *a + *b;
      if (op == "-")
        return *a - *b;
      if (op == "*")
        return *a * *b;
      if (op == "/" || op == "%") {
        if (*b == 0)
          return std::nullopt;
        if (!ints)
          return op == "/" ? std::optional<double>(*a / *b) : std::nullopt;
        long long x = (long long)*a, y = (long long)*b, q = x / y, r = x % y;
        if (r != 0 && ((r < 0) != (y < 0)))
          q -= 1, r += y;
        return op == "/" ? (double)q : (double)r;
      }
      if (op == "<")
        return (double)(*a < *b);
      if (op == "<=")
        return (double)(*a <= *b);
      if (op == ">")
        return (double)(*a > *b);
      if (op == ">=")
        return (double)(*a >= *b);
      if (op == "==")
        return (double)(*a == *b);
      if (op == "!=")
        return (double)(*a != *b);
      if (op == "&&")
        return (double)(*a != 0 && *b != 0);
      if (op == "||")
        return (double)(*a != 0 || *b != 0);
      return std::nullopt;
    }
    default:
      return std::nullopt;
    }
  }

  // Whether `e` reads a tensor or reduces: a requirement on the inputs' values (level tables,
  // index tables), checked when the kernel is called, before anything else is computed.
  static bool readsData(const Expr &e) {
    if (e.kind == ExprKind::Read || e.kind == ExprKind::Reduce)
      return true;
    for (const auto &a : e.args)
      if (readsData(*a))
        return true;
    return e.body && readsData(*e.body);
  }

  // A requirement on data may read inputs only: it runs before any definition exists.
  bool readsOnlyInputs(const Expr &e) {
    bool ok = true;
    if (e.kind == ExprKind::Read) {
      auto it = tensors_.find(e.name);
      if (it == tensors_.end() || it->second->role != TensorRole::Input) {
        if (it != tensors_.end() || definitionNames_.count(e.name)) {
          diags_.error(
              e.loc, "a requirement can read only inputs, not '" + e.name +
                         "': it is checked when the kernel is called, before anything is computed");
          ok = false;
        }
      } else if (!e.boundary.empty() && e.boundary != "none") {
        diags_.error(e.loc, "a requirement reads inputs in range; '." + e.boundary +
                                "' has no meaning here");
        ok = false;
      }
    }
    for (const auto &a : e.args)
      ok &= readsOnlyInputs(*a);
    if (e.body)
      ok &= readsOnlyInputs(*e.body);
    return ok;
  }

  void checkRequirement(Kernel::Requirement &r) {
    std::vector<std::string> inner;
    if (readsData(*r.cond)) {
      if (!readsOnlyInputs(*r.cond))
        return;
      r.isData = true;
    } else if (!isStatic(*r.cond, "a requirement", "it is checked once per call, so it", inner)) {
      return;
    }
    check(*r.cond);
    if (r.cond->type != ScalarType::Bool) {
      if (r.cond->type != ScalarType::Unknown)
        diags_.error(r.cond->loc, std::string("a requirement must be a condition, found ") +
                                      scalarTypeName(r.cond->type));
      return;
    }
    if (r.isData || usesSize(*r.cond))
      return; // checked when the kernel is called
    r.isStatic = true;
    std::optional<double> v = evalStatic(*r.cond);
    if (v && *v == 0)
      diags_.error(r.loc, Kernel::failure(r));
  }

  // --- definitions ---------------------------------------------------------------------------
  void analyzeDefinition(Definition &def) {
    current_ = &def;
    uses_.clear();
    TensorDecl *target = nullptr;
    checkNewName(def.name, def.loc,
                 "definition"); // registered even when rejected: no follow-on errors
    bool ok = true;
    if (sizeLocs_.count(def.name) || consts_.count(def.name)) {
      diags_.error(def.loc,
                   "'" + def.name + "' is a size or constant and cannot be defined as a tensor");
      ok = false;
    }
    if (ok) {
      auto it = tensors_.find(def.name);
      if (it != tensors_.end()) {
        TensorDecl *t = it->second;
        if (t->role == TensorRole::Input) {
          diags_.error(def.loc, "cannot define '" + def.name + "': it is a kernel input");
          diags_.note(t->loc, "input '" + def.name + "' is declared here");
          ok = false;
        } else if (t->def) {
          diags_.error(def.loc, "redefinition of '" + def.name + "'");
          diags_.note(t->def->loc, "'" + def.name + "' was first defined here");
          ok = false;
        } else {
          target = t;
        }
      }
    }

    // Left-hand indices.
    std::set<std::string> seen;
    for (auto &idx : def.indices) {
      if (!seen.insert(idx.name).second)
        diags_.error(idx.loc, "index '" + idx.name + "' appears twice on the left-hand side");
      checkIndexName(idx);
      if (idx.range)
        resolveRange(idx);
    }
    if (target && target->dims.size() != def.indices.size()) {
      diags_.error(def.loc, "output '" + def.name + "' has rank " +
                                std::to_string(target->dims.size()) + " but is defined with " +
                                std::to_string(def.indices.size()) + " indices");
      ok = false;
    }

    for (auto &idx : def.indices)
      scope_.push_back({idx.name, &idx, nullptr});
    if (def.rhs->kind == ExprKind::Softmax) {
      checkSoftmax(*def.rhs, def);
    } else {
      check(*def.rhs);
    }
    scope_.clear();

    // Ranges of the left-hand indices: declared output dims win, then explicit, then inferred.
    for (size_t i = 0; i < def.indices.size(); ++i) {
      IndexDecl &idx = def.indices[i];
      if (target && i < target->dims.size()) {
        const DimSpec &d = target->dims[i];
        if (idx.range) {
          if (!isZero(*idx.range->lo) ||
              exprToString(*idx.range->hi) != exprToString(*target->extents[i]))
            diags_.error(idx.loc, "size mismatch: output '" + def.name + "' dimension " +
                                      std::to_string(i) + " is " + d.str() + ", but index '" +
                                      idx.name + "' is given the range " +
                                      exprToString(*idx.range->lo) + ".." +
                                      exprToString(*idx.range->hi));
        } else {
          idx.range = Range{zero(idx.loc), target->extents[i]->clone()};
          idx.rangeOrigin =
              "output '" + def.name + "' dimension " + std::to_string(i) + " (" + d.str() + ")";
          idx.rangeOriginLoc = d.loc;
        }
      }
      settleRange(idx);
      if (idx.range && !isZero(*idx.range->lo))
        diags_.error(idx.loc, "the range of left-hand index '" + idx.name + "' must start at 0");
    }
    if (!ok) {
      current_ = nullptr;
      return;
    }

    // Even a definition with errors is registered (as f32 when its type is unknown), so later
    // definitions that read it do not report follow-on errors.
    ScalarType t = def.rhs->type;
    if (t == ScalarType::Bool) {
      diags_.error(def.rhs->loc, "definition of '" + def.name +
                                     "' is a boolean; use select(cond, 1.0, 0.0) for a mask value");
      t = ScalarType::Float;
    }
    if (!target) {
      auto local = std::make_unique<TensorDecl>();
      local->name = def.name;
      local->loc = def.loc;
      local->role = TensorRole::Local;
      local->elemType = t == ScalarType::Int ? ElemType::I32 : ElemType::F32;
      target = local.get();
      tensors_[def.name] = target;
      k_.locals.push_back(std::move(local));
      for (auto &idx : def.indices) {
        if (idx.range) {
          target->extents.push_back(idx.range->hi->clone());
        } else { // already reported; any extent keeps the rank right for later reads
          auto unknown = std::make_unique<Expr>(ExprKind::Ident, idx.loc);
          unknown->name = kUnknownExtent;
          unknown->type = ScalarType::Int;
          target->extents.push_back(std::move(unknown));
        }
      }
    } else if (target->elemType == ElemType::I32 && t == ScalarType::Float) {
      diags_.error(def.rhs->loc, "type mismatch: output '" + def.name +
                                     "' is i32 but its definition is a float expression");
    }
    target->def = &def;
    def.tensor = target;
    current_ = nullptr;
    // Every index range is settled now, so subscripts can be bounded.
    letBounds_.clear();
    checkSubscripts(*def.rhs);
  }

  void checkIndexName(const IndexDecl &idx) {
    if (!checkNewName(idx.name, idx.loc, "index"))
      return;
    if (tensors_.count(idx.name) || definitionNames_.count(idx.name))
      diags_.error(idx.loc, "index '" + shown(idx.name) + "' has the name of a tensor");
    else if (sizeLocs_.count(idx.name))
      diags_.error(idx.loc, "index '" + shown(idx.name) + "' has the name of a size");
    else if (consts_.count(idx.name))
      diags_.error(idx.loc, "index '" + shown(idx.name) + "' has the name of a constant");
    for (const ScopeEntry &s : scope_)
      if (s.name == idx.name)
        diags_.error(idx.loc, "index '" + shown(idx.name) + "' shadows an enclosing " +
                                  (s.let ? "'let' of" : "index of") + " the same name");
  }

  // A range is fixed for the whole call: its bounds may use sizes, constants, numbers, functions
  // of those and lets inside the bound, but no index, outer let or tensor. Returns false after
  // reporting the first offending name.
  bool rangeIsStatic(const Expr &e, const IndexDecl &idx, std::vector<std::string> &inner) {
    return isStatic(e, "the range of '" + shown(idx.name) + "'",
                    "a range is fixed for the whole call, so its bounds", inner);
  }

  bool isStatic(const Expr &e, const std::string &subject, const std::string &why,
                std::vector<std::string> &inner) {
    auto bad = [&](const std::string &what) {
      diags_.error(e.loc, subject + " cannot use " + what + ": " + why +
                              " may use only sizes, constants and numbers");
      return false;
    };
    switch (e.kind) {
    case ExprKind::Ident:
      if (std::find(inner.begin(), inner.end(), e.name) != inner.end())
        return true;
      if (const ScopeEntry *se = lookup(e.name))
        return bad((se->let ? "the 'let' value '" : "the index '") + e.name + "'");
      if (tensors_.count(e.name) || definitionNames_.count(e.name))
        return bad("the tensor '" + e.name + "'");
      return true;
    case ExprKind::Read:
      if (tensors_.count(e.name) || definitionNames_.count(e.name))
        return bad("the tensor '" + e.name + "'");
      break;
    case ExprKind::Reduce:
      return bad("a reduction");
    case ExprKind::Softmax:
      return true; // reported where it stands
    case ExprKind::Let: {
      if (!isStatic(*e.args[0], subject, why, inner))
        return false;
      inner.push_back(e.name);
      bool ok = isStatic(*e.body, subject, why, inner);
      inner.pop_back();
      return ok;
    }
    default:
      break;
    }
    for (const auto &a : e.args)
      if (!isStatic(*a, subject, why, inner))
        return false;
    return true;
  }

  void resolveRange(IndexDecl &idx) {
    for (Expr *e : {idx.range->lo.get(), idx.range->hi.get()}) {
      std::vector<std::string> inner;
      if (!rangeIsStatic(*e, idx, inner)) {
        idx.range.reset();
        badRange_.insert(&idx);
        return;
      }
    }
    for (Expr *e : {idx.range->lo.get(), idx.range->hi.get()}) {
      // Range ends see sizes and constants, not indices: the range of an index is fixed per kernel call.
      std::vector<ScopeEntry> saved;
      saved.swap(scope_);
      check(*e);
      scope_.swap(saved);
      if (e->type != ScalarType::Int && e->type != ScalarType::Unknown)
        diags_.error(e->loc, "range of index '" + shown(idx.name) + "' must be an integer, found " +
                                 scalarTypeName(e->type));
    }
    // Both ends fit in 32 bits (foldInt); so must the number of points, Halide's loop extent.
    const Expr &lo = *idx.range->lo, &hi = *idx.range->hi;
    if (lo.hasIntValue && hi.hasIntValue && hi.intValue - lo.intValue > kInt32Max)
      diags_.error(idx.loc, "the range " + std::to_string(lo.intValue) + ".." +
                                std::to_string(hi.intValue) + " of index '" + shown(idx.name) +
                                "' has " + std::to_string(hi.intValue - lo.intValue) +
                                " points, more than a 32-bit extent holds" + constNote(lo, &hi));
  }

  static bool isZero(const Expr &e) { return e.kind == ExprKind::Number && e.number == 0; }
  static ExprPtr zero(Loc loc) {
    auto z = std::make_unique<Expr>(ExprKind::Number, loc);
    z->isIntLiteral = true;
    z->type = ScalarType::Int;
    return z;
  }

  // Fixes an index's range from its explicit range or its uses, reporting conflicts.
  void settleRange(IndexDecl &idx) {
    auto &uses = uses_[&idx];
    if (badRange_.count(&idx))
      return; // already reported
    if (!idx.range) {
      if (uses.empty()) {
        diags_.error(idx.loc, "cannot infer the range of index '" + shown(idx.name) +
                                  "': it is never used directly as a tensor index; give it as '" +
                                  shown(idx.name) + " in 0..N'");
        return;
      }
      idx.range = Range{zero(idx.loc), uses[0].extentExpr->clone()};
      idx.rangeOrigin = uses[0].origin;
      idx.rangeOriginLoc = uses[0].loc;
    }
    if (!isZero(*idx.range->lo))
      return; // an offset range is a deliberate sub-range
    std::string have = exprToString(*idx.range->hi);
    for (const RangeUse &u : uses) {
      if (u.extent == have)
        continue;
      std::string where =
          idx.rangeOrigin.empty() ? "its declared range 0.." + have : idx.rangeOrigin;
      diags_.error(u.loc, "inconsistent sizes for index '" + shown(idx.name) + "': " + u.origin +
                              " here, but " + where);
      if (idx.rangeOriginLoc.valid())
        diags_.note(idx.rangeOriginLoc, "the range of '" + shown(idx.name) + "' comes from here");
      return;
    }
  }

  // --- 32-bit integer arithmetic --------------------------------------------------------------
  // Integer arithmetic is 32-bit at run time, and Halide refuses (or, where sizes are involved,
  // miscompiles) index arithmetic that overflows. What is known at compile time is checked here:
  // constant expressions must fit, and so must constant subscripts with room for their spans.
  // Subscripts that a boundary mode (or a computed read of a definition) clamps may go far outside
  // the tensor, and Halide multiplies them by the tensor's strides: where that can overflow for
  // some sizes, a requirement on the sizes is added, checked when the kernel is called.

  // " (r = 536870912 from -D, w = 3)": the integer constants `a` (and `b`) use, for messages.
  std::string constNote(const Expr &a, const Expr *b = nullptr) {
    std::vector<std::string> parts;
    std::set<std::string> seen;
    std::function<void(const Expr &)> walk = [&](const Expr &e) {
      if (e.kind == ExprKind::Ident && e.identKind == IdentKind::Const &&
          seen.insert(e.name).second) {
        auto it = consts_.find(e.name);
        bool fromD = it != consts_.end() && it->second->overridden;
        parts.push_back(e.name + " = " + std::to_string((long long)e.constValue) +
                        (fromD ? " from -D" : ""));
      }
      if (e.kind == ExprKind::Ident && e.identKind == IdentKind::Let && e.let)
        walk(*e.let->args[0]);
      for (const auto &x : e.args)
        walk(*x);
      if (e.body)
        walk(*e.body);
    };
    walk(a);
    if (b)
      walk(*b);
    std::string s;
    for (const std::string &p : parts)
      s += (s.empty() ? " (" : ", ") + p;
    return s.empty() ? s : s + ")";
  }

  // The value of an int expression of numbers and integer constants, which must fit in 32 bits.
  void foldInt(Expr &e) {
    e.hasIntValue = false;
    if (e.type != ScalarType::Int)
      return;
    auto val = [](const Expr &x) {
      return x.hasIntValue ? std::optional<int64_t>(x.intValue) : std::nullopt;
    };
    std::optional<int64_t> v;
    switch (e.kind) {
    case ExprKind::Number:
      if (e.isIntLiteral)
        v = (int64_t)e.number;
      break;
    case ExprKind::Ident:
      if (e.identKind == IdentKind::Const)
        v = (int64_t)e.constValue;
      else if (e.identKind == IdentKind::Let && e.let)
        v = val(*e.let->args[0]);
      break;
    case ExprKind::Let:
      v = val(*e.body);
      break;
    case ExprKind::Unary:
      if (e.name == "-" && val(*e.args[0]))
        v = -*val(*e.args[0]);
      break;
    case ExprKind::Binary: {
      auto a = val(*e.args[0]), b = val(*e.args[1]);
      if (!a || !b)
        break;
      const std::string &op = e.name;
      if (op == "+")
        v = *a + *b;
      else if (op == "-")
        v = *a - *b;
      else if (op == "*")
        v = *a * *b; // both fit in 32 bits, so the product fits in 64
      else if ((op == "/" || op == "%") && *b != 0)
        v = op == "/" ? floorDiv(*a, *b) : *a - floorDiv(*a, *b) * *b;
      break;
    }
    default:
      break;
    }
    if (!v)
      return;
    if (*v > kInt32Max || *v < kInt32Min) {
      diags_.error(e.loc, "integer arithmetic overflows 32 bits: " + exprToString(e) + " is " +
                              std::to_string(*v) + constNote(e));
      return;
    }
    e.hasIntValue = true;
    e.intValue = *v;
  }

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

  void checkSubscripts(const Expr &e) {
    if (e.kind == ExprKind::Read && e.tensor && e.args.size() == e.tensor->rank())
      for (size_t d = 0; d < e.args.size(); ++d)
        checkSubscript(e, d);
    for (const auto &a : e.args)
      checkSubscripts(*a);
    if (e.body)
      checkSubscripts(*e.body);
    if (e.where)
      checkSubscripts(*e.where);
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
        if (!overflowChecks_.insert("subscript " + exprToString(sub) + " " + x->str()).second)
          return;
        diags_.error(sub.loc, where() + ", reaches " + x->str() + constNote(sub) +
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
        diags_.error(sub.loc, where() + ", is " + std::to_string(sub.intValue) + constNote(sub) +
                                  ": a read before the first element of '" + read.name +
                                  "' (a boundary mode such as '" + read.name +
                                  ".zero(...)' reads zeros there)");
        return;
      }
      if (first && first->isConst() && first->den == 1 && first->c + offset < 0) {
        diags_.error(sub.loc, where() + ", is " + std::to_string(first->c + offset) + " where '" +
                                  shown(index->name) + "' is " + std::to_string(first->c) +
                                  constNote(sub) + ": a read before the first element of '" +
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
          diags_.error(loc, where() + ", reaches " + reaches + constNote(sub) +
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
    if (!overflowChecks_.insert(key).second)
      return;
    std::string stride;
    for (const Expr *f : factors)
      stride += (stride.empty() ? "" : " * ") + exprToString(*f);
    Kernel::Requirement req;
    req.loc = loc;
    req.cond = std::move(cond);
    req.message = "32-bit index overflow: " + where() + ", reaches " + reaches + constNote(sub) +
                  ", and that times " + (stride.empty() ? "1" : stride) + " (the stride of '" +
                  read.name + "' dimension " + std::to_string(d) + ") must stay below 2^31";
    k_.requirements.push_back(std::move(req));
  }

  // --- expressions ---------------------------------------------------------------------------
  const ScopeEntry *lookup(const std::string &name) {
    for (auto it = scope_.rbegin(); it != scope_.rend(); ++it)
      if (it->name == name)
        return &*it;
    return nullptr;
  }

  void checkSoftmax(Expr &e, Definition &def) {
    std::set<std::string> seen;
    for (size_t i = 0; i < e.softmaxAxes.size(); ++i) {
      const std::string &ax = e.softmaxAxes[i];
      bool free = false;
      for (auto &idx : def.indices)
        free |= idx.name == ax;
      if (!free)
        diags_.error(e.softmaxAxisLocs[i],
                     "softmax over '" + ax + "', which is not a free index of '" + def.name +
                         "' (softmax normalises over indices of the left-hand side)");
      if (!seen.insert(ax).second)
        diags_.error(e.softmaxAxisLocs[i], "softmax index '" + ax + "' appears twice");
    }
    inSoftmax_ = true;
    if (e.where) {
      check(*e.where);
      if (e.where->type != ScalarType::Bool && e.where->type != ScalarType::Unknown)
        diags_.error(e.where->loc,
                     std::string("softmax mask after 'where' must be a condition, found ") +
                         scalarTypeName(e.where->type));
    }
    check(*e.body);
    inSoftmax_ = false;
    if (e.body->type == ScalarType::Bool)
      diags_.error(e.body->loc, "softmax of a condition; scores must be numbers");
    e.type = ScalarType::Float;
  }

  static ScalarType promote(ScalarType a, ScalarType b) {
    if (a == ScalarType::Unknown || b == ScalarType::Unknown)
      return ScalarType::Unknown;
    if (a == ScalarType::Float || b == ScalarType::Float)
      return ScalarType::Float;
    return ScalarType::Int;
  }

  bool requireNumeric(const Expr &e, const std::string &what) {
    if (e.type == ScalarType::Bool) {
      diags_.error(e.loc, "type mismatch: " + what + " must be a number, found a condition");
      return false;
    }
    return e.type != ScalarType::Unknown;
  }

  void check(Expr &e) {
    if (checkDepth_ >= kMaxCheckDepth) {
      if (!tooDeepReported_)
        diags_.error(e.loc, "expression is nested too deeply after expanding functions");
      tooDeepReported_ = true;
      e.type = ScalarType::Unknown;
      return;
    }
    ++checkDepth_;
    checkNode(e);
    foldInt(e);
    --checkDepth_;
  }

  void checkNode(Expr &e) {
    switch (e.kind) {
    case ExprKind::Number:
      e.type = e.isIntLiteral ? ScalarType::Int : ScalarType::Float;
      return;
    case ExprKind::Ident:
      return checkIdent(e);
    case ExprKind::Read:
      return checkRead(e);
    case ExprKind::Call:
      return checkCall(e);
    case ExprKind::Unary: {
      check(*e.args[0]);
      ScalarType t = e.args[0]->type;
      if (e.name == "!") {
        if (t != ScalarType::Bool && t != ScalarType::Unknown)
          diags_.error(e.loc, "type mismatch: '!' needs a condition");
        e.type = ScalarType::Bool;
      } else {
        requireNumeric(*e.args[0], "the operand of unary '-'");
        e.type = t == ScalarType::Bool ? ScalarType::Unknown : t;
      }
      return;
    }
    case ExprKind::Binary:
      return checkBinary(e);
    case ExprKind::Reduce: {
      std::set<std::string> seen;
      for (auto &idx : e.reduceIndices) {
        checkIndexName(idx);
        if (!seen.insert(idx.name).second)
          diags_.error(idx.loc, "reduction index '" + shown(idx.name) + "' appears twice");
        if (idx.range)
          resolveRange(idx);
      }
      size_t depth = scope_.size();
      for (auto &idx : e.reduceIndices)
        scope_.push_back({idx.name, &idx, nullptr});
      check(*e.body);
      scope_.resize(depth);
      for (auto &idx : e.reduceIndices)
        settleRange(idx);
      requireNumeric(*e.body, std::string("the body of '") + reduceKindName(e.reduceKind) + "'");
      e.type = e.body->type == ScalarType::Bool ? ScalarType::Unknown : e.body->type;
      if (e.reduceKind == ReduceKind::Mean && e.type != ScalarType::Unknown)
        e.type = ScalarType::Float;
      return;
    }
    case ExprKind::Let: {
      check(*e.args[0]); // the value sees the enclosing scope, not its own name
      if (checkNewName(e.name, e.loc, "'let'")) {
        if (tensors_.count(e.name) || definitionNames_.count(e.name) || sizeLocs_.count(e.name) ||
            consts_.count(e.name))
          diags_.error(e.loc, "'let " + e.name + "' has the name of a tensor, size or constant");
        else if (lookup(e.name))
          diags_.error(e.loc, "'let " + e.name + "' shadows an enclosing name");
      }
      scope_.push_back({e.name, nullptr, &e});
      check(*e.body);
      scope_.pop_back();
      e.type = e.body->type;
      return;
    }
    case ExprKind::Softmax:
      diags_.error(e.loc, "softmax must be the whole right-hand side of a definition, as in 'p(i, "
                          "j) = softmax(j) s(i, j)'");
      e.type = ScalarType::Unknown;
      return;
    }
  }

  void checkIdent(Expr &e) {
    if (const ScopeEntry *se = lookup(e.name)) {
      if (se->let) {
        e.identKind = IdentKind::Let;
        e.let = se->let;
        e.type = se->let->args[0]->type;
        return;
      }
      e.identKind = IdentKind::Index;
      e.index = se->index;
      e.type = ScalarType::Int;
      return;
    }
    if (sizeLocs_.count(e.name)) {
      e.identKind = IdentKind::Size;
      e.type = ScalarType::Int;
      return;
    }
    if (auto it = consts_.find(e.name); it != consts_.end()) {
      e.identKind = IdentKind::Const;
      e.constValue = it->second->folded;
      e.type = it->second->isInt ? ScalarType::Int : ScalarType::Float;
      return;
    }
    if (tensors_.count(e.name) || definitionNames_.count(e.name))
      diags_.error(e.loc, "'" + e.name + "' is a tensor; index it, as in '" + e.name + "(...)'");
    else if (findBuiltin(e.name) || functions_.count(e.name))
      diags_.error(e.loc, "'" + e.name + "' is a function; call it, as in '" + e.name + "(x)'");
    else
      diags_.error(e.loc, "unknown identifier '" + e.name + "'");
    e.type = ScalarType::Unknown;
  }

  void checkRead(Expr &e) {
    if (!e.boundary.empty()) {
      if (findBuiltin(e.name) || (functions_.count(e.name) && !tensors_.count(e.name))) {
        diags_.error(e.loc, "boundary mode '." + e.boundary + "' applies to tensor reads, but '" +
                                e.name + "' is a function");
        e.boundary.clear();
      } else if (e.boundary == "exclude" && !inSoftmax_) {
        diags_.error(
            e.loc,
            "'" + e.name +
                ".exclude(...)' masks keys out of a softmax, so it can only be read in a softmax "
                "score or its 'where'; use '.zero' or '.clamp' elsewhere");
      }
    }
    if (findBuiltin(e.name)) {
      e.kind = ExprKind::Call;
      return checkCall(e);
    }
    auto it = tensors_.find(e.name);
    TensorDecl *t = it == tensors_.end() ? nullptr : it->second;
    // A call of a function; a local of the same name was already rejected, so the call wins.
    if ((!t && !definitionNames_.count(e.name)) || (t && t->role == TensorRole::Local)) {
      if (auto fn = functions_.find(e.name); fn != functions_.end())
        return expandCall(e, fn->second);
    }
    for (auto &a : e.args)
      check(*a);
    if (!t) {
      if (definitionNames_.count(e.name)) {
        if (current_ && current_->name == e.name)
          diags_.error(e.loc, "recursive definition: '" + e.name + "' reads itself");
        else
          diags_.error(e.loc, "'" + e.name + "' is used before its definition");
      } else if (sizeLocs_.count(e.name) || consts_.count(e.name)) {
        diags_.error(e.loc, "'" + e.name + "' is a scalar, not a tensor; it takes no indices");
      } else {
        diags_.error(e.loc, "unknown tensor or function '" + e.name + "'");
      }
      e.type = ScalarType::Unknown;
      return;
    }
    if (t->role == TensorRole::Output && !t->def) {
      if (current_ && current_->name == e.name)
        diags_.error(e.loc, "recursive definition: '" + e.name + "' reads itself");
      else
        diags_.error(e.loc, "output '" + e.name + "' is read before its definition");
      e.type = ScalarType::Unknown;
      return;
    }
    e.tensor = t;
    e.type = t->elemType == ElemType::F32 ? ScalarType::Float : ScalarType::Int;
    if (e.args.size() != t->rank()) {
      diags_.error(e.loc, "wrong number of indices: '" + e.name + "' has rank " +
                              std::to_string(t->rank()) + " but is indexed with " +
                              std::to_string(e.args.size()));
      return;
    }
    for (size_t i = 0; i < e.args.size(); ++i) {
      Expr &a = *e.args[i];
      if (a.type != ScalarType::Int && a.type != ScalarType::Unknown) {
        diags_.error(a.loc, "type mismatch: index " + std::to_string(i) + " of '" + e.name +
                                "' must be an integer, found " + scalarTypeName(a.type));
        continue;
      }
      if (a.kind == ExprKind::Ident && a.identKind == IdentKind::Index) {
        std::string extent = exprToString(*t->extents[i]);
        if (extent == kUnknownExtent)
          continue;
        std::string origin =
            "'" + e.name + "' dimension " + std::to_string(i) + " (" + extent + ")";
        uses_[a.index].push_back({extent, t->extents[i].get(), origin, a.loc});
      }
    }
  }

  void checkCall(Expr &e) {
    const Builtin *b = findBuiltin(e.name);
    for (auto &a : e.args)
      check(*a);
    if ((int)e.args.size() != b->arity) {
      diags_.error(e.loc, "'" + e.name + "' takes " + std::to_string(b->arity) + " argument" +
                              (b->arity == 1 ? "" : "s") + ", got " +
                              std::to_string(e.args.size()));
      e.type = ScalarType::Unknown;
      return;
    }
    if (e.name == "select") {
      if (e.args[0]->type != ScalarType::Bool && e.args[0]->type != ScalarType::Unknown)
        diags_.error(e.args[0]->loc,
                     "type mismatch: the first argument of 'select' must be a condition");
      bool ok = requireNumeric(*e.args[1], "'select' value") &
                requireNumeric(*e.args[2], "'select' value");
      e.type = ok ? promote(e.args[1]->type, e.args[2]->type) : ScalarType::Unknown;
      return;
    }
    bool ok = true;
    for (auto &a : e.args)
      ok &= requireNumeric(*a, "argument of '" + e.name + "'");
    if (!ok) {
      e.type = ScalarType::Unknown;
      return;
    }
    if (e.name == "ifloor" && e.args[0]->type == ScalarType::Int) {
      // Integer coordinates reaching a sampler are almost always a unit mistake (pixel indices
      // where normalised or fractional positions were meant), so they are rejected, not floored.
      diags_.error(e.args[0]->loc, "'ifloor' expects a float (a fractional coordinate), found int");
      e.type = ScalarType::Unknown;
      return;
    }
    if (e.name == "min" || e.name == "max")
      e.type = promote(e.args[0]->type, e.args[1]->type);
    else if (e.name == "abs")
      e.type = e.args[0]->type;
    else if (e.name == "ifloor")
      e.type = ScalarType::Int; // float -> int: sampling coordinates
    else
      e.type = ScalarType::Float;
  }

  void checkBinary(Expr &e) {
    check(*e.args[0]);
    check(*e.args[1]);
    ScalarType a = e.args[0]->type, b = e.args[1]->type;
    const std::string &op = e.name;
    if (op == "&&" || op == "||") {
      for (auto &x : e.args)
        if (x->type != ScalarType::Bool && x->type != ScalarType::Unknown)
          diags_.error(x->loc, "type mismatch: operands of '" + op +
                                   "' must be conditions, found " + scalarTypeName(x->type));
      e.type = ScalarType::Bool;
      return;
    }
    bool ok = requireNumeric(*e.args[0], "the left operand of '" + op + "'") &
              requireNumeric(*e.args[1], "the right operand of '" + op + "'");
    if (op == "<" || op == "<=" || op == ">" || op == ">=" || op == "==" || op == "!=") {
      e.type = ScalarType::Bool;
      return;
    }
    if (!ok) {
      e.type = ScalarType::Unknown;
      return;
    }
    if (op == "%" && (a == ScalarType::Float || b == ScalarType::Float)) {
      diags_.error(e.loc, "type mismatch: '%' needs integer operands");
      e.type = ScalarType::Unknown;
      return;
    }
    e.type = promote(a, b);
  }

  // --- function calls ------------------------------------------------------------------------
  std::string freshName(const std::string &base) {
    std::string n = base;
    // Each base resumes where it stopped: starting at 2 every time made n expansions of the same
    // binder (a `let b` in a function called in a loop of calls) cost n^2 lookups.
    int &next = nextSuffix_[base];
    for (int i = std::max(next, 2); usedNames_.count(n); ++i)
      n = base + "_" + std::to_string(i), next = i + 1;
    usedNames_.insert(n);
    if (n != base)
      spelled_[n] = shown(base);
    return n;
  }

  // An argument cheap enough to copy into every use (names, numbers, index arithmetic); one that
  // reads a tensor is bound once with `let`. Copying keeps bare indices bare, so `w(o, c)` in a
  // function still fixes the range of the caller's index `o`.
  static bool isCheap(const Expr &e) {
    if (e.kind == ExprKind::Read || e.kind == ExprKind::Reduce || e.kind == ExprKind::Let ||
        e.kind == ExprKind::Softmax)
      return false;
    for (const auto &a : e.args)
      if (!isCheap(*a))
        return false;
    return true;
  }

  struct View {
    std::string tensor;
    std::vector<const Expr *> prefix;
    Loc loc;
    std::string boundary;
  };
  struct Substitution {
    std::map<std::string, View> views;          // tensor parameters
    std::map<std::string, const Expr *> copies; // cheap scalar arguments
    std::map<std::string, std::string> renames; // let-bound parameters and the body's binders
  };

  static void collectBinders(const Expr &e, std::set<std::string> &out) {
    if (e.kind == ExprKind::Let)
      out.insert(e.name);
    for (const auto &d : e.reduceIndices)
      out.insert(d.name);
    for (const auto &a : e.args)
      collectBinders(*a, out);
    if (e.body)
      collectBinders(*e.body, out);
  }

  // The read of a tensor parameter becomes a read of the argument tensor; a boundary mode given
  // at either place applies (giving two different ones is an error).
  ExprPtr viewExpr(const View &v, std::vector<ExprPtr> extra, const std::string &boundary = "",
                   Loc useLoc = {}) {
    bool bare = extra.empty() && v.prefix.empty() && v.boundary.empty() && boundary.empty();
    auto r = std::make_unique<Expr>(bare ? ExprKind::Ident : ExprKind::Read, v.loc);
    r->name = v.tensor;
    r->boundary = v.boundary.empty() ? boundary : v.boundary;
    if (!v.boundary.empty() && !boundary.empty() && v.boundary != boundary) {
      diags_.error(v.loc, "'" + v.tensor + "." + v.boundary +
                              "(...)' is read with boundary mode '." + boundary +
                              "' in the function");
      diags_.note(useLoc, "read with '." + boundary + "' here");
    }
    for (const Expr *p : v.prefix)
      r->args.push_back(p->clone());
    for (auto &x : extra)
      r->args.push_back(std::move(x));
    return r;
  }

  ExprPtr substitute(ExprPtr e, const Substitution &sub) {
    auto rename = [&](std::string &n) {
      if (auto it = sub.renames.find(n); it != sub.renames.end())
        n = it->second;
    };
    if (e->kind == ExprKind::Ident) {
      if (auto it = sub.copies.find(e->name); it != sub.copies.end())
        return it->second->clone();
      if (auto it = sub.views.find(e->name); it != sub.views.end())
        return viewExpr(it->second, {});
      rename(e->name);
      return e;
    }
    for (auto &a : e->args)
      a = substitute(std::move(a), sub);
    if (e->body)
      e->body = substitute(std::move(e->body), sub);
    for (auto &d : e->reduceIndices) {
      rename(d.name);
      if (d.range)
        d.range->lo = substitute(std::move(d.range->lo), sub),
        d.range->hi = substitute(std::move(d.range->hi), sub);
    }
    if (e->kind == ExprKind::Let)
      rename(e->name);
    if (e->kind == ExprKind::Read) {
      if (auto it = sub.views.find(e->name); it != sub.views.end())
        return viewExpr(it->second, std::move(e->args), e->boundary, e->loc);
    }
    return e;
  }

  // Replaces the call `e` by the function's body, with parameters substituted and every name
  // the body binds renamed to a fresh one (so nothing of the caller's can be captured), then
  // checks the result as if the caller had written it.
  void expandCall(Expr &e, const FunctionInfo &fi) {
    const FunctionDef &f = *fi.def;
    auto giveUp = [&] { e.type = ScalarType::Unknown; };
    if (e.args.size() != f.params.size()) {
      diags_.error(e.loc, "function '" + f.name + "' takes " + std::to_string(f.params.size()) +
                              " argument" + (f.params.size() == 1 ? "" : "s") + ", got " +
                              std::to_string(e.args.size()));
      diags_.note(f.loc, "'" + f.name + "' is defined here");
      return giveUp(); // its arguments would only report follow-on errors
    }
    if (!fi.ok) { // its own errors were reported where it is defined
      for (auto &a : e.args)
        check(*a);
      return giveUp();
    }
    if ((int)expanding_.size() >= kMaxExpansionDepth) {
      diags_.error(e.loc, "function calls are nested too deeply (more than " +
                              std::to_string(kMaxExpansionDepth) + " levels)");
      return giveUp();
    }
    Substitution sub;
    std::vector<std::pair<std::string, size_t>> lets;
    bool ok = true;
    // Arguments that are copied into the body are checked once here, so an error in one is
    // reported once, at the argument, and not at every copy.
    int errorsBefore = diags_.numErrors();
    size_t estimate = countNodes(*f.body);
    for (size_t i = 0; i < f.params.size(); ++i) {
      Expr &a = *e.args[i];
      if (fi.params[i] == FunctionInfo::Param::Tensor) {
        for (auto &x : a.args)
          check(*x);
        size_t prefix = 0;
        for (auto &x : a.args)
          prefix += countNodes(*x);
        estimate += fi.paramUses[i] * prefix;
      } else if (fi.params[i] == FunctionInfo::Param::Scalar && isCheap(a)) {
        check(a);
        estimate += fi.paramUses[i] * countNodes(a);
      }
    }
    if (diags_.numErrors() != errorsBefore)
      return giveUp();
    if (expandedNodes_ + estimate > kMaxExpandedNodes) {
      diags_.error(e.loc, "expanding function '" + f.name +
                              "' makes the kernel too large (more than " +
                              std::to_string(kMaxExpandedNodes) + " expression nodes)");
      return giveUp();
    }
    for (size_t i = 0; i < f.params.size(); ++i) {
      Expr &a = *e.args[i];
      const std::string &param = f.params[i];
      switch (fi.params[i]) {
      case FunctionInfo::Param::Tensor:
        if ((a.kind == ExprKind::Ident || a.kind == ExprKind::Read) && !findBuiltin(a.name) &&
            !functions_.count(a.name) && !lookup(a.name) && !sizeLocs_.count(a.name) &&
            !consts_.count(a.name)) {
          View v{a.name, {}, a.loc, a.boundary};
          for (const auto &x : a.args)
            v.prefix.push_back(x.get());
          sub.views[param] = v;
        } else {
          diags_.error(
              a.loc,
              "argument '" + param + "' of '" + f.name +
                  "' is a tensor parameter: pass a tensor or a partial read such as 'x(b, i)'");
          diags_.note(fi.paramUse[i], "'" + param + "' is used as a tensor here");
          ok = false;
        }
        break;
      case FunctionInfo::Param::Scalar:
        if (isCheap(a)) {
          sub.copies[param] = &a;
        } else {
          sub.renames[param] = freshName(param);
          lets.push_back({sub.renames[param], i});
        }
        break;
      case FunctionInfo::Param::Unused:
        check(a);
        break;
      }
    }
    if (!ok)
      return giveUp();
    ExprPtr body = f.body->clone();
    std::set<std::string> binders;
    collectBinders(*body, binders);
    for (const std::string &b : binders)
      sub.renames[b] = freshName(b);
    ExprPtr out = substitute(std::move(body), sub);
    for (auto it = lets.rbegin(); it != lets.rend(); ++it) {
      auto l = std::make_unique<Expr>(ExprKind::Let, e.args[it->second]->loc);
      l->name = it->first;
      l->args.push_back(std::move(e.args[it->second]));
      l->body = std::move(out);
      out = std::move(l);
    }
    expandedNodes_ += countNodes(*out);
    if (expandedNodes_ > kMaxExpandedNodes) {
      diags_.error(e.loc, "expanding function '" + f.name +
                              "' makes the kernel too large (more than " +
                              std::to_string(kMaxExpandedNodes) + " expression nodes)");
      return giveUp();
    }
    Loc callLoc = e.loc;
    e = std::move(*out); // the call node becomes its expansion
    diags_.pushContext(callLoc, "in call to '" + f.name + "' here");
    expanding_.push_back(&fi);
    check(e);
    expanding_.pop_back();
    diags_.popContext();
  }
};

// Checks each function once, before any kernel: its names, what each parameter is (a tensor if
// the body calls it or passes it on as a tensor, a scalar otherwise), and that no function calls
// itself. Types are checked where a kernel calls the function, on the expansion.
class FunctionSema {
public:
  FunctionSema(FunctionTable &t, DiagEngine &d) : table_(t), diags_(d) {}

  void analyze(FunctionInfo &fi) {
    if (fi.state != 0)
      return;
    fi.state = 1;
    fn_ = &fi;
    int errors = diags_.numErrors();
    const FunctionDef &f = *fi.def;
    fi.params.assign(f.params.size(), FunctionInfo::Param::Unused);
    fi.paramUse.assign(f.params.size(), Loc{});
    fi.paramUses.assign(f.params.size(), 0);
    for (size_t i = 0; i < f.params.size(); ++i) {
      checkName(f.params[i], f.paramLocs[i], "parameter");
      for (size_t j = 0; j < i; ++j)
        if (f.params[j] == f.params[i])
          diags_.error(f.paramLocs[i], "parameter '" + f.params[i] + "' appears twice");
    }
    walk(*fi.def->body);
    fi.ok = diags_.numErrors() == errors;
    fi.state = 2;
  }

private:
  FunctionTable &table_;
  DiagEngine &diags_;
  FunctionInfo *fn_ = nullptr;
  std::vector<std::string> binders_;

  const std::string &fname() const { return fn_->def->name; }

  int paramIndex(const std::string &n) const {
    if (std::find(binders_.begin(), binders_.end(), n) != binders_.end())
      return -1;
    const auto &ps = fn_->def->params;
    auto it = std::find(ps.begin(), ps.end(), n);
    return it == ps.end() ? -1 : (int)(it - ps.begin());
  }

  void checkName(const std::string &n, Loc loc, const char *what) {
    if (n.find("__") != std::string::npos)
      diags_.error(loc, std::string(what) + " name '" + n +
                            "' contains '__', which is reserved for compiler-generated names");
    else if (findBuiltin(n) || isReservedKeyword(n) || isReductionName(n))
      diags_.error(loc, std::string(what) + " name '" + n +
                            "' is reserved (a builtin function or keyword)");
    else if (table_.count(n))
      diags_.error(loc, std::string(what) + " name '" + n + "' is the name of a function");
  }

  void checkBinder(const std::string &n, Loc loc, const char *what) {
    checkName(n, loc, what);
    if (paramIndex(n) >= 0)
      diags_.error(loc,
                   std::string(what) + " '" + n + "' shadows a parameter of '" + fname() + "'");
    else if (std::find(binders_.begin(), binders_.end(), n) != binders_.end())
      diags_.error(loc, std::string(what) + " '" + n + "' shadows an enclosing name");
  }

  void mark(int p, FunctionInfo::Param kind, Loc loc) {
    ++fn_->paramUses[p];
    auto &k = fn_->params[p];
    if (k == FunctionInfo::Param::Unused) {
      k = kind;
      fn_->paramUse[p] = loc;
      return;
    }
    if (k == kind)
      return;
    const std::string &n = fn_->def->params[p];
    bool tensor = kind == FunctionInfo::Param::Tensor;
    diags_.error(loc, "parameter '" + n + "' of '" + fname() + "' is used here as a " +
                          (tensor ? "tensor" : "scalar") + ", but as a " +
                          (tensor ? "scalar" : "tensor") + " before");
    diags_.note(fn_->paramUse[p], "first used here");
  }

  void walk(Expr &e) {
    switch (e.kind) {
    case ExprKind::Number:
      return;
    case ExprKind::Ident: {
      if (std::find(binders_.begin(), binders_.end(), e.name) != binders_.end())
        return;
      if (int p = paramIndex(e.name); p >= 0)
        return mark(p, FunctionInfo::Param::Scalar, e.loc);
      if (table_.count(e.name) || findBuiltin(e.name))
        diags_.error(e.loc, "'" + e.name + "' is a function; call it, as in '" + e.name + "(x)'");
      else
        diags_.error(e.loc, "unknown identifier '" + e.name + "' in function '" + fname() +
                                "' (a function sees only its parameters and the names it binds)");
      return;
    }
    case ExprKind::Read:
    case ExprKind::Call: {
      if (int p = paramIndex(e.name); p >= 0) {
        mark(p, FunctionInfo::Param::Tensor, e.loc);
        for (auto &a : e.args)
          walk(*a);
        return;
      }
      if (!e.boundary.empty() && (findBuiltin(e.name) || table_.count(e.name)))
        diags_.error(e.loc, "boundary mode '." + e.boundary + "' applies to tensor reads, but '" +
                                e.name + "' is a function");
      if (const Builtin *b = findBuiltin(e.name)) {
        if ((int)e.args.size() != b->arity)
          diags_.error(e.loc, "'" + e.name + "' takes " + std::to_string(b->arity) + " argument" +
                                  (b->arity == 1 ? "" : "s") + ", got " +
                                  std::to_string(e.args.size()));
        for (auto &a : e.args)
          walk(*a);
        return;
      }
      auto it = table_.find(e.name);
      if (it == table_.end()) {
        diags_.error(e.loc, "unknown function or tensor parameter '" + e.name + "' in function '" +
                                fname() + "'");
        for (auto &a : e.args)
          walk(*a);
        return;
      }
      FunctionInfo &g = it->second;
      if (g.state == 1) {
        diags_.error(e.loc, "recursive function: '" + fname() + "' calls '" + e.name +
                                "', which is still being defined (functions are expanded inline "
                                "and cannot recurse)");
        return;
      }
      if (g.state == 0)
        FunctionSema(table_, diags_).analyze(g);
      if (e.args.size() != g.def->params.size()) {
        diags_.error(e.loc, "function '" + e.name + "' takes " +
                                std::to_string(g.def->params.size()) + " argument" +
                                (g.def->params.size() == 1 ? "" : "s") + ", got " +
                                std::to_string(e.args.size()));
        diags_.note(g.def->loc, "'" + e.name + "' is defined here");
        return;
      }
      for (size_t i = 0; i < e.args.size(); ++i) {
        Expr &a = *e.args[i];
        if (g.params[i] != FunctionInfo::Param::Tensor) {
          walk(a);
          continue;
        }
        int p = (a.kind == ExprKind::Ident || a.kind == ExprKind::Read) ? paramIndex(a.name) : -1;
        if (p < 0) {
          diags_.error(a.loc, "argument '" + g.def->params[i] + "' of '" + e.name +
                                  "' is a tensor parameter: pass a tensor parameter of '" +
                                  fname() + "' or a partial read of one");
          continue;
        }
        mark(p, FunctionInfo::Param::Tensor, a.loc);
        for (auto &x : a.args)
          walk(*x);
      }
      return;
    }
    case ExprKind::Unary:
    case ExprKind::Binary:
      for (auto &a : e.args)
        walk(*a);
      return;
    case ExprKind::Reduce: {
      for (auto &d : e.reduceIndices) {
        checkBinder(d.name, d.loc, "index");
        if (d.range)
          walk(*d.range->lo), walk(*d.range->hi);
      }
      size_t depth = binders_.size();
      for (auto &d : e.reduceIndices)
        binders_.push_back(d.name);
      walk(*e.body);
      binders_.resize(depth);
      return;
    }
    case ExprKind::Let:
      walk(*e.args[0]);
      checkBinder(e.name, e.loc, "'let'");
      binders_.push_back(e.name);
      walk(*e.body);
      binders_.pop_back();
      return;
    case ExprKind::Softmax:
      diags_.error(e.loc, "softmax cannot be used inside a function; write it as the right-hand "
                          "side of a kernel definition");
      return;
    }
  }
};

} // namespace

bool isBuiltinFunction(const std::string &name) { return findBuiltin(name) != nullptr; }

bool analyze(Module &m, DiagEngine &diags, const SemaOptions &opts) {
  FunctionTable functions;
  for (auto &f : m.functions) {
    if (f->name.find("__") != std::string::npos) {
      diags.error(f->loc, "function name '" + f->name +
                              "' contains '__', which is reserved for compiler-generated names");
      continue;
    }
    if (findBuiltin(f->name) || isReservedKeyword(f->name) || isReductionName(f->name)) {
      diags.error(f->loc,
                  "function name '" + f->name + "' is reserved (a builtin function or keyword)");
      continue;
    }
    auto [it, fresh] = functions.try_emplace(f->name);
    if (!fresh) {
      diags.error(f->loc, "redefinition of function '" + f->name + "'");
      diags.note(it->second.def->loc, "'" + f->name + "' was first defined here");
      continue;
    }
    it->second.def = f.get();
  }
  for (auto &[name, info] : functions)
    FunctionSema(functions, diags).analyze(info);
  std::set<std::string> names;
  for (auto &k : m.kernels) {
    if (!names.insert(k->name).second)
      diags.error(k->loc, "redefinition of kernel '" + k->name + "'");
    if (std::string why = reservedSymbolReason(k->name); !why.empty())
      diags.error(k->nameLoc, "kernel name '" + k->name + "' is reserved: " + why +
                                  " (a compiled kernel is a C function of its name)");
    KernelSema(*k, diags, opts, functions).run();
  }
  // A -D must name a constant of some kernel in the file: a typo must not pass silently.
  for (const auto &[name, value] : opts.defines) {
    bool found = false;
    for (auto &k : m.kernels)
      for (auto &c : k->consts)
        found |= c.name == name;
    if (!found)
      diags.error(Loc{}, "-D " + name + "=" + value + ": no kernel in this file has a constant '" +
                             name + "'");
  }
  return !diags.hasErrors();
}

} // namespace attnc::dsl
