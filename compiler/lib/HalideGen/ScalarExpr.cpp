// HalideGen: scalar expressions (arith, math, IEEE semantics) and tensor reads with their boundary modes.
#include "Lowerer.h"

namespace attnc::lowering {

H::Expr Lowerer::castTo(Type t, H::Expr e) {
  if (t.isF32())
    return e.type().is_float() && e.type().bits() < 32 ? widenStorage(e) : H::cast<float>(e);
  if (t.isBF16())
    return narrowStorage(e, DType::BF16);
  if (t.isF16())
    return narrowStorage(e, DType::F16);
  if (t.isInteger(1))
    return e;
  if (t.isInteger(64))
    return H::cast<int64_t>(e);
  return H::cast<int32_t>(e); // index and i32
}

// a / b by IEEE rules. Halide refuses to generate a division by a divisor it simplifies to a
// constant zero (the `mean` of an empty domain divides by 0, and a kernel may write `/ 0.0` or
// `/ (y - y)`), so that case is spelt out: NaN for 0 / 0, a NaN operand, or a divisor that is
// NaN after all (y - y and y * 0.0 are, for a NaN or infinite y); otherwise +-inf by the
// signs, the divisor's sign bit included (y * 0.0 is -0 for a negative y). Strict floats keep
// the divisor's own NaN test and sign from being folded.
// A divisor that is not a constant here may still become a constant 0 in Halide's lowering
// (known sizes, the out-of-range part of a loop over a `.zero` read: rsqrt(x.zero(..)) gave
// "Division by constant zero", fuzz seed 772683725). It is divided as b * 1.0, which is b
// for every float and which strict floats never fold, so the hardware divides and gives IEEE's
// result. (Not b + -0.0: Halide's CSE takes the constant -0.0 for 0.0 and merged every 0 of a
// kernel into one of them, so `max(x, 0)` (relu) gave -0 for a negative x, and 1 / relu(x) -inf
// where the reference gives +inf; regressions/negative-zero-constant.test.)
H::Expr Lowerer::fdiv(const H::Expr &a, const H::Expr &b) {
  // Simplified after common subexpression elimination: `b` is a DAG (every use of a value shares
  // its Expr) that the simplifier would walk as a tree, exponentially long for nested builtins
  // (sigmoid of sigmoid ... six deep took a minute).
  const std::optional<double> z = Halide::Internal::as_const_float(
      Halide::Internal::simplify(Halide::Internal::common_subexpression_elimination(b)));
  if (!z)
    return a / (b * H::Expr(1.0f));
  if (*z != 0.0)
    return a / b;
  const float inf = std::numeric_limits<float>::infinity();
  const H::Expr negative = H::reinterpret<int32_t>(b) < 0;
  return H::select(isNan(a) || isNan(b) || a == 0.0f,
                   H::Expr(std::numeric_limits<float>::quiet_NaN()),
                   H::select((a > 0.0f) != negative, H::Expr(inf), H::Expr(-inf)));
}

// `m` (a max or min of x and y), or NaN when x or y is NaN (x + y is then NaN).
H::Expr Lowerer::nanPropagating(H::Expr x, H::Expr y, H::Expr m) {
  return H::select(isNan(x) || isNan(y), x + y, m);
}

// Whether an integer is never negative by construction: a size, a constant >= 0, or sums,
// products, floor quotients and min/max of such (`D`, `Hq / Hkv`, `M * P`).
bool Lowerer::nonNegative(Value v) {
  Operation *op = v.getDefiningOp();
  if (!op)
    return false;
  if (isa<attn::DimOp>(op))
    return true;
  if (auto c = dyn_cast<arith::ConstantOp>(op))
    if (auto i = dyn_cast<IntegerAttr>(c.getValue()))
      return !i.getValue().isNegative();
  if (isa<arith::AddIOp, arith::MulIOp, arith::FloorDivSIOp, arith::MaxSIOp, arith::MinSIOp,
          arith::IndexCastOp>(op))
    return llvm::all_of(op->getOperands(), [](Value x) { return nonNegative(x); });
  return false;
}

// A read of an input or a definition. Halide's dimension order is the reverse of the DSL's.

// Whether subscript `sub` of a read is inside dimension `d` by construction: a bare index
// (a region argument, which MLIRGen keeps for ranges starting at 0) whose extent is the
// dimension's. Such a subscript needs no clamp and no range test.
bool Lowerer::inRangeByConstruction(Value sub, Value tensor, size_t d) {
  auto ba = dyn_cast<BlockArgument>(sub);
  if (!ba)
    return false;
  Operation *owner = ba.getOwner()->getParentOp();
  Value ext;
  if (auto on = dyn_cast<attn::OnlineSoftmaxOp>(owner)) {
    // Value region: the result's indices, then the key (the operands' order). Score region:
    // the softmax's indices, each a result index or the key.
    if (ba.getOwner()->getParent() == &on.getValue())
      ext = owner->getOperand(ba.getArgNumber());
    else {
      int64_t r = on.getRows()[ba.getArgNumber()];
      ext = r < 0 ? on.getKeyExtent() : on.getExtents()[r];
    }
  } else if (isa<attn::DefineOp, attn::SoftmaxOp, attn::ReduceOp>(owner)) {
    ext = owner->getOperand(ba.getArgNumber());
  } else {
    return false;
  }
  if (inputIndex_.count(tensor)) {
    const KernelParam &p = out_.inputs[inputIndex_.lookup(tensor)];
    auto dim = ext.getDefiningOp<attn::DimOp>();
    const std::vector<attnc::Dim> &dims = p.type.dims;
    if (dim)
      return d < dims.size() && dims[d].symbol() && dim.getSize() == dims[d].symbol_name();
    auto c = ext.getDefiningOp<arith::ConstantIndexOp>();
    return c && d < dims.size() && dims[d].literal() && dims[d].literal_value() == c.value();
  }
  Operation *def = tensor.getDefiningOp();
  return def && d < def->getNumOperands() && attn::sameExtent(def->getOperand(d), ext);
}

H::Expr Lowerer::lowerRead(attn::ReadOp r, Env &env) {
  ReadParts p = lowerReadParts(r, env);
  if (r.getBoundary() == "zero" && !H::Internal::is_const_one(p.inRange))
    return H::select(p.inRange, p.value, H::Internal::make_zero(p.value.type()));
  return p.value;
}

// Whether computing `v` inside `owner`'s body involves a reduction.
bool Lowerer::reducesIn(Value v, Operation *owner) {
  llvm::SmallVector<Value> work{v};
  llvm::DenseSet<Operation *> seen;
  while (!work.empty()) {
    Operation *d = work.pop_back_val().getDefiningOp();
    if (!d || !owner->isAncestor(d) || !seen.insert(d).second)
      continue;
    if (isa<attn::ReduceOp>(d))
      return true;
    for (Value o : d->getOperands())
      work.push_back(o);
  }
  return false;
}

// Structural zeros (docs/language.md §6): a `.zero` or `.exclude` read outside its tensor and a
// masked entry of a softmax are exact zeros that make a product they are a factor of 0, even
// when another factor is inf or NaN (a zero-padded sample times an infinite weight, a masked
// probability times a NaN value: the masked key is never read). For a product, negation or
// quotient with such a factor: its value computed from the raw reads, and the condition under
// which it is not structurally 0. Empty for anything else.
std::optional<Lowerer::ReadParts> Lowerer::structural(Value v, Env &env) {
  Operation *op = v.getDefiningOp();
  if (!op || !v.getType().isF32())
    return std::nullopt;
  if (auto r = dyn_cast<attn::ReadOp>(op)) {
    Value t = r.getTensor();
    StringRef boundary = r.getBoundary();
    if (boundary == "zero" || boundary == "exclude") {
      ReadParts p = lowerReadParts(r, env);
      if (H::Internal::is_const_one(p.inRange))
        return std::nullopt;
      return p;
    }
    auto sm = t.getDefiningOp<attn::SoftmaxOp>();
    if (!sm)
      return std::nullopt;
    auto yield = cast<attn::YieldOp>(sm.getBody().front().getTerminator());
    if (yield.getValues().size() != 2)
      return std::nullopt;
    // A mask that reduces (an `.exclude` read inside the score's sum, as swda_natten's) would be
    // a reduction Func of its own at every read of the softmax, redoing the mask's work there
    // and keeping the window rule from placing the softmax next to its consumer; such a read
    // stays a plain product (its probability is still exactly 0 at masked entries).
    if (reducesIn(yield.getValues()[1], sm))
      return std::nullopt;
    // The softmax's mask (its `where` and `.exclude` conditions) at the read's subscripts,
    // clamped as the read clamps them: Halide cannot bound a computed subscript (`(i + 2) % N`)
    // and would evaluate the mask, and read its inputs, outside the softmax.
    Env menv;
    ValueRange extents = sm->getOperands();
    for (auto [d, arg, sub] :
         llvm::enumerate(sm.getBody().front().getArguments(), r.getIndices())) {
      H::Expr i = H::cast<int32_t>(eval(sub, env));
      if (!i.as<H::Internal::Variable>())
        i = H::clamp(i, 0, H::max(H::cast<int32_t>(eval(extents[d], env)) - 1, 0));
      menv[arg] = i;
    }
    H::Expr mask = eval(yield.getValues()[1], menv);
    return ReadParts{lowerReadParts(r, env).value, mask};
  }
  auto both = [](const H::Expr &a, const H::Expr &b) {
    return !a.defined() ? b : !b.defined() ? a : a && b;
  };
  if (isa<arith::MulFOp>(op)) {
    // The structural factors first: the other factor's reads count only where the product is
    // not structurally 0 (a masked probability's value, read through a page table, is never read).
    std::optional<ReadParts> a = structural(op->getOperand(0), env),
                             b = structural(op->getOperand(1), env);
    if (!a && !b)
      return std::nullopt;
    auto plain = [&](Value x, const H::Expr &where) {
      GuardScope guard(readGuard_, where);
      return ReadParts{eval(x, env), H::Expr()};
    };
    ReadParts pa = a ? *a : plain(op->getOperand(0), b->inRange);
    ReadParts pb = b ? *b : plain(op->getOperand(1), pa.inRange);
    return ReadParts{pa.value * pb.value, both(pa.inRange, pb.inRange)};
  }
  if (isa<arith::NegFOp>(op)) {
    std::optional<ReadParts> a = structural(op->getOperand(0), env);
    if (a)
      a->value = -a->value;
    return a;
  }
  if (isa<arith::DivFOp>(op)) {
    std::optional<ReadParts> a = structural(op->getOperand(0), env);
    if (a)
      a->value = fdiv(a->value, eval(op->getOperand(1), env));
    return a;
  }
  return std::nullopt;
}

namespace {

namespace HI = Halide::Internal;

// A subscript with the terms around a min or max moved inside it: `min(max(y - r, 0), Y - w) + u
// - y` (a neighbourhood's clamped start minus the query: NATTEN's relative position bias) becomes
// `min(max(u - r, u - y), Y - w + u - y)`. Halide bounds a subscript by interval arithmetic,
// which loses that the two y's are one value: the first form is bounded by [-Y, 2 Y] and a
// read of an input there fails Halide's bounds check for elements it never reads; in the second
// each branch is simplified on its own (y - r + u - y is u - r) and the bounds are the true
// ones. `limit` caps the work (every term is copied into both branches); past it, or where
// nothing moves, the subscript is returned unchanged.
struct MinMaxInward {
  int limit = 256;

  // a + sign * b, both already in this form, with a min/max on either side moved outward.
  std::optional<H::Expr> combine(const H::Expr &a, const H::Expr &b, int sign) {
    if (--limit < 0)
      return std::nullopt;
    auto branches = [&](const H::Expr &m, H::Expr *x, H::Expr *y) {
      if (const auto *n = m.as<HI::Min>()) {
        *x = n->a, *y = n->b;
        return 1;
      }
      if (const auto *n = m.as<HI::Max>()) {
        *x = n->a, *y = n->b;
        return 2;
      }
      return 0;
    };
    H::Expr x, y;
    if (int kind = branches(a, &x, &y)) {
      std::optional<H::Expr> l = combine(x, b, sign), r = combine(y, b, sign);
      if (!l || !r)
        return std::nullopt;
      return kind == 1 ? H::min(*l, *r) : H::max(*l, *r);
    }
    if (int kind = branches(b, &x, &y)) {
      std::optional<H::Expr> l = combine(a, x, sign), r = combine(a, y, sign);
      if (!l || !r)
        return std::nullopt;
      // Subtracting a min is taking the max of the differences, and the reverse.
      return (kind == 1) == (sign > 0) ? H::min(*l, *r) : H::max(*l, *r);
    }
    return HI::simplify(sign > 0 ? a + b : a - b);
  }

  std::optional<H::Expr> operator()(const H::Expr &e) {
    if (--limit < 0)
      return std::nullopt;
    auto both = [&](const H::Expr &a, const H::Expr &b, auto make) -> std::optional<H::Expr> {
      std::optional<H::Expr> l = (*this)(a), r = l ? (*this)(b) : std::nullopt;
      if (!r)
        return std::nullopt;
      return make(*l, *r);
    };
    if (const auto *n = e.as<HI::Add>())
      return both(n->a, n->b, [&](H::Expr l, H::Expr r) { return combine(l, r, 1); });
    if (const auto *n = e.as<HI::Sub>())
      return both(n->a, n->b, [&](H::Expr l, H::Expr r) { return combine(l, r, -1); });
    if (const auto *n = e.as<HI::Min>())
      return both(n->a, n->b, [](H::Expr l, H::Expr r) { return std::optional(H::min(l, r)); });
    if (const auto *n = e.as<HI::Max>())
      return both(n->a, n->b, [](H::Expr l, H::Expr r) { return std::optional(H::max(l, r)); });
    return e;
  }
};

// The variables of the mins and maxes in the sum of terms `e` (into `inside`) and of its other
// terms (into `outside`).
void splitTerms(const H::Expr &e, std::set<std::string> *inside, std::set<std::string> *outside) {
  if (const auto *n = e.as<HI::Add>()) {
    splitTerms(n->a, inside, outside);
    splitTerms(n->b, inside, outside);
  } else if (const auto *n = e.as<HI::Sub>()) {
    splitTerms(n->a, inside, outside);
    splitTerms(n->b, inside, outside);
  } else {
    std::set<std::string> v = freeVars(e, false); // (sizes move with no loop)
    (e.as<HI::Min>() || e.as<HI::Max>() ? inside : outside)->insert(v.begin(), v.end());
  }
}

// `i` with its mins and maxes moved outward (MinMaxInward) when a variable inside one of them
// is also added outside it: only there does interval arithmetic lose the bounds. Elsewhere
// (the online softmax's `tile start + min(j, N - 1)`) the subscript stays as written.
H::Expr boundableSubscript(const H::Expr &i) {
  if (!i.as<HI::Add>() && !i.as<HI::Sub>())
    return i;
  std::set<std::string> inside, outside;
  splitTerms(i, &inside, &outside);
  if (std::none_of(inside.begin(), inside.end(),
                   [&](const std::string &v) { return outside.count(v) > 0; }))
    return i;
  std::optional<H::Expr> e = MinMaxInward()(i);
  return e ? *e : i;
}

} // namespace

Lowerer::ReadParts Lowerer::lowerReadParts(attn::ReadOp r, Env &env) {
  std::vector<H::Expr> idx; // DSL order
  for (Value i : r.getIndices())
    idx.push_back(boundableSubscript(H::cast<int32_t>(eval(i, env))));
  Value t = r.getTensor();
  StringRef boundary = r.getBoundary();
  std::vector<H::Expr> extent(idx.size());
  H::Func func;
  const KernelParam *param = nullptr;
  if (inputIndex_.count(t)) {
    param = &out_.inputs[inputIndex_.lookup(t)];
    for (size_t d = 0; d < idx.size(); ++d)
      extent[d] = param->param.dim((int)(idx.size() - 1 - d)).extent();
  } else {
    auto fn = funcNames_.find(t);
    if (fn == funcNames_.end())
      unsupported(r, "read of a tensor that is not an input or a definition");
    func = out_.find(fn->second)->func;
    // Define and softmax ops take exactly their extents as operands.
    ValueRange extents = t.getDefiningOp()->getOperands();
    for (size_t d = 0; d < idx.size(); ++d)
      extent[d] = H::cast<int32_t>(eval(extents[d], env));
  }
  H::Expr inRange = H::Internal::const_true();
  for (size_t d = 0; d < idx.size(); ++d) {
    if (boundary != "none" && inRangeByConstruction(r.getIndices()[d], t, d))
      continue;
    if (boundary == "zero")
      inRange = inRange && idx[d] >= 0 && idx[d] < extent[d];
    // Zero and clamp read the nearest element (then zero discards it): the access stays inside
    // the tensor, and Halide's bounds inference sees a region no larger than the tensor.
    // A computed index into a definition (`v(b, o / Dh, i, o % Dh)`) is clamped too: that
    // changes nothing for a valid program, but Halide cannot prove the range of such indices
    // itself and would compute the definition (and read its inputs) outside it. Plain
    // indices need no clamp.
    bool computed = !idx[d].as<H::Internal::Variable>();
    if (boundary != "none" || (!param && computed)) {
      idx[d] = H::clamp(idx[d], 0, H::max(extent[d] - 1, 0));
    } else if (param && readsData(idx[d])) {
      // A gather from an input: the read is clamped so Halide can bound it, and an index that
      // was out of range stops the kernel with an error (as a bounds check would).
      H::Expr i = idx[d];
      H::Expr ok = i >= 0 && i < extent[d];
      if (readGuard_.defined())
        ok = !readGuard_ || ok;
      H::Expr clamped = H::clamp(i, 0, H::max(extent[d] - 1, 0));
      if (hostGatherChecks_ && addHostGatherCheck(ok, i, param->name, (int)d, extent[d])) {
        idx[d] = clamped;
      } else {
        // Checked where it is read; GPU targets refuse such a read (scheduleKernel).
        if (hostGatherChecks_)
          if (std::optional<std::string> at = sourcePosition(r.getLoc()))
            out_.inputGathers.emplace_back(*at, param->name);
        idx[d] = H::require(ok, clamped, "input", param->name, "is read at", i, "in dimension",
                            (int)d, "of extent", extent[d]);
      }
    }
  }
  H::Expr v = param ? H::Expr(param->param(reversed(idx))) : H::Expr(func(reversed(idx)));
  // bf16/f16 inputs read as f32 (exactly): every definition computes in f32.
  if (v.type().is_float() && v.type().bits() < 32)
    v = widenStorage(v);
  return {v, inRange};
}

// --- scalar expressions --------------------------------------------------------------------
H::Expr Lowerer::eval(Value v, Env &env) {
  auto it = env.find(v);
  if (it != env.end())
    return it->second;
  Operation *op = v.getDefiningOp();
  if (!op)
    throw std::runtime_error("HalideGen: index used outside its region");
  H::Expr e = evalOp(op, env);
  env[v] = e;
  return e;
}

H::Expr Lowerer::evalOp(Operation *op, Env &env) {
  auto a = [&](unsigned i) { return eval(op->getOperand(i), env); };
  return llvm::TypeSwitch<Operation *, H::Expr>(op)
      .Case<attn::DimOp>([&](attn::DimOp d) -> H::Expr {
        const KernelParam &p = out_.inputs[inputIndex_.lookup(d.getTensor())];
        return p.param.dim(p.param.dimensions() - 1 - (int)d.getIndex()).extent();
      })
      .Case<attn::ReadOp>([&](attn::ReadOp r) -> H::Expr { return lowerRead(r, env); })
      .Case<attn::ReduceOp>([&](attn::ReduceOp r) { return lowerNestedReduce(r, env); })
      .Case<arith::ConstantOp>([&](arith::ConstantOp c) -> H::Expr {
        Attribute val = c.getValue();
        if (auto f = dyn_cast<FloatAttr>(val))
          return H::Expr((float)f.getValueAsDouble());
        if (auto i = dyn_cast<IntegerAttr>(val)) {
          if (c.getType().isInteger(1))
            return H::cast<bool>(H::Expr((int)i.getValue().getZExtValue()));
          return H::Expr((int32_t)i.getValue().getSExtValue());
        }
        unsupported(op, "constant kind");
      })
      .Case<arith::AddFOp, arith::AddIOp>([&](auto) { return a(0) + a(1); })
      .Case<arith::SubIOp>([&](arith::SubIOp s) -> H::Expr {
        // MLIRGen spells the floored `x % c` as x - floordiv(x, c) * c. For a divisor that is
        // never negative Halide's own (Euclidean) modulo is the same value, and Halide bounds it
        // by [0, c - 1]; the spelt-out form it bounds by interval arithmetic, below 0 (a rotary
        // embedding's `x(i, (d + D/2) % D)` and a paged cache's `kc(p, j % P, d)` were refused
        // at run time as reads at -D/2 and -P that never happen).
        if (auto m = s.getRhs().getDefiningOp<arith::MulIOp>())
          if (auto q = m.getLhs().getDefiningOp<arith::FloorDivSIOp>())
            if (q.getLhs() == s.getLhs() && q.getRhs() == m.getRhs() && nonNegative(q.getRhs()))
              return a(0) % eval(q.getRhs(), env);
        return a(0) - a(1);
      })
      .Case<arith::SubFOp>([&](auto) { return a(0) - a(1); })
      .Case<arith::MulFOp, arith::DivFOp, arith::NegFOp>([&](Operation *o) -> H::Expr {
        if (std::optional<ReadParts> p = structural(o->getResult(0), env))
          return H::select(p->inRange, p->value, 0.0f);
        // Halide negates as 0 - x, which loses the sign of a zero.
        if (isa<arith::NegFOp>(o))
          return a(0) * -1.0f;
        return isa<arith::MulFOp>(o) ? a(0) * a(1) : fdiv(a(0), a(1));
      })
      .Case<arith::MulIOp>([&](auto) { return a(0) * a(1); })
      .Case<arith::FloorDivSIOp>([&](auto) {
        // Halide's integer division is Euclidean; it equals floor division for positive divisors,
        // and both give 0 for a zero divisor. A divisor never negative by construction (a size)
        // is divided directly, so that Halide bounds the quotient tightly (`j / P` of a paged KV
        // cache); the select's two branches it bounds by their union.
        H::Expr x = a(0), y = a(1);
        if (nonNegative(op->getOperand(1)))
          return x / y;
        return H::select(y > 0, x / y, (0 - x) / (0 - y));
      })
      // maximumf/minimumf propagate NaN (as torch.maximum does); Halide's max/min of floats
      // return the other operand (maxnumf/minnumf, which ifloor's clamp uses).
      .Case<arith::MaximumFOp>([&](auto) { return nanPropagating(a(0), a(1), H::max(a(0), a(1))); })
      .Case<arith::MinimumFOp>([&](auto) { return nanPropagating(a(0), a(1), H::min(a(0), a(1))); })
      .Case<arith::MaxNumFOp, arith::MaxSIOp>([&](auto) { return H::max(a(0), a(1)); })
      .Case<arith::MinNumFOp, arith::MinSIOp>([&](auto) { return H::min(a(0), a(1)); })
      .Case<arith::AndIOp>([&](auto) { return a(0) && a(1); })
      .Case<arith::OrIOp>([&](auto) { return a(0) || a(1); })
      .Case<arith::XOrIOp>([&](auto) { return a(0) != a(1); })
      .Case<arith::SelectOp>([&](auto) { return H::select(a(0), a(1), a(2)); })
      .Case<arith::IndexCastOp, arith::SIToFPOp, arith::FPToSIOp, arith::TruncFOp, arith::ExtFOp>(
          [&](auto) { return castTo(op->getResult(0).getType(), a(0)); })
      .Case<arith::CmpIOp>([&](arith::CmpIOp c) -> H::Expr {
        H::Expr x = a(0), y = a(1);
        switch (c.getPredicate()) {
        case arith::CmpIPredicate::eq:
          return x == y;
        case arith::CmpIPredicate::ne:
          return x != y;
        case arith::CmpIPredicate::slt:
          return x < y;
        case arith::CmpIPredicate::sle:
          return x <= y;
        case arith::CmpIPredicate::sgt:
          return x > y;
        case arith::CmpIPredicate::sge:
          return x >= y;
        default:
          unsupported(op, "unsigned integer comparison");
        }
      })
      .Case<arith::CmpFOp>([&](arith::CmpFOp c) -> H::Expr {
        H::Expr x = a(0), y = a(1);
        switch (c.getPredicate()) {
        case arith::CmpFPredicate::OEQ:
          return x == y;
        case arith::CmpFPredicate::UNE:
          return x != y;
        case arith::CmpFPredicate::OLT:
          return x < y;
        // Halide's simplifier rewrites a <= b as !(b < a), which is true for a NaN operand:
        // ordered comparisons are spelt as < and == (false for NaN).
        case arith::CmpFPredicate::OLE:
          return x < y || x == y;
        case arith::CmpFPredicate::OGT:
          return x > y;
        case arith::CmpFPredicate::OGE:
          return x > y || x == y;
        default:
          unsupported(op, "float comparison predicate");
        }
      })
      .Case<math::ExpOp>([&](auto) {
        // Halide's exp is wrong past float's range (exp(1e30) and exp(inf) give 0, exp(nan) 0):
        // overflow gives inf and NaN stays NaN, as IEEE and the reference interpreter say.
        // (Softmax's exp, of score - max <= 0, is generated without this guard.)
        return ieeeExp(a(0));
      })
      .Case<math::LogOp>([&](auto) { return ieeeLog(a(0)); })
      .Case<math::SqrtOp>([&](auto) { return H::sqrt(a(0)); })
      .Case<math::RsqrtOp>([&](auto) { return fdiv(1.0f, H::sqrt(a(0))); })
      .Case<math::SinOp>([&](auto) { return vecSin(a(0)); })
      .Case<math::CosOp>([&](auto) { return vecCos(a(0)); })
      .Case<math::TanhOp>([&](auto) { return vecTanh(a(0)); })
      .Case<math::ErfOp>([&](auto) { return ieeeErf(a(0)); })
      .Case<math::AbsFOp, math::AbsIOp>([&](auto) { return H::abs(a(0)); })
      .Case<math::FloorOp>([&](auto) { return H::floor(a(0)); })
      .Case<math::PowFOp>([&](auto) { return ieeePow(a(0), a(1)); })
      .Default([&](Operation *) -> H::Expr { unsupported(op, "no Halide lowering for"); });
}

} // namespace attnc::lowering
