// HalideGen: an online softmax's tile-visit counts, instrumentation evaluated apart from the pipeline.
#include "Lowerer.h"

namespace attnc::lowering {

// One RDom over the row blocks and the tiles; each term is 1 where the state's update predicates
// let the pair through. With a chain of fully visible tiles, the masked chain visits the partly
// visible ones (vis && !full, unless the key ranges are disjoint already), and only those test
// the mask.
TileVisits Lowerer::lowerTileVisits(const TileLoops &l) {
  TileVisits tv;
  tv.masked = l.masked;
  tv.count = H::Func(l.name + "__visits");
  std::vector<H::Internal::ReductionVariable> rv;
  for (const TileLoops::Row &row : l.rows)
    rv.push_back({tv.count.name() + "$" + row.name, H::Expr(0), row.blocks});
  rv.push_back({tv.count.name() + "$" + l.tileName, H::Expr(0), l.tiles});
  H::RDom r{H::Internal::ReductionDomain(rv)};
  std::map<std::string, H::Expr> sub;
  for (size_t k = 0; k < l.rows.size(); ++k)
    sub[l.rows[k].var.name()] = r[(int)k];
  auto [vis, full] = l.predicates(r[(int)rv.size() - 1]);
  // (Every term reads the RDom: an update that reads none of its variables has no RDom.)
  auto one = [&](H::Expr c) {
    return H::cast<int64_t>(
        H::select(c.defined() ? H::Internal::substitute(sub, c) : H::Expr(r[0]) >= 0, 1, 0));
  };
  H::Expr part = l.split && !l.disjoint ? vis && !full : vis;
  H::Expr visited = l.split ? one(full) + one(part) : one(part);
  H::Expr tested = !tv.masked ? H::Expr((int64_t)0) : l.split ? one(part) : visited;
  H::Expr z((int64_t)0);
  tv.count() = H::Tuple(z, z, z);
  tv.count() =
      H::Tuple(tv.count()[0] + visited, tv.count()[1] + tested, tv.count()[2] + one(H::Expr()));
  return tv;
}

} // namespace attnc::lowering
