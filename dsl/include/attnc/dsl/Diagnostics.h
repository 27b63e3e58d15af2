// Source buffers, locations and the diagnostic engine that prints `file:line:col: error: ...`.
#pragma once

#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace attnc::dsl {

struct SourceFile;

// A position in a source file; `file` is null for the main file of a DiagEngine and names the
// imported file otherwise.
struct Loc {
  int line = 0;
  int col = 0;
  const SourceFile *file = nullptr;
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

  // While a context is pushed, every error and warning is followed by a note at its location
  // (innermost first): "in call to 'linear' here" points from a function body to its call site.
  void pushContext(Loc loc, std::string msg) {
    contexts_.push_back({Severity::Note, loc, std::move(msg)});
  }
  void popContext() { contexts_.pop_back(); }

  bool hasErrors() const { return numErrors_ > 0; }
  int numErrors() const { return numErrors_; }
  const std::vector<Diagnostic> &diagnostics() const { return diags_; }
  const SourceFile &file() const { return *file_; }

  // Prints every diagnostic in clang style, with the source line and a caret.
  void print(std::ostream &os) const;
  static void print(std::ostream &os, const SourceFile &file, const Diagnostic &d);

private:
  void report(Severity s, Loc loc, std::string msg);

  std::shared_ptr<const SourceFile> file_;
  std::vector<Diagnostic> diags_;
  std::vector<Diagnostic> contexts_;
  int numErrors_ = 0;
};

} // namespace attnc::dsl
