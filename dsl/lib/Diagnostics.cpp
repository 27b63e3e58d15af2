// Clang-style rendering of front-end diagnostics.
#include "attnc/dsl/Diagnostics.h"

namespace attnc::dsl {

std::string SourceFile::lineText(int line) const {
  if (line < 1)
    return {};
  size_t pos = 0;
  for (int l = 1; l < line; ++l) {
    pos = text.find('\n', pos);
    if (pos == std::string::npos)
      return {};
    ++pos;
  }
  size_t end = text.find('\n', pos);
  return text.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
}

void DiagEngine::report(Severity s, Loc loc, std::string msg) {
  if (s == Severity::Error)
    ++numErrors_;
  diags_.push_back({s, loc, std::move(msg)});
  if (s != Severity::Note)
    for (auto it = contexts_.rbegin(); it != contexts_.rend(); ++it)
      diags_.push_back(*it);
}

static const char *severityName(Severity s) {
  switch (s) {
  case Severity::Error:
    return "error";
  case Severity::Warning:
    return "warning";
  case Severity::Note:
    return "note";
  }
  return "error";
}

void DiagEngine::print(std::ostream &os, const SourceFile &file, const Diagnostic &d) {
  os << file.path;
  if (d.loc.valid())
    os << ":" << d.loc.line << ":" << d.loc.col;
  os << ": " << severityName(d.severity) << ": " << d.message << "\n";
  if (!d.loc.valid())
    return;
  std::string line = file.lineText(d.loc.line);
  if (!line.empty() && line.back() == '\r')
    line.pop_back(); // CRLF files
  // Binary input would make the echoed line unreadable; only echo printable text.
  for (unsigned char c : line)
    if ((c < 0x20 && c != '\t') || c >= 0x7f)
      return;
  os << line << "\n";
  for (int i = 1; i < d.loc.col && i <= (int)line.size(); ++i)
    os << (line[i - 1] == '\t' ? '\t' : ' ');
  os << "^\n";
}

void DiagEngine::print(std::ostream &os) const {
  for (const auto &d : diags_)
    print(os, d.loc.file ? *d.loc.file : *file_, d);
}

} // namespace attnc::dsl
