// AST of the attnc language: kernels of index-notation definitions, reductions and softmax.
#pragma once

#include "attnc/dsl/Diagnostics.h"
#include "attnc/tensor_type.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace attnc::dsl {

// A tensor's element type is the shared one (attnc/tensor_type.h), which every later stage reads.
using ElemType = attnc::DType;
const char *elemTypeName(ElemType t);

// Scalar types of expressions. Index arithmetic is Int; tensor reads of f32 tensors are Float.
enum class ScalarType { Unknown, Int, Float, Bool };
const char *scalarTypeName(ScalarType t);

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

namespace sema {
struct PendingExpansion;
}

// After Sema, calls of `def` functions are expanded away: a checked kernel contains only these
// kinds, Call naming a builtin, and Let for the arguments and bindings of expanded functions.
// ListRead is `name(e)` of a constant list (Sema makes it from a Read): element `e`, args[0], of
// `listValues`; it carries the values so that no later stage needs the kernel's constants.
enum class ExprKind { Number, Ident, Read, Call, Unary, Binary, Reduce, Softmax, Let, ListRead };

// What an identifier resolved to, filled by Sema.
enum class IdentKind { Unresolved, Index, Size, Const, Let };

// Mean is the sum divided by the number of points of the reduction domain (always a float).
enum class ReduceKind { Sum, Max, Min, Mean };
const char *reduceKindName(ReduceKind k);

// A range `lo..hi` (half-open). Both ends are integer expressions over sizes and constants.
struct Range {
  ExprPtr lo, hi;
  Range clone() const;
};

// An index variable introduced by a definition's left-hand side or by a reduction/softmax.
struct IndexDecl {
  std::string name;
  Loc loc;
  std::optional<Range> range; // explicit `i in lo..hi`, or inferred by Sema
  std::string rangeOrigin; // where an inferred range came from, for diagnostics ("k dimension 2")
  Loc rangeOriginLoc;
  IndexDecl clone() const;
};

struct TensorDecl;

struct Expr {
  ExprKind kind;
  Loc loc;
  ScalarType type = ScalarType::Unknown; // set by Sema
  int depth = 1;                         // height of this subtree, bounded by the parser

  // Number
  double number = 0;
  bool isIntLiteral = false;
  // Ident / Read / Call: the name; Unary/Binary: the operator spelling; Reduce: unused.
  std::string name;
  IdentKind identKind = IdentKind::Unresolved;
  const IndexDecl *index = nullptr;   // Ident of kind Index
  const TensorDecl *tensor = nullptr; // Read
  double constValue = 0;              // Ident of kind Const
  // An int expression of numbers and integer constants only (set by Sema): its value, which Sema
  // checked fits in 32 bits, as it must at run time.
  bool hasIntValue = false;
  int64_t intValue = 0;
  const Expr *let = nullptr; // Ident of kind Let: the Let node that binds it
  // Read: what an out-of-range subscript means: "" (a program error), "zero" (reads 0), "clamp"
  // (reads the nearest element) or "exclude" (in a softmax, masks the point out; reads 0).
  std::string boundary;
  // Read / Call / Unary / Binary / ListRead operands
  std::vector<ExprPtr> args;
  // ListRead: the list's elements (its kind is `type`), after -D.
  std::vector<double> listValues;
  // Reduce / Softmax
  ReduceKind reduceKind = ReduceKind::Sum;
  std::vector<IndexDecl> reduceIndices; // Reduce: the bound indices
  std::vector<std::string> softmaxAxes; // Softmax: names of free indices
  std::vector<Loc> softmaxAxisLocs;
  ExprPtr where; // Softmax: optional mask predicate
  // Softmax: optional sink, an extra logit per row that joins the normalisation but has no entry
  // of its own (gpt-oss's attention sinks); it may not use the softmax's axes.
  ExprPtr sink;
  ExprPtr body; // Reduce / Softmax / Let
  // Let: `let name = args[0] in body`; the value is computed once per evaluation of the Let.

  // Sema's, while it analyses the kernel (and meaningless after it): a call of a `def` function
  // carries the expansion that Sema's expansion stage prepared for it, which the checker puts in
  // its place; in such an expansion, a copy of an argument points to the argument, copied again
  // once it is checked. Neither is left in a kernel that Sema accepts.
  sema::PendingExpansion *expansion = nullptr;
  const Expr *copyOf = nullptr;

  Expr(ExprKind k, Loc l) : kind(k), loc(l) {}
  // A deep copy. Identifiers that Sema resolved to an index or a `let` inside the copied tree
  // point into the copy; `expansion` and `copyOf` are shared with the original.
  ExprPtr clone() const;
};

// One factor of a product dimension: a size symbol or a positive integer literal.
struct DimFactor {
  std::string symbol; // empty for a literal
  long long value = 0;
  Loc loc;
  std::string str() const { return symbol.empty() ? std::to_string(value) : symbol; }
};

// One dimension of a declared tensor type: a size symbol, a positive integer literal or, in an
// output only, a product of these (`M * D`). Products exist because the sizes are bound by the
// inputs: an output such as Deformable DETR's [B, Q, M*D] can only be described from them.
struct DimSpec {
  std::string symbol;             // a single size symbol; empty for a literal or a product
  long long value = 0;            // a literal; for a product of literals only, their product
  std::vector<DimFactor> factors; // a product: two or more factors in source order; else empty
  Loc loc;
  bool isProduct() const { return !factors.empty(); }
  // Whether the extent is known without sizes (a literal, or a product of literals only).
  bool isStatic() const {
    if (!isProduct())
      return symbol.empty();
    for (const DimFactor &f : factors)
      if (!f.symbol.empty())
        return false;
    return true;
  }
  // The canonical spelling, used by every stage after the parser (the AST printer, `attn.dims`,
  // runtime descriptors and their messages): "N", "64", or the factors in source order joined by
  // '*' without blanks, "M*D" or "2*C".
  std::string str() const { return dim().str(); }
  // The dimension as the shared type (attnc/tensor_type.h) that MLIRGen puts in `attn.dims`.
  attnc::Dim dim() const {
    if (!isProduct())
      return symbol.empty() ? attnc::Dim::of_literal(value) : attnc::Dim::of_symbol(symbol);
    attnc::Dim d;
    for (const DimFactor &f : factors)
      d.factors.push_back({f.symbol, f.value});
    return d;
  }
};

enum class TensorRole { Input, Output, Local };

struct TensorDecl {
  std::string name;
  Loc loc;
  TensorRole role = TensorRole::Input;
  ElemType elemType = ElemType::F32;
  std::vector<DimSpec> dims; // declared type (inputs, outputs)
  // Filled by Sema for every tensor: each dimension's extent as an integer expression.
  std::vector<ExprPtr> extents;
  struct Definition *def = nullptr; // the definition that computes it (outputs, locals)
  size_t rank() const { return dims.empty() ? extents.size() : dims.size(); }
};

struct Definition {
  std::string name;
  Loc loc;
  std::vector<IndexDecl> indices;
  ExprPtr rhs;
  TensorDecl *tensor = nullptr; // the output or local tensor it defines (Sema)
};

// `const name = value` or a constant list `const name = [e0, e1, ...]` (`elements`, non-empty;
// `value` is then null). A list's kind is int if every element is; its values are `list`.
struct ConstDecl {
  std::string name;
  Loc loc;
  ExprPtr value;
  std::vector<ExprPtr> elements;
  bool isList = false;
  double folded = 0;
  std::vector<double> list;
  bool isInt = true;
  bool overridden = false; // set by -D
};

struct Kernel {
  std::string name;
  Loc loc;     // the `kernel` keyword
  Loc nameLoc; // the kernel's name
  std::vector<std::unique_ptr<TensorDecl>> inputs, outputs;
  std::vector<ConstDecl> consts;
  // `require cond, "message"`: a condition on sizes and constants. One that uses only constants
  // is checked by Sema (isStatic); one that uses sizes is checked when the kernel is called.
  struct Requirement {
    Loc loc;
    ExprPtr cond;
    std::string message;
    bool isStatic = false;
    bool isData = false; // reads input values (checked at call time, before any definition)
  };
  std::vector<Requirement> requirements;
  // What a failed requirement reports: "requirement failed: <message or condition>".
  static std::string failure(const Requirement &r);
  // The same, prefixed with "FILE:LINE:COL: " for checks made when the kernel is called.
  static std::string failureAt(const Requirement &r);
  std::vector<std::unique_ptr<Definition>> defs;
  std::vector<std::unique_ptr<TensorDecl>> locals; // tensors of non-output definitions (Sema)
  // Size symbols in order of first appearance in the inputs, with where they are bound.
  struct SizeBinding {
    std::string name;
    const TensorDecl *tensor;
    int dim;
  };
  std::vector<SizeBinding> sizes;
};

// `def name(params) = body`: a reusable expression, expanded at each call by Sema. A parameter
// used as `p(...)` in the body is a tensor parameter (its argument is a tensor or a partial read
// such as `x(b, i)`, whose indices come first); any other parameter is a scalar.
struct FunctionDef {
  std::string name;
  Loc loc;
  std::vector<std::string> params;
  std::vector<Loc> paramLocs;
  ExprPtr body;
};

// `import nn` or `import "path/file.attn"`.
struct Import {
  std::string spec;
  bool quoted = false;
  Loc loc;
};

struct Module {
  std::vector<std::unique_ptr<Kernel>> kernels;
  std::vector<std::unique_ptr<FunctionDef>> functions; // of this file and every imported file
  std::vector<Import> imports;                         // of this file only
  // Imported source files, kept alive for the locations that point into them.
  std::vector<std::shared_ptr<const SourceFile>> files;
};

// Prints the (annotated, once Sema ran) AST in an indented, FileCheck-friendly form.
void printModule(std::ostream &os, const Module &m);
std::string exprToString(const Expr &e);

} // namespace attnc::dsl
