# Inputs for, and a numpy port of, Deformable DETR's MSDeformAttn.forward (2-d reference points).
import sys
import numpy as np

mode, d = sys.argv[1], sys.argv[2]
B, Q, C, M, P = 2, 4, 6, 2, 2
D = C // M
shapes = np.array([[4, 5], [2, 3], [1, 1]], dtype=np.int32)
L = len(shapes)
start = np.concatenate([[0], np.cumsum(shapes[:, 0] * shapes[:, 1])[:-1]]).astype(np.int32)
S = int((shapes[:, 0] * shapes[:, 1]).sum())
names = ["query", "ref", "input", "shapes", "start", "w_v", "b_v", "w_off", "b_off", "w_aw", "b_aw", "w_o", "b_o"]
if mode == "make":
    r = np.random.default_rng(5)
    f = lambda *s, sc=1.0: (r.standard_normal(s) * sc).astype(np.float32)
    arrays = dict(query=f(B, Q, C), ref=r.uniform(0, 1, (B, Q, L, 2)).astype(np.float32), input=f(B, S, C),
                  shapes=shapes, start=start, w_v=f(M, D, C, sc=0.4), b_v=f(M, D, sc=0.1),
                  w_off=f(M, L, P, 2, C, sc=0.5), b_off=f(M, L, P, 2, sc=0.5), w_aw=f(M, L, P, C, sc=0.4),
                  b_aw=f(M, L, P, sc=0.1), w_o=f(C, M, D, sc=0.4), b_o=f(C, sc=0.1))
    for n, a in arrays.items():
        np.save(f"{d}/{n}.npy", a)
    sys.exit(0)

g = {n: np.load(f"{d}/{n}.npy") for n in names}
g = {n: (a.astype(np.float64) if a.dtype == np.float32 else a) for n, a in g.items()}
value = (g["input"] @ g["w_v"].reshape(C, C).T + g["b_v"].reshape(C)).reshape(B, S, M, D)
off = (g["query"] @ g["w_off"].reshape(M * L * P * 2, C).T + g["b_off"].reshape(-1)).reshape(B, Q, M, L, P, 2)
aw = (g["query"] @ g["w_aw"].reshape(M * L * P, C).T + g["b_aw"].reshape(-1)).reshape(B, Q, M, L * P)
aw = np.exp(aw - aw.max(-1, keepdims=True))
aw = (aw / aw.sum(-1, keepdims=True)).reshape(B, Q, M, L, P)
normaliser = np.stack([shapes[:, 1], shapes[:, 0]], -1).astype(np.float64)
loc = g["ref"][:, :, None, :, None, :] + off / normaliser[None, None, None, :, None, :]


def grid_sample(img, gx, gy):  # img [C, H, W]; (gx, gy) in [-1, 1], align_corners=False
    c, h, w = img.shape
    x, y = ((gx + 1) * w - 1) / 2, ((gy + 1) * h - 1) / 2
    x0, y0 = np.floor(x), np.floor(y)
    out = np.zeros(c)
    for yy, wy in ((y0, 1 - (y - y0)), (y0 + 1, y - y0)):
        for xx, wx in ((x0, 1 - (x - x0)), (x0 + 1, x - x0)):
            if 0 <= yy < h and 0 <= xx < w:
                out += wy * wx * img[:, int(yy), int(xx)]
    return out


a = np.zeros((B, Q, M, D))
for b in range(B):
    for l in range(L):
        h, w = shapes[l]
        level = value[b, start[l]:start[l] + h * w].reshape(h, w, M, D)
        for q in range(Q):
            for m in range(M):
                for p in range(P):
                    gg = 2 * loc[b, q, m, l, p] - 1
                    a[b, q, m] += aw[b, q, m, l, p] * grid_sample(level[:, :, m, :].transpose(2, 0, 1), gg[0], gg[1])
want = a.reshape(B, Q, C) @ g["w_o"].reshape(C, C).T + g["b_o"]
for name in ("jit", "interp", "jit_sample_first", "jit_project_first"):
    err = np.abs(np.load(f"{d}/{name}.npy").astype(np.float64) - want).max()
    print(name, "max error", err, "ok" if err < 1e-5 else "TOO LARGE")
