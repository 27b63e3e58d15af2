// Custom assembly, verifiers and asm names of the attn operations.
#include "attnc/Dialect/AttnOps.h"

#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/FunctionImplementation.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace attnc::attn;

//===----------------------------------------------------------------------===//
// KernelOp
//===----------------------------------------------------------------------===//

void KernelOp::build(OpBuilder &builder, OperationState &state, StringRef name, FunctionType type) {
  state.addAttribute(SymbolTable::getSymbolAttrName(), builder.getStringAttr(name));
  state.addAttribute(getFunctionTypeAttrName(state.name), TypeAttr::get(type));
  state.addRegion();
}

ParseResult KernelOp::parse(OpAsmParser &parser, OperationState &result) {
  auto buildFuncType = [](Builder &builder, ArrayRef<Type> argTypes, ArrayRef<Type> results,
                          function_interface_impl::VariadicFlag,
                          std::string &) { return builder.getFunctionType(argTypes, results); };
  return function_interface_impl::parseFunctionOp(
      parser, result, /*allowVariadic=*/false, getFunctionTypeAttrName(result.name), buildFuncType,
      getArgAttrsAttrName(result.name), getResAttrsAttrName(result.name));
}

void KernelOp::print(OpAsmPrinter &p) {
  function_interface_impl::printFunctionOp(p, *this, /*isVariadic=*/false,
                                           getFunctionTypeAttrName(), getArgAttrsAttrName(),
                                           getResAttrsAttrName());
}

static StringRef nameAttrOf(DictionaryAttr dict) {
  if (!dict)
    return {};
  if (auto s = dict.getAs<StringAttr>("attn.name"))
    return s.getValue();
  return {};
}

static DimsAttr dimsAttrOf(DictionaryAttr dict) {
  return dict ? dict.getAs<DimsAttr>("attn.dims") : DimsAttr();
}

static attnc::TensorType tensorTypeOf(Type t, DictionaryAttr dict) {
  attnc::TensorType tt;
  auto ranked = cast<RankedTensorType>(t);
  // The verifier accepts f32 and i32 elements only, so dtypeOf cannot fail here.
  (void)dtypeOf(ranked.getElementType(), &tt.dtype);
  if (DimsAttr dims = dimsAttrOf(dict))
    for (attnc::Dim &d : dims.getDimList())
      tt.dims.push_back(std::move(d));
  return tt;
}

StringRef KernelOp::getInputName(unsigned i) { return nameAttrOf(getArgAttrDict(i)); }
StringRef KernelOp::getOutputName(unsigned i) { return nameAttrOf(getResultAttrDict(i)); }
attnc::TensorType KernelOp::getInputType(unsigned i) {
  return tensorTypeOf(getArgumentTypes()[i], getArgAttrDict(i));
}
attnc::TensorType KernelOp::getOutputType(unsigned i) {
  return tensorTypeOf(getResultTypes()[i], getResultAttrDict(i));
}

void KernelOp::getAsmBlockArgumentNames(Region &region, OpAsmSetValueNameFn setNameFn) {
  if (region.empty())
    return;
  for (auto [i, arg] : llvm::enumerate(region.front().getArguments())) {
    StringRef name = getInputName(i);
    if (!name.empty())
      setNameFn(arg, name);
  }
}

LogicalResult KernelOp::verify() {
  Block &entry = getBody().front();
  if (entry.getNumArguments() != getArgumentTypes().size())
    return emitOpError("entry block has ")
           << entry.getNumArguments() << " arguments but the signature has "
           << getArgumentTypes().size();
  auto checkDims = [&](Type t, DictionaryAttr dict, const char *what, unsigned i) -> LogicalResult {
    auto tt = cast<RankedTensorType>(t);
    if (nameAttrOf(dict).empty())
      return emitOpError() << what << " " << i << " has no 'attn.name'";
    attnc::DType dtype;
    if (!dtypeOf(tt.getElementType(), &dtype))
      return emitOpError() << what << " '" << nameAttrOf(dict) << "' has element type "
                           << tt.getElementType() << ", which is no kernel tensor type";
    if (dict && dict.get("attn.dims") && !dimsAttrOf(dict))
      return emitOpError() << what << " '" << nameAttrOf(dict)
                           << "' needs an #attn.dims as 'attn.dims'";
    SmallVector<attnc::Dim> dims;
    if (DimsAttr d = dimsAttrOf(dict))
      dims = d.getDimList();
    if ((int64_t)dims.size() != tt.getRank())
      return emitOpError() << what << " '" << nameAttrOf(dict) << "' has rank " << tt.getRank()
                           << " but " << dims.size() << " 'attn.dims' entries";
    for (auto [d, dim] : llvm::enumerate(dims)) {
      // The runtime binds sizes from input dimensions, which a product cannot give.
      if (dim.product() && StringRef(what) == "input")
        return emitOpError() << "input '" << nameAttrOf(dict) << "' dimension " << d << " ("
                             << dim.str() << ") is a product; only outputs may have them";
      int64_t extent = tt.getDimSize(d);
      if (dim.is_static() ? extent != dim.static_value() : extent != ShapedType::kDynamic)
        return emitOpError() << what << " '" << nameAttrOf(dict) << "' dimension " << d << " ("
                             << dim.str() << ") does not match its tensor type's extent";
    }
    return success();
  };
  for (auto [i, t] : llvm::enumerate(getArgumentTypes())) {
    if (!isa<RankedTensorType>(t))
      return emitOpError("input ") << i << " is not a ranked tensor";
    if (failed(checkDims(t, getArgAttrDict(i), "input", i)))
      return failure();
  }
  for (auto [i, t] : llvm::enumerate(getResultTypes())) {
    if (!isa<RankedTensorType>(t))
      return emitOpError("output ") << i << " is not a ranked tensor";
    if (failed(checkDims(t, getResultAttrDict(i), "output", i)))
      return failure();
  }
  auto ret = entry.mightHaveTerminator() ? dyn_cast<ReturnOp>(entry.getTerminator()) : ReturnOp();
  if (!ret)
    return emitOpError("body must end with attn.return");
  // Definitions compute in f32; a bf16 or f16 output is that f32 result rounded where it is
  // stored, so it returns a tensor of the output's shape with the compute type.
  auto computed = [](Type t) -> Type {
    auto tt = cast<RankedTensorType>(t);
    return RankedTensorType::get(tt.getShape(), computeType(tt.getElementType()));
  };
  if (ret.getValues().size() != getResultTypes().size())
    return ret.emitOpError("returns types that do not match the kernel's results");
  for (auto [v, t] : llvm::zip(ret.getValues(), getResultTypes()))
    if (v.getType() != computed(t))
      return ret.emitOpError("returns types that do not match the kernel's results");
  return success();
}

//===----------------------------------------------------------------------===//
// DimOp, ReadOp
//===----------------------------------------------------------------------===//

void DimOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) { setNameFn(getResult(), getSize()); }

LogicalResult DimOp::verify() {
  int64_t rank = getTensor().getType().getRank();
  int64_t index = (int64_t)getIndex(); // the I64Attr getter is unsigned
  if (index < 0 || index >= rank)
    return emitOpError("dimension ") << index << " is out of range for a tensor of rank " << rank;
  if (getSize().empty())
    return emitOpError("needs a size name");
  return success();
}

LogicalResult ReadOp::verify() {
  int64_t rank = getTensor().getType().getRank();
  if ((int64_t)getIndices().size() != rank)
    return emitOpError("reads a tensor of rank ")
           << rank << " with " << getIndices().size() << " indices";
  StringRef b = getBoundary();
  if (b != "none" && b != "zero" && b != "clamp")
    return emitOpError("unknown boundary mode '") << b << "'";
  return success();
}

//===----------------------------------------------------------------------===//
// DefineOp, SoftmaxOp, ReduceOp
//===----------------------------------------------------------------------===//

static void nameBlockArgs(Region &region, ArrayAttr names, OpAsmSetValueNameFn setNameFn) {
  if (region.empty())
    return;
  for (auto [arg, name] : llvm::zip(region.front().getArguments(), names))
    if (auto s = dyn_cast<StringAttr>(name))
      setNameFn(arg, s.getValue());
}

// Shared checks: one index block argument per extent, named by `indices`, and a terminator
// yielding `numYields` values.
static LogicalResult verifyIndexRegion(Operation *op, Region &body, size_t numExtents,
                                       ArrayAttr names) {
  Block &block = body.front();
  if (block.getNumArguments() != numExtents)
    return op->emitOpError("has ") << numExtents << " extents but its region has "
                                   << block.getNumArguments() << " index arguments";
  for (BlockArgument a : block.getArguments())
    if (!a.getType().isIndex())
      return op->emitOpError("region arguments must be of type index");
  if (names.size() != numExtents)
    return op->emitOpError("has ")
           << numExtents << " extents but " << names.size() << " index names";
  return success();
}

static LogicalResult verifyDefinition(Operation *op, Region &body, size_t numExtents,
                                      ArrayAttr names, RankedTensorType type) {
  if (type.getRank() != (int64_t)numExtents)
    return op->emitOpError("result has rank ")
           << type.getRank() << " but " << numExtents << " extents are given";
  if (failed(verifyIndexRegion(op, body, numExtents, names)))
    return failure();
  auto yield = cast<YieldOp>(body.front().getTerminator());
  if (yield.getValues().empty())
    return yield.emitOpError("must yield the element value");
  if (yield.getValues()[0].getType() != type.getElementType())
    return yield.emitOpError("yields ")
           << yield.getValues()[0].getType() << " but the tensor holds " << type.getElementType();
  return success();
}

void DefineOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  setNameFn(getResult(), getName());
}
void DefineOp::getAsmBlockArgumentNames(Region &region, OpAsmSetValueNameFn setNameFn) {
  nameBlockArgs(region, getIndices(), setNameFn);
}
LogicalResult DefineOp::verify() {
  if (failed(verifyDefinition(*this, getBody(), getExtents().size(), getIndices(),
                              getResult().getType())))
    return failure();
  auto yield = cast<YieldOp>(getBody().front().getTerminator());
  if (yield.getValues().size() != 1)
    return yield.emitOpError("must yield exactly one value in attn.define");
  return success();
}

// A sink region: the softmax's indices as arguments, of which the key `axes` are unused (the sink
// is one logit per row), yielding one f32.
static LogicalResult verifySink(Operation *op, Region &sink, size_t numIndices,
                                ArrayRef<int64_t> axes, ArrayAttr names) {
  if (sink.empty())
    return success();
  Block &block = sink.front();
  if (block.getNumArguments() != numIndices)
    return op->emitOpError("sink region has ")
           << block.getNumArguments() << " arguments but the softmax has " << numIndices
           << " indices";
  for (BlockArgument a : block.getArguments())
    if (!a.getType().isIndex())
      return op->emitOpError("region arguments must be of type index");
  for (int64_t a : axes)
    if (a >= 0 && a < (int64_t)numIndices && !block.getArgument(a).use_empty()) {
      auto name = a < (int64_t)names.size() ? dyn_cast<StringAttr>(names[a]) : StringAttr();
      return op->emitOpError("sink uses the softmax axis ")
             << (name ? "'" + name.getValue().str() + "'" : std::to_string(a))
             << "; a sink is one value per row";
    }
  auto y = cast<YieldOp>(block.getTerminator());
  if (y.getValues().size() != 1 || !y.getValues()[0].getType().isF32())
    return y.emitOpError("in the sink region yields one f32 value");
  return success();
}

void SoftmaxOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  setNameFn(getResult(), getName());
}
void SoftmaxOp::getAsmBlockArgumentNames(Region &region, OpAsmSetValueNameFn setNameFn) {
  nameBlockArgs(region, getIndices(), setNameFn);
}
LogicalResult SoftmaxOp::verify() {
  if (failed(verifyDefinition(*this, getBody(), getExtents().size(), getIndices(),
                              getResult().getType())))
    return failure();
  if (!getResult().getType().getElementType().isF32())
    return emitOpError("result must hold f32");
  auto yield = cast<YieldOp>(getBody().front().getTerminator());
  if (yield.getValues().size() > 2 ||
      (yield.getValues().size() == 2 && !yield.getValues()[1].getType().isInteger(1)))
    return yield.emitOpError("in attn.softmax yields the score and optionally an i1 mask");
  ArrayRef<int64_t> axes = getAxes();
  if (axes.empty())
    return emitOpError("needs at least one axis");
  llvm::SmallDenseSet<int64_t> seen;
  for (int64_t a : axes) {
    if (a < 0 || a >= (int64_t)getExtents().size())
      return emitOpError("axis ") << a << " is out of range for rank " << getExtents().size();
    if (!seen.insert(a).second)
      return emitOpError("axis ") << a << " appears twice";
  }
  return verifySink(*this, getSink(), getExtents().size(), axes, getIndices());
}

void OnlineSoftmaxOp::getAsmResultNames(OpAsmSetValueNameFn setNameFn) {
  setNameFn(getResult(), getName());
}
void OnlineSoftmaxOp::getAsmBlockArgumentNames(Region &region, OpAsmSetValueNameFn setNameFn) {
  if (&region == &getScore() || &region == &getSink())
    return nameBlockArgs(region, getScoreIndices(), setNameFn);
  nameBlockArgs(region, getIndices(), setNameFn);
  unsigned key = getKeyPosition();
  if (!region.empty() && region.front().getNumArguments() == getIndices().size() + 1 &&
      key < getScoreIndices().size())
    setNameFn(region.front().getArguments().back(),
              cast<StringAttr>(getScoreIndices()[key]).getValue());
}
bool OnlineSoftmaxOp::hasRangedKeys() {
  auto keyMask = (*this)->getAttrOfType<KeyMaskAttr>(kKeyMaskAttr);
  return ((*this)->hasAttr(kGroupKeysAttr) || (keyMask && keyMask.getKeyOnly())) &&
         !(*this)->hasAttr(kBoundsAttr);
}

unsigned OnlineSoftmaxOp::getKeyPosition() {
  ArrayRef<int64_t> rows = getRows();
  return std::find(rows.begin(), rows.end(), -1) - rows.begin();
}
int OnlineSoftmaxOp::getQueryPosition() {
  ArrayRef<int64_t> rows = getRows();
  for (int k = (int)rows.size() - 1; k >= 0; --k)
    if (rows[k] >= 0)
      return k;
  return -1;
}
LogicalResult OnlineSoftmaxOp::verify() {
  RankedTensorType type = getResult().getType();
  if (type.getRank() != (int64_t)getExtents().size())
    return emitOpError("result has rank ")
           << type.getRank() << " but " << getExtents().size() << " extents are given";
  if (!type.getElementType().isF32())
    return emitOpError("result must hold f32");
  if (getIndices().size() != getExtents().size())
    return emitOpError("has ") << getExtents().size() << " extents but " << getIndices().size()
                               << " index names";
  if (getTile() <= 0)
    return emitOpError("tile must be positive, not ") << getTile();
  if (std::optional<uint64_t> w = getWholeTile()) {
    if ((int64_t)*w < getTile() || (int64_t)*w % getTile() != 0)
      return emitOpError("whole_tile must be a multiple of the tile, not ") << *w;
    if (hasMask() && !hasRangedKeys())
      return emitOpError("whole_tile needs a score without a mask, or a mask whose visible keys "
                         "are taken per query group or per key (attn.group_keys or a key_only "
                         "attn.key_mask, no attn.bounds)");
  }
  ArrayRef<int64_t> rows = getRows();
  if (rows.size() != getScoreIndices().size())
    return emitOpError("has ") << rows.size() << " row entries but " << getScoreIndices().size()
                               << " score indices";
  if (std::count(rows.begin(), rows.end(), -1) != 1)
    return emitOpError("rows must mark exactly one key index with -1");
  llvm::SmallDenseSet<int64_t> seen;
  for (int64_t r : rows) {
    if (r == -1)
      continue;
    if (r < 0 || r >= type.getRank())
      return emitOpError("row entry ") << r << " is out of range for rank " << type.getRank();
    if (!seen.insert(r).second)
      return emitOpError("row entry ") << r << " appears twice";
  }
  Block &score = getScore().front();
  if (score.getNumArguments() != rows.size())
    return emitOpError("score region has ")
           << score.getNumArguments() << " arguments but " << rows.size() << " score indices";
  Block &value = getValue().front();
  if (value.getNumArguments() != getExtents().size() + 1)
    return emitOpError("value region needs ")
           << getExtents().size() + 1 << " arguments (the indices, then the key), not "
           << value.getNumArguments();
  for (Block *b : {&score, &value})
    for (BlockArgument a : b->getArguments())
      if (!a.getType().isIndex())
        return emitOpError("region arguments must be of type index");
  auto sy = cast<YieldOp>(score.getTerminator());
  if (sy.getValues().empty() || sy.getValues().size() > 2 || !sy.getValues()[0].getType().isF32() ||
      (sy.getValues().size() == 2 && !sy.getValues()[1].getType().isInteger(1)))
    return sy.emitOpError("in the score region yields an f32 score and optionally an i1 mask");
  auto vy = cast<YieldOp>(value.getTerminator());
  if (vy.getValues().size() != 1 || !vy.getValues()[0].getType().isF32())
    return vy.emitOpError("in the value region yields one f32 value");
  if (getUnnormalized() && hasSink())
    return emitOpError(
        "is unnormalized: a sink joins a softmax's normalisation, and there is none");
  int64_t key = getKeyPosition();
  return verifySink(*this, getSink(), rows.size(), ArrayRef<int64_t>(key), getScoreIndices());
}

void ReduceOp::getAsmBlockArgumentNames(Region &region, OpAsmSetValueNameFn setNameFn) {
  nameBlockArgs(region, getIndices(), setNameFn);
}
LogicalResult ReduceOp::verify() {
  StringRef k = getKind();
  if (k != "sum" && k != "max" && k != "min")
    return emitOpError("unknown reduction kind '") << k << "'";
  if (getExtents().empty())
    return emitOpError("needs at least one reduction index");
  if (failed(verifyIndexRegion(*this, getBody(), getExtents().size(), getIndices())))
    return failure();
  auto yield = cast<YieldOp>(getBody().front().getTerminator());
  if (yield.getValues().size() != 1 || yield.getValues()[0].getType() != getType())
    return yield.emitOpError("must yield one value of the reduction's type ") << getType();
  return success();
}

#define GET_OP_CLASSES
#include "attnc/Dialect/AttnOps.cpp.inc"
