// clone(): one lowering serves every schedule candidate, each scheduled on its own copy; a JIT
// compile at known sizes keeps only the specialisations they take.
#include "attnc/Compilation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <Halide.h>

#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <random>
#include <set>
#include <sstream>

namespace {

namespace H = Halide;
namespace HI = Halide::Internal;
using attnc::LoweredKernel;

// The kernel's module after the passes, kept with the compilation that owns it.
struct Source {
  std::ostringstream diag;
  std::unique_ptr<attnc::Compilation> comp;
  attnc::attn::KernelOp kernel;

  Source(const std::string &file, const std::string &name) {
    attnc::CompileOptions o;
    o.path = std::string(ATTNC_VARIANTS_DIR) + "/" + file + ".attn";
    o.kernel = name;
    o.mlirThreading = false; // the tests fork: no thread pool to lose in the child
    comp = std::make_unique<attnc::Compilation>(o, diag);
    if (mlir::ModuleOp m = comp->optimized())
      kernel = comp->kernel(m);
  }
  // A lowering of its own, as every candidate got one before clone().
  LoweredKernel fresh() { return attnc::lowerToHalide(kernel); }
};

H::Target host() {
  H::Target t;
  std::string err;
  EXPECT_TRUE(attnc::parseTarget("host", &t, &err)) << err;
  return t;
}

std::string schedule(LoweredKernel &k, const attnc::ScheduleParams &params = {},
                     const std::string &rule = "auto") {
  attnc::ScheduleRequest r;
  r.schedule = rule;
  r.params = params;
  // Not weighed: every bundled variant's first matching rule is the one weighing picks
  // (plan_work_check), and weighing would lower each candidate once more.
  r.weigh = false;
  return attnc::scheduleKernel(k, host(), r).applied;
}

std::string compile(const LoweredKernel &k, attnc::Emit e, const std::string &applied) {
  attnc::ArtefactInfo info;
  info.schedule.applied = applied;
  return attnc::compileArtefact(k, e, host(), info)[0];
}

// Every Func (with its wrappers), Parameter and reduction domain a kernel's pipeline reaches:
// its outputs, tile-visit counts and inputs.
struct Reached : HI::IRGraphVisitor {
  std::set<HI::FunctionPtr> funcs;
  std::set<H::Parameter> params;
  std::set<HI::ReductionDomain, HI::ReductionDomain::Compare> domains;

  explicit Reached(const LoweredKernel &k) {
    for (const attnc::LoweredFunc &f : k.funcs)
      add(f.func.function());
    for (const attnc::OnlineGroup &g : k.onlineGroups) {
      add(g.visits.count.function());
      for (const H::Expr &e : {g.keyCount})
        if (e.defined())
          e.accept(this);
      for (const auto &[name, extent] : g.extents)
        extent.accept(this);
    }
    for (const attnc::KernelParam &p : k.inputs) {
      params.insert(p.param.parameter());
      add(H::Func(p.param).function());
    }
  }

  void add(const HI::Function &f) {
    if (!funcs.insert(f.get_contents()).second)
      return;
    for (const H::Parameter &p : f.output_buffers())
      params.insert(p);
    f.accept(this);
    for (const auto &[name, w] : f.wrappers())
      add(HI::Function(w));
  }

  using HI::IRGraphVisitor::visit;
  void visit(const HI::Call *op) override {
    HI::IRGraphVisitor::visit(op);
    if (op->call_type == HI::Call::Halide && op->func.defined())
      add(HI::Function(op->func));
    if (op->param.defined())
      params.insert(op->param);
  }
  void visit(const HI::Variable *op) override {
    if (op->param.defined())
      params.insert(op->param);
    if (op->reduction_domain.defined() && domains.insert(op->reduction_domain).second)
      op->reduction_domain.accept(this);
  }

  // What of `other` this reaches too, by name.
  std::vector<std::string> shared(const Reached &other) const {
    std::vector<std::string> out;
    for (const HI::FunctionPtr &f : funcs)
      if (other.funcs.count(f))
        out.push_back("Func " + HI::Function(f).name());
    for (const H::Parameter &p : params)
      if (other.params.count(p))
        out.push_back("Parameter " + p.name());
    for (const HI::ReductionDomain &d : domains)
      if (other.domains.count(d))
        out.push_back("RDom of " + d.domain()[0].var);
    return out;
  }
};

struct Variant {
  const char *file, *kernel;
};
void PrintTo(const Variant &v, std::ostream *os) { *os << v.file << ".attn:" << v.kernel; }
const Variant kVariants[] = {{"sdpa", "sdpa"},
                             {"causal_attention", "causal_attention"},
                             {"padding_mask", "padding_mask"},
                             {"msda", "msda"},
                             {"ms_deform_attn_core", "ms_deform_attn_core"},
                             {"dat_attn", "dat_attn"},
                             {"mhsa", "mhsa"}};

// Runs `f` in a child process and returns what it wrote. Halide names Funcs uniquely within a
// process (`s`, then `s$1`, ...), so two lowerings in one process never compile alike; two children
// forked from the same state that create the same Funcs name them alike. Both run at once.
std::pair<std::string, std::string> inChildren(const std::function<std::string()> &a,
                                               const std::function<std::string()> &b) {
  std::string out[2];
  char paths[2][32] = {"/tmp/clone_test_XXXXXX", "/tmp/clone_test_XXXXXX"};
  pid_t pids[2];
  const std::function<std::string()> *fs[2] = {&a, &b};
  for (int i = 0; i < 2; ++i) {
    int fd = mkstemp(paths[i]);
    if (fd < 0)
      return {"mkstemp failed", ""};
    pids[i] = fork();
    if (pids[i] == 0) {
      std::string s;
      try {
        s = (*fs[i])();
      } catch (const H::Error &e) {
        s = std::string("Halide error: ") + e.what();
      } catch (const std::exception &e) {
        s = std::string("error: ") + e.what();
      }
      for (size_t done = 0; done < s.size();) {
        ssize_t n = write(fd, s.data() + done, s.size() - done);
        if (n <= 0)
          _exit(1);
        done += n;
      }
      _exit(0);
    }
    close(fd);
  }
  for (int i = 0; i < 2; ++i) {
    int status = 0;
    waitpid(pids[i], &status, 0);
    std::ifstream in(paths[i], std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    out[i] = s.str();
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      out[i] += "\n(child failed)";
    unlink(paths[i]);
  }
  return {out[0], out[1]};
}

class CloneOfVariant : public ::testing::TestWithParam<Variant> {};

// Scheduled with the default rule, a clone lowers to the same code as a fresh lowering scheduled
// alike. Both children lower once and clone once before scheduling, so Halide's unique names
// (closures, temporaries) come out alike; one schedules the clone, the other the lowering. The
// lowered statements are compared: LLVM's code generation from equal statements adds nothing to
// what is checked, and cost as much again as the lowering.
TEST_P(CloneOfVariant, CompilesAsAFreshLowering) {
  Source src(GetParam().file, GetParam().kernel);
  ASSERT_TRUE(src.kernel) << src.diag.str();
  auto scheduledStmt = [](LoweredKernel &k) {
    std::string applied = schedule(k);
    return applied + "\n" + compile(k, attnc::Emit::Stmt, applied);
  };
  auto [cloned, fresh] = inChildren(
      [&] {
        const LoweredKernel original = src.fresh();
        LoweredKernel copy = attnc::clone(original);
        return scheduledStmt(copy);
      },
      [&] {
        LoweredKernel k = src.fresh();
        const LoweredKernel copy = attnc::clone(k);
        return scheduledStmt(k);
      });
  EXPECT_GT(fresh.size(), 1000u) << fresh;
  EXPECT_TRUE(cloned == fresh) << "the clone's:\n"
                               << cloned.substr(0, 2000) << "\n\nthe fresh lowering's:\n"
                               << fresh.substr(0, 2000);
}

// Scheduling a clone leaves the original as it was: the clone, scheduled (wrappers,
// specializations, rfactor's Funcs), reaches nothing of the original, the original reaches what
// it did before, and a second clone prints the same algorithm and compiles.
TEST_P(CloneOfVariant, LeavesTheOriginalUnscheduled) {
  Source src(GetParam().file, GetParam().kernel);
  ASSERT_TRUE(src.kernel) << src.diag.str();
  const LoweredKernel original = src.fresh();
  const Reached before(original);
  const std::string algorithm = attnc::printAlgorithm(original);
  LoweredKernel first = attnc::clone(original);
  EXPECT_EQ(attnc::printAlgorithm(first), algorithm);
  schedule(first);
  EXPECT_THAT(Reached(first).shared(before), ::testing::IsEmpty());
  const Reached after(original);
  EXPECT_EQ(after.funcs.size(), before.funcs.size());
  EXPECT_EQ(after.params.size(), before.params.size());
  EXPECT_EQ(after.domains.size(), before.domains.size());
  LoweredKernel second = attnc::clone(original);
  EXPECT_EQ(attnc::printAlgorithm(second), algorithm);
  const std::string applied = schedule(second);
  EXPECT_THAT(compile(second, attnc::Emit::Stmt, applied), ::testing::HasSubstr("produce"));
}

INSTANTIATE_TEST_SUITE_P(Bundled, CloneOfVariant, ::testing::ValuesIn(kVariants),
                         [](const ::testing::TestParamInfo<Variant> &i) {
                           return std::string(i.param.kernel);
                         });

H::Pipeline jit(const LoweredKernel &k) {
  H::Pipeline p = k.pipeline();
  p.compile_jit(host());
  return p;
}

// Binds random inputs at `sizes` to `k`'s inputs (masks: 0 or 1) and returns its output.
H::Buffer<float> run(const LoweredKernel &k, H::Pipeline p,
                     const std::map<std::string, int64_t> &sizes) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.f, 1.f);
  auto shape = [&](const attnc::TensorType &t) {
    std::vector<int> s;
    for (auto d = t.dims.rbegin(); d != t.dims.rend(); ++d) {
      int64_t v = 0;
      std::string unbound;
      EXPECT_EQ(d->evaluate(sizes, &v, &unbound), attnc::Dim::EvalError::None) << unbound;
      s.push_back((int)v);
    }
    return s;
  };
  for (const attnc::KernelParam &p : k.inputs) {
    H::ImageParam param = p.param;
    if (p.type.is_float()) {
      H::Buffer<float> b(shape(p.type));
      b.for_each_value([&](float &x) { x = normal(rng); });
      param.set(b);
    } else {
      H::Buffer<int32_t> b(shape(p.type));
      b.for_each_value([&](int32_t &x) { x = normal(rng) > 0.5f; });
      param.set(b);
    }
  }
  H::Buffer<float> out(shape(k.outputTypes[0]));
  p.realize(out);
  return out;
}

float maxRelDiff(const H::Buffer<float> &a, const H::Buffer<float> &b) {
  float diff = 0, scale = 1e-6f;
  a.for_each_element([&](const int *pos) {
    diff = std::max(diff, std::abs(a(pos) - b(pos)));
    scale = std::max(scale, std::abs(b(pos)));
  });
  return diff / scale;
}

// Two candidates of one lowering, each on its own clone and both compiled before either runs,
// compute what the unscheduled kernel computes.
TEST(Clone, TwoCandidatesOfOneLoweringBothCompute) {
  for (const Variant &v : {Variant{"sdpa", "sdpa"}, Variant{"padding_mask", "padding_mask"}}) {
    SCOPED_TRACE(v.kernel);
    Source src(v.file, v.kernel);
    ASSERT_TRUE(src.kernel) << src.diag.str();
    // Two key tiles, the last one partial; several query rows per thread.
    const std::map<std::string, int64_t> sizes = {
        {"B", 1}, {"H", 1}, {"Nq", 9}, {"Nk", 200}, {"D", 8}};
    const LoweredKernel original = src.fresh();
    LoweredKernel a = attnc::clone(original), b = attnc::clone(original);
    // b: every knob of the default rule at its first value that is not the default.
    attnc::Selection sel = attnc::selectSchedule(original, host(), "auto");
    attnc::ScheduleParams other;
    for (const attnc::Knob &k : sel.knobs(original))
      for (int c : k.choices)
        if (c != k.dflt && !other.values.count(k.name))
          other.values[k.name] = c;
    ASSERT_FALSE(other.empty()) << sel.name() << " has no knobs to vary";
    try {
      schedule(a);
      schedule(b, other);
      H::Pipeline pa = jit(a), pb = jit(b);
      H::Buffer<float> outA = run(a, pa, sizes), outB = run(b, pb, sizes);
      LoweredKernel reference = attnc::clone(original); // unscheduled: all inlined
      schedule(reference, {}, "none");
      H::Buffer<float> expected = run(reference, jit(reference), sizes);
      EXPECT_LT(maxRelDiff(outA, expected), 1e-4f);
      EXPECT_LT(maxRelDiff(outB, expected), 1e-4f);
    } catch (const H::Error &e) {
      FAIL() << e.what() << " / " << typeid(e).name();
    }
  }
}

// Wrappers made by a schedule live in the Funcs (an input's in its ImageParam): a scheduled
// kernel cannot be copied faithfully, and is refused rather than copied without them.
TEST(Clone, RefusesAScheduledKernel) {
  Source src("sdpa", "sdpa");
  ASSERT_TRUE(src.kernel) << src.diag.str();
  LoweredKernel k = src.fresh();
  k.inputs[0].param.in();
  EXPECT_THROW(attnc::clone(k), std::logic_error);
}

// A JIT compile at known sizes (ScheduleRequest::runSizes, attn-run's) keeps only the
// specialisations those sizes take: padding_mask's cpu-online plan AOT has 4 copies of the output
// (a whole key tile or fewer keys; whole tiles by head dimension 64, 128 or another), at B1 H1 Nq9
// Nk200 D8 one (whole tiles, neither 64 nor 128) and failures for the copies left out; it computes what the AOT plan computes at those sizes, bit for bit.
TEST(RunSizes, JitAtKnownSizesKeepsTheCopyItTakes) {
  Source src("padding_mask", "padding_mask");
  ASSERT_TRUE(src.kernel) << src.diag.str();
  const std::map<std::string, int64_t> sizes = {
      {"B", 1}, {"H", 1}, {"Nq", 9}, {"Nk", 200}, {"D", 8}};
  const LoweredKernel original = src.fresh();
  LoweredKernel aot = attnc::clone(original), sized = attnc::clone(original);
  attnc::ScheduleRequest r;
  r.weigh = false;
  EXPECT_EQ(attnc::scheduleKernel(aot, host(), r).applied, "cpu-online");
  r.runSizes = sizes;
  EXPECT_EQ(attnc::scheduleKernel(sized, host(), r).applied, "cpu-online");
  const std::string aotStmt = compile(aot, attnc::Emit::Stmt, "cpu-online");
  const std::string sizedStmt = compile(sized, attnc::Emit::Stmt, "cpu-online");
  auto count = [](const std::string &s, const std::string &what) {
    size_t n = 0;
    for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1))
      ++n;
    return n;
  };
  // The online state's loops, in every copy (80 AOT, 16 at these sizes when written).
  const std::string tileLoop = "for (o__state.s";
  EXPECT_EQ(count(aotStmt, "halide_error_specialize_fail"), 0u);
  EXPECT_GT(count(sizedStmt, "halide_error_specialize_fail"), 0u);
  EXPECT_GE(count(aotStmt, tileLoop), 4 * count(sizedStmt, tileLoop));
  EXPECT_LT(sizedStmt.size() * 2, aotStmt.size());
  try {
    H::Buffer<float> a = run(aot, jit(aot), sizes), b = run(sized, jit(sized), sizes);
    EXPECT_EQ(maxRelDiff(b, a), 0.f);
    // Fewer keys than a tile take a copy that was not compiled: an error (Halide's check of the
    // inputs' regions, which are the compiled copy's, comes first), never a wrong result.
    H::Pipeline p = jit(sized);
    std::map<std::string, int64_t> other = sizes;
    other["Nk"] = 100;
    EXPECT_THROW(run(sized, p, other), H::RuntimeError);
  } catch (const H::CompileError &e) {
    FAIL() << e.what();
  }
}

} // namespace
