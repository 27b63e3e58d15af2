# weights.test: makes the inputs and the fp64 numpy references of tests/lit/run/weights.test, written
# from the formulas (sigmoid(s - log Nk) @ v; causal relu(s) / N @ v; padded sigmoid(s - 1) @ v;
# GQA sigmoid(s - 2) @ v + q / 2).
import sys

import numpy as np

d = sys.argv[1]
r = np.random.default_rng(5)


def save(name, shape, scale=1.5):
    a = (r.standard_normal(shape) * scale).astype(np.float32)
    np.save(f"{d}/{name}.npy", a)
    return a.astype(np.float64)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


B, H, N, D = 2, 3, 300, 16
q, k, v = (save(n, (B, H, N, D)) for n in ["q", "k", "v"])
s = np.einsum("bhid,bhjd->bhij", q, k) / np.sqrt(D)
np.save(f"{d}/sigmoid_np.npy", np.einsum("bhij,bhje->bhie", sigmoid(s - np.log(N)), v))
causal = np.tril(np.ones((N, N), bool))
np.save(f"{d}/relu_np.npy", np.einsum("bhij,bhje->bhie", np.where(causal, np.maximum(s, 0) / N, 0), v))
# Key padding: batch 0 has a hole at keys 100..169, batch 1 pads every key (its output is 0).
pad = np.zeros((B, N), np.int32)
pad[0, 100:170] = 1
pad[1, :] = 1
np.save(f"{d}/pad.npy", pad)
keep = (pad == 0).reshape(B, 1, 1, N)
np.save(f"{d}/padded_np.npy", np.einsum("bhij,bhje->bhie", np.where(keep, sigmoid(s - 1.0), 0), v))
# GQA, fewer keys than a tile: 4 query heads share 2 kv heads.
qg, kg, vg = save("qg", (B, 4, 40, D)), save("kg", (B, 2, 40, D)), save("vg", (B, 2, 40, D))
kh, vh = np.repeat(kg, 2, axis=1), np.repeat(vg, 2, axis=1)
sg = np.einsum("bhid,bhjd->bhij", qg, kh) / np.sqrt(D)
np.save(f"{d}/gqa_np.npy", 0.5 * qg + np.einsum("bhij,bhje->bhie", sigmoid(sg - 2.0), vh))
# A value row of +inf at key 150 under the causal ReLU weights: rows before it never read it (the
# fused plan's reading of the select as a mask); a row that sees it adds w * inf, +inf where its
# weight is positive and NaN where it is 0 (an ordinary 0). With tiles of 128, rows 150..255 see
# key 150 in a partly visible tile, the later rows in a fully visible one.
vi = v.copy()
vi[:, :, 150, :] = np.inf
np.save(f"{d}/v_inf.npy", vi.astype(np.float32))
w = np.where(causal, np.maximum(s, 0) / N, 0)
v0 = v.copy()
v0[:, :, 150, :] = 0
o = np.einsum("bhij,bhje->bhie", w, v0)
sees = np.arange(N) >= 150
o = np.where((w[..., 150] > 0)[..., None], np.inf, o)
o = np.where(((w[..., 150] == 0) & sees)[..., None], np.nan, o)
for rows in [slice(150, 256), slice(256, N)]:
    assert np.isnan(o[:, :, rows]).any() and np.isinf(o[:, :, rows]).any()
np.save(f"{d}/relu_inf_np.npy", o)
