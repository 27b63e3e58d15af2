// attn-bench's framework: agreement first, then median timings, for every implementation of a case.
#include "bench.h"

#include "torch_baseline.h"

#include "attnc/float16.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>

namespace attn_bench {

size_t Tensor::numel() const {
  size_t n = 1;
  for (int64_t d : shape)
    n *= (size_t)d;
  return n;
}

attnc::TensorView Tensor::view() {
  return isInt ? attnc::TensorView::i32(i.data(), shape) : attnc::TensorView::f32(f.data(), shape);
}

Tensor Tensor::randn(std::vector<int64_t> shape, unsigned seed, float mean, float stddev) {
  Tensor t;
  t.shape = std::move(shape);
  t.f.resize(t.numel());
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(mean, stddev);
  for (float &x : t.f)
    x = d(rng);
  return t;
}

Tensor Tensor::uniform(std::vector<int64_t> shape, unsigned seed, float lo, float hi) {
  Tensor t;
  t.shape = std::move(shape);
  t.f.resize(t.numel());
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  for (float &x : t.f)
    x = d(rng);
  return t;
}

Tensor Tensor::ints(std::vector<int64_t> shape, std::vector<int32_t> values) {
  Tensor t;
  t.shape = std::move(shape);
  t.i = std::move(values);
  t.isInt = true;
  return t;
}

Tensor Tensor::zeros(std::vector<int64_t> shape) {
  Tensor t;
  t.shape = std::move(shape);
  t.f.assign(t.numel(), 0.f);
  return t;
}

double loadAverage() {
  std::ifstream f("/proc/loadavg");
  double l = -1;
  if (!(f >> l))
    return -1;
  return l;
}

namespace {

// The agreement check guards against a broken build or miswired inputs (errors of order one),
// not against rounding: the numerics tests hold the kernels to fp64 references. fp32 results of
// these sizes differ from the plain fp32 reference by ~1e-6 of their magnitude; 1e-4 leaves room
// for long sums (SDPA's 2048 keys) without letting a wrong result through.
constexpr double kRelTolerance = 1e-4;

double seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double maxAbsDiff(const std::vector<float> &a, const std::vector<float> &b) {
  if (a.size() != b.size())
    return INFINITY;
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::abs((double)a[i] - (double)b[i]);
    if (std::isnan(d))
      return INFINITY;
    m = std::max(m, d);
  }
  return m;
}

// One implementation: how to run it once (its output lands in `out`, or in `half` for a kernel
// that stores bf16/f16, converted into `out` after its agreement run: never while timed).
struct Runner {
  ImplResult res;
  std::function<void()> run; // empty for the PyTorch baseline, which runs and times itself
  std::vector<float> out;
  std::vector<uint16_t> half;
  double firstSeconds = 0;
};

void setMedian(Runner &r, std::vector<double> t) {
  std::sort(t.begin(), t.end());
  const size_t n = t.size();
  r.res.seconds = n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
  r.res.runs = (int)n;
}

// Untimed runs, `o.warmup` seconds of them (none after a first run that took longer: a multi-
// second baseline is warm after it). On the 2-core guests the first runs of a case (after
// PyTorch's process, run just before for the agreement check) were slow for tens of
// milliseconds: msda 56x56 on Zen 5 took 6.5, 4.7, ... 3.3 ms over its first ten runs, their
// median 4.7 ms, where 40 runs had a median of 2.6. PyTorch's timing (torch_baseline.py) warms up
// by the same budget, so both sides are timed warm.
void warmUp(Runner &r, const Options &o) {
  if (r.firstSeconds >= o.warmup)
    return;
  const auto start = std::chrono::steady_clock::now();
  do
    r.run();
  while (seconds(start, std::chrono::steady_clock::now()) < o.warmup);
}

// The median of the timed runs. The first (agreement) run and warmUp's are the warm-up: page
// faults, the thread pool's start. Where it alone took longer than the budget, it is also the only sample (a cold
// run of a multi-second naive baseline differs from a warm one by far less than the noise).
void timeRunner(Runner &r, const Options &o) {
  if (r.firstSeconds >= o.budget) {
    r.res.seconds = r.firstSeconds;
    r.res.runs = 1;
    r.res.note = "one run (the agreement run) exceeded the time budget";
    return;
  }
  warmUp(r, o);
  std::vector<double> t;
  double total = 0;
  const int minRuns = std::min(3, o.reps);
  while ((int)t.size() < o.reps && !(total >= o.budget && (int)t.size() >= minRuns)) {
    const auto a = std::chrono::steady_clock::now();
    r.run();
    const auto b = std::chrono::steady_clock::now();
    t.push_back(seconds(a, b));
    total += t.back();
  }
  setMedian(r, t);
}

// timeRunner for several implementations at once, in rounds of one run each; an implementation
// leaves the rounds when it has its runs (as timeRunner counts them).
void timeInTurns(const std::vector<Runner *> &rs, const Options &o) {
  for (Runner *r : rs)
    warmUp(*r, o);
  std::vector<std::vector<double>> t(rs.size());
  std::vector<double> total(rs.size(), 0);
  std::vector<bool> done(rs.size(), false);
  const int minRuns = std::min(3, o.reps);
  for (size_t i = 0; i < rs.size(); ++i)
    if (rs[i]->firstSeconds >= o.budget) {
      timeRunner(*rs[i], o); // one run only
      done[i] = true;
    }
  for (bool any = true; any;) {
    any = false;
    for (size_t i = 0; i < rs.size(); ++i) {
      if (done[i])
        continue;
      if ((int)t[i].size() >= o.reps || (total[i] >= o.budget && (int)t[i].size() >= minRuns)) {
        done[i] = true;
        continue;
      }
      any = true;
      const auto a = std::chrono::steady_clock::now();
      rs[i]->run();
      t[i].push_back(seconds(a, std::chrono::steady_clock::now()));
      total[i] += t[i].back();
    }
  }
  for (size_t i = 0; i < rs.size(); ++i)
    if (!t[i].empty())
      setMedian(*rs[i], t[i]);
}

std::string rateText(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v >= 100 ? "%.0f" : v >= 10 ? "%.1f" : "%.2f", v);
  return buf;
}

} // namespace

CaseResult runCase(Case &c, const Options &o) {
  CaseResult r;
  r.variant = c.variant;
  r.shape = c.shape;
  r.flopFormula = c.flopFormula;
  r.dtype = attnc::dtype_name(c.dtype);
  r.memoryBound = c.memoryBound;
  r.flops = c.flops;
  r.bytes = c.bytes;
  r.notes = c.notes;
  r.loadBefore = loadAverage();
  std::printf("== %s  %s  %s  (%s-bound; %s = %.3g GFLOP; %.3g MB compulsory traffic; load %.2f)\n",
              c.variant.c_str(), c.shape.c_str(), r.dtype.c_str(),
              c.memoryBound ? "memory" : "compute", c.flopFormula.c_str(), c.flops * 1e-9,
              c.bytes * 1e-6, r.loadBefore);
  std::fflush(stdout);

  // A reduced-precision case's kernels read the inputs' bf16/f16 bits (the float values are
  // already rounded to the type, runReduced); an f32 build (Case::f32Kernel) reads the floats.
  const bool reduced = c.dtype != attnc::DType::F32;
  std::vector<attnc::TensorView> ins, ins32;
  for (Tensor &t : c.inputs) {
    ins32.push_back(t.view());
    if (!reduced || t.isInt) {
      ins.push_back(t.view());
      continue;
    }
    t.half.resize(t.f.size());
    for (size_t i = 0; i < t.f.size(); ++i)
      t.half[i] = attnc::float_to_half_bits(t.f[i], c.dtype);
    ins.push_back(attnc::TensorView::contiguous(t.half.data(), c.dtype, t.shape));
  }
  size_t outN = 1;
  for (int64_t d : c.outShape)
    outN *= (size_t)d;
  const std::string all = std::to_string(o.threads);

  std::vector<Runner> runners;
  // The unmasked kernel (Case::unmasked) reads the first unmaskedInputs of the case's inputs.
  const std::vector<attnc::TensorView> unmaskedIns(
      ins.begin(), ins.begin() + std::min(c.unmaskedInputs, ins.size()));
  auto addKernel = [&](const std::string &name, const std::string &kind, const attnc::KernelDesc *k,
                       const std::string &threads, const std::vector<attnc::TensorView> &args,
                       attnc::DType outType) {
    Runner rn;
    rn.res = {name, kind, threads};
    rn.out.assign(outN, NAN);
    if (outType != attnc::DType::F32)
      rn.half.assign(outN, 0);
    const size_t at = runners.size();
    rn.run = [&, at, k, outType] {
      Runner &self = runners[at];
      const attnc::TensorView o =
          outType == attnc::DType::F32
              ? attnc::TensorView::f32(self.out.data(), c.outShape)
              : attnc::TensorView::contiguous(self.half.data(), outType, c.outShape);
      attnc::Status st = attnc::call(*k, args, {o});
      if (!st.ok()) {
        // A failing call is a wrong result: NaN everywhere makes the agreement check say so.
        if (self.res.note.empty())
          self.res.note = "call failed: " + st.message();
        std::fill(self.out.begin(), self.out.end(), NAN);
        self.half.clear();
      }
    };
    runners.push_back(std::move(rn));
  };
  auto addCpp = [&](const std::string &name, const std::string &kind,
                    std::function<std::vector<float>()> fn) {
    Runner rn;
    rn.res = {name, kind, "1"};
    const size_t at = runners.size();
    rn.run = [&runners, at, fn] { runners[at].out = fn(); };
    runners.push_back(std::move(rn));
  };

  addKernel("attnc (auto)", "attnc", c.kernel, all, ins, c.dtype);
  addCpp("naive C++ reference", "reference", c.reference);
  if (c.unscheduled)
    addKernel("attnc (none)", "unscheduled", c.unscheduled, "1", ins, c.dtype);
  else {
    Runner rn;
    rn.res = {"attnc (none)", "unscheduled", "1"};
    rn.res.note = c.unscheduledNote.empty() ? "not timed at this shape (too slow unscheduled)"
                                            : c.unscheduledNote;
    runners.push_back(std::move(rn));
  }
  // A schedule that compiles to what the default does (a tuning database that kept the default)
  // is not timed against itself: run-to-run noise would pass for a difference.
  for (auto &[name, k] : c.schedules) {
    if (k->schedule && c.kernel->schedule && std::string(k->schedule) == c.kernel->schedule) {
      Runner rn;
      rn.res = {"attnc (" + name + ")", "schedule", all};
      rn.res.note = std::string("the same schedule as attnc (auto): ") + k->schedule;
      rn.res.sameAsAuto = true;
      runners.push_back(std::move(rn));
      continue;
    }
    addKernel("attnc (" + name + ")", "schedule", k, all, ins, c.dtype);
  }
  for (auto &[name, k] : c.algorithms)
    addKernel("attnc (" + name + ")", "schedule", k, all, ins, c.dtype);
  if (c.f32Kernel)
    addKernel("attnc (f32 build)", "schedule", c.f32Kernel, all, ins32, attnc::DType::F32);
  if (c.unmasked)
    addKernel("attnc (" + c.unmaskedName + ", no mask)", "unmasked", c.unmasked, all, unmaskedIns,
              c.dtype);
  for (auto &[name, fn] : c.cpp)
    addCpp(name, "cpp", fn);
  if (o.torch) {
    Runner rn;
    rn.res = {"PyTorch " + o.torch->version(), "torch", ""};
    if (c.torchEntry.empty())
      rn.res.note = "no PyTorch formulation of this variant in torch_baseline.py";
    runners.push_back(std::move(rn));
  }

  // Agreement: every implementation once, compared with the reference's output.
  const size_t refAt = 1;
  for (size_t i : std::vector<size_t>{refAt, 0}) {
    const auto a = std::chrono::steady_clock::now();
    runners[i].run();
    runners[i].firstSeconds = seconds(a, std::chrono::steady_clock::now());
  }
  for (size_t i = 2; i < runners.size(); ++i) {
    Runner &rn = runners[i];
    if (rn.res.kind == "torch") {
      if (c.torchEntry.empty())
        continue;
      std::vector<std::string> names;
      for (int k = 0; k < c.kernel->num_inputs; ++k)
        names.push_back(c.kernel->inputs[k].name);
      TorchBaseline::Result tr;
      std::string err;
      if (!o.torch->run(c.torchEntry, c.torchConsts, names, c.inputs, c.outShape,
                        attnc::dtype_name(c.dtype), o, &tr, &err)) {
        // PyTorch's own failure (a version without an op, say) is no disagreement of ours.
        rn.res.note = err;
        continue;
      }
      rn.out = std::move(tr.out);
      rn.res.seconds = tr.seconds;
      rn.res.runs = tr.runs;
      rn.res.threads = std::to_string(tr.threads);
      continue;
    }
    if (!rn.run)
      continue;
    const auto a = std::chrono::steady_clock::now();
    rn.run();
    rn.firstSeconds = seconds(a, std::chrono::steady_clock::now());
  }
  for (Runner &rn : runners)
    if (!rn.half.empty())
      for (size_t i = 0; i < outN; ++i)
        rn.out[i] = attnc::half_bits_to_float(rn.half[i], c.dtype);
  const std::vector<float> &ref = runners[refAt].out;
  double refMax = 0;
  for (float v : ref)
    refMax = std::max(refMax, (double)std::abs(v));
  // A bf16/f16 output is the f32 result rounded (half a unit: 2^-9 of it in bf16, 2^-12 in f16)
  // and PyTorch's in that type rounds its intermediates too: 4 units of the type.
  const double rel = c.dtype == attnc::DType::BF16  ? 0x1p-6
                     : c.dtype == attnc::DType::F16 ? 0x1p-9
                                                    : kRelTolerance;
  r.tolerance = rel * std::max(1.0, refMax);
  std::printf("   max|diff| vs the naive C++ reference (tolerance %.1e):", r.tolerance);
  for (Runner &rn : runners) {
    if (rn.res.kind == "reference" || rn.res.kind == "unmasked" || rn.out.empty())
      continue;
    rn.res.maxDiff = maxAbsDiff(rn.out, ref);
    const bool ok = rn.res.maxDiff <= r.tolerance;
    // PyTorch in bf16/f16 rounds its intermediates to the type (grid_sample's pixel coordinates
    // too: ms_deform_attn_core in bf16 is off by up to 0.05 at values of ~3): its error is
    // reported, not held against the case.
    if (!ok && reduced && rn.res.kind == "torch") {
      rn.res.note = "its result differs from the f32 reference by " +
                    std::to_string(rn.res.maxDiff) + " (PyTorch computes in " + r.dtype + ")";
      std::printf("  %s %.2g (beyond the tolerance: PyTorch computes in %s)", rn.res.name.c_str(),
                  rn.res.maxDiff, r.dtype.c_str());
      continue;
    }
    r.agree &= ok;
    std::printf("  %s %.2g%s", rn.res.name.c_str(), rn.res.maxDiff, ok ? "" : " (DISAGREES)");
  }
  std::printf("\n");
  if (!r.agree) {
    for (Runner &rn : runners)
      if (!rn.res.note.empty())
        std::printf("   %s: %s\n", rn.res.name.c_str(), rn.res.note.c_str());
    std::printf("   not timed: an implementation disagrees with the reference\n\n");
    for (Runner &rn : runners)
      r.impls.push_back(rn.res);
    r.loadAfter = loadAverage();
    return r;
  }

  if (!c.tileSource.empty())
    countTiles(c, &r);

  // Timing. The attnc kernels (the default schedule and the other schedules of the same algorithm)
  // take turns, one run each per round, so that a change of the machine's load during the case
  // weighs on all of them alike and their ratios compare like with like; then the baselines.
  std::vector<Runner *> turns;
  for (Runner &rn : runners)
    if (rn.run && ((rn.res.maxDiff >= 0 && (rn.res.kind == "attnc" || rn.res.kind == "schedule")) ||
                   (rn.res.kind == "unmasked" && rn.res.note.empty())))
      turns.push_back(&rn);
  timeInTurns(turns, o);
  for (Runner &rn : runners)
    if (rn.run && (rn.res.maxDiff >= 0 || rn.res.kind == "reference") &&
        std::find(turns.begin(), turns.end(), &rn) == turns.end())
      timeRunner(rn, o);
  const double base = runners[0].res.seconds;
  r.unmaskedName = c.unmaskedName;
  for (Runner &rn : runners)
    if (rn.res.kind == "unmasked" && rn.res.runs > 0 && base > 0)
      r.vsUnmasked = base / rn.res.seconds;
  std::printf("   %-34s %5s %11s %5s %9s %7s %8s %8s\n", "implementation", "thr", "median ms",
              "runs", "GFLOP/s", "%peak", "GB/s", "t/t_auto");
  for (Runner &rn : runners) {
    const ImplResult &x = rn.res;
    if (x.runs == 0) {
      if (x.kind != "torch" || !x.note.empty())
        std::printf("   %-34s %5s   %s\n", x.name.c_str(), x.threads.c_str(), x.note.c_str());
      continue;
    }
    const double gf = c.flops / x.seconds * 1e-9, gb = c.bytes / x.seconds * 1e-9;
    if (x.kind == "unmasked") { // it does other work: the case's FLOP count is not its own
      std::printf("   %-34s %5s %11.3f %5d %9s %7s %8s %8.2f\n", x.name.c_str(), x.threads.c_str(),
                  x.seconds * 1e3, x.runs, "-", "-", "-", x.seconds / base);
      continue;
    }
    std::printf("   %-34s %5s %11.3f %5d %9s %6.1f%% %8s %8.2f\n", x.name.c_str(),
                x.threads.c_str(), x.seconds * 1e3, x.runs, rateText(gf).c_str(),
                o.peakGflops > 0 ? 100 * gf / o.peakGflops : 0.0, rateText(gb).c_str(),
                x.seconds / base);
  }
  if (r.vsUnmasked > 0)
    std::printf("   time / %s's (no mask, timed in turns): %.2f\n", c.unmaskedName.c_str(),
                r.vsUnmasked);
  for (const TileCount &t : r.tiles)
    std::printf("   %s: key tiles visited %lld of %lld (%.1f%%), %lld with the mask test (blocks "
                "of %d query row%s x %d keys)\n",
                t.output.c_str(), (long long)t.visited, (long long)t.total,
                t.total ? 100.0 * t.visited / t.total : 0.0, (long long)t.maskTested,
                t.rowsPerBlock, t.rowsPerBlock == 1 ? "" : "s", t.tile);
  if (!r.tileError.empty())
    std::printf("   key tiles not counted: %s\n", r.tileError.c_str());
  for (const std::string &n : c.notes)
    std::printf("   note: %s\n", n.c_str());
  std::printf("\n");
  std::fflush(stdout);
  for (Runner &rn : runners)
    r.impls.push_back(rn.res);
  r.loadAfter = loadAverage();
  return r;
}

CaseResult runReduced(Case &c, attnc::DType t, const attnc::KernelDesc &k, const Options &o) {
  Case r;
  r.variant = c.variant;
  r.shape = c.shape;
  r.dtype = t;
  r.memoryBound = c.memoryBound;
  r.flopFormula = c.flopFormula;
  r.flops = c.flops;
  r.kernel = &k;
  r.f32Kernel = c.kernel;
  r.unscheduledNote = "not timed in " + std::string(attnc::dtype_name(t)) + " (see the f32 case)";
  r.torchEntry = c.torchEntry;
  r.torchConsts = c.torchConsts;
  r.notes = c.notes;
  r.outShape = c.outShape;
  // The reference reads c.inputs: they are rounded in place for this case, and put back after.
  const std::vector<Tensor> original = c.inputs;
  double outN = 1;
  for (int64_t d : c.outShape)
    outN *= (double)d;
  r.bytes = 2.0 * outN;
  for (Tensor &x : c.inputs) {
    r.bytes += (x.isInt ? 4.0 : 2.0) * (double)x.numel();
    for (float &v : x.f)
      v = (float)attnc::round_to_dtype(v, t);
  }
  r.inputs = c.inputs;
  r.reference = c.reference;
  struct Restore {
    Case &c;
    const std::vector<Tensor> &original;
    ~Restore() { c.inputs = original; }
  } restore{c, original};
  // The kernels read r.inputs; the reference reads c.inputs: the same rounded values.
  return runCase(r, o);
}

} // namespace attn_bench
