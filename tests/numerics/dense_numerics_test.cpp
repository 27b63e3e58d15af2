// Numerics of the AOT-compiled dense attention variants (dsl/variants/*.attn) against hand-written
// fp64 references (reference/dense_ref.h) and against the fp64 DSL interpreter.
//
// Every check runs the same inputs through (1) the AOT kernel (fp32, through the runtime), (2) the
// C++ reference in fp64 (ground truth) and in plain fp32 (which sets the tolerance,
// attnc_ref::tolerance), and (3) the DSL interpreter on the kernel's source (fp64). Both (1) and
// (3) must agree with (2) within the tolerance; the kernel's output must be finite everywhere.
#include "dense_alibi.attnc.h"
#include "dense_attn_mask_additive.attnc.h"
#include "dense_attn_mask_bool.attnc.h"
#include "dense_causal_attention.attnc.h"
#include "dense_cross_attention.attnc.h"
#include "dense_encoder_block.attnc.h"
#include "dense_gqa.attnc.h"
#include "dense_mhsa.attnc.h"
#include "dense_mhsa_nobias.attnc.h"
#include "dense_padding_mask.attnc.h"
#include "dense_positional_encoding.attnc.h"
#include "dense_relative_bias.attnc.h"
#include "dense_sink_attention.attnc.h"
#include "dense_t2t_attention.attnc.h"

#include "attnc/dsl/FrontEnd.h"
#include "attnc/dsl/Interpreter.h"
#include "numerics/numerics_support.h"
#include "reference/dense_ref.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <string>

#ifndef ATTNC_VARIANTS_DIR
#error "ATTNC_VARIANTS_DIR must name dsl/variants"
#endif

namespace {

// --- inputs ------------------------------------------------------------------------------------

using attnc_test::check;
using attnc_test::In;
using attnc_test::ints;
using attnc_test::numel;
using attnc_test::Outcome;

// Normal(0, scale) f32 data.
In randn(std::vector<int64_t> shape, unsigned seed, float scale = 1.f) {
  return attnc_test::randn(std::move(shape), seed, 0.f, scale);
}

// Expects out[...] == 0 exactly on every element whose flat index satisfies pred (and at least
// one such element).
template <typename V, typename Pred>
void expectZerosWhere(const V &out, Pred pred, const std::string &what) {
  size_t count = 0, nonzero = 0;
  for (size_t e = 0; e < out.size(); ++e)
    if (pred(e))
      ++count, nonzero += (out[e] != 0);
  EXPECT_GT(count, 0u) << what;
  EXPECT_EQ(nonzero, 0u) << what << ": a fully masked row must be exactly zero";
}

template <typename... Ts> std::string name(const char *kernel, Ts... dims) {
  std::ostringstream os;
  os << kernel;
  const char *sep = "(";
  ((os << sep << dims, sep = ","), ...);
  os << ")";
  return os.str();
}

// Weights drawn with std 1/sqrt(fan_in) keep activations O(1) (and softmax away from saturation).
float fanIn(int n) { return 1.f / std::sqrt((float)n); }

// --- 1. / 2. mhsa, mhsa_nobias -----------------------------------------------------------------

struct MhsaShape {
  int B, N, C, H, Dh;
};

TEST(DenseNumerics, Mhsa) {
  // H*Dh need not equal C; N = 1; odd sizes.
  for (MhsaShape s : {MhsaShape{2, 17, 12, 3, 4}, MhsaShape{1, 1, 8, 2, 4},
                      MhsaShape{2, 9, 10, 3, 5}, MhsaShape{1, 33, 48, 4, 12}}) {
    In x = randn({s.B, s.N, s.C}, 11), w = randn({3, s.H, s.Dh, s.C}, 12, fanIn(s.C)),
       b = randn({3, s.H, s.Dh}, 13, .5f), wo = randn({s.C, s.H, s.Dh}, 14, fanIn(s.H * s.Dh)),
       bo = randn({s.C}, 15, .5f);
    check(
        attnc_kernels::mhsa(), "mhsa.attn", "mhsa", {x, w, b, wo, bo}, {s.B, s.N, s.C},
        [&](auto tag) {
          using T = decltype(tag);
          return attnc_ref::mhsa<T>(x.fp(), w.fp(), b.fp(), wo.fp(), bo.fp(), s.B, s.N, s.C, s.H,
                                    s.Dh);
        },
        name("mhsa", s.B, s.N, s.C, s.H, s.Dh));
  }
}

// Kernels take their root buffers (here the per-head projections, 151 KB each) from
// attnc::buffer_alloc, which keeps them for the next call: a call on kept blocks, dirty with
// another call's data (NaN inputs), gives the same bits as one on fresh blocks.
TEST(DenseNumerics, MhsaOnKeptBuffers) {
  const size_t oldLimit = attnc::buffer_cache_limit();
  attnc::set_buffer_cache_limit(0);
  const MhsaShape s{1, 197, 192, 3, 64};
  In x = randn({s.B, s.N, s.C}, 21), w = randn({3, s.H, s.Dh, s.C}, 22, fanIn(s.C)),
     b = randn({3, s.H, s.Dh}, 23, .5f), wo = randn({s.C, s.H, s.Dh}, 24, fanIn(s.H * s.Dh)),
     bo = randn({s.C}, 25, .5f);
  In nan = x;
  for (float &e : nan.f)
    e = std::numeric_limits<float>::quiet_NaN();
  auto run = [&](const In &xin) {
    std::vector<float> y(numel({s.B, s.N, s.C}));
    std::vector<attnc::TensorView> in;
    for (const In *t : std::initializer_list<const In *>{&xin, &w, &b, &wo, &bo})
      in.push_back(attnc::TensorView::f32(const_cast<float *>(t->fp()), t->shape));
    attnc::Status st =
        attnc::call(attnc_kernels::mhsa(), in, {attnc::TensorView::f32(y.data(), {s.B, s.N, s.C})});
    EXPECT_TRUE(st.ok()) << st.message();
    return y;
  };
  const std::vector<float> fresh = run(x);
  EXPECT_EQ(attnc::buffer_cache_bytes(), 0u);
  attnc::set_buffer_cache_limit(size_t(64) << 20);
  run(nan);
  EXPECT_GT(attnc::buffer_cache_bytes(), 0u)
      << "the kernel's buffers did not come from attnc::buffer_alloc";
  const std::vector<float> kept = run(x);
  EXPECT_EQ(std::memcmp(fresh.data(), kept.data(), fresh.size() * sizeof(float)), 0);
  attnc::set_buffer_cache_limit(oldLimit);
}

TEST(DenseNumerics, MhsaNoBias) {
  for (MhsaShape s :
       {MhsaShape{2, 13, 24, 4, 6}, MhsaShape{1, 1, 5, 1, 3}, MhsaShape{3, 7, 9, 2, 7}}) {
    In x = randn({s.B, s.N, s.C}, 21), w = randn({3, s.H, s.Dh, s.C}, 22, fanIn(s.C)),
       wo = randn({s.C, s.H, s.Dh}, 23, fanIn(s.H * s.Dh)), bo = randn({s.C}, 24, .5f);
    check(
        attnc_kernels::mhsa_nobias(), "mhsa.attn", "mhsa_nobias", {x, w, wo, bo}, {s.B, s.N, s.C},
        [&](auto tag) {
          using T = decltype(tag);
          return attnc_ref::mhsa_nobias<T>(x.fp(), w.fp(), wo.fp(), bo.fp(), s.B, s.N, s.C, s.H,
                                           s.Dh);
        },
        name("mhsa_nobias", s.B, s.N, s.C, s.H, s.Dh));
  }
}

// --- 3. cross_attention ------------------------------------------------------------------------

TEST(DenseNumerics, CrossAttention) {
  struct S {
    int B, Nq, Nk, C, H, Dh;
  };
  for (S s :
       {S{2, 5, 11, 16, 2, 8}, S{1, 1, 1, 6, 3, 2}, S{1, 19, 3, 12, 4, 3}, S{2, 1, 27, 20, 5, 4}}) {
    In xq = randn({s.B, s.Nq, s.C}, 31), xk = randn({s.B, s.Nk, s.C}, 32),
       xv = randn({s.B, s.Nk, s.C}, 33), wq = randn({s.H, s.Dh, s.C}, 34, fanIn(s.C)),
       wk = randn({s.H, s.Dh, s.C}, 35, fanIn(s.C)), wv = randn({s.H, s.Dh, s.C}, 36, fanIn(s.C)),
       wo = randn({s.C, s.H, s.Dh}, 37, fanIn(s.H * s.Dh)), bo = randn({s.C}, 38, .5f);
    check(
        attnc_kernels::cross_attention(), "cross_attention.attn", "cross_attention",
        {xq, xk, xv, wq, wk, wv, wo, bo}, {s.B, s.Nq, s.C},
        [&](auto tag) {
          using T = decltype(tag);
          return attnc_ref::cross_attention<T>(xq.fp(), xk.fp(), xv.fp(), wq.fp(), wk.fp(), wv.fp(),
                                               wo.fp(), bo.fp(), s.B, s.Nq, s.Nk, s.C, s.H, s.Dh);
        },
        name("cross_attention", s.B, s.Nq, s.Nk, s.C, s.H, s.Dh));
  }
}

// --- 4. causal_attention -----------------------------------------------------------------------

struct QkvShape {
  int B, H, Nq, Nk, D;
};

// How the scores of a check are drawn.
enum class Scores {
  Normal, // q, k ~ N(0, 1): scores O(1)
  Huge,   // q, k ~ N(0, 100^2): q.k / sqrt(D) ~ N(0, 1e4^2), so the softmax is (nearly) one-hot
  Offset, // q.k / sqrt(D) = 1e4 + O(1): every score near 1e4 with O(1) gaps between keys
};

const char *scoresLabel(Scores m) {
  return m == Scores::Huge ? " scores ~1e4" : m == Scores::Offset ? " scores 1e4+O(1)" : "";
}

// q [.., Nq, D] and k [.., Nk, D] for the given score regime. Offset: q_i = a u + m_i and
// k_j = a u + n_j with u = (1, ..., 1), a^2 sqrt(D) = 1e4 and each n_j of mean zero (orthogonal to
// u), so q_i . k_j / sqrt(D) = 1e4 + (a u . m_i + m_i . n_j) / sqrt(D): the exponent of a softmax
// that did not subtract the row max would overflow, yet the keys still get comparable weights.
void drawQK(Scores m, const std::vector<int64_t> &qShape, const std::vector<int64_t> &kShape,
            unsigned seed, In *q, In *k) {
  const int64_t D = qShape.back();
  *q = randn(qShape, seed, m == Scores::Huge ? 100.f : 1.f);
  *k = randn(kShape, seed + 1, m == Scores::Huge ? 100.f : 1.f);
  if (m != Scores::Offset)
    return;
  const float a = std::sqrt(1e4f / std::sqrt((float)D));
  for (size_t r = 0; r < q->f.size() / D; ++r)
    for (int64_t d = 0; d < D; ++d)
      q->f[r * D + d] += a;
  for (size_t r = 0; r < k->f.size() / D; ++r) {
    float mean = 0;
    for (int64_t d = 0; d < D; ++d)
      mean += k->f[r * D + d] / (float)D;
    for (int64_t d = 0; d < D; ++d)
      k->f[r * D + d] += a - mean;
  }
}

Outcome checkCausal(int B, int H, int N, int D, Scores m, unsigned seed) {
  In q, k, v = randn({B, H, N, D}, seed + 2);
  drawQK(m, {B, H, N, D}, {B, H, N, D}, seed, &q, &k);
  return check(
      attnc_kernels::causal_attention(), "causal_attention.attn", "causal_attention", {q, k, v},
      {B, H, N, D},
      [&](auto tag) {
        using T = decltype(tag);
        return attnc_ref::causal_attention<T>(q.fp(), k.fp(), v.fp(), B, H, N, D);
      },
      name("causal_attention", B, H, N, D) + scoresLabel(m));
}

TEST(DenseNumerics, CausalAttention) {
  for (QkvShape s : {QkvShape{2, 3, 17, 17, 8}, QkvShape{1, 1, 1, 1, 5}, QkvShape{1, 2, 40, 40, 16},
                     QkvShape{3, 1, 6, 6, 3}})
    checkCausal(s.B, s.H, s.Nq, s.D, Scores::Normal, 41);
  // Past one 128-key tile: whole tiles only (256), and a last tile shifted back over keys an
  // earlier tile counted (129, 300), with the D = 64 and D = 128 specialisations and without.
  for (QkvShape s : {QkvShape{1, 2, 256, 256, 64}, QkvShape{1, 1, 129, 129, 16},
                     QkvShape{2, 1, 300, 300, 64}, QkvShape{1, 1, 200, 200, 128}})
    checkCausal(s.B, s.H, s.Nq, s.D, Scores::Normal, 43);
}

// Softmax must subtract the row max: scores around 1e4 would overflow exp() otherwise.
TEST(DenseNumerics, CausalAttentionLargeScoresStayFinite) {
  checkCausal(1, 2, 33, 16, Scores::Huge, 45);
  checkCausal(2, 1, 21, 16, Scores::Offset, 47);
  checkCausal(1, 2, 9, 7, Scores::Offset, 49);
}

// --- 5. t2t_attention --------------------------------------------------------------------------

TEST(DenseNumerics, T2tAttention) {
  struct S {
    int B, N, Dim, H, Dh;
  };
  // Ch = H * Dh, as the kernel requires.
  for (S s : {S{2, 9, 15, 1, 8}, S{1, 1, 7, 2, 3}, S{1, 25, 27, 2, 16}, S{2, 10, 12, 3, 5}}) {
    const int Ch = s.H * s.Dh;
    In x = randn({s.B, s.N, s.Dim}, 51), w = randn({3, s.H, s.Dh, s.Dim}, 52, fanIn(s.Dim)),
       wo = randn({Ch, s.H, s.Dh}, 53, fanIn(Ch)), bo = randn({Ch}, 54, .5f);
    check(
        attnc_kernels::t2t_attention(), "t2t_attention.attn", "t2t_attention", {x, w, wo, bo},
        {s.B, s.N, Ch},
        [&](auto tag) {
          using T = decltype(tag);
          return attnc_ref::t2t_attention<T>(x.fp(), w.fp(), wo.fp(), bo.fp(), s.B, s.N, s.Dim, s.H,
                                             s.Dh);
        },
        name("t2t_attention", s.B, s.N, s.Dim, s.H, s.Dh));
  }
}

// --- 6. positional_encoding --------------------------------------------------------------------

TEST(DenseNumerics, PositionalEncoding) {
  struct S {
    int B, N, D;
  };
  // Odd D (the last column is a lone sin), D = 1, N = 1.
  for (S s : {S{2, 7, 9}, S{1, 1, 1}, S{1, 40, 48}, S{3, 13, 1}, S{1, 1, 6}}) {
    In x = randn({s.B, s.N, s.D}, 61);
    check(
        attnc_kernels::positional_encoding(), "positional_encoding.attn", "positional_encoding",
        {x}, {s.B, s.N, s.D},
        [&](auto tag) {
          using T = decltype(tag);
          return attnc_ref::positional_encoding<T>(x.fp(), s.B, s.N, s.D);
        },
        name("positional_encoding", s.B, s.N, s.D));
  }
}

// --- 7. encoder_block --------------------------------------------------------------------------

TEST(DenseNumerics, EncoderBlock) {
  struct S {
    int B, N, C, H, Dh, F;
  };
  for (S s : {S{2, 5, 12, 3, 4, 24}, S{1, 1, 8, 2, 4, 16}, S{1, 17, 16, 2, 8, 40},
              S{2, 7, 9, 3, 5, 13}}) {
    In x = randn({s.B, s.N, s.C}, 71, 2.f), g1 = randn({s.C}, 72, .5f), b1 = randn({s.C}, 73, .5f),
       w = randn({3, s.H, s.Dh, s.C}, 74, fanIn(s.C)), b = randn({3, s.H, s.Dh}, 75, .5f),
       wo = randn({s.C, s.H, s.Dh}, 76, fanIn(s.H * s.Dh)), bo = randn({s.C}, 77, .5f),
       g2 = randn({s.C}, 78, .5f), b2 = randn({s.C}, 79, .5f),
       w1 = randn({s.F, s.C}, 80, fanIn(s.C)), bf1 = randn({s.F}, 81, .5f),
       w2 = randn({s.C, s.F}, 82, fanIn(s.F)), bf2 = randn({s.C}, 83, .5f);
    for (float &e : g1.f)
      e += 1.f; // gamma around 1, as trained LayerNorms have
    for (float &e : g2.f)
      e += 1.f;
    check(
        attnc_kernels::encoder_block(), "encoder_block.attn", "encoder_block",
        {x, g1, b1, w, b, wo, bo, g2, b2, w1, bf1, w2, bf2}, {s.B, s.N, s.C},
        [&](auto tag) {
          using T = decltype(tag);
          return attnc_ref::encoder_block<T>(x.fp(), g1.fp(), b1.fp(), w.fp(), b.fp(), wo.fp(),
                                             bo.fp(), g2.fp(), b2.fp(), w1.fp(), bf1.fp(), w2.fp(),
                                             bf2.fp(), s.B, s.N, s.C, s.H, s.Dh, s.F);
        },
        name("encoder_block", s.B, s.N, s.C, s.H, s.Dh, s.F));
  }
}

// --- 8. gqa ------------------------------------------------------------------------------------

TEST(DenseNumerics, Gqa) {
  struct S {
    int B, Hq, Hkv, Nq, Nk, D;
  };
  // GQA (ratio 3), MQA (Hkv = 1) with a single query, plain MHA (Hq = Hkv), MQA with Nq > Nk.
  for (S s :
       {S{2, 6, 2, 7, 13, 8}, S{1, 4, 1, 1, 9, 5}, S{1, 3, 3, 17, 17, 16}, S{2, 8, 1, 23, 5, 12}}) {
    In q = randn({s.B, s.Hq, s.Nq, s.D}, 91), k = randn({s.B, s.Hkv, s.Nk, s.D}, 92),
       v = randn({s.B, s.Hkv, s.Nk, s.D}, 93);
    check(
        attnc_kernels::gqa(), "gqa.attn", "gqa", {q, k, v}, {s.B, s.Hq, s.Nq, s.D},
        [&](auto tag) {
          using T = decltype(tag);
          return attnc_ref::gqa<T>(q.fp(), k.fp(), v.fp(), s.B, s.Hq, s.Hkv, s.Nq, s.Nk, s.D);
        },
        name("gqa", s.B, s.Hq, s.Hkv, s.Nq, s.Nk, s.D));
  }
}

// Hq not a multiple of Hkv would make query head 2 of 3 read kv head 2 of 2: the kernel checks
// gqa's `require` before Halide's bounds checks, so the caller is told the relation, not the read.
TEST(DenseNumerics, GqaUnevenHeadsIsAnError) {
  std::vector<float> q(1 * 3 * 4 * 8, 0.5f), k(1 * 2 * 5 * 8, 0.5f), v(1 * 2 * 5 * 8, 0.5f),
      o(1 * 3 * 4 * 8);
  attnc::Status st = attnc::call(attnc_kernels::gqa(),
                                 {attnc::TensorView::f32(q.data(), {1, 3, 4, 8}),
                                  attnc::TensorView::f32(k.data(), {1, 2, 5, 8}),
                                  attnc::TensorView::f32(v.data(), {1, 2, 5, 8})},
                                 {attnc::TensorView::f32(o.data(), {1, 3, 4, 8})});
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), ::testing::StartsWith("gqa: "));
  EXPECT_THAT(st.message(),
              ::testing::HasSubstr("gqa.attn:7:3: requirement failed: Hq (q's dimension 1) must be "
                                   "a multiple of Hkv (k's and v's dimension 1)"));
}

// --- 9. alibi ----------------------------------------------------------------------------------

const QkvShape kBiasShapes[] = {
    {2, 4, 9, 9, 8}, {1, 3, 1, 17, 6}, {1, 8, 20, 5, 4}, {2, 2, 31, 37, 16}, {1, 1, 1, 1, 3}};

TEST(DenseNumerics, Alibi) {
  for (QkvShape s : kBiasShapes) {
    In q = randn({s.B, s.H, s.Nq, s.D}, 101), k = randn({s.B, s.H, s.Nk, s.D}, 102),
       v = randn({s.B, s.H, s.Nk, s.D}, 103);
    check(
        attnc_kernels::alibi(), "alibi.attn", "alibi", {q, k, v}, {s.B, s.H, s.Nq, s.D},
        [&](auto tag) {
          using T = decltype(tag);
          return attnc_ref::alibi<T>(q.fp(), k.fp(), v.fp(), s.B, s.H, s.Nq, s.Nk, s.D);
        },
        name("alibi", s.B, s.H, s.Nq, s.Nk, s.D));
  }
}

// --- 10. relative_bias -------------------------------------------------------------------------

TEST(DenseNumerics, RelativeBias) {
  for (QkvShape s : kBiasShapes) {
    const int R = s.Nq + s.Nk - 1;
    In q = randn({s.B, s.H, s.Nq, s.D}, 111), k = randn({s.B, s.H, s.Nk, s.D}, 112),
       v = randn({s.B, s.H, s.Nk, s.D}, 113), table = randn({s.H, R}, 114);
    check(
        attnc_kernels::relative_bias(), "relative_bias.attn", "relative_bias", {q, k, v, table},
        {s.B, s.H, s.Nq, s.D},
        [&](auto tag) {
          using T = decltype(tag);
          return attnc_ref::relative_bias<T>(q.fp(), k.fp(), v.fp(), table.fp(), s.B, s.H, s.Nq,
                                             s.Nk, s.D, R);
        },
        name("relative_bias", s.B, s.H, s.Nq, s.Nk, s.D));
  }
}

// --- 11. padding_mask --------------------------------------------------------------------------

TEST(DenseNumerics, PaddingMask) {
  // mask(b, j) gives key_padding_mask; `padded` is a batch whose keys are all padded (-1: none).
  struct Case {
    QkvShape s;
    int padded;
  };
  // (200 keys: the kernel's copy for 128 to 255 keys; 600: whole tiles of 256 keys, its copy
  // for at least 256, cpu-online.)
  for (Case c : {Case{{3, 2, 5, 9, 4}, 1}, Case{{1, 1, 1, 1, 3}, -1}, Case{{2, 2, 12, 1, 8}, 0},
                 Case{{2, 3, 17, 29, 16}, -1}, Case{{2, 2, 33, 200, 64}, -1},
                 Case{{3, 1, 20, 600, 64}, 2}}) {
    const QkvShape s = c.s;
    std::vector<int32_t> m((size_t)s.B * s.Nk);
    for (int b = 0; b < s.B; ++b)
      for (int j = 0; j < s.Nk;
           ++j) // batch b pads its last b keys (keeping at least one), or all of them
        m[(size_t)b * s.Nk + j] = (b == c.padded) ? 1 : (j >= std::max(1, s.Nk - b) ? 1 : 0);
    In q = randn({s.B, s.H, s.Nq, s.D}, 121), k = randn({s.B, s.H, s.Nk, s.D}, 122),
       v = randn({s.B, s.H, s.Nk, s.D}, 123), mask = ints({s.B, s.Nk}, m);
    const std::string label =
        name("padding_mask", s.B, s.H, s.Nq, s.Nk, s.D) +
        (c.padded >= 0 ? " batch " + std::to_string(c.padded) + " all padded" : "");
    Outcome r = check(
        attnc_kernels::padding_mask(), "padding_mask.attn", "padding_mask", {q, k, v, mask},
        {s.B, s.H, s.Nq, s.D},
        [&](auto tag) {
          using T = decltype(tag);
          return attnc_ref::padding_mask<T>(q.fp(), k.fp(), v.fp(), mask.ip(), s.B, s.H, s.Nq, s.Nk,
                                            s.D);
        },
        label);
    if (c.padded >= 0) {
      const size_t perBatch = (size_t)s.H * s.Nq * s.D;
      auto inPadded = [&](size_t e) { return e / perBatch == (size_t)c.padded; };
      expectZerosWhere(r.ref, inPadded, label + " (reference)");
      if (r.ran)
        expectZerosWhere(r.aot, inPadded, label + " (AOT)");
      if (!r.interp.empty())
        expectZerosWhere(r.interp, inPadded, label + " (interpreter)");
    }
  }
}

// --- 12. attn_mask_bool, attn_mask_additive ----------------------------------------------------

TEST(DenseNumerics, AttnMaskBool) {
  struct Case {
    QkvShape s;
    int emptyRow; // a query row with no allowed key (-1: none)
  };
  for (Case c : {Case{{2, 2, 6, 10, 8}, 3}, Case{{1, 1, 1, 1, 4}, -1}, Case{{1, 3, 17, 23, 5}, 0},
                 Case{{2, 1, 9, 1, 7}, 8}}) {
    const QkvShape s = c.s;
    std::vector<int32_t> m((size_t)s.Nq * s.Nk);
    for (int i = 0; i < s.Nq; ++i)
      for (int j = 0; j < s.Nk; ++j) // a pattern that always keeps key i mod Nk
        m[(size_t)i * s.Nk + j] = (i == c.emptyRow)                         ? 0
                                  : ((i + 2 * j) % 3 != 1 || j == i % s.Nk) ? 1
                                                                            : 0;
    In q = randn({s.B, s.H, s.Nq, s.D}, 131), k = randn({s.B, s.H, s.Nk, s.D}, 132),
       v = randn({s.B, s.H, s.Nk, s.D}, 133), mask = ints({s.Nq, s.Nk}, m);
    const std::string label =
        name("attn_mask_bool", s.B, s.H, s.Nq, s.Nk, s.D) +
        (c.emptyRow >= 0 ? " row " + std::to_string(c.emptyRow) + " empty" : "");
    Outcome r = check(
        attnc_kernels::attn_mask_bool(), "attn_mask.attn", "attn_mask_bool", {q, k, v, mask},
        {s.B, s.H, s.Nq, s.D},
        [&](auto tag) {
          using T = decltype(tag);
          return attnc_ref::attn_mask_bool<T>(q.fp(), k.fp(), v.fp(), mask.ip(), s.B, s.H, s.Nq,
                                              s.Nk, s.D);
        },
        label);
    if (c.emptyRow >= 0) {
      auto inRow = [&](size_t e) { return (e / s.D) % s.Nq == (size_t)c.emptyRow; };
      expectZerosWhere(r.ref, inRow, label + " (reference)");
      if (r.ran)
        expectZerosWhere(r.aot, inRow, label + " (AOT)");
      if (!r.interp.empty())
        expectZerosWhere(r.interp, inRow, label + " (interpreter)");
    }
  }
}

Outcome checkAdditive(QkvShape s, int infRow, Scores m, unsigned seed) {
  In q, k, v = randn({s.B, s.H, s.Nk, s.D}, seed + 2),
           bias = randn({s.Nq, s.Nk}, seed + 3, m == Scores::Huge ? 1e4f : 1.f);
  drawQK(m, {s.B, s.H, s.Nq, s.D}, {s.B, s.H, s.Nk, s.D}, seed, &q, &k);
  // -inf entries: a scatter of excluded keys (never a whole row, except infRow).
  for (int i = 0; i < s.Nq; ++i)
    for (int j = 0; j < s.Nk; ++j)
      if (i == infRow || ((i * 7 + j * 3) % 5 == 0 && j != i % s.Nk))
        bias.f[(size_t)i * s.Nk + j] = -INFINITY;
  const std::string label = name("attn_mask_additive", s.B, s.H, s.Nq, s.Nk, s.D) +
                            (infRow >= 0 ? " row " + std::to_string(infRow) + " all -inf" : "") +
                            scoresLabel(m);
  Outcome r = check(
      attnc_kernels::attn_mask_additive(), "attn_mask.attn", "attn_mask_additive", {q, k, v, bias},
      {s.B, s.H, s.Nq, s.D},
      [&](auto tag) {
        using T = decltype(tag);
        return attnc_ref::attn_mask_additive<T>(q.fp(), k.fp(), v.fp(), bias.fp(), s.B, s.H, s.Nq,
                                                s.Nk, s.D);
      },
      label);
  if (infRow >= 0) {
    auto inRow = [&](size_t e) { return (e / s.D) % s.Nq == (size_t)infRow; };
    expectZerosWhere(r.ref, inRow, label + " (reference)");
    if (r.ran)
      expectZerosWhere(r.aot, inRow, label + " (AOT)");
    if (!r.interp.empty())
      expectZerosWhere(r.interp, inRow, label + " (interpreter)");
  }
  return r;
}

TEST(DenseNumerics, AttnMaskAdditive) {
  checkAdditive({2, 2, 6, 10, 8}, -1, Scores::Normal, 141);
  checkAdditive({1, 3, 1, 3, 4}, -1, Scores::Normal, 145);
  checkAdditive({1, 2, 21, 13, 5}, -1, Scores::Normal, 149);
}

TEST(DenseNumerics, AttnMaskAdditiveAllInfRowIsZero) {
  checkAdditive({2, 2, 6, 10, 8}, 2, Scores::Normal, 151);
  checkAdditive({1, 1, 1, 7, 3}, 0, Scores::Normal, 155);
}

// Scores around 1e4 (with -inf entries): finite, and matching the fp64 reference.
TEST(DenseNumerics, AttnMaskAdditiveLargeScoresStayFinite) {
  checkAdditive({1, 2, 19, 33, 16}, -1, Scores::Huge, 161);
  checkAdditive({2, 1, 11, 17, 16}, 4, Scores::Offset, 165);
  checkAdditive({1, 2, 1, 9, 5}, -1, Scores::Offset, 169);
}

// --- 13. sink_attention ------------------------------------------------------------------------

// Causal attention with one sink logit per head, against the fp64 reference written from the
// formula. Sinks drawn N(0, 2^2) sit inside the scores' range; the extreme ones below test a sink
// that takes almost all the weight (+30), one that takes none (-30) and -inf (plain causal).
Outcome checkSinks(QkvShape s, const std::vector<float> &sinkValues, Scores m, unsigned seed) {
  In q, k, v = randn({s.B, s.H, s.Nq, s.D}, seed + 2);
  drawQK(m, {s.B, s.H, s.Nq, s.D}, {s.B, s.H, s.Nq, s.D}, seed, &q, &k);
  In sinks = randn({s.H}, seed + 3, 2.f);
  for (size_t h = 0; h < sinkValues.size() && h < sinks.f.size(); ++h)
    sinks.f[h] = sinkValues[h];
  return check(
      attnc_kernels::sink_attention(), "sink_attention.attn", "sink_attention", {q, k, v, sinks},
      {s.B, s.H, s.Nq, s.D},
      [&](auto tag) {
        using T = decltype(tag);
        return attnc_ref::sink_attention<T>(q.fp(), k.fp(), v.fp(), sinks.fp(), s.B, s.H, s.Nq,
                                            s.D);
      },
      name("sink_attention", s.B, s.H, s.Nq, s.D) + scoresLabel(m));
}

TEST(DenseNumerics, SinkAttention) {
  for (QkvShape s : {QkvShape{2, 3, 17, 17, 8}, QkvShape{1, 1, 1, 1, 5}, QkvShape{3, 1, 6, 6, 3}})
    checkSinks(s, {}, Scores::Normal, 171);
  // Past one 128-key tile: whole tiles (256) and a shifted last tile (300), D = 64 and not.
  for (QkvShape s : {QkvShape{1, 2, 256, 256, 64}, QkvShape{2, 1, 300, 300, 16}})
    checkSinks(s, {}, Scores::Normal, 173);
}

TEST(DenseNumerics, SinkAttentionExtremeSinks) {
  const float inf = std::numeric_limits<float>::infinity();
  checkSinks({2, 4, 40, 40, 16}, {30.f, -30.f, -inf, 0.f}, Scores::Normal, 175);
  checkSinks({1, 4, 140, 140, 16}, {30.f, -30.f, -inf, 0.f}, Scores::Normal, 177);
  checkSinks({1, 2, 33, 33, 16}, {1e4f, -inf}, Scores::Offset, 179);
}

} // namespace
