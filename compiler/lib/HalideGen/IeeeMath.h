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

} // namespace attnc
