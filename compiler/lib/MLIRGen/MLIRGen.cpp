// MLIRGen: one attn.kernel per DSL kernel, one attn.define/attn.softmax per definition.
#include "attnc/MLIRGen.h"

#include "attnc/Dialect/AttnOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/ScopedHashTable.h"

#include <map>

using namespace mlir;
using namespace attnc::dsl;

namespace attnc {

void registerAttncDialects(MLIRContext &ctx) {
  ctx.getOrLoadDialect<attn::AttnDialect>();
  ctx.getOrLoadDialect<arith::ArithDialect>();
  ctx.getOrLoadDialect<math::MathDialect>();
}

namespace {

class Gen {
public:
  Gen(MLIRContext &ctx, StringRef file) : b_(&ctx), file_(b_.getStringAttr(file)) {}

  OwningOpRef<ModuleOp> run(const dsl::Module &m) {
    OwningOpRef<ModuleOp> mod = ModuleOp::create(b_.getUnknownLoc());
    b_.setInsertionPointToEnd(mod->getBody());
    for (const auto &k : m.kernels)
      genKernel(*k);
    if (failed(verify(*mod)))
      return nullptr;
    return mod;
  }

private:
  OpBuilder b_;
  StringAttr file_;
  std::map<std::string, Value> sizes_, tensors_;
  std::map<const IndexDecl *, Value> indices_;
  std::map<const Expr *, Value> lets_;
  // While generating a softmax score or mask: its `.exclude` reads, with the reductions (inside
  // the softmax body) that enclose each, and the reductions entered so far.
  struct ExcludeRead {
    const Expr *read;
    std::vector<const Expr *> reduces;
  };
  std::vector<ExcludeRead> *excludes_ = nullptr;
  std::vector<const Expr *> reduceStack_;

  // Locations in imported files (functions expanded into the kernel) name those files.
  Location loc(Loc l) {
    return FileLineColLoc::get(l.file ? b_.getStringAttr(l.file->path) : file_, l.line, l.col);
  }

  Type elemType(ElemType t) { return attn::elementType(b_.getContext(), t); }

  RankedTensorType tensorType(const TensorDecl &t) {
    SmallVector<int64_t> shape;
    if (!t.dims.empty())
      for (const DimSpec &d : t.dims)
        shape.push_back(d.isStatic() ? d.value : ShapedType::kDynamic);
    else
      for (const auto &e : t.extents)
        shape.push_back(e->kind == ExprKind::Number ? (int64_t)e->number : ShapedType::kDynamic);
    return RankedTensorType::get(shape, elemType(t.elemType));
  }

  DictionaryAttr paramAttrs(const TensorDecl &t) {
    SmallVector<attnc::Dim> dims;
    for (const DimSpec &d : t.dims)
      dims.push_back(d.dim());
    return b_.getDictionaryAttr(
        {b_.getNamedAttr("attn.name", b_.getStringAttr(t.name)),
         b_.getNamedAttr("attn.dims", attn::DimsAttr::get(b_.getContext(), dims))});
  }

  void genKernel(const Kernel &k) {
    sizes_.clear();
    tensors_.clear();
    indices_.clear();
    lets_.clear();
    SmallVector<Type> ins, outs;
    for (const auto &t : k.inputs)
      ins.push_back(tensorType(*t));
    for (const auto &t : k.outputs)
      outs.push_back(tensorType(*t));
    auto kernel = b_.create<attn::KernelOp>(loc(k.loc), k.name, b_.getFunctionType(ins, outs));
    SmallVector<Attribute> argAttrs, resAttrs;
    for (const auto &t : k.inputs)
      argAttrs.push_back(paramAttrs(*t));
    for (const auto &t : k.outputs)
      resAttrs.push_back(paramAttrs(*t));
    kernel.setArgAttrsAttr(b_.getArrayAttr(argAttrs));
    kernel.setResAttrsAttr(b_.getArrayAttr(resAttrs));

    OpBuilder::InsertionGuard guard(b_);
    SmallVector<Location> locs;
    for (const auto &t : k.inputs)
      locs.push_back(loc(t->loc));
    Block *entry = b_.createBlock(&kernel.getBody(), {}, ins, locs);
    for (size_t i = 0; i < k.inputs.size(); ++i)
      tensors_[k.inputs[i]->name] = entry->getArgument(i);
    for (const auto &s : k.sizes) {
      const DimSpec &d = s.tensor->dims[s.dim];
      sizes_[s.name] =
          b_.create<attn::DimOp>(loc(d.loc), b_.getIndexType(), tensors_[s.tensor->name],
                                 b_.getI64IntegerAttr(s.dim), b_.getStringAttr(s.name));
    }
    for (const auto &r : k.requirements) {
      if (r.isStatic)
        continue; // Sema checked it
      b_.create<attn::RequireOp>(loc(r.loc), gen(*r.cond), b_.getStringAttr(Kernel::failureAt(r)));
    }
    for (const auto &def : k.defs)
      genDefinition(*def);
    SmallVector<Value> results;
    for (const auto &t : k.outputs)
      results.push_back(tensors_[t->name]);
    b_.create<attn::ReturnOp>(loc(k.loc), results);
  }

  ArrayAttr indexNames(const std::vector<IndexDecl> &idx) {
    SmallVector<Attribute> names;
    for (const auto &d : idx)
      names.push_back(b_.getStringAttr(d.name));
    return b_.getArrayAttr(names);
  }

  // Extents are evaluated outside the region (they depend only on sizes and constants).
  SmallVector<Value> extents(const std::vector<IndexDecl> &idx) {
    SmallVector<Value> out;
    for (const auto &d : idx) {
      Value hi = toIndex(gen(*d.range->hi));
      if (isZeroLiteral(*d.range->lo)) {
        out.push_back(hi);
      } else {
        Value lo = toIndex(gen(*d.range->lo));
        out.push_back(b_.create<arith::SubIOp>(loc(d.loc), hi, lo));
      }
    }
    return out;
  }

  static bool isZeroLiteral(const Expr &e) { return e.kind == ExprKind::Number && e.number == 0; }

  // Creates the region's block; maps each index to its argument (shifted by a non-zero lower bound).
  Block *indexBlock(Region &r, const std::vector<IndexDecl> &idx) {
    SmallVector<Type> types(idx.size(), b_.getIndexType());
    SmallVector<Location> locs;
    for (const auto &d : idx)
      locs.push_back(loc(d.loc));
    Block *block = b_.createBlock(&r, {}, types, locs);
    for (size_t i = 0; i < idx.size(); ++i) {
      Value v = block->getArgument(i);
      if (!isZeroLiteral(*idx[i].range->lo))
        v = b_.create<arith::AddIOp>(loc(idx[i].loc), v, toIndex(gen(*idx[i].range->lo)));
      indices_[&idx[i]] = v;
    }
    return block;
  }

  void genDefinition(const Definition &def) {
    const TensorDecl &t = *def.tensor;
    // A definition computes in f32 (or i32); a bf16/f16 output is rounded where it is stored.
    RankedTensorType storage = tensorType(t);
    RankedTensorType type =
        RankedTensorType::get(storage.getShape(), attn::computeType(storage.getElementType()));
    SmallVector<Value> ext = extents(def.indices);
    Location l = loc(def.loc);
    OpBuilder::InsertionGuard guard(b_);
    Value result;
    if (def.rhs->kind == ExprKind::Softmax) {
      const Expr &sm = *def.rhs;
      SmallVector<int64_t> axes;
      for (const auto &ax : sm.softmaxAxes)
        for (size_t i = 0; i < def.indices.size(); ++i)
          if (def.indices[i].name == ax)
            axes.push_back((int64_t)i);
      auto op = b_.create<attn::SoftmaxOp>(l, type, def.name, ext, indexNames(def.indices), axes);
      result = op;
      OpBuilder::InsertionGuard inner(b_);
      indexBlock(op.getBody(), def.indices);
      std::vector<ExcludeRead> excluded;
      excludes_ = &excluded;
      reduceStack_.clear();
      SmallVector<Value> yields{toFloat(gen(*sm.body))};
      Value mask = sm.where ? gen(*sm.where) : Value();
      excludes_ = nullptr;
      // `.exclude` reads mask out the points where they fall outside the tensor (anywhere in the
      // reductions around them).
      for (const ExcludeRead &x : excluded) {
        Value inRange = genExcludeInRange(x, 0);
        mask = mask ? (Value)b_.create<arith::AndIOp>(loc(sm.loc), mask, inRange) : inRange;
      }
      if (mask)
        yields.push_back(mask);
      b_.create<attn::YieldOp>(loc(sm.loc), yields);
      if (sm.sink) {
        indexBlock(op.getSink(), def.indices);
        reduceStack_.clear();
        Value sink = toFloat(gen(*sm.sink));
        b_.create<attn::YieldOp>(loc(sm.sink->loc), ValueRange{sink});
      }
    } else {
      auto op = b_.create<attn::DefineOp>(l, type, def.name, ext, indexNames(def.indices));
      result = op;
      OpBuilder::InsertionGuard inner(b_);
      indexBlock(op.getBody(), def.indices);
      Value v = gen(*def.rhs);
      v = t.elemType == ElemType::I32 ? toI32(v) : toFloat(v);
      b_.create<attn::YieldOp>(loc(def.rhs->loc), ValueRange{v});
    }
    tensors_[def.name] = result;
  }

  // --- scalar conversions: Int is `index`, Float is f32, Bool is i1 --------------------------
  Value toFloat(Value v) {
    Type t = v.getType();
    if (t.isF32())
      return v;
    Location l = v.getLoc();
    if (t.isIndex())
      v = b_.create<arith::IndexCastOp>(l, b_.getI64Type(), v);
    return b_.create<arith::SIToFPOp>(l, b_.getF32Type(), v);
  }
  Value toIndex(Value v) {
    if (v.getType().isIndex())
      return v;
    return b_.create<arith::IndexCastOp>(v.getLoc(), b_.getIndexType(), v);
  }
  Value toI32(Value v) {
    if (v.getType().isInteger(32))
      return v;
    return b_.create<arith::IndexCastOp>(v.getLoc(), b_.getI32Type(), v);
  }
  Value toType(Value v, ScalarType t) { return t == ScalarType::Float ? toFloat(v) : v; }

  Value gen(const Expr &e) {
    Location l = loc(e.loc);
    switch (e.kind) {
    case ExprKind::Number:
      if (e.isIntLiteral)
        return b_.create<arith::ConstantIndexOp>(l, (int64_t)e.number);
      return b_.create<arith::ConstantOp>(l, b_.getF32FloatAttr((float)e.number));
    case ExprKind::Ident:
      switch (e.identKind) {
      case IdentKind::Index:
        return indices_.at(e.index);
      case IdentKind::Size:
        return sizes_.at(e.name);
      case IdentKind::Const:
        if (e.type == ScalarType::Int)
          return b_.create<arith::ConstantIndexOp>(l, (int64_t)e.constValue);
        return b_.create<arith::ConstantOp>(l, b_.getF32FloatAttr((float)e.constValue));
      case IdentKind::Let:
        return lets_.at(e.let);
      case IdentKind::Unresolved:
        break;
      }
      llvm_unreachable("unresolved identifier after Sema");
    case ExprKind::Read: {
      SmallVector<Value> idx;
      for (const auto &a : e.args)
        idx.push_back(toIndex(gen(*a)));
      Value t = tensors_.at(e.name);
      std::string boundary = e.boundary.empty() ? "none" : e.boundary;
      if (boundary == "exclude") {
        // Read as zero; the softmax masks the point out where the read is out of range.
        boundary = "zero";
        if (excludes_)
          excludes_->push_back({&e, reduceStack_});
      }
      Value v = b_.create<attn::ReadOp>(
          l, attn::computeType(cast<RankedTensorType>(t.getType()).getElementType()), t, idx,
          b_.getStringAttr(boundary));
      return v.getType().isInteger(32) ? toIndex(v) : v;
    }
    case ExprKind::ListRead:
      return genListRead(e);
    case ExprKind::Call:
      return genCall(e);
    case ExprKind::Unary: {
      Value x = gen(*e.args[0]);
      if (e.name == "!")
        return b_.create<arith::XOrIOp>(l, x, b_.create<arith::ConstantIntOp>(l, 1, 1));
      if (x.getType().isF32())
        return b_.create<arith::NegFOp>(l, x);
      return b_.create<arith::SubIOp>(l, b_.create<arith::ConstantIndexOp>(l, 0), x);
    }
    case ExprKind::Binary:
      return genBinary(e);
    case ExprKind::Reduce:
      return genReduce(e);
    case ExprKind::Let: {
      // The value is computed once, where the let stands; every use refers to that SSA value.
      lets_[&e] = gen(*e.args[0]);
      return gen(*e.body);
    }
    case ExprKind::Softmax:
      break;
    }
    llvm_unreachable("softmax below the top of a definition is rejected by Sema");
  }

  Value genBinary(const Expr &e) {
    Location l = loc(e.loc);
    const std::string &op = e.name;
    Value a = gen(*e.args[0]), c = gen(*e.args[1]);
    if (op == "&&")
      return b_.create<arith::AndIOp>(l, a, c);
    if (op == "||")
      return b_.create<arith::OrIOp>(l, a, c);
    bool isFloat = a.getType().isF32() || c.getType().isF32();
    if (isFloat)
      a = toFloat(a), c = toFloat(c);
    if (op == "<" || op == "<=" || op == ">" || op == ">=" || op == "==" || op == "!=") {
      if (isFloat) {
        auto p = op == "<"    ? arith::CmpFPredicate::OLT
                 : op == "<=" ? arith::CmpFPredicate::OLE
                 : op == ">"  ? arith::CmpFPredicate::OGT
                 : op == ">=" ? arith::CmpFPredicate::OGE
                 : op == "==" ? arith::CmpFPredicate::OEQ
                              : arith::CmpFPredicate::UNE;
        return b_.create<arith::CmpFOp>(l, p, a, c);
      }
      auto p = op == "<"    ? arith::CmpIPredicate::slt
               : op == "<=" ? arith::CmpIPredicate::sle
               : op == ">"  ? arith::CmpIPredicate::sgt
               : op == ">=" ? arith::CmpIPredicate::sge
               : op == "==" ? arith::CmpIPredicate::eq
                            : arith::CmpIPredicate::ne;
      return b_.create<arith::CmpIOp>(l, p, a, c);
    }
    if (isFloat) {
      if (op == "+")
        return b_.create<arith::AddFOp>(l, a, c);
      if (op == "-")
        return b_.create<arith::SubFOp>(l, a, c);
      if (op == "*")
        return b_.create<arith::MulFOp>(l, a, c);
      if (op == "/")
        return b_.create<arith::DivFOp>(l, a, c);
    } else {
      if (op == "+")
        return b_.create<arith::AddIOp>(l, a, c);
      if (op == "-")
        return b_.create<arith::SubIOp>(l, a, c);
      if (op == "*")
        return b_.create<arith::MulIOp>(l, a, c);
      // Integer division rounds toward negative infinity; `%` takes the divisor's sign.
      if (op == "/")
        return b_.create<arith::FloorDivSIOp>(l, a, c);
      if (op == "%") {
        Value q = b_.create<arith::FloorDivSIOp>(l, a, c);
        return b_.create<arith::SubIOp>(l, a, b_.create<arith::MulIOp>(l, q, c));
      }
    }
    llvm_unreachable("operator checked by Sema");
  }

  // An element of a constant list, as a chain of selects on the subscript from the last element
  // to the first (`select(i == 0, v0, select(i == 1, v1, ... vN-1))`): short lists are all the
  // language has, and a select of constants vectorises and keeps Halide's bounds of the value
  // (min..max of the list) exact, which a table in memory would not. Sema made sure the subscript
  // stays in the list (at compile time or with a requirement), so the last element needs no test.
  // An integer list in arithmetic progression (the usual dilations 1, 2, 3) is `v0 + step * i`.
  Value genListRead(const Expr &e) {
    Location l = loc(e.loc);
    const std::vector<double> &v = e.listValues;
    bool isInt = e.type == ScalarType::Int;
    auto element = [&](double x) -> Value {
      if (isInt)
        return b_.create<arith::ConstantIndexOp>(l, (int64_t)x);
      return b_.create<arith::ConstantOp>(l, b_.getF32FloatAttr((float)x));
    };
    Value i = toIndex(gen(*e.args[0]));
    if (isInt && v.size() >= 2) {
      int64_t step = (int64_t)v[1] - (int64_t)v[0];
      bool progression = true;
      for (size_t k = 1; k < v.size(); ++k)
        progression &= (int64_t)v[k] - (int64_t)v[k - 1] == step;
      if (progression && step == 0)
        return element(v[0]);
      if (progression) {
        Value scaled = step == 1 ? i : (Value)b_.create<arith::MulIOp>(l, element(step), i);
        return v[0] == 0 ? scaled : (Value)b_.create<arith::AddIOp>(l, element(v[0]), scaled);
      }
    }
    Value r = element(v.back());
    for (size_t k = v.size() - 1; k-- > 0;) {
      Value is = b_.create<arith::CmpIOp>(l, arith::CmpIPredicate::eq, i,
                                          b_.create<arith::ConstantIndexOp>(l, (int64_t)k));
      r = b_.create<arith::SelectOp>(l, is, element(v[k]), r);
    }
    return r;
  }

  Value f32(Location l, float v) { return b_.create<arith::ConstantOp>(l, b_.getF32FloatAttr(v)); }

  // The activations (sigmoid, silu, elu, softplus, relu of a float), written out in arith/math
  // ops as PyTorch defines them, so every later stage (passes, HalideGen's IEEE rules, the
  // vectorised exp) treats them as any expression; null for another name.
  Value genActivation(const std::string &n, Value x, Location l) {
    Value one = f32(l, 1.0f), zero = f32(l, 0.0f);
    auto cmp = [&](arith::CmpFPredicate p, Value a, Value b) {
      return b_.create<arith::CmpFOp>(l, p, a, b);
    };
    if (n == "sigmoid" || n == "silu") {
      // t = exp(-|x|) never overflows: 1 / (1 + t) for x >= 0, t / (1 + t) below. The textbook
      // 1 / (1 + exp(-x)) is 0 once exp(-x) overflows (x < -88.7), where silu's true value
      // x * e^x is still a normal float down to x = -103 (silu(-89) = -1.98e-37).
      Value t =
          b_.create<math::ExpOp>(l, b_.create<arith::NegFOp>(l, b_.create<math::AbsFOp>(l, x)));
      Value den = b_.create<arith::AddFOp>(l, one, t);
      Value sig = b_.create<arith::DivFOp>(
          l, b_.create<arith::SelectOp>(l, cmp(arith::CmpFPredicate::OGE, x, zero), one, t), den);
      return n == "sigmoid" ? sig : (Value)b_.create<arith::MulFOp>(l, x, sig);
    }
    if (n == "relu")
      return b_.create<arith::MaximumFOp>(l, x, zero); // NaN stays NaN
    if (n == "elu") {
      // x for x > 0, else expm1(x) (alpha 1). u = exp(x); below u = 0.5, u - 1 has no
      // cancellation; above (x in [-ln 2, 0], where the plain difference loses the relative
      // accuracy near 0: exp(1e-7) - 1 is 20% off in f32) expm1's Taylor series to x^10, whose
      // first omitted term is below 2^-31 of the result there, in Horner's form (x times a sum
      // of terms falling by at least 2.9x, so rounding stays within a few ulps; -0 stays -0).
      // It replaced Kahan's (u - 1) * x / log(u), whose log and division made the feature maps
      // of linear attention (elu + 1 over q and k) cost about as much as its two contractions.
      Value u = b_.create<math::ExpOp>(l, x);
      Value um1 = b_.create<arith::SubFOp>(l, u, one);
      double c = 1.0;
      for (int k = 2; k <= 10; ++k)
        c /= k;
      Value poly = f32(l, (float)c); // 1/10!
      for (int k = 9; k >= 1; --k) {
        c *= k + 1; // 1/k!
        poly = b_.create<arith::AddFOp>(l, b_.create<arith::MulFOp>(l, poly, x), f32(l, (float)c));
      }
      Value series = b_.create<arith::MulFOp>(l, poly, x);
      Value neg = b_.create<arith::SelectOp>(l, cmp(arith::CmpFPredicate::OLT, u, f32(l, 0.5f)),
                                             um1, series);
      return b_.create<arith::SelectOp>(l, cmp(arith::CmpFPredicate::OGT, x, zero), x, neg);
    }
    if (n == "softplus") {
      // PyTorch's softplus (beta 1, threshold 20): x above 20, else log1p(exp(x)), with log1p by
      // Kahan's rewrite (log(1 + y) is 0 for y below 6e-8 in f32, where log1p(y) is y):
      // w = 1 + y; y where w == 1, log(w) * y / (w - 1) else.
      Value y = b_.create<math::ExpOp>(l, x);
      Value w = b_.create<arith::AddFOp>(l, one, y);
      Value kahan =
          b_.create<arith::DivFOp>(l, b_.create<arith::MulFOp>(l, b_.create<math::LogOp>(l, w), y),
                                   b_.create<arith::SubFOp>(l, w, one));
      Value lp = b_.create<arith::SelectOp>(l, cmp(arith::CmpFPredicate::OEQ, w, one), y, kahan);
      return b_.create<arith::SelectOp>(l, cmp(arith::CmpFPredicate::OGT, x, f32(l, 20.0f)), x, lp);
    }
    return Value();
  }

  Value genCall(const Expr &e) {
    Location l = loc(e.loc);
    const std::string &n = e.name;
    if (n == "select") {
      Value c = gen(*e.args[0]);
      Value x = toType(gen(*e.args[1]), e.type), y = toType(gen(*e.args[2]), e.type);
      return b_.create<arith::SelectOp>(l, c, x, y);
    }
    if (n == "min" || n == "max") {
      Value x = toType(gen(*e.args[0]), e.type), y = toType(gen(*e.args[1]), e.type);
      if (e.type == ScalarType::Float)
        return n == "min" ? (Value)b_.create<arith::MinimumFOp>(l, x, y)
                          : (Value)b_.create<arith::MaximumFOp>(l, x, y);
      return n == "min" ? (Value)b_.create<arith::MinSIOp>(l, x, y)
                        : (Value)b_.create<arith::MaxSIOp>(l, x, y);
    }
    if (n == "abs" && e.type == ScalarType::Int)
      return b_.create<math::AbsIOp>(l, gen(*e.args[0]));
    if (n == "relu" && e.type == ScalarType::Int)
      return b_.create<arith::MaxSIOp>(l, gen(*e.args[0]), b_.create<arith::ConstantIndexOp>(l, 0));
    Value x = toFloat(gen(*e.args[0]));
    if (n == "f32")
      return x;
    if (n == "bf16" || n == "f16") { // rounded to the type, computed on in f32
      Type t = n == "bf16" ? (Type)b_.getBF16Type() : (Type)b_.getF16Type();
      Value r = b_.create<arith::TruncFOp>(l, t, x);
      return b_.create<arith::ExtFOp>(l, b_.getF32Type(), r);
    }
    if (Value v = genActivation(n, x, l))
      return v;
    if (n == "exp")
      return b_.create<math::ExpOp>(l, x);
    if (n == "log")
      return b_.create<math::LogOp>(l, x);
    if (n == "sqrt")
      return b_.create<math::SqrtOp>(l, x);
    if (n == "rsqrt")
      return b_.create<math::RsqrtOp>(l, x);
    if (n == "sin")
      return b_.create<math::SinOp>(l, x);
    if (n == "cos")
      return b_.create<math::CosOp>(l, x);
    if (n == "tanh")
      return b_.create<math::TanhOp>(l, x);
    if (n == "erf")
      return b_.create<math::ErfOp>(l, x);
    if (n == "abs")
      return b_.create<math::AbsFOp>(l, x);
    if (n == "floor")
      return b_.create<math::FloorOp>(l, x);
    if (n == "ifloor") {
      // floor, clamped to the 32-bit range (the language's ints), then converted; NaN becomes
      // the lowest int (maxnumf returns its other operand for a NaN).
      Value f = b_.create<math::FloorOp>(l, x);
      Value lo = b_.create<arith::ConstantOp>(l, b_.getF32FloatAttr(-2147483648.0f));
      Value hi = b_.create<arith::ConstantOp>(
          l, b_.getF32FloatAttr(2147483520.0f)); // largest f32 below 2^31
      f = b_.create<arith::MinimumFOp>(l, b_.create<arith::MaxNumFOp>(l, f, lo), hi);
      Value i = b_.create<arith::FPToSIOp>(l, b_.getI32Type(), f);
      return b_.create<arith::IndexCastOp>(l, b_.getIndexType(), i);
    }
    if (n == "pow")
      return b_.create<math::PowFOp>(l, x, toFloat(gen(*e.args[1])));
    llvm_unreachable("builtin checked by Sema");
  }

  // A bare index whose range starts at 0 is always inside the dimension it subscripts (Sema
  // checked that its extent is that dimension's).
  static bool alwaysInRange(const Expr &sub) {
    return sub.kind == ExprKind::Ident && sub.identKind == IdentKind::Index && sub.index->range &&
           isZeroLiteral(*sub.index->range->lo);
  }

  static bool usesAny(const Expr &e, const std::vector<IndexDecl> &idx) {
    if (e.kind == ExprKind::Ident && e.identKind == IdentKind::Index)
      for (const auto &d : idx)
        if (e.index == &d)
          return true;
    for (const auto &a : e.args)
      if (usesAny(*a, idx))
        return true;
    return (e.body && usesAny(*e.body, idx)) || (e.where && usesAny(*e.where, idx));
  }

  // Whether every subscript of read `e` is inside its tensor, at the current insertion point.
  Value inRange(const Expr &e) {
    Location l = loc(e.loc);
    Value all;
    for (size_t i = 0; i < e.args.size(); ++i) {
      if (alwaysInRange(*e.args[i]))
        continue;
      Value idx = toIndex(gen(*e.args[i]));
      Value ext = toIndex(gen(*e.tensor->extents[i]));
      Value zero = b_.create<arith::ConstantIndexOp>(l, 0);
      Value lo = b_.create<arith::CmpIOp>(l, arith::CmpIPredicate::sge, idx,
                                          zero); // in order, for stable output
      Value hi = b_.create<arith::CmpIOp>(l, arith::CmpIPredicate::slt, idx, ext);
      Value ok = b_.create<arith::AndIOp>(l, lo, hi);
      all = all ? (Value)b_.create<arith::AndIOp>(l, all, ok) : ok;
    }
    return all ? all : (Value)b_.create<arith::ConstantIntOp>(l, 1, 1);
  }

  // The in-range condition of an `.exclude` read at the softmax body's level. A read inside
  // reductions is in range only if it is at every point of their domains: this rebuilds those
  // reductions as a "max" of an out-of-range flag (an empty domain never reads, so never masks).
  Value genExcludeInRange(const ExcludeRead &x, size_t level) {
    Location l = loc(x.read->loc);
    if (level == x.reduces.size())
      return inRange(*x.read);
    const Expr &r = *x.reduces[level];
    // Reductions that no checked subscript depends on need not be rebuilt.
    bool needed = false;
    for (const auto &a : x.read->args)
      needed |= !alwaysInRange(*a) && usesAny(*a, r.reduceIndices);
    if (!needed)
      return genExcludeInRange(x, level + 1);
    SmallVector<Value> ext = extents(r.reduceIndices);
    auto op =
        b_.create<attn::ReduceOp>(l, b_.getI32Type(), "max", ext, indexNames(r.reduceIndices));
    {
      OpBuilder::InsertionGuard guard(b_);
      indexBlock(op.getBody(), r.reduceIndices);
      Value ok = genExcludeInRange(x, level + 1);
      Value in = b_.create<arith::ConstantIntOp>(l, 0, 32);
      Value out = b_.create<arith::ConstantIntOp>(l, 1, 32);
      out = b_.create<arith::SelectOp>(l, ok, in, out);
      b_.create<attn::YieldOp>(l, ValueRange{out});
    }
    return b_.create<arith::CmpIOp>(l, arith::CmpIPredicate::ne, op.getResult(),
                                    b_.create<arith::ConstantIntOp>(l, 1, 32));
  }

  Value genReduce(const Expr &e) {
    Location l = loc(e.loc);
    Type resultType = e.type == ScalarType::Float ? (Type)b_.getF32Type() : (Type)b_.getI32Type();
    SmallVector<Value> ext = extents(e.reduceIndices);
    bool mean = e.reduceKind == ReduceKind::Mean;
    // mean(...) x is sum(...) x divided by the number of points of the domain.
    auto op = b_.create<attn::ReduceOp>(l, resultType, mean ? "sum" : reduceKindName(e.reduceKind),
                                        ext, indexNames(e.reduceIndices));
    {
      OpBuilder::InsertionGuard guard(b_);
      indexBlock(op.getBody(), e.reduceIndices);
      reduceStack_.push_back(&e);
      Value v = gen(*e.body);
      reduceStack_.pop_back();
      v = e.type == ScalarType::Float ? toFloat(v) : toI32(v);
      b_.create<attn::YieldOp>(loc(e.body->loc), ValueRange{v});
    }
    if (mean) {
      // The number of points: a reversed range (hi < lo) is empty, not negative.
      Value zero = b_.create<arith::ConstantIndexOp>(l, 0);
      Value count;
      for (Value x : ext) {
        Value n = b_.create<arith::MaxSIOp>(l, x, zero);
        count = count ? (Value)b_.create<arith::MulIOp>(l, count, n) : n;
      }
      return b_.create<arith::DivFOp>(l, op.getResult(), toFloat(count));
    }
    return e.type == ScalarType::Float ? (Value)op.getResult() : toIndex(op.getResult());
  }
};

} // namespace

OwningOpRef<ModuleOp> mlirGen(MLIRContext &ctx, const dsl::Module &m, StringRef filename) {
  registerAttncDialects(ctx);
  return Gen(ctx, filename).run(m);
}

} // namespace attnc
