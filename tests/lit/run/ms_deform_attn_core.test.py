# Inputs for, and a numpy port of, Deformable DETR's ms_deform_attn_core_pytorch (grid_sample).
import sys
import numpy as np

mode, d = sys.argv[1], sys.argv[2]
if mode == "make":
    r = np.random.default_rng(3)
    B, M, D, Q, P = 2, 2, 3, 5, 2
    shapes = np.array([[4, 5], [2, 3], [1, 1]], dtype=np.int32)
    L = len(shapes)
    start = np.concatenate([[0], np.cumsum(shapes[:, 0] * shapes[:, 1])[:-1]]).astype(np.int32)
    S = int((shapes[:, 0] * shapes[:, 1]).sum())
    value = r.standard_normal((B, S, M, D)).astype(np.float32)
    loc = r.uniform(-0.2, 1.2, (B, Q, M, L, P, 2)).astype(np.float32)  # some outside [0, 1]
    loc[0, 0, 0, 0, 0] = [0, 0]      # the corner of the map: pixel (-0.5, -0.5)
    loc[0, 0, 0, 0, 1] = [1, 1]      # the opposite corner
    loc[0, 1, 0, 1, 0] = [0.5, 0.5]  # a pixel centre
    loc[1, 2, 1, 0, 1] = [-3, 2.5]   # far outside, negative
    aw = r.uniform(0, 1, (B, Q, M, L, P)).astype(np.float32)
    for n, a in dict(value=value, shapes=shapes, start=start, loc=loc, aw=aw).items():
        np.save(f"{d}/{n}.npy", a)
    sys.exit(0)

value, shapes, start = (np.load(f"{d}/{n}.npy") for n in ("value", "shapes", "start"))
loc, aw = np.load(f"{d}/loc.npy").astype(np.float64), np.load(f"{d}/aw.npy").astype(np.float64)
B, S, M, D = value.shape
_, Q, _, L, P, _ = loc.shape


def grid_sample(img, gx, gy):  # img [C, H, W]; (gx, gy) in [-1, 1], align_corners=False
    C, H, W = img.shape
    x, y = ((gx + 1) * W - 1) / 2, ((gy + 1) * H - 1) / 2
    x0, y0 = np.floor(x), np.floor(y)
    out = np.zeros(C)
    for yy, wy in ((y0, 1 - (y - y0)), (y0 + 1, y - y0)):
        for xx, wx in ((x0, 1 - (x - x0)), (x0 + 1, x - x0)):
            if 0 <= yy < H and 0 <= xx < W:
                out += wy * wx * img[:, int(yy), int(xx)]
    return out


want = np.zeros((B, Q, M, D))
for b in range(B):
    for l in range(L):
        H, W = shapes[l]
        level = value[b, start[l]:start[l] + H * W].astype(np.float64).reshape(H, W, M, D)
        for q in range(Q):
            for m in range(M):
                for p in range(P):
                    g = 2 * loc[b, q, m, l, p] - 1
                    want[b, q, m] += aw[b, q, m, l, p] * grid_sample(level[:, :, m, :].transpose(2, 0, 1), g[0], g[1])
# The op returns the heads concatenated, [B, Q, M*D].
want = want.reshape(B, Q, M * D)
for name in ("jit", "ref"):
    got = np.load(f"{d}/{name}.npy")
    if got.shape != want.shape:
        print(name, "shape", got.shape, "expected", want.shape)
        continue
    err = np.abs(got.astype(np.float64) - want).max()
    print(name, "max error", err, "ok" if err < 1e-5 else "TOO LARGE")
