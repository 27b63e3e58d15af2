# Inputs for run/swin.test and numpy's port of Swin Transformer's attention path (SwinTransformerBlock: torch.roll,
# window_partition, WindowAttention with relative_position_bias_table, the shifted-window attn_mask, window_reverse).
import sys
import numpy as np

def swin_reference(q, k, v, table, ws, shift):
    """q, k, v: [B, NH, H, W, D] per-head projections; table: [(2ws-1)^2, NH]. Returns [B, NH, H, W, D] (float64)."""
    B, NH, H, W, D = q.shape
    q, k, v, table = (a.astype(np.float64) for a in (q, k, v, table))
    if shift > 0:  # SwinTransformerBlock: shifted_x = torch.roll(x, shifts=(-shift, -shift), dims=(1, 2))
        q, k, v = (np.roll(a, (-shift, -shift), axis=(2, 3)) for a in (q, k, v))
    def partition(a):  # window_partition: [B, NH, H, W, D] -> [B * nW, NH, ws * ws, D]
        a = a.reshape(B, NH, H // ws, ws, W // ws, ws, D).transpose(0, 2, 4, 1, 3, 5, 6)
        return a.reshape(-1, NH, ws * ws, D)
    qw, kw, vw = partition(q), partition(k), partition(v)
    # WindowAttention.__init__: relative_position_index
    coords = np.stack(np.meshgrid(np.arange(ws), np.arange(ws), indexing="ij")).reshape(2, -1)
    rel = (coords[:, :, None] - coords[:, None, :]).transpose(1, 2, 0)
    rel[:, :, 0] += ws - 1
    rel[:, :, 1] += ws - 1
    rel[:, :, 0] *= 2 * ws - 1
    index = rel.sum(-1)
    bias = table[index.reshape(-1)].reshape(ws * ws, ws * ws, NH).transpose(2, 0, 1)
    attn = (qw * D ** -0.5) @ kw.transpose(0, 1, 3, 2) + bias[None]
    if shift > 0:  # SwinTransformerBlock.__init__: attn_mask
        img = np.zeros((H, W))
        cnt = 0
        for hs in (slice(0, -ws), slice(-ws, -shift), slice(-shift, None)):
            for wsl in (slice(0, -ws), slice(-ws, -shift), slice(-shift, None)):
                img[hs, wsl] = cnt
                cnt += 1
        mw = img.reshape(H // ws, ws, W // ws, ws).transpose(0, 2, 1, 3).reshape(-1, ws * ws)
        mask = np.where(mw[:, None, :] - mw[:, :, None] != 0, -100.0, 0.0)  # [nW, N, N]
        nW = mask.shape[0]
        attn = (attn.reshape(B, nW, NH, ws * ws, ws * ws) + mask[None, :, None]).reshape(-1, NH, ws * ws, ws * ws)
    attn = np.exp(attn - attn.max(-1, keepdims=True))
    attn /= attn.sum(-1, keepdims=True)
    o = attn @ vw  # [B * nW, NH, N, D]
    o = o.reshape(B, H // ws, W // ws, NH, ws, ws, D).transpose(0, 3, 1, 4, 2, 5, 6).reshape(B, NH, H, W, D)
    if shift > 0:
        o = np.roll(o, (shift, shift), axis=(2, 3))
    return o

if __name__ == "__main__":
    out = sys.argv[1]
    rng = np.random.default_rng(11)
    B, NH, H, W, D, ws = 2, 3, 14, 21, 8, 7
    q, k, v = (rng.standard_normal((B, NH, H, W, D)).astype(np.float32) for _ in range(3))
    table = (0.5 * rng.standard_normal(((2 * ws - 1) ** 2, NH))).astype(np.float32)
    for n, a in dict(q=q, k=k, v=v, table=table).items():
        np.save(f"{out}/{n}.npy", a)
    for shift in (0, 3):
        np.save(f"{out}/swin{shift}_np.npy", swin_reference(q, k, v, table, ws, shift).astype(np.float32))
