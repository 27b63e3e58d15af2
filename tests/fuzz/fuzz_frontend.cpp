// libFuzzer entry point for attnc's front end: lexer, parser, Sema, MLIRGen, the dialect passes and HalideGen (no Halide compile).
//
// The input is the text of an .attn file. Lines at its very top may carry options that attnc
// takes on the command line, as comments the DSL itself ignores, so that the fuzzer also reaches
// the code behind them:
//   #D NAME=VALUE ...    -D overrides of kernel constants
//   #S NAME=VALUE,...    --sizes estimates for the cost-model passes
//   #O ORDER             --sample-order (auto, sample-first, project-first)
//   #T N                 --online-tile (keys per tile of the online softmax, 1..1024)
//   #F off               --online-softmax=off
//
// Values a mutation of the text rarely spells (a constant at 2^29 or 2^31 - 1, a kernel named
// memcpy) come from a binary prefix instead: an input that starts with the byte 0x01 (which no
// .attn text may contain) carries three selector bytes before its text. The first picks a value
// from kDefineValues for a -D of the constant the second picks (the n-th `const` of the file; 0xff:
// none), the third a name from kKernelNames for the first kernel (0xff: keep it).
//
// What counts as a finding, beyond crashes, hangs and leaks: a rejected input without a
// `file:line:col: error:` diagnostic, a kernel name the C symbol checks refuse, IR from MLIRGen or
// a pass that fails verification, and
// HalideGen refusing (or Halide asserting on) a kernel that the front end accepted. Each of these
// means a user gets no usable message, so the harness aborts on them.
#include "attnc/Compilation.h"
#include "attnc/HalideGen.h"
#include "attnc/Transforms/Passes.h"
#include "attnc/dsl/AST.h"
#include "attnc/dsl/Names.h"
#include "attnc/dsl/Parser.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <unistd.h>

namespace {

[[noreturn]] void finding(const std::string &what, const std::string &detail) {
  std::fprintf(stderr, "fuzz_frontend: FINDING: %s\n%s\n", what.c_str(), detail.c_str());
  std::fflush(stderr);
  std::abort();
}

// A private directory holding only the input file, so relative imports in the input find nothing
// but the input itself (a cycle the front end handles) or the standard library.
struct Workspace {
  std::string dir, path;
  Workspace() {
    const char *tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/attnc-fuzz-XXXXXX";
    if (!mkdtemp(tmpl.data()))
      finding("cannot create a temporary directory", tmpl);
    dir = tmpl;
    path = dir + "/input.attn";
  }
  ~Workspace() {
    std::remove(path.c_str());
    rmdir(dir.c_str());
  }
};

Workspace &workspace() {
  static Workspace w;
  return w;
}

// Quoted import paths that could leave the workspace (absolute, or through a parent directory)
// would let the fuzzer read arbitrary files of this machine (/proc/kmsg blocks, /dev/... never
// ends), which says nothing about attnc. Strings have no escapes and end at a newline, so this
// finds every string the lexer would see, and some inside comments (which are then also skipped).
bool mayEscapeWorkspace(const std::string &text) {
  size_t pos = 0;
  while ((pos = text.find('"', pos)) != std::string::npos) {
    size_t end = text.find_first_of("\"\n", pos + 1);
    std::string s =
        text.substr(pos + 1, end == std::string::npos ? std::string::npos : end - pos - 1);
    if (s.find('/') != std::string::npos || s == "..")
      return true;
    if (end == std::string::npos || text[end] == '\n')
      break;
    pos = end + 1;
  }
  return false;
}

struct Options {
  attnc::dsl::FrontEndOptions fe;
  attnc::PipelineOptions passes;
};

// -D values at and around every limit that integer and index arithmetic has.
const char *const kDefineValues[] = {
    "0",           "1",           "-1",         "2",          "3",          "7",
    "31",          "32",          "255",        "65535",      "65536",      "46341",
    "536870911",   "536870912",   "1073741823", "1073741824", "2147483646", "2147483647",
    "-2147483647", "-2147483648", "2147483648", "1.5",        "0.5",        "1e30",
    "-1e-30",      "3.4028234e38"};
// Kernel names: reserved ones of every kind, and ordinary ones.
const char *const kKernelNames[] = {"memcpy",
                                    "write",
                                    "pthread_create",
                                    "halide_malloc",
                                    "halide_error",
                                    "main",
                                    "int",
                                    "namespace",
                                    "errno",
                                    "cuInit",
                                    "x__y",
                                    "_K",
                                    "exp",
                                    "index",
                                    "k",
                                    "attn_fwd",
                                    "cuda_allocation_pool",
                                    "expf"};

// Applies the binary prefix (see the file comment) to `text`: adds the -D it selects to `opts` and
// renames the first kernel. The file is parsed once on its own to find its constants and kernel.
std::string applySelectors(const uint8_t *sel, std::string text, Options *opts) {
  auto file = std::make_shared<attnc::dsl::SourceFile>();
  file->path = "selectors.attn";
  file->text = text;
  attnc::dsl::DiagEngine diags(file);
  std::unique_ptr<attnc::dsl::Module> m = attnc::dsl::Parser(*file, diags).parseModule(true);
  if (!m || m->kernels.empty())
    return text;
  std::vector<std::string> consts;
  for (const auto &k : m->kernels)
    for (const auto &c : k->consts)
      consts.push_back(c.name);
  if (sel[1] != 0xff && !consts.empty())
    opts->fe.sema.defines.emplace_back(consts[sel[1] % consts.size()],
                                       kDefineValues[sel[0] % std::size(kDefineValues)]);
  if (sel[2] != 0xff) {
    const attnc::dsl::Kernel &k = *m->kernels[0];
    size_t pos = 0;
    for (int line = 1; line < k.nameLoc.line && pos != std::string::npos; ++line)
      pos = text.find('\n', pos) + 1;
    if (pos != std::string::npos && pos + k.nameLoc.col - 1 + k.name.size() <= text.size())
      text.replace(pos + k.nameLoc.col - 1, k.name.size(),
                   kKernelNames[sel[2] % std::size(kKernelNames)]);
  }
  return text;
}

// Reads the option comment lines at the top of the input (see the file comment). Malformed
// option values are skipped: the command-line parsers that check them are not under test here.
Options parseOptions(const std::string &text) {
  Options o;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line) && line.size() >= 3 && line[0] == '#' && line[2] == ' ' &&
         std::string("DSOTF").find(line[1]) != std::string::npos) {
    std::string rest = line.substr(3);
    if (line[1] == 'D') {
      std::istringstream words(rest);
      std::string def;
      while (words >> def) {
        size_t eq = def.find('=');
        if (eq != std::string::npos && eq > 0)
          o.fe.sema.defines.emplace_back(def.substr(0, eq), def.substr(eq + 1));
      }
    } else if (line[1] == 'S') {
      std::string err;
      std::map<std::string, int64_t> sizes;
      if (attnc::parseSizes(rest, &sizes, &err))
        o.passes.estimates = sizes;
    } else if (line[1] == 'O') {
      attnc::parseSampleOrder(rest, &o.passes.sampleOrder);
    } else if (line[1] == 'T') {
      char *end = nullptr;
      long tile = std::strtol(rest.c_str(), &end, 10);
      if (end != rest.c_str() && *end == '\0' && tile >= attnc::kMinOnlineTile &&
          tile <= attnc::kMaxOnlineTile)
        o.passes.onlineTile = tile;
    } else if (rest == "off") {
      o.passes.onlineSoftmax = false;
    }
  }
  return o;
}

// Every error the front end prints is `<file>:<line>:<col>: error: ...` with a positive line and
// column (the input is readable, so the plain `error: cannot read` form cannot apply), except
// those about a -D value, which has no place in the file. Checked by hand: libstdc++'s std::regex
// recurses per character and overflows the stack on long lines.
bool hasLocatedError(const std::string &diags) {
  std::istringstream in(diags);
  std::string line;
  auto number = [](const std::string &s, size_t end, size_t *start) {
    size_t b = end;
    while (b > 0 && s[b - 1] >= '0' && s[b - 1] <= '9')
      --b;
    *start = b;
    return b < end && s[b] != '0';
  };
  while (std::getline(in, line)) {
    size_t e = line.find(": error: ");
    if (e != std::string::npos && line.compare(e, 12, ": error: -D ") == 0)
      return true;
    size_t colStart, lineStart;
    if (e == std::string::npos || !number(line, e, &colStart) || colStart == 0 ||
        line[colStart - 1] != ':' || !number(line, colStart - 1, &lineStart) || lineStart < 2 ||
        line[lineStart - 1] != ':')
      continue;
    return true;
  }
  return false;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // Large inputs only slow the fuzzer down; the limits that matter (nesting, tree height,
  // expansion size) are all reachable in far less.
  if (size > 16384)
    return -1;
  const uint8_t *selectors = nullptr;
  if (size >= 4 && data[0] == 0x01)
    selectors = data + 1, data += 4, size -= 4;
  std::string text(reinterpret_cast<const char *>(data), size);
  if (mayEscapeWorkspace(text))
    return -1;
  Options opts = parseOptions(text);
  if (selectors)
    text = applySelectors(selectors, text, &opts);

  Workspace &ws = workspace();
  {
    std::ofstream out(ws.path, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out.flush())
      finding("cannot write the input file", ws.path);
  }

  // The stages through attnc::Compilation, as the tools run them; its diagnostics are read and
  // cleared after each stage, so a finding names the stage that printed them.
  attnc::CompileOptions co;
  co.path = ws.path;
  co.frontEnd = opts.fe;
  co.passes = opts.passes;
  co.onlineSoftmax = opts.passes.onlineSoftmax;
  co.mlirThreading = false;
  std::ostringstream err;
  attnc::Compilation comp(co, err);
  if (!comp.parse()) {
    if (!hasLocatedError(err.str()))
      finding("input rejected without a file:line:col: error: diagnostic", err.str());
    return 0;
  }
  const attnc::FrontEnd &fe = comp.frontEnd();
  {
    std::ostringstream ast;
    attnc::dsl::printModule(ast, *fe.module);
  }
  for (const auto &k : fe.module->kernels)
    if (std::string why = attnc::dsl::reservedSymbolReason(k->name); !why.empty())
      finding("the front end accepted a reserved kernel name", k->name + ": " + why);

  err.str("");
  if (!comp.generated())
    finding("MLIRGen failed on a module that Sema accepted", err.str());
  err.str("");
  mlir::ModuleOp module = comp.optimized();
  if (!module) {
    if (!hasLocatedError(err.str()))
      finding("a pass failed without a located diagnostic", err.str());
    return 0;
  }
  if (mlir::failed(mlir::verify(module)))
    finding("the passes left IR that fails verification", "");
  {
    std::string s;
    llvm::raw_string_ostream os(s);
    module.print(os);
  }

  // Every kernel of the file, not only the one a tool would select.
  for (attnc::attn::KernelOp kernel : module.getOps<attnc::attn::KernelOp>()) {
    try {
      attnc::LoweredKernel lk = attnc::lowerToHalide(kernel);
      (void)attnc::printAlgorithm(lk);
      (void)lk.pipeline();
    } catch (const Halide::Error &e) {
      finding("Halide rejected a kernel that the front end accepted", e.what());
    } catch (const std::exception &e) {
      finding("HalideGen rejected a kernel that the front end accepted", e.what());
    }
  }
  return 0;
}
