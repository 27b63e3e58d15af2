// Semantic analysis: name resolution, types, index-range inference and size checks.
#pragma once

#include "attnc/dsl/AST.h"

#include <map>
#include <string>

namespace attnc::dsl {

struct SemaOptions {
  // `-D NAME=VALUE` overrides of kernel constants, in command-line order.
  std::vector<std::pair<std::string, std::string>> defines;
};

// Annotates the module in place; returns false (with diagnostics) on any error.
bool analyze(Module &m, DiagEngine &diags, const SemaOptions &opts = {});

// True for the elementwise builtins (exp, max, select, ...), which cannot name tensors.
bool isBuiltinFunction(const std::string &name);

} // namespace attnc::dsl
