// Patterns that schedule rules recognise in a lowered kernel, shared by the CPU and CUDA rules.
#pragma once

#include "attnc/HalideGen.h"

#include <cstddef>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace attnc {

// Patterns name the kernel's Funcs by their index in LoweredKernel::funcs (FuncIndex), not by
// pointer: the finders read a const kernel, a rule's apply schedules the same Funcs in its mutable
// one, and a match stays valid while the kernel is moved or copied.

// The Funcs of one dense attention pattern, o = sum_j softmax_j(s) * v with s a contraction
// over d, found by role, not by name.
struct DensePattern {
  FuncIndex out = 0;              // o(..., i, e) = sum_j p(..., i, j) * v(..., j, e)
  FuncIndex score = 0;            // s__sum*(..., i, j) = sum_d q(..., i, d) * k(..., j, d)
  std::vector<FuncIndex> softmax; // score, max, exp, sum, p
  std::vector<FuncIndex> inlined; // pointwise Funcs between the contraction and the softmax
  std::string keyInput;           // the input read along the softmax axis inside `score`
  // Whether `f` is one of the pattern's Funcs.
  bool contains(FuncIndex f) const;
};

// The dense pattern whose Funcs are private to it (no Func outside reads them), if any.
std::optional<DensePattern> findDensePattern(const LoweredKernel &k);

// One online softmax (LoweredKernel::onlineGroups, as HalideGen made it) and what lies around it:
// the contractions its scores read (reductions over the score's indices, e.g. q . k).
struct OnlinePattern {
  size_t group = 0;                    // its index in LoweredKernel::onlineGroups
  std::vector<FuncIndex> contractions; // sums over the score's indices that only the group reads
  std::vector<std::string> keyInputs;  // inputs the contractions read along the key
  std::vector<std::string> keyFuncs; // definitions outside the group they read along it (mhsa's k)
  // Pointwise definitions of inputs only, outside the group, that they read along the query and
  // not the key (rotary embeddings' rotated q).
  std::vector<std::string> queryFuncs;
  std::string queryVar; // the innermost row index (the query axis)
  std::string valueVar; // the output's innermost index when it is not a row index
  // Whether rows along the query axis share keys: false when every tensor the contractions read
  // along the key is read with the query row too (a decode step, `q(b, h, d) * k(b, h, j, d)`:
  // each row has keys of its own, none is reused across a tile of rows).
  bool rowsShareKeys = true;
};

// Every online-softmax group of the kernel.
std::vector<OnlinePattern> findOnline(const LoweredKernel &k);

// Names of the kernel inputs that `e` reads with `var` somewhere in their coordinates.
std::vector<std::string> inputsReadWithVar(const LoweredKernel &k, const Halide::Expr &e,
                                           const std::string &var);

// One windowed softmax: its parts (scores, their nested reductions, max, exp, sum, p) and the
// Funcs that read p (the window aggregation, e.g. o = sum_{u,t} p * v).
struct WindowPattern {
  std::vector<FuncIndex> parts;
  std::vector<FuncIndex> consumers;
  std::string rowVar; // the innermost non-window index of p (the map's width)
  // Definitions at the window's points (the score's indices) that only the score reads, directly
  // or through each other: a score written as its own definition (Swin's `s`) and its
  // contraction, scheduled with the window rather than as root Funcs of their own.
  std::vector<FuncIndex> scoreDefs;
};

// A softmax whose axes all have small constant extents (at most 256 points) whose parts only its
// single consumer reads, if any.
std::optional<WindowPattern> findWindow(const LoweredKernel &k);

// Funcs that sample: a sum over sampling points, or a pointwise sample, whose gathers (reads at
// coordinates computed from data, e.g. ifloor of a location) all read along the Func's innermost
// index.
struct SamplingPattern {
  std::vector<FuncIndex> funcs;
};
std::vector<FuncIndex> findSampling(const LoweredKernel &k);

// The online-softmax groups of a kernel (at least one), as cpu-online matches them.
struct OnlineGroups {
  std::vector<OnlinePattern> groups;
};
// The generic rules match every kernel of their target: the whole kernel is their pattern.
struct WholeKernel {};

// What a rule's match found, one alternative per pattern; a rule reads its own alternative.
using Match = std::variant<WholeKernel, DensePattern, OnlineGroups, WindowPattern, SamplingPattern>;

} // namespace attnc
