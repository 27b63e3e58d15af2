# Inputs for run/natten.test and numpy's port of NATTEN's 2-d neighbourhood attention with relative position bias
# (natten's CPU reference kernels: get_window_start, get_pb_start; no dilation).
import sys
import numpy as np


def window_start(i, n, ks):
    # NATTEN's get_window_start (dilation 1): centred, shifted inwards at the borders.
    r = ks // 2
    return max(i - r, 0) + (n - i - r - 1 if i + r >= n else 0)


def pb_start(i, n, ks):
    # NATTEN's get_pb_start (dilation 1): the first bias row of query i's window.
    r = ks // 2
    if i < r:
        return r + (r - i)
    if i + r >= n:
        return r + (n - i - 1 - r)
    return r


def natten_reference(q, k, v, rpb, ks):
    """q, k, v: [B, NH, Y, X, D]; rpb: [NH, 2ks-1, 2ks-1]. Returns [B, NH, Y, X, D] (float64)."""
    B, NH, Y, X, D = q.shape
    q, k, v, rpb = (a.astype(np.float64) for a in (q, k, v, rpb))
    o = np.zeros(q.shape)
    for y in range(Y):
        sy, py = window_start(y, Y, ks), pb_start(y, Y, ks)
        for x in range(X):
            sx, px = window_start(x, X, ks), pb_start(x, X, ks)
            kw = k[:, :, sy:sy + ks, sx:sx + ks].reshape(B, NH, ks * ks, D)
            vw = v[:, :, sy:sy + ks, sx:sx + ks].reshape(B, NH, ks * ks, D)
            s = np.einsum("bhd,bhnd->bhn", q[:, :, y, x] * D ** -0.5, kw)
            s = s + rpb[None, :, py:py + ks, px:px + ks].reshape(1, NH, ks * ks)
            p = np.exp(s - s.max(-1, keepdims=True))
            p /= p.sum(-1, keepdims=True)
            o[:, :, y, x] = np.einsum("bhn,bhnd->bhd", p, vw)
    return o


if __name__ == "__main__":
    out = sys.argv[1]
    rng = np.random.default_rng(12)
    B, NH = 2, 3
    # c: 5 channels, not a multiple of the dot product's partial sums.
    for name, (Y, X, D, ks) in dict(a=(9, 11, 8, 7), b=(7, 8, 8, 7), c=(6, 13, 5, 3)).items():
        q, k, v = (rng.standard_normal((B, NH, Y, X, D)).astype(np.float32) for _ in range(3))
        rpb = (0.5 * rng.standard_normal((NH, 2 * ks - 1, 2 * ks - 1))).astype(np.float32)
        for n, a in dict(q=q, k=k, v=v, rpb=rpb).items():
            np.save(f"{out}/{name}_{n}.npy", a)
        np.save(f"{out}/{name}_np.npy", natten_reference(q, k, v, rpb, ks).astype(np.float32))
