// Sema's function expansion: a call of a `def` is replaced by its body, with its parameters
// substituted and the names it binds made fresh, and the expansion is checked in the call's place.
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

// An argument cheap enough to copy into every use (names, numbers, index arithmetic); one that
// reads a tensor is bound once with `let`. Copying keeps bare indices bare, so `w(o, c)` in a
// function still fixes the range of the caller's index `o`.
bool isCheap(const Expr &e) {
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

// The read of a tensor parameter becomes a read of the argument tensor; a boundary mode given
// at either place applies (giving two different ones is an error).
ExprPtr viewExpr(DiagEngine &diags, const View &v, std::vector<ExprPtr> extra,
                 const std::string &boundary = "", Loc useLoc = {}) {
  bool bare = extra.empty() && v.prefix.empty() && v.boundary.empty() && boundary.empty();
  auto r = std::make_unique<Expr>(bare ? ExprKind::Ident : ExprKind::Read, v.loc);
  r->name = v.tensor;
  r->boundary = v.boundary.empty() ? boundary : v.boundary;
  if (!v.boundary.empty() && !boundary.empty() && v.boundary != boundary) {
    diags.error(v.loc, "'" + v.tensor + "." + v.boundary + "(...)' is read with boundary mode '." +
                           boundary + "' in the function");
    diags.note(useLoc, "read with '." + boundary + "' here");
  }
  for (const Expr *p : v.prefix)
    r->args.push_back(p->clone());
  for (auto &x : extra)
    r->args.push_back(std::move(x));
  return r;
}

ExprPtr substitute(DiagEngine &diags, ExprPtr e, const Substitution &sub) {
  auto rename = [&](std::string &n) {
    if (auto it = sub.renames.find(n); it != sub.renames.end())
      n = it->second;
  };
  if (e->kind == ExprKind::Ident) {
    if (auto it = sub.copies.find(e->name); it != sub.copies.end())
      return it->second->clone();
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

// Replaces the call `e` by the function's body, with parameters substituted and every name
// the body binds renamed to a fresh one (so nothing of the caller's can be captured), then
// checks the result as if the caller had written it.
void KernelSema::expandCall(Expr &e, const FunctionInfo &fi) {
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
  ExprPtr out = substitute(diags_, std::move(body), sub);
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

} // namespace attnc::dsl::sema
