# rotary-diff.test: makes the inputs and the fp64 numpy references of tests/lit/run/rotary-diff.test,
# written as transformers writes them: rotary embeddings (cos, sin of position * 10000^(-2k/D),
# rotate_half = cat(-x2, x1)) before causal attention; differential attention (two causal softmaxes
# subtracted with lambda, then RMSNorm over the head's channels times g and 1 - lambda_init).
import sys

import numpy as np

d = sys.argv[1]
r = np.random.default_rng(13)
B, H, N, D, E = 2, 3, 300, 16, 24


def save(name, shape, scale=1.0):
    a = (r.standard_normal(shape) * scale).astype(np.float32)
    np.save(f"{d}/{name}.npy", a)
    return a.astype(np.float64)


def causal_softmax(s):
    x = np.where(np.tril(np.ones((N, N), bool)), s, -np.inf)
    p = np.exp(x - x.max(-1, keepdims=True))
    return p / p.sum(-1, keepdims=True)


q, k, v = save("q", (B, H, N, D), 1.5), save("k", (B, H, N, D), 1.5), save("v", (B, H, N, D))
inv_freq = 10000.0 ** (-np.arange(0, D, 2) / D)
emb = np.concatenate([np.outer(np.arange(N), inv_freq)] * 2, axis=-1)
cos, sin = np.cos(emb).astype(np.float32), np.sin(emb).astype(np.float32)
np.save(f"{d}/cos_t.npy", cos)
np.save(f"{d}/sin_t.npy", sin)


def rotate_half(x):
    return np.concatenate([-x[..., D // 2 :], x[..., : D // 2]], axis=-1)


qr = q * cos + rotate_half(q) * sin
kr = k * cos + rotate_half(k) * sin
s = np.einsum("bhid,bhjd->bhij", qr, kr) / np.sqrt(D)
np.save(f"{d}/rotary_np.npy", np.einsum("bhij,bhje->bhie", causal_softmax(s), v))

q1, k1, q2, k2 = (save(n, (B, H, N, D), 1.5) for n in ["q1", "k1", "q2", "k2"])
ve, g = save("ve", (B, H, N, E)), save("g", (E,))
lam = np.array([0.6], np.float32)
np.save(f"{d}/lam.npy", lam)
s1 = np.einsum("bhid,bhjd->bhij", q1, k1) / np.sqrt(D)
s2 = np.einsum("bhid,bhjd->bhij", q2, k2) / np.sqrt(D)
a = np.einsum("bhij,bhje->bhie", causal_softmax(s1) - float(lam[0]) * causal_softmax(s2), ve)
o = a / np.sqrt((a * a).mean(-1, keepdims=True) + 1e-5) * g * (1 - 0.8)
np.save(f"{d}/diff_np.npy", o)
