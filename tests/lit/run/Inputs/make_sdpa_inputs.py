# Writes random q/k/v .npy files (Nq != Nk) and numpy's SDPA result for attn-run tests.
import sys
import numpy as np

out = sys.argv[1]
rng = np.random.default_rng(7)
q = rng.standard_normal((2, 3, 5, 8), dtype=np.float32)
k = rng.standard_normal((2, 3, 11, 8), dtype=np.float32)
v = rng.standard_normal((2, 3, 11, 8), dtype=np.float32)
for name, a in (("q", q), ("k", k), ("v", v)):
    np.save(f"{out}/{name}.npy", a)
np.save(f"{out}/q64.npy", q.astype(np.float64))
np.save(f"{out}/qf.npy", np.asfortranarray(q))
s = q.astype(np.float64) @ k.astype(np.float64).transpose(0, 1, 3, 2) / np.sqrt(8)
p = np.exp(s - s.max(-1, keepdims=True))
np.save(f"{out}/ref.npy", (p / p.sum(-1, keepdims=True)) @ v.astype(np.float64))
