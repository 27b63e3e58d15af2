// Source buffers, locations and the diagnostic engine that prints `file:line:col: error: ...`.
#pragma once

#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace attnc::dsl {

struct Loc {
  int line = 0;
  int col = 0;
  bool valid() const { return line > 0; }
};

struct SourceFile {
  std::string path;
  std::string text;
  // Text of line `line` (1-based) without its newline; empty if out of range.
  std::string lineText(int line) const;
};

enum class Severity { Error, Warning, Note };

struct Diagnostic {
  Severity severity;
  Loc loc;
  std::string message;
};

// Collects diagnostics; the front end keeps going after an error where it can so one run reports
// several problems, but callers stop before code generation once hasErrors() is true.
class DiagEngine {
public:
  explicit DiagEngine(std::shared_ptr<const SourceFile> file) : file_(std::move(file)) {}

  void error(Loc loc, std::string msg) { report(Severity::Error, loc, std::move(msg)); }
  void warning(Loc loc, std::string msg) { report(Severity::Warning, loc, std::move(msg)); }
  void note(Loc loc, std::string msg) { report(Severity::Note, loc, std::move(msg)); }

  bool hasErrors() const { return numErrors_ > 0; }
  int numErrors() const { return numErrors_; }
  const std::vector<Diagnostic>& diagnostics() const { return diags_; }
  const SourceFile& file() const { return *file_; }

  // Prints every diagnostic in clang style, with the source line and a caret.
  void print(std::ostream& os) const;
  static void print(std::ostream& os, const SourceFile& file, const Diagnostic& d);

private:
  void report(Severity s, Loc loc, std::string msg);

  std::shared_ptr<const SourceFile> file_;
  std::vector<Diagnostic> diags_;
  int numErrors_ = 0;
};

} // namespace attnc::dsl
