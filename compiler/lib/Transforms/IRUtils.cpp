// IR helpers shared by the attn passes (IRUtils.h).
#include "IRUtils.h"

#include "attnc/Dialect/AttnOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Matchers.h"
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

std::string uniqueName(StringRef n, llvm::StringSet<> &taken) {
  std::string name = n.str();
  for (int i = 2; !taken.insert(name).second; ++i)
    name = n.str() + "_" + std::to_string(i);
  return name;
}

attn::DefineOp makeDefine(Operation *at, StringRef name, ArrayRef<Value> extents,
                          ArrayRef<std::string> names,
                          function_ref<Value(OpBuilder &, ValueRange)> build) {
  OpBuilder b(at);
  SmallVector<int64_t> shape;
  for (Value e : extents) {
    auto c = e.getDefiningOp<arith::ConstantIndexOp>();
    shape.push_back(c ? c.value() : ShapedType::kDynamic);
  }
  SmallVector<Attribute> nameAttrs;
  for (const std::string &n : names)
    nameAttrs.push_back(b.getStringAttr(n));
  auto type = RankedTensorType::get(shape, b.getF32Type());
  auto def = b.create<attn::DefineOp>(at->getLoc(), type, b.getStringAttr(name), extents,
                                      b.getArrayAttr(nameAttrs));
  Block *body = new Block();
  def.getBody().push_back(body);
  for (size_t k = 0; k < extents.size(); ++k)
    body->addArgument(b.getIndexType(), at->getLoc());
  OpBuilder ib = OpBuilder::atBlockEnd(body);
  Value v = build(ib, body->getArguments());
  ib.create<attn::YieldOp>(at->getLoc(), ValueRange{v});
  return def;
}

// Whether `v` is computed from a value `isTarget` accepts or in an operation `isTargetOp` accepts,
// following operands from `v`'s definition (its nested regions included) upwards.
static bool upstream(Value v, llvm::function_ref<bool(Value)> isTarget,
                     llvm::function_ref<bool(Operation *)> isTargetOp) {
  llvm::DenseSet<Value> seen;
  std::function<bool(Value)> dep = [&](Value x) -> bool {
    if (isTarget(x))
      return true;
    if (!seen.insert(x).second)
      return false;
    Operation *d = x.getDefiningOp();
    if (!d)
      return false;
    bool found = false;
    d->walk([&](Operation *op) {
      found = found || isTargetOp(op);
      for (Value o : op->getOperands())
        if (!found && (isTarget(o) ||
                       (o.getDefiningOp() ? !d->isAncestor(o.getDefiningOp()) && dep(o) : false)))
          found = true;
    });
    return found;
  };
  return dep(v);
}

bool dependsOn(Value v, Value arg) {
  return upstream(v, [&](Value x) { return x == arg; }, [](Operation *) { return false; });
}

bool readsTensor(Value v) {
  return upstream(
      v, [](Value) { return false; }, [](Operation *o) { return isa<attn::ReadOp>(o); });
}

std::optional<int64_t> evalIndex(Value v, DictionaryAttr est, llvm::SetVector<StringRef> &missing,
                                 int depth) {
  if (depth > 64)
    return std::nullopt;
  Operation *d = v.getDefiningOp();
  if (!d)
    return std::nullopt;
  if (auto dim = dyn_cast<attn::DimOp>(d)) {
    if (est)
      if (auto a = est.getAs<IntegerAttr>(dim.getSize()))
        return a.getInt();
    missing.insert(dim.getSize());
    return std::nullopt;
  }
  if (auto c = dyn_cast<arith::ConstantIndexOp>(d))
    return c.value();
  if (d->getNumOperands() != 2)
    return std::nullopt;
  auto a = evalIndex(d->getOperand(0), est, missing, depth + 1);
  auto b = evalIndex(d->getOperand(1), est, missing, depth + 1);
  if (!a || !b)
    return std::nullopt;
  if (isa<arith::AddIOp>(d))
    return *a + *b;
  if (isa<arith::SubIOp>(d))
    return *a - *b;
  if (isa<arith::MulIOp>(d))
    return *a * *b;
  if (isa<arith::DivSIOp, arith::FloorDivSIOp>(d) && *b > 0)
    return *a >= 0 ? *a / *b : -((-*a + *b - 1) / *b);
  if (isa<arith::CeilDivSIOp>(d) && *b > 0)
    return *a >= 0 ? (*a + *b - 1) / *b : -(-*a / *b);
  if (isa<arith::RemSIOp>(d) && *b != 0)
    return *a % *b;
  if (isa<arith::MaxSIOp>(d))
    return std::max(*a, *b);
  if (isa<arith::MinSIOp>(d))
    return std::min(*a, *b);
  return std::nullopt;
}

void recordChoice(Operation *owner, StringRef attrName, StringRef source, StringRef order,
                  ArrayRef<std::pair<StringRef, std::optional<int64_t>>> costs, StringRef reason) {
  Builder b(owner->getContext());
  SmallVector<NamedAttribute> fields{b.getNamedAttr("order", b.getStringAttr(order))};
  for (auto [name, cost] : costs)
    if (cost)
      fields.push_back(b.getNamedAttr(name, b.getI64IntegerAttr(*cost)));
  if (!reason.empty())
    fields.push_back(b.getNamedAttr("reason", b.getStringAttr(reason)));
  NamedAttrList all;
  if (auto old = owner->getAttrOfType<DictionaryAttr>(attrName))
    all.append(old.begin(), old.end());
  all.set(source, b.getDictionaryAttr(fields));
  owner->setAttr(attrName, all.getDictionary(owner->getContext()));
}

std::optional<int64_t> constIndex(Value v) {
  APInt c;
  if (matchPattern(v, m_ConstantInt(&c)))
    return c.getSExtValue();
  return std::nullopt;
}

void LinearIndex::add(const LinearIndex &o, int64_t scale) {
  for (auto [v, c] : o.terms)
    terms[v] += c * scale;
  constant += o.constant * scale;
}

bool LinearIndex::operator==(const LinearIndex &o) const {
  auto nonzero = [](const LinearIndex &l) {
    llvm::SmallDenseMap<Value, int64_t> m;
    for (auto [v, c] : l.terms)
      if (c)
        m[v] = c;
    return m;
  };
  auto a = nonzero(*this), b = nonzero(o);
  if (a.size() != b.size() || constant != o.constant)
    return false;
  for (auto [v, c] : a) {
    auto it = b.find(v);
    if (it == b.end() || it->second != c)
      return false;
  }
  return true;
}

LinearIndex linearIndex(Value v, int depth) {
  LinearIndex l;
  if (auto c = constIndex(v)) {
    l.constant = *c;
    return l;
  }
  Operation *op = v.getDefiningOp();
  if (depth < 64 && op) {
    if (auto a = dyn_cast<arith::AddIOp>(op)) {
      l.add(linearIndex(a.getLhs(), depth + 1), 1);
      l.add(linearIndex(a.getRhs(), depth + 1), 1);
      return l;
    }
    if (auto s = dyn_cast<arith::SubIOp>(op)) {
      l.add(linearIndex(s.getLhs(), depth + 1), 1);
      l.add(linearIndex(s.getRhs(), depth + 1), -1);
      return l;
    }
    if (auto m = dyn_cast<arith::MulIOp>(op)) {
      if (auto c = constIndex(m.getRhs())) {
        l.add(linearIndex(m.getLhs(), depth + 1), *c);
        return l;
      }
      if (auto c = constIndex(m.getLhs())) {
        l.add(linearIndex(m.getRhs(), depth + 1), *c);
        return l;
      }
    }
  }
  l.terms[v] = 1;
  return l;
}

std::optional<std::pair<Value, Value>> matchRem(Value v) {
  auto sub = v.getDefiningOp<arith::SubIOp>();
  if (!sub)
    return std::nullopt;
  auto mul = sub.getRhs().getDefiningOp<arith::MulIOp>();
  if (!mul)
    return std::nullopt;
  for (auto [q, m] :
       {std::pair{mul.getLhs(), mul.getRhs()}, std::pair{mul.getRhs(), mul.getLhs()}}) {
    auto div = q.getDefiningOp<arith::FloorDivSIOp>();
    if (div && div.getLhs() == sub.getLhs() && div.getRhs() == m)
      return std::pair{sub.getLhs(), m};
  }
  return std::nullopt;
}

SmallVector<int64_t> requiredModuli(attn::KernelOp kernel, Value y) {
  SmallVector<int64_t> out;
  std::function<void(Value)> conj = [&](Value c) {
    if (auto a = c.getDefiningOp<arith::AndIOp>()) {
      conj(a.getLhs());
      conj(a.getRhs());
      return;
    }
    auto cmp = c.getDefiningOp<arith::CmpIOp>();
    if (!cmp || cmp.getPredicate() != arith::CmpIPredicate::eq)
      return;
    for (auto [r, z] :
         {std::pair{cmp.getLhs(), cmp.getRhs()}, std::pair{cmp.getRhs(), cmp.getLhs()}}) {
      auto rem = matchRem(r);
      std::optional<int64_t> m = rem ? constIndex(rem->second) : std::nullopt;
      if (rem && constIndex(z) == 0 && rem->first == y && m && *m > 0)
        out.push_back(*m);
    }
  };
  for (auto req : kernel.getBody().front().getOps<attn::RequireOp>())
    conj(req.getCondition());
  return out;
}

bool requiresMultiple(attn::KernelOp kernel, Value y, int64_t ws) {
  // (`Y % 8 == 0` proves windows of 2, 4 and 8 whole.)
  return llvm::any_of(requiredModuli(kernel, y), [&](int64_t m) { return m % ws == 0; });
}

} // namespace attnc
