# Writes q/k/v/pad/keep .npy files for key-padding.test: 200 keys, so tiles of 16-48 keys are
# wholly padded, wholly visible or mixed, and a batch entry with every key padded.
import sys
import numpy as np

out = sys.argv[1]
rng = np.random.default_rng(7)
b, nq, nk, d = 4, 40, 200, 8
pad = np.zeros((b, nk), dtype=np.int32)
pad[0, 70:] = 1                                    # tail padding: the usual case
pad[1] = (rng.random(nk) < 0.3).astype(np.int32)   # holes everywhere
pad[1, 16:64] = 1                                  # and whole tiles padded in the middle
pad[2, :] = 1                                      # nothing to attend to: zeros
pad[3, 5:9] = 1                                    # a few keys in the first tile
arrays = {
    "q": rng.standard_normal((b, nq, d), dtype=np.float32) * 2,
    "k": rng.standard_normal((b, nk, d), dtype=np.float32) * 2,
    "v": rng.standard_normal((b, nk, d), dtype=np.float32),
    "pad": pad,
    "keep": (rng.random((nq, nk)) < 0.8).astype(np.int32),
}
for name, a in arrays.items():
    np.save(f"{out}/{name}.npy", a)
