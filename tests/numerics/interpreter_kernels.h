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

#include "attnc/dsl/Interpreter.h"

#include <gtest/gtest.h>

#include <cmath>

namespace attnc_test {

// Runs the fp64 interpreter on kernel `k` (null when loading failed, with `loadErr`) and checks
// its single output: the shape `outShape`, finite values and a distance of at most `tol` from the
// fp64 reference `ref`. Returns that distance (-1 when there is no output to compare) and stores
// the output in `out`.
inline double checkInterpreter(const attnc::dsl::Kernel* k, const std::string& loadErr,
                               const std::vector<attnc::dsl::RefTensor>& inputs, const std::vector<int64_t>& outShape,
                               const std::vector<double>& ref, double tol, const std::string& label,
                               std::vector<double>* out) {
  EXPECT_NE(k, nullptr) << label << ": " << loadErr;
  if (!k) return -1;
  std::vector<attnc::dsl::RefTensor> outs;
  std::string err;
  const bool ok = attnc::dsl::interpret(*k, inputs, &outs, &err);
  EXPECT_TRUE(ok) << label << ": interpreter: " << err;
  if (!ok) return -1;
  if (outs.size() != 1 || outs[0].shape != outShape || outs[0].data.size() != ref.size()) {
    ADD_FAILURE() << label << ": interpreter returned " << outs.size() << " outputs of the wrong shape";
    return -1;
  }
  *out = outs[0].data;
  size_t nonFinite = 0;
  double err2 = 0;
  for (size_t i = 0; i < out->size(); ++i) {
    nonFinite += !std::isfinite((*out)[i]);
    err2 = std::max(err2, std::abs((*out)[i] - ref[i]));
  }
  EXPECT_EQ(nonFinite, 0u) << label << ": non-finite outputs of the interpreter";
  EXPECT_LE(err2, tol) << label << ": interpreter vs fp64 reference";
  return err2;
}

} // namespace attnc_test
