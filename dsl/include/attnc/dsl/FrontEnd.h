// Loading an .attn file with its imports, then parsing and checking it: the whole front end.
#pragma once

#include "attnc/dsl/AST.h"
#include "attnc/dsl/Sema.h"

#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace attnc::dsl {

struct FrontEndOptions {
  SemaOptions sema;
  // Extra directories searched for `import name` (after the importing file's directory and
  // before the standard library), as given with -I.
  std::vector<std::string> importPaths;
};

struct LoadedModule {
  std::shared_ptr<SourceFile> file; // the main file
  std::unique_ptr<Module> module;   // checked; function calls expanded
};

// Reads `path` and everything it imports, parses and analyses it. Prints clang-style
// diagnostics (`file:line:col: error: ...`, or a plain `error:` for unreadable files) to `err`;
// returns false on any error.
bool loadModule(const std::string &path, const FrontEndOptions &opts, std::ostream &err,
                LoadedModule *out);

// Reads the regular file `path` (at most `maxBytes` of it) into `text`. Anything else (a
// directory, device, FIFO or socket, such as /dev/zero or a named pipe nobody writes to) is
// refused without reading: it is opened non-blocking and checked with fstat first. On failure
// `why` says what is wrong, as a clause ("it is a FIFO, not a regular file").
bool readRegularFile(const std::string &path, size_t maxBytes, std::string *text, std::string *why);

// Source files (the input and each import) are at most this large.
constexpr size_t kMaxSourceBytes = 16u << 20;

// The directory of the standard library (`nn.attn`, ...): $ATTNC_STDLIB_DIR when set, else the
// installed `share/attnc/std` next to the running executable when it exists, else the source
// tree's `dsl/std` compiled in.
std::string standardLibraryDir();

} // namespace attnc::dsl
