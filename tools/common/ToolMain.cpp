// The command-line tools' shared main() support (ToolMain.h): cl parsing, errors and usage text.
#include "ToolMain.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringMap.h"

#include <cstdlib>
#include <cstring>
#include <regex>

namespace cl = llvm::cl;

namespace attnc::tool {
namespace {

std::string &errorPrefix() {
  static std::string prefix = "error: ";
  return prefix;
}

} // namespace

int fail(const llvm::Twine &msg) {
  // A message that names its position ("file:line:col: error: ...") is printed as it is.
  static const std::regex located(R"(^[^\s:]+(:\d+){2}: error: )");
  std::string text = msg.str();
  llvm::errs() << (std::regex_search(text, located) ? "" : errorPrefix()) << text << "\n";
  return 1;
}

std::optional<long> parseInteger(const std::string &text, long lo, long hi) {
  char *end = nullptr;
  long v = text.empty() ? 0 : std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end || v < lo || v > hi)
    return std::nullopt;
  return v;
}

CommandLine::CommandLine(cl::OptionCategory &category, std::string synopsis,
                         std::string errorPrefix, int usageStatus)
    : category_(category), synopsis_(std::move(synopsis)), usageStatus_(usageStatus) {
  attnc::tool::errorPrefix() = std::move(errorPrefix);
}

void CommandLine::errorAt(unsigned position, const llvm::Twine &msg, bool withUsage) {
  if (first_ && first_->position <= position)
    return;
  std::string text = msg.str();
  if (withUsage) {
    std::string usage;
    llvm::raw_string_ostream os(usage);
    printUsage(os);
    text += "\n" + llvm::StringRef(usage).rtrim('\n').str();
  }
  first_ = Error{position, std::move(text)};
}

int CommandLine::failWithUsage(const llvm::Twine &msg) const {
  std::string usage;
  llvm::raw_string_ostream os(usage);
  printUsage(os);
  return fail(msg + "\n" + llvm::StringRef(usage).rtrim('\n'));
}

void CommandLine::printUsage(llvm::raw_ostream &os) const {
  os << "usage: " << synopsis_ << "\n";
  for (const cl::Option &opt : usage_.options) {
    const cl::Option *o = &opt;
    // Spelt as the tools document them: -o PATH, --sizes=N=V,...
    std::string line = "  ";
    if (o->ArgStr.size() == 1)
      line += ("-" + o->ArgStr + (o->ValueStr.empty() ? "" : " " + o->ValueStr)).str();
    else
      line += ("--" + o->ArgStr + (o->ValueStr.empty() ? "" : "=" + o->ValueStr)).str();
    line += line.size() < usage_.column ? std::string(usage_.column - line.size(), ' ') : "  ";
    llvm::SmallVector<llvm::StringRef, 4> lines;
    o->HelpStr.split(lines, '\n');
    os << line << lines[0] << "\n";
    for (llvm::StringRef more : llvm::drop_begin(lines))
      os.indent(usage_.column) << more << "\n";
  }
  os << usage_.epilogue;
}

std::optional<int> CommandLine::parse(int argc, char **argv, Usage usage) {
  usage_ = std::move(usage);
  // The libraries' global options (LLVM's and MLIR's: --help's printer, --version, debugging
  // switches) are no options of the tool: without them, each is an unknown option as before.
  llvm::StringMap<cl::Option *> &options = cl::getRegisteredOptions();
  llvm::SmallPtrSet<cl::Option *, 32> foreign;
  for (auto &entry : options)
    if (!llvm::is_contained(entry.second->Categories, &category_))
      foreign.insert(entry.second);
  for (cl::Option *o : foreign)
    o->removeArgument();
  help_ = std::make_unique<cl::opt<bool>>("help", cl::desc("print the usage"), cl::ValueDisallowed,
                                          cl::cat(category_));
  helpShort_ = std::make_unique<cl::alias>("h", cl::aliasopt(*help_), cl::cat(category_));
  unknown_ = std::make_unique<cl::list<std::string>>(
      cl::Sink, cl::cat(category_), cl::callback([this](const std::string &arg) {
        errorAt(unknown_->getPosition(unknown_->size() - 1), "unknown option '" + arg + "'",
                /*withUsage=*/true);
      }));

  // A value option last on the command line gets an empty value rather than cl's "requires a
  // value!": its own check says what is missing ("-o needs a path"). Not when it is itself the
  // value of the option before it (-o -D), or after "--".
  std::vector<const char *> args(argv, argv + argc);
  auto lacksValue = [&](llvm::StringRef a) {
    cl::Option *o = nullptr;
    if (a.starts_with("--") && a.size() > 2 && !a.contains('='))
      o = options.lookup(a.drop_front(2));
    else if (a.size() == 2 && a[0] == '-' && a[1] != '-')
      o = options.lookup(a.drop_front(1));
    return o && o->getValueExpectedFlag() == cl::ValueRequired;
  };
  bool dashDash = false;
  for (int i = 1; i + 1 < argc; ++i)
    dashDash |= std::strcmp(argv[i], "--") == 0;
  if (argc >= 2 && !dashDash && lacksValue(argv[argc - 1]) &&
      !(argc >= 3 && lacksValue(argv[argc - 2])))
    args.push_back("");

  // cl's own diagnostics (a value for a flag, say) are printed by cl; the tool's are collected
  // by errorAt, and the first on the command line is reported.
  if (!cl::ParseCommandLineOptions((int)args.size(), args.data(), "", &llvm::errs(),
                                   /*EnvVar=*/nullptr, /*LongOptionsUseDoubleDash=*/true))
    return usageStatus_;
  if (help_->getNumOccurrences() && (!first_ || help_->getPosition() < first_->position)) {
    printUsage(llvm::outs());
    llvm::outs().flush();
    return 0;
  }
  if (first_) {
    fail(first_->message);
    return usageStatus_;
  }
  return std::nullopt;
}

IntOption::IntOption(CommandLine &cli, llvm::cl::OptionCategory &category, llvm::StringRef name,
                     llvm::StringRef desc, std::string what, long lo, long hi)
    : llvm::cl::opt<std::string>(name, llvm::cl::desc(desc), llvm::cl::value_desc("N"),
                                 llvm::cl::cat(category)),
      what_(std::move(what)), lo_(lo), hi_(hi) {
  setCallback([this, &cli](const std::string &text) {
    if (!parseInteger(text, lo_, hi_))
      cli.error(*this, "--" + ArgStr + " expects " + what_ + " in " + std::to_string(lo_) + ".." +
                           std::to_string(hi_) + ", got '" + text + "'");
  });
}

std::optional<long> IntOption::value() const {
  if (!getNumOccurrences())
    return std::nullopt;
  return parseInteger(getValue(), lo_, hi_);
}

} // namespace attnc::tool
