// Plain C++ ports of PyTorch's formulations (nn.Unfold for msda, grid_sample for ms_deform_attn_core).
#pragma once

#include <cstdint>

namespace attn_bench {

// DilateFormer's MultiDilatelocalAttention as PyTorch computes it (unfolded k and v materialised).
// x and o [B, H, W, C]; wqkv [3C, C], bqkv [3C], wo [C, C], bo [C]; heads of hd channels; dil[3].
void msdaUnfold(const float *x, const float *wqkv, const float *bqkv, const float *wo,
                const float *bo, float *o, int B, int H, int W, int C, int hd, const int dil[3]);

// ms_deform_attn_core_pytorch as PyTorch's CPU path computes it (grid_sample per level into a
// materialised [B*M, D, Q, P] tensor, then the weighted sum).
void msDeformAttnCoreGridSample(const float *value, const int32_t *shapes, const int32_t *start,
                                const float *loc, const float *aw, float *out, int B, int S, int M,
                                int D, int Q, int L, int P);

} // namespace attn_bench
