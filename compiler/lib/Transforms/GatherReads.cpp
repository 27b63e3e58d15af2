// attn-gather-reads: gives an input read at computed subscripts inside a sum, reused across an index, a definition of its own.
//
// Swin's window attention written in window coordinates reads its keys as
// `k(b, h, (wy * ws + j / ws + shift) % Y, (wx * ws + j % ws + shift) % X, d)` inside the score
// contraction over d. That read does not depend on the query position i, so every one of the
// window's 49 queries reads the same 49 x D keys, each through a runtime division and modulo,
// from pixels spread over the image. As its own definition `s__k(b, h, wy, wx, j, d)`, the same
// values form a dense block per window that a schedule can compute once, into a buffer laid out
// for the contraction (cpu-window's window-partitioned plan, docs/language.md §22), and that any
// other schedule inlines back where it is read, as it was.
//
// A read qualifies when it reads a kernel input with the boundary "none", inside a `sum` of a
// top-level definition that no online softmax reads, at subscripts that are index arithmetic with
// a division by a size (`% Y`; not computed from data: a page table's entries stay where they are
// read; a constant divisor costs too little to move), and depends on fewer of the
// enclosing indices (the definition's and the sums') than there are, at least one of the
// definition's own among those it does not use (the reuse a schedule can exploit). The new
// definition's indices are the ones the read uses, in the order of the last subscript each
// appears in (the definition's before the sums' among equals); it carries the unit attribute
// `attn.gather`.
#include "attnc/Transforms/Passes.h"

#include "IRUtils.h"
#include "attnc/Dialect/AttnOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;

namespace attnc {

#define GEN_PASS_DEF_GATHERREADSPASS
#include "attnc/Transforms/Passes.h.inc"

namespace {

// One enclosing index of a read: its block argument, extent and name.
struct Index {
  BlockArgument arg;
  Value extent;
  std::string name;
  bool own; // the definition's own index, not a sum's
};

// The indices around `r` inside `def`: the definition's, then each enclosing sum's, outermost
// first; empty when a region between them is not a sum (a max, a softmax).
SmallVector<Index> enclosingIndices(attn::ReadOp r, attn::DefineOp def) {
  SmallVector<attn::ReduceOp> sums;
  for (Operation *p = r->getParentOp(); p && p != def.getOperation(); p = p->getParentOp()) {
    auto red = dyn_cast<attn::ReduceOp>(p);
    if (!red || red.getKind() != "sum")
      return {};
    sums.insert(sums.begin(), red);
  }
  if (sums.empty())
    return {};
  SmallVector<Index> out;
  Block &body = def.getBody().front();
  for (unsigned k = 0; k < body.getNumArguments(); ++k)
    out.push_back({body.getArgument(k), def.getExtents()[k],
                   cast<StringAttr>(def.getIndices()[k]).getValue().str(), true});
  for (attn::ReduceOp red : sums) {
    Block &rb = red.getBody().front();
    for (unsigned k = 0; k < rb.getNumArguments(); ++k)
      out.push_back({rb.getArgument(k), red.getExtents()[k],
                     cast<StringAttr>(red.getIndices()[k]).getValue().str(), false});
  }
  return out;
}

// Whether `v` divides (or takes a remainder) by a value that is not a constant: an integer
// division per evaluation, where a constant divisor is a multiply and a shift.
bool dividesByRuntimeValue(Value v) {
  // (Subscripts share values, `let`s especially: each operation is looked at once, so a chain
  // of shared values costs its length, not the number of its paths.)
  llvm::SmallVector<Value> work{v};
  llvm::DenseSet<Operation *> seen;
  while (!work.empty()) {
    Operation *op = work.pop_back_val().getDefiningOp();
    if (!op || !seen.insert(op).second)
      continue;
    if (isa<arith::FloorDivSIOp, arith::DivSIOp, arith::DivUIOp, arith::CeilDivSIOp, arith::RemSIOp,
            arith::RemUIOp>(op) &&
        !matchPattern(op->getOperand(1), m_Constant()))
      return true;
    for (Value o : op->getOperands())
      work.push_back(o);
  }
  return false;
}

// Whether `r` reads a kernel input at subscripts computed from indices and sizes alone, one of
// them through a division by a size (`% Y`): what is worth computing once per reuse.
bool computedInputRead(attn::ReadOp r) {
  auto t = dyn_cast<BlockArgument>(r.getTensor());
  // (f32 values only: an integer table's entries are subscripts of other reads.)
  if (!t || !isa<attn::KernelOp>(t.getOwner()->getParentOp()) || r.getBoundary() != "none" ||
      !r.getType().isF32())
    return false;
  bool divides = false;
  for (Value i : r.getIndices()) {
    if (readsTensor(i))
      return false;
    divides = divides || dividesByRuntimeValue(i);
  }
  return divides;
}

struct GatherReadsPass : impl::GatherReadsPassBase<GatherReadsPass> {
  using Base::Base;

  void runOnOperation() override {
    getOperation().walk([&](attn::KernelOp kernel) {
      llvm::StringSet<> taken;
      kernel.walk([&](attn::DefineOp d) { taken.insert(d.getName()); });
      kernel.walk([&](attn::SoftmaxOp s) { taken.insert(s.getName()); });
      SmallVector<attn::DefineOp> defs(kernel.getBody().front().getOps<attn::DefineOp>());
      for (attn::DefineOp def : defs) {
        // A score an online softmax reads is computed per key tile, where the rule that fuses
        // it places its inputs (attn-online-softmax's plan, not a window's).
        if (llvm::any_of(def.getResult().getUsers(), [](Operation *u) {
              return isa<attn::OnlineSoftmaxOp>(u) || u->getParentOfType<attn::OnlineSoftmaxOp>();
            }))
          continue;
        SmallVector<attn::ReadOp> reads;
        def.walk([&](attn::ReadOp r) {
          if (computedInputRead(r))
            reads.push_back(r);
        });
        for (attn::ReadOp r : reads)
          hoist(r, def, taken);
      }
    });
  }

  void hoist(attn::ReadOp r, attn::DefineOp def, llvm::StringSet<> &taken) {
    SmallVector<Index> all = enclosingIndices(r, def);
    if (all.empty())
      return;
    SmallVector<Index> used;
    bool reused = false;
    for (const Index &x : all) {
      if (dependsOn(r.getResult(), x.arg))
        used.push_back(x);
      else if (x.own)
        reused = true;
    }
    if (!reused || used.empty())
      return;
    // In the order of the last subscript each index appears in: the input's innermost
    // dimension's index stays innermost (a contiguous copy), `(b, h, wy, wx, j, e)` for
    // `v(b, h, f(wy, j), g(wx, j), e)`.
    auto lastSubscript = [&](const Index &x) {
      int last = -1;
      for (auto [p, i] : llvm::enumerate(r.getIndices()))
        if (dependsOn(i, x.arg))
          last = (int)p;
      return last;
    };
    std::stable_sort(used.begin(), used.end(), [&](const Index &a, const Index &b) {
      return lastSubscript(a) < lastSubscript(b);
    });
    // The new definition's extents, computed before `def` from sizes and constants (a sum's
    // extent written inside `def`, `ws * ws`, is cloned out; one that depends on an enclosing
    // index leaves the read where it is).
    for (const Index &x : used)
      for (const Index &y : all)
        if (dependsOn(x.extent, y.arg))
          return;
    SmallVector<Value> extents;
    SmallVector<std::string> names;
    llvm::StringSet<> local;
    OpBuilder before(def);
    IRMapping outside;
    for (const Index &x : used) {
      extents.push_back(materialize(x.extent, def, outside, before));
      names.push_back(uniqueName(x.name, local));
    }
    auto input = cast<BlockArgument>(r.getTensor());
    auto kernel = cast<attn::KernelOp>(input.getOwner()->getParentOp());
    std::string inputName = "in" + std::to_string(input.getArgNumber());
    if (auto n = kernel.getArgAttrOfType<StringAttr>(input.getArgNumber(), "attn.name"))
      inputName = n.getValue().str();
    std::string name = uniqueName((def.getName() + "__" + inputName).str(), taken);
    attn::DefineOp g = makeDefine(def, name, extents, names, [&](OpBuilder &b, ValueRange args) {
      IRMapping m;
      for (auto [k, x] : llvm::enumerate(used))
        m.map(x.arg, args[k]);
      return materialize(r.getResult(), def, m, b);
    });
    g->setAttr("attn.gather", UnitAttr::get(g.getContext()));
    OpBuilder b(r);
    SmallVector<Value> idx;
    for (const Index &x : used)
      idx.push_back(x.arg);
    Value v = b.create<attn::ReadOp>(r.getLoc(), r.getType(), g.getResult(), idx,
                                     b.getStringAttr("none"));
    r.getResult().replaceAllUsesWith(v);
    r.erase();
  }
};

} // namespace

} // namespace attnc
