// Loads bundled variants (once per file and -D set) for the numerics tests' fp64 interpreter checks.
#pragma once

#include "attnc/dsl/FrontEnd.h"

#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#ifndef ATTNC_VARIANTS_DIR
#error "ATTNC_VARIANTS_DIR must name dsl/variants"
#endif

namespace attnc_test {

using Defines = std::vector<std::pair<std::string, std::string>>;

// The checked kernel `kernel` of dsl/variants/<file> compiled with `defines`; null with a
// message in `err` if the file does not load or has no such kernel.
inline const attnc::dsl::Kernel* interpreterKernel(const std::string& file, const std::string& kernel,
                                                   const Defines& defines, std::string* err) {
  static std::map<std::pair<std::string, Defines>, attnc::dsl::LoadedModule> modules;
  auto key = std::make_pair(file, defines);
  auto it = modules.find(key);
  if (it == modules.end()) {
    attnc::dsl::FrontEndOptions opts;
    opts.sema.defines = defines;
    attnc::dsl::LoadedModule loaded;
    std::ostringstream diags;
    const std::string path = std::string(ATTNC_VARIANTS_DIR) + "/" + file;
    if (!attnc::dsl::loadModule(path, opts, diags, &loaded) || !loaded.module) {
      std::string d;
      for (const auto& [n, v] : defines) d += " -D " + n + "=" + v;
      *err = "cannot load " + path + d + ":\n" + diags.str();
      return nullptr;
    }
    it = modules.emplace(key, std::move(loaded)).first;
  }
  for (const auto& k : it->second.module->kernels)
    if (k->name == kernel) return k.get();
  *err = "no kernel '" + kernel + "' in " + file;
  return nullptr;
}

} // namespace attnc_test
