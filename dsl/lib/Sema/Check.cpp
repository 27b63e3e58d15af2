// Sema's expression checking: the type of every expression and what each name in it refers to.
#include "SemaInternal.h"

#include <algorithm>
#include <cassert>

namespace attnc::dsl::sema {

void KernelSema::checkSoftmax(Expr &e, Definition &def) {
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
  if (e.sink) {
    // Checked outside the softmax's scope of `.exclude`: a sink is one value per row, not an
    // entry that a read could mask out.
    check(*e.sink);
    if (e.sink->type == ScalarType::Bool)
      diags_.error(e.sink->loc, "softmax sink must be a number, found a condition");
    else if (e.sink->type != ScalarType::Unknown)
      checkSinkAxes(*e.sink, e, def);
  }
  e.type = ScalarType::Float;
}

// The sink joins every row's normalisation once, so it is a function of the row alone: a use of
// an axis would make it one value per entry (a score, which belongs in the body).
void KernelSema::checkSinkAxes(const Expr &x, const Expr &softmax, const Definition &def) {
  if (x.kind == ExprKind::Ident && x.identKind == IdentKind::Index && x.index) {
    for (const auto &idx : def.indices)
      if (&idx == x.index && std::find(softmax.softmaxAxes.begin(), softmax.softmaxAxes.end(),
                                       idx.name) != softmax.softmaxAxes.end()) {
        diags_.error(x.loc, "softmax sink uses the softmax index '" + idx.name +
                                "'; a sink is one value per row, so it may use only the other "
                                "indices, sizes, constants and tensor reads at them");
        return;
      }
  }
  for (const auto &a : x.args)
    checkSinkAxes(*a, softmax, def);
  if (x.body)
    checkSinkAxes(*x.body, softmax, def);
  if (x.where)
    checkSinkAxes(*x.where, softmax, def);
  for (const auto &d : x.reduceIndices)
    if (d.range && d.range->lo && d.range->hi)
      checkSinkAxes(*d.range->lo, softmax, def), checkSinkAxes(*d.range->hi, softmax, def);
}

namespace {
ScalarType promote(ScalarType a, ScalarType b) {
  if (a == ScalarType::Unknown || b == ScalarType::Unknown)
    return ScalarType::Unknown;
  if (a == ScalarType::Float || b == ScalarType::Float)
    return ScalarType::Float;
  return ScalarType::Int;
}
} // namespace

bool KernelSema::requireNumeric(const Expr &e, const std::string &what) {
  if (e.type == ScalarType::Bool) {
    diags_.error(e.loc, "type mismatch: " + what + " must be a number, found a condition");
    return false;
  }
  return e.type != ScalarType::Unknown;
}

void KernelSema::check(Expr &e) {
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

void KernelSema::checkNode(Expr &e) {
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
      scope_.push_back({idx.name, &idx, nullptr, &e});
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

void KernelSema::checkIdent(Expr &e) {
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
  if (auto it = consts_.find(e.name); it != consts_.end() && it->second->isList) {
    diags_.error(e.loc, "'" + e.name +
                            "' is a constant list, not a number; read an element, as in '" +
                            e.name + "(i)', or use its length, 'len(" + e.name + ")'");
    e.type = ScalarType::Unknown;
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

// `r(e)` of a constant list `r`: element e, which must be an integer. A constant subscript is
// checked here; others once the ranges of their indices are settled (Subscripts.cpp). A bare index
// used as the subscript may take its range from the list (Ranges.cpp).
void KernelSema::checkListRead(Expr &e, const ConstDecl &c) {
  for (auto &a : e.args)
    check(*a);
  e.type = ScalarType::Unknown;
  if (!e.boundary.empty()) {
    diags_.error(e.loc, "boundary mode '." + e.boundary + "' applies to tensor reads, but '" +
                            e.name + "' is a constant list (a subscript outside it is an error)");
    return;
  }
  if (e.args.size() != 1) {
    diags_.error(e.loc, "constant list '" + e.name + "' is read with one subscript, as in '" +
                            e.name + "(i)', but is given " + std::to_string(e.args.size()));
    return;
  }
  Expr &a = *e.args[0];
  if (a.type != ScalarType::Int) {
    if (a.type != ScalarType::Unknown)
      diags_.error(a.loc, "type mismatch: the subscript of list '" + e.name +
                              "' must be an integer, found " + scalarTypeName(a.type));
    return;
  }
  e.kind = ExprKind::ListRead;
  e.listValues = c.list;
  e.type = c.isInt ? ScalarType::Int : ScalarType::Float;
  int64_t n = (int64_t)c.list.size();
  if (a.hasIntValue && (a.intValue < 0 || a.intValue >= n)) {
    diags_.error(a.loc, "index " + std::to_string(a.intValue) + " is outside constant list '" +
                            e.name + "' of " + std::to_string(n) +
                            (n == 1 ? " element" : " elements") + " (indices 0.." +
                            std::to_string(n - 1) + ")" + constNote(a));
    return;
  }
  if (a.kind == ExprKind::Ident && a.identKind == IdentKind::Index) {
    listExtents_.push_back(std::make_unique<Expr>(ExprKind::Number, a.loc));
    Expr &len = *listExtents_.back();
    len.number = (double)n;
    len.isIntLiteral = true;
    len.type = ScalarType::Int;
    listUses_[a.index].push_back({std::to_string(n), &len,
                                  "constant list '" + e.name + "' (" + std::to_string(n) +
                                      (n == 1 ? " element)" : " elements)"),
                                  a.loc});
  }
}

// `len(r)`: the number of elements of constant list `r`, folded to an integer literal.
void KernelSema::checkLen(Expr &e) {
  const Expr *a = e.args.size() == 1 ? e.args[0].get() : nullptr;
  auto it = a && a->kind == ExprKind::Ident ? consts_.find(a->name) : consts_.end();
  if (it == consts_.end() || !it->second->isList) {
    std::string what;
    if (a && a->kind == ExprKind::Ident) {
      if (it != consts_.end())
        what = ": '" + a->name + "' is a constant, not a list";
      else if (tensors_.count(a->name) || definitionNames_.count(a->name))
        what = ": '" + a->name + "' is a tensor (its sizes are named in its declaration)";
      else if (sizeLocs_.count(a->name))
        what = ": '" + a->name + "' is a size";
      else if (!lookup(a->name))
        what = ": unknown identifier '" + a->name + "'";
    }
    diags_.error(a ? a->loc : e.loc,
                 "'len' takes the name of a constant list, as in 'len(r)' for 'const r = [1, 2]'" +
                     what);
    e.type = ScalarType::Unknown;
    return;
  }
  e.kind = ExprKind::Number;
  e.number = (double)it->second->list.size();
  e.isIntLiteral = true;
  e.type = ScalarType::Int;
  e.name.clear();
  e.args.clear();
}

void KernelSema::checkRead(Expr &e) {
  if (auto it = consts_.find(e.name);
      it != consts_.end() && it->second->isList && !tensors_.count(e.name))
    return checkListRead(e, *it->second);
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
  // The expansion stage decided the same (calledFunction) and prepared the call.
  if ((!t && !definitionNames_.count(e.name)) || (t && t->role == TensorRole::Local)) {
    if (functions_.count(e.name)) {
      assert(e.expansion && "a call the expansion stage did not prepare");
      return checkFunctionCall(e, *e.expansion);
    }
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
  // bf16/f16 tensors read as their values in f32: every expression computes in f32 or i32.
  e.type = t->elemType == ElemType::I32 ? ScalarType::Int : ScalarType::Float;
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
      std::string origin = "'" + e.name + "' dimension " + std::to_string(i) + " (" + extent + ")";
      uses_[a.index].push_back({extent, t->extents[i].get(), origin, a.loc});
    }
  }
}

void KernelSema::checkCall(Expr &e) {
  if (e.name == "len")
    return checkLen(e);
  const Builtin *b = findBuiltin(e.name);
  for (auto &a : e.args)
    check(*a);
  if ((int)e.args.size() != b->arity) {
    diags_.error(e.loc, "'" + e.name + "' takes " + std::to_string(b->arity) + " argument" +
                            (b->arity == 1 ? "" : "s") + ", got " + std::to_string(e.args.size()));
    e.type = ScalarType::Unknown;
    return;
  }
  if (e.name == "select") {
    if (e.args[0]->type != ScalarType::Bool && e.args[0]->type != ScalarType::Unknown)
      diags_.error(e.args[0]->loc,
                   "type mismatch: the first argument of 'select' must be a condition");
    bool ok =
        requireNumeric(*e.args[1], "'select' value") & requireNumeric(*e.args[2], "'select' value");
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
  if (e.name == "f32")
    e.type = ScalarType::Float; // an int converted; a float unchanged
  else if (e.name == "min" || e.name == "max")
    e.type = promote(e.args[0]->type, e.args[1]->type);
  else if (e.name == "abs" || e.name == "relu")
    e.type = e.args[0]->type;
  else if (e.name == "ifloor")
    e.type = ScalarType::Int; // float -> int: sampling coordinates
  else
    e.type = ScalarType::Float;
}

void KernelSema::checkBinary(Expr &e) {
  check(*e.args[0]);
  check(*e.args[1]);
  ScalarType a = e.args[0]->type, b = e.args[1]->type;
  const std::string &op = e.name;
  if (op == "&&" || op == "||") {
    for (auto &x : e.args)
      if (x->type != ScalarType::Bool && x->type != ScalarType::Unknown)
        diags_.error(x->loc, "type mismatch: operands of '" + op + "' must be conditions, found " +
                                 scalarTypeName(x->type));
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
  // bf16 and f16 values in one operation: both widen to f32 exactly, but a contraction over
  // them cannot run on a dot-product instruction (those take one storage type), and PyTorch
  // refuses such a matmul; the user says which precision is meant. `w(d) * q(i, d) * k(j, d)`
  // and `(2 * q(i, d)) * k(j, d)` mix them as well.
  const TensorDecl *ta = storageRead(*e.args[0]), *tb = storageRead(*e.args[1]);
  if (ta && tb && ta->elemType != tb->elemType) {
    diags_.error(e.loc, std::string("type mismatch: '") + op + "' combines " + ta->name + " (" +
                            elemTypeName(ta->elemType) + ") and " + tb->name + " (" +
                            elemTypeName(tb->elemType) + "); convert one explicitly, as in " +
                            elemTypeName(ta->elemType) + "(" + tb->name + "(...)) or f32(" +
                            tb->name + "(...))");
    e.type = ScalarType::Unknown;
    return;
  }
  if (ta || tb)
    storageOf_[&e] = ta ? ta : tb;
  e.type = promote(a, b);
}

const TensorDecl *KernelSema::storageRead(const Expr &e) const {
  const Expr *x = &e;
  while (x->kind == ExprKind::Unary && x->args.size() == 1)
    x = x->args[0].get();
  if (x->kind == ExprKind::Binary) {
    auto it = storageOf_.find(x);
    return it == storageOf_.end() ? nullptr : it->second;
  }
  if (x->kind != ExprKind::Read || !x->tensor)
    return nullptr;
  DType t = x->tensor->elemType;
  return t == DType::BF16 || t == DType::F16 ? x->tensor : nullptr;
}

// What the expansion stage deferred for a step, reported now; whether it holds an error.
bool KernelSema::reportDeferred(const Deferred &d) {
  bool error = false;
  for (const Diagnostic &x : d) {
    switch (x.severity) {
    case Severity::Error:
      diags_.error(x.loc, x.message);
      error = true;
      break;
    case Severity::Warning:
      diags_.warning(x.loc, x.message);
      break;
    case Severity::Note:
      diags_.note(x.loc, x.message);
      break;
    }
  }
  return error;
}

// A call of a function is replaced by the expansion prepared for it (ExpandCalls.cpp), which is
// checked as if the caller had written it, with a note at the call on every error in it. Arguments
// copied into the body are checked once before, so an error in one is reported once, at the
// argument, and not at every copy; and as the expansion's steps come between these checks, each
// step's diagnostics are reported here, at its turn. The size limit is applied here too, on the
// checked arguments; the stage's own count is never higher until a call it expanded is given up.
void KernelSema::checkFunctionCall(Expr &e, PendingExpansion &x) {
  const FunctionInfo &fi = *x.fn;
  auto giveUp = [&] { e.type = ScalarType::Unknown; };
  if (reportDeferred(x.arity))
    return giveUp(); // its arguments would only report follow-on errors
  if (!fi.ok) {      // its own errors were reported where it is defined
    for (auto &a : e.args)
      check(*a);
    return giveUp();
  }
  if (reportDeferred(x.depth))
    return giveUp();
  int errorsBefore = diags_.numErrors();
  for (size_t i = 0; i < e.args.size(); ++i) {
    Expr &a = *e.args[i];
    if (fi.params[i] == FunctionInfo::Param::Tensor) {
      for (auto &p : a.args)
        check(*p);
    } else if (fi.params[i] == FunctionInfo::Param::Scalar && isCheapArgument(a)) {
      check(a);
    }
  }
  if (diags_.numErrors() != errorsBefore)
    return giveUp();
  Deferred fits;
  if (!expansionFits(e, fi, /*prepared=*/false, fits)) {
    reportDeferred(fits);
    return giveUp();
  }
  if (reportDeferred(x.fits))
    return giveUp();
  bool ok = true;
  for (size_t i = 0; i < e.args.size(); ++i) {
    if (fi.params[i] == FunctionInfo::Param::Unused) {
      check(*e.args[i]);
      continue;
    }
    ok &= !reportDeferred(x.binding[i]);
    if (!x.argumentNames[i].empty())
      nameBinder(x.argumentNames[i], fi.def->params[i]);
  }
  if (!ok)
    return giveUp();
  for (const auto &[provisional, base] : x.binderNames)
    nameBinder(provisional, base);
  reportDeferred(x.substitution);
  if (reportDeferred(x.tooLarge))
    return giveUp();
  assert(x.body && "an expansion stopped without an error");
  Loc callLoc = e.loc;
  if (!placeExpansion(e, x))
    return giveUp();
  enterExpansion(callLoc, fi);
  check(e);
  leaveExpansion();
}

} // namespace attnc::dsl::sema
