# Checks attn-run's bilinear samples against grid_sample's arithmetic (zeros padding), in numpy.
import sys
import numpy as np

img, pts = np.load(sys.argv[1]).astype(np.float64), np.load(sys.argv[2]).astype(np.float64)
H, W = img.shape


def at(y, x):
    return img[y, x] if 0 <= y < H and 0 <= x < W else 0.0


want = []
for y, x in pts:
    y0, x0 = int(np.floor(y)), int(np.floor(x))
    wy, wx = y - y0, x - x0
    want.append((1 - wy) * (1 - wx) * at(y0, x0) + (1 - wy) * wx * at(y0, x0 + 1)
                + wy * (1 - wx) * at(y0 + 1, x0) + wy * wx * at(y0 + 1, x0 + 1))
want = np.array(want)
for name, path in (("jit", sys.argv[3]), ("ref", sys.argv[4])):
    err = np.abs(np.load(path).astype(np.float64) - want).max()
    print(name, "max error", err, "ok" if err < 1e-5 else "TOO LARGE")
