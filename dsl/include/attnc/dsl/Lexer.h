// Tokenizer for .attn files: identifiers, numbers, punctuation and `#` comments, with locations.
#pragma once

#include "attnc/dsl/Diagnostics.h"

#include <string>

namespace attnc::dsl {

enum class Tok {
  Eof,
  Error,
  Ident,
  Int,
  Float,
  String,
  // keywords
  KwKernel,
  KwConst,
  KwIn,
  KwWhere,
  KwDef,
  KwImport,
  KwLet,
  KwRequire,
  // punctuation
  LParen,
  RParen,
  LBracket,
  RBracket,
  LBrace,
  RBrace,
  Comma,
  Colon,
  Semi,
  Arrow,
  Assign,
  Dot,
  DotDot,
  Plus,
  Minus,
  Star,
  Slash,
  Percent,
  Lt,
  Le,
  Gt,
  Ge,
  EqEq,
  Ne,
  AndAnd,
  OrOr,
  Bang,
  Question,
};

const char *tokName(Tok t);

struct Token {
  Tok kind = Tok::Eof;
  std::string text;
  Loc loc;
};

class Lexer {
public:
  Lexer(const SourceFile &file, DiagEngine &diags) : file_(&file), src_(file.text), diags_(diags) {}
  Token next();

private:
  char peek(size_t ahead = 0) const {
    return pos_ + ahead < src_.size() ? src_[pos_ + ahead] : '\0';
  }
  bool atEnd() const { return pos_ >= src_.size(); }
  void advance();
  void skipSpaceAndComments();
  Token make(Tok k, Loc loc, size_t start) const {
    return {k, src_.substr(start, pos_ - start), loc};
  }

  const SourceFile *file_;
  const std::string &src_;
  DiagEngine &diags_;
  size_t pos_ = 0;
  int line_ = 1, col_ = 1;
};

} // namespace attnc::dsl
