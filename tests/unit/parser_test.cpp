// Unit tests of the attnc DSL front end through its public API: the lexer (tokens, numbers,
// comments, locations), the parser (precedence, reductions, softmax, ranges, signatures, syntax
// errors) and semantic analysis (inferred ranges, types, size bindings, -D overrides).
#include "attnc/dsl/AST.h"
#include "attnc/dsl/Diagnostics.h"
#include "attnc/dsl/Lexer.h"
#include "attnc/dsl/Parser.h"
#include "attnc/dsl/Sema.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace attnc::dsl {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

std::shared_ptr<SourceFile> makeFile(const std::string &text,
                                     const std::string &path = "test.attn") {
  auto f = std::make_shared<SourceFile>();
  f->path = path;
  f->text = text;
  return f;
}

// A source file with its diagnostics and, when parsing succeeded, its module.
struct Unit {
  std::shared_ptr<SourceFile> file;
  std::unique_ptr<DiagEngine> diags;
  std::unique_ptr<Module> module;
  bool semaOk = false;

  std::vector<std::string> messages() const {
    std::vector<std::string> out;
    for (const auto &d : diags->diagnostics())
      out.push_back(d.message);
    return out;
  }
  std::string printed() const {
    std::ostringstream os;
    diags->print(os);
    return os.str();
  }
  std::string ast() const {
    std::ostringstream os;
    printModule(os, *module);
    return os.str();
  }
  const Kernel &kernel(size_t i = 0) const { return *module->kernels.at(i); }
  const Definition &def(const std::string &name, size_t k = 0) const {
    for (const auto &d : kernel(k).defs)
      if (d->name == name)
        return *d;
    ADD_FAILURE() << "no definition " << name;
    return *kernel(k).defs.at(0);
  }
};

Unit parse(const std::string &text) {
  Unit u;
  u.file = makeFile(text);
  u.diags = std::make_unique<DiagEngine>(u.file);
  Parser p(*u.file, *u.diags);
  u.module = p.parseModule();
  return u;
}

Unit compile(const std::string &text, const SemaOptions &opts = {}) {
  Unit u = parse(text);
  if (u.module)
    u.semaOk = analyze(*u.module, *u.diags, opts);
  return u;
}

// Parses `o(i) = EXPR` inside a kernel and returns the printed right-hand side.
std::string parseExprText(const std::string &expr) {
  Unit u = parse("kernel f(a: f32[N]) -> o: f32[N] {\n  o(i) = " + expr + "\n}\n");
  if (!u.module)
    return "<error: " + u.printed() + ">";
  return exprToString(*u.kernel().defs.at(0)->rhs);
}

std::vector<Token> lexAll(const std::string &text, DiagEngine *diagsOut = nullptr,
                          std::shared_ptr<SourceFile> *keep = nullptr) {
  static std::vector<std::shared_ptr<SourceFile>> files; // the lexer refers to the text
  auto f = makeFile(text);
  files.push_back(f);
  if (keep)
    *keep = f;
  DiagEngine local(f);
  DiagEngine &diags = diagsOut ? *diagsOut : local;
  Lexer lex(*f, diags);
  std::vector<Token> toks;
  for (;;) {
    toks.push_back(lex.next());
    if (toks.back().kind == Tok::Eof || toks.size() > 1000)
      break;
  }
  return toks;
}

std::vector<Tok> kinds(const std::vector<Token> &toks) {
  std::vector<Tok> k;
  for (const auto &t : toks)
    k.push_back(t.kind);
  return k;
}

const char *const kSdpa = "# scaled dot-product attention\n"
                          "kernel sdpa(q: f32[B, H, Nq, D], k: f32[B, H, Nk, D], v: f32[B, H, Nk, "
                          "D]) -> o: f32[B, H, Nq, D] {\n"
                          "  s(b, h, i, j) = rsqrt(D) * sum(d) q(b, h, i, d) * k(b, h, j, d)\n"
                          "  p(b, h, i, j) = softmax(j) s(b, h, i, j)\n"
                          "  o(b, h, i, e) = sum(j) p(b, h, i, j) * v(b, h, j, e)\n"
                          "}\n";

std::string rangeOf(const IndexDecl &d) {
  if (!d.range)
    return "<none>";
  return exprToString(*d.range->lo) + ".." + exprToString(*d.range->hi);
}

// ---------------------------------------------------------------------------------------------
// Lexer
// ---------------------------------------------------------------------------------------------

TEST(Lexer, KernelHeaderTokens) {
  auto toks = lexAll("kernel f(q: f32[N, 4]) -> o: i32[N] { }");
  EXPECT_THAT(kinds(toks),
              ElementsAre(Tok::KwKernel, Tok::Ident, Tok::LParen, Tok::Ident, Tok::Colon,
                          Tok::Ident, Tok::LBracket, Tok::Ident, Tok::Comma, Tok::Int,
                          Tok::RBracket, Tok::RParen, Tok::Arrow, Tok::Ident, Tok::Colon,
                          Tok::Ident, Tok::LBracket, Tok::Ident, Tok::RBracket, Tok::LBrace,
                          Tok::RBrace, Tok::Eof));
  EXPECT_EQ(toks[1].text, "f");
  EXPECT_EQ(toks[5].text, "f32");
  EXPECT_EQ(toks[9].text, "4");
  EXPECT_EQ(toks[12].text, "->");
}

TEST(Lexer, KeywordsAndIdentifiers) {
  auto toks = lexAll("kernel const in where softmax sum kernels _x1 in2");
  EXPECT_THAT(kinds(toks),
              ElementsAre(Tok::KwKernel, Tok::KwConst, Tok::KwIn, Tok::KwWhere, Tok::Ident,
                          Tok::Ident, Tok::Ident, Tok::Ident, Tok::Ident, Tok::Eof));
  // softmax and sum are contextual, not keywords.
  EXPECT_EQ(toks[4].text, "softmax");
  EXPECT_EQ(toks[6].text, "kernels");
  EXPECT_EQ(toks[7].text, "_x1");
}

TEST(Lexer, OperatorsOneAndTwoCharacters) {
  auto toks = lexAll("+ - * / % < <= > >= == != && || ! ? = . .. ; ->");
  EXPECT_THAT(kinds(toks),
              ElementsAre(Tok::Plus, Tok::Minus, Tok::Star, Tok::Slash, Tok::Percent, Tok::Lt,
                          Tok::Le, Tok::Gt, Tok::Ge, Tok::EqEq, Tok::Ne, Tok::AndAnd, Tok::OrOr,
                          Tok::Bang, Tok::Question, Tok::Assign, Tok::Dot, Tok::DotDot, Tok::Semi,
                          Tok::Arrow, Tok::Eof));
}

TEST(Lexer, Numbers) {
  auto toks = lexAll("3 2.5 1e-5 1E+3 .5 7. 0 2147483647");
  ASSERT_THAT(toks, SizeIs(9));
  EXPECT_THAT(kinds(toks), ElementsAre(Tok::Int, Tok::Float, Tok::Float, Tok::Float, Tok::Float,
                                       Tok::Float, Tok::Int, Tok::Int, Tok::Eof));
  EXPECT_EQ(toks[2].text, "1e-5");
  EXPECT_EQ(toks[3].text, "1E+3");
  EXPECT_EQ(toks[4].text, ".5");
  EXPECT_EQ(toks[5].text, "7.");
}

TEST(Lexer, RangeIsIntDotDotNotFloat) {
  auto toks = lexAll("0..N 1..4 a..b");
  EXPECT_THAT(kinds(toks), ElementsAre(Tok::Int, Tok::DotDot, Tok::Ident, Tok::Int, Tok::DotDot,
                                       Tok::Int, Tok::Ident, Tok::DotDot, Tok::Ident, Tok::Eof));
  EXPECT_EQ(toks[0].text, "0");
  EXPECT_EQ(toks[5].text, "4");
}

TEST(Lexer, ExponentWithoutDigitsIsNotPartOfTheNumber) {
  // `2e` followed by a non-digit: the 'e' would glue an identifier onto the number.
  auto f = makeFile("2e + 1");
  DiagEngine diags(f);
  Lexer lex(*f, diags);
  Token t = lex.next();
  EXPECT_EQ(t.kind, Tok::Error);
  ASSERT_THAT(diags.diagnostics(), SizeIs(1));
  EXPECT_EQ(diags.diagnostics()[0].message, "invalid number '2e'");
  EXPECT_EQ(diags.diagnostics()[0].loc.col, 1);
}

TEST(Lexer, InvalidNumberSuffix) {
  auto f = makeFile("x * 12abc");
  DiagEngine diags(f);
  Lexer lex(*f, diags);
  lex.next();
  lex.next();
  Token t = lex.next();
  EXPECT_EQ(t.kind, Tok::Error);
  EXPECT_EQ(t.text, "12abc");
  ASSERT_THAT(diags.diagnostics(), SizeIs(1));
  EXPECT_EQ(diags.diagnostics()[0].message, "invalid number '12abc'");
  EXPECT_EQ(diags.diagnostics()[0].loc.line, 1);
  EXPECT_EQ(diags.diagnostics()[0].loc.col, 5);
}

TEST(Lexer, CommentsAreSkipped) {
  auto toks =
      lexAll("# a comment with kernel ( ) tokens\nfoo # trailing\n  # indented\nbar#glued\n");
  ASSERT_THAT(toks, SizeIs(3));
  EXPECT_EQ(toks[0].kind, Tok::Ident);
  EXPECT_EQ(toks[0].text, "foo");
  EXPECT_EQ(toks[1].text, "bar");
  EXPECT_EQ(toks[2].kind, Tok::Eof);
}

TEST(Lexer, Locations) {
  auto toks = lexAll("kernel\n  f(\tx\n\n   ) ->");
  ASSERT_THAT(toks, SizeIs(7));
  auto at = [&](size_t i, int line, int col) {
    EXPECT_EQ(toks[i].loc.line, line) << "token " << i << " '" << toks[i].text << "'";
    EXPECT_EQ(toks[i].loc.col, col) << "token " << i << " '" << toks[i].text << "'";
  };
  at(0, 1, 1); // kernel
  at(1, 2, 3); // f
  at(2, 2, 4); // (
  at(3, 2, 6); // x, after a tab counted as one column
  at(4, 4, 4); // )
  at(5, 4, 6); // ->
  at(6, 4, 8); // end of file
}

TEST(Lexer, EofLocationAfterTrailingNewline) {
  auto toks = lexAll("a\n");
  ASSERT_THAT(toks, SizeIs(2));
  EXPECT_EQ(toks[1].kind, Tok::Eof);
  EXPECT_EQ(toks[1].loc.line, 2);
  EXPECT_EQ(toks[1].loc.col, 1);
}

TEST(Lexer, UnexpectedCharacterAndByte) {
  auto f = makeFile("a @ b\n\xff & c");
  DiagEngine diags(f);
  Lexer lex(*f, diags);
  std::vector<Token> toks;
  for (Token t = lex.next(); t.kind != Tok::Eof; t = lex.next())
    toks.push_back(t);
  EXPECT_THAT(kinds(toks),
              ElementsAre(Tok::Ident, Tok::Error, Tok::Ident, Tok::Error, Tok::Error, Tok::Ident));
  ASSERT_THAT(diags.diagnostics(), SizeIs(3));
  EXPECT_EQ(diags.diagnostics()[0].message, "unexpected character '@'");
  EXPECT_EQ(diags.diagnostics()[0].loc.col, 3);
  EXPECT_EQ(diags.diagnostics()[1].message, "unexpected byte 0xff (is this a text file?)");
  EXPECT_EQ(diags.diagnostics()[1].loc.line, 2);
  EXPECT_EQ(diags.diagnostics()[1].loc.col, 1);
  EXPECT_EQ(diags.diagnostics()[2].message, "unexpected character '&'");
  EXPECT_EQ(diags.diagnostics()[2].loc.col, 3);
  EXPECT_EQ(diags.numErrors(), 3);
}

// ---------------------------------------------------------------------------------------------
// Diagnostics
// ---------------------------------------------------------------------------------------------

TEST(Diagnostics, PrintsFileLineColumnSourceAndCaret) {
  auto f = makeFile("line one\n\tx = yy + 1\n", "dir/k.attn");
  DiagEngine diags(f);
  diags.error(Loc{2, 7}, "unknown identifier 'yy'");
  diags.note(Loc{1, 6}, "see here");
  diags.error(Loc{}, "no location");
  std::ostringstream os;
  diags.print(os);
  EXPECT_EQ(os.str(), "dir/k.attn:2:7: error: unknown identifier 'yy'\n"
                      "\tx = yy + 1\n"
                      "\t     ^\n"
                      "dir/k.attn:1:6: note: see here\n"
                      "line one\n"
                      "     ^\n"
                      "dir/k.attn: error: no location\n");
  EXPECT_EQ(diags.numErrors(), 2);
  EXPECT_TRUE(diags.hasErrors());
}

TEST(Diagnostics, BinaryLinesAreNotEchoed) {
  auto f = makeFile(std::string("ab\x01\n", 4));
  DiagEngine diags(f);
  diags.error(Loc{1, 3}, "unexpected byte 0x01 (is this a text file?)");
  std::ostringstream os;
  diags.print(os);
  EXPECT_EQ(os.str(), "test.attn:1:3: error: unexpected byte 0x01 (is this a text file?)\n");
}

TEST(Diagnostics, LineText) {
  SourceFile f{"p", "first\nsecond\n\nfourth"};
  EXPECT_EQ(f.lineText(1), "first");
  EXPECT_EQ(f.lineText(2), "second");
  EXPECT_EQ(f.lineText(3), "");
  EXPECT_EQ(f.lineText(4), "fourth");
  EXPECT_EQ(f.lineText(5), "");
  EXPECT_EQ(f.lineText(0), "");
}

// ---------------------------------------------------------------------------------------------
// Parser
// ---------------------------------------------------------------------------------------------

TEST(Parser, BinaryPrecedenceAndAssociativity) {
  EXPECT_EQ(parseExprText("a(i) + 2.0 * 3.0 - 4.0"), "((a(i) + (2.0 * 3.0)) - 4.0)");
  EXPECT_EQ(parseExprText("1 - 2 - 3"), "((1 - 2) - 3)");
  EXPECT_EQ(parseExprText("8 / 4 / 2"), "((8 / 4) / 2)");
  EXPECT_EQ(parseExprText("i % 2 * 3"), "((i % 2) * 3)");
  EXPECT_EQ(parseExprText("(1 + 2) * 3"), "((1 + 2) * 3)");
  EXPECT_EQ(parseExprText("i < 2 && i > 0 || i == 5"), "(((i < 2) && (i > 0)) || (i == 5))");
  EXPECT_EQ(parseExprText("i + 1 <= N - 1"), "((i + 1) <= (N - 1))");
  EXPECT_EQ(parseExprText("i != 0 || i >= 3 && i < 4"), "((i != 0) || ((i >= 3) && (i < 4)))");
}

TEST(Parser, UnaryOperatorsBindTightest) {
  EXPECT_EQ(parseExprText("-a(i) * 2.0"), "(-a(i) * 2.0)");
  EXPECT_EQ(parseExprText("- -a(i)"), "--a(i)");
  EXPECT_EQ(parseExprText("!(i < 1) && i > 0"), "(!(i < 1) && (i > 0))");
  EXPECT_EQ(parseExprText("2.0 * -a(i)"), "(2.0 * -a(i))");
}

TEST(Parser, ReductionIsLowestPrecedencePrefixOperator) {
  // The body of a reduction extends as far right as possible.
  EXPECT_EQ(parseExprText("sum(j) a(j) * 2.0 + 1.0"), "(sum(j) ((a(j) * 2.0) + 1.0))");
  EXPECT_EQ(parseExprText("2.0 * sum(j) a(j) + 1.0"), "(2.0 * (sum(j) (a(j) + 1.0)))");
  EXPECT_EQ(parseExprText("(sum(j) a(j)) + 1.0"), "((sum(j) a(j)) + 1.0)");
  EXPECT_EQ(parseExprText("sum(j) sum(k) a(j) * a(k)"), "(sum(j) (sum(k) (a(j) * a(k))))");
  EXPECT_EQ(parseExprText("sum(j, k) a(j)"), "(sum(j, k) a(j))");
}

TEST(Parser, ReductionNodes) {
  Unit u = parse("kernel f(a: f32[N]) -> o: f32[N] {\n  o(i) = min(j in 1..N - 1, k) a(j)\n}\n");
  ASSERT_TRUE(u.module) << u.printed();
  const Expr &r = *u.kernel().defs[0]->rhs;
  ASSERT_EQ(r.kind, ExprKind::Reduce);
  EXPECT_EQ(r.reduceKind, ReduceKind::Min);
  ASSERT_THAT(r.reduceIndices, SizeIs(2));
  EXPECT_EQ(r.reduceIndices[0].name, "j");
  EXPECT_EQ(rangeOf(r.reduceIndices[0]), "1..(N - 1)");
  EXPECT_EQ(r.reduceIndices[1].name, "k");
  EXPECT_FALSE(r.reduceIndices[1].range);
  EXPECT_EQ(r.loc.line, 2);
  EXPECT_EQ(r.loc.col, 10);
  EXPECT_EQ(r.reduceIndices[1].loc.col, 29);
}

TEST(Parser, MaxReductionVersusElementwiseMax) {
  auto rhs = [](const std::string &e) {
    static std::vector<Unit> keep;
    keep.push_back(parse("kernel f(a: f32[N]) -> o: f32[N] {\n  o(i) = " + e + "\n}\n"));
    EXPECT_TRUE(keep.back().module) << keep.back().printed();
    return keep.back().module ? keep.back().kernel().defs[0]->rhs.get() : nullptr;
  };
  // max(j) followed by an operand: a reduction.
  const Expr *r = rhs("max(j) a(j)");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->kind, ExprKind::Reduce);
  EXPECT_EQ(r->reduceKind, ReduceKind::Max);
  r = rhs("max(j, k) (a(j) + a(k))");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->kind, ExprKind::Reduce);
  EXPECT_THAT(r->reduceIndices, SizeIs(2));
  r = rhs("max(j in 0..4) 1.0");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->kind, ExprKind::Reduce);
  r = rhs("min(j) 3");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->kind, ExprKind::Reduce);
  EXPECT_EQ(r->reduceKind, ReduceKind::Min);
  // max(a, b) with expression arguments, or followed by an operator: the elementwise function.
  r = rhs("max(a(i), 0.0)");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->kind, ExprKind::Read);
  EXPECT_EQ(r->name, "max");
  EXPECT_THAT(r->args, SizeIs(2));
  r = rhs("max(i, N) + 1");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->kind, ExprKind::Binary);
  EXPECT_EQ(r->args[0]->kind, ExprKind::Read);
  EXPECT_EQ(r->args[0]->name, "max");
  r = rhs("max(i, N)");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->kind, ExprKind::Read);
}

TEST(Parser, SoftmaxWithMask) {
  Unit u = parse("kernel f(s: f32[N, N]) -> p: f32[N, N] {\n  p(i, j) = softmax(j where j <= i && "
                 "i > 0) s(i, j) * 2.0\n}\n");
  ASSERT_TRUE(u.module) << u.printed();
  const Expr &e = *u.kernel().defs[0]->rhs;
  ASSERT_EQ(e.kind, ExprKind::Softmax);
  EXPECT_THAT(e.softmaxAxes, ElementsAre("j"));
  ASSERT_THAT(e.softmaxAxisLocs, SizeIs(1));
  EXPECT_EQ(e.softmaxAxisLocs[0].col, 21);
  ASSERT_TRUE(e.where);
  EXPECT_EQ(exprToString(*e.where), "((j <= i) && (i > 0))");
  ASSERT_TRUE(e.body);
  EXPECT_EQ(exprToString(*e.body), "(s(i, j) * 2.0)");
  EXPECT_EQ(exprToString(e), "softmax(j where ((j <= i) && (i > 0))) (s(i, j) * 2.0)");
}

TEST(Parser, SoftmaxOverSeveralAxesWithoutMask) {
  Unit u =
      parse("kernel f(s: f32[N, N]) -> p: f32[N, N] {\n  p(i, j) = softmax(i, j) s(i, j)\n}\n");
  ASSERT_TRUE(u.module) << u.printed();
  const Expr &e = *u.kernel().defs[0]->rhs;
  ASSERT_EQ(e.kind, ExprKind::Softmax);
  EXPECT_THAT(e.softmaxAxes, ElementsAre("i", "j"));
  EXPECT_FALSE(e.where);
}

TEST(Parser, SoftmaxWithoutParenthesesIsAName) {
  EXPECT_EQ(parseExprText("softmax + 1"), "(softmax + 1)");
}

TEST(Parser, IndexRangesOnLeftHandSide) {
  Unit u = parse("kernel f(a: f32[N]) -> o: f32[N] {\n  t(i in 0..N, j in 2 * 1..N + 1) = a(i)\n  "
                 "o(i) = a(i)\n}\n");
  ASSERT_TRUE(u.module) << u.printed();
  const Definition &t = *u.kernel().defs[0];
  ASSERT_THAT(t.indices, SizeIs(2));
  EXPECT_EQ(rangeOf(t.indices[0]), "0..N");
  EXPECT_EQ(rangeOf(t.indices[1]), "(2 * 1)..(N + 1)");
  EXPECT_FALSE(u.kernel().defs[1]->indices[0].range);
}

TEST(Parser, RangeDoesNotSwallowComparisons) {
  // A range end is an additive expression: `0..N < 1` is not a range up to a condition.
  Unit u = parse("kernel f(a: f32[N]) -> o: f32[N] {\n  o(i in 0..N < 1) = a(i)\n}\n");
  EXPECT_FALSE(u.module);
  ASSERT_THAT(u.diags->diagnostics(), SizeIs(1));
  EXPECT_EQ(u.diags->diagnostics()[0].message,
            "expected ')' after the definition's indices, found '<'");
}

TEST(Parser, ProductDimensionsOfOutputs) {
  Unit u = parse("kernel h(x: f32[N, M, D]) -> (o: f32[N, M * D], p: f32[2*3*N], s: f32[2 * 3]) {\n"
                 "  o(n, c) = 1.0\n  p(i) = 1.0\n  s(i) = 1.0\n"
                 "}\n");
  ASSERT_TRUE(u.module) << u.printed();
  const Kernel &k = u.kernel();
  const DimSpec &md = k.outputs[0]->dims[1];
  ASSERT_TRUE(md.isProduct());
  EXPECT_EQ(md.symbol, "");
  ASSERT_THAT(md.factors, SizeIs(2));
  EXPECT_EQ(md.factors[0].symbol, "M");
  EXPECT_EQ(md.factors[1].symbol, "D");
  EXPECT_EQ(md.factors[1].loc.col, 45);
  EXPECT_EQ(md.loc.col, 41);
  EXPECT_EQ(md.str(), "M*D");
  EXPECT_FALSE(md.isStatic());
  EXPECT_FALSE(k.outputs[0]->dims[0].isProduct());
  EXPECT_EQ(k.outputs[1]->dims[0].str(), "2*3*N");
  ASSERT_THAT(k.outputs[1]->dims[0].factors, SizeIs(3));
  EXPECT_EQ(k.outputs[1]->dims[0].factors[0].value, 2);
  // A product of literals only is a static extent; its value is the product.
  EXPECT_TRUE(k.outputs[2]->dims[0].isStatic());
  EXPECT_EQ(k.outputs[2]->dims[0].value, 6);
  EXPECT_EQ(k.outputs[2]->dims[0].str(), "2*3");
}

TEST(Parser, ProductDimensionInAnInputIsAnError) {
  Unit u = parse("kernel h(x: f32[N, M * D]) -> o: f32[N] {\n  o(n) = 1.0\n}\n");
  EXPECT_FALSE(u.module);
  ASSERT_THAT(u.diags->diagnostics(), SizeIs(1));
  EXPECT_EQ(u.diags->diagnostics()[0].loc.col, 20);
  EXPECT_EQ(u.diags->diagnostics()[0].message,
            "dimension 1 of input 'x' is a product (M*D); input dimensions bind the sizes, so each "
            "must be one size "
            "name or literal (products are allowed in outputs only)");
}

TEST(Parser, SignatureWithMultipleOutputsAndLiteralDims) {
  Unit u = parse(
      "kernel attn(q: f32[B, N, 64], m: i32[N]) -> (o: f32[B, N, 64], idx: i32[N], c: f32[3]) {\n"
      "  const w = 3, eps = 1e-5\n"
      "  ;\n"
      "  o(b, i, d) = q(b, i, d)\n"
      "}\n");
  ASSERT_TRUE(u.module) << u.printed();
  const Kernel &k = u.kernel();
  EXPECT_EQ(k.name, "attn");
  EXPECT_EQ(k.loc.line, 1);
  EXPECT_EQ(k.loc.col, 1);
  ASSERT_THAT(k.inputs, SizeIs(2));
  ASSERT_THAT(k.outputs, SizeIs(3));
  EXPECT_EQ(k.inputs[0]->name, "q");
  EXPECT_EQ(k.inputs[0]->role, TensorRole::Input);
  ASSERT_THAT(k.inputs[0]->dims, SizeIs(3));
  EXPECT_EQ(k.inputs[0]->dims[0].symbol, "B");
  EXPECT_EQ(k.inputs[0]->dims[2].symbol, "");
  EXPECT_EQ(k.inputs[0]->dims[2].value, 64);
  EXPECT_EQ(k.inputs[0]->dims[2].str(), "64");
  EXPECT_EQ(k.inputs[0]->dims[2].loc.col, 26);
  EXPECT_EQ(k.inputs[1]->elemType, ElemType::I32);
  EXPECT_EQ(k.outputs[0]->name, "o");
  EXPECT_EQ(k.outputs[0]->role, TensorRole::Output);
  EXPECT_EQ(k.outputs[1]->name, "idx");
  EXPECT_EQ(k.outputs[1]->elemType, ElemType::I32);
  EXPECT_EQ(k.outputs[2]->dims[0].value, 3);
  ASSERT_THAT(k.consts, SizeIs(2));
  EXPECT_EQ(k.consts[0].name, "w");
  EXPECT_EQ(exprToString(*k.consts[0].value), "3");
  EXPECT_EQ(k.consts[1].name, "eps");
  EXPECT_EQ(k.consts[1].loc.line, 2);
  EXPECT_EQ(k.consts[1].loc.col, 16);
  EXPECT_EQ(exprToString(*k.consts[1].value), "1e-05");
  ASSERT_THAT(k.defs, SizeIs(1));
  EXPECT_EQ(k.defs[0]->loc.line, 4);
  EXPECT_EQ(k.defs[0]->loc.col, 3);
}

TEST(Parser, SeveralKernelsAndEmptyInputList) {
  Unit u = parse(
      "kernel a() -> o: f32[4] { o(i) = 1.0 }\nkernel b(x: f32[N]) -> y: f32[N] { y(i) = x(i) }\n");
  ASSERT_TRUE(u.module) << u.printed();
  ASSERT_THAT(u.module->kernels, SizeIs(2));
  EXPECT_THAT(u.kernel(0).inputs, IsEmpty());
  EXPECT_EQ(u.kernel(1).name, "b");
  EXPECT_EQ(u.kernel(1).loc.line, 2);
}

TEST(Parser, NumbersInExpressions) {
  Unit u = parse("kernel f(a: f32[N]) -> o: f32[N] {\n  o(i) = 1e-5 + 3 + 2.5\n}\n");
  ASSERT_TRUE(u.module) << u.printed();
  const Expr &e = *u.kernel().defs[0]->rhs; // ((1e-5 + 3) + 2.5)
  const Expr &small = *e.args[0]->args[0];
  EXPECT_EQ(small.kind, ExprKind::Number);
  EXPECT_FALSE(small.isIntLiteral);
  EXPECT_DOUBLE_EQ(small.number, 1e-5);
  const Expr &three = *e.args[0]->args[1];
  EXPECT_TRUE(three.isIntLiteral);
  EXPECT_DOUBLE_EQ(three.number, 3);
}

TEST(Parser, StopsAtFirstSyntaxErrorWithLocation) {
  Unit u = parse("kernel f(a: f32[N]) -> o: f32[N] {\n  o(i) a(i)\n  s(i) = + \n  t = 1\n}\n");
  EXPECT_FALSE(u.module);
  ASSERT_THAT(u.diags->diagnostics(), SizeIs(1));
  const Diagnostic &d = u.diags->diagnostics()[0];
  EXPECT_EQ(d.severity, Severity::Error);
  EXPECT_EQ(d.message, "expected '=' in the definition of 'o', found 'a'");
  EXPECT_EQ(d.loc.line, 2);
  EXPECT_EQ(d.loc.col, 8);
}

struct SyntaxCase {
  const char *text;
  int line, col;
  const char *message;
};

void PrintTo(const SyntaxCase &c, std::ostream *os) {
  *os << "\"" << c.text << "\" -> " << c.message;
}

class ParserErrors : public ::testing::TestWithParam<SyntaxCase> {};

TEST_P(ParserErrors, ReportsOneErrorAtTheOffendingToken) {
  const SyntaxCase &c = GetParam();
  Unit u = parse(c.text);
  EXPECT_FALSE(u.module);
  ASSERT_THAT(u.diags->diagnostics(), SizeIs(1)) << u.printed();
  const Diagnostic &d = u.diags->diagnostics()[0];
  EXPECT_EQ(d.message, c.message);
  EXPECT_EQ(d.loc.line, c.line);
  EXPECT_EQ(d.loc.col, c.col);
}

INSTANTIATE_TEST_SUITE_P(
    Syntax, ParserErrors,
    ::testing::Values(SyntaxCase{"", 1, 1,
                                 "no kernel in file (expected 'kernel name(...) -> ... { ... }')"},
                      SyntaxCase{"# only a comment\n", 2, 1,
                                 "no kernel in file (expected 'kernel name(...) -> ... { ... }')"},
                      SyntaxCase{"func f() -> o: f32[1] {}", 1, 1,
                                 "expected 'kernel', 'def' or 'import', found 'func'"},
                      SyntaxCase{"kernel f(a f32[N]) -> o: f32[N] {}", 1, 12,
                                 "expected ':' after 'a' (write 'name: f32[dims]'), found 'f32'"},
                      SyntaxCase{"kernel f(a: f32[N]) o: f32[N] {}", 1, 21,
                                 "expected '->' before the kernel outputs, found 'o'"},
                      SyntaxCase{"kernel f(a: f64[N]) -> o: f32[N] {}", 1, 13,
                                 "unknown element type 'f64' (expected f32, i32, bf16 or f16)"},
                      SyntaxCase{"kernel f(a: f32[0]) -> o: f32[N] {}", 1, 17,
                                 "dimension must be positive, got 0"},
                      SyntaxCase{"kernel f(a: f32[N]) -> o: f32[N] {\n  o(i) = a(i)\n", 3, 1,
                                 "expected '}' to close kernel 'f', found end of file"},
                      SyntaxCase{"kernel f(a: f32[N]) -> o: f32[N] { o(i) = sum() a(i) }", 1, 47,
                                 "a reduction needs at least one index, as in 'sum(j) ...'"},
                      SyntaxCase{"kernel f(a: f32[N]) -> o: f32[N] { o(i) = softmax() a(i) }", 1,
                                 51, "softmax needs at least one index, as in 'softmax(j) ...'"},
                      SyntaxCase{"kernel f(a: f32[N]) -> o: f32[N] { o(i) = 1 < 2 < 3 }", 1, 49,
                                 "comparisons cannot be chained; use '&&'"},
                      SyntaxCase{"kernel f(a: f32[N]) -> o: f32[N] { o(i) = a(i }", 1, 47,
                                 "expected ')' to close the arguments of 'a', found '}'"},
                      SyntaxCase{"kernel f(a: f32[N]) -> o: f32[N] { o(i) = 3000000000 }", 1, 43,
                                 "integer '3000000000' does not fit in 32 bits"},
                      SyntaxCase{"kernel f(a: f32[N]) -> o: f32[N] { o(i) = a(i) } extra", 1, 50,
                                 "expected 'kernel', 'def' or 'import', found 'extra'"},
                      SyntaxCase{"kernel f(a: f32[N]) -> o: f32[N] { const c 2 }", 1, 44,
                                 "expected '=' after constant 'c', found '2'"}));

TEST(Parser, LexerErrorStopsParsingWithoutParserError) {
  Unit u = parse("kernel f(a: f32[N]) -> o: f32[N] {\n  o(i) = a(i) $ 2.0\n}\n");
  EXPECT_FALSE(u.module);
  EXPECT_THAT(u.messages(), ElementsAre("unexpected character '$'"));
  EXPECT_EQ(u.diags->diagnostics()[0].loc.line, 2);
  EXPECT_EQ(u.diags->diagnostics()[0].loc.col, 15);
}

TEST(Parser, DeepNestingIsRejected) {
  std::string deep = std::string(300, '(') + "a(i)" + std::string(300, ')');
  Unit u = parse("kernel f(a: f32[N]) -> o: f32[N] {\n  o(i) = " + deep + "\n}\n");
  EXPECT_FALSE(u.module);
  ASSERT_THAT(u.diags->diagnostics(), SizeIs(1));
  EXPECT_THAT(u.diags->diagnostics()[0].message, HasSubstr("nested too deeply"));
  EXPECT_EQ(u.diags->diagnostics()[0].loc.line, 2);

  std::string ok = std::string(50, '(') + "a(i)" + std::string(50, ')');
  Unit v = parse("kernel f(a: f32[N]) -> o: f32[N] {\n  o(i) = " + ok + "\n}\n");
  EXPECT_TRUE(v.module) << v.printed();
}

// ---------------------------------------------------------------------------------------------
// Sema
// ---------------------------------------------------------------------------------------------

TEST(Sema, SdpaSizesAndInferredRanges) {
  Unit u = compile(kSdpa);
  ASSERT_TRUE(u.semaOk) << u.printed();
  const Kernel &k = u.kernel();
  ASSERT_THAT(k.sizes, SizeIs(5));
  std::vector<std::string> bound;
  for (const auto &s : k.sizes)
    bound.push_back(s.name + "=" + s.tensor->name + "." + std::to_string(s.dim));
  EXPECT_THAT(bound, ElementsAre("B=q.0", "H=q.1", "Nq=q.2", "D=q.3", "Nk=k.2"));

  const Definition &s = u.def("s");
  ASSERT_THAT(s.indices, SizeIs(4));
  EXPECT_EQ(rangeOf(s.indices[2]), "0..Nq");
  EXPECT_EQ(rangeOf(s.indices[3]), "0..Nk");
  EXPECT_EQ(s.indices[3].rangeOrigin, "'k' dimension 2 (Nk)");
  EXPECT_EQ(s.indices[3].rangeOriginLoc.line, 3);
  // The reduction index d of s: 0..D from q's last dimension.
  const Expr &sum = *s.rhs->args[1];
  ASSERT_EQ(sum.kind, ExprKind::Reduce);
  EXPECT_EQ(rangeOf(sum.reduceIndices[0]), "0..D");

  // Output indices take the declared output dimensions.
  const Definition &o = u.def("o");
  EXPECT_EQ(rangeOf(o.indices[3]), "0..D");
  EXPECT_EQ(o.indices[3].rangeOrigin, "output 'o' dimension 3 (D)");
  ASSERT_TRUE(o.tensor);
  EXPECT_EQ(o.tensor->role, TensorRole::Output);
  EXPECT_EQ(rangeOf(o.rhs->reduceIndices[0]), "0..Nk");

  // s and p become f32 locals with the extents of their indices.
  ASSERT_THAT(k.locals, SizeIs(2));
  EXPECT_EQ(k.locals[0]->name, "s");
  EXPECT_EQ(k.locals[0]->role, TensorRole::Local);
  EXPECT_EQ(k.locals[0]->elemType, ElemType::F32);
  ASSERT_THAT(k.locals[0]->extents, SizeIs(4));
  EXPECT_EQ(exprToString(*k.locals[0]->extents[3]), "Nk");
  EXPECT_EQ(k.locals[1]->name, "p");
}

TEST(Sema, AstPrinterShowsRangesAndTypes) {
  Unit u = compile(kSdpa);
  ASSERT_TRUE(u.semaOk) << u.printed();
  std::string ast = u.ast();
  EXPECT_THAT(ast, HasSubstr("kernel sdpa @2:1\n"));
  EXPECT_THAT(ast, HasSubstr("  input k: f32[B, H, Nk, D] @2:34\n"));
  EXPECT_THAT(ast, HasSubstr("  size Nk = k.dim[2]\n"));
  EXPECT_THAT(ast,
              HasSubstr("  def s(b in 0..B, h in 0..H, i in 0..Nq, j in 0..Nk) : f32 @3:3\n"
                        "    = (rsqrt(D) * (sum(d in 0..D) (q(b, h, i, d) * k(b, h, j, d))))\n"));
  EXPECT_THAT(
      ast, HasSubstr("  def o(b in 0..B, h in 0..H, i in 0..Nq, e in 0..D) : f32 output @5:3\n"));
}

TEST(Sema, ExpressionTypesAndIdentifierKinds) {
  Unit u = compile("kernel f(q: f32[N, D], n: i32[N]) -> o: f32[N, D] {\n"
                   "  const w = 2, h = 0.5\n"
                   "  x(i) = n(i) * 2 + i\n"
                   "  c(i, d) = select(d < D - 1 && i != 0, q(i, d), h)\n"
                   "  o(i, d) = w * q(i, (d + 1) % D) + max(q(i, d), 0.0)\n"
                   "}\n");
  ASSERT_TRUE(u.semaOk) << u.printed();
  const Definition &x = u.def("x");
  EXPECT_EQ(x.rhs->type, ScalarType::Int);
  ASSERT_TRUE(x.tensor);
  EXPECT_EQ(x.tensor->elemType, ElemType::I32);

  const Definition &c = u.def("c");
  EXPECT_EQ(c.rhs->kind, ExprKind::Call);
  EXPECT_EQ(c.rhs->type, ScalarType::Float);
  EXPECT_EQ(c.rhs->args[0]->type, ScalarType::Bool);
  const Expr &h = *c.rhs->args[2];
  EXPECT_EQ(h.identKind, IdentKind::Const);
  EXPECT_DOUBLE_EQ(h.constValue, 0.5);
  EXPECT_EQ(h.type, ScalarType::Float);

  const Definition &o = u.def("o");
  const Expr &sum = *o.rhs;              // ((w * q(...)) + max(...))
  const Expr &w = *sum.args[0]->args[0]; // w
  EXPECT_EQ(w.identKind, IdentKind::Const);
  EXPECT_EQ(w.type, ScalarType::Int);
  const Expr &read = *sum.args[0]->args[1]; // q(i, (d + 1) % D)
  EXPECT_EQ(read.kind, ExprKind::Read);
  ASSERT_TRUE(read.tensor);
  EXPECT_EQ(read.tensor->name, "q");
  EXPECT_EQ(read.args[0]->identKind, IdentKind::Index);
  ASSERT_TRUE(read.args[0]->index);
  EXPECT_EQ(read.args[0]->index, &o.indices[0]);
  EXPECT_EQ(read.args[1]->type, ScalarType::Int);
  EXPECT_EQ(read.args[1]->args[1]->identKind, IdentKind::Size);
  const Expr &mx = *sum.args[1];
  EXPECT_EQ(mx.kind, ExprKind::Call) << "max(a, b) is the elementwise builtin after Sema";
  EXPECT_EQ(mx.type, ScalarType::Float);
  EXPECT_EQ(sum.type, ScalarType::Float);
}

TEST(Sema, CausalMaskAndMaxReduction) {
  Unit u = compile("kernel f(s: f32[N, M]) -> (p: f32[N, M], m: f32[N]) {\n"
                   "  p(i, j) = softmax(j where j <= i) s(i, j)\n"
                   "  m(i) = max(j) s(i, j)\n"
                   "}\n");
  ASSERT_TRUE(u.semaOk) << u.printed();
  const Definition &p = u.def("p");
  EXPECT_EQ(p.rhs->type, ScalarType::Float);
  ASSERT_TRUE(p.rhs->where);
  EXPECT_EQ(p.rhs->where->type, ScalarType::Bool);
  EXPECT_EQ(rangeOf(p.indices[1]), "0..M");
  const Definition &m = u.def("m");
  EXPECT_EQ(m.rhs->reduceKind, ReduceKind::Max);
  EXPECT_EQ(rangeOf(m.rhs->reduceIndices[0]), "0..M");
  EXPECT_EQ(m.rhs->reduceIndices[0].rangeOrigin, "'s' dimension 1 (M)");
}

TEST(Sema, ExplicitRangesAndConstants) {
  Unit u = compile("kernel f(q: f32[N, D]) -> o: f32[N] {\n"
                   "  const w = 4, h = w / 2 + 1, r = 7 % 3, f = 1 / 4.0, neg = -7 / 2\n"
                   "  o(i) = sum(c in 0..w) q(i, c % D)\n"
                   "}\n");
  ASSERT_TRUE(u.semaOk) << u.printed();
  const Kernel &k = u.kernel();
  ASSERT_THAT(k.consts, SizeIs(5));
  EXPECT_DOUBLE_EQ(k.consts[1].folded, 3);
  EXPECT_TRUE(k.consts[1].isInt);
  EXPECT_DOUBLE_EQ(k.consts[2].folded, 1);
  EXPECT_DOUBLE_EQ(k.consts[3].folded, 0.25);
  EXPECT_FALSE(k.consts[3].isInt);
  EXPECT_DOUBLE_EQ(k.consts[4].folded, -4) << "integer division of constants rounds down";
  EXPECT_EQ(rangeOf(k.defs[0]->rhs->reduceIndices[0]), "0..w");
}

TEST(Sema, DefineOverrides) {
  const char *text =
      "kernel f(q: f32[N]) -> o: f32[N] {\n  const w = 3, eps = 0.5\n  o(i) = w * q(i) + eps\n}\n";
  Unit u = compile(text, SemaOptions{{{"w", "5"}, {"eps", "1e-3"}}});
  ASSERT_TRUE(u.semaOk) << u.printed();
  const Kernel &k = u.kernel();
  EXPECT_DOUBLE_EQ(k.consts[0].folded, 5);
  EXPECT_TRUE(k.consts[0].overridden);
  EXPECT_DOUBLE_EQ(k.consts[1].folded, 1e-3);
  EXPECT_TRUE(k.consts[1].overridden);
  EXPECT_THAT(u.ast(), HasSubstr("  const w = 5 (from -D) @2:9\n"));
  // Uses of the constant see the overridden value.
  const Expr &w = *k.defs[0]->rhs->args[0]->args[0];
  EXPECT_EQ(w.identKind, IdentKind::Const);
  EXPECT_DOUBLE_EQ(w.constValue, 5);

  Unit plain = compile(text);
  ASSERT_TRUE(plain.semaOk);
  EXPECT_FALSE(plain.kernel().consts[0].overridden);
  EXPECT_THAT(plain.ast(), HasSubstr("  const w = 3 @2:9\n"));
}

TEST(Sema, DefineOverridesFeedLaterConstantsAndEveryKernel) {
  Unit u =
      compile("kernel a(q: f32[N]) -> o: f32[N] {\n  const w = 3, h = w * 2\n  o(i) = h * q(i)\n}\n"
              "kernel b(q: f32[N]) -> o: f32[N] {\n  o(i) = q(i)\n}\n",
              SemaOptions{{{"w", "10"}}});
  ASSERT_TRUE(u.semaOk) << u.printed();
  EXPECT_DOUBLE_EQ(u.kernel(0).consts[1].folded, 20);
  EXPECT_FALSE(u.kernel(0).consts[1].overridden);
  EXPECT_THAT(u.kernel(1).consts, IsEmpty());
}

TEST(Sema, DefineOverrideErrors) {
  const char *text = "kernel f(q: f32[N]) -> o: f32[N] {\n  const w = 3\n  o(i) = w * q(i)\n}\n";
  auto firstMessage = [&](std::vector<std::pair<std::string, std::string>> defs) {
    Unit u = compile(text, SemaOptions{std::move(defs)});
    EXPECT_FALSE(u.semaOk);
    if (u.diags->diagnostics().empty())
      return std::string("<no diagnostic>");
    EXPECT_FALSE(u.diags->diagnostics()[0].loc.valid());
    return u.diags->diagnostics()[0].message;
  };
  EXPECT_EQ(firstMessage({{"x", "1"}}), "-D x=1: no kernel in this file has a constant 'x'");
  EXPECT_EQ(firstMessage({{"w", "abc"}}), "-D w=abc: 'abc' is not a number");
  EXPECT_EQ(firstMessage({{"w", ""}}), "-D w=: '' is not a number");
  EXPECT_EQ(firstMessage({{"w", "nan"}}), "-D w=nan: 'nan' is not a number");
  EXPECT_EQ(firstMessage({{"w", "2.5"}}),
            "-D w=2.5: constant 'w' is an integer; write it without '.' or an exponent");
  EXPECT_EQ(firstMessage({{"w", "3000000000"}}),
            "-D w=3000000000: 3000000000 does not fit in a 32-bit integer");
}

struct SemaCase {
  const char
      *body; // definitions inside `kernel f(q: f32[N, D], k: f32[M, D]) -> o: f32[N, D] { ... }`
  int line, col; // of the first diagnostic; line 2 is the first line of the body
  const char *message;
};

void PrintTo(const SemaCase &c, std::ostream *os) {
  *os << "\"" << c.body << "\" -> " << c.message;
}

class SemaErrors : public ::testing::TestWithParam<SemaCase> {};

TEST_P(SemaErrors, FirstDiagnostic) {
  const SemaCase &c = GetParam();
  Unit u = compile(std::string("kernel f(q: f32[N, D], k: f32[M, D]) -> o: f32[N, D] {\n") +
                   c.body + "\n}\n");
  ASSERT_TRUE(u.module) << u.printed();
  EXPECT_FALSE(u.semaOk);
  ASSERT_THAT(u.diags->diagnostics(), ::testing::Not(IsEmpty()));
  const Diagnostic &d = u.diags->diagnostics()[0];
  EXPECT_EQ(d.severity, Severity::Error);
  EXPECT_EQ(d.message, c.message) << u.printed();
  EXPECT_EQ(d.loc.line, c.line) << u.printed();
  EXPECT_EQ(d.loc.col, c.col) << u.printed();
}

INSTANTIATE_TEST_SUITE_P(
    Rules, SemaErrors,
    ::testing::Values(
        SemaCase{"  o(i, d) = zz + q(i, d)", 2, 13, "unknown identifier 'zz'"},
        SemaCase{"  o(i, d) = foo(i, d)", 2, 13, "unknown tensor or function 'foo'"},
        SemaCase{"  o(i, d) = q(i)", 2, 13,
                 "wrong number of indices: 'q' has rank 2 but is indexed with 1"},
        SemaCase{
            "  o(i in 0..M, d) = k(i, d)", 2, 5,
            "size mismatch: output 'o' dimension 0 is N, but index 'i' is given the range 0..M"},
        SemaCase{"  o(i, d) = q(i, d) + k(i, d)", 2, 25,
                 "inconsistent sizes for index 'i': 'k' dimension 0 (M) here, but output 'o' "
                 "dimension 0 (N)"},
        SemaCase{"  s(i, j) = q(i, 0)\n  o(i, d) = q(i, d)", 2, 8,
                 "cannot infer the range of index 'j': it is never used directly as a tensor "
                 "index; give it as "
                 "'j in 0..N'"},
        SemaCase{"  o(i, d) = softmax(x) q(i, d)", 2, 21,
                 "softmax over 'x', which is not a free index of 'o' (softmax normalises over "
                 "indices of the "
                 "left-hand side)"},
        SemaCase{"  o(i, d) = 2.0 * softmax(d) q(i, d)", 2, 19,
                 "softmax must be the whole right-hand side of a definition, as in 'p(i, j) = "
                 "softmax(j) s(i, j)'"},
        SemaCase{"  o(i, d) = q(i, 0.5)", 2, 18,
                 "type mismatch: index 1 of 'q' must be an integer, found float"},
        SemaCase{"  o(i, d) = o(i, d)", 2, 13, "recursive definition: 'o' reads itself"},
        SemaCase{"  s(i, d) = r(i, d)\n  r(i, d) = q(i, d)\n  o(i, d) = q(i, d)", 2, 13,
                 "'r' is used before its definition"},
        SemaCase{"  o(i, d) = q(i, d)\n  o(i, d) = q(i, d)", 3, 3, "redefinition of 'o'"},
        SemaCase{"  s(i, d) = q(i, d)", 1, 41, "output 'o' is never defined"},
        SemaCase{"  o(i, d) = exp(q(i, d), 1.0)", 2, 13, "'exp' takes 1 argument, got 2"},
        SemaCase{"  o(i, d) = q(i, d) % 2.0", 2, 21, "type mismatch: '%' needs integer operands"},
        SemaCase{"  o(i, d) = q(i, d) > 0.0", 2, 21,
                 "definition of 'o' is a boolean; use select(cond, 1.0, 0.0) for a mask value"},
        SemaCase{"  o(i, d) = q + q(i, d)", 2, 13, "'q' is a tensor; index it, as in 'q(...)'"},
        SemaCase{"  o(i, d) = N(i) + q(i, d)", 2, 13,
                 "'N' is a scalar, not a tensor; it takes no indices"},
        SemaCase{"  q(i, d) = 1.0\n  o(i, d) = q(i, d)", 2, 3,
                 "cannot define 'q': it is a kernel input"},
        SemaCase{
            "  s__t(i, d) = q(i, d)\n  o(i, d) = q(i, d)", 2, 3,
            "definition name 's__t' contains '__', which is reserved for compiler-generated names"},
        SemaCase{"  o(i, d) = sum(i) q(i, d)", 2, 17,
                 "index 'i' shadows an enclosing index of the same name"},
        SemaCase{"  const c = 1 / 0\n  o(i, d) = q(i, d)", 2, 15,
                 "constant 'c' must be a compile-time number: division by zero"}));

TEST(Sema, ErrorsDoNotCascadeIntoCorrectDefinitions) {
  Unit u = compile(
      "kernel f(q: f32[N]) -> o: f32[N] {\n  s(i) = zz + q(i)\n  t(i) = q(i)\n  o(i) = t(i)\n}\n");
  EXPECT_FALSE(u.semaOk);
  EXPECT_THAT(u.messages(), ElementsAre("unknown identifier 'zz'"));
}

TEST(Sema, RedefinitionHasANoteAtTheFirstDefinition) {
  Unit u = compile(
      "kernel f(q: f32[N]) -> o: f32[N] {\n  s(i) = q(i)\n  s(i) = q(i)\n  o(i) = q(i)\n}\n");
  EXPECT_FALSE(u.semaOk);
  ASSERT_GE(u.diags->diagnostics().size(), 2u);
  const Diagnostic &err = u.diags->diagnostics()[0];
  const Diagnostic &note = u.diags->diagnostics()[1];
  EXPECT_EQ(err.message, "redefinition of 's'");
  EXPECT_EQ(err.loc.line, 3);
  EXPECT_EQ(note.severity, Severity::Note);
  EXPECT_EQ(note.message, "'s' was first defined here");
  EXPECT_EQ(note.loc.line, 2);
  EXPECT_EQ(note.loc.col, 3);
  EXPECT_EQ(u.diags->numErrors(),
            static_cast<int>(
                std::count_if(u.diags->diagnostics().begin(), u.diags->diagnostics().end(),
                              [](const Diagnostic &d) { return d.severity == Severity::Error; })));
}

TEST(Sema, InconsistentSizesNotePointsAtTheOrigin) {
  Unit u = compile(
      "kernel f(q: f32[N], k: f32[M]) -> o: f32[N] {\n  s(i) = q(i) + k(i)\n  o(i) = q(i)\n}\n");
  EXPECT_FALSE(u.semaOk);
  EXPECT_THAT(
      u.diags->diagnostics(),
      ::testing::Contains(AllOf(Field(&Diagnostic::severity, Severity::Note),
                                Field(&Diagnostic::message, "the range of 'i' comes from here"))));
  std::string printed = u.printed();
  EXPECT_THAT(
      printed,
      HasSubstr(
          "test.attn:2:19: error: inconsistent sizes for index 'i': 'k' dimension 0 (M) here, "
          "but 'q' dimension 0 (N)\n  s(i) = q(i) + k(i)\n                  ^\n"));
  EXPECT_THAT(printed, HasSubstr("test.attn:2:12: note: the range of 'i' comes from here\n"));
}

TEST(Sema, BuiltinsAndReservedNames) {
  EXPECT_TRUE(isBuiltinFunction("exp"));
  EXPECT_TRUE(isBuiltinFunction("select"));
  EXPECT_TRUE(isBuiltinFunction("max"));
  EXPECT_FALSE(isBuiltinFunction("sum"));
  EXPECT_FALSE(isBuiltinFunction("softmax"));
  EXPECT_FALSE(isBuiltinFunction("q"));

  Unit u = compile("kernel f(exp: f32[N]) -> o: f32[N] {\n  o(i) = 1.0\n}\n");
  EXPECT_FALSE(u.semaOk);
  EXPECT_THAT(u.messages(),
              ::testing::Contains("input name 'exp' is reserved (a builtin function or keyword)"));
}

TEST(Sema, SeveralKernelsAreAnalysedIndependently) {
  Unit u = compile("kernel a(x: f32[N]) -> o: f32[N] { o(i) = x(i) }\n"
                   "kernel b(x: f32[M, K]) -> o: f32[M] { o(i) = sum(j) x(i, j) }\n");
  ASSERT_TRUE(u.semaOk) << u.printed();
  EXPECT_EQ(u.kernel(1).sizes.at(0).name, "M");
  EXPECT_EQ(rangeOf(u.kernel(1).defs[0]->rhs->reduceIndices[0]), "0..K");

  Unit dup = compile("kernel a(x: f32[N]) -> o: f32[N] { o(i) = x(i) }\n"
                     "kernel a(x: f32[N]) -> o: f32[N] { o(i) = x(i) }\n");
  EXPECT_FALSE(dup.semaOk);
  EXPECT_THAT(dup.messages(), ::testing::Contains("redefinition of kernel 'a'"));
}

} // namespace
} // namespace attnc::dsl
