// A lowering pass that checks a kernel's size requirements before Halide's input bounds checks.
//
// Halide places the asserts of Pipeline::add_requirement after its own checks of the inputs'
// regions. A call that breaks a size relation the kernel declares (gqa's `Hq % Hkv == 0`) then
// usually also reads outside an input, and the caller was told about the read ("input 'k'
// dimension 1 (Hkv) is read at 4") instead of the relation. This pass moves each `[attnc]`
// requirement to just after the definitions of the buffer fields it tests, which is before any
// other check. During a bounds query (Halide's way of asking a kernel what regions it needs,
// with shapes not yet real) the requirement holds, as it does where Halide placed it.
#include "attnc/HalideGen.h"

#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace attnc {
namespace {

namespace H = Halide;
namespace HI = Halide::Internal;

bool isRequirement(const HI::AssertStmt *a) {
  struct Finder : HI::IRVisitor {
    bool found = false;
    using HI::IRVisitor::visit;
    void visit(const HI::StringImm *s) override {
      found = found || s->value.find("[attnc] ") != std::string::npos;
    }
  } f;
  a->message.accept(&f);
  return f.found;
}

// The statement after `s` in the chain of definitions and checks that starts the body (a
// LetStmt's body, or the rest of a Block that begins with a check), or null at its end.
HI::Stmt nextInChain(const HI::Stmt &s, std::string *defines) {
  if (const auto *l = s.as<HI::LetStmt>()) {
    *defines = l->name;
    return l->body;
  }
  if (const auto *b = s.as<HI::Block>();
      b && (b->first.as<HI::AssertStmt>() || b->first.as<HI::Evaluate>()))
    return b->rest;
  return HI::Stmt();
}

class RequirementsFirst : public HI::IRMutator {
public:
  HI::Stmt run(const HI::Stmt &s) {
    // Every name a LetStmt or loop defines anywhere, and the bounds-query tests of the buffers.
    struct Scan : HI::IRVisitor {
      std::set<std::string> defined;
      std::vector<H::Expr> boundsQueries;
      using HI::IRVisitor::visit;
      void visit(const HI::LetStmt *l) override {
        defined.insert(l->name);
        HI::IRVisitor::visit(l);
      }
      void visit(const HI::For *f) override {
        defined.insert(f->name);
        HI::IRVisitor::visit(f);
      }
      void visit(const HI::Call *c) override {
        if (c->name == HI::Call::buffer_is_bounds_query) {
          bool seen = false;
          for (const H::Expr &q : boundsQueries)
            seen = seen || HI::equal(q, H::Expr(c));
          if (!seen)
            boundsQueries.push_back(c);
        }
        HI::IRVisitor::visit(c);
      }
    } scan;
    s.accept(&scan);
    for (const std::string &n : scan.defined)
      defined_.insert(n);
    for (HI::Stmt c = s; c.defined();) {
      std::string n;
      c = nextInChain(c, &n);
      if (!n.empty())
        chainNames_.insert(n);
    }
    for (const H::Expr &q : scan.boundsQueries)
      anyBoundsQuery_ = anyBoundsQuery_.defined() ? anyBoundsQuery_ || q : q;
    HI::Stmt without = mutate(s);
    if (pending_.empty())
      return s;
    std::set<std::string> chain;
    return place(without, chain);
  }

private:
  using HI::IRMutator::visit;
  struct Pending {
    H::Expr condition, message;
    std::set<std::string> vars;
  };

  // Takes out each requirement whose variables are buffer fields the chain defines (or names
  // defined nowhere: the kernel's scalar arguments).
  HI::Stmt visit(const HI::AssertStmt *a) override {
    if (!isRequirement(a))
      return HI::IRMutator::visit(a);
    std::set<std::string> vars = freeVars(a->condition);
    for (const std::string &v : vars)
      if (defined_.count(v) && !chainNames_.count(v))
        return HI::IRMutator::visit(a);
    pending_.push_back({a->condition, a->message, vars});
    return HI::Evaluate::make(0);
  }

  // Puts each requirement right after the chain's definitions of its variables.
  HI::Stmt place(const HI::Stmt &s, std::set<std::string> &chain) {
    std::vector<HI::Stmt> ready;
    for (auto it = pending_.begin(); it != pending_.end();) {
      bool ok = true;
      for (const std::string &v : it->vars)
        ok = ok && (chain.count(v) || !defined_.count(v));
      if (!ok) {
        ++it;
        continue;
      }
      H::Expr cond = anyBoundsQuery_.defined() ? anyBoundsQuery_ || it->condition : it->condition;
      ready.push_back(HI::AssertStmt::make(cond, it->message));
      it = pending_.erase(it);
    }
    HI::Stmt rest = s;
    std::string n;
    if (!pending_.empty() && nextInChain(s, &n).defined()) {
      if (const auto *l = s.as<HI::LetStmt>()) {
        chain.insert(n);
        rest = HI::LetStmt::make(l->name, l->value, place(l->body, chain));
      } else if (const auto *b = s.as<HI::Block>()) {
        rest = HI::Block::make(b->first, place(b->rest, chain));
      }
    }
    if (!pending_.empty() && rest.same_as(s))
      throw std::logic_error(
          "RequirementsFirst: a requirement's variables are not defined at the top of the kernel");
    ready.push_back(rest);
    return HI::Block::make(ready);
  }

  std::set<std::string> defined_, chainNames_;
  H::Expr anyBoundsQuery_;
  std::vector<Pending> pending_;
};

// Halide runs a custom pass as a mutator of the whole body: one RequirementsFirst per body.
class RequirementsFirstPass : public HI::IRMutator {
public:
  using HI::IRMutator::mutate;
  HI::Stmt mutate(const HI::Stmt &s) override { return RequirementsFirst().run(s); }
};

} // namespace

void checkRequirementsFirst(H::Pipeline &p) {
  p.add_custom_lowering_pass(new RequirementsFirstPass);
}

} // namespace attnc
