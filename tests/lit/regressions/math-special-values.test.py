# math-special-values.test: makes the inputs, then checks each run's outputs against libm/IEEE.
import itertools
import math
import sys

import numpy as np

nan, inf = float("nan"), float("inf")
VALUES = [nan, inf, -inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 2.5, 1e-40, -1e-40, 1e30, -1e30, 1e-30,
          127.0, 128.0, -126.0, -149.0, -150.0, 0.3, -7.0, 16777217.0, -100.0, -88.0, 89.0, 3.9, 3.93, -104.5]
mode, d = sys.argv[1], sys.argv[2]
if mode == "make":
    xs, ys = zip(*itertools.product(VALUES, VALUES))
    np.save(d + "/x.npy", np.array(xs, np.float32))
    np.save(d + "/y.npy", np.array(ys, np.float32))
    sys.exit()

x, y = np.load(d + "/x.npy"), np.load(d + "/y.npy")
f32 = np.float32
with np.errstate(all="ignore"):
    expected = {
        "p": np.power(x, y),
        "l": np.log(x),
        "e": np.exp(x.astype(np.float64)).astype(f32),
        "r": np.array([math.erf(float(v)) if not math.isnan(v) else nan for v in x], f32),
        "n": -x,
        "ge": np.where(x >= y, f32(1), f32(2)),
        "le": np.where(x <= y, f32(1), f32(2)),
        "dz": x / (y - y),
        "dm": x / (y * f32(0)),
    }


def agrees(got, want):
    """Same NaN-ness, same sign of zero and infinity, and within 2e-6 relative (2^-140 absolute
    for subnormal results, whose precision is fixed). x^y computed as exp(y log x) carries the
    rounding of y log x: 2^-23 |log result| relative."""
    got, want = got.astype(np.float64), want.astype(np.float64)
    both_nan = np.isnan(got) & np.isnan(want)
    with np.errstate(all="ignore"):
        rel = np.maximum(2e-6, 2.0**-23 * np.abs(np.log(np.abs(want))))
    close = np.abs(got - want) <= np.maximum(rel * np.abs(want), 2.0**-140)
    same = (got == want) & (np.signbit(got) == np.signbit(want))
    ok = both_nan | same | (close & np.isfinite(want) & (want != 0))
    return np.nonzero(~ok)[0]


for run in ["auto", "none", "ref"]:
    bad = []
    for name, want in expected.items():
        got = np.load("%s/%s-%s.npy" % (d, run, name))
        for i in agrees(got, want)[:3]:
            bad.append("%s(x=%r, y=%r) = %r, expected %r" % (name, float(x[i]), float(y[i]), float(got[i]), float(want[i])))
    if bad:
        print("%s: wrong: %s" % (run, "; ".join(bad)))
    else:
        print("%s: %s agree with libm at %d points" % (run, " ".join(expected), len(x)))
