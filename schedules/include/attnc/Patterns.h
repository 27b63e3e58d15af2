// Patterns that schedule rules recognise in a lowered kernel, shared by the CPU and CUDA rules.
#pragma once

#include "attnc/HalideGen.h"

#include <string>
#include <vector>

namespace attnc {

// The Funcs of one dense attention pattern, o = sum_j softmax_j(s) * v with s a contraction
// over d, found by role, not by name.
struct DensePattern {
  LoweredFunc *out = nullptr;         // o(..., i, e) = sum_j p(..., i, j) * v(..., j, e)
  LoweredFunc *score = nullptr;       // s__sum*(..., i, j) = sum_d q(..., i, d) * k(..., j, d)
  std::vector<LoweredFunc *> softmax; // score, max, exp, sum, p
  std::vector<LoweredFunc *> inlined; // pointwise Funcs between the contraction and the softmax
  std::string keyInput;               // the input read along the softmax axis inside `score`
};

// Finds the dense pattern whose Funcs are private to it (no Func outside reads them).
bool findDensePattern(LoweredKernel &k, DensePattern *pat);

// The Funcs of one attn.online_softmax group (HalideGen's lowerOnline), found by role, and the
// contractions its scores read (reductions over the score's indices, e.g. q . k).
struct OnlineChain {
  LoweredFunc *score = nullptr; // the scores (inlined)
  LoweredFunc *tmax = nullptr;
  LoweredFunc *texp = nullptr;
  LoweredFunc *tsum = nullptr;
  LoweredFunc *tpv = nullptr;
  int stage = 0;     // the state update that folds these tiles
  bool full = false; // fully visible tiles: no mask test
};
struct OnlinePattern {
  LoweredFunc *out = nullptr;   // o(indices) = acc / sum
  LoweredFunc *state = nullptr; // (max, sum, acc)(indices), updated once per key tile
  // The masked chain (every online softmax has one); `chains` has it and, under exact mask
  // bounds, the chain of fully visible tiles, in the order of the state's updates.
  LoweredFunc *score = nullptr;
  LoweredFunc *tmax = nullptr;
  LoweredFunc *texp = nullptr;
  LoweredFunc *tsum = nullptr;
  LoweredFunc *tpv = nullptr;
  std::vector<OnlineChain> chains;
  std::vector<LoweredFunc *>
      contractions;                   // sums over the score's indices that only the group reads
  std::vector<std::string> keyInputs; // inputs the contractions read along the key
  std::vector<std::string> keyFuncs;  // definitions outside the group they read along it (mhsa's k)
  std::string queryVar;               // the innermost row index (the query axis)
  std::string valueVar;               // the output's innermost index when it is not a row index
};

// Every online-softmax group of the kernel.
std::vector<OnlinePattern> findOnline(LoweredKernel &k);

// Names of the kernel inputs that `e` reads with `var` somewhere in their coordinates.
std::vector<std::string> inputsReadWithVar(const LoweredKernel &k, const Halide::Expr &e,
                                           const std::string &var);

// One windowed softmax: its parts (scores, their nested reductions, max, exp, sum, p) and the
// Funcs that read p (the window aggregation, e.g. o = sum_{u,t} p * v).
struct WindowPattern {
  std::vector<LoweredFunc *> parts;
  std::vector<LoweredFunc *> consumers;
  std::string rowVar; // the innermost non-window index of p (the map's width)
};

// A softmax whose axes all have small constant extents (at most 256 points) whose parts only its
// single consumer reads.
bool findWindow(LoweredKernel &k, WindowPattern *w);

// Funcs that sample: a sum over sampling points, or a pointwise sample, whose gathers (reads at
// coordinates computed from data, e.g. ifloor of a location) all read along the Func's innermost
// index.
std::vector<LoweredFunc *> findSampling(LoweredKernel &k);

} // namespace attnc
