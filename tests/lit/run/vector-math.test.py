# vector-math.test: makes the inputs, then checks each run's tanh, sin and cos against fp64.
import math
import sys

import numpy as np

nan, inf = float("nan"), float("inf")
SPECIAL = [nan, inf, -inf, 0.0, -0.0, 1e-40, -1e-40, 1e-30, 3e-8, -3e-8, 1e-7, 1e-4, -1e-4, 0.5, -0.5,
           0.7853982, 1.5707964, 3.1415927, -3.1415927, 6.2831855, 8.9, 9.1, -9.1, 20.0, 100.0, 1e3, 1e4,
           65536.5, 131072.0, 1e5 + 0.25, 355.0, 710.0, 1e6, 1.6e7, 1e8, 1e30, -1e30, 3.4e38]
mode, d = sys.argv[1], sys.argv[2]
if mode == "make":
    rng = np.random.default_rng(11)
    x = np.concatenate([np.array(SPECIAL), rng.standard_normal(300) * 3, rng.uniform(-1e-3, 1e-3, 100),
                        rng.uniform(-2e5, 2e5, 200), np.arange(0, 4096, 17) * 0.37,
                        # tanh's fitted range, densely, and its worst point (IeeeMath.cpp)
                        np.linspace(-10, 10, 2001), [6.0756836, -6.0756836]])
    np.save(d + "/x.npy", x.astype(np.float32))
    sys.exit()

x = np.load(d + "/x.npy").astype(np.float64)
ulp = 2.0**-23
with np.errstate(all="ignore"):
    # sin and cos are NaN from |x| = 2^30 on, where the argument reduction's error passes 2^-22.
    huge = np.abs(x) >= 2.0**30
    expected = {"t": np.tanh(x), "s": np.where(huge, nan, np.sin(x)), "c": np.where(huge, nan, np.cos(x))}
    # The documented bounds (compiler/lib/HalideGen/IeeeMath.h): 4 ulp relative; for sin and cos
    # also |x| 2^-52 absolute (argument reduction), and 2^-126 absolute below f32's normal range.
    reduction = {"t": 0 * x, "s": np.abs(x) * 2.0**-52, "c": np.abs(x) * 2.0**-52}


def agrees(got, want, red):
    got = got.astype(np.float64)
    both_nan = np.isnan(got) & np.isnan(want)
    same = (got == want) & (np.signbit(got) == np.signbit(want))
    close = np.abs(got - want) <= 4 * ulp * np.abs(want) + red + 2.0**-126
    return np.nonzero(~(both_nan | same | (close & np.isfinite(want) & (want != 0))))[0]


for run in ["auto", "none"]:
    bad = []
    for name, want in expected.items():
        got = np.load("%s/%s-%s.npy" % (d, run, name))
        for i in agrees(got, want, reduction[name])[:3]:
            bad.append("%s(%r) = %r, expected %r" % (name, x[i], float(got[i]), float(want[i])))
    print("%s: %s" % (run, "wrong: " + "; ".join(bad) if bad else "t s c agree with fp64 at %d points" % len(x)))
# The reference is libm in double: exact everywhere, the huge arguments included.
with np.errstate(all="ignore"):
    want = {"t": np.tanh(x), "s": np.sin(x), "c": np.cos(x)}
    bad = [n for n in want if len(agrees(np.load("%s/ref-%s.npy" % (d, n)), want[n], 0 * x))]
print("ref: %s" % ("wrong: " + " ".join(bad) if bad else "t s c agree with fp64 at %d points" % len(x)))
