# linear-attention.test: makes the inputs and the fp64 numpy reference of tests/lit/run/linear-attention.test,
# written as fast-transformers' LinearAttention computes it: phi = elu + 1, kv = phi(k)^T v,
# o = phi(q) kv / (phi(q) . sum_j phi(k_j) + eps).
import sys

import numpy as np

d = sys.argv[1]
r = np.random.default_rng(17)


def phi(x):
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))


def case(tag, B, H, Nq, Nk, D, E):
    q, k = (r.standard_normal((B, H, n, D)).astype(np.float32) for n in (Nq, Nk))
    v = r.standard_normal((B, H, Nk, E)).astype(np.float32)
    for name, a in [("q", q), ("k", k), ("v", v)]:
        np.save(f"{d}/{name}{tag}.npy", a)
    fq, fk = phi(q.astype(np.float64)), phi(k.astype(np.float64))
    kv = np.einsum("bhjd,bhje->bhde", fk, v.astype(np.float64))
    z = np.einsum("bhid,bhd->bhi", fq, fk.sum(2)) + 1e-6
    np.save(f"{d}/o{tag}_np.npy", np.einsum("bhid,bhde->bhie", fq, kv) / z[..., None])


# Long enough that phi(q) (phi(k)^T v) is cheaper (reassociated), and short enough that the
# scores are (kept as written); Nq != Nk in both.
case("long", 2, 3, 300, 257, 16, 24)
case("short", 1, 2, 5, 3, 16, 24)
