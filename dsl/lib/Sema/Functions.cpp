// Sema's functions: each `def` is checked once where it is defined, and what each of its
// parameters is (a tensor or a scalar) is found for the calls that expand it.
#include "SemaInternal.h"

#include <algorithm>

namespace attnc::dsl::sema {

namespace {

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

FunctionTable analyzeFunctions(Module &m, DiagEngine &diags) {
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
  return functions;
}

} // namespace attnc::dsl::sema
