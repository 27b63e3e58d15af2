# Inputs for, and a numpy version of, Deformable DETR's single-scale deformable attention (eq. 2).
import sys
import numpy as np

mode, d = sys.argv[1], sys.argv[2]
B, H, W, C, Q, M, K = 2, 5, 6, 6, 4, 2, 3
D = C // M
names = ["x", "z", "p", "w_off", "b_off", "w_a", "b_a", "w_v", "w_o", "b_o"]
if mode == "make":
    r = np.random.default_rng(7)
    f = lambda *s, sc=1.0: (r.standard_normal(s) * sc).astype(np.float32)
    p = r.uniform(-1, 6, (B, Q, 2)).astype(np.float32)
    p[0, 0] = [0, 0]          # a corner pixel
    p[0, 1] = [H - 1, W - 1]  # the opposite corner
    p[1, 0] = [-2.5, 3.25]    # above the map
    arrays = dict(x=f(B, H, W, C), z=f(B, Q, C), p=p, w_off=f(M, K, 2, C, sc=0.7), b_off=f(M, K, 2, sc=0.5),
                  w_a=f(M, K, C, sc=0.5), b_a=f(M, K, sc=0.1), w_v=f(M, D, C, sc=0.4), w_o=f(C, M, D, sc=0.4),
                  b_o=f(C, sc=0.1))
    for n, a in arrays.items():
        np.save(f"{d}/{n}.npy", a)
    sys.exit(0)

g = {n: np.load(f"{d}/{n}.npy").astype(np.float64) for n in names}


def sample(img, y, x):  # img [H, W, C]; pixel coordinates, zero padding
    y0, x0 = np.floor(y), np.floor(x)
    out = np.zeros(img.shape[2])
    for yy, wy in ((y0, 1 - (y - y0)), (y0 + 1, y - y0)):
        for xx, wx in ((x0, 1 - (x - x0)), (x0 + 1, x - x0)):
            if 0 <= yy < H and 0 <= xx < W:
                out += wy * wx * img[int(yy), int(xx)]
    return out


want = np.zeros((B, Q, C))
for b in range(B):
    for q in range(Q):
        zq = g["z"][b, q]
        for m in range(M):
            off = g["w_off"][m] @ zq + g["b_off"][m]  # [K, 2]
            logits = g["w_a"][m] @ zq + g["b_a"][m]
            a = np.exp(logits - logits.max())
            a /= a.sum()
            head = np.zeros(D)
            for k in range(K):
                xs = sample(g["x"][b], g["p"][b, q, 0] + off[k, 0], g["p"][b, q, 1] + off[k, 1])
                head += a[k] * (g["w_v"][m] @ xs)
            want[b, q] += g["w_o"][:, m, :] @ head
        want[b, q] += g["b_o"]
for name in ("jit", "interp", "jit_sample_first", "jit_project_first"):
    err = np.abs(np.load(f"{d}/{name}.npy").astype(np.float64) - want).max()
    print(name, "max error", err, "ok" if err < 1e-5 else "TOO LARGE")
