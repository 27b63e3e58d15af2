// Registration of the attn dialect and its operations, and the check of its attributes.
#include "attnc/Dialect/AttnDialect.h"
#include "attnc/Dialect/AttnOps.h"

#include "mlir/IR/AffineExpr.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace attnc::attn;

#include "attnc/Dialect/AttnOpsDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "attnc/Dialect/AttnAttrs.cpp.inc"

void AttnDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "attnc/Dialect/AttnOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "attnc/Dialect/AttnAttrs.cpp.inc"
      >();
}

Type attnc::attn::elementType(MLIRContext *ctx, attnc::DType dtype) {
  switch (dtype) {
  case attnc::DType::F32:
    return Float32Type::get(ctx);
  case attnc::DType::I32:
    return IntegerType::get(ctx, 32);
  }
  return {};
}

bool attnc::attn::dtypeOf(Type t, attnc::DType *out) {
  for (const attnc::DTypeInfo &i : attnc::kDTypes)
    if (t == elementType(t.getContext(), i.dtype)) {
      *out = i.dtype;
      return true;
    }
  return false;
}

//===----------------------------------------------------------------------===//
// #attn.dims
//===----------------------------------------------------------------------===//

static ArrayAttr factorsOf(MLIRContext *ctx, const attnc::Dim &d) {
  SmallVector<Attribute> fs;
  for (const attnc::DimFactor &f : d.factors)
    fs.push_back(f.literal() ? (Attribute)IntegerAttr::get(IntegerType::get(ctx, 64), f.value)
                             : (Attribute)StringAttr::get(ctx, f.symbol));
  return ArrayAttr::get(ctx, fs);
}

DimsAttr DimsAttr::get(MLIRContext *ctx, ArrayRef<attnc::Dim> dims) {
  SmallVector<ArrayAttr> ds;
  for (const attnc::Dim &d : dims)
    ds.push_back(factorsOf(ctx, d));
  return Base::get(ctx, ds);
}

SmallVector<attnc::Dim> DimsAttr::getDimList() const {
  SmallVector<attnc::Dim> out;
  for (ArrayAttr d : getDims()) {
    attnc::Dim dim;
    for (Attribute f : d) {
      if (auto s = llvm::dyn_cast<StringAttr>(f))
        dim.factors.push_back(attnc::DimFactor{s.str(), 0});
      else
        dim.factors.push_back(attnc::DimFactor{"", llvm::cast<IntegerAttr>(f).getInt()});
    }
    out.push_back(std::move(dim));
  }
  return out;
}

LogicalResult DimsAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               ArrayRef<ArrayAttr> dims) {
  for (ArrayAttr d : dims) {
    if (d.empty())
      return emitError() << "#attn.dims: a dimension needs at least one factor";
    for (Attribute f : d) {
      if (auto s = llvm::dyn_cast<StringAttr>(f)) {
        attnc::Dim parsed;
        // The runtime reads sizes back from the canonical spelling: a size must be an identifier.
        if (!attnc::Dim::parse(s.getValue(), &parsed) || !parsed.symbol())
          return emitError() << "#attn.dims: '" << s.getValue() << "' is not a size name";
      } else if (auto i = llvm::dyn_cast<IntegerAttr>(f)) {
        if (!i.getType().isInteger(64) || i.getInt() < 0)
          return emitError() << "#attn.dims: literal factors are non-negative i64";
      } else {
        return emitError() << "#attn.dims: factors are size names or integers";
      }
    }
  }
  return success();
}

// `<B, H, M*D>`: factors joined by `*`, dimensions by `,`; a size that is not a bare identifier
// to MLIR's lexer (one spelt like a type, `i8`) is printed as a string.
Attribute DimsAttr::parse(AsmParser &parser, Type) {
  SmallVector<attnc::Dim> dims;
  auto parseFactor = [&](attnc::Dim &d) -> ParseResult {
    int64_t v = 0;
    OptionalParseResult lit = parser.parseOptionalInteger(v);
    if (lit.has_value()) {
      if (failed(*lit))
        return failure();
      d.factors.push_back(attnc::DimFactor{"", v});
      return success();
    }
    std::string name;
    if (parser.parseKeywordOrString(&name))
      return failure();
    d.factors.push_back(attnc::DimFactor{name, 0});
    return success();
  };
  if (parser.parseLess())
    return {};
  if (failed(parser.parseOptionalGreater())) {
    do {
      attnc::Dim d;
      do {
        if (parseFactor(d))
          return {};
      } while (succeeded(parser.parseOptionalStar()));
      dims.push_back(std::move(d));
    } while (succeeded(parser.parseOptionalComma()));
    if (parser.parseGreater())
      return {};
  }
  MLIRContext *ctx = parser.getContext();
  SmallVector<ArrayAttr> ds;
  for (const attnc::Dim &d : dims)
    ds.push_back(factorsOf(ctx, d));
  return getChecked([&] { return parser.emitError(parser.getNameLoc()); }, ctx, ds);
}

// MLIR's lexer reads `i8`, `si32`, `ui1` as integer types, not keywords: such sizes are quoted.
static void printSizeName(AsmPrinter &printer, StringRef name) {
  StringRef digits = name.starts_with("si") || name.starts_with("ui") ? name.drop_front(2)
                     : name.starts_with("i")                          ? name.drop_front(1)
                                                                      : StringRef();
  if (!digits.empty() && llvm::all_of(digits, llvm::isDigit))
    printer.printString(name);
  else
    printer.printKeywordOrString(name);
}

void DimsAttr::print(AsmPrinter &printer) const {
  printer << "<";
  llvm::interleave(
      getDims(), printer,
      [&](ArrayAttr d) {
        llvm::interleave(
            d, printer,
            [&](Attribute f) {
              if (auto s = llvm::dyn_cast<StringAttr>(f))
                printSizeName(printer, s.getValue());
              else
                printer << llvm::cast<IntegerAttr>(f).getInt();
            },
            "*");
      },
      ", ");
  printer << ">";
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
