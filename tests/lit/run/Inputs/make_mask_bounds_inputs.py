# Writes q/k/v/keep .npy files for mask-bounds.test: Nq > Nk (rows without keys under a
# bottom-right causal mask), a fully dropped row in keep, and a 4-d set for causal_attention.
import sys
import numpy as np

out = sys.argv[1]
rng = np.random.default_rng(11)
nq, nk, d = 9, 6, 8
arrays = {
    "q": rng.standard_normal((nq, d), dtype=np.float32),
    "k": rng.standard_normal((nk, d), dtype=np.float32),
    "v": rng.standard_normal((nk, d), dtype=np.float32),
    "keep": (rng.random((nq, nk)) < 0.7).astype(np.int32),
    # causal_attention at B=2, H=3 with N=13: a partial 4-row query tile and a partial key block.
    "q4": rng.standard_normal((2, 3, 13, 8), dtype=np.float32),
    "k4": rng.standard_normal((2, 3, 13, 8), dtype=np.float32),
    "v4": rng.standard_normal((2, 3, 13, 8), dtype=np.float32),
}
arrays["keep"][4, :] = 0
for name, a in arrays.items():
    np.save(f"{out}/{name}.npy", a)
