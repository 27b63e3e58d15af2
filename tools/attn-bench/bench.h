// attn-bench's framework: inputs, one benchmark case (a variant at one shape), and its run.
#pragma once

#include "attnc/runtime.h"

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace attn_bench {

class TorchBaseline;

// A kernel input (f32 or i32, C order), kept by the case so every implementation reads the same data.
struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float> f;
  std::vector<int32_t> i; // used instead of f for i32 inputs
  bool isInt = false;
  std::vector<uint16_t> half; // f's values as bf16/f16 bits, for a reduced-precision case's kernel

  size_t numel() const;
  attnc::TensorView view();
  const float *fp() const { return f.data(); }
  static Tensor randn(std::vector<int64_t> shape, unsigned seed, float mean = 0.f,
                      float stddev = 1.f);
  static Tensor uniform(std::vector<int64_t> shape, unsigned seed, float lo, float hi);
  static Tensor ints(std::vector<int64_t> shape, std::vector<int32_t> values);
  static Tensor zeros(std::vector<int64_t> shape);
};

struct Options {
  int reps = 10;         // timed runs per implementation (fewer when the budget runs out)
  bool quick = false;    // small shapes only, fewer runs: a smoke run
  double budget = 4.0;   // seconds of timed runs per implementation, after at least 3 runs
  double warmup = 0.25;  // seconds of untimed runs before an implementation's timed ones
  double peakGflops = 0; // the FMA microkernel's all-core fp32 peak
  int threads = 1;       // threads of the kernels' pool (and of the peak)
  const TorchBaseline *torch = nullptr; // null: torch is not importable, no PyTorch column
};

// One benchmark case: a variant at one shape, its implementations and its work.
struct Case {
  std::string variant; // the entry name (`attn-bench VARIANT` selects its cases)
  // The storage type of the kernel's float tensors (a -D f32=bf16|f16 build): its inputs are
  // rounded to it for every implementation, PyTorch runs in it, the kernel writes it.
  attnc::DType dtype = attnc::DType::F32;
  // A reduced-precision case's f32 build, timed in turns with its kernel on the same (rounded)
  // values: the speedup the storage type brings.
  const attnc::KernelDesc *f32Kernel = nullptr;
  std::string shape;        // printed; causal_attention finds sdpa's time at the same shape by it
  bool memoryBound = false; // leads with GB/s instead of GFLOP/s
  std::string flopFormula;  // how `flops` is counted (also in the entry's comment)
  double flops = 0;
  double bytes = 0;           // compulsory traffic: every input read once, the output written once
  std::vector<Tensor> inputs; // in the kernel's order
  std::vector<int64_t> outShape;
  const attnc::KernelDesc *kernel = nullptr; // SCHEDULE auto: the kernel under test
  const attnc::KernelDesc *unscheduled =
      nullptr;                 // SCHEDULE none; null where it would take too long
  std::string unscheduledNote; // why SCHEDULE none is not timed at this shape
  std::vector<std::pair<std::string, const attnc::KernelDesc *>>
      schedules; // further named schedules
  // The same file compiled to another algorithm (a pass's other choice, such as linear
  // attention's contraction order as written): always timed, even where the rule is the same.
  std::vector<std::pair<std::string, const attnc::KernelDesc *>> algorithms;
  // The same attention without the mask (sdpa for causal_attention), on the first
  // `unmaskedInputs` inputs: timed in turns with the kernel, never compared with the reference,
  // so the time the mask saves is measured under the same load.
  const attnc::KernelDesc *unmasked = nullptr;
  std::string unmaskedName;
  size_t unmaskedInputs = 0;
  // The variant's source and kernel: where set, the online softmax's visited key tiles are
  // counted at these inputs (tiles.cpp), from the same predicates the compiled kernel runs.
  std::string tileSource, tileKernel;
  std::vector<std::pair<std::string, std::string>> tileDefines; // -D, as the kernel was built
  // The naive reference of tests/reference, instantiated for float, single-threaded as written.
  std::function<std::vector<float>()> reference;
  // Further plain C++ baselines (single-threaded), e.g. PyTorch's formulation without PyTorch.
  std::vector<std::pair<std::string, std::function<std::vector<float>()>>> cpp;
  std::string torchEntry;  // the function of torch_baseline.py; empty: no PyTorch formulation
  std::string torchConsts; // JSON object of its keyword arguments (the kernel's constants)
  std::vector<std::string> notes;
};

// One implementation's agreement and timing.
struct ImplResult {
  std::string name;
  std::string kind; // attnc (the kernel under test), reference, unscheduled, schedule, cpp, torch
  std::string threads; // "1" or the thread count
  double maxDiff = -1; // max |output - reference output|; -1: not run
  double seconds = 0;  // median of the timed runs
  int runs = 0;        // 0: not timed (see note)
  std::string note;
  bool sameAsAuto = false; // a schedule identical to the default's (not timed; its ratio is 1)
};

// One online softmax's (row block, key tile) pairs at the case's inputs (attnc::countTileVisits).
struct TileCount {
  std::string output;
  int tile = 0, rowsPerBlock = 1;
  int64_t visited = 0, maskTested = 0, total = 0;
};

struct CaseResult {
  std::string variant, shape, flopFormula;
  std::string dtype = "f32"; // Case::dtype
  bool memoryBound = false;
  double flops = 0, bytes = 0;
  double tolerance = 0; // the largest max|diff| accepted
  bool agree = true;
  std::vector<ImplResult> impls; // impls[0] is the kernel under test
  std::vector<std::string> notes;
  double loadBefore = 0, loadAfter = 0; // 1-minute load average around the case
  std::string unmaskedName;             // Case::unmaskedName
  double vsUnmasked = 0;        // t(kernel) / t(unmasked kernel), timed in turns (0: not measured)
  std::vector<TileCount> tiles; // Case::tileSource's online softmaxes
  std::string tileError;        // why they could not be counted
};

// Checks every implementation against the reference, then (if they all agree) times them; prints
// the case's lines on stdout as it goes.
CaseResult runCase(Case &c, const Options &o);

// `c` (an f32 case that has run) again with its float tensors stored as `t`: the kernel `k`, a
// -D f32=<t> build of the same source, timed in turns with c's f32 kernel; the reference (which
// reads c.inputs) and PyTorch (in `t`) on the inputs rounded to `t`. Other schedules, C++
// baselines and tile counts stay with the f32 case. c.inputs are restored afterwards.
CaseResult runReduced(Case &c, attnc::DType t, const attnc::KernelDesc &k, const Options &o);

// Counts c.tileSource's visited key tiles at c's inputs into r (tiles.cpp); false with r->tileError.
bool countTiles(Case &c, CaseResult *r);

// The 1-minute load average (/proc/loadavg), -1 where unknown.
double loadAverage();

} // namespace attn_bench
