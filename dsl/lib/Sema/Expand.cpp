// Sema's function expansion: a call of a `def` is replaced by its body, with its parameters
// substituted and the names it binds made fresh, within limits on nesting and size. No types here:
// the expansion stage (ExpandCalls.cpp) takes these steps before anything is checked, and the
// checker (checkFunctionCall, Check.cpp) checks the arguments between them and then puts the
// expansion in place, with copies of the checked arguments.
#include "SemaInternal.h"

#include <algorithm>

namespace attnc::dsl::sema {

namespace {

// Limits on function expansion, so that no input makes Sema (or any later recursive walk) run
// out of stack or memory.
constexpr int kMaxExpansionDepth = 32;
constexpr size_t kMaxExpandedNodes = 1000000;

size_t countNodes(const Expr &e) {
  size_t n = 1;
  for (const auto &a : e.args)
    n += countNodes(*a);
  if (e.body)
    n += countNodes(*e.body);
  if (e.where)
    n += countNodes(*e.where);
  if (e.sink)
    n += countNodes(*e.sink);
  for (const auto &d : e.reduceIndices)
    if (d.range)
      n += countNodes(*d.range->lo) + countNodes(*d.range->hi);
  return n;
}

void defer(Deferred &out, Severity s, Loc loc, std::string msg) {
  out.push_back({s, loc, std::move(msg)});
}

std::string tooLarge(const FunctionDef &f) {
  return "expanding function '" + f.name + "' makes the kernel too large (more than " +
         std::to_string(kMaxExpandedNodes) + " expression nodes)";
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
  if (e.sink)
    collectNames(*e.sink, out);
  for (const auto &d : e.reduceIndices) {
    out.insert(d.name);
    if (d.range)
      collectNames(*d.range->lo, out), collectNames(*d.range->hi, out);
  }
}

void collectBinders(const Expr &e, std::set<std::string> &out) {
  if (e.kind == ExprKind::Let)
    out.insert(e.name);
  for (const auto &d : e.reduceIndices)
    out.insert(d.name);
  for (const auto &a : e.args)
    collectBinders(*a, out);
  if (e.body)
    collectBinders(*e.body, out);
}

// An argument copied into the body. It stands for the argument as checked, which is copied in its
// place when the expansion is (placeExpansion); until then it is what the expansion stage sees.
ExprPtr copy(const Expr &argument) {
  ExprPtr c = argument.clone();
  c->copyOf = &argument;
  return c;
}

// The read of a tensor parameter becomes a read of the argument tensor; a boundary mode given
// at either place applies (giving two different ones is an error).
ExprPtr viewExpr(Deferred &diags, const View &v, std::vector<ExprPtr> extra,
                 const std::string &boundary = "", Loc useLoc = {}) {
  bool bare = extra.empty() && v.prefix.empty() && v.boundary.empty() && boundary.empty();
  auto r = std::make_unique<Expr>(bare ? ExprKind::Ident : ExprKind::Read, v.loc);
  r->name = v.tensor;
  r->boundary = v.boundary.empty() ? boundary : v.boundary;
  if (!v.boundary.empty() && !boundary.empty() && v.boundary != boundary) {
    defer(diags, Severity::Error, v.loc,
          "'" + v.tensor + "." + v.boundary + "(...)' is read with boundary mode '." + boundary +
              "' in the function");
    defer(diags, Severity::Note, useLoc, "read with '." + boundary + "' here");
  }
  for (const Expr *p : v.prefix)
    r->args.push_back(copy(*p));
  for (auto &x : extra)
    r->args.push_back(std::move(x));
  return r;
}

ExprPtr substitute(Deferred &diags, ExprPtr e, const Expansion &sub) {
  auto rename = [&](std::string &n) {
    if (auto it = sub.renames.find(n); it != sub.renames.end())
      n = it->second;
  };
  if (e->kind == ExprKind::Ident) {
    if (auto it = sub.copies.find(e->name); it != sub.copies.end())
      return copy(*it->second);
    if (auto it = sub.views.find(e->name); it != sub.views.end())
      return viewExpr(diags, it->second, {});
    rename(e->name);
    return e;
  }
  for (auto &a : e->args)
    a = substitute(diags, std::move(a), sub);
  if (e->body)
    e->body = substitute(diags, std::move(e->body), sub);
  for (auto &d : e->reduceIndices) {
    rename(d.name);
    if (d.range)
      d.range->lo = substitute(diags, std::move(d.range->lo), sub),
      d.range->hi = substitute(diags, std::move(d.range->hi), sub);
  }
  if (e->kind == ExprKind::Let)
    rename(e->name);
  if (e->kind == ExprKind::Read) {
    if (auto it = sub.views.find(e->name); it != sub.views.end())
      return viewExpr(diags, it->second, std::move(e->args), e->boundary, e->loc);
  }
  return e;
}

} // namespace

// countNodes of what checking makes of `e` (an argument, an expansion), before it is checked: a
// prepared call counts as its expansion and a copy as its argument. Ranges that checking infers
// are not counted yet, so this is at most what the checker counts.
size_t preparedNodes(const Expr &e) {
  if (e.copyOf)
    return preparedNodes(*e.copyOf);
  if (e.expansion && e.expansion->prepared)
    return e.expansion->nodes;
  size_t n = 1;
  for (const auto &a : e.args)
    n += preparedNodes(*a);
  if (e.body)
    n += preparedNodes(*e.body);
  if (e.where)
    n += preparedNodes(*e.where);
  if (e.sink)
    n += preparedNodes(*e.sink);
  for (const auto &d : e.reduceIndices)
    if (d.range)
      n += preparedNodes(*d.range->lo) + preparedNodes(*d.range->hi);
  return n;
}

bool isCheapArgument(const Expr &e) {
  if (e.kind == ExprKind::Read || e.kind == ExprKind::Reduce || e.kind == ExprKind::Let ||
      e.kind == ExprKind::Softmax)
    return false;
  for (const auto &a : e.args)
    if (!isCheapArgument(*a))
      return false;
  return true;
}

// Every name the kernel spells, so that the fresh names of expanded binders are new.
void KernelSema::collectUsedNames() {
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
}

// A name for a binder of an expansion the checker may still give up: no identifier starts with '#'.
// The checker gives the names it keeps (nameBinder) in the order it accepts expansions, so a call
// given up for an error in its arguments takes no fresh names, as before there was a stage.
std::string KernelSema::provisionalName() { return "#" + std::to_string(provisionalNames_++); }

void KernelSema::nameBinder(const std::string &provisional, const std::string &base) {
  finalNames_[provisional] = freshName(base);
}

std::string KernelSema::freshName(const std::string &base) {
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

bool KernelSema::expansionArityOk(const Expr &call, const FunctionInfo &fi, Deferred &out) {
  const FunctionDef &f = *fi.def;
  if (call.args.size() == f.params.size())
    return true;
  defer(out, Severity::Error, call.loc,
        "function '" + f.name + "' takes " + std::to_string(f.params.size()) + " argument" +
            (f.params.size() == 1 ? "" : "s") + ", got " + std::to_string(call.args.size()));
  defer(out, Severity::Note, f.loc, "'" + f.name + "' is defined here");
  return false;
}

bool KernelSema::expansionDepthOk(const Expr &call, Deferred &out) {
  if ((int)expanding_.size() < kMaxExpansionDepth)
    return true;
  defer(out, Severity::Error, call.loc,
        "function calls are nested too deeply (more than " + std::to_string(kMaxExpansionDepth) +
            " levels)");
  return false;
}

// An estimate from the body and the arguments copied into it, before anything is copied: by the
// expansion stage (`prepared`) on its own count, or by the checker on the checked arguments.
bool KernelSema::expansionFits(const Expr &call, const FunctionInfo &fi, bool prepared,
                               Deferred &out) {
  const FunctionDef &f = *fi.def;
  auto count = prepared ? preparedNodes : countNodes;
  size_t estimate = countNodes(*f.body);
  for (size_t i = 0; i < f.params.size(); ++i) {
    const Expr &a = *call.args[i];
    if (fi.params[i] == FunctionInfo::Param::Tensor) {
      size_t prefix = 0;
      for (auto &x : a.args)
        prefix += count(*x);
      estimate += fi.paramUses[i] * prefix;
    } else if (fi.params[i] == FunctionInfo::Param::Scalar && isCheapArgument(a)) {
      estimate += fi.paramUses[i] * count(a);
    }
  }
  if ((prepared ? preparedNodes_ : expandedNodes_) + estimate <= kMaxExpandedNodes)
    return true;
  defer(out, Severity::Error, call.loc, tooLarge(f));
  return false;
}

bool KernelSema::bindArgument(const Expr &call, const FunctionInfo &fi, size_t i, Expansion &x,
                              PendingExpansion &p) {
  const FunctionDef &f = *fi.def;
  const Expr &a = *call.args[i];
  const std::string &param = f.params[i];
  if (fi.params[i] == FunctionInfo::Param::Scalar) {
    if (isCheapArgument(a)) {
      x.copies[param] = &a;
    } else {
      x.renames[param] = p.argumentNames[i] = provisionalName();
      x.lets.push_back({x.renames[param], i});
    }
    return true;
  }
  // A tensor argument is never a copy with subscripts (copies of cheap arguments read nothing;
  // copies of subscripts stand inside reads), so its subscripts are the checked ones.
  if ((a.kind == ExprKind::Ident || a.kind == ExprKind::Read) && !findBuiltin(a.name) &&
      !functions_.count(a.name) && !lookup(a.name) && !sizeLocs_.count(a.name) &&
      !consts_.count(a.name)) {
    View v{a.name, {}, a.loc, a.boundary};
    for (const auto &p : a.args)
      v.prefix.push_back(p.get());
    x.views[param] = v;
    return true;
  }
  defer(p.binding[i], Severity::Error, a.loc,
        "argument '" + param + "' of '" + f.name +
            "' is a tensor parameter: pass a tensor or a partial read such as 'x(b, i)'");
  defer(p.binding[i], Severity::Note, fi.paramUse[i], "'" + param + "' is used as a tensor here");
  return false;
}

// Every name the body binds is renamed to a new one, so nothing of the caller's can be captured.
// A let-bound argument is copied, not moved: the call keeps its arguments while the checker may
// still give it up.
bool KernelSema::expand(const Expr &call, const FunctionInfo &fi, Expansion &x,
                        PendingExpansion &p) {
  const FunctionDef &f = *fi.def;
  ExprPtr body = f.body->clone();
  std::set<std::string> binders;
  collectBinders(*body, binders);
  for (const std::string &b : binders) {
    x.renames[b] = provisionalName();
    p.binderNames.push_back({x.renames[b], b});
  }
  ExprPtr out = substitute(p.substitution, std::move(body), x);
  for (auto it = x.lets.rbegin(); it != x.lets.rend(); ++it) {
    auto l = std::make_unique<Expr>(ExprKind::Let, call.args[it->second]->loc);
    l->name = it->first;
    l->args.push_back(call.args[it->second]->clone());
    l->body = std::move(out);
    out = std::move(l);
  }
  preparedNodes_ += preparedNodes(*out);
  if (preparedNodes_ > kMaxExpandedNodes) {
    defer(p.tooLarge, Severity::Error, call.loc, tooLarge(f));
    return false;
  }
  p.body = std::move(out);
  return true;
}

// The checker's copies of the checked arguments and fresh names in place of the provisional ones
// (of this expansion and of those it is in, which were named before), up to the calls in it.
void KernelSema::finishExpansion(Expr &e) {
  if (e.copyOf) {
    ExprPtr c = e.copyOf->clone();
    e = std::move(*c);
    return;
  }
  auto name = [&](std::string &n) {
    if (!n.empty() && n[0] == '#')
      n = finalNames_.at(n);
  };
  name(e.name);
  for (auto &a : e.args)
    finishExpansion(*a);
  if (e.body)
    finishExpansion(*e.body);
  if (e.where)
    finishExpansion(*e.where);
  if (e.sink)
    finishExpansion(*e.sink);
  for (auto &d : e.reduceIndices) {
    name(d.name);
    if (d.range)
      finishExpansion(*d.range->lo), finishExpansion(*d.range->hi);
  }
}

// The call node becomes its expansion, counted as the expansion stage could not: with the checked
// arguments copied in (and the ranges their checking inferred).
bool KernelSema::placeExpansion(Expr &call, PendingExpansion &p) {
  finishExpansion(*p.body);
  expandedNodes_ += countNodes(*p.body);
  if (expandedNodes_ > kMaxExpandedNodes) {
    diags_.error(call.loc, tooLarge(*p.fn->def));
    return false;
  }
  // The arguments are kept: copies in expansions inside this one are made from them, and range
  // uses (uses_) name the indices in them by address, which a freed index would hand on to the
  // next one allocated there.
  p.args = std::move(call.args);
  ExprPtr body = std::move(p.body);
  call = std::move(*body);
  return true;
}

void KernelSema::enterExpansion(Loc callLoc, const FunctionInfo &fi) {
  diags_.pushContext(callLoc, "in call to '" + fi.def->name + "' here");
}

void KernelSema::leaveExpansion() { diags_.popContext(); }

} // namespace attnc::dsl::sema
