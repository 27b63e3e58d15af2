// Sema's names: builtins and reserved names, the kernel's tensors and sizes, and what a name means
// where it is used.
#include "SemaInternal.h"

#include <algorithm>

namespace attnc::dsl::sema {

namespace {
const Builtin kBuiltins[] = {
    {"exp", 1},
    {"log", 1},
    {"sqrt", 1},
    {"rsqrt", 1},
    {"sin", 1},
    {"cos", 1},
    {"tanh", 1},
    {"erf", 1},
    {"abs", 1},
    {"floor", 1},
    {"ifloor", 1},
    {"pow", 2},
    {"min", 2},
    {"max", 2},
    {"select", 3},
    // Activations users write in attention variants (sigmoid attention, gated outputs, kernel
    // feature maps of linear attention), with PyTorch's definitions (docs/language.md §5).
    {"sigmoid", 1},
    {"silu", 1},
    {"elu", 1},
    {"softplus", 1},
    {"relu", 1},
    // The length of a constant list, an integer constant (Check.cpp folds it).
    {"len", 1},
    // Conversions (docs/language.md §3): f32(x) converts an int; bf16(x) and f16(x) round a
    // float to that type's precision (nearest, ties to even) and go on in f32, as PyTorch's
    // intermediate results in those types are rounded.
    {"f32", 1},
    {"bf16", 1},
    {"f16", 1},
};
} // namespace

const Builtin *findBuiltin(const std::string &n) {
  for (const auto &b : kBuiltins)
    if (n == b.name)
      return &b;
  return nullptr;
}

bool isReservedKeyword(const std::string &n) {
  return n == "sum" || n == "mean" || n == "softmax" || n == "f32" || n == "i32" || n == "bf16" ||
         n == "f16";
}

bool isReductionName(const std::string &n) {
  return n == "sum" || n == "mean" || n == "max" || n == "min";
}

// How diagnostics name an index: as the source spells it, not as renamed by an expansion.
const std::string &KernelSema::shown(const std::string &n) const {
  auto it = spelled_.find(n);
  return it == spelled_.end() ? n : it->second;
}

bool KernelSema::checkNewName(const std::string &name, Loc loc, const char *what) {
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

void KernelSema::declareTensors() {
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
ExprPtr KernelSema::dimExpr(const DimSpec &d) {
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

ExprPtr KernelSema::factorExpr(const std::string &symbol, long long value, Loc loc) {
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

void KernelSema::checkIndexName(const IndexDecl &idx) {
  if (!checkNewName(idx.name, idx.loc, "index"))
    return;
  if (tensors_.count(idx.name) || definitionNames_.count(idx.name))
    diags_.error(idx.loc, "index '" + shown(idx.name) + "' has the name of a tensor");
  else if (sizeLocs_.count(idx.name))
    diags_.error(idx.loc, "index '" + shown(idx.name) + "' has the name of a size");
  else if (consts_.count(idx.name))
    diags_.error(idx.loc, "index '" + shown(idx.name) + "' has the name of a constant");
  for (const ScopeEntry &s : scope_)
    if (s.name == idx.name) {
      diags_.error(idx.loc, "index '" + shown(idx.name) + "' shadows an enclosing " +
                                (s.let ? "'let' of" : "index of") + " the same name");
      // `sum(j) a / sum(j) b` reads as `sum(j) (a / sum(j) b)`: a reduction's body runs to the
      // end of the expression, which a ratio of two sums (linear attention's) runs into.
      if (s.reduce) {
        const char *kind = reduceKindName(s.reduce->reduceKind);
        diags_.note(s.reduce->loc, std::string("the enclosing '") + kind + "(" + shown(idx.name) +
                                       ")' starts here; its body runs to the end of the "
                                       "expression: to end it, parenthesise it, as in '(" +
                                       kind + "(" + shown(idx.name) + ") a) / (" + kind + "(" +
                                       shown(idx.name) + ") b)'");
      }
    }
}

const ScopeEntry *KernelSema::lookup(const std::string &name) {
  for (auto it = scope_.rbegin(); it != scope_.rend(); ++it)
    if (it->name == name)
      return &*it;
  return nullptr;
}

// Whether `e` may stand where only sizes, constants and numbers may (a range, a requirement):
// reports (where `report`) the first name it must not use. A copy of an argument, which only the
// expansion stage sees, may be static: the stage must prepare whatever the checker may check.
bool KernelSema::isStatic(const Expr &e, const std::string &subject, const std::string &why,
                          std::vector<std::string> &inner, bool report) {
  if (e.copyOf)
    return true;
  auto bad = [&](const std::string &what) {
    if (report)
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
    if (!isStatic(*e.args[0], subject, why, inner, report))
      return false;
    inner.push_back(e.name);
    bool ok = isStatic(*e.body, subject, why, inner, report);
    inner.pop_back();
    return ok;
  }
  default:
    break;
  }
  for (const auto &a : e.args)
    if (!isStatic(*a, subject, why, inner, report))
      return false;
  return true;
}

} // namespace attnc::dsl::sema
