// attn-bench entries of the dense family: sdpa, causal_attention, padding_mask, varlen_attention,
// paged_decode, mhsa, sigmoid_attention, sink_attention, the sliding windows (Mistral's, Gemma 2's soft-capped one), rotary,
// differential and linear attention.
#include "entries.h"

#include "bench_causal_attention.attnc.h"
#include "bench_causal_attention_bf16.attnc.h"
#include "bench_causal_attention_none.attnc.h"
#include "bench_diff_attention.attnc.h"
#include "bench_linear_attention.attnc.h"
#include "bench_linear_attention_as_written.attnc.h"
#include "bench_mhsa.attnc.h"
#include "bench_mhsa_bf16.attnc.h"
#include "bench_padding_mask.attnc.h"
#include "bench_paged_decode.attnc.h"
#include "bench_rotary_attention.attnc.h"
#include "bench_sdpa.attnc.h"
#include "bench_sdpa_bf16.attnc.h"
#include "bench_sdpa_f16.attnc.h"
#include "bench_sdpa_none.attnc.h"
#include "bench_sigmoid_attention.attnc.h"
#include "bench_sigmoid_attention_unfused.attnc.h"
#include "bench_sink_attention.attnc.h"
#include "bench_sliding_window.attnc.h"
#include "bench_softcap_sliding_window.attnc.h"
#include "bench_varlen_attention.attnc.h"
#include "bench_varlen_causal.attnc.h"
#ifdef ATTN_BENCH_AUTOSCHEDULED
#include "bench_causal_attention_adams2019.attnc.h"
#include "bench_causal_attention_mullapudi2016.attnc.h"
#include "bench_sdpa_adams2019.attnc.h"
#include "bench_sdpa_mullapudi2016.attnc.h"
#endif
#ifdef ATTN_BENCH_TUNED
#include "bench_causal_attention_tuned.attnc.h"
#include "bench_sdpa_tuned.attnc.h"
#endif

#include "reference/dense_ref.h"
#include "reference/sdpa_ref.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace attn_bench {
namespace {

struct AttnShape {
  int B, H, N, D;
  bool unscheduled; // small enough for SCHEDULE none
};

// Issue #7's shape (B=1, H=8, N=2048, D=64), a smaller one, and a tiny one for the unscheduled
// pipeline: inlined, each softmax statistic is recomputed per score, O(N^4 D^2) work (B1 H2 N32
// D32 takes 3 s, B1 H1 N32 D16 0.3 s); --quick: the tiny one, smaller still.
std::vector<AttnShape> attnShapes(const Options &o) {
  if (o.quick)
    return {{1, 1, 16, 16, true}};
  return {{1, 8, 2048, 64, false}, {1, 8, 256, 64, false}, {1, 1, 32, 16, true}};
}

std::string attnLabel(const AttnShape &s) {
  return "B" + std::to_string(s.B) + " H" + std::to_string(s.H) + " N" + std::to_string(s.N) +
         " D" + std::to_string(s.D);
}

Case attnCase(const std::string &variant, const AttnShape &s, unsigned seed) {
  Case c;
  c.variant = variant;
  c.shape = attnLabel(s);
  const std::vector<int64_t> shape = {s.B, s.H, s.N, s.D};
  c.inputs = {Tensor::randn(shape, seed + 1), Tensor::randn(shape, seed + 2),
              Tensor::randn(shape, seed + 3)};
  c.outShape = shape;
  // q, k, v read and o written once.
  c.bytes = 4.0 * 4 * s.B * s.H * (double)s.N * s.D;
  c.torchEntry = variant;
  c.unscheduledNote =
      "not timed at this shape: unscheduled, the softmax statistics are recomputed per score "
      "(O(N^4 D^2)); see the B1 H1 N32 D16 row";
  return c;
}

// The shape the autoscheduled and tuned kernels were made for (tools/CMakeLists.txt).
bool isMainShape(const AttnShape &s) { return s.B == 1 && s.H == 8 && s.N == 2048 && s.D == 64; }

} // namespace

// SDPA: QK^T and PV, two flops per multiply-add each: 4*B*H*Nq*Nk*D (the softmax's exps and
// the scaling are not counted, as FlashAttention's benchmarks do).
void benchSdpa(const Options &o, std::vector<CaseResult> *out) {
  std::vector<AttnShape> shapes = attnShapes(o);
  // Head dimensions other than the two cpu-online specialises (64, 128): 32 (Swin, NAT), 40
  // (Stable Diffusion 1.x: blocks shifted inwards) and 80 (DiT, ViT-H).
  if (!o.quick)
    for (int d : {32, 40, 80})
      shapes.push_back({1, 8, 2048, d, false});
  for (const AttnShape &s : shapes) {
    Case c = attnCase("sdpa", s, 10);
    c.flopFormula = "4*B*H*Nq*Nk*D";
    c.flops = 4.0 * s.B * s.H * (double)s.N * s.N * s.D;
    c.kernel = &attnc_kernels::bench_sdpa();
    // Halide's autoschedulers and the tuned schedule, made for B1 H8 N2048 D64 and timed there
    // only: Adams2019's schedules refuse smaller outputs (their splits shift inwards).
    if (isMainShape(s)) {
#ifdef ATTN_BENCH_AUTOSCHEDULED
      c.schedules.push_back(
          {"Mullapudi2016 autoscheduler", &attnc_kernels::bench_sdpa_mullapudi2016()});
      c.schedules.push_back({"Adams2019 autoscheduler", &attnc_kernels::bench_sdpa_adams2019()});
#endif
#ifdef ATTN_BENCH_TUNED
      c.schedules.push_back({"tuned", &attnc_kernels::bench_sdpa_tuned()});
#endif
    }
    if (s.unscheduled)
      c.unscheduled = &attnc_kernels::bench_sdpa_none();
    c.tileSource = "sdpa.attn", c.tileKernel = "sdpa";
    c.reference = [&c, s] {
      return attnc_ref::sdpa<float>(c.inputs[0].fp(), c.inputs[1].fp(), c.inputs[2].fp(), s.B, s.H,
                                    s.N, s.N, s.D);
    };
    out->push_back(runCase(c, o));
    // bf16 and f16 builds at the main shape (--quick: its one shape), beside PyTorch in the same
    // type (issue #22's targets).
    if (isMainShape(s) || o.quick) {
      out->push_back(runReduced(c, attnc::DType::BF16, attnc_kernels::bench_sdpa_bf16(), o));
      out->push_back(runReduced(c, attnc::DType::F16, attnc_kernels::bench_sdpa_f16(), o));
    }
  }
}

// Causal attention counts only the unmasked pairs (j <= i: N(N+1)/2 of N^2):
// 2*B*H*N*(N+1)*D. A kernel that computes the masked scores and throws them away shows up as
// half of SDPA's GFLOP/s. The sdpa kernel runs on the same inputs in turns with it, so the
// summary's time over SDPA's shares the machine's load, and the visited key tiles are counted.
void benchCausal(const Options &o, std::vector<CaseResult> *out) {
  for (const AttnShape &s : attnShapes(o)) {
    Case c = attnCase("causal_attention", s, 20);
    c.flopFormula = "2*B*H*N*(N+1)*D";
    c.flops = 2.0 * s.B * s.H * (double)s.N * (s.N + 1) * s.D;
    c.kernel = &attnc_kernels::bench_causal_attention();
    if (isMainShape(s)) {
#ifdef ATTN_BENCH_AUTOSCHEDULED
      c.schedules.push_back(
          {"Mullapudi2016 autoscheduler", &attnc_kernels::bench_causal_attention_mullapudi2016()});
      c.schedules.push_back(
          {"Adams2019 autoscheduler", &attnc_kernels::bench_causal_attention_adams2019()});
#endif
#ifdef ATTN_BENCH_TUNED
      c.schedules.push_back({"tuned", &attnc_kernels::bench_causal_attention_tuned()});
#endif
    }
    if (s.unscheduled)
      c.unscheduled = &attnc_kernels::bench_causal_attention_none();
    c.unmasked = &attnc_kernels::bench_sdpa(), c.unmaskedName = "sdpa", c.unmaskedInputs = 3;
    c.tileSource = "causal_attention.attn", c.tileKernel = "causal_attention";
    // The reference computes every score and masks it (as written), so it does SDPA's work.
    c.reference = [&c, s] {
      return attnc_ref::causal_attention<float>(c.inputs[0].fp(), c.inputs[1].fp(),
                                                c.inputs[2].fp(), s.B, s.H, s.N, s.D);
    };
    out->push_back(runCase(c, o));
    if (isMainShape(s) || o.quick)
      out->push_back(
          runReduced(c, attnc::DType::BF16, attnc_kernels::bench_causal_attention_bf16(), o));
  }
}

// Key padding (nn.MultiheadAttention's key_padding_mask) on a batch of two sequences, one of
// full length and one of a third of it: 2/3 of the (query, key) pairs are visible, and only those
// are counted, 4*H*Nq*D*(visible keys summed over the batch). The sdpa kernel runs on the same
// q, k, v in turns with it (what ignoring the padding would cost), and the visited key tiles are
// counted.
void benchPaddingMask(const Options &o, std::vector<CaseResult> *out) {
  struct Shape {
    int B, H, N, D;
  };
  const std::vector<Shape> shapes = o.quick ? std::vector<Shape>{{2, 1, 48, 16}}
                                            : std::vector<Shape>{{2, 8, 1536, 64}, {2, 8, 384, 64}};
  for (const Shape &s : shapes) {
    Case c = attnCase("padding_mask", AttnShape{s.B, s.H, s.N, s.D, false}, 40);
    c.shape += " lengths " + std::to_string(s.N) + "," + std::to_string(s.N / 3);
    std::vector<int32_t> pad((size_t)s.B * s.N, 0);
    double visible = 0;
    for (int b = 0; b < s.B; ++b) {
      const int len = b % 2 ? s.N / 3 : s.N;
      for (int j = len; j < s.N; ++j)
        pad[(size_t)b * s.N + j] = 1;
      visible += len;
    }
    c.inputs.push_back(Tensor::ints({s.B, s.N}, pad));
    c.bytes += 4.0 * s.B * s.N;
    c.flopFormula = "4*H*Nq*D*sum_b(len_b)";
    c.flops = 4.0 * s.H * (double)s.N * s.D * visible;
    c.kernel = &attnc_kernels::bench_padding_mask();
    c.unmasked = &attnc_kernels::bench_sdpa(), c.unmaskedName = "sdpa", c.unmaskedInputs = 3;
    c.tileSource = "padding_mask.attn", c.tileKernel = "padding_mask";
    c.unscheduledNote = "not timed: unscheduled, the softmax statistics are recomputed per score";
    c.reference = [&c, s] {
      return attnc_ref::padding_mask<float>(c.inputs[0].fp(), c.inputs[1].fp(), c.inputs[2].fp(),
                                            c.inputs[3].i.data(), s.B, s.H, s.N, s.N, s.D);
    };
    out->push_back(runCase(c, o));
  }
}

// A packed batch of variable-length sequences (FlashAttention's varlen layout: every sequence's
// tokens in one [H, N, D] tensor, `seq` the sequence of each token): only pairs within a sequence
// count, 4*H*D*sum_s(len_s^2) (causal: 2*H*D*sum_s len_s (len_s + 1)). PyTorch runs SDPA once per
// sequence on its slice (the baseline); the visited key tiles are counted.
void benchVarlen(const Options &o, std::vector<CaseResult> *out) {
  struct Shape {
    int H, D;
    std::vector<int> lengths;
    bool causal;
  };
  const std::vector<Shape> shapes =
      o.quick ? std::vector<Shape>{{1, 16, {10, 23}, false}}
              : std::vector<Shape>{{8, 64, {1024, 512, 256, 1536, 768}, false},
                                   {8, 64, {1024, 512, 256, 1536, 768}, true},
                                   {8, 64, {128, 300, 77, 511}, false}};
  for (const Shape &s : shapes) {
    int N = 0;
    std::string lens;
    double pairs = 0;
    std::vector<int32_t> seq;
    for (size_t n = 0; n < s.lengths.size(); ++n) {
      const int len = s.lengths[n];
      N += len;
      lens += (n ? "," : "") + std::to_string(len);
      pairs += s.causal ? 0.5 * len * (len + 1.0) : (double)len * len;
      seq.insert(seq.end(), len, (int32_t)n);
    }
    Case c;
    c.variant = "varlen_attention";
    c.shape = std::string(s.causal ? "causal " : "") + "H" + std::to_string(s.H) + " N" +
              std::to_string(N) + " D" + std::to_string(s.D) + " lengths " + lens;
    const std::vector<int64_t> shape = {s.H, N, s.D};
    c.inputs = {Tensor::randn(shape, 91), Tensor::randn(shape, 92), Tensor::randn(shape, 93),
                Tensor::ints({N}, seq)};
    c.outShape = shape;
    c.bytes = 4.0 * 4 * s.H * (double)N * s.D + 4.0 * N;
    c.flopFormula = s.causal ? "2*H*D*sum_s(len_s*(len_s+1))" : "4*H*D*sum_s(len_s^2)";
    c.flops = 4.0 * s.H * s.D * pairs;
    c.kernel =
        s.causal ? &attnc_kernels::bench_varlen_causal() : &attnc_kernels::bench_varlen_attention();
    c.tileSource = "varlen_attention.attn";
    c.tileKernel = s.causal ? "varlen_causal" : "varlen_attention";
    c.torchEntry = "varlen_attention";
    c.torchConsts = std::string("{\"causal\": ") + (s.causal ? "true" : "false") + "}";
    c.unscheduledNote = "not timed: unscheduled, the softmax statistics are recomputed per score";
    // Naive: per query, the keys of its sequence (and j <= i), softmax, weighted sum.
    c.reference = [&c, s, N] {
      const float *q = c.inputs[0].fp(), *k = c.inputs[1].fp(), *v = c.inputs[2].fp();
      const std::vector<int32_t> &seq = c.inputs[3].i;
      std::vector<float> o((size_t)s.H * N * s.D, 0.f), w(N);
      const float scale = 1.f / std::sqrt((float)s.D);
      for (int h = 0; h < s.H; ++h)
        for (int i = 0; i < N; ++i) {
          const float *qi = q + ((size_t)h * N + i) * s.D;
          float m = -INFINITY, l = 0.f;
          for (int j = 0; j < N; ++j) {
            w[j] = -INFINITY;
            if (seq[j] != seq[i] || (s.causal && j > i))
              continue;
            const float *kj = k + ((size_t)h * N + j) * s.D;
            float d = 0.f;
            for (int e = 0; e < s.D; ++e)
              d += qi[e] * kj[e];
            w[j] = d * scale, m = std::max(m, w[j]);
          }
          for (int j = 0; j < N; ++j)
            l += w[j] == -INFINITY ? 0.f : (w[j] = std::exp(w[j] - m));
          float *oi = o.data() + ((size_t)h * N + i) * s.D;
          for (int j = 0; j < N; ++j)
            if (w[j] != -INFINITY)
              for (int e = 0; e < s.D; ++e)
                oi[e] += w[j] / l * v[((size_t)h * N + j) * s.D + e];
        }
      return o;
    };
    out->push_back(runCase(c, o));
  }
}

// One decoding step against a paged KV cache (vLLM's layout: kc, vc [P, S, Hkv, D], page table
// [B, M] padded with -1, lengths [B]): 4*H*D*sum_b(len_b) flops, and the visible keys and values
// read once, 2*Hkv*D*sum_b(len_b) floats: memory-bound. PyTorch gathers each sequence's pages and
// runs SDPA once per sequence (GQA by repeat_interleave), as users do on the CPU.
void benchPagedDecode(const Options &o, std::vector<CaseResult> *out) {
  struct Shape {
    int H, Hkv, D, S;
    std::vector<int> lengths;
  };
  const std::vector<Shape> shapes =
      o.quick ? std::vector<Shape>{{4, 2, 16, 16, {37, 0, 5}}}
              : std::vector<Shape>{{32, 8, 128, 16, {4096, 1000, 2500, 37, 3000, 512, 2048, 1531}},
                                   {32, 8, 128, 16, {300, 1200, 77, 650}}};
  for (const Shape &s : shapes) {
    const int B = (int)s.lengths.size();
    int M = 0, P = 0;
    double keys = 0;
    std::string lens;
    for (size_t b = 0; b < s.lengths.size(); ++b) {
      const int pages = (s.lengths[b] + s.S - 1) / s.S;
      M = std::max(M, pages), P += pages, keys += s.lengths[b];
      lens += (b ? "," : "") + std::to_string(s.lengths[b]);
    }
    // Each sequence's pages, in a shuffled order over the cache; -1 past its pages.
    std::vector<int32_t> ids(P), table((size_t)B * M, -1),
        lengths(s.lengths.begin(), s.lengths.end());
    for (int p = 0; p < P; ++p)
      ids[p] = (int32_t)((p * 7919L) % P); // 7919 is prime, so this is a permutation of 0..P-1
    for (int b = 0, next = 0; b < B; ++b)
      for (int m = 0; m < (s.lengths[b] + s.S - 1) / s.S; ++m)
        table[(size_t)b * M + m] = ids[next++];
    Case c;
    c.variant = "paged_decode";
    c.shape = "B" + std::to_string(B) + " H" + std::to_string(s.H) + " Hkv" +
              std::to_string(s.Hkv) + " D" + std::to_string(s.D) + " pages of " +
              std::to_string(s.S) + ", lengths " + lens;
    c.memoryBound = true;
    c.inputs = {Tensor::randn({B, s.H, s.D}, 101), Tensor::randn({P, s.S, s.Hkv, s.D}, 102),
                Tensor::randn({P, s.S, s.Hkv, s.D}, 103), Tensor::ints({B, M}, table),
                Tensor::ints({B}, lengths)};
    c.outShape = {B, s.H, s.D};
    c.flopFormula = "4*H*D*sum_b(len_b)";
    c.flops = 4.0 * s.H * s.D * keys;
    c.bytes = 4.0 * (2.0 * s.Hkv * s.D * keys + 2.0 * B * s.H * s.D + (double)B * M + B);
    c.kernel = &attnc_kernels::bench_paged_decode();
    c.torchEntry = "paged_decode";
    // Naive: per (b, h), the visible keys through the page table, softmax, weighted sum.
    c.reference = [&c, s, B, M] {
      const float *q = c.inputs[0].fp(), *kc = c.inputs[1].fp(), *vc = c.inputs[2].fp();
      const std::vector<int32_t> &pages = c.inputs[3].i, &lens = c.inputs[4].i;
      std::vector<float> o((size_t)B * s.H * s.D, 0.f);
      const float scale = 1.f / std::sqrt((float)s.D);
      const int group = s.H / s.Hkv;
      for (int b = 0; b < B; ++b)
        for (int h = 0; h < s.H; ++h) {
          const int n = lens[b];
          std::vector<float> w(n);
          float m = -INFINITY, l = 0.f;
          auto at = [&](const float *cache, int j) {
            const int page = pages[(size_t)b * M + j / s.S];
            return cache + (((size_t)page * s.S + j % s.S) * s.Hkv + h / group) * s.D;
          };
          const float *qi = q + ((size_t)b * s.H + h) * s.D;
          for (int j = 0; j < n; ++j) {
            const float *kj = at(kc, j);
            float d = 0.f;
            for (int e = 0; e < s.D; ++e)
              d += qi[e] * kj[e];
            w[j] = d * scale, m = std::max(m, w[j]);
          }
          for (int j = 0; j < n; ++j)
            l += (w[j] = std::exp(w[j] - m));
          float *oi = o.data() + ((size_t)b * s.H + h) * s.D;
          for (int j = 0; j < n; ++j) {
            const float *vj = at(vc, j);
            for (int e = 0; e < s.D; ++e)
              oi[e] += w[j] / l * vj[e];
          }
        }
      return o;
    };
    out->push_back(runCase(c, o));
  }
}

namespace {

struct MhsaShape {
  int B, N, C, H;
  const char *what;
};

} // namespace

// MHSA: the qkv projection 2*B*N*C*3C, attention 4*B*H*N^2*Dh, the output projection 2*B*N*C*C
// (C = H*Dh; the biases are not counted).
void benchMhsa(const Options &o, std::vector<CaseResult> *out) {
  const std::vector<MhsaShape> shapes =
      o.quick
          ? std::vector<MhsaShape>{{1, 32, 96, 3, "tiny"}}
          : std::vector<MhsaShape>{{1, 197, 768, 12, "ViT-B/16"}, {1, 64, 192, 3, "ViT-Ti width"}};
  for (const MhsaShape &s : shapes) {
    const int Dh = s.C / s.H;
    Case c;
    c.variant = "mhsa";
    c.shape = "B" + std::to_string(s.B) + " N" + std::to_string(s.N) + " C" + std::to_string(s.C) +
              " H" + std::to_string(s.H) + " (" + s.what + ")";
    const float ws = 1.f / std::sqrt((float)s.C);
    c.inputs = {Tensor::randn({s.B, s.N, s.C}, 31), Tensor::randn({3, s.H, Dh, s.C}, 32, 0.f, ws),
                Tensor::randn({3, s.H, Dh}, 33, 0.f, .1f),
                Tensor::randn({s.C, s.H, Dh}, 34, 0.f, ws), Tensor::randn({s.C}, 35, 0.f, .1f)};
    c.outShape = {s.B, s.N, s.C};
    const double BN = (double)s.B * s.N;
    c.flopFormula = "2*B*N*C*3C + 4*B*H*N^2*Dh + 2*B*N*C*C";
    c.flops =
        2 * BN * s.C * 3 * s.C + 4.0 * s.B * s.H * (double)s.N * s.N * Dh + 2 * BN * s.C * s.C;
    c.bytes = 4.0 * (2 * BN * s.C + 4.0 * s.C * s.C + 4.0 * s.C);
    c.kernel = &attnc_kernels::bench_mhsa();
    // Unscheduled, the q/k/v projections are recomputed inside every softmax statistic of every
    // score: B1 N8 C32 H1 already takes 10 s, so no shape of interest finishes.
    c.unscheduledNote =
        "not timed: unscheduled mhsa recomputes the projections per score (B1 N8 C32 H1: 10 s)";
    c.reference = [&c, s, Dh] {
      return attnc_ref::mhsa<float>(c.inputs[0].fp(), c.inputs[1].fp(), c.inputs[2].fp(),
                                    c.inputs[3].fp(), c.inputs[4].fp(), s.B, s.N, s.C, s.H, Dh);
    };
    c.torchEntry = "mhsa";
    out->push_back(runCase(c, o));
    if (&s == &shapes.front())
      out->push_back(runReduced(c, attnc::DType::BF16, attnc_kernels::bench_mhsa_bf16(), o));
  }
}

// Sigmoid attention (an unnormalised weighting, streamed over key tiles like the online softmax):
// the same two contractions as SDPA, 4*B*H*Nq*Nk*D, with a sigmoid per score in place of the
// softmax. SDPA runs on the same q, k, v in turns with it (the fused softmax's cost for the same
// contractions), and so does the unfused plan (scores at root, cpu-generic) the kernel had before.
void benchSigmoid(const Options &o, std::vector<CaseResult> *out) {
  for (const AttnShape &s : attnShapes(o)) {
    Case c = attnCase("sigmoid_attention", s, 30);
    c.flopFormula = "4*B*H*Nq*Nk*D";
    c.flops = 4.0 * s.B * s.H * (double)s.N * s.N * s.D;
    c.kernel = &attnc_kernels::bench_sigmoid_attention();
    c.schedules.push_back({"unfused (scores at root, cpu-generic)",
                           &attnc_kernels::bench_sigmoid_attention_unfused()});
    c.unmasked = &attnc_kernels::bench_sdpa(), c.unmaskedName = "sdpa", c.unmaskedInputs = 3;
    c.reference = [&c, s] {
      // sigmoid(q k^T / sqrt(D) - log(N)) v, in double per output row.
      const float *q = c.inputs[0].fp(), *k = c.inputs[1].fp(), *v = c.inputs[2].fp();
      std::vector<float> o((size_t)s.B * s.H * s.N * s.D);
      std::vector<double> acc(s.D);
      const double scale = 1.0 / std::sqrt((double)s.D), bias = std::log((double)s.N);
      for (int bh = 0; bh < s.B * s.H; ++bh)
        for (int i = 0; i < s.N; ++i) {
          std::fill(acc.begin(), acc.end(), 0.0);
          const float *qi = q + ((size_t)bh * s.N + i) * s.D;
          for (int j = 0; j < s.N; ++j) {
            const float *kj = k + ((size_t)bh * s.N + j) * s.D;
            const float *vj = v + ((size_t)bh * s.N + j) * s.D;
            double dot = 0;
            for (int d = 0; d < s.D; ++d)
              dot += (double)qi[d] * kj[d];
            double w = 1.0 / (1.0 + std::exp(-(dot * scale - bias)));
            for (int d = 0; d < s.D; ++d)
              acc[d] += w * vj[d];
          }
          for (int d = 0; d < s.D; ++d)
            o[((size_t)bh * s.N + i) * s.D + d] = (float)acc[d];
        }
      return o;
    };
    out->push_back(runCase(c, o));
  }
}

namespace {

// The window the bench kernels are built with (tools/CMakeLists.txt, DEFINES window=...): an
// eighth of the main shape's keys, Mistral's 4096 of a 32k context.
constexpr int kBenchWindow = 512;

// Causal attention over the band i - W < j <= i, optionally with Gemma 2's soft-capped scores
// cap * tanh(s / cap), in double per output row.
std::vector<float> bandReference(const Case &c, const AttnShape &s, int window, double cap) {
  const float *q = c.inputs[0].fp(), *k = c.inputs[1].fp(), *v = c.inputs[2].fp();
  std::vector<float> o((size_t)s.B * s.H * s.N * s.D);
  std::vector<double> p(s.N), acc(s.D);
  const double scale = 1.0 / std::sqrt((double)s.D);
  for (int bh = 0; bh < s.B * s.H; ++bh)
    for (int i = 0; i < s.N; ++i) {
      const float *qi = q + ((size_t)bh * s.N + i) * s.D;
      const int lo = std::max(0, i - window + 1);
      double m = -INFINITY, sum = 0;
      for (int j = lo; j <= i; ++j) {
        const float *kj = k + ((size_t)bh * s.N + j) * s.D;
        double dot = 0;
        for (int d = 0; d < s.D; ++d)
          dot += (double)qi[d] * kj[d];
        p[j] = cap > 0 ? cap * std::tanh(dot * scale / cap) : dot * scale;
        m = std::max(m, p[j]);
      }
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int j = lo; j <= i; ++j) {
        const double w = std::exp(p[j] - m);
        sum += w;
        const float *vj = v + ((size_t)bh * s.N + j) * s.D;
        for (int d = 0; d < s.D; ++d)
          acc[d] += w * vj[d];
      }
      for (int d = 0; d < s.D; ++d)
        o[((size_t)bh * s.N + i) * s.D + d] = (float)(acc[d] / sum);
    }
  return o;
}

// The band's (query, key) pairs: sum over i of min(i + 1, W).
double bandPairs(int n, int window) {
  double pairs = 0;
  for (int i = 0; i < n; ++i)
    pairs += std::min(i + 1, window);
  return pairs;
}

std::vector<AttnShape> bandShapes(const Options &o) {
  if (o.quick)
    return {{1, 1, 16, 16, false}};
  return {{1, 8, 4096, 64, false}, {1, 8, 1024, 64, false}};
}

void benchBand(const Options &o, std::vector<CaseResult> *out, const char *variant, double cap,
               const attnc::KernelDesc &kernel, unsigned seed) {
  for (const AttnShape &s : bandShapes(o)) {
    Case c = attnCase(variant, s, seed);
    c.shape += " W" + std::to_string(kBenchWindow);
    c.flopFormula = "4*B*H*D*sum_i(min(i+1, W))";
    c.flops = 4.0 * s.B * s.H * s.D * bandPairs(s.N, kBenchWindow);
    c.kernel = &kernel;
    c.unmasked = &attnc_kernels::bench_sdpa(), c.unmaskedName = "sdpa", c.unmaskedInputs = 3;
    c.tileSource = cap > 0 ? "softcap_attention.attn" : "sliding_window.attn";
    c.tileKernel = variant;
    c.tileDefines = {{"window", std::to_string(kBenchWindow)}};
    c.torchConsts = "{\"window\": " + std::to_string(kBenchWindow) +
                    (cap > 0 ? ", \"cap\": " + std::to_string(cap) : std::string()) + "}";
    c.reference = [&c, s, cap] { return bandReference(c, s, kBenchWindow, cap); };
    out->push_back(runCase(c, o));
  }
}

} // namespace

// Sliding-window causal attention (Mistral): only the band i - W < j <= i is counted,
// 4*B*H*D*sum_i min(i + 1, W). sdpa runs in turns with it on the same q, k, v, and the visited
// key tiles are counted: the time per visited tile is the band's cost against the full square's.
void benchSlidingWindow(const Options &o, std::vector<CaseResult> *out) {
  benchBand(o, out, "sliding_window", 0.0, attnc_kernels::bench_sliding_window(), 50);
}

// Gemma 2's local layers: the same band with soft-capped scores (cap 50), a tanh per score.
void benchSoftcapSlidingWindow(const Options &o, std::vector<CaseResult> *out) {
  benchBand(o, out, "softcap_sliding_window", 50.0, attnc_kernels::bench_softcap_sliding_window(),
            60);
}

namespace {

// Causal softmax-weighted sum of rows of `v` (row stride `e`) for query row i of one head, from
// the scores p[0..i] (overwritten by their weights); adds weight * factor * v_j to acc.
void causalRow(std::vector<double> &p, int i, const float *v, int e, double factor,
               std::vector<double> &acc) {
  double m = -INFINITY, sum = 0;
  for (int j = 0; j <= i; ++j)
    m = std::max(m, p[j]);
  for (int j = 0; j <= i; ++j)
    sum += (p[j] = std::exp(p[j] - m));
  for (int j = 0; j <= i; ++j)
    for (int d = 0; d < e; ++d)
      acc[d] += factor * p[j] / sum * v[(size_t)j * e + d];
}

// A causal variant's work, the causal pairs' two contractions (2*B*H*N*(N+1)*D, as
// causal_attention counts them), and causal_attention on its q, k, v timed in turns with it.
void againstCausal(Case &c, const AttnShape &s) {
  c.flopFormula = "2*B*H*N*(N+1)*D";
  c.flops = 2.0 * s.B * s.H * (double)s.N * (s.N + 1) * s.D;
  c.unmasked = &attnc_kernels::bench_causal_attention(), c.unmaskedName = "causal_attention";
  c.unmaskedInputs = 3;
}

double dot(const float *a, const float *b, int n) {
  double s = 0;
  for (int d = 0; d < n; ++d)
    s += (double)a[d] * b[d];
  return s;
}

} // namespace

// Rotary embeddings (LLaMA) before causal attention: the causal pairs' two contractions,
// 2*B*H*N*(N+1)*D, as causal_attention counts them (the rotations, O(N D), are not counted). The
// tables are transformers' cos and sin of position * 10000^(-2k/D), repeated over both halves.
void benchRotary(const Options &o, std::vector<CaseResult> *out) {
  for (const AttnShape &s : attnShapes(o)) {
    Case c = attnCase("rotary_attention", s, 70);
    std::vector<float> cs((size_t)s.N * s.D), sn((size_t)s.N * s.D);
    for (int i = 0; i < s.N; ++i)
      for (int d = 0; d < s.D; ++d) {
        const double a = i * std::pow(10000.0, -2.0 * (d % (s.D / 2)) / s.D);
        cs[(size_t)i * s.D + d] = (float)std::cos(a), sn[(size_t)i * s.D + d] = (float)std::sin(a);
      }
    c.inputs.push_back(Tensor{{s.N, s.D}, cs, {}});
    c.inputs.push_back(Tensor{{s.N, s.D}, sn, {}});
    c.bytes += 8.0 * s.N * s.D;
    c.kernel = &attnc_kernels::bench_rotary_attention();
    againstCausal(c, s);
    c.reference = [&c, s] {
      const float *q = c.inputs[0].fp(), *k = c.inputs[1].fp(), *v = c.inputs[2].fp(),
                  *cs = c.inputs[3].fp(), *sn = c.inputs[4].fp();
      const int D = s.D, h = D / 2;
      // Rotated copies of q and k, in float as the model computes them.
      auto rotate = [&](const float *x) {
        std::vector<float> r((size_t)s.B * s.H * s.N * D);
        for (size_t row = 0; row < (size_t)s.B * s.H * s.N; ++row) {
          const int i = (int)(row % s.N);
          for (int d = 0; d < D; ++d) {
            const float partner = d < h ? -x[row * D + d + h] : x[row * D + d - h];
            r[row * D + d] =
                x[row * D + d] * cs[(size_t)i * D + d] + partner * sn[(size_t)i * D + d];
          }
        }
        return r;
      };
      const std::vector<float> qr = rotate(q), kr = rotate(k);
      std::vector<float> out((size_t)s.B * s.H * s.N * D);
      std::vector<double> p(s.N), acc(D);
      for (int bh = 0; bh < s.B * s.H; ++bh)
        for (int i = 0; i < s.N; ++i) {
          const size_t base = (size_t)bh * s.N;
          for (int j = 0; j <= i; ++j)
            p[j] = dot(&qr[(base + i) * D], &kr[(base + j) * D], D) / std::sqrt((double)D);
          std::fill(acc.begin(), acc.end(), 0.0);
          causalRow(p, i, v + base * D, D, 1.0, acc);
          for (int d = 0; d < D; ++d)
            out[(base + i) * D + d] = (float)acc[d];
        }
      return out;
    };
    out->push_back(runCase(c, o));
  }
}

// Attention sinks (gpt-oss): causal attention with one extra logit per head in each row's
// denominator, the same 2*B*H*N*(N+1)*D as causal_attention (the sink is O(N) per head). The
// causal kernel runs in turns with it: the sink costs one rescale per row after its last tile.
void benchSinks(const Options &o, std::vector<CaseResult> *out) {
  for (const AttnShape &s : attnShapes(o)) {
    Case c = attnCase("sink_attention", s, 90);
    std::vector<float> sinks(s.H);
    for (int h = 0; h < s.H; ++h)
      sinks[h] = (float)(0.5 * h - 1.0); // gpt-oss's learned sinks are of the scores' order
    c.inputs.push_back(Tensor{{s.H}, sinks, {}});
    c.bytes += 4.0 * s.H;
    c.kernel = &attnc_kernels::bench_sink_attention();
    againstCausal(c, s);
    c.reference = [&c, s] {
      const float *q = c.inputs[0].fp(), *k = c.inputs[1].fp(), *v = c.inputs[2].fp(),
                  *sk = c.inputs[3].fp();
      const int D = s.D;
      std::vector<float> out((size_t)s.B * s.H * s.N * D);
      std::vector<double> p(s.N), acc(D);
      for (int bh = 0; bh < s.B * s.H; ++bh)
        for (int i = 0; i < s.N; ++i) {
          const size_t base = (size_t)bh * s.N;
          const double sink = sk[bh % s.H];
          double m = sink, sum = 0;
          for (int j = 0; j <= i; ++j)
            m = std::max(m, p[j] = dot(&q[(base + i) * D], &k[(base + j) * D], D) /
                                   std::sqrt((double)D));
          std::fill(acc.begin(), acc.end(), 0.0);
          for (int j = 0; j <= i; ++j) {
            p[j] = std::exp(p[j] - m), sum += p[j];
            for (int d = 0; d < D; ++d)
              acc[d] += p[j] * v[(base + j) * D + d];
          }
          sum += std::exp(sink - m);
          for (int d = 0; d < D; ++d)
            out[(base + i) * D + d] = (float)(acc[d] / sum);
        }
      return out;
    };
    out->push_back(runCase(c, o));
  }
}

// Differential attention (Ye et al. 2024): two causal softmaxes over D-channel scores, their
// difference times E = 2D value channels, then the head's RMSNorm: 2*B*H*N*(N+1)*(D + E)
// (each map's QK^T and PV, 2D + 2E flops per causal pair, N(N+1)/2 pairs; the split computes
// each map's PV, as PyTorch's attn1 @ v - lam * attn2 @ v would, while the paper's
// (attn1 - lam attn2) @ v does one). Until 2026-11-29 this counted twice that, so figures in %
// of peak for diff_attention before then are 2x too high (its ratios are unaffected).
void benchDiffAttention(const Options &o, std::vector<CaseResult> *out) {
  for (const AttnShape &s : attnShapes(o)) {
    const int E = 2 * s.D;
    Case c;
    c.variant = "diff_attention";
    c.shape = attnLabel(s) + " E" + std::to_string(E);
    const std::vector<int64_t> qk = {s.B, s.H, s.N, s.D}, ve = {s.B, s.H, s.N, E};
    c.inputs = {Tensor::randn(qk, 81),           Tensor::randn(qk, 82), Tensor::randn(qk, 83),
                Tensor::randn(qk, 84),           Tensor::randn(ve, 85), Tensor{{1}, {0.4f}, {}},
                Tensor::randn({E}, 86, 1.f, .1f)};
    c.outShape = ve;
    c.bytes = 4.0 * s.B * s.H * (double)s.N * (4.0 * s.D + 2.0 * E);
    c.flopFormula = "2*B*H*N*(N+1)*(D+E)";
    c.flops = 2.0 * s.B * s.H * (double)s.N * (s.N + 1) * ((double)s.D + E);
    c.kernel = &attnc_kernels::bench_diff_attention();
    c.torchEntry = "diff_attention";
    c.reference = [&c, s, E] {
      const float *q1 = c.inputs[0].fp(), *k1 = c.inputs[1].fp(), *q2 = c.inputs[2].fp(),
                  *k2 = c.inputs[3].fp(), *v = c.inputs[4].fp(), *g = c.inputs[6].fp();
      const double lam = c.inputs[5].f[0], scale = 1.0 / std::sqrt((double)s.D);
      const int D = s.D;
      std::vector<float> out((size_t)s.B * s.H * s.N * E);
      std::vector<double> p(s.N), acc(E);
      for (int bh = 0; bh < s.B * s.H; ++bh)
        for (int i = 0; i < s.N; ++i) {
          const size_t base = (size_t)bh * s.N;
          std::fill(acc.begin(), acc.end(), 0.0);
          for (int j = 0; j <= i; ++j)
            p[j] = dot(q1 + (base + i) * D, k1 + (base + j) * D, D) * scale;
          causalRow(p, i, v + base * E, E, 1.0, acc);
          for (int j = 0; j <= i; ++j)
            p[j] = dot(q2 + (base + i) * D, k2 + (base + j) * D, D) * scale;
          causalRow(p, i, v + base * E, E, -lam, acc);
          double ms = 0;
          for (int e = 0; e < E; ++e)
            ms += acc[e] * acc[e] / E;
          for (int e = 0; e < E; ++e)
            out[(base + i) * E + e] = (float)(acc[e] / std::sqrt(ms + 1e-5) * g[e] * (1 - 0.8));
        }
      return out;
    };
    out->push_back(runCase(c, o));
  }
}

// Linear attention (Katharopoulos et al. 2020, phi = elu + 1, non-causal, E = D): the reassociated
// contractions phi(k)^T v and phi(q) kv with the normaliser's two, 4*B*H*N*D*(E+1) (the feature
// maps' elus are not counted). The kernel was built for B1 H8 N2048 (attn-contraction-order chose
// phi(q) (phi(k)^T v) there); the same file built without sizes keeps the N x N scores, as written.
void benchLinearAttention(const Options &o, std::vector<CaseResult> *out) {
  for (const AttnShape &s : attnShapes(o)) {
    Case c = attnCase("linear_attention", s, 90);
    const int E = s.D;
    c.flopFormula = "4*B*H*N*D*(E+1)";
    c.flops = 4.0 * s.B * s.H * (double)s.N * s.D * (E + 1);
    c.kernel = &attnc_kernels::bench_linear_attention();
    c.algorithms.push_back(
        {"as written (N x N scores)", &attnc_kernels::bench_linear_attention_as_written()});
    c.reference = [&c, s, E] {
      const float *q = c.inputs[0].fp(), *k = c.inputs[1].fp(), *v = c.inputs[2].fp();
      const int D = s.D;
      auto phi = [](double x) { return x > 0 ? x + 1.0 : std::exp(x); };
      std::vector<float> out((size_t)s.B * s.H * s.N * E);
      std::vector<double> kv((size_t)D * E), ks(D);
      for (int bh = 0; bh < s.B * s.H; ++bh) {
        const size_t base = (size_t)bh * s.N;
        std::fill(kv.begin(), kv.end(), 0.0);
        std::fill(ks.begin(), ks.end(), 0.0);
        for (int j = 0; j < s.N; ++j)
          for (int d = 0; d < D; ++d) {
            const double f = phi(k[(base + j) * D + d]);
            ks[d] += f;
            for (int e = 0; e < E; ++e)
              kv[(size_t)d * E + e] += f * v[(base + j) * E + e];
          }
        for (int i = 0; i < s.N; ++i) {
          double z = 1e-6;
          for (int d = 0; d < D; ++d)
            z += phi(q[(base + i) * D + d]) * ks[d];
          for (int e = 0; e < E; ++e) {
            double acc = 0;
            for (int d = 0; d < D; ++d)
              acc += phi(q[(base + i) * D + d]) * kv[(size_t)d * E + e];
            out[(base + i) * E + e] = (float)(acc / z);
          }
        }
      }
      return out;
    };
    out->push_back(runCase(c, o));
  }
}

} // namespace attn_bench
