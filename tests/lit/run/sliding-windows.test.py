# sliding-windows.test: makes the inputs and the fp64 numpy references of
# tests/lit/run/sliding-windows.test, written from the formulas: causal sliding-window softmax
# (i - W < j <= i), and Gemma 2's soft-capped scores cap * tanh(s / cap), causal, with and without
# the window.
import sys

import numpy as np

d = sys.argv[1]
r = np.random.default_rng(11)
B, H, N, D = 2, 3, 300, 16


def save(name, scale):
    a = (r.standard_normal((B, H, N, D)) * scale).astype(np.float32)
    np.save(f"{d}/{name}.npy", a)
    return a.astype(np.float64)


# Scores up to ~20 in magnitude: a cap of 5 bends most of them.
q, k, v = save("q", 2.0), save("k", 2.0), save("v", 1.0)
s = np.einsum("bhid,bhjd->bhij", q, k) / np.sqrt(D)
i, j = np.arange(N)[:, None], np.arange(N)[None, :]


def attend(scores, mask):
    x = np.where(mask, scores, -np.inf)
    p = np.exp(x - x.max(-1, keepdims=True))
    return np.einsum("bhij,bhje->bhie", p / p.sum(-1, keepdims=True), v)


np.save(f"{d}/window_np.npy", attend(s, (j <= i) & (j > i - 50)))
np.save(f"{d}/window1_np.npy", v)  # a window of one key: each row is its own value
np.save(f"{d}/softcap_np.npy", attend(5.0 * np.tanh(s / 5.0), j <= i))
np.save(f"{d}/softcap_window_np.npy", attend(5.0 * np.tanh(s / 5.0), (j <= i) & (j > i - 70)))
