// Registration of the attn dialect and its operations, and its attributes' syntax and checks.
#include "attnc/Dialect/AttnDialect.h"
#include "attnc/Dialect/AttnOps.h"

#include "mlir/IR/AffineExpr.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/StringSet.h"
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
  case attnc::DType::BF16:
    return BFloat16Type::get(ctx);
  case attnc::DType::F16:
    return Float16Type::get(ctx);
  }
  return {};
}

Type attnc::attn::computeType(Type storage) {
  if (storage.isBF16() || storage.isF16())
    return Float32Type::get(storage.getContext());
  return storage;
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

//===----------------------------------------------------------------------===//
// #attn.bound
//===----------------------------------------------------------------------===//

// What a bound is on its own; where it appears (the op, its indices, the kernel's sizes) is
// checked by verifyOperationAttribute.
LogicalResult BoundAttr::verify(function_ref<InFlightDiagnostic()> emitError, int64_t index,
                                AffineMapAttr lower, AffineMapAttr upper,
                                ArrayRef<StringAttr> sizes, StringAttr, bool) {
  if (index < 0)
    return emitError() << "#attn.bound: index " << index << " is negative";
  if (!lower && !upper)
    return emitError() << "#attn.bound: needs 'lower' or 'upper'";
  if (lower && upper && lower.getValue().getNumDims() != upper.getValue().getNumDims())
    return emitError() << "#attn.bound: 'lower' and 'upper' must map the same indices";
  for (auto [side, map] : {std::pair{"lower", lower}, std::pair{"upper", upper}}) {
    if (!map)
      continue;
    AffineMap m = map.getValue();
    if (m.getNumSymbols() != sizes.size() || m.getNumResults() == 0)
      return emitError() << "#attn.bound: '" << side << "' must map the " << sizes.size()
                         << " sizes to at least one bound";
    for (AffineExpr e : m.getResults())
      if (!positiveDivisors(e))
        return emitError() << "#attn.bound: '" << side << "' may divide only by positive constants";
  }
  return success();
}

// `<index = 1, lower = affine_map<..>, upper = affine_map<..>, sizes = ["N"], from = "p", exact>`:
// `index` first, the other entries in any order, each at most once; `sizes` is required.
Attribute BoundAttr::parse(AsmParser &parser, Type) {
  int64_t index = 0;
  AffineMapAttr lower, upper;
  SmallVector<StringAttr> sizes;
  StringAttr from;
  bool exact = false, haveSizes = false;
  MLIRContext *ctx = parser.getContext();
  if (parser.parseLess() || parser.parseKeyword("index") || parser.parseEqual() ||
      parser.parseInteger(index))
    return {};
  llvm::StringSet<> seen;
  while (succeeded(parser.parseOptionalComma())) {
    StringRef key;
    SMLoc loc = parser.getCurrentLocation();
    if (parser.parseKeyword(&key))
      return {};
    if (!seen.insert(key).second) {
      parser.emitError(loc) << "#attn.bound: '" << key << "' appears twice";
      return {};
    }
    if (key == "exact") {
      exact = true;
      continue;
    }
    if (parser.parseEqual())
      return {};
    if (key == "lower" || key == "upper") {
      Attribute a;
      SMLoc at = parser.getCurrentLocation();
      if (parser.parseAttribute(a))
        return {};
      auto map = llvm::dyn_cast<AffineMapAttr>(a);
      if (!map) {
        parser.emitError(at) << "#attn.bound: '" << key << "' must be an affine map";
        return {};
      }
      (key == "lower" ? lower : upper) = map;
    } else if (key == "sizes") {
      haveSizes = true;
      if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&]() -> ParseResult {
            std::string name;
            if (parser.parseString(&name))
              return failure();
            sizes.push_back(StringAttr::get(ctx, name));
            return success();
          }))
        return {};
    } else if (key == "from") {
      std::string name;
      if (parser.parseString(&name))
        return {};
      from = StringAttr::get(ctx, name);
    } else {
      parser.emitError(loc) << "#attn.bound: unknown entry '" << key
                            << "' (index, lower, upper, sizes, from, exact)";
      return {};
    }
  }
  if (parser.parseGreater())
    return {};
  if (!haveSizes) {
    parser.emitError(parser.getNameLoc()) << "#attn.bound: needs 'sizes'";
    return {};
  }
  return getChecked([&] { return parser.emitError(parser.getNameLoc()); }, ctx, index, lower, upper,
                    sizes, from, exact);
}

void BoundAttr::print(AsmPrinter &printer) const {
  printer << "<index = " << getIndex();
  if (getLower()) {
    printer << ", lower = ";
    printer.printAttribute(getLower());
  }
  if (getUpper()) {
    printer << ", upper = ";
    printer.printAttribute(getUpper());
  }
  printer << ", sizes = [";
  llvm::interleaveComma(getSizes(), printer,
                        [&](StringAttr s) { printer.printString(s.getValue()); });
  printer << "]";
  if (getFrom()) {
    printer << ", from = ";
    printer.printString(getFrom().getValue());
  }
  if (getExact())
    printer << ", exact";
  printer << ">";
}

//===----------------------------------------------------------------------===//
// #attn.key_mask
//===----------------------------------------------------------------------===//

LogicalResult KeyMaskAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                  ArrayRef<int64_t> conjuncts, ArrayRef<int64_t> indices, bool) {
  if (conjuncts.empty())
    return emitError() << "#attn.key_mask: needs at least one conjunct";
  for (auto [what, list] : {std::pair{"conjuncts", conjuncts}, std::pair{"indices", indices}})
    for (size_t i = 0; i < list.size(); ++i)
      if (list[i] < 0 || (i && list[i] <= list[i - 1]))
        return emitError() << "#attn.key_mask: '" << what
                           << "' must be increasing non-negative positions";
  return success();
}

// `<conjuncts = [1, 2], indices = [0], key_only>`.
Attribute KeyMaskAttr::parse(AsmParser &parser, Type) {
  SmallVector<int64_t> conjuncts, indices;
  auto positions = [&](StringRef key, SmallVectorImpl<int64_t> &out) -> ParseResult {
    if (parser.parseKeyword(key) || parser.parseEqual())
      return failure();
    return parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, [&]() -> ParseResult {
      return parser.parseInteger(out.emplace_back());
    });
  };
  if (parser.parseLess() || positions("conjuncts", conjuncts) || parser.parseComma() ||
      positions("indices", indices))
    return {};
  bool keyOnly = false;
  if (succeeded(parser.parseOptionalComma())) {
    if (parser.parseKeyword("key_only"))
      return {};
    keyOnly = true;
  }
  if (parser.parseGreater())
    return {};
  return getChecked([&] { return parser.emitError(parser.getNameLoc()); }, parser.getContext(),
                    conjuncts, indices, keyOnly);
}

void KeyMaskAttr::print(AsmPrinter &printer) const {
  printer << "<conjuncts = [";
  llvm::interleaveComma(getConjuncts(), printer);
  printer << "], indices = [";
  llvm::interleaveComma(getIndices(), printer);
  printer << "]" << (getKeyOnly() ? ", key_only>" : ">");
}

bool attnc::attn::sameExtent(Value a, Value b) {
  if (a == b)
    return true;
  auto da = a.getDefiningOp<DimOp>(), db = b.getDefiningOp<DimOp>();
  if (da && db)
    return da.getSize() == db.getSize();
  auto ca = a.getDefiningOp<arith::ConstantIndexOp>(),
       cb = b.getDefiningOp<arith::ConstantIndexOp>();
  if (ca && cb)
    return ca.value() == cb.value();
  // A product or sum of sizes (`j in 0..M*S`, a paged cache's keys) is spelt once per use: the
  // same operation on the same extents.
  Operation *oa = a.getDefiningOp(), *ob = b.getDefiningOp();
  if (oa && ob && oa->getName() == ob->getName() && oa->getNumOperands() == 2 &&
      ob->getNumOperands() == 2 && isa<arith::MulIOp, arith::AddIOp, arith::SubIOp>(oa))
    return sameExtent(oa->getOperand(0), ob->getOperand(0)) &&
           sameExtent(oa->getOperand(1), ob->getOperand(1));
  return false;
}

void attnc::attn::maskConjuncts(Value mask, SmallVectorImpl<Value> &out) {
  if (auto a = mask.getDefiningOp<arith::AndIOp>(); a && a.getType().isInteger(1)) {
    maskConjuncts(a.getLhs(), out);
    maskConjuncts(a.getRhs(), out);
    return;
  }
  out.push_back(mask);
}

//===----------------------------------------------------------------------===//
// Discardable attributes: attn.bounds, attn.key_mask
//===----------------------------------------------------------------------===//

// attn.key_mask on an online softmax: its positions name conjuncts of the mask and score indices
// other than the key and the query row.
static LogicalResult verifyKeyMask(Operation *op, Attribute value) {
  auto fail = [&](const Twine &why) { return op->emitOpError("'") << kKeyMaskAttr << "' " << why; };
  auto km = dyn_cast<KeyMaskAttr>(value);
  if (!km)
    return fail("must be an #attn.key_mask");
  auto on = dyn_cast<OnlineSoftmaxOp>(op);
  if (!on)
    return fail("applies to attn.online_softmax only");
  if (!on.hasMask())
    return fail("needs a mask");
  SmallVector<Value> leaves;
  maskConjuncts(on.getScore().front().getTerminator()->getOperand(1), leaves);
  if (km.getConjuncts().back() >= (int64_t)leaves.size())
    return fail("conjunct ") << km.getConjuncts().back() << " is out of range (the mask has "
                             << leaves.size() << ")";
  for (int64_t i : km.getIndices())
    if (i >= (int64_t)on.getRows().size() || i == on.getKeyPosition() || i == on.getQueryPosition())
      return fail("index ") << i << " is not a score index other than the key and the query row";
  return success();
}

LogicalResult AttnDialect::verifyOperationAttribute(Operation *op, NamedAttribute attr) {
  if (attr.getName() == kKeyMaskAttr)
    return verifyKeyMask(op, attr.getValue());
  if (attr.getName() != kBoundsAttr)
    return success();
  auto fail = [&](const Twine &why) { return op->emitOpError("'") << kBoundsAttr << "' " << why; };
  auto entries = dyn_cast<ArrayAttr>(attr.getValue());
  if (!entries)
    return fail("must be an array of #attn.bound");
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
    auto b = dyn_cast<BoundAttr>(a);
    if (!b)
      return fail("must be an array of #attn.bound");
    int64_t i = b.getIndex();
    if (i >= (int64_t)numIndices)
      return fail("index ") << i << " is out of range";
    if (isa<SoftmaxOp, OnlineSoftmaxOp>(op) && !llvm::is_contained(axes, i))
      return fail("index ") << i << " is not a softmax axis";
    for (StringAttr name : b.getSizes()) {
      bool known = false;
      if (kernel)
        kernel.walk([&](DimOp dim) { known |= dim.getSize() == name.getValue(); });
      if (!known)
        return fail("names '") << name.getValue() << "', which is not a size of the kernel";
    }
    if (b.getExact() && !isa<SoftmaxOp, OnlineSoftmaxOp>(op))
      return fail("'exact' applies to softmax bounds only");
    for (auto [side, map] : {std::pair{"lower", b.getLower()}, std::pair{"upper", b.getUpper()}}) {
      if (!map)
        continue;
      AffineMap mv = map.getValue();
      if (mv.getNumDims() != numDims)
        return fail("'") << side << "' must map the " << numDims << " indices";
      for (int64_t ax : axes)
        if (mv.isFunctionOfDim(ax))
          return fail("'") << side << "' may not depend on a softmax axis";
    }
  }
  return success();
}
