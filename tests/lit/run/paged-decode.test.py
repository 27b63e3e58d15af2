# Inputs and numpy's fp64 reference for paged-decode.test: four sequences of 37, 128, 0 and 5 tokens
# in pages of 16 tokens of a 40-page cache (page ids shuffled, unused table entries -1, as vLLM pads
# its block tables), 4 query heads over 2 kv heads.
import sys
import numpy as np

out = sys.argv[1]
B, H, HKV, D, S, M, P = 4, 4, 2, 16, 16, 8, 40
lens = np.array([37, 128, 0, 5], dtype=np.int32)
r = np.random.default_rng(7)
q = r.standard_normal((B, H, D)).astype(np.float32)
kc = r.standard_normal((P, S, HKV, D)).astype(np.float32)
vc = r.standard_normal((P, S, HKV, D)).astype(np.float32)
pages = np.full((B, M), -1, dtype=np.int32)
free = list(r.permutation(P))
for b in range(B):
    for m in range(-(-int(lens[b]) // S)):
        pages[b, m] = free.pop()
for name, a in [("q", q), ("kc", kc), ("vc", vc), ("pages", pages), ("lens", lens)]:
    np.save(f"{out}/{name}.npy", a)

o = np.zeros((B, H, D))
for b in range(B):
    n = int(lens[b])
    if n == 0:
        continue
    j = np.arange(n)
    k = kc[pages[b, j // S], j % S].astype(np.float64)  # [n, HKV, D]
    v = vc[pages[b, j // S], j % S].astype(np.float64)
    for h in range(H):
        kh = h // (H // HKV)
        s = k[:, kh] @ q[b, h].astype(np.float64) / np.sqrt(D)
        p = np.exp(s - s.max())
        o[b, h] = (p / p.sum()) @ v[:, kh]
np.save(f"{out}/o_np.npy", o)
