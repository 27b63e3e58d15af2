# reduced-precision.test: bf16/f16 inputs as numpy and ml_dtypes users save them, fp64 references
# of sdpa and causal attention over those values, and a check in units of the last place.
import sys

import numpy as np

B, H, N, D = 1, 3, 150, 16


def to_bf16_bits(x):
    # Round to nearest even, as ml_dtypes and PyTorch do (no NaNs here).
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def from_bf16_bits(b):
    return (b.astype(np.uint32) << 16).view(np.float32)


def attend(q, k, v, causal):
    s = np.einsum("bhid,bhjd->bhij", q, k) / np.sqrt(D)
    if causal:
        s = np.where(np.tri(N, dtype=bool), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("bhij,bhje->bhie", p / p.sum(-1, keepdims=True), v)


def load(path):
    a = np.load(path)
    if a.dtype == np.float16:
        return a.astype(np.float64), "f16"
    assert a.dtype == np.dtype("V2"), a.dtype  # bf16 as ml_dtypes writes it
    return from_bf16_bits(a.view(np.uint16)).astype(np.float64), "bf16"


def ulp(x, kind):
    # The spacing of the type at |x| (subnormals included).
    digits, emin = (8, -126) if kind == "bf16" else (11, -14)
    e = np.maximum(np.floor(np.log2(np.maximum(np.abs(x), 1e-300))), emin)
    return np.exp2(e - (digits - 1))


mode, d = sys.argv[1], sys.argv[2]
if mode == "make":
    r = np.random.default_rng(5)
    for n in "qkv":
        x = (r.standard_normal((B, H, N, D)) * 1.5).astype(np.float32)
        np.save(f"{d}/{n}.npy", x)
        bits = to_bf16_bits(x)
        np.save(f"{d}/{n}_bf16.npy", bits.view("V2"))
        np.save(f"{d}/{n}_bf16_u2.npy", bits)
        np.save(f"{d}/{n}_f16.npy", x.astype(np.float16))
    for kind in ["bf16", "f16"]:
        q, k, v = (load(f"{d}/{n}_{kind}.npy")[0] for n in "qkv")
        for name, causal in [("sdpa", False), ("causal", True)]:
            np.save(f"{d}/{name}_{kind}_exact.npy", attend(q, k, v, causal))
            # The size of the terms of each output's sum: f32's own error scales with it.
            np.save(f"{d}/{name}_{kind}_terms.npy", attend(q, k, np.abs(v), causal))
else:
    for name in sys.argv[3:]:
        got, kind = load(f"{d}/{name}.npy")
        assert name.endswith(kind) or name.endswith(kind + "_ref") or name.endswith(kind + "_off"), name
        base = f"{d}/{name.split('_')[0]}_{kind}"
        exact, terms = np.load(f"{base}_exact.npy"), np.load(f"{base}_terms.npy")
        # Half a unit in the last place of the type (round to nearest, once, at the store; a
        # truncation or a double rounding exceeds it), plus f32's accumulation error, which
        # matters for results near zero.
        tol = 0.5 * ulp(exact, kind) + 64 * 2.0**-24 * terms
        err = np.abs(got - exact) / tol
        print(f"{name}: {err.max():.3f} of the tolerance {'ok' if err.max() <= 1.0 else 'FAIL'}")
    print("ok")
