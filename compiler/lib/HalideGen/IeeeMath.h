// IEEE-correct special values for the math functions a kernel may call (exp, log, pow, erf).
#pragma once

#include "Halide.h"

namespace attnc {

// Halide's float math is its own polynomials with range reduction, and gives arbitrary finite
// results outside float's normal range: log(NaN) = 89,
// exp(1e30) = 0, erf(inf) = NaN, pow(2, inf) = 0. These keep Halide's function for ordinary
// arguments and spell out NaN, +-inf, zeros, overflow and subnormal results as C's libm does
// (and the reference interpreter, which calls it), docs/language.md §6.
Halide::Expr ieeeExp(const Halide::Expr &x);
Halide::Expr ieeeLog(const Halide::Expr &x);
Halide::Expr ieeeErf(const Halide::Expr &x);
Halide::Expr ieeePow(const Halide::Expr &x, const Halide::Expr &y);

// tanh, sin and cos as vector code: Halide lowers its own to a scalar libm call per lane (160
// tanhf calls in one soft-capped attention kernel, 6x its time with tanh written through exp).
// Error bounds (tests/lit/run/vector-math.test, against fp64; ulp = 2^-23 relative): tanh within
// 4 ulp (2.9 measured over every float in [1e-6, 12]); sin and cos within 4 ulp plus |x| 2^-52 absolute (the
// double-precision argument reduction) for |x| < 2^30 and NaN beyond, where that reduction no
// longer holds; C's special values (NaN for NaN and +-inf, the sign of a zero kept by tanh and
// sin).
Halide::Expr vecTanh(const Halide::Expr &x);
Halide::Expr vecSin(const Halide::Expr &x);
Halide::Expr vecCos(const Halide::Expr &x);

// exp(x) for x <= 0, -inf and NaN: a softmax's exps of score - row max, the online softmax's
// rescaling exp(-|old max - new max|) and a sink's exp. Halide's exp spends a third of its
// instructions on `floor`, which x86 code generation splits into two 8-lane vroundps with a lane
// extract and insert on AVX-512, and on its over- and underflow selects; and attnc's strict
// floats keep its polynomial from fused multiply-adds. Here n is the integer nearest
// x / ln 2 (adding and subtracting 1.5 * 2^23: no floor), r = x - n ln 2 in two parts (Cody and
// Waite), e^r from Cephes' expf polynomial on [-ln 2 / 2, ln 2 / 2], and 2^n from n's bits.
// Relative error within 2 ulp over x in [-87.33, 0] (tests/unit/softmax_exp_test.cpp, against
// fp64, every 97th float); exact 1 at 0; 0 below -87.33 (where exp is subnormal, as Halide's exp
// flushes it) and at -inf; NaN for NaN (no select needed: the arithmetic carries it), where
// Halide's exp gives 0: a NaN or +inf score (inf - inf) turns its softmax row into NaN, as in
// PyTorch, whether or not the row's max kept the NaN (a max of floats does not promise to). Not
// for x > 0, where 2^n overflows its exponent field unchecked.
// It is returned as a call that applyFloatSemantics expands once every other float operation is
// strict (expandNonPositiveExp): the range reduction and the underflow test stay strict, the
// polynomial keeps Halide's flags so that its multiply-adds fuse. sdpa's tile exps on AVX-512:
// 29 -> 20 vector instructions per 16 scores. For a GPU kernel (`gpu`) the expansion is
// Halide's exp with NaN kept, as before: CUDA's is a libdevice call of about half the
// instructions, and the cost model counts it as one call (cuda-window's plans recompute exps).
Halide::Expr nonPositiveExp(const Halide::Expr &x);
Halide::Expr expandNonPositiveExp(const Halide::Expr &e, bool gpu = false);

// Whether a float is NaN, as Halide::is_nan tests it but without the strict_float copy of `x` that
// Halide::is_nan makes: that copy is a tree walk of a shared expression, so each nested use
// doubled the expression (tanh of tanh four deep: 13.6 million nodes, 40 s to define a Func;
// sigmoid six deep a minute). attnc makes every float operation strict itself
// (applyFloatSemantics), so the test means the same.
Halide::Expr isNan(const Halide::Expr &x);

} // namespace attnc
