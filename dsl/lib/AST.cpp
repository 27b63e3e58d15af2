// AST utilities: deep copies and the `--emit=ast` printer.
#include "attnc/dsl/AST.h"

#include <map>
#include <sstream>

namespace attnc::dsl {

const char *elemTypeName(ElemType t) { return dtype_name(t); }

const char *scalarTypeName(ScalarType t) {
  switch (t) {
  case ScalarType::Unknown:
    return "unknown";
  case ScalarType::Int:
    return "int";
  case ScalarType::Float:
    return "float";
  case ScalarType::Bool:
    return "bool";
  }
  return "unknown";
}

const char *reduceKindName(ReduceKind k) {
  switch (k) {
  case ReduceKind::Sum:
    return "sum";
  case ReduceKind::Max:
    return "max";
  case ReduceKind::Min:
    return "min";
  case ReduceKind::Mean:
    return "mean";
  }
  return "sum";
}

Range Range::clone() const { return Range{lo ? lo->clone() : nullptr, hi ? hi->clone() : nullptr}; }

IndexDecl IndexDecl::clone() const {
  IndexDecl d;
  d.name = name;
  d.loc = loc;
  if (range)
    d.range = range->clone();
  d.rangeOrigin = rangeOrigin;
  d.rangeOriginLoc = rangeOriginLoc;
  return d;
}

namespace {
struct CloneMap {
  std::map<const Expr *, const Expr *> lets;
  std::map<const IndexDecl *, const IndexDecl *> indices;
};

ExprPtr cloneExpr(const Expr &x, CloneMap &m) {
  auto e = std::make_unique<Expr>(x.kind, x.loc);
  if (x.kind == ExprKind::Let)
    m.lets[&x] = e.get();
  e->type = x.type;
  e->depth = x.depth;
  e->number = x.number;
  e->isIntLiteral = x.isIntLiteral;
  e->name = x.name;
  e->identKind = x.identKind;
  e->index = x.index;
  if (auto it = m.indices.find(x.index); x.index && it != m.indices.end())
    e->index = it->second;
  e->tensor = x.tensor;
  e->constValue = x.constValue;
  e->hasIntValue = x.hasIntValue;
  e->intValue = x.intValue;
  e->let = x.let;
  if (auto it = m.lets.find(x.let); x.let && it != m.lets.end())
    e->let = it->second;
  e->boundary = x.boundary;
  e->listValues = x.listValues;
  e->expansion = x.expansion;
  e->copyOf = x.copyOf;
  for (const auto &a : x.args)
    e->args.push_back(cloneExpr(*a, m));
  e->reduceKind = x.reduceKind;
  e->reduceIndices.reserve(x.reduceIndices.size()); // stable addresses for the map below
  for (const auto &d : x.reduceIndices) {
    IndexDecl c;
    c.name = d.name;
    c.loc = d.loc;
    if (d.range)
      c.range = Range{d.range->lo ? cloneExpr(*d.range->lo, m) : nullptr,
                      d.range->hi ? cloneExpr(*d.range->hi, m) : nullptr};
    c.rangeOrigin = d.rangeOrigin;
    c.rangeOriginLoc = d.rangeOriginLoc;
    e->reduceIndices.push_back(std::move(c));
  }
  for (size_t i = 0; i < x.reduceIndices.size(); ++i)
    m.indices[&x.reduceIndices[i]] = &e->reduceIndices[i];
  e->softmaxAxes = x.softmaxAxes;
  e->softmaxAxisLocs = x.softmaxAxisLocs;
  if (x.where)
    e->where = cloneExpr(*x.where, m);
  if (x.sink)
    e->sink = cloneExpr(*x.sink, m);
  if (x.body)
    e->body = cloneExpr(*x.body, m);
  return e;
}
} // namespace

ExprPtr Expr::clone() const {
  CloneMap m;
  return cloneExpr(*this, m);
}

std::string Kernel::failure(const Requirement &r) {
  return "requirement failed: " + (r.message.empty() ? exprToString(*r.cond) : r.message);
}

std::string Kernel::failureAt(const Requirement &r) {
  return (r.loc.file ? r.loc.file->path + ":" : std::string()) + std::to_string(r.loc.line) + ":" +
         std::to_string(r.loc.col) + ": " + failure(r);
}

static std::string numberToString(double v, bool isInt) {
  std::ostringstream os;
  if (isInt) {
    os << (long long)v;
  } else {
    os.precision(9);
    os << v;
    std::string s = os.str();
    if (s.find_first_of(".einn") == std::string::npos)
      s += ".0";
    return s;
  }
  return os.str();
}

static void printIndex(std::ostream &os, const IndexDecl &d) {
  os << d.name;
  if (d.range)
    os << " in " << exprToString(*d.range->lo) << ".." << exprToString(*d.range->hi);
}

static void printExpr(std::ostream &os, const Expr &e) {
  switch (e.kind) {
  case ExprKind::Number:
    os << numberToString(e.number, e.isIntLiteral);
    break;
  case ExprKind::Ident:
    os << e.name;
    break;
  case ExprKind::Read:
  case ExprKind::Call:
  case ExprKind::ListRead:
    os << e.name << (e.boundary.empty() ? "" : "." + e.boundary) << "(";
    for (size_t i = 0; i < e.args.size(); ++i) {
      if (i)
        os << ", ";
      printExpr(os, *e.args[i]);
    }
    os << ")";
    break;
  case ExprKind::Unary:
    os << e.name;
    printExpr(os, *e.args[0]);
    break;
  case ExprKind::Binary:
    os << "(";
    printExpr(os, *e.args[0]);
    os << " " << e.name << " ";
    printExpr(os, *e.args[1]);
    os << ")";
    break;
  case ExprKind::Reduce:
    os << "(" << reduceKindName(e.reduceKind) << "(";
    for (size_t i = 0; i < e.reduceIndices.size(); ++i) {
      if (i)
        os << ", ";
      printIndex(os, e.reduceIndices[i]);
    }
    os << ") ";
    printExpr(os, *e.body);
    os << ")";
    break;
  case ExprKind::Softmax:
    os << "softmax(";
    for (size_t i = 0; i < e.softmaxAxes.size(); ++i)
      os << (i ? ", " : "") << e.softmaxAxes[i];
    if (e.where) {
      os << " where ";
      printExpr(os, *e.where);
    }
    if (e.sink) {
      os << " sink ";
      printExpr(os, *e.sink);
    }
    os << ") ";
    printExpr(os, *e.body);
    break;
  case ExprKind::Let:
    os << "(let " << e.name << " = ";
    printExpr(os, *e.args[0]);
    os << " in ";
    printExpr(os, *e.body);
    os << ")";
    break;
  }
}

std::string exprToString(const Expr &e) {
  std::ostringstream os;
  printExpr(os, e);
  return os.str();
}

static void printTensor(std::ostream &os, const char *role, const TensorDecl &t) {
  os << "  " << role << " " << t.name << ": " << elemTypeName(t.elemType) << "[";
  for (size_t i = 0; i < t.dims.size(); ++i)
    os << (i ? ", " : "") << t.dims[i].str();
  os << "] @" << t.loc.line << ":" << t.loc.col << "\n";
}

void printModule(std::ostream &os, const Module &m) {
  for (const auto &f : m.functions) {
    os << "function " << f->name << "(";
    for (size_t i = 0; i < f->params.size(); ++i)
      os << (i ? ", " : "") << f->params[i];
    os << ") @"
       << (f->loc.file ? f->loc.file->path.substr(f->loc.file->path.rfind('/') + 1) + ":"
                       : std::string())
       << f->loc.line << ":" << f->loc.col << "\n";
  }
  for (const auto &k : m.kernels) {
    os << "kernel " << k->name << " @" << k->loc.line << ":" << k->loc.col << "\n";
    for (const auto &t : k->inputs)
      printTensor(os, "input", *t);
    for (const auto &t : k->outputs)
      printTensor(os, "output", *t);
    for (const auto &s : k->sizes)
      os << "  size " << s.name << " = " << s.tensor->name << ".dim[" << s.dim << "]\n";
    for (const auto &c : k->consts) {
      os << "  const " << c.name << " = ";
      if (c.isList) {
        os << "[";
        for (size_t i = 0; i < c.list.size(); ++i)
          os << (i ? ", " : "") << numberToString(c.list[i], c.isInt);
        os << "]";
      } else {
        os << numberToString(c.folded, c.isInt);
      }
      os << (c.overridden ? " (from -D)" : "") << " @" << c.loc.line << ":" << c.loc.col << "\n";
    }
    for (const auto &r : k->requirements) {
      os << "  require " << exprToString(*r.cond);
      if (!r.message.empty())
        os << ", \"" << r.message << "\"";
      os << (r.isStatic ? " (checked)"
             : r.isData ? " (at call, on input values)"
                        : " (at call)")
         << " @" << r.loc.line << ":" << r.loc.col << "\n";
    }
    for (const auto &d : k->defs) {
      os << "  def " << d->name << "(";
      for (size_t i = 0; i < d->indices.size(); ++i) {
        if (i)
          os << ", ";
        printIndex(os, d->indices[i]);
      }
      os << ")";
      if (d->tensor)
        os << " : " << elemTypeName(d->tensor->elemType)
           << (d->tensor->role == TensorRole::Output ? " output" : "");
      os << " @" << d->loc.line << ":" << d->loc.col << "\n";
      os << "    = ";
      printExpr(os, *d->rhs);
      os << "\n";
    }
  }
}

} // namespace attnc::dsl
