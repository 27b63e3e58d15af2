// HalideGen: the readable dump of a lowered algorithm (`--emit=halide`).
#include "attnc/HalideGen.h"

#include <sstream>

namespace H = Halide;

namespace attnc {

namespace {
// Calls to Tuple-valued Funcs print with their element, `f(x)[1]` (Halide's printer drops it).
class ShowTupleElements : public H::Internal::IRMutator {
  using IRMutator::visit;
  H::Expr visit(const H::Internal::Call *op) override {
    H::Expr e = IRMutator::visit(op);
    const auto *c = e.as<H::Internal::Call>();
    if (!c || c->call_type != H::Internal::Call::Halide || !c->func.defined() ||
        H::Internal::Function(c->func).outputs() < 2)
      return e;
    std::ostringstream s;
    s << c->name << "(";
    for (size_t i = 0; i < c->args.size(); ++i)
      s << (i ? ", " : "") << c->args[i];
    s << ")[" << c->value_index << "]";
    return H::Internal::Variable::make(c->type, s.str());
  }
};
H::Expr shown(const H::Expr &e) { return e.defined() ? ShowTupleElements().mutate(e) : e; }
} // namespace

std::string printAlgorithm(const LoweredKernel &k) {
  std::ostringstream os;
  os << "pipeline " << k.name << "\n";
  for (const auto &p : k.inputs) {
    os << "  input " << p.name << ": " << p.type.str() << "\n";
  }
  for (const auto &f : k.funcs) {
    H::Func fn = f.func;
    os << "func " << f.name << " [" << funcRoleName(f.role);
    if (!f.reduceKind.empty())
      os << " " << f.reduceKind;
    if (f.isOutput)
      os << ", output";
    os << "]\n";
    std::vector<H::Var> args = fn.args();
    auto lhs = [&](const std::vector<H::Expr> &a) {
      std::ostringstream s;
      s << f.name << "(";
      for (size_t i = 0; i < a.size(); ++i)
        s << (i ? ", " : "") << a[i];
      s << ")";
      return s.str();
    };
    auto rhs = [](const H::Tuple &t) {
      std::ostringstream s;
      if (t.size() == 1)
        s << shown(t[0]);
      else
        for (size_t i = 0; i < t.size(); ++i)
          s << (i ? ", " : "(") << shown(t[i]) << (i + 1 == t.size() ? ")" : "");
      return s.str();
    };
    os << "  " << lhs(std::vector<H::Expr>(args.begin(), args.end())) << " = " << rhs(fn.values())
       << "\n";
    for (int u = 0; u < fn.num_update_definitions(); ++u) {
      os << "  " << lhs(fn.update_args(u)) << " = " << rhs(fn.update_values(u));
      // The RVars kept at lowering carry their domain; Func::rvars() returns bare names. An
      // online state keeps one per update (its chains).
      std::vector<H::RVar> rvs = f.role == FuncRole::OnlineState && u < (int)f.rvars.size()
                                     ? std::vector<H::RVar>{f.rvars[u]}
                                 : u == 0 ? f.rvars
                                          : fn.rvars(u);
      if (!rvs.empty()) {
        os << "  where ";
        for (size_t i = 0; i < rvs.size(); ++i)
          os << (i ? ", " : "") << rvs[i].name() << " in [" << rvs[i].min() << ", " << rvs[i].min()
             << " + " << rvs[i].extent() << ")";
        // Bounds from a softmax mask (attn.bounds) restrict the domain further.
        H::Internal::ReductionDomain dom = rvs[0].domain();
        H::Expr pred = dom.defined() ? dom.predicate() : H::Expr();
        if (pred.defined() && !H::Internal::is_const_one(pred))
          os << " if " << shown(pred);
      }
      os << "\n";
    }
  }
  return os.str();
}

} // namespace attnc
