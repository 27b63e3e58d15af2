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
    *isInt = it->second->isInt;
    return it->second->folded;
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

std::optional<double> evalStatic(const Expr &e) {
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

// Each constant is folded in order, so later constants (and -D overrides) see earlier values.
void KernelSema::declareConsts() {
  for (auto &c : k_.consts) {
    checkNewName(c.name, c.loc, "constant"); // declared even when rejected: no follow-on errors
    if (tensors_.count(c.name) || sizeLocs_.count(c.name) || consts_.count(c.name)) {
      diags_.error(c.loc, "redefinition of '" + c.name + "'");
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
