# Writes q/k/v/keep .npy files for mask-bounds.test: Nq > Nk (rows without keys under a
# bottom-right causal mask), a fully dropped row in keep, 4-d sets for causal_attention, and 200
# keys for fully visible online-softmax tiles.
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
    # 200 keys: with online tiles of 8-48 keys, groups of 32 rows see many tiles whole.
    "qb": rng.standard_normal((200, 8), dtype=np.float32) * 2,
    "kb": rng.standard_normal((200, 8), dtype=np.float32) * 2,
    "vb": rng.standard_normal((200, 8), dtype=np.float32),
    "qr": rng.standard_normal((150, 8), dtype=np.float32) * 2,
    "q5": rng.standard_normal((1, 2, 200, 8), dtype=np.float32) * 2,
    "k5": rng.standard_normal((1, 2, 200, 8), dtype=np.float32) * 2,
    "v5": rng.standard_normal((1, 2, 200, 8), dtype=np.float32),
}
arrays["keep"][4, :] = 0
for name, a in arrays.items():
    np.save(f"{out}/{name}.npy", a)
