// The command-line tools' shared main() support: llvm::cl parsing with the tools' own error texts and usage.
//
// Each tool declares its options as llvm::cl options in its own category and checks a value in
// the option's callback (cl::callback), reporting through CommandLine::error. The tools' messages
// ("error: -o needs a path", "error: unknown option '-x'" and the usage) are what users and the
// tests see, so cl's own diagnostics are kept out of the way: an unknown option goes to a
// cl::Sink, a value option last on the command line gets an empty value (its check names what
// is missing), -h/--help print the tool's usage, and of several errors the one first on the
// command line is reported, as when each tool walked argv itself.
#pragma once

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace attnc::tool {

// Prints `msg` on stderr after the running tool's error prefix ("error: ", or "attn-tune: error: ")
// and returns 1, the tools' exit status for a failure.
int fail(const llvm::Twine &msg);

// `text` as a base-10 integer in lo..hi (strtol's syntax), or nullopt.
std::optional<long> parseInteger(const std::string &text, long lo, long hi);

// An enum option's parser (cl::values) that keeps an unknown value for the tool to report in its
// own words (`unknown --emit value 'x' (expected ...)`) instead of cl's message.
template <class T> class EnumParser : public llvm::cl::parser<T> {
public:
  using llvm::cl::parser<T>::parser;
  // The last value given, when it is none of the enum's; cleared by a known one (the last wins).
  std::optional<std::string> unknown;

  bool parse(llvm::cl::Option &o, llvm::StringRef name, llvm::StringRef arg, T &v) {
    llvm::StringRef text = o.hasArgStr() ? arg : name;
    for (const auto &value : this->Values)
      if (value.Name == text) {
        v = value.V.getValue();
        unknown.reset();
        return false;
      }
    unknown = text.str();
    return false;
  }
};

// What --help prints: "usage: SYNOPSIS", each option with its description (cl::desc; further
// lines indented to `column`), then the epilogue.
struct Usage {
  // In the order they are listed (references: cl::list overloads operator&).
  std::vector<std::reference_wrapper<const llvm::cl::Option>> options;
  std::string epilogue; // after the options (newline-terminated)
  size_t column = 20;
};

// One tool's command line. Construct it before the options (their callbacks report through it).
class CommandLine {
public:
  // `category` holds the tool's options; every other registered cl option (LLVM's and MLIR's
  // global ones) is taken off the command line, so the tool accepts exactly its own options.
  // `errorPrefix` is fail()'s; `usageStatus` the exit status of a wrong command line.
  CommandLine(llvm::cl::OptionCategory &category, std::string synopsis, std::string errorPrefix,
              int usageStatus = 1);

  // From an option's callback (cl::callback): the value `opt` just got is wrong.
  void error(const llvm::cl::Option &opt, const llvm::Twine &msg) {
    errorAt(opt.getPosition(), msg);
  }
  // An error about the argument at `position` of argv; `withUsage` appends the usage.
  void errorAt(unsigned position, const llvm::Twine &msg, bool withUsage = false);

  // Parses argv. nullopt: main goes on; otherwise main's exit status, after printing the usage
  // (-h, --help: 0) or the error first on the command line (usageStatus).
  std::optional<int> parse(int argc, char **argv, Usage usage);

  void printUsage(llvm::raw_ostream &os) const;
  // fail(msg) followed by the usage, for a command line that is wrong as a whole.
  int failWithUsage(const llvm::Twine &msg) const;

private:
  struct Error {
    unsigned position;
    std::string message;
  };
  llvm::cl::OptionCategory &category_;
  std::string synopsis_;
  int usageStatus_;
  Usage usage_;
  std::optional<Error> first_;
  // Made by parse(), after LLVM's own --help is taken off the command line.
  std::unique_ptr<llvm::cl::opt<bool>> help_;
  std::unique_ptr<llvm::cl::alias> helpShort_;
  std::unique_ptr<llvm::cl::list<std::string>> unknown_; // cl::Sink: every unknown option
};

// An integer option in lo..hi, spelt as text so that a bad value gets the tools' message
// ("--NAME expects WHAT in LO..HI, got 'X'") rather than cl's; checked by its callback. Options
// that several tools share (attnc's and attn-run's --online-tile) are declared with it once.
class IntOption : public llvm::cl::opt<std::string> {
public:
  // `desc` must outlive the option (cl keeps a reference); `what` names the value in the error.
  IntOption(CommandLine &cli, llvm::cl::OptionCategory &category, llvm::StringRef name,
            llvm::StringRef desc, std::string what, long lo, long hi);
  // The value given on the command line (checked), or nullopt when the option is absent.
  std::optional<long> value() const;

private:
  std::string what_;
  long lo_, hi_;
};

} // namespace attnc::tool
