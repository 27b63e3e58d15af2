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


def special_values(r):
    # Ties and near-ties of both types, overflow to infinity, f16's subnormals and underflow,
    # signed zeros, infinities, NaNs, then random bit patterns over the whole float range.
    u = [0x3F808000, 0x3F818000, 0x3F80C000, 0x3F807FFF, 0x7F7FFFFF, 0x7F7F8000, 0x7F7F7FFF,
         0x00018000, 0x80008000, 0x00000001, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001,
         0x7F800001, 0x80000000, 0x00000000]
    f = [65504.0, 65519.99, 65520.0, -65520.0, 2.0**-24, 2.0**-25, 3 * 2.0**-25, 1e-6, -1e-7,
         2.0**-14, 2.0**-15 * 1.5, 1.0 + 2.0**-11, 1.0 + 3 * 2.0**-11, 0.1, -1 / 3.0]
    bits = np.array(u, np.uint32).view(np.float32)
    rnd = r.integers(0, 2**32, 4000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    return np.concatenate([bits, np.array(f, np.float32), rnd, (rnd[:1000] * 1e-30).astype(np.float32)])


def same(got, want):
    # Equal floats, or NaN for NaN (bf16 NaNs are quieted; their payload is not compared).
    return np.all((got == want) | (np.isnan(got) & np.isnan(want)) ) and np.array_equal(
        np.signbit(got[~np.isnan(got)]), np.signbit(want[~np.isnan(want)]))


mode, d = sys.argv[1], sys.argv[2]
if mode == "convert":
    np.save(f"{d}/x.npy", special_values(np.random.default_rng(3)))
    np.save(f"{d}/s.npy", (np.random.default_rng(4).standard_normal((5, 300)) * 3).astype(np.float32))
elif mode == "convert-check":
    x = np.load(f"{d}/x.npy")
    nan = np.isnan(x)
    want_b = from_bf16_bits(np.where(nan, 0x7FC0, to_bf16_bits(np.where(nan, 0, x))).astype(np.uint16))
    want_b = np.where(nan, np.float32(np.nan), want_b).astype(np.float32)
    with np.errstate(over="ignore"):
        want_h = x.astype(np.float16)
    ok = True
    for tag in ["", "_ref"]:
        b, h = load(f"{d}/b{tag}.npy")[0].astype(np.float32), np.load(f"{d}/h{tag}.npy")
        rb, rh = np.load(f"{d}/rb{tag}.npy"), np.load(f"{d}/rh{tag}.npy")
        for name, got, want in [("b", b, want_b), ("h", h.astype(np.float32), want_h.astype(np.float32)),
                                ("rb", rb, want_b), ("rh", rh, want_h.astype(np.float32))]:
            good = same(got, want)
            ok &= bool(good)
            print(f"store{tag} {name}: {'as numpy rounds' if good else 'FAIL'}")
    wb, wh = np.load(f"{d}/wb.npy"), np.load(f"{d}/wh.npy")
    for name, got, want in [("wb", wb, want_b), ("wh", wh, want_h.astype(np.float32))]:
        good = same(got, want)
        ok &= bool(good)
        print(f"widen {name}: {'exact' if good else 'FAIL'}")
    print("all conversions as numpy's" if ok else "FAIL")
    sys.exit(0 if ok else 1)
elif mode == "probs-check":
    # Compiled and interpreted bf16 probabilities: each within half a unit in the last place of
    # the exact softmax (plus f32's error), and the rows of the exact one sum to 1.
    sc = np.load(f"{d}/s.npy").astype(np.float64)
    e = np.exp(sc - sc.max(-1, keepdims=True))
    exact = e / e.sum(-1, keepdims=True)
    ok = True
    for tag in ["", "_ref"]:
        got = load(f"{d}/p{tag}.npy")[0]
        err = (np.abs(got - exact) / (0.5 * ulp(exact, "bf16") + 2.0**-20 * exact)).max()
        ok &= bool(err <= 1.0)
        print(f"probs{tag}: {err:.3f} of the tolerance{'' if err <= 1.0 else ' FAIL'}")
    print("probabilities within the tolerance" if ok else "FAIL")
    sys.exit(0 if ok else 1)
elif mode == "make":
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
    ok = True
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
        ok &= bool(err.max() <= 1.0)
        print(f"{name}: {err.max():.3f} of the tolerance{'' if err.max() <= 1.0 else ' FAIL'}")
    print("all within the tolerance" if ok else "FAIL")
    sys.exit(0 if ok else 1)
