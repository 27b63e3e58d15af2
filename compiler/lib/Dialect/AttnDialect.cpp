// Registration of the attn dialect and its operations, and the check of its attributes.
#include "attnc/Dialect/AttnDialect.h"
#include "attnc/Dialect/AttnOps.h"

#include "mlir/IR/AffineExpr.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;
using namespace attnc::attn;

#include "attnc/Dialect/AttnOpsDialect.cpp.inc"

void AttnDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "attnc/Dialect/AttnOps.cpp.inc"
      >();
}

// Whether `e` is affine with positive constant divisors: the forms HalideGen evaluates with
// Halide's (floor) division.
static bool positiveDivisors(AffineExpr e) {
  bool ok = e.isPureAffine();
  e.walk([&](AffineExpr s) {
    if (auto b = dyn_cast<AffineBinaryOpExpr>(s))
      if (s.getKind() != AffineExprKind::Add && s.getKind() != AffineExprKind::Mul) {
        auto c = dyn_cast<AffineConstantExpr>(b.getRHS());
        ok &= c && c.getValue() > 0;
      }
  });
  return ok;
}

LogicalResult AttnDialect::verifyOperationAttribute(Operation *op, NamedAttribute attr) {
  if (attr.getName() != kBoundsAttr)
    return success();
  auto fail = [&](const Twine &why) { return op->emitOpError("'") << kBoundsAttr << "' " << why; };
  auto entries = dyn_cast<ArrayAttr>(attr.getValue());
  if (!entries)
    return fail("must be an array of dictionaries");
  // Dimensions of the maps: the softmax's indices, or the indices of a reduction's definition.
  Operation *dimsOwner = op;
  size_t numIndices = 0;
  ArrayRef<int64_t> axes;
  int64_t keyAxis[1];
  if (auto sm = dyn_cast<SoftmaxOp>(op)) {
    numIndices = sm.getExtents().size();
    axes = sm.getAxes();
  } else if (auto on = dyn_cast<OnlineSoftmaxOp>(op)) {
    // The fused softmax's bounds, over its score indices (those of the softmax it replaced).
    numIndices = on.getRows().size();
    keyAxis[0] = on.getKeyPosition();
    axes = keyAxis;
  } else if (auto red = dyn_cast<ReduceOp>(op)) {
    numIndices = red.getExtents().size();
    dimsOwner = op->getParentOp();
    while (dimsOwner && !isa<DefineOp, SoftmaxOp>(dimsOwner))
      dimsOwner = dimsOwner->getParentOp();
    if (!dimsOwner)
      return fail("needs a reduction inside a definition");
  } else {
    return fail("applies to attn.softmax, attn.online_softmax and attn.reduce only");
  }
  unsigned numDims = dimsOwner->getRegion(0).front().getNumArguments();
  auto kernel = op->getParentOfType<KernelOp>();
  for (Attribute a : entries) {
    auto d = dyn_cast<DictionaryAttr>(a);
    if (!d)
      return fail("must be an array of dictionaries");
    auto index = d.getAs<IntegerAttr>("index");
    auto sizes = d.getAs<ArrayAttr>("sizes");
    if (!index || !sizes)
      return fail("entries need 'index' and 'sizes'");
    int64_t i = index.getInt();
    if (i < 0 || i >= (int64_t)numIndices)
      return fail("index ") << i << " is out of range";
    if (isa<SoftmaxOp, OnlineSoftmaxOp>(op) && !llvm::is_contained(axes, i))
      return fail("index ") << i << " is not a softmax axis";
    for (Attribute s : sizes) {
      auto name = dyn_cast<StringAttr>(s);
      if (!name)
        return fail("'sizes' must hold size names");
      bool known = false;
      if (kernel)
        kernel.walk([&](DimOp dim) { known |= dim.getSize() == name.getValue(); });
      if (!known)
        return fail("names '") << name.getValue() << "', which is not a size of the kernel";
    }
    if (Attribute e = d.get("exact")) {
      if (!isa<UnitAttr>(e))
        return fail("'exact' must be a unit attribute");
      if (!isa<SoftmaxOp, OnlineSoftmaxOp>(op))
        return fail("'exact' applies to softmax bounds only");
    }
    bool any = false;
    for (StringRef side : {"lower", "upper"}) {
      Attribute m = d.get(side);
      if (!m)
        continue;
      auto map = dyn_cast<AffineMapAttr>(m);
      if (!map)
        return fail("'") << side << "' must be an affine map";
      AffineMap mv = map.getValue();
      if (mv.getNumDims() != numDims || mv.getNumSymbols() != sizes.size() ||
          mv.getNumResults() == 0)
        return fail("'") << side << "' must map the " << numDims << " indices and " << sizes.size()
                         << " sizes to at least one bound";
      for (AffineExpr e : mv.getResults())
        if (!positiveDivisors(e))
          return fail("'") << side << "' may divide only by positive constants";
      for (int64_t ax : axes)
        if (mv.isFunctionOfDim(ax))
          return fail("'") << side << "' may not depend on a softmax axis";
      any = true;
    }
    if (!any)
      return fail("entries need 'lower' or 'upper'");
  }
  return success();
}
