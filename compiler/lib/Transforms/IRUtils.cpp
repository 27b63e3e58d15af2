// IR helpers shared by the attn passes (IRUtils.h).
#include "IRUtils.h"

#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

#include <functional>

using namespace mlir;

namespace attnc {

Value materialize(Value v, Operation *scope, IRMapping &map, OpBuilder &b) {
  if (Value m = map.lookupOrNull(v))
    return m;
  Operation *op = v.getDefiningOp();
  if (!op || !scope->isProperAncestor(op))
    return v;
  for (Value o : op->getOperands())
    materialize(o, scope, map, b);
  for (Region &r : op->getRegions()) {
    llvm::SetVector<Value> above;
    getUsedValuesDefinedAbove(r, above);
    for (Value a : above)
      materialize(a, scope, map, b);
  }
  Operation *c = b.clone(*op, map);
  return c->getResult(cast<OpResult>(v).getResultNumber());
}

bool dependsOn(Value v, Value arg) {
  llvm::DenseSet<Value> seen;
  std::function<bool(Value)> dep = [&](Value x) -> bool {
    if (x == arg)
      return true;
    if (!seen.insert(x).second)
      return false;
    Operation *d = x.getDefiningOp();
    if (!d)
      return false;
    bool found = false;
    d->walk([&](Operation *op) {
      for (Value o : op->getOperands())
        if (!found &&
            (o == arg || (o.getDefiningOp() ? !d->isAncestor(o.getDefiningOp()) && dep(o) : false)))
          found = true;
    });
    return found;
  };
  return dep(v);
}

} // namespace attnc
