# activations.test: makes the inputs, then checks each run's outputs against fp64 (PyTorch's
# definitions: sigmoid, silu, elu with alpha 1, softplus with beta 1 and threshold 20, relu).
import math
import sys

import numpy as np

nan, inf = float("nan"), float("inf")
SPECIAL = [nan, inf, -inf, 0.0, -0.0, 1e-7, -1e-7, 1e-30, -1e-30, 1e-40, -1e-40, 3e-8, -3e-8, 0.5, -0.5,
           1.0, -1.0, 19.99, 20.0, 20.01, -20.0, 30.0, -30.0, 87.0, -87.0, 88.5, -88.5, 89.0, -89.0,
           100.0, -100.0, 104.0, -104.0, 1e30, -1e30]
mode, d = sys.argv[1], sys.argv[2]
if mode == "make":
    rng = np.random.default_rng(7)
    x = np.concatenate([np.array(SPECIAL), rng.standard_normal(400) * 4, rng.uniform(-1e-3, 1e-3, 100)])
    np.save(d + "/x.npy", x.astype(np.float32))
    n = np.array([0, 1, -1, 7, -7, 2**31 - 1, -2**31] + list(rng.integers(-100, 100, len(x) - 7)), np.int32)
    np.save(d + "/n.npy", n)
    sys.exit()

x = np.load(d + "/x.npy").astype(np.float64)
n = np.load(d + "/n.npy")


def each(f):
    return np.array([f(v) for v in x])


with np.errstate(all="ignore"):
    expected = {
        "s": each(lambda v: 1 / (1 + math.exp(-v)) if v > -700 else 0.0 if not math.isnan(v) else v),
        "si": each(lambda v: v / (1 + math.exp(-v)) if v > -700 else (nan if v == -inf else -0.0) if not math.isnan(v) else v),
        "e": each(lambda v: v if v > 0 else math.expm1(v) if not math.isnan(v) else v),
        "sp": each(lambda v: v if v > 20 else math.log1p(math.exp(v)) if not math.isnan(v) else v),
        "r": each(lambda v: v if math.isnan(v) else max(v, 0.0)),
    }


def agrees(got, want):
    """Same NaN-ness and infinities; within 4e-6 relative (a few f32 ulps: exp, log and a division
    each round once); results below f32's smallest normal within 2^-126 absolute (sigmoid and silu
    of x below -87 are subnormal or 0 in f32, as in PyTorch)."""
    got = got.astype(np.float64)
    both_nan = np.isnan(got) & np.isnan(want)
    close = np.abs(got - want) <= np.maximum(4e-6 * np.abs(want), 2.0**-126)
    return np.nonzero(~(both_nan | (got == want) | (close & np.isfinite(want))))[0]


for run in ["auto", "none", "ref"]:
    bad = []
    for name, want in expected.items():
        got = np.load("%s/%s-%s.npy" % (d, run, name))
        for i in agrees(got, want)[:3]:
            bad.append("%s(%r) = %r, expected %r" % (name, x[i], float(got[i]), float(want[i])))
    ri = np.load("%s/%s-ri.npy" % (d, run))
    if not np.array_equal(ri, np.maximum(n, 0)):
        bad.append("relu of int32 differs")
    print("%s: %s" % (run, "wrong: " + "; ".join(bad) if bad else "s si e sp r ri agree with fp64 at %d points" % len(x)))
