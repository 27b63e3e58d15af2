# sinks.test: makes the inputs and the fp64 PyTorch-style references of tests/lit/run/sinks.test,
# softmax(cat([scores, sink], -1), -1)[..., :-1] @ v with masked scores -inf, written from the
# formula rather than from the DSL; `check` tests the exact properties (zero rows, -inf sinks).
import sys

import numpy as np

mode, d = sys.argv[1], sys.argv[2]
B, H, N, D = 2, 3, 300, 16


def attend(q, k, v, sink, mask):
    s = np.einsum("bhid,bhjd->bhij", q, k) / np.sqrt(D)
    s = np.where(mask, s, -np.inf)
    t = np.broadcast_to(sink.reshape(sink.shape + (1,)), s.shape[:-1] + (1,))
    c = np.concatenate([s, t], -1)
    m = c.max(-1, keepdims=True)
    with np.errstate(invalid="ignore"):
        e = np.where(c == -np.inf, 0.0, np.exp(c - m))
    den = e.sum(-1, keepdims=True)
    p = np.divide(e, den, out=np.zeros_like(e), where=den > 0)[..., :-1]
    return np.einsum("bhij,bhje->bhie", p, v)


if mode == "make":
    r = np.random.default_rng(11)
    for n in ["q", "k", "v"]:
        np.save(f"{d}/{n}.npy", (r.standard_normal((B, H, N, D)) * 1.5).astype(np.float32))
    # Sinks below, near and above the scores' range.
    np.save(f"{d}/sinks.npy", np.array([-3.0, 0.5, 6.0], np.float32))
    np.save(f"{d}/sinks_ninf.npy", np.full(H, -np.inf, np.float32))
    pad = np.zeros((B, N), np.int32)
    pad[0, 100:170] = 1  # holes in batch 0
    pad[1, :] = 1        # batch 1: every key padded
    np.save(f"{d}/pad.npy", pad)
    q, k, v = (np.load(f"{d}/{n}.npy").astype(np.float64) for n in ["q", "k", "v"])
    sinks = np.load(f"{d}/sinks.npy").astype(np.float64)
    i = np.arange(N).reshape(N, 1)
    j = np.arange(N).reshape(1, N)
    sk = np.broadcast_to(sinks.reshape(1, H, 1), (B, H, N))
    full = np.ones((B, H, N, N), bool)
    np.save(f"{d}/plain_np.npy", attend(q, k, v, sk, full))
    np.save(f"{d}/causal_np.npy", attend(q, k, v, sk, np.broadcast_to(j <= i, full.shape)))
    np.save(f"{d}/strict_np.npy", attend(q, k, v, sk, np.broadcast_to(j < i, full.shape)))
    keep = np.broadcast_to((pad == 0).reshape(B, 1, 1, N), full.shape)
    np.save(f"{d}/padded_np.npy", attend(q, k, v, 2.0 * sk, keep))
    # softmax(i, j where i + j > 2 sink sk(h)) over a [3, 5, 7] score tensor.
    s3 = (r.standard_normal((H, 5, 7)) * 2).astype(np.float32)
    np.save(f"{d}/s3.npy", s3)
    c = np.where(np.add.outer(np.arange(5), np.arange(7)) > 2, s3.astype(np.float64), -np.inf)
    m = np.maximum(c.max((1, 2)), sinks)
    e = np.exp(c - m.reshape(H, 1, 1))
    np.save(f"{d}/multi_np.npy", e / (e.sum((1, 2)) + np.exp(sinks - m)).reshape(H, 1, 1))
    sys.exit()

# check: row 0 of the strict mask and batch 1 of the padded kernel are exactly 0, and a -inf sink
# gives causal_attention's output bit for bit (the same plan).
for f in sys.argv[3:]:
    if "=" in f:
        a, b = f.split("=")
        print(a, "equals", b, bool(np.array_equal(np.load(f"{d}/{a}.npy"), np.load(f"{d}/{b}.npy"))))
        continue
    o = np.load(f"{d}/{f}.npy")
    if f.startswith("strict"):
        print(f, "row0-zero", bool((o[:, :, 0] == 0).all()), "finite", bool(np.isfinite(o).all()))
    else:
        print(f, "batch1-zero", bool((o[1] == 0).all()), "finite", bool(np.isfinite(o).all()))
