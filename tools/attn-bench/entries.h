// The benchmarked variants: each builds its cases (one per shape) and runs them.
#pragma once

#include "bench.h"

#include <vector>

namespace attn_bench {

struct Variant {
  const char *name; // `attn-bench NAME` selects it
  void (*run)(const Options &o, std::vector<CaseResult> *out);
};

// entries_dense.cpp
void benchSdpa(const Options &o, std::vector<CaseResult> *out);
void benchCausal(const Options &o, std::vector<CaseResult> *out);
void benchPaddingMask(const Options &o, std::vector<CaseResult> *out);
void benchVarlen(const Options &o, std::vector<CaseResult> *out);
void benchMhsa(const Options &o, std::vector<CaseResult> *out);
void benchSigmoid(const Options &o, std::vector<CaseResult> *out);
void benchSlidingWindow(const Options &o, std::vector<CaseResult> *out);
void benchSoftcapSlidingWindow(const Options &o, std::vector<CaseResult> *out);
void benchRotary(const Options &o, std::vector<CaseResult> *out);
void benchSinks(const Options &o, std::vector<CaseResult> *out);
void benchDiffAttention(const Options &o, std::vector<CaseResult> *out);
void benchPagedDecode(const Options &o, std::vector<CaseResult> *out);
void benchLinearAttention(const Options &o, std::vector<CaseResult> *out);
// entries_vision.cpp
void benchMsda(const Options &o, std::vector<CaseResult> *out);
void benchMsDeformAttnCore(const Options &o, std::vector<CaseResult> *out);
void benchDeformAttn(const Options &o, std::vector<CaseResult> *out);
void benchDatAttn(const Options &o, std::vector<CaseResult> *out);
void benchSwin(const Options &o, std::vector<CaseResult> *out);
void benchNatten(const Options &o, std::vector<CaseResult> *out);

inline const std::vector<Variant> &variants() {
  static const std::vector<Variant> v = {
      {"sdpa", benchSdpa},
      {"causal_attention", benchCausal},
      {"padding_mask", benchPaddingMask},
      {"varlen_attention", benchVarlen},
      {"paged_decode", benchPagedDecode},
      {"mhsa", benchMhsa},
      {"sigmoid_attention", benchSigmoid},
      {"sliding_window", benchSlidingWindow},
      {"softcap_sliding_window", benchSoftcapSlidingWindow},
      {"rotary_attention", benchRotary},
      {"sink_attention", benchSinks},
      {"diff_attention", benchDiffAttention},
      {"linear_attention", benchLinearAttention},
      {"msda", benchMsda},
      {"ms_deform_attn_core", benchMsDeformAttnCore},
      {"deform_attn", benchDeformAttn},
      {"dat_attn", benchDatAttn},
      {"swin_attention", benchSwin},
      {"neighborhood_attention", benchNatten},
  };
  return v;
}

} // namespace attn_bench
