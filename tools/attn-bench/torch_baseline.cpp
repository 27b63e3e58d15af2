// Runs torch_baseline.py in a child process: inputs and output travel as .npy files in a temp dir.
#include "torch_baseline.h"

#include "attnc/npy.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <unistd.h>
#include <vector>

namespace attn_bench {
namespace {

// Runs `args` (args[0] the program, looked up on PATH unless it is a path) and returns its stdout,
// followed by its stderr when `withStderr` (else stderr is dropped); `rc` gets the exit status (-1:
// not run).
std::string capture(const std::vector<std::string> &args, bool withStderr, int *rc) {
  *rc = -1;
  std::string program = args[0];
  if (program.find('/') == std::string::npos) {
    llvm::ErrorOr<std::string> found = llvm::sys::findProgramByName(program);
    if (!found)
      return "";
    program = *found;
  }
  llvm::SmallString<128> out;
  if (llvm::sys::fs::createTemporaryFile("attn-bench-out", "txt", out))
    return "";
  llvm::FileRemover remove(out);
  std::vector<llvm::StringRef> argv(args.begin(), args.end());
  std::optional<llvm::StringRef> err =
      withStderr ? std::optional<llvm::StringRef>(out.str()) : std::optional<llvm::StringRef>("");
  int status = llvm::sys::ExecuteAndWait(program, argv, /*Env=*/std::nullopt,
                                         {std::nullopt, out.str(), err});
  *rc = status < 0 ? -1 : status;
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> text = llvm::MemoryBuffer::getFile(out);
  return text ? (*text)->getBuffer().str() : std::string();
}

// The number after "key": in the script's one-line JSON report (its keys are fixed and flat).
bool jsonNumber(const std::string &line, const std::string &key, double *v) {
  const size_t at = line.find("\"" + key + "\":");
  if (at == std::string::npos)
    return false;
  const char *s = line.c_str() + at + key.size() + 3;
  char *end = nullptr;
  *v = std::strtod(s, &end);
  return end != s;
}

} // namespace

std::unique_ptr<TorchBaseline> TorchBaseline::detect(const std::string &python,
                                                     const std::string &script) {
  int rc = 0;
  const std::string version =
      capture({python, "-c", "import sys, torch; sys.stdout.write(torch.__version__)"},
              /*withStderr=*/false, &rc);
  if (rc != 0 || version.empty())
    return nullptr;
  return std::unique_ptr<TorchBaseline>(new TorchBaseline(python, script, version));
}

bool TorchBaseline::run(const std::string &entry, const std::string &constsJson,
                        const std::vector<std::string> &names, std::vector<Tensor> &inputs,
                        const std::vector<int64_t> &outShape, const std::string &dtype,
                        const Options &o, Result *r, std::string *err) const {
  char tmpl[] = "/tmp/attn-bench-torch-XXXXXX";
  if (!mkdtemp(tmpl)) {
    *err = "cannot create a temporary directory";
    return false;
  }
  const std::filesystem::path dir = tmpl;
  struct Cleanup {
    std::filesystem::path d;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(d, ec);
    }
  } cleanup{dir};

  std::ostringstream meta;
  meta << "{\"inputs\": [";
  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor &t = inputs[i];
    attnc::Status st = attnc::write_npy(
        (dir / (names[i] + ".npy")).string(), t.isInt ? attnc::DType::I32 : attnc::DType::F32,
        t.shape, t.isInt ? (const void *)t.i.data() : (const void *)t.f.data());
    if (!st.ok()) {
      *err = st.message();
      return false;
    }
    meta << (i ? ", " : "") << "\"" << names[i] << "\"";
  }
  meta << "], \"dtype\": \"" << dtype
       << "\", \"consts\": " << (constsJson.empty() ? "{}" : constsJson) << ", \"reps\": " << o.reps
       << ", \"budget\": " << o.budget << ", \"warmup\": " << o.warmup << "}";
  std::ofstream((dir / "meta.json").string()) << meta.str() << "\n";

  int rc = 0;
  const std::string out =
      capture({python_, script_, entry, dir.string()}, /*withStderr=*/true, &rc);
  if (rc != 0) {
    *err = "torch_baseline.py failed (exit " + std::to_string(rc) + "): " + out;
    return false;
  }
  const size_t last = out.rfind("{\"median_s\"");
  double seconds = 0, runs = 0, threads = 0;
  if (last == std::string::npos || !jsonNumber(out.substr(last), "median_s", &seconds) ||
      !jsonNumber(out.substr(last), "runs", &runs) ||
      !jsonNumber(out.substr(last), "threads", &threads)) {
    *err = "torch_baseline.py printed no timing: " + out;
    return false;
  }
  attnc::NpyArray a;
  attnc::Status st = attnc::read_npy((dir / "out.npy").string(), &a);
  if (!st.ok()) {
    *err = st.message();
    return false;
  }
  if (a.dtype != attnc::DType::F32 || a.shape != outShape) {
    *err = "torch_baseline.py's output has another shape or dtype than the kernel's";
    return false;
  }
  r->out.resize(a.data.size() / sizeof(float));
  std::memcpy(r->out.data(), a.data.data(), a.data.size());
  r->seconds = seconds;
  r->runs = (int)runs;
  r->threads = (int)threads;
  return true;
}

} // namespace attn_bench
