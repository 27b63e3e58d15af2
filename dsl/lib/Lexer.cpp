// Tokenizer for .attn files; reports stray bytes with their location instead of giving up silently.
#include "attnc/dsl/Lexer.h"

#include <cctype>
#include <cstdio>

namespace attnc::dsl {

const char *tokName(Tok t) {
  switch (t) {
  case Tok::Eof:
    return "end of file";
  case Tok::Error:
    return "invalid token";
  case Tok::Ident:
    return "identifier";
  case Tok::Int:
    return "integer";
  case Tok::Float:
    return "number";
  case Tok::KwKernel:
    return "'kernel'";
  case Tok::KwConst:
    return "'const'";
  case Tok::KwIn:
    return "'in'";
  case Tok::KwWhere:
    return "'where'";
  case Tok::KwDef:
    return "'def'";
  case Tok::KwImport:
    return "'import'";
  case Tok::KwLet:
    return "'let'";
  case Tok::KwRequire:
    return "'require'";
  case Tok::String:
    return "a string";
  case Tok::LParen:
    return "'('";
  case Tok::RParen:
    return "')'";
  case Tok::LBracket:
    return "'['";
  case Tok::RBracket:
    return "']'";
  case Tok::LBrace:
    return "'{'";
  case Tok::RBrace:
    return "'}'";
  case Tok::Comma:
    return "','";
  case Tok::Colon:
    return "':'";
  case Tok::Semi:
    return "';'";
  case Tok::Arrow:
    return "'->'";
  case Tok::Assign:
    return "'='";
  case Tok::Dot:
    return "'.'";
  case Tok::DotDot:
    return "'..'";
  case Tok::Plus:
    return "'+'";
  case Tok::Minus:
    return "'-'";
  case Tok::Star:
    return "'*'";
  case Tok::Slash:
    return "'/'";
  case Tok::Percent:
    return "'%'";
  case Tok::Lt:
    return "'<'";
  case Tok::Le:
    return "'<='";
  case Tok::Gt:
    return "'>'";
  case Tok::Ge:
    return "'>='";
  case Tok::EqEq:
    return "'=='";
  case Tok::Ne:
    return "'!='";
  case Tok::AndAnd:
    return "'&&'";
  case Tok::OrOr:
    return "'||'";
  case Tok::Bang:
    return "'!'";
  case Tok::Question:
    return "'?'";
  }
  return "token";
}

void Lexer::advance() {
  if (atEnd())
    return;
  if (src_[pos_] == '\n') {
    ++line_;
    col_ = 1;
  } else {
    ++col_;
  }
  ++pos_;
}

void Lexer::skipSpaceAndComments() {
  while (!atEnd()) {
    char c = peek();
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
      advance();
    } else if (c == '#') {
      while (!atEnd() && peek() != '\n')
        advance();
    } else {
      break;
    }
  }
}

Token Lexer::next() {
  skipSpaceAndComments();
  Loc loc{line_, col_, file_};
  size_t start = pos_;
  if (atEnd())
    return {Tok::Eof, "", loc};
  unsigned char c = (unsigned char)peek();

  if (std::isalpha(c) || c == '_') {
    while (std::isalnum((unsigned char)peek()) || peek() == '_')
      advance();
    Token t = make(Tok::Ident, loc, start);
    if (t.text == "kernel")
      t.kind = Tok::KwKernel;
    else if (t.text == "const")
      t.kind = Tok::KwConst;
    else if (t.text == "in")
      t.kind = Tok::KwIn;
    else if (t.text == "where")
      t.kind = Tok::KwWhere;
    else if (t.text == "def")
      t.kind = Tok::KwDef;
    else if (t.text == "import")
      t.kind = Tok::KwImport;
    else if (t.text == "let")
      t.kind = Tok::KwLet;
    else if (t.text == "require")
      t.kind = Tok::KwRequire;
    return t;
  }
  if (std::isdigit(c) || (c == '.' && std::isdigit((unsigned char)peek(1)))) {
    bool isFloat = false;
    while (std::isdigit((unsigned char)peek()))
      advance();
    // `0..N` is a range, not the float `0.`: only take the dot when no second dot follows.
    if (peek() == '.' && peek(1) != '.') {
      isFloat = true;
      advance();
      while (std::isdigit((unsigned char)peek()))
        advance();
    }
    if (peek() == 'e' || peek() == 'E') {
      size_t save = pos_;
      int sl = line_, sc = col_;
      advance();
      if (peek() == '+' || peek() == '-')
        advance();
      if (std::isdigit((unsigned char)peek())) {
        isFloat = true;
        while (std::isdigit((unsigned char)peek()))
          advance();
      } else {
        pos_ = save, line_ = sl, col_ = sc;
      }
    }
    if (std::isalpha((unsigned char)peek()) || peek() == '_') {
      while (std::isalnum((unsigned char)peek()) || peek() == '_')
        advance();
      diags_.error(loc, "invalid number '" + src_.substr(start, pos_ - start) + "'");
      return make(Tok::Error, loc, start);
    }
    return make(isFloat ? Tok::Float : Tok::Int, loc, start);
  }

  if (c == '"') { // a string: only import paths use them, so no escapes and no newlines
    advance();
    while (!atEnd() && peek() != '"' && peek() != '\n' && peek() != '\0')
      advance();
    if (!atEnd() && peek() == '\0') {
      diags_.error(loc, "a NUL byte in a string");
      return make(Tok::Error, loc, start);
    }
    if (peek() != '"') {
      diags_.error(loc, "unterminated string");
      return make(Tok::Error, loc, start);
    }
    advance();
    Token t = make(Tok::String, loc, start);
    t.text = t.text.substr(1, t.text.size() - 2);
    return t;
  }

  auto one = [&](Tok k) {
    advance();
    return make(k, loc, start);
  };
  auto two = [&](Tok k) {
    advance();
    advance();
    return make(k, loc, start);
  };
  switch (c) {
  case '(':
    return one(Tok::LParen);
  case ')':
    return one(Tok::RParen);
  case '[':
    return one(Tok::LBracket);
  case ']':
    return one(Tok::RBracket);
  case '{':
    return one(Tok::LBrace);
  case '}':
    return one(Tok::RBrace);
  case ',':
    return one(Tok::Comma);
  case ':':
    return one(Tok::Colon);
  case ';':
    return one(Tok::Semi);
  case '+':
    return one(Tok::Plus);
  case '*':
    return one(Tok::Star);
  case '/':
    return one(Tok::Slash);
  case '%':
    return one(Tok::Percent);
  case '?':
    return one(Tok::Question);
  case '-':
    return peek(1) == '>' ? two(Tok::Arrow) : one(Tok::Minus);
  case '.':
    return peek(1) == '.' ? two(Tok::DotDot) : one(Tok::Dot);
  case '=':
    return peek(1) == '=' ? two(Tok::EqEq) : one(Tok::Assign);
  case '!':
    return peek(1) == '=' ? two(Tok::Ne) : one(Tok::Bang);
  case '<':
    return peek(1) == '=' ? two(Tok::Le) : one(Tok::Lt);
  case '>':
    return peek(1) == '=' ? two(Tok::Ge) : one(Tok::Gt);
  case '&':
    if (peek(1) == '&')
      return two(Tok::AndAnd);
    break;
  case '|':
    if (peek(1) == '|')
      return two(Tok::OrOr);
    break;
  default:
    break;
  }
  advance();
  char buf[64];
  if (c >= 0x20 && c < 0x7f)
    std::snprintf(buf, sizeof buf, "unexpected character '%c'", c);
  else
    std::snprintf(buf, sizeof buf, "unexpected byte 0x%02x (is this a text file?)", c);
  diags_.error(loc, buf);
  return make(Tok::Error, loc, start);
}

} // namespace attnc::dsl
