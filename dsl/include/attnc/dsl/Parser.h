// Recursive-descent parser from tokens to the AST; stops at the first syntax error.
#pragma once

#include "attnc/dsl/AST.h"
#include "attnc/dsl/Lexer.h"

#include <set>
#include <vector>

namespace attnc::dsl {

class Parser {
public:
  // Deeper nesting than this is rejected with a diagnostic rather than risking the stack.
  static constexpr int kMaxDepth = 256;
  // Bound on the height of any expression tree (long operator chains are trees too), so that
  // every later recursive walk (Sema, MLIRGen, destructors) stays well inside the stack.
  static constexpr int kMaxTreeHeight = 2000;

  Parser(const SourceFile &file, DiagEngine &diags);
  // Returns null after reporting an error. An imported file (`requireKernel` false) may hold
  // only functions and imports.
  std::unique_ptr<Module> parseModule(bool requireKernel = true);

private:
  struct Abort {};
  const Token &cur() const { return toks_[pos_]; }
  const Token &peekTok(size_t n) const { return toks_[std::min(pos_ + n, toks_.size() - 1)]; }
  bool is(Tok k) const { return cur().kind == k; }
  bool isIdent(const char *text) const { return is(Tok::Ident) && cur().text == text; }
  Token take() { return toks_[pos_ < toks_.size() - 1 ? pos_++ : pos_]; }
  bool accept(Tok k) {
    if (!is(k))
      return false;
    take();
    return true;
  }
  Token expect(Tok k, const char *context);
  [[noreturn]] void fail(Loc loc, const std::string &msg);

  std::unique_ptr<Kernel> parseKernel();
  std::unique_ptr<TensorDecl> parseParam(TensorRole role);
  DimFactor parseDimFactor(const char *context);
  void parseConsts(Kernel &k);
  std::unique_ptr<Definition> parseDefinition();
  std::unique_ptr<FunctionDef> parseFunctionDef();
  Import parseImport();
  ExprPtr parseLet();
  IndexDecl parseIndexDecl(bool allowRange);
  ExprPtr parseExpr();
  ExprPtr parseBinary(int level);
  ExprPtr parseUnary();
  ExprPtr parsePrimary();
  ExprPtr parseReduction();
  ExprPtr parseSoftmax();
  bool looksLikeReduction() const;
  void setHeight(Expr &e);

  bool isBound(const std::string &name) const;

  DiagEngine &diags_;
  // Names already meaning something where the parser stands (tensors, sizes, constants, indices
  // in scope): `max(i, M) ...` over bound names is the elementwise function, not a reduction.
  std::set<std::string> kernelNames_;
  std::vector<std::string> indexScope_;
  std::vector<Token> toks_;
  size_t pos_ = 0;
  int depth_ = 0;
};

} // namespace attnc::dsl
