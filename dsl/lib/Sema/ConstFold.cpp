// Sema's constant folding: kernel constants and -D overrides, the 32-bit values of integer
// expressions, and the value of a requirement over constants.
#include "SemaInternal.h"

#include <cctype>
#include <cmath>
#include <functional>

namespace attnc::dsl::sema {

namespace {

using Consts = std::map<std::string, ConstDecl *>;

int64_t floorDiv(int64_t a, int64_t b) {
  int64_t q = a / b, r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q;
}

constexpr const char *kOverflow = "an intermediate value does not fit in a 32-bit integer";

double foldNode(const Expr &e, const Consts &consts, bool *isInt, std::string *err);

// Folds a compile-time constant expression (numbers, earlier constants, arithmetic). Integer
// arithmetic is 32-bit, as at run time: every intermediate integer must fit.
double fold(const Expr &e, const Consts &consts, bool *isInt, std::string *err) {
  double v = foldNode(e, consts, isInt, err);
  if (err->empty() && *isInt && (v > 2147483647.0 || v < -2147483648.0) &&
      e.kind != ExprKind::Number && e.kind != ExprKind::Ident)
    *err = kOverflow;
  return v;
}

double foldNode(const Expr &e, const Consts &consts, bool *isInt, std::string *err) {
  switch (e.kind) {
  case ExprKind::Number:
    *isInt = e.isIntLiteral;
    return e.number;
  case ExprKind::Ident: {
    auto it = consts.find(e.name);
    if (it == consts.end()) {
      *err = "'" + e.name + "' is not an earlier constant";
      return 0;
    }
    if (it->second->isList) {
      *err = "'" + e.name + "' is a constant list; use an element, '" + e.name +
             "(0)', or its length, 'len(" + e.name + ")'";
      return 0;
    }
    *isInt = it->second->isInt;
    return it->second->folded;
  }
  case ExprKind::Read: {
    // len(list) and list(i) at a constant i: compile-time numbers too.
    auto it = consts.find(e.args.size() == 1 && e.name == "len" ? e.args[0]->name : e.name);
    bool isLen = e.name == "len" && e.args.size() == 1 && e.args[0]->kind == ExprKind::Ident;
    if (it == consts.end() || !it->second->isList || (!isLen && e.args.size() != 1) ||
        !e.boundary.empty()) {
      *err = e.name == "len" ? "'len' takes one constant list, as in 'len(r)'"
                             : "only numbers, earlier constants and + - * / % are allowed";
      return 0;
    }
    const ConstDecl &list = *it->second;
    if (isLen) {
      *isInt = true;
      return (double)list.list.size();
    }
    bool subInt = true;
    double i = fold(*e.args[0], consts, &subInt, err);
    if (!err->empty())
      return 0;
    if (!subInt) {
      *err = "the subscript of list '" + e.name + "' must be an integer";
      return 0;
    }
    if (i < 0 || i >= (double)list.list.size()) {
      *err = "index " + std::to_string((long long)i) + " is outside list '" + e.name + "' of " +
             std::to_string(list.list.size()) + (list.list.size() == 1 ? " element" : " elements");
      return 0;
    }
    *isInt = list.isInt;
    return list.list[(size_t)i];
  }
  case ExprKind::Unary: {
    double v = fold(*e.args[0], consts, isInt, err);
    if (e.name == "-")
      return -v;
    *err = "operator '" + e.name + "' is not allowed here";
    return 0;
  }
  case ExprKind::Binary: {
    bool ia = true, ib = true;
    double a = fold(*e.args[0], consts, &ia, err), b = fold(*e.args[1], consts, &ib, err);
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

} // namespace

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

namespace {

// Values of the indices of the reductions being evaluated, and how many points are left.
struct StaticEnv {
  std::map<const IndexDecl *, double> indices;
  std::map<const Expr *, double> lets;
  int64_t budget = int64_t(1) << 20;
};

std::optional<double> evalStaticIn(const Expr &e, StaticEnv &env);

// A reduction over constant ranges, as the interpreter computes it; nullopt where a range is not
// constant or the domain is too large to evaluate here.
std::optional<double> evalReduce(const Expr &e, StaticEnv &env, size_t level, double acc,
                                 int64_t *count) {
  if (level == e.reduceIndices.size()) {
    if (--env.budget < 0)
      return std::nullopt;
    auto v = evalStaticIn(*e.body, env);
    if (!v)
      return std::nullopt;
    ++*count;
    switch (e.reduceKind) {
    case ReduceKind::Sum:
    case ReduceKind::Mean:
      return acc + *v;
    case ReduceKind::Max:
      return *count == 1 ? *v : std::max(acc, *v);
    case ReduceKind::Min:
      return *count == 1 ? *v : std::min(acc, *v);
    }
    return std::nullopt;
  }
  const IndexDecl &idx = e.reduceIndices[level];
  if (!idx.range)
    return std::nullopt;
  auto lo = evalStaticIn(*idx.range->lo, env), hi = evalStaticIn(*idx.range->hi, env);
  if (!lo || !hi)
    return std::nullopt;
  for (double i = *lo; i < *hi; ++i) {
    env.indices[&idx] = i;
    auto v = evalReduce(e, env, level + 1, acc, count);
    if (!v)
      return std::nullopt;
    acc = *v;
  }
  env.indices.erase(&idx);
  return acc;
}

std::optional<double> evalStaticIn(const Expr &e, StaticEnv &env) {
  auto arg = [&](size_t i) { return evalStaticIn(*e.args[i], env); };
  switch (e.kind) {
  case ExprKind::Number:
    return e.number;
  case ExprKind::Ident:
    if (e.identKind == IdentKind::Const)
      return e.constValue;
    if (e.identKind == IdentKind::Index && env.indices.count(e.index))
      return env.indices.at(e.index);
    if (e.identKind == IdentKind::Let && env.lets.count(e.let))
      return env.lets.at(e.let);
    return std::nullopt;
  case ExprKind::ListRead: {
    auto i = arg(0);
    if (!i || *i < 0 || *i >= (double)e.listValues.size())
      return std::nullopt; // an out-of-range read is reported at the read
    return e.listValues[(size_t)*i];
  }
  case ExprKind::Reduce: {
    int64_t count = 0;
    auto v = evalReduce(e, env, 0, 0, &count);
    if (!v || (count == 0 && e.reduceKind != ReduceKind::Sum))
      return std::nullopt;
    return e.reduceKind == ReduceKind::Mean ? *v / (double)count : *v;
  }
  case ExprKind::Let: {
    auto v = arg(0);
    if (!v)
      return std::nullopt;
    env.lets[&e] = *v;
    return evalStaticIn(*e.body, env);
  }
  case ExprKind::Call: {
    std::vector<double> a;
    for (size_t i = 0; i < e.args.size(); ++i) {
      auto v = arg(i);
      if (!v)
        return std::nullopt;
      a.push_back(*v);
    }
    if (e.name == "min" && a.size() == 2)
      return std::min(a[0], a[1]);
    if (e.name == "max" && a.size() == 2)
      return std::max(a[0], a[1]);
    if (e.name == "abs" && a.size() == 1)
      return std::fabs(a[0]);
    if (e.name == "select" && a.size() == 3)
      return a[0] != 0 ? a[1] : a[2];
    return std::nullopt;
  }
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

} // namespace

std::optional<double> evalStatic(const Expr &e) {
  StaticEnv env;
  return evalStaticIn(e, env);
}

// Each constant is folded in order, so later constants (and -D overrides) see earlier values.
void KernelSema::declareConsts() {
  for (auto &c : k_.consts) {
    checkNewName(c.name, c.loc, "constant"); // declared even when rejected: no follow-on errors
    if (tensors_.count(c.name) || sizeLocs_.count(c.name) || consts_.count(c.name)) {
      diags_.error(c.loc, "redefinition of '" + c.name + "'");
      continue;
    }
    if (c.isList) {
      declareList(c);
      continue;
    }
    std::string err;
    bool isInt = true;
    double v = fold(*c.value, consts_, &isInt, &err);
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
      if (isListValue(value)) {
        diags_.error(Loc{}, "-D " + name + "=" + value + ": constant '" + name +
                                "' is a number, not a list");
      } else if (!isLanguageNumber(value) || *end != '\0' || !std::isfinite(dv)) {
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

// A -D value meant as a list: `1,2,3` or `[1, 2, 3]`.
bool isListValue(const std::string &v) {
  return v.find(',') != std::string::npos || v.find('[') != std::string::npos ||
         v.find(']') != std::string::npos;
}

// A constant list: each element folded as a scalar constant's initialiser, the kind int where
// every element is. A -D override replaces the whole list, its length too.
void KernelSema::declareList(ConstDecl &c) {
  c.isInt = true;
  c.list.clear();
  bool ok = true;
  for (const ExprPtr &x : c.elements) {
    std::string err;
    bool isInt = true;
    double v = fold(*x, consts_, &isInt, &err);
    if (!err.empty()) {
      if (err == kOverflow)
        diags_.error(x->loc, "an element of constant list '" + c.name +
                                 "' does not fit in a 32-bit integer (an intermediate value "
                                 "overflows)");
      else
        diags_.error(x->loc, "an element of constant list '" + c.name +
                                 "' must be a compile-time number: " + err);
      ok = false;
    } else if (isInt && (v > 2147483647.0 || v < -2147483648.0)) {
      diags_.error(x->loc,
                   "an element of constant list '" + c.name + "' does not fit in a 32-bit integer");
      ok = false;
    }
    c.isInt &= isInt;
    c.list.push_back(ok ? v : 0);
  }
  for (const auto &[name, value] : opts_.defines) {
    if (name != c.name)
      continue;
    auto bad = [&](const std::string &why) {
      diags_.error(Loc{}, "-D " + name + "=" + value + ": " + why);
    };
    std::string body = value;
    auto trim = [](std::string x) {
      size_t a = x.find_first_not_of(" \t"), b = x.find_last_not_of(" \t");
      return a == std::string::npos ? std::string() : x.substr(a, b - a + 1);
    };
    body = trim(body);
    bool bracketed = !body.empty() && body.front() == '[';
    if (bracketed != (!body.empty() && body.back() == ']')) {
      bad("unbalanced '[' ... ']' around the list");
      continue;
    }
    if (bracketed)
      body = trim(body.substr(1, body.size() - 2));
    if (!isListValue(value)) {
      bad("constant '" + name + "' is a list; write its elements separated by commas, as in -D " +
          name + "=1,2,3 (or -D " + name + "=[" + value + "] for one element)");
      continue;
    }
    if (body.empty()) {
      bad("constant list '" + name + "' needs at least one element");
      continue;
    }
    std::vector<double> values;
    bool good = true;
    size_t start = 0;
    for (;;) {
      size_t comma = body.find(',', start);
      std::string item =
          trim(body.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
      char *end = nullptr;
      double dv = std::strtod(item.c_str(), &end);
      if (item.empty()) {
        bad("an element of list '" + name + "' is empty");
        good = false;
      } else if (!isLanguageNumber(item) || *end != '\0' || !std::isfinite(dv)) {
        bad("'" + item + "' is not a number");
        good = false;
      } else if (c.isInt && item.find_first_of(".eE") != std::string::npos) {
        bad("constant list '" + name + "' holds integers; write '" + item +
            "' without '.' or an exponent");
        good = false;
      } else if (c.isInt && (dv > 2147483647.0 || dv < -2147483648.0)) {
        bad(item + " does not fit in a 32-bit integer");
        good = false;
      } else if (!c.isInt && std::abs(dv) > 3.4028234663852886e38) {
        bad(item + " is not finite as a 32-bit float");
        good = false;
      }
      if (!good)
        break;
      values.push_back(dv);
      if (comma == std::string::npos)
        break;
      start = comma + 1;
    }
    if (good) {
      c.list = std::move(values);
      c.overridden = true;
    }
  }
  consts_[c.name] = &c; // declared even when rejected: no follow-on errors
}

// " (r = 536870912 from -D, w = 3)": the integer constants `a` (and `b`) use, for messages.
std::string KernelSema::constNote(const Expr &a, const Expr *b) {
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
void KernelSema::foldInt(Expr &e) {
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
  case ExprKind::ListRead:
    if (auto i = val(*e.args[0]); i && *i >= 0 && *i < (int64_t)e.listValues.size())
      v = (int64_t)e.listValues[(size_t)*i];
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

} // namespace attnc::dsl::sema
