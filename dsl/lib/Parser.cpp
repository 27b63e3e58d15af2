// Recursive-descent parser for .attn files (grammar in docs/language.md).
#include "attnc/dsl/Parser.h"

#include <algorithm>
#include <cmath>

namespace attnc::dsl {

Parser::Parser(const SourceFile &file, DiagEngine &diags) : diags_(diags) {
  Lexer lex(file, diags);
  for (;;) {
    Token t = lex.next();
    toks_.push_back(t);
    if (t.kind == Tok::Eof)
      break;
  }
}

void Parser::fail(Loc loc, const std::string &msg) {
  diags_.error(loc, msg);
  throw Abort{};
}

static std::string describe(const Token &t) {
  if (t.kind == Tok::Ident || t.kind == Tok::Int || t.kind == Tok::Float)
    return "'" + t.text + "'";
  if (t.kind == Tok::String)
    return "\"" + t.text + "\"";
  return tokName(t.kind);
}

Token Parser::expect(Tok k, const char *context) {
  if (!is(k)) {
    if (is(Tok::Error))
      throw Abort{}; // the lexer already explained it
    fail(cur().loc,
         std::string("expected ") + tokName(k) + " " + context + ", found " + describe(cur()));
  }
  return take();
}

std::unique_ptr<Module> Parser::parseModule(bool requireKernel) {
  auto m = std::make_unique<Module>();
  try {
    while (!is(Tok::Eof)) {
      if (is(Tok::Error))
        throw Abort{};
      if (is(Tok::KwImport)) {
        m->imports.push_back(parseImport());
      } else if (is(Tok::KwDef)) {
        m->functions.push_back(parseFunctionDef());
      } else if (is(Tok::KwKernel)) {
        if (!requireKernel)
          fail(cur().loc, "an imported file may only contain 'def' and 'import', found 'kernel'");
        m->kernels.push_back(parseKernel());
      } else {
        fail(cur().loc, std::string(requireKernel ? "expected 'kernel', 'def' or 'import', found "
                                                  : "expected 'def' or 'import', found ") +
                            describe(cur()));
      }
    }
    if (requireKernel && m->kernels.empty())
      fail(cur().loc, "no kernel in file (expected 'kernel name(...) -> ... { ... }')");
  } catch (Abort &) {
    return nullptr;
  }
  if (diags_.hasErrors())
    return nullptr;
  return m;
}

bool Parser::isBound(const std::string &name) const {
  return kernelNames_.count(name) ||
         std::find(indexScope_.begin(), indexScope_.end(), name) != indexScope_.end();
}

Import Parser::parseImport() {
  Import im;
  im.loc = expect(Tok::KwImport, "").loc;
  if (is(Tok::String)) {
    Token t = take();
    im.spec = t.text;
    im.quoted = true;
    im.loc = t.loc;
    if (im.spec.empty())
      fail(t.loc, "empty import path");
  } else {
    Token t =
        expect(Tok::Ident,
               "or a quoted path after 'import' (as in 'import nn' or 'import \"lib/my.attn\"')");
    im.spec = t.text;
    im.loc = t.loc;
  }
  return im;
}

std::unique_ptr<FunctionDef> Parser::parseFunctionDef() {
  auto f = std::make_unique<FunctionDef>();
  f->loc = expect(Tok::KwDef, "").loc;
  Token name = expect(Tok::Ident, "for the function name");
  f->name = name.text;
  f->loc = name.loc;
  expect(Tok::LParen,
         ("after the function name '" + f->name + "' (write 'def name(params) = expression')")
             .c_str());
  if (!is(Tok::RParen)) {
    do {
      Token p = expect(Tok::Ident, "for a parameter name");
      f->params.push_back(p.text);
      f->paramLocs.push_back(p.loc);
    } while (accept(Tok::Comma));
  }
  expect(Tok::RParen, "after the function's parameters");
  expect(Tok::Assign, ("in the definition of function '" + f->name + "'").c_str());
  kernelNames_.clear();
  indexScope_ = f->params;
  f->body = parseExpr();
  indexScope_.clear();
  return f;
}

// `let a = e1, b = e2 in body` becomes nested Let nodes; the body extends as far as possible.
ExprPtr Parser::parseLet() {
  expect(Tok::KwLet, "");
  struct Binding {
    Token name;
    ExprPtr value;
  };
  std::vector<Binding> bindings;
  size_t depth = indexScope_.size();
  do {
    Token name = expect(Tok::Ident, "for the name bound by 'let'");
    expect(Tok::Assign, ("after 'let " + name.text + "'").c_str());
    ExprPtr value = parseExpr();
    indexScope_.push_back(name.text);
    bindings.push_back({name, std::move(value)});
  } while (accept(Tok::Comma));
  expect(Tok::KwIn, "after the 'let' bindings (write 'let x = value in expression')");
  ExprPtr body = parseExpr();
  indexScope_.resize(depth);
  for (auto it = bindings.rbegin(); it != bindings.rend(); ++it) {
    auto l = std::make_unique<Expr>(ExprKind::Let, it->name.loc);
    l->name = it->name.text;
    l->args.push_back(std::move(it->value));
    l->body = std::move(body);
    setHeight(*l);
    body = std::move(l);
  }
  return body;
}

std::unique_ptr<Kernel> Parser::parseKernel() {
  auto k = std::make_unique<Kernel>();
  kernelNames_.clear();
  k->loc = expect(Tok::KwKernel, "").loc;
  Token name = expect(Tok::Ident, "for the kernel name");
  k->name = name.text;
  k->nameLoc = name.loc;
  expect(Tok::LParen, "after the kernel name");
  if (!is(Tok::RParen)) {
    do
      k->inputs.push_back(parseParam(TensorRole::Input));
    while (accept(Tok::Comma));
  }
  expect(Tok::RParen, "after the kernel inputs");
  expect(Tok::Arrow, "before the kernel outputs");
  if (accept(Tok::LParen)) {
    do
      k->outputs.push_back(parseParam(TensorRole::Output));
    while (accept(Tok::Comma));
    expect(Tok::RParen, "after the kernel outputs");
  } else {
    k->outputs.push_back(parseParam(TensorRole::Output));
  }
  for (auto *list : {&k->inputs, &k->outputs})
    for (auto &t : *list) {
      kernelNames_.insert(t->name);
      for (const DimSpec &d : t->dims) {
        if (!d.symbol.empty())
          kernelNames_.insert(d.symbol);
        for (const DimFactor &f : d.factors)
          if (!f.symbol.empty())
            kernelNames_.insert(f.symbol);
      }
    }
  expect(Tok::LBrace, "to open the kernel body");
  while (!is(Tok::RBrace)) {
    if (is(Tok::Eof))
      fail(cur().loc, "expected '}' to close kernel '" + k->name + "', found end of file");
    if (accept(Tok::Semi))
      continue;
    if (is(Tok::KwConst)) {
      parseConsts(*k);
    } else if (is(Tok::KwRequire)) {
      Kernel::Requirement r;
      r.loc = take().loc;
      r.cond = parseExpr();
      if (accept(Tok::Comma))
        r.message = expect(Tok::String, "for the requirement's message").text;
      k->requirements.push_back(std::move(r));
    } else if (is(Tok::Ident)) {
      k->defs.push_back(parseDefinition());
    } else {
      if (is(Tok::Error))
        throw Abort{};
      fail(cur().loc,
           "expected a definition 'name(indices) = expression', 'const' or 'require', found " +
               describe(cur()));
    }
  }
  expect(Tok::RBrace, "");
  return k;
}

std::unique_ptr<TensorDecl> Parser::parseParam(TensorRole role) {
  auto t = std::make_unique<TensorDecl>();
  t->role = role;
  Token name =
      expect(Tok::Ident, role == TensorRole::Input ? "for an input name" : "for an output name");
  t->name = name.text;
  t->loc = name.loc;
  expect(Tok::Colon, ("after '" + t->name + "' (write 'name: f32[dims]')").c_str());
  Token ty = expect(Tok::Ident, "for the element type");
  if (!parse_dtype(ty.text, &t->elemType))
    fail(ty.loc, "unknown element type '" + ty.text + "' (expected f32, i32, bf16 or f16)");
  expect(Tok::LBracket, "to start the dimensions");
  if (!is(Tok::RBracket)) {
    do {
      DimSpec d;
      d.loc = cur().loc;
      DimFactor first = parseDimFactor("for a dimension");
      if (!is(Tok::Star)) {
        d.symbol = first.symbol;
        d.value = first.value;
      } else {
        d.factors.push_back(first);
        while (accept(Tok::Star))
          d.factors.push_back(parseDimFactor("after '*' in a dimension"));
        // Sizes are bound by input dimensions, so an input dimension has to name one size.
        if (role == TensorRole::Input)
          fail(d.loc, "dimension " + std::to_string(t->dims.size()) + " of input '" + t->name +
                          "' is a product (" + d.str() +
                          "); input dimensions bind the sizes, so each must be one size name or "
                          "literal (products are "
                          "allowed in outputs only)");
        if (d.isStatic()) {
          d.value = 1;
          for (const DimFactor &f : d.factors)
            if (__builtin_mul_overflow(d.value, f.value, &d.value))
              fail(d.loc, "dimension '" + d.str() + "' is too large");
        }
      }
      t->dims.push_back(d);
    } while (accept(Tok::Comma));
  }
  expect(Tok::RBracket, "to end the dimensions");
  return t;
}

DimFactor Parser::parseDimFactor(const char *context) {
  DimFactor f;
  f.loc = cur().loc;
  if (is(Tok::Ident)) {
    f.symbol = take().text;
  } else if (is(Tok::Int)) {
    Token v = take();
    try {
      f.value = std::stoll(v.text);
    } catch (...) {
      fail(v.loc, "dimension '" + v.text + "' is too large");
    }
    if (f.value <= 0)
      fail(v.loc, "dimension must be positive, got " + v.text);
  } else {
    if (is(Tok::Error))
      throw Abort{};
    fail(cur().loc, std::string("expected a size name or a positive integer ") + context +
                        ", found " + describe(cur()));
  }
  return f;
}

void Parser::parseConsts(Kernel &k) {
  expect(Tok::KwConst, "");
  do {
    ConstDecl c;
    Token name = expect(Tok::Ident, "for the constant name");
    c.name = name.text;
    c.loc = name.loc;
    expect(Tok::Assign, ("after constant '" + c.name + "'").c_str());
    if (is(Tok::LBracket)) {
      Token open = take();
      c.isList = true;
      if (is(Tok::RBracket))
        fail(open.loc, "constant list '" + c.name +
                           "' is empty; a list needs at least one element, as in [1, 2, 3]");
      do {
        if (is(Tok::LBracket))
          fail(cur().loc, "an element of constant list '" + c.name +
                              "' is a list; lists have one dimension and hold numbers");
        c.elements.push_back(parseExpr());
      } while (accept(Tok::Comma));
      expect(Tok::RBracket, ("to close constant list '" + c.name + "'").c_str());
    } else {
      c.value = parseExpr();
    }
    kernelNames_.insert(c.name);
    k.consts.push_back(std::move(c));
  } while (accept(Tok::Comma));
}

IndexDecl Parser::parseIndexDecl(bool allowRange) {
  IndexDecl d;
  Token name = expect(Tok::Ident, "for an index name");
  d.name = name.text;
  d.loc = name.loc;
  if (allowRange && accept(Tok::KwIn)) {
    Range r;
    r.lo = parseBinary(3); // additive level: `0..N` must not swallow comparisons
    expect(Tok::DotDot, "in the index range 'lo..hi'");
    r.hi = parseBinary(3);
    d.range = std::move(r);
  }
  return d;
}

std::unique_ptr<Definition> Parser::parseDefinition() {
  auto d = std::make_unique<Definition>();
  Token name = take();
  d->name = name.text;
  d->loc = name.loc;
  expect(Tok::LParen,
         ("after '" + d->name + "' (a definition is 'name(indices) = expression')").c_str());
  if (!is(Tok::RParen)) {
    do
      d->indices.push_back(parseIndexDecl(true));
    while (accept(Tok::Comma));
  }
  expect(Tok::RParen, "after the definition's indices");
  expect(Tok::Assign, ("in the definition of '" + d->name + "'").c_str());
  for (const auto &idx : d->indices)
    indexScope_.push_back(idx.name);
  d->rhs = parseExpr();
  indexScope_.clear();
  kernelNames_.insert(d->name);
  return d;
}

void Parser::setHeight(Expr &e) {
  int h = 0;
  for (const auto &a : e.args)
    h = std::max(h, a->depth);
  if (e.body)
    h = std::max(h, e.body->depth);
  if (e.where)
    h = std::max(h, e.where->depth);
  if (e.sink)
    h = std::max(h, e.sink->depth);
  e.depth = h + 1;
  if (e.depth > kMaxTreeHeight)
    fail(e.loc, "expression is too deeply nested or too long (more than " +
                    std::to_string(kMaxTreeHeight) + " levels)");
}

ExprPtr Parser::parseExpr() {
  if (++depth_ > kMaxDepth)
    fail(cur().loc,
         "expression is nested too deeply (more than " + std::to_string(kMaxDepth) + " levels)");
  ExprPtr e = parseBinary(0);
  --depth_;
  return e;
}

// Precedence levels, loosest first: || ; && ; comparisons ; + - ; * / %.
static int binaryLevel(Tok t) {
  switch (t) {
  case Tok::OrOr:
    return 0;
  case Tok::AndAnd:
    return 1;
  case Tok::Lt:
  case Tok::Le:
  case Tok::Gt:
  case Tok::Ge:
  case Tok::EqEq:
  case Tok::Ne:
    return 2;
  case Tok::Plus:
  case Tok::Minus:
    return 3;
  case Tok::Star:
  case Tok::Slash:
  case Tok::Percent:
    return 4;
  default:
    return -1;
  }
}

ExprPtr Parser::parseBinary(int level) {
  if (level > 4)
    return parseUnary();
  ExprPtr lhs = parseBinary(level + 1);
  while (binaryLevel(cur().kind) == level) {
    Token op = take();
    ExprPtr rhs = parseBinary(level + 1);
    auto b = std::make_unique<Expr>(ExprKind::Binary, op.loc);
    b->name = op.text;
    b->args.push_back(std::move(lhs));
    b->args.push_back(std::move(rhs));
    setHeight(*b);
    lhs = std::move(b);
    if (level == 2 && binaryLevel(cur().kind) == 2)
      fail(cur().loc, "comparisons cannot be chained; use '&&'");
  }
  return lhs;
}

ExprPtr Parser::parseUnary() {
  if (++depth_ > kMaxDepth)
    fail(cur().loc,
         "expression is nested too deeply (more than " + std::to_string(kMaxDepth) + " levels)");
  ExprPtr r;
  if (is(Tok::Minus) || is(Tok::Bang)) {
    Token op = take();
    auto u = std::make_unique<Expr>(ExprKind::Unary, op.loc);
    u->name = op.text;
    u->args.push_back(parseUnary());
    setHeight(*u);
    r = std::move(u);
  } else if (isIdent("softmax") && peekTok(1).kind == Tok::LParen) {
    r = parseSoftmax();
  } else if (is(Tok::KwLet)) {
    r = parseLet();
  } else if (looksLikeReduction()) {
    r = parseReduction();
  } else {
    r = parsePrimary();
  }
  --depth_;
  return r;
}

// `sum(...)` always starts a reduction. `max(...)`/`min(...)` do when the parentheses hold only
// index declarations and an operand follows, so `max(a, b)` stays the elementwise function.
bool Parser::looksLikeReduction() const {
  if (!is(Tok::Ident) || peekTok(1).kind != Tok::LParen)
    return false;
  const std::string &n = cur().text;
  if (n == "sum" || n == "mean")
    return true;
  if (n != "max" && n != "min")
    return false;
  size_t i = 2;
  // `min(j) x` with a single name is a reduction even if j is bound (the elementwise min takes two
  // arguments); Sema then reports the shadowed index.
  if (peekTok(2).kind == Tok::Ident && peekTok(3).kind == Tok::RParen) {
    Tok after = peekTok(4).kind;
    if (after == Tok::Ident || after == Tok::Int || after == Tok::Float || after == Tok::LParen)
      return true;
  }
  for (;;) {
    if (peekTok(i).kind != Tok::Ident || isBound(peekTok(i).text))
      return false;
    ++i;
    if (peekTok(i).kind == Tok::KwIn)
      return true; // only index declarations take ranges
    if (peekTok(i).kind == Tok::Comma) {
      ++i;
      continue;
    }
    if (peekTok(i).kind != Tok::RParen)
      return false;
    Tok after = peekTok(i + 1).kind;
    return after == Tok::Ident || after == Tok::Int || after == Tok::Float || after == Tok::LParen;
  }
}

ExprPtr Parser::parseReduction() {
  Token kw = take();
  auto r = std::make_unique<Expr>(ExprKind::Reduce, kw.loc);
  r->name = kw.text;
  r->reduceKind = kw.text == "sum"    ? ReduceKind::Sum
                  : kw.text == "mean" ? ReduceKind::Mean
                  : kw.text == "max"  ? ReduceKind::Max
                                      : ReduceKind::Min;
  expect(Tok::LParen, "after the reduction");
  if (is(Tok::RParen))
    fail(cur().loc, "a reduction needs at least one index, as in 'sum(j) ...'");
  do
    r->reduceIndices.push_back(parseIndexDecl(true));
  while (accept(Tok::Comma));
  expect(Tok::RParen, "after the reduction indices");
  size_t depth = indexScope_.size();
  for (const auto &idx : r->reduceIndices)
    indexScope_.push_back(idx.name);
  r->body = parseExpr();
  indexScope_.resize(depth);
  setHeight(*r);
  return r;
}

ExprPtr Parser::parseSoftmax() {
  Token kw = take();
  auto s = std::make_unique<Expr>(ExprKind::Softmax, kw.loc);
  s->name = "softmax";
  expect(Tok::LParen, "after 'softmax'");
  if (is(Tok::RParen))
    fail(cur().loc, "softmax needs at least one index, as in 'softmax(j) ...'");
  do {
    Token ax = expect(Tok::Ident, "for a softmax index");
    s->softmaxAxes.push_back(ax.text);
    s->softmaxAxisLocs.push_back(ax.loc);
  } while (accept(Tok::Comma));
  if (accept(Tok::KwWhere))
    s->where = parseExpr();
  // `sink` is a keyword only here, where no expression can continue with a name, so tensors,
  // indices and functions named `sink` stay valid everywhere else.
  if (isIdent("sink")) {
    take();
    s->sink = parseExpr();
  }
  expect(Tok::RParen, s->sink ? "after the softmax sink" : "after the softmax indices");
  s->body = parseExpr();
  setHeight(*s);
  return s;
}

ExprPtr Parser::parsePrimary() {
  const Token &t = cur();
  switch (t.kind) {
  case Tok::Int:
  case Tok::Float: {
    Token n = take();
    auto e = std::make_unique<Expr>(ExprKind::Number, n.loc);
    e->isIntLiteral = n.kind == Tok::Int;
    try {
      e->number = std::stod(n.text);
    } catch (...) {
      fail(n.loc, "number '" + n.text + "' is out of range");
    }
    if (e->isIntLiteral && e->number > 2147483647.0)
      fail(n.loc, "integer '" + n.text + "' does not fit in 32 bits");
    // Floats compute in f32, where a literal from 2^128 - 2^103 on rounds to inf (as -D says).
    if (!e->isIntLiteral && e->number >= std::ldexp(1.0, 128) - std::ldexp(1.0, 103))
      fail(n.loc,
           "number '" + n.text + "' is not finite as a 32-bit float (the largest is 3.4028235e38)");
    return e;
  }
  case Tok::Ident: {
    Token n = take();
    std::string boundary;
    if (is(Tok::Dot) && peekTok(1).kind == Tok::Ident) {
      // `k.zero(...)`: a read with a boundary mode.
      take();
      Token mode = take();
      if (mode.text != "zero" && mode.text != "clamp" && mode.text != "exclude")
        fail(mode.loc,
             "unknown boundary mode '" + mode.text + "' (expected zero, clamp or exclude)");
      if (!is(Tok::LParen))
        fail(cur().loc,
             "expected '(' after '" + n.text + "." + mode.text + "', found " + describe(cur()));
      boundary = mode.text;
    }
    if (!is(Tok::LParen)) {
      auto e = std::make_unique<Expr>(ExprKind::Ident, n.loc);
      e->name = n.text;
      return e;
    }
    take();
    // Sema decides whether the name is a tensor (a read) or a builtin function (a call).
    auto e = std::make_unique<Expr>(ExprKind::Read, n.loc);
    e->name = n.text;
    e->boundary = boundary;
    if (!is(Tok::RParen)) {
      do
        e->args.push_back(parseExpr());
      while (accept(Tok::Comma));
    }
    expect(Tok::RParen, ("to close the arguments of '" + n.text + "'").c_str());
    setHeight(*e);
    return e;
  }
  case Tok::LParen: {
    take();
    ExprPtr e = parseExpr();
    expect(Tok::RParen, "to close '('");
    return e;
  }
  case Tok::Error:
    throw Abort{};
  case Tok::LBracket:
    fail(t.loc, "a list '[...]' can only initialise a constant, as in 'const r = [1, 2, 3]'; read "
                "it as 'r(i)'");
  default:
    fail(t.loc, "expected an expression, found " + describe(t));
  }
}

} // namespace attnc::dsl
