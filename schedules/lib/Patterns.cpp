// Pattern recognition shared by schedule rules: dense, online-softmax, window and sampling patterns.
#include "attnc/Patterns.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>

namespace attnc {
namespace {

namespace H = Halide;
namespace HI = Halide::Internal;

// What an index expression depends on: a float -> int conversion (a coordinate computed from
// data, as ifloor produces) and the reduction's own indices (the sampling points).
struct Taint {
  bool fromFloat = false;
  bool usesRVar = false;
};

class TaintOf : public HI::IRVisitor {
public:
  TaintOf(const std::map<std::string, Taint> &lets, const std::set<std::string> &rvars)
      : lets_(lets), rvars_(rvars) {}
  Taint t;

private:
  using HI::IRVisitor::visit;
  void visit(const HI::Cast *c) override {
    if (c->type.is_int_or_uint() && c->value.type().is_float())
      t.fromFloat = true;
    HI::IRVisitor::visit(c);
  }
  void visit(const HI::Variable *v) override {
    auto it = lets_.find(v->name);
    if (it != lets_.end()) {
      t.fromFloat |= it->second.fromFloat;
      t.usesRVar |= it->second.usesRVar;
    }
    if (rvars_.count(v->name))
      t.usesRVar = true;
  }
  const std::map<std::string, Taint> &lets_;
  const std::set<std::string> &rvars_;
};

// The reads (of kernel inputs or Funcs) whose coordinates are computed from data, and for a
// reduction also vary with its indices: the gathers of a sampling kernel. `contiguous` counts
// those whose innermost coordinate is the Func's innermost index, so that one vector over that
// index (the channel d) reads consecutive memory at every gathered position.
class GatherFinder : public HI::IRVisitor {
public:
  GatherFinder(std::set<std::string> rvars, std::string inner)
      : rvars_(std::move(rvars)), inner_(std::move(inner)) {}
  int gathers = 0;
  int contiguous = 0;

private:
  using HI::IRVisitor::visit;
  Taint taint(const H::Expr &e) const {
    TaintOf v(lets_, rvars_);
    e.accept(&v);
    return v.t;
  }
  void visit(const HI::Let *l) override {
    l->value.accept(this);
    std::optional<Taint> shadowed;
    if (auto it = lets_.find(l->name); it != lets_.end())
      shadowed = it->second;
    lets_[l->name] = taint(l->value);
    l->body.accept(this);
    if (shadowed)
      lets_[l->name] = *shadowed;
    else
      lets_.erase(l->name);
  }
  void visit(const HI::Call *c) override {
    if (c->call_type == HI::Call::Halide || c->call_type == HI::Call::Image) {
      bool gather = false;
      for (const H::Expr &a : c->args) {
        Taint t = taint(a);
        gather |= t.fromFloat && (rvars_.empty() || t.usesRVar);
      }
      if (gather) {
        ++gathers;
        const HI::Variable *v = c->args.empty() ? nullptr : c->args[0].as<HI::Variable>();
        if (v && v->name == inner_)
          ++contiguous;
      }
    }
    HI::IRVisitor::visit(c);
  }
  std::map<std::string, Taint> lets_;
  std::set<std::string> rvars_;
  std::string inner_;
};

// A sampling Func: a sum over sampling points (one update) or a pointwise sample, whose gathers
// all read along the Func's innermost index. Dense and windowed kernels index with integer
// arithmetic on their indices only, so they never match.
bool isSampling(const LoweredFunc &f) {
  if (f.vars.size() < 2)
    return false;
  std::set<std::string> rvars;
  H::Expr value;
  if (f.role == FuncRole::Reduction) {
    if (f.reduceKind != "sum" || f.rvars.empty() || f.func.num_update_definitions() != 1)
      return false;
    for (const H::RVar &r : f.rvars)
      rvars.insert(r.name());
    value = f.func.update_value(0);
  } else if (f.role == FuncRole::Define) {
    if (f.func.has_update_definition())
      return false;
    value = f.func.value();
  } else {
    return false;
  }
  GatherFinder g(rvars, f.vars.back().name());
  value.accept(&g);
  return g.gathers > 0 && g.contiguous == g.gathers;
}

// The names `nameOf` gives the calls that `e` makes with `var` somewhere in their coordinates
// (calls it names "" do not count).
class CallsUsingVar : public H::Internal::IRVisitor {
public:
  CallsUsingVar(std::string var, std::function<std::string(const H::Internal::Call *)> nameOf)
      : var_(std::move(var)), nameOf_(std::move(nameOf)) {}
  std::vector<std::string> found;

private:
  using H::Internal::IRVisitor::visit;
  void visit(const H::Internal::Call *c) override {
    std::string n = nameOf_(c);
    if (!n.empty())
      for (const H::Expr &a : c->args)
        if (H::Internal::expr_uses_var(a, var_)) {
          found.push_back(n);
          break;
        }
    H::Internal::IRVisitor::visit(c);
  }
  std::string var_;
  std::function<std::string(const H::Internal::Call *)> nameOf_;
};

std::vector<std::string>
callsReadWithVar(const H::Expr &e, const std::string &var,
                 std::function<std::string(const H::Internal::Call *)> nameOf) {
  CallsUsingVar v(var, std::move(nameOf));
  e.accept(&v);
  return v.found;
}

// Halide names of what `e` calls at a coordinate read from data (a page table's entry).
std::set<std::string> gatheredCalls(const H::Expr &e) {
  struct Gathers : H::Internal::IRVisitor {
    std::set<std::string> found;
    using H::Internal::IRVisitor::visit;
    void visit(const H::Internal::Call *c) override {
      if (c->call_type == H::Internal::Call::Image || c->call_type == H::Internal::Call::Halide)
        for (const H::Expr &a : c->args)
          if (readsData(a))
            found.insert(c->name);
      H::Internal::IRVisitor::visit(c);
    }
  } g;
  e.accept(&g);
  return g.found;
}

// Names (LoweredFunc::name) of the kernel's Funcs that `e` calls with `var` in their coordinates.
std::vector<std::string> funcsReadWithVar(const LoweredKernel &k, const H::Expr &e,
                                          const std::string &var) {
  return callsReadWithVar(e, var, [&](const H::Internal::Call *c) {
    if (c->call_type == H::Internal::Call::Halide)
      for (const LoweredFunc &f : k.funcs)
        if (c->name == f.func.name())
          return f.name;
    return std::string();
  });
}

} // namespace

// Halide reads an ImageParam through an implicit Func; compare Halide's own names, which a second
// lowering of the same kernel in one process (attn-tune) uniquifies (`k_im$2`).
std::vector<std::string> inputsReadWithVar(const LoweredKernel &k, const H::Expr &e,
                                           const std::string &var) {
  return callsReadWithVar(e, var, [&](const H::Internal::Call *c) {
    for (const KernelParam &p : k.inputs)
      if (c->name == p.param.name() || c->name == H::Func(p.param).name())
        return p.name;
    return std::string();
  });
}

// Index of a Func of k (a pointer into k.funcs).
static FuncIndex indexIn(const LoweredKernel &k, const LoweredFunc *f) {
  return static_cast<FuncIndex>(f - k.funcs.data());
}

bool DensePattern::contains(FuncIndex f) const {
  return f == out || f == score || std::find(softmax.begin(), softmax.end(), f) != softmax.end() ||
         std::find(inlined.begin(), inlined.end(), f) != inlined.end();
}

std::optional<DensePattern> findDensePattern(const LoweredKernel &k) {
  for (const LoweredFunc &o : k.funcs) {
    if (!o.isOutput || o.role != FuncRole::Reduction || o.reduceKind != "sum" ||
        o.rvars.size() != 1 || o.vars.size() < 2)
      continue;
    for (const std::string &r : o.reads) {
      const LoweredFunc *p = k.find(r);
      if (!p || p->role != FuncRole::Softmax || p->softmaxAxes.size() != 1)
        continue;
      if (p->softmaxAxes[0] != (int)p->vars.size() - 1 || p->vars.size() != o.vars.size())
        continue;
      const LoweredFunc *score = nullptr;
      std::vector<const LoweredFunc *> softmax, inlined;
      for (const LoweredFunc &f : k.funcs)
        if (f.definition == p->definition)
          softmax.push_back(&f);
      // Walk from the softmax scores through pointwise definitions to the contraction.
      const LoweredFunc *cur = k.find(p->definition + "__score");
      for (int depth = 0; cur && depth < 8 && !score; ++depth) {
        const LoweredFunc *next = nullptr;
        for (const std::string &rn : cur->reads) {
          const LoweredFunc *f = k.find(rn);
          if (!f)
            continue;
          if (f->role == FuncRole::Reduction && f->reduceKind == "sum" && f->rvars.size() == 1 &&
              f->vars.size() == p->vars.size() && !f->isOutput) {
            score = f;
            break;
          }
          if (f->role == FuncRole::Define && !f->isOutput)
            next = f;
        }
        if (!score && next)
          inlined.push_back(next);
        cur = next;
      }
      if (!score)
        continue;
      // The rules take the contraction's last two indices as (row, key), in the softmax's
      // order. A contraction's indices follow their first use, so `sum(d) k(j, d) * q(i, d)` is
      // a Func of (j, i): its rows would be unrolled by a key count (a raw Halide error). Such
      // scores decline (the generic rule schedules them).
      const size_t n = p->varNames.size();
      if (n < 2 || score->varNames.size() != n || score->varNames[n - 2] != p->varNames[n - 2] ||
          score->varNames[n - 1] != p->varNames[n - 1])
        continue;
      // And the output's rows are the softmax's, the value index last: a transposed output
      // `o(e, n)` had its rows unrolled by the row count too.
      if (!std::equal(p->varNames.begin(), p->varNames.end() - 1, o.varNames.begin()))
        continue;
      // Every Func the rule places inside the query tile must be consumed only there.
      std::vector<const LoweredFunc *> members(softmax.begin(), softmax.end());
      members.push_back(&o);
      members.push_back(score);
      members.insert(members.end(), inlined.begin(), inlined.end());
      auto isMember = [&](const LoweredFunc *f) {
        return std::find(members.begin(), members.end(), f) != members.end();
      };
      bool private_ = true;
      for (const LoweredFunc *m : members) {
        if (m == &o)
          continue;
        if (m->isOutput)
          private_ = false;
        for (const LoweredFunc &f : k.funcs)
          if (!isMember(&f) && std::find(f.reads.begin(), f.reads.end(), m->name) != f.reads.end())
            private_ = false;
      }
      if (!private_)
        continue;
      std::vector<std::string> keys =
          inputsReadWithVar(k, score->func.update_value(0), score->vars.back().name());
      if (keys.size() != 1)
        continue;
      DensePattern d;
      d.out = indexIn(k, &o);
      d.score = indexIn(k, score);
      for (const LoweredFunc *f : softmax)
        d.softmax.push_back(indexIn(k, f));
      for (const LoweredFunc *f : inlined)
        d.inlined.push_back(indexIn(k, f));
      d.keyInput = keys[0];
      return d;
    }
  }
  return std::nullopt;
}

std::vector<OnlinePattern> findOnline(const LoweredKernel &k) {
  std::vector<OnlinePattern> groups;
  for (size_t gi = 0; gi < k.onlineGroups.size(); ++gi) {
    const OnlineGroup &og = k.onlineGroups[gi];
    const LoweredFunc &o = k.funcs[og.output];
    const LoweredFunc *maskedScore = &k.funcs[og.masked().score],
                      *maskedTexp = &k.funcs[og.masked().texp];
    OnlinePattern g;
    g.group = gi;
    std::vector<const LoweredFunc *> scores;
    for (const OnlineChain &c : og.chains)
      scores.push_back(&k.funcs[c.score]);
    // Rows: the score's indices but the key; the query is the innermost of them.
    std::vector<std::string> rows;
    for (size_t i = 0; i < maskedScore->varNames.size(); ++i)
      if ((int)i != maskedTexp->softmaxAxes[0])
        rows.push_back(maskedScore->varNames[i]);
    if (!rows.empty())
      g.queryVar = rows.back();
    const std::string &last = o.varNames.empty() ? std::string() : o.varNames.back();
    if (!last.empty() && std::find(rows.begin(), rows.end(), last) == rows.end())
      g.valueVar = last;
    // Contractions: sums read by the scores (through pointwise definitions) over exactly the
    // score's indices, read by nothing outside the group.
    std::vector<const LoweredFunc *> contractions;
    std::vector<const LoweredFunc *> frontier = scores;
    for (int depth = 0; depth < 8 && !frontier.empty(); ++depth) {
      std::vector<const LoweredFunc *> next;
      for (const LoweredFunc *cur : frontier)
        for (const std::string &rn : cur->reads) {
          const LoweredFunc *f = k.find(rn);
          if (!f || f->isOutput)
            continue;
          if (f->role == FuncRole::Define)
            next.push_back(f);
          if (f->role == FuncRole::Reduction && f->reduceKind == "sum" && f->rvars.size() == 1 &&
              f->varNames == maskedScore->varNames &&
              std::find(contractions.begin(), contractions.end(), f) == contractions.end())
            contractions.push_back(f);
        }
      frontier = next;
    }
    // Private: every reader is in the group, or a pointwise definition (inlined) whose readers are.
    std::function<bool(const LoweredFunc *, int)> isPrivate = [&](const LoweredFunc *m, int depth) {
      if (depth > 8 || m->isOutput)
        return false;
      for (const LoweredFunc &f : k.funcs) {
        if (std::find(f.reads.begin(), f.reads.end(), m->name) == f.reads.end())
          continue;
        if (f.definition == o.definition)
          continue;
        if (f.role != FuncRole::Define || !isPrivate(&f, depth + 1))
          return false;
      }
      return true;
    };
    contractions.erase(std::remove_if(contractions.begin(), contractions.end(),
                                      [&](const LoweredFunc *c) { return !isPrivate(c, 0); }),
                       contractions.end());
    const std::string key = maskedScore->varNames.empty()
                                ? std::string()
                                : maskedScore->varNames[maskedTexp->softmaxAxes[0]];
    // (Not one read through a table, a paged cache: Halide bounds such a read by the whole
    // tensor, so a per-head copy of it copied the whole cache for every head, 60x PyTorch's time
    // at B4 H32 D128.)
    for (const LoweredFunc *c : contractions) {
      const std::set<std::string> gathered = gatheredCalls(c->func.update_value(0));
      for (const std::string &in : inputsReadWithVar(k, c->func.update_value(0), key)) {
        bool viaTable = false;
        for (const KernelParam &p : k.inputs)
          if (p.name == in)
            viaTable = gathered.count(p.param.name()) || gathered.count(H::Func(p.param).name());
        if (!viaTable && std::find(g.keyInputs.begin(), g.keyInputs.end(), in) == g.keyInputs.end())
          g.keyInputs.push_back(in);
      }
    }
    for (const LoweredFunc *c : contractions)
      for (const std::string &fn : funcsReadWithVar(k, c->func.update_value(0), key)) {
        const LoweredFunc *f = k.find(fn);
        if (!f || f->definition == o.definition ||
            std::find(contractions.begin(), contractions.end(), f) != contractions.end())
          continue;
        if (std::find(g.keyFuncs.begin(), g.keyFuncs.end(), fn) == g.keyFuncs.end())
          g.keyFuncs.push_back(fn);
      }
    // Rows share keys unless every float tensor read along the key is read with the query row as
    // well (through a table too: a paged cache's pages(b, j / S) names the row b).
    if (!contractions.empty() && !g.queryVar.empty()) {
      bool anyKeyRead = false, shared = false;
      for (const LoweredFunc *c : contractions) {
        const H::Expr body = c->func.update_value(0);
        std::vector<std::string> withRow = inputsReadWithVar(k, body, g.queryVar);
        std::vector<std::string> fwithRow = funcsReadWithVar(k, body, g.queryVar);
        for (const std::string &in : inputsReadWithVar(k, body, key))
          for (const KernelParam &p : k.inputs)
            if (p.name == in && p.param.type().is_float()) {
              anyKeyRead = true;
              shared |= std::find(withRow.begin(), withRow.end(), in) == withRow.end();
            }
        for (const std::string &fn : funcsReadWithVar(k, body, key))
          if (const LoweredFunc *f = k.find(fn); f && f->definition != o.definition) {
            anyKeyRead = true;
            shared |= std::find(fwithRow.begin(), fwithRow.end(), fn) == fwithRow.end();
          }
      }
      g.rowsShareKeys = !anyKeyRead || shared;
    }
    for (const LoweredFunc *c : contractions)
      for (const std::string &fn : funcsReadWithVar(k, c->func.update_value(0), g.queryVar)) {
        const LoweredFunc *f = k.find(fn);
        if (!f || f->definition == o.definition || f->role != FuncRole::Define || f->isOutput ||
            f->func.num_update_definitions() > 0 ||
            std::find(contractions.begin(), contractions.end(), f) != contractions.end() ||
            std::find(g.keyFuncs.begin(), g.keyFuncs.end(), fn) != g.keyFuncs.end() ||
            std::find(g.queryFuncs.begin(), g.queryFuncs.end(), fn) != g.queryFuncs.end())
          continue;
        // Of inputs only: a projection's bias around its sum (mhsa's q) stays with its sum.
        if (std::any_of(f->reads.begin(), f->reads.end(),
                        [&](const std::string &r) { return k.find(r) != nullptr; }))
          continue;
        g.queryFuncs.push_back(fn);
      }
    for (const LoweredFunc *c : contractions)
      g.contractions.push_back(indexIn(k, c));
    groups.push_back(g);
  }
  return groups;
}

// A softmax whose axes all have small constant extents is a window: every query has its own
// w x w keys, so its statistics are cheap to compute next to the consumer, row by row.
std::optional<WindowPattern> findWindow(const LoweredKernel &k) {
  for (const LoweredFunc &mx : k.funcs) {
    if (mx.role != FuncRole::SoftmaxMax || mx.rvars.empty())
      continue;
    int64_t points = 1;
    bool constant = true;
    for (const H::RVar &r : mx.rvars) {
      std::optional<int64_t> e = H::Internal::as_const_int(H::Internal::simplify(r.extent()));
      constant &= e.has_value();
      if (e)
        points *= *e;
    }
    if (!constant || points > 256 || mx.vars.empty())
      continue;
    const LoweredFunc *p = k.find(mx.definition);
    if (!p || p->isOutput)
      continue;
    std::vector<const LoweredFunc *> parts, consumers;
    for (const LoweredFunc &f : k.funcs)
      if (f.definition == mx.definition && &f != p && !f.isOutput)
        parts.push_back(&f);
    for (const LoweredFunc &f : k.funcs)
      if (std::find(f.reads.begin(), f.reads.end(), p->name) != f.reads.end())
        consumers.push_back(&f);
    // Only the consumers may read the parts (besides each other), and each consumer must be a
    // root-computed reduction we can place them in.
    bool ok = consumers.size() == 1 && consumers[0]->role == FuncRole::Reduction &&
              consumers[0]->vars.size() >= 3;
    for (const LoweredFunc *part : parts)
      for (const LoweredFunc &f : k.funcs) {
        bool reads = std::find(f.reads.begin(), f.reads.end(), part->name) != f.reads.end();
        bool member = &f == p || std::find(parts.begin(), parts.end(), &f) != parts.end();
        if (reads && !member)
          ok = false;
      }
    if (!ok)
      continue;
    WindowPattern w;
    // Definitions at the score's points read only by the score (and each other), found from the
    // score outwards; a definition another Func also reads stays out.
    const LoweredFunc *score = nullptr;
    for (const LoweredFunc *f : parts)
      if (f->role == FuncRole::SoftmaxScore)
        score = f;
    std::vector<const LoweredFunc *> defs;
    auto isDef = [&](const LoweredFunc *f) {
      return std::find(defs.begin(), defs.end(), f) != defs.end();
    };
    for (bool grew = score != nullptr; grew;) {
      grew = false;
      for (const LoweredFunc &f : k.funcs) {
        // The same indices, in any order (a contraction's follow their first use).
        std::vector<std::string> a = f.varNames, b = score->varNames;
        std::sort(a.begin(), a.end());
        std::sort(b.begin(), b.end());
        if (isDef(&f) || f.isOutput || a != b || f.definition == p->name)
          continue;
        bool readByScore = false, readElsewhere = false;
        for (const LoweredFunc &g : k.funcs) {
          if (std::find(g.reads.begin(), g.reads.end(), f.name) == g.reads.end())
            continue;
          if (&g == score || isDef(&g))
            readByScore = true;
          else
            readElsewhere = true;
        }
        if (readByScore && !readElsewhere)
          defs.push_back(&f), grew = true;
      }
    }
    for (const LoweredFunc *f : defs)
      w.scoreDefs.push_back(indexIn(k, f));
    for (const LoweredFunc *f : parts)
      w.parts.push_back(indexIn(k, f));
    for (const LoweredFunc *f : consumers)
      w.consumers.push_back(indexIn(k, f));
    w.rowVar = mx.varNames.back();
    return w;
  }
  return std::nullopt;
}

// Funcs that sample: see isSampling.
std::vector<FuncIndex> findSampling(const LoweredKernel &k) {
  std::vector<FuncIndex> out;
  for (FuncIndex i = 0; i < k.funcs.size(); ++i)
    if (isSampling(k.funcs[i]))
      out.push_back(i);
  return out;
}

} // namespace attnc
