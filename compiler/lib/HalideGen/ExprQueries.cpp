// Questions about a Halide expression that HalideGen's lowering passes and the schedules' pattern finders share.
#include "attnc/HalideGen.h"

namespace attnc {

namespace H = Halide;
namespace HI = Halide::Internal;

std::set<std::string> freeVars(const H::Expr &e, bool withParams) {
  struct Vars : HI::IRGraphVisitor {
    bool withParams = true;
    std::set<std::string> names, bound;
    using HI::IRGraphVisitor::visit;
    void visit(const HI::Variable *v) override {
      if (bound.count(v->name) || (!withParams && (v->param.defined() || v->image.defined())))
        return;
      names.insert(v->name);
    }
    void visit(const HI::Let *l) override {
      l->value.accept(this);
      bound.insert(l->name);
      l->body.accept(this);
    }
  } v;
  v.withParams = withParams;
  e.accept(&v);
  return v.names;
}

bool readsData(const H::Expr &e) {
  struct Finder : HI::IRVisitor {
    bool found = false;
    using HI::IRVisitor::visit;
    void visit(const HI::Call *op) override {
      if (op->call_type == HI::Call::Image || op->call_type == HI::Call::Halide)
        found = true;
      HI::IRVisitor::visit(op);
    }
  } f;
  e.accept(&f);
  return f.found;
}

} // namespace attnc
