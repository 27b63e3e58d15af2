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

// Whether a float is NaN, as Halide::is_nan tests it but without the strict_float copy of `x` that
// Halide::is_nan makes: that copy is a tree walk of a shared expression, so each nested use
// doubled the expression (tanh of tanh four deep: 13.6 million nodes, 40 s to define a Func;
// sigmoid six deep a minute). attnc makes every float operation strict itself
// (applyFloatSemantics), so the test means the same.
Halide::Expr isNan(const Halide::Expr &x);

} // namespace attnc
