// attn-bench: counts a case's visited key tiles by lowering its variant and evaluating the tile predicates.
#include "bench.h"

#include "attnc/Compilation.h"

#include <sstream>

#ifndef ATTN_BENCH_VARIANTS_DIR
#error "ATTN_BENCH_VARIANTS_DIR must name dsl/variants"
#endif

namespace attn_bench {

// The kernel is lowered as the bench's AOT libraries are built (default passes, no size
// estimates), so its tiles are the compiled kernel's; the counts come from the same Halide
// predicates that guard its state updates, at the case's own inputs.
bool countTiles(Case &c, CaseResult *r) {
  std::ostringstream err;
  auto fail = [&](const std::string &m) {
    r->tileError = m.empty() ? err.str() : m;
    while (!r->tileError.empty() && r->tileError.back() == '\n')
      r->tileError.pop_back();
    return false;
  };
  const std::string path = std::string(ATTN_BENCH_VARIANTS_DIR) + "/" + c.tileSource;
  attnc::CompileOptions co;
  co.path = path;
  co.kernel = c.tileKernel;
  co.frontEnd.sema.defines = c.tileDefines;
  attnc::Compilation comp(co, err);
  try {
    attnc::LoweredKernel lk = comp.lower();
    if (lk.inputs.size() != c.inputs.size())
      return fail("the kernel has " + std::to_string(lk.inputs.size()) + " inputs, the case " +
                  std::to_string(c.inputs.size()));
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      Tensor &t = c.inputs[i];
      std::vector<int> dims(t.shape.rbegin(), t.shape.rend()); // Halide's innermost-first order
      if (t.isInt)
        lk.inputs[i].param.set(Halide::Buffer<int32_t>(t.i.data(), dims));
      else
        lk.inputs[i].param.set(Halide::Buffer<float>(t.f.data(), dims));
    }
    for (const attnc::TileVisitCount &v : attnc::countTileVisits(lk))
      r->tiles.push_back({v.output, v.tile, v.rowsPerBlock, v.visited, v.maskTested, v.total});
  } catch (const attnc::CompileFailed &) {
    return fail("");
  } catch (const std::exception &e) {
    return fail(e.what());
  }
  return true;
}

} // namespace attn_bench
