# Inputs for, and a numpy (fp64) port of, DAT's DAttentionBaseline.forward (models/dat_blocks.py).
# Usage: make DIR CONFIG (writes the inputs) and check DIR CONFIG (compares DIR/jit.npy and
# DIR/interp.npy); CONFIG names an entry of CONFIGS, whose constants the RUN lines pass with -D.
import math
import sys
import numpy as np

# name: (B, H, W, C, stride, ksize, offset_range_factor, heads, groups, w_off scale)
CONFIGS = {
    # Huge offset logits: tanh saturates to exactly +-1 and orf = 3 with Hk = 3, Wk = 4 puts the
    # sampling points exactly on the map's borders (pos = +-1) and outside it (pos = -2, 3, 7/3).
    "s2k3": (2, 6, 7, 8, 2, 3, 3.0, 4, 2, 60.0),
    # Stride 1 (Hk x Wk = H x W), one group, moderate offsets.
    "s1k3": (1, 5, 4, 6, 1, 3, 0.5, 2, 1, 1.0),
    # ksize == stride: conv_offset without padding; a head per group.
    "s2k2": (2, 6, 5, 6, 2, 2, 2.0, 3, 3, 3.0),
}

mode, d, cfg = sys.argv[1], sys.argv[2], sys.argv[3]
B, H, W, C, r, kk, orf, nh, ng, off_scale = CONFIGS[cfg]
Cg, hg, hc = C // ng, nh // ng, C // nh
names = ["x", "w_q", "b_q", "w_dw", "b_dw", "ln_g", "ln_b", "w_off", "w_k", "b_k", "w_v", "b_v", "rpe", "w_o", "b_o"]

if mode == "make":
    rng = np.random.default_rng(11)
    f = lambda *s, sc=1.0: (rng.standard_normal(s) * sc).astype(np.float32)
    ws = 1 / math.sqrt(C)
    arrays = dict(x=f(B, H, W, C), w_q=f(C, C, sc=ws), b_q=f(C, sc=0.1), w_dw=f(Cg, kk, kk, sc=0.5),
                  b_dw=f(Cg, sc=0.1), ln_g=(1 + f(Cg, sc=0.1)), ln_b=f(Cg, sc=0.1), w_off=f(2, Cg, sc=off_scale),
                  w_k=f(C, C, sc=ws), b_k=f(C, sc=0.1), w_v=f(C, C, sc=ws), b_v=f(C, sc=0.1),
                  rpe=f(nh, 2 * H - 1, 2 * W - 1), w_o=f(C, C, sc=ws), b_o=f(C, sc=0.1))
    for n, a in arrays.items():
        np.save(f"{d}/{n}.npy", a)
    sys.exit(0)

g = {n: np.load(f"{d}/{n}.npy").astype(np.float64) for n in names}


def grid_sample(inp, grid):
    """F.grid_sample(inp [N, C, Hi, Wi], grid [N, Ho, Wo, 2] (x, y)), bilinear, zeros, align_corners=True."""
    N, Ci, Hi, Wi = inp.shape
    ix = (grid[..., 0] + 1) / 2 * (Wi - 1)
    iy = (grid[..., 1] + 1) / 2 * (Hi - 1)
    x0, y0 = np.floor(ix), np.floor(iy)
    out = np.zeros((N, Ci) + grid.shape[1:3])
    n = np.arange(N)[:, None, None]
    for yy, wy in ((y0, y0 + 1 - iy), (y0 + 1, iy - y0)):
        for xx, wx in ((x0, x0 + 1 - ix), (x0 + 1, ix - x0)):
            inside = (yy >= 0) & (yy < Hi) & (xx >= 0) & (xx < Wi)
            yc, xc = np.clip(yy, 0, Hi - 1).astype(int), np.clip(xx, 0, Wi - 1).astype(int)
            corner = inp[n, :, yc, xc]  # [N, Ho, Wo, Ci]
            out += np.moveaxis(corner * (wy * wx * inside)[..., None], -1, 1)
    return out


def conv1x1(t, w, b=None):  # t [N, Cin, h, w], w [Cout, Cin]
    y = np.einsum("oc,nchw->nohw", w, t)
    return y if b is None else y + b[None, :, None, None]


erf = np.vectorize(math.erf)

# The forward, in DAT's NCHW layout.
x = g["x"].transpose(0, 3, 1, 2)
q = conv1x1(x, g["w_q"], g["b_q"])
q_off = q.reshape(B * ng, Cg, H, W)
pad = kk // 2 if kk != r else 0
Hk, Wk = (H + 2 * pad - kk) // r + 1, (W + 2 * pad - kk) // r + 1
qp = np.pad(q_off, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
dw = np.zeros((B * ng, Cg, Hk, Wk)) + g["b_dw"][None, :, None, None]
for u in range(kk):
    for t in range(kk):
        dw += g["w_dw"][None, :, u, t, None, None] * qp[:, :, u:u + r * (Hk - 1) + 1:r, t:t + r * (Wk - 1) + 1:r]
mu = dw.mean(1, keepdims=True)
var = ((dw - mu) ** 2).mean(1, keepdims=True)
ln = (dw - mu) / np.sqrt(var + 1e-5) * g["ln_g"][None, :, None, None] + g["ln_b"][None, :, None, None]
act = 0.5 * ln * (1 + erf(ln / math.sqrt(2)))
offset = conv1x1(act, g["w_off"])  # [B*g, 2, Hk, Wk]
offset = np.tanh(offset) * np.array([1 / (Hk - 1), 1 / (Wk - 1)]).reshape(1, 2, 1, 1) * orf
offset = offset.transpose(0, 2, 3, 1)
ref_y, ref_x = np.meshgrid(np.linspace(0.5, Hk - 0.5, Hk), np.linspace(0.5, Wk - 0.5, Wk), indexing="ij")
reference = np.stack((ref_y / (Hk - 1) * 2 - 1, ref_x / (Wk - 1) * 2 - 1), -1)[None]
pos = offset + reference  # [B*g, Hk, Wk, 2] (y, x)
x_sampled = grid_sample(x.reshape(B * ng, Cg, H, W), pos[..., ::-1])
ns = Hk * Wk
x_sampled = x_sampled.reshape(B, C, 1, ns)
qh = q.reshape(B * nh, hc, H * W)
k = conv1x1(x_sampled, g["w_k"], g["b_k"]).reshape(B * nh, hc, ns)
v = conv1x1(x_sampled, g["w_v"], g["b_v"]).reshape(B * nh, hc, ns)
attn = np.einsum("bcm,bcn->bmn", qh, k) * hc ** -0.5
qy, qx = np.meshgrid(np.arange(H, dtype=np.float64), np.arange(W, dtype=np.float64), indexing="ij")
q_grid = np.stack((qy / (H - 1) * 2 - 1, qx / (W - 1) * 2 - 1), -1)[None]
displacement = (q_grid.reshape(1, H * W, 1, 2) - pos.reshape(B * ng, 1, ns, 2)) * 0.5
rpe = np.broadcast_to(g["rpe"][None], (B, nh, 2 * H - 1, 2 * W - 1)).reshape(B * ng, hg, 2 * H - 1, 2 * W - 1)
attn_bias = grid_sample(rpe, displacement[..., ::-1])  # [B*g, hg, HW, ns]
attn = attn + attn_bias.reshape(B * nh, H * W, ns)
attn = np.exp(attn - attn.max(2, keepdims=True))
attn /= attn.sum(2, keepdims=True)
out = np.einsum("bmn,bcn->bcm", attn, v).reshape(B, C, H, W)
want = conv1x1(out, g["w_o"], g["b_o"]).transpose(0, 2, 3, 1)

# Coverage of the border cases the config is for, so that the test cannot silently lose them.
on_border = np.isclose(np.abs(pos), 1.0, rtol=0, atol=1e-6).sum()
outside = (np.abs(pos) > 1.0 + 1e-6).sum()
print(f"{cfg}: Hk x Wk = {Hk} x {Wk}, {on_border} coordinates on a border, {outside} outside the map")
tol = 2e-5 * max(1.0, np.abs(want).max())
for name in ("jit", "interp"):
    got = np.load(f"{d}/{name}.npy").astype(np.float64)
    err = np.abs(got - want).max() if got.shape == want.shape else np.inf
    print(name, "max error", err, "ok" if err < tol else "TOO LARGE")
