// fp64 reference interpreter: each definition is materialised over its whole index space with
// plain loops. Expressions are first translated to a small tree of Nodes (sizes and constants
// folded in, index variables and let bindings resolved to frame slots), then evaluated
// recursively in double (floats) or int64 (ints, with floor division and modulo).
#include "attnc/dsl/Interpreter.h"
#include "attnc/float16.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>

namespace attnc::dsl {

size_t RefTensor::numel() const {
  size_t n = 1;
  for (int64_t d : shape)
    n *= d > 0 ? (size_t)d : 0;
  return n;
}

namespace {

// The largest tensor (in elements) the interpreter materialises: 2 GiB of doubles.
constexpr int64_t kMaxElements = int64_t(1) << 28;

struct Failure {
  std::string message;
};
[[noreturn]] void fail(std::string msg) { throw Failure{std::move(msg)}; }
[[noreturn]] void internal(const std::string &msg) {
  fail("internal error in the reference interpreter: " + msg);
}

std::string where(Loc l) {
  if (!l.valid())
    return "";
  std::string s = " at ";
  if (l.file)
    s += l.file->path + ":";
  return s + std::to_string(l.line) + ":" + std::to_string(l.col);
}

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string declString(const TensorDecl &t) {
  std::string s = std::string(elemTypeName(t.elemType)) + "[";
  for (size_t i = 0; i < t.dims.size(); ++i)
    s += (i ? ", " : "") + t.dims[i].str();
  return s + "]";
}

// Integer arithmetic wraps on overflow (the language leaves overflow undefined; the reference
// must not invoke undefined behaviour).
int64_t wadd(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
int64_t wsub(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }
int64_t wmul(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }
int64_t wneg(int64_t a) { return (int64_t)(0 - (uint64_t)a); }

// Rounds toward negative infinity; b != 0.
int64_t floorDiv(int64_t a, int64_t b) {
  if (b == -1)
    return wneg(a);
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0)))
    --q;
  return q;
}
// Takes the divisor's sign; b != 0.
int64_t floorMod(int64_t a, int64_t b) {
  if (b == -1)
    return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0)))
    r += b;
  return r;
}

// NaN-propagating min and max, as arith.minimumf/maximumf.
double fmin(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b); }
double fmax(double a, double b) { return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); }

enum class Op {
  IFloor,
  IntConst,
  FloatConst,
  Slot,
  Read,
  Neg,
  Not,
  Add,
  Sub,
  Mul,
  Div,
  Mod,
  Cmp,
  And,
  Or,
  Math,
  Pow,
  Min,
  Max,
  Abs,
  Select,
  Reduce,
  Let,
  ListRead
};
enum class Fn {
  Exp,
  Log,
  Sqrt,
  Rsqrt,
  Sin,
  Cos,
  Tanh,
  Erf,
  Floor,
  Sigmoid,
  Silu,
  Elu,
  Softplus,
  Relu,
  ToFloat, // f32(x): the interpreter's doubles need no conversion
  ToBF16,  // bf16(x), f16(x): rounded to that type's precision
  ToF16
};
enum class Cmp { Lt, Le, Gt, Ge, Eq, Ne };

struct Node {
  Op op = Op::IntConst;
  ScalarType type = ScalarType::Int;
  int64_t ival = 0;
  double fval = 0;
  int slot = -1;   // Slot, Let: the frame slot
  int tensor = -1; // Read
  enum class Boundary { None, Zero, Clamp, Exclude } boundary = Boundary::None; // Read
  int sub = 0;            // Math: Fn; Cmp: Cmp; Reduce: ReduceKind
  bool floatCmp = false;  // Cmp: compare as floats
  std::vector<int> slots; // Reduce: one per index
  // Operands. Reduce: body, then lo and hi of each index. Let: value, body. Read: subscripts.
  std::vector<Node> kids;
  const Expr *src = nullptr;
};

// One frame slot: an index value or a let-bound value (of the let value's type).
struct Slot {
  int64_t i = 0;
  double f = 0;
  bool b = false;
  bool z = false; // f is a structural zero (see evalFZ)
};

struct Storage {
  std::string name;
  std::vector<int64_t> shape, strides;
  const double *data = nullptr;
  std::vector<double> own; // outputs and locals
  bool isInt = false;
  std::vector<uint8_t> masked; // a softmax's masked points (structural zeros); empty if none
};

ScalarType promote(ScalarType a, ScalarType b) {
  return a == ScalarType::Float || b == ScalarType::Float ? ScalarType::Float : ScalarType::Int;
}

class Interp {
public:
  Interp(const Kernel &k, const std::vector<RefTensor> &inputs) : k_(k), inputs_(inputs) {}

  void run(std::vector<RefTensor> *outputs) {
    validateInputs();
    for (size_t i = 0; i < k_.inputs.size(); ++i) {
      Storage s;
      s.name = k_.inputs[i]->name;
      s.shape = inputs_[i].shape;
      s.strides = stridesOf(s.shape);
      s.data = inputs_[i].data.data();
      s.isInt = inputs_[i].isInt;
      // A bf16/f16 input holds what a compiled kernel could be given: values of that type.
      if (DType st = k_.inputs[i]->elemType; st == DType::BF16 || st == DType::F16) {
        s.own.reserve(inputs_[i].data.size());
        for (double v : inputs_[i].data)
          s.own.push_back(round_to_dtype(v, st));
        s.data = s.own.data();
      }
      addTensor(k_.inputs[i].get(), std::move(s));
    }
    // Requirements on the sizes, in order, before anything is computed (as compiled kernels do).
    for (const auto &r : k_.requirements) {
      defName_ = "require";
      Node c = compile(*r.cond);
      requireType(c, ScalarType::Bool, "requirement");
      if (!evalB(c))
        fail(Kernel::failureAt(r));
    }
    for (const auto &def : k_.defs)
      runDefinition(*def);
    outputs->clear();
    for (const auto &o : k_.outputs) {
      auto it = tensorIds_.find(o.get());
      if (it == tensorIds_.end())
        internal("output '" + o->name + "' is never defined");
      Storage &s = tensors_[it->second];
      RefTensor t;
      t.shape = s.shape;
      t.data = std::move(s.own);
      t.isInt = s.isInt;
      // Computed in fp64 and stored once in the output's type, as compiled kernels store their
      // f32 results (a later definition reading the output sees the unrounded value in both).
      if (o->elemType == DType::BF16 || o->elemType == DType::F16)
        for (double &v : t.data)
          v = round_to_dtype(v, o->elemType);
      outputs->push_back(std::move(t));
    }
  }

private:
  const Kernel &k_;
  const std::vector<RefTensor> &inputs_;
  std::vector<Storage> tensors_;
  std::map<const TensorDecl *, int> tensorIds_;
  std::map<std::string, int64_t> sizes_;
  std::unordered_map<const IndexDecl *, int> indexSlots_;
  std::unordered_map<const Expr *, int> letSlots_;
  std::unordered_map<const Expr *, ScalarType> letTypes_;
  std::vector<Slot> frame_;
  std::string defName_;
  bool excluded_ = false; // an `.exclude` read fell outside its tensor (masks the softmax point)

  static std::vector<int64_t> stridesOf(const std::vector<int64_t> &shape) {
    std::vector<int64_t> st(shape.size());
    int64_t s = 1;
    for (size_t d = shape.size(); d-- > 0;) {
      st[d] = s;
      // Saturates: an input with a zero dimension may have others whose product passes int64
      // (validateInputs bounds every tensor that holds elements), and no read of it is in range.
      if (__builtin_mul_overflow(s, std::max<int64_t>(shape[d], 1), &s))
        s = std::numeric_limits<int64_t>::max();
    }
    return st;
  }

  void addTensor(const TensorDecl *t, Storage s) {
    tensorIds_[t] = (int)tensors_.size();
    tensors_.push_back(std::move(s));
  }

  int newSlot() {
    frame_.emplace_back();
    return (int)frame_.size() - 1;
  }

  // --- inputs and sizes ----------------------------------------------------------------------
  void validateInputs() {
    const auto &decls = k_.inputs;
    if (inputs_.size() != decls.size())
      fail("kernel '" + k_.name + "' takes " + std::to_string(decls.size()) + " input" +
           (decls.size() == 1 ? "" : "s") + ", got " + std::to_string(inputs_.size()));
    for (size_t i = 0; i < decls.size(); ++i) {
      const TensorDecl &d = *decls[i];
      const RefTensor &t = inputs_[i];
      std::string in = "input '" + d.name + "'";
      bool wantInt = d.elemType == ElemType::I32;
      if (t.isInt != wantInt)
        fail(in + " is " + (t.isInt ? "i32" : "f32") + ", but the kernel declares " +
             declString(d));
      if (t.shape.size() != d.dims.size())
        fail(in + " has rank " + std::to_string(t.shape.size()) + " (shape " +
             shapeString(t.shape) + "), but the kernel declares " + declString(d) + " (rank " +
             std::to_string(d.dims.size()) + ")");
      int64_t n = 1;
      for (size_t j = 0; j < t.shape.size(); ++j) {
        if (t.shape[j] < 0)
          fail(in + " dimension " + std::to_string(j) + " is negative (" +
               std::to_string(t.shape[j]) + ")");
        n = t.shape[j] == 0 || n == 0 ? 0 : (n > kMaxElements ? n : n * t.shape[j]);
      }
      if (n > kMaxElements || (int64_t)t.data.size() != n)
        fail(in + " holds " + std::to_string(t.data.size()) + " values, but its shape " +
             shapeString(t.shape) + " needs " +
             (n > kMaxElements ? "more than " + std::to_string(kMaxElements) : std::to_string(n)));
      if (t.isInt)
        for (size_t j = 0; j < t.data.size(); ++j) {
          double v = t.data[j];
          if (!(v == std::floor(v)) || v < -2147483648.0 || v > 2147483647.0)
            fail(in + " is i32, but its element " + std::to_string(j) + " is " + std::to_string(v));
        }
      for (size_t j = 0; j < d.dims.size(); ++j)
        if (d.dims[j].symbol.empty() && t.shape[j] != d.dims[j].value)
          fail(in + " dimension " + std::to_string(j) + " is " + std::to_string(t.shape[j]) +
               ", but the kernel declares " + std::to_string(d.dims[j].value) + " (" +
               declString(d) + ")");
    }
    // Sizes are bound by the first input dimension that names them (Kernel::sizes); every other
    // dimension with the same name must agree.
    struct Bound {
      int64_t value;
      std::string from;
    };
    std::map<std::string, Bound> bound;
    auto inputIndex = [&](const TensorDecl *t) -> int {
      for (size_t i = 0; i < decls.size(); ++i)
        if (decls[i].get() == t)
          return (int)i;
      return -1;
    };
    for (const auto &s : k_.sizes) {
      int i = inputIndex(s.tensor);
      if (i < 0 || s.dim < 0 || (size_t)s.dim >= inputs_[i].shape.size())
        internal("size '" + s.name + "' has no binding input");
      bound[s.name] = {inputs_[i].shape[s.dim],
                       "input '" + s.tensor->name + "' dimension " + std::to_string(s.dim)};
    }
    for (size_t i = 0; i < decls.size(); ++i)
      for (size_t j = 0; j < decls[i]->dims.size(); ++j) {
        const std::string &sym = decls[i]->dims[j].symbol;
        if (sym.empty())
          continue;
        int64_t v = inputs_[i].shape[j];
        std::string here = "input '" + decls[i]->name + "' dimension " + std::to_string(j);
        auto [it, fresh] = bound.emplace(sym, Bound{v, here});
        if (!fresh && it->second.value != v)
          fail(here + " (" + sym + ") is " + std::to_string(v) + ", but " + sym + " = " +
               std::to_string(it->second.value) + " from " + it->second.from);
      }
    for (auto &[name, b] : bound)
      sizes_[name] = b.value;
  }

  // --- translation of expressions ------------------------------------------------------------
  Node compile(const Expr &e) {
    Node n;
    n.src = &e;
    switch (e.kind) {
    case ExprKind::Number:
      if (e.isIntLiteral) {
        n.op = Op::IntConst;
        n.ival = (int64_t)e.number;
      } else {
        n.op = Op::FloatConst;
        n.type = ScalarType::Float;
        n.fval = e.number;
      }
      return n;
    case ExprKind::Ident:
      switch (e.identKind) {
      case IdentKind::Index: {
        auto it = indexSlots_.find(e.index);
        if (it == indexSlots_.end())
          internal("index '" + e.name + "' is used outside its scope");
        n.op = Op::Slot;
        n.slot = it->second;
        return n;
      }
      case IdentKind::Size: {
        auto it = sizes_.find(e.name);
        if (it == sizes_.end())
          internal("size '" + e.name + "' is not bound by any input");
        n.op = Op::IntConst;
        n.ival = it->second;
        return n;
      }
      case IdentKind::Const:
        if (e.type == ScalarType::Float) {
          n.op = Op::FloatConst;
          n.type = ScalarType::Float;
          n.fval = e.constValue;
        } else {
          n.op = Op::IntConst;
          n.ival = (int64_t)e.constValue;
        }
        return n;
      case IdentKind::Let: {
        auto it = letSlots_.find(e.let);
        if (it == letSlots_.end())
          internal("'" + e.name + "' is used outside its let");
        n.op = Op::Slot;
        n.slot = it->second;
        n.type = letTypes_.at(e.let);
        return n;
      }
      case IdentKind::Unresolved:
        break;
      }
      internal("unresolved identifier '" + e.name + "'");
    case ExprKind::Read: {
      auto it = e.tensor ? tensorIds_.find(e.tensor) : tensorIds_.end();
      if (it == tensorIds_.end())
        internal("'" + e.name + "' is read before it is computed");
      const Storage &t = tensors_[it->second];
      if (e.args.size() != t.shape.size())
        internal("wrong number of subscripts for '" + e.name + "'");
      n.op = Op::Read;
      n.tensor = it->second;
      n.boundary = e.boundary == "zero"      ? Node::Boundary::Zero
                   : e.boundary == "clamp"   ? Node::Boundary::Clamp
                   : e.boundary == "exclude" ? Node::Boundary::Exclude
                                             : Node::Boundary::None;
      n.type = t.isInt ? ScalarType::Int : ScalarType::Float;
      for (const auto &a : e.args) {
        n.kids.push_back(compile(*a));
        requireType(n.kids.back(), ScalarType::Int, "subscript");
      }
      return n;
    }
    case ExprKind::ListRead:
      if (e.args.size() != 1 || e.listValues.empty())
        internal("malformed read of list '" + e.name + "'");
      n.op = Op::ListRead;
      n.type = e.type;
      n.kids.push_back(compile(*e.args[0]));
      requireType(n.kids[0], ScalarType::Int, "subscript");
      return n;
    case ExprKind::Call:
      return compileCall(e, std::move(n));
    case ExprKind::Unary:
      n.kids.push_back(compile(*e.args.at(0)));
      if (e.name == "!") {
        requireType(n.kids[0], ScalarType::Bool, "operand of '!'");
        n.op = Op::Not;
        n.type = ScalarType::Bool;
      } else if (e.name == "-") {
        requireNumber(n.kids[0], "operand of '-'");
        n.op = Op::Neg;
        n.type = n.kids[0].type;
      } else {
        internal("unary operator '" + e.name + "'");
      }
      return n;
    case ExprKind::Binary:
      return compileBinary(e, std::move(n));
    case ExprKind::Reduce: {
      n.op = Op::Reduce;
      n.sub = (int)e.reduceKind;
      std::vector<Node> bounds;
      for (const auto &idx : e.reduceIndices) {
        if (!idx.range)
          internal("reduction index '" + idx.name + "' has no range");
        bounds.push_back(compile(*idx.range->lo));
        bounds.push_back(compile(*idx.range->hi));
        requireType(bounds[bounds.size() - 2], ScalarType::Int, "range bound");
        requireType(bounds.back(), ScalarType::Int, "range bound");
        int s = newSlot();
        indexSlots_[&idx] = s;
        n.slots.push_back(s);
      }
      n.kids.push_back(compile(*e.body));
      requireNumber(n.kids[0], "reduction body");
      for (auto &b : bounds)
        n.kids.push_back(std::move(b));
      n.type = e.reduceKind == ReduceKind::Mean ? ScalarType::Float : n.kids[0].type;
      return n;
    }
    case ExprKind::Softmax:
      fail("softmax must be the whole right-hand side of a definition" + where(e.loc));
    case ExprKind::Let: {
      if (e.args.empty() || !e.body)
        internal("malformed let");
      n.op = Op::Let;
      n.kids.push_back(compile(*e.args[0]));
      n.slot = newSlot();
      letSlots_[&e] = n.slot;
      letTypes_[&e] = n.kids[0].type;
      n.kids.push_back(compile(*e.body));
      n.type = n.kids[1].type;
      return n;
    }
    }
    internal("unknown expression kind");
  }

  void requireType(const Node &n, ScalarType t, const char *what) {
    if (n.type != t)
      internal(std::string(what) + " '" + exprToString(*n.src) + "' is " + scalarTypeName(n.type) +
               ", expected " + scalarTypeName(t));
  }
  void requireNumber(const Node &n, const char *what) {
    if (n.type == ScalarType::Bool)
      internal(std::string(what) + " '" + exprToString(*n.src) + "' is a condition");
  }

  Node compileCall(const Expr &e, Node n) {
    static const std::pair<const char *, Fn> kMath[] = {
        {"exp", Fn::Exp},           {"log", Fn::Log},     {"sqrt", Fn::Sqrt},
        {"rsqrt", Fn::Rsqrt},       {"sin", Fn::Sin},     {"cos", Fn::Cos},
        {"tanh", Fn::Tanh},         {"erf", Fn::Erf},     {"floor", Fn::Floor},
        {"sigmoid", Fn::Sigmoid},   {"silu", Fn::Silu},   {"elu", Fn::Elu},
        {"softplus", Fn::Softplus}, {"f32", Fn::ToFloat}, {"bf16", Fn::ToBF16},
        {"f16", Fn::ToF16},
    };
    for (const auto &a : e.args)
      n.kids.push_back(compile(*a));
    auto arity = [&](size_t k) {
      if (n.kids.size() != k)
        internal("'" + e.name + "' called with " + std::to_string(n.kids.size()) + " arguments");
    };
    const std::string &f = e.name;
    for (const auto &[name, fn] : kMath)
      if (f == name) {
        arity(1);
        requireNumber(n.kids[0], "argument");
        n.op = Op::Math;
        n.sub = (int)fn;
        n.type = ScalarType::Float;
        return n;
      }
    if (f == "relu") { // the argument's type: max(x, 0) for an int, NaN-preserving for a float
      arity(1);
      requireNumber(n.kids[0], "argument");
      n.type = n.kids[0].type;
      if (n.type == ScalarType::Int) {
        Node zero;
        zero.src = n.src;
        n.kids.push_back(zero);
        n.op = Op::Max;
      } else {
        n.op = Op::Math;
        n.sub = (int)Fn::Relu;
      }
      return n;
    }
    if (f == "ifloor") {
      arity(1);
      requireNumber(n.kids[0], "argument");
      n.op = Op::IFloor;
      n.type = ScalarType::Int;
      return n;
    }
    if (f == "pow" || f == "min" || f == "max") {
      arity(2);
      requireNumber(n.kids[0], "argument");
      requireNumber(n.kids[1], "argument");
      n.op = f == "pow" ? Op::Pow : f == "min" ? Op::Min : Op::Max;
      n.type = f == "pow" ? ScalarType::Float : promote(n.kids[0].type, n.kids[1].type);
      return n;
    }
    if (f == "abs") {
      arity(1);
      requireNumber(n.kids[0], "argument");
      n.op = Op::Abs;
      n.type = n.kids[0].type;
      return n;
    }
    if (f == "select") {
      arity(3);
      requireType(n.kids[0], ScalarType::Bool, "condition");
      requireNumber(n.kids[1], "argument");
      requireNumber(n.kids[2], "argument");
      n.op = Op::Select;
      n.type = promote(n.kids[1].type, n.kids[2].type);
      return n;
    }
    internal("call of '" + f + "', which is not a builtin");
  }

  Node compileBinary(const Expr &e, Node n) {
    n.kids.push_back(compile(*e.args.at(0)));
    n.kids.push_back(compile(*e.args.at(1)));
    const std::string &op = e.name;
    if (op == "&&" || op == "||") {
      requireType(n.kids[0], ScalarType::Bool, "operand");
      requireType(n.kids[1], ScalarType::Bool, "operand");
      n.op = op == "&&" ? Op::And : Op::Or;
      n.type = ScalarType::Bool;
      return n;
    }
    requireNumber(n.kids[0], "operand");
    requireNumber(n.kids[1], "operand");
    static const std::pair<const char *, Cmp> kCmp[] = {{"<", Cmp::Lt},  {"<=", Cmp::Le},
                                                        {">", Cmp::Gt},  {">=", Cmp::Ge},
                                                        {"==", Cmp::Eq}, {"!=", Cmp::Ne}};
    for (const auto &[name, c] : kCmp)
      if (op == name) {
        n.op = Op::Cmp;
        n.sub = (int)c;
        n.floatCmp = promote(n.kids[0].type, n.kids[1].type) == ScalarType::Float;
        n.type = ScalarType::Bool;
        return n;
      }
    n.type = promote(n.kids[0].type, n.kids[1].type);
    if (op == "+")
      n.op = Op::Add;
    else if (op == "-")
      n.op = Op::Sub;
    else if (op == "*")
      n.op = Op::Mul;
    else if (op == "/")
      n.op = Op::Div;
    else if (op == "%") {
      n.op = Op::Mod;
      if (n.type != ScalarType::Int)
        internal("'%' on floats");
    } else
      internal("binary operator '" + op + "'");
    return n;
  }

  // --- evaluation ----------------------------------------------------------------------------
  [[noreturn]] void divisionByZero(const Node &n) {
    fail("integer division by zero in definition '" + defName_ + "'" + where(n.src->loc) +
         ", in '" + exprToString(*n.src) + "'");
  }

  // `z` (if given) says whether the value is a structural zero: a `.zero`/`.exclude` read outside
  // the tensor, or a masked point of a softmax.
  double read(const Node &n, bool *z = nullptr) {
    const Storage &t = tensors_[n.tensor];
    int64_t off = 0;
    for (size_t d = 0; d < n.kids.size(); ++d) {
      const Node &sub = n.kids[d];
      int64_t i =
          sub.op == Op::Slot ? frame_[sub.slot].i : evalI(sub); // the common case: a bare index
      if ((i < 0 || i >= t.shape[d]) && n.boundary != Node::Boundary::None) {
        if (n.boundary == Node::Boundary::Clamp) {
          if (t.shape[d] > 0)
            i = std::clamp<int64_t>(i, 0, t.shape[d] - 1); // else: reported below
        } else { // zero, or exclude: read as 0 and mask the softmax point out
          if (n.boundary == Node::Boundary::Exclude)
            excluded_ = true;
          if (z)
            *z = true;
          return 0.0;
        }
      }
      if (i < 0 || i >= t.shape[d])
        fail("out-of-range read in definition '" + defName_ + "'" + where(n.src->loc) + ": index " +
             std::to_string(i) + " of '" + t.name + "' dimension " + std::to_string(d) +
             " is outside its extent " + std::to_string(t.shape[d]) + " (in '" +
             exprToString(*n.src) + "')");
      off += i * t.strides[d];
    }
    if (z && !t.masked.empty() && t.masked[off])
      *z = true;
    return t.data[off];
  }

  // An element of a constant list; a subscript outside it is an error, as a plain tensor read's.
  double listRead(const Node &n) {
    const std::vector<double> &v = n.src->listValues;
    int64_t i = evalI(n.kids[0]);
    if (i < 0 || i >= (int64_t)v.size())
      fail("out-of-range read in definition '" + defName_ + "'" + where(n.src->loc) + ": index " +
           std::to_string(i) + " is outside constant list '" + n.src->name + "' of " +
           std::to_string(v.size()) + (v.size() == 1 ? " element" : " elements") + " (in '" +
           exprToString(*n.src) + "')");
    return v[(size_t)i];
  }

  void bindLet(const Node &n) {
    const Node &v = n.kids[0];
    Slot &s = frame_[n.slot];
    switch (v.type) {
    case ScalarType::Int:
      s.i = evalI(v);
      s.f = (double)s.i;
      break;
    case ScalarType::Bool:
      s.b = evalB(v);
      break;
    default:
      s.f = evalFZ(v, &s.z);
      break;
    }
  }

  // Visits every point of a reduction domain (first index outermost).
  template <typename F> void forEachPoint(const Node &n, size_t r, F &visit) {
    if (r == n.slots.size()) {
      visit();
      return;
    }
    int64_t lo = evalI(n.kids[1 + 2 * r]), hi = evalI(n.kids[2 + 2 * r]);
    for (int64_t v = lo; v < hi; ++v) {
      frame_[n.slots[r]].i = v;
      forEachPoint(n, r + 1, visit);
    }
  }

  int64_t reduceI(const Node &n) {
    auto kind = (ReduceKind)n.sub;
    const Node &body = n.kids[0];
    int64_t acc = 0;
    bool any = false;
    auto visit = [&] {
      int64_t v = evalI(body);
      if (kind == ReduceKind::Sum)
        acc = wadd(acc, v);
      else if (!any)
        acc = v;
      else
        acc = kind == ReduceKind::Max ? std::max(acc, v) : std::min(acc, v);
      any = true;
    };
    forEachPoint(n, 0, visit);
    if (!any && kind == ReduceKind::Max)
      return std::numeric_limits<int32_t>::min();
    if (!any && kind == ReduceKind::Min)
      return std::numeric_limits<int32_t>::max();
    return acc;
  }

  double reduceF(const Node &n) {
    auto kind = (ReduceKind)n.sub;
    const Node &body = n.kids[0];
    double acc = kind == ReduceKind::Max ? -INFINITY : kind == ReduceKind::Min ? INFINITY : 0.0;
    int64_t count = 0;
    auto visit = [&] {
      double v = evalF(body);
      if (kind == ReduceKind::Max)
        acc = fmax(acc, v);
      else if (kind == ReduceKind::Min)
        acc = fmin(acc, v);
      else
        acc += v;
      ++count;
    };
    forEachPoint(n, 0, visit);
    return kind == ReduceKind::Mean ? acc / (double)count : acc;
  }

  int64_t evalI(const Node &n) {
    switch (n.op) {
    case Op::IntConst:
      return n.ival;
    case Op::IFloor: {
      // As compiled: clamped to the ints an f32 reaches (2^31 - 128 is the largest f32 below
      // 2^31), NaN to the lowest.
      double x = evalF(n.kids[0]);
      if (std::isnan(x))
        return -2147483648LL;
      return (int64_t)std::clamp(std::floor(x), -2147483648.0, 2147483520.0);
    }
    case Op::Slot:
      return frame_[n.slot].i;
    case Op::Read:
      return (int64_t)read(n);
    case Op::ListRead:
      return (int64_t)listRead(n);
    case Op::Neg:
      return wneg(evalI(n.kids[0]));
    case Op::Add:
      return wadd(evalI(n.kids[0]), evalI(n.kids[1]));
    case Op::Sub:
      return wsub(evalI(n.kids[0]), evalI(n.kids[1]));
    case Op::Mul:
      return wmul(evalI(n.kids[0]), evalI(n.kids[1]));
    case Op::Div:
    case Op::Mod: {
      int64_t a = evalI(n.kids[0]), b = evalI(n.kids[1]);
      if (b == 0)
        divisionByZero(n);
      return n.op == Op::Div ? floorDiv(a, b) : floorMod(a, b);
    }
    case Op::Min:
      return std::min(evalI(n.kids[0]), evalI(n.kids[1]));
    case Op::Max:
      return std::max(evalI(n.kids[0]), evalI(n.kids[1]));
    case Op::Abs: {
      int64_t v = evalI(n.kids[0]);
      return v < 0 ? wneg(v) : v;
    }
    case Op::Select:
      return evalB(n.kids[0]) ? evalI(n.kids[1]) : evalI(n.kids[2]);
    case Op::Reduce:
      return reduceI(n);
    case Op::Let:
      bindLet(n);
      return evalI(n.kids[1]);
    default:
      internal("'" + exprToString(*n.src) + "' is not an integer");
    }
  }

  // Structural zeros (docs/language.md §6): a `.zero`/`.exclude` read outside its tensor and a
  // masked point of a softmax are zeros that make a product they are a factor of 0, whatever the
  // other factors (0 * inf and 0 * NaN included); so do their negations and quotients. `z` says
  // whether the value is such a zero. As in compiled code, a `let` passes it on, a `select` or a
  // conversion does not.
  double evalFZ(const Node &n, bool *z) {
    *z = false;
    if (n.type != ScalarType::Float)
      return evalF(n);
    switch (n.op) {
    case Op::Slot:
      *z = frame_[n.slot].z;
      return frame_[n.slot].f;
    case Op::Read:
      return read(n, z);
    case Op::Let:
      bindLet(n);
      return evalFZ(n.kids[1], z);
    case Op::Neg:
      return -evalFZ(n.kids[0], z);
    case Op::Mul: {
      // A structural zero's other factor is never evaluated, so never read: a masked key's value
      // (behind a length mask, a page id of -1) is not an error. The factor more likely to be
      // such a zero (a read) goes first.
      bool swap = n.kids[0].op != Op::Read && n.kids[0].op != Op::Slot &&
                  (n.kids[1].op == Op::Read || n.kids[1].op == Op::Slot);
      const Node &x = n.kids[swap ? 1 : 0], &y = n.kids[swap ? 0 : 1];
      bool zx, zy;
      double a = evalFZ(x, &zx);
      if (zx) {
        *z = true;
        return 0.0;
      }
      double b = evalFZ(y, &zy);
      *z = zy;
      return *z ? 0.0 : a * b;
    }
    case Op::Div: {
      bool zb;
      double a = evalFZ(n.kids[0], z);
      if (*z)
        return 0.0;
      double b = evalFZ(n.kids[1], &zb);
      return a / b;
    }
    default:
      return evalF(n);
    }
  }

  double evalF(const Node &n) {
    if (n.type == ScalarType::Int)
      return (double)evalI(n);
    bool z;
    switch (n.op) {
    case Op::FloatConst:
      return n.fval;
    case Op::ListRead:
      return listRead(n);
    case Op::Slot:
    case Op::Read:
    case Op::Neg:
    case Op::Mul:
    case Op::Div:
      return evalFZ(n, &z);
    case Op::Add:
      return evalF(n.kids[0]) + evalF(n.kids[1]);
    case Op::Sub:
      return evalF(n.kids[0]) - evalF(n.kids[1]);
    case Op::Math: {
      double x = evalF(n.kids[0]);
      switch ((Fn)n.sub) {
      case Fn::Exp:
        return std::exp(x);
      case Fn::Log:
        return std::log(x);
      case Fn::Sqrt:
        return std::sqrt(x);
      case Fn::Rsqrt:
        return 1.0 / std::sqrt(x);
      case Fn::Sin:
        return std::sin(x);
      case Fn::Cos:
        return std::cos(x);
      case Fn::Tanh:
        return std::tanh(x);
      case Fn::Erf:
        return std::erf(x);
      case Fn::Floor:
        return std::floor(x);
      // The activations by PyTorch's definitions, in double precision.
      case Fn::Sigmoid:
        return 1.0 / (1.0 + std::exp(-x));
      case Fn::Silu:
        return x / (1.0 + std::exp(-x));
      case Fn::Elu:
        return x > 0 ? x : std::expm1(x);
      case Fn::Softplus:
        return x > 20 ? x : std::log1p(std::exp(x));
      case Fn::Relu:
        return std::isnan(x) ? x : std::max(x, 0.0);
      case Fn::ToFloat:
        return x;
      case Fn::ToBF16:
        return round_to_dtype(x, DType::BF16);
      case Fn::ToF16:
        return round_to_dtype(x, DType::F16);
      }
      internal("math function");
    }
    case Op::Pow:
      return std::pow(evalF(n.kids[0]), evalF(n.kids[1]));
    case Op::Min:
      return fmin(evalF(n.kids[0]), evalF(n.kids[1]));
    case Op::Max:
      return fmax(evalF(n.kids[0]), evalF(n.kids[1]));
    case Op::Abs:
      return std::fabs(evalF(n.kids[0]));
    case Op::Select:
      return evalB(n.kids[0]) ? evalF(n.kids[1]) : evalF(n.kids[2]);
    case Op::Reduce:
      return reduceF(n);
    case Op::Let:
      bindLet(n);
      return evalF(n.kids[1]);
    default:
      internal("'" + exprToString(*n.src) + "' is not a number");
    }
  }

  bool evalB(const Node &n) {
    switch (n.op) {
    case Op::Slot:
      return frame_[n.slot].b;
    case Op::Not:
      return !evalB(n.kids[0]);
    case Op::And:
      return evalB(n.kids[0]) && evalB(n.kids[1]);
    case Op::Or:
      return evalB(n.kids[0]) || evalB(n.kids[1]);
    case Op::Let:
      bindLet(n);
      return evalB(n.kids[1]);
    case Op::Cmp: {
      auto c = (Cmp)n.sub;
      auto compare = [&](auto a, auto b) {
        switch (c) {
        case Cmp::Lt:
          return a < b;
        case Cmp::Le:
          return a <= b;
        case Cmp::Gt:
          return a > b;
        case Cmp::Ge:
          return a >= b;
        case Cmp::Eq:
          return a == b;
        case Cmp::Ne:
          return a != b;
        }
        internal("comparison");
      };
      if (n.floatCmp)
        return compare(evalF(n.kids[0]), evalF(n.kids[1]));
      return compare(evalI(n.kids[0]), evalI(n.kids[1]));
    }
    default:
      internal("'" + exprToString(*n.src) + "' is not a condition");
    }
  }

  // --- definitions ---------------------------------------------------------------------------
  // One index of a definition's left-hand side, as a loop.
  struct Dim {
    int slot;
    int64_t lo, hi, stride;
  };

  template <typename F> void nest(const std::vector<Dim> &dims, size_t r, int64_t off, F &visit) {
    if (r == dims.size()) {
      visit(off);
      return;
    }
    const Dim &d = dims[r];
    for (int64_t v = d.lo; v < d.hi; ++v) {
      frame_[d.slot].i = v;
      nest(dims, r + 1, off + v * d.stride, visit);
    }
  }

  int64_t evalStatic(const Expr &e) {
    Node n = compile(e);
    requireType(n, ScalarType::Int, "extent");
    return evalI(n);
  }

  // A product dimension of an output (`M * D`) must not overflow: integer arithmetic here wraps,
  // and a wrapped extent would be a wrong shape rather than an error. (The runtime's
  // output_shapes reports the same.)
  void checkProduct(const TensorDecl &t, size_t i) {
    const DimSpec &d = t.dims[i];
    int64_t p = 1;
    bool overflow = false;
    std::string values;
    for (const DimFactor &f : d.factors) {
      int64_t v = f.value;
      if (!f.symbol.empty()) {
        auto it = sizes_.find(f.symbol);
        if (it == sizes_.end())
          internal("size '" + f.symbol + "' is not bound by any input");
        v = it->second;
        values += (values.empty() ? "" : ", ") + f.symbol + " = " + std::to_string(v);
      }
      overflow |= __builtin_mul_overflow(p, v, &p);
    }
    if (overflow)
      fail("output '" + t.name + "' dimension " + std::to_string(i) + " (" + d.str() +
           ") overflows 64 bits" + (values.empty() ? "" : " (" + values + ")"));
  }

  void runDefinition(const Definition &def) {
    defName_ = def.name;
    const TensorDecl *t = def.tensor;
    if (!t)
      internal("definition '" + def.name + "' was not checked");
    if (t->extents.size() != def.indices.size())
      internal("rank of '" + def.name + "'");
    Storage s;
    s.name = def.name;
    s.isInt = t->elemType == ElemType::I32;
    int64_t n = 1;
    for (size_t i = 0; i < t->extents.size(); ++i) {
      if (t->role == TensorRole::Output && i < t->dims.size())
        checkProduct(*t, i);
      int64_t v = std::max<int64_t>(0, evalStatic(*t->extents[i]));
      s.shape.push_back(v);
      n = v == 0 || n == 0 ? 0 : (n > kMaxElements ? n : n * v);
    }
    if (n > kMaxElements)
      fail("definition '" + def.name + "' has shape " + shapeString(s.shape) + ", more than the " +
           std::to_string(kMaxElements) + " elements the reference interpreter materialises");
    s.strides = stridesOf(s.shape);
    s.own.assign((size_t)n, 0.0);
    s.data = s.own.data();

    std::vector<Dim> dims;
    for (size_t i = 0; i < def.indices.size(); ++i) {
      const IndexDecl &idx = def.indices[i];
      if (!idx.range)
        internal("index '" + idx.name + "' of '" + def.name + "' has no range");
      int64_t lo = evalStatic(*idx.range->lo), hi = evalStatic(*idx.range->hi);
      if (lo < 0 || hi > s.shape[i])
        internal("range of '" + idx.name + "' exceeds '" + def.name + "' dimension " +
                 std::to_string(i));
      int slot = newSlot();
      indexSlots_[&idx] = slot;
      dims.push_back({slot, lo, hi, s.strides[i]});
    }

    double *out = s.own.data();
    if (def.rhs->kind == ExprKind::Softmax) {
      runSoftmax(def, dims, out, (size_t)n, &s.masked);
    } else {
      Node rhs = compile(*def.rhs);
      requireNumber(rhs, "definition");
      if (s.isInt) {
        requireType(rhs, ScalarType::Int, "definition of an i32 tensor");
        auto visit = [&](int64_t off) { out[off] = (double)evalI(rhs); };
        nest(dims, 0, 0, visit);
      } else {
        auto visit = [&](int64_t off) { out[off] = evalF(rhs); };
        nest(dims, 0, 0, visit);
      }
    }
    addTensor(t, std::move(s));
  }

  // For each point of the non-axis indices: p = exp(score - max) / sum over the unmasked points
  // of the axes; masked points (where false, or a score of -inf) are 0, and a slice with no
  // unmasked point is all 0. A sink adds exp(sink - max) to the sum, the max taken over the sink
  // too, as softmax(cat([scores, sink])) without the sink's own entry: a row whose points are all
  // masked is then 0 as well (exp(sink - sink) / 1 for them), and a -inf sink changes nothing.
  void runSoftmax(const Definition &def, const std::vector<Dim> &dims, double *out, size_t count,
                  std::vector<uint8_t> *masked) {
    const Expr &sm = *def.rhs;
    if (def.tensor->elemType == ElemType::I32)
      internal("softmax into an i32 tensor");
    std::vector<Dim> rows, axes;
    for (size_t i = 0; i < def.indices.size(); ++i) {
      bool isAxis = std::find(sm.softmaxAxes.begin(), sm.softmaxAxes.end(), def.indices[i].name) !=
                    sm.softmaxAxes.end();
      (isAxis ? axes : rows).push_back(dims[i]);
    }
    if (axes.size() != sm.softmaxAxes.size())
      internal("softmax axis of '" + def.name + "' is not a left-hand index");
    Node body = compile(*sm.body);
    requireNumber(body, "softmax body");
    std::optional<Node> mask;
    if (sm.where) {
      mask = compile(*sm.where);
      requireType(*mask, ScalarType::Bool, "softmax mask");
    }
    std::optional<Node> sink;
    if (sm.sink) {
      sink = compile(*sm.sink);
      requireNumber(*sink, "softmax sink");
    }
    std::vector<int64_t> offs;
    std::vector<double> scores; // -inf marks a masked point
    auto row = [&](int64_t rowOff) {
      offs.clear();
      scores.clear();
      double mx = -INFINITY;
      bool any = false;
      double sinkValue = sink ? evalF(*sink) : -INFINITY;
      auto point = [&](int64_t off) {
        double sc = -INFINITY;
        excluded_ = false;
        bool hidden = true;
        if ((!mask || evalB(*mask)) && !excluded_) {
          sc = evalF(body);
          hidden = excluded_;
          if (excluded_)
            sc = -INFINITY;
        }
        // A point the mask hides is a structural zero; one whose score is -inf is an ordinary 0.
        if (hidden) {
          if (masked->empty())
            masked->assign(count, 0);
          (*masked)[off] = 1;
        }
        offs.push_back(off);
        scores.push_back(sc);
        if (sc != -INFINITY) {
          mx = any ? fmax(mx, sc) : sc;
          any = true;
        }
      };
      nest(axes, 0, rowOff, point);
      if (!any && sinkValue == -INFINITY)
        return; // every point masked: the slice stays 0
      // (fmax ignores a NaN sink, whose exp below makes the row NaN, as a NaN score does.)
      mx = fmax(mx, sinkValue);
      double sum = sinkValue == -INFINITY ? 0.0 : std::exp(sinkValue - mx);
      for (double &sc : scores)
        sum += (sc = sc == -INFINITY ? 0.0 : std::exp(sc - mx));
      for (size_t i = 0; i < offs.size(); ++i)
        out[offs[i]] = scores[i] / sum;
    };
    nest(rows, 0, 0, row);
  }
};

} // namespace

bool interpret(const Kernel &k, const std::vector<RefTensor> &inputs,
               std::vector<RefTensor> *outputs, std::string *err) {
  try {
    Interp(k, inputs).run(outputs);
    return true;
  } catch (const Failure &f) {
    if (err)
      *err = f.message;
    return false;
  } catch (const std::bad_alloc &) {
    if (err)
      *err = "out of memory in the reference interpreter";
    return false;
  }
}

} // namespace attnc::dsl
