# Writes q/k/v/pad/keep .npy files for key-padding.test: 200 keys, so tiles of 16-48 keys are
# wholly padded, wholly visible or mixed, and a batch entry with every key padded; with a key
# count as second argument, longer runs of visible keys for whole tiles of 256 keys.
import sys
import numpy as np

out = sys.argv[1]
rng = np.random.default_rng(7)
long = len(sys.argv) > 2
b, nq, nk, d = 4, 40, int(sys.argv[2]) if long else 200, 8
pad = np.zeros((b, nk), dtype=np.int32)
if long:
    pad[0, 900:] = 1                               # tail padding: whole tiles, full ones, a partial one
    pad[1, :300] = 1                               # head and tail padding: both ends partial
    pad[1, 1000:] = 1
    pad[2, :] = 1                                  # nothing to attend to
    pad[3, 600:] = 1                               # two whole tiles and a full one of 128
else:
    pad[0, 70:] = 1                                # tail padding: the usual case
    pad[1] = (rng.random(nk) < 0.3).astype(np.int32)  # holes everywhere
    pad[1, 16:64] = 1                              # and whole tiles padded in the middle
    pad[2, :] = 1                                  # nothing to attend to: zeros
    pad[3, 5:9] = 1                                # a few keys in the first tile
arrays = {
    "q": rng.standard_normal((b, nq, d), dtype=np.float32) * 2,
    "k": rng.standard_normal((b, nk, d), dtype=np.float32) * 2,
    "v": rng.standard_normal((b, nk, d), dtype=np.float32),
    "pad": pad,
    "keep": (rng.random((nq, nk)) < 0.8).astype(np.int32),
}
for name, a in arrays.items():
    np.save(f"{out}/{name}.npy", a)
