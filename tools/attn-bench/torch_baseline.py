# torch_baseline.py: attn-bench's optional PyTorch baseline: one variant, eager mode, on attn-bench's inputs.
#
# usage: torch_baseline.py ENTRY DIR
# DIR holds meta.json ({"inputs": [names], "dtype": "f32"|"bf16"|"f16", "consts": {...}, "reps": N,
# "budget": S}) and NAME.npy
# per kernel input (the kernel's layouts, channels-last). The first run's output goes to
# DIR/out.npy for attn-bench's agreement check; the last line printed is
# {"median_s": ..., "runs": ..., "threads": ...}. Each function is the seed's PyTorch code for the
# variant (the formulation its users run), adapted to the kernel's input layouts only.
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F


def sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v)


def causal_attention(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def sigmoid_attention(q, k, v):
    # Ramapuram et al. (2024): sigmoid(q k^T / sqrt(D) + b) v with b = -log(Nk), eager.
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) - math.log(k.shape[-2])
    return torch.sigmoid(s) @ v


def linear_attention(q, k, v, eps=1e-6):
    # fast-transformers' LinearAttention (Katharopoulos et al. 2020), non-causal: phi = elu + 1,
    # phi(q) (phi(k)^T v) normalised by phi(q) . sum_j phi(k_j).
    fq, fk = F.elu(q) + 1, F.elu(k) + 1
    kv = fk.transpose(-1, -2) @ v
    z = fq @ fk.sum(-2).unsqueeze(-1)
    return (fq @ kv) / (z + eps)


def band(n, window, device):
    # True where query i attends to key j: i - window < j <= i.
    i = torch.arange(n, device=device)[:, None]
    j = torch.arange(n, device=device)[None, :]
    return (j <= i) & (j > i - window)


def sliding_window(q, k, v, window):
    # Mistral's sliding window as SDPA's boolean mask (the mask built once per call, as a model does).
    return F.scaled_dot_product_attention(q, k, v, attn_mask=band(q.shape[-2], window, q.device))


def softcap_sliding_window(q, k, v, window, cap):
    # Gemma 2's eager attention (transformers' eager_attention_forward): scores, soft-cap, mask, softmax.
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    s = torch.tanh(s / cap) * cap
    s = s.masked_fill(~band(q.shape[-2], window, q.device), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def rotary_attention(q, k, v, cos_t, sin_t):
    # transformers' apply_rotary_pos_emb, then causal SDPA (LLaMA's attention).
    return F.scaled_dot_product_attention(q * cos_t + rotate_half(q) * sin_t,
                                          k * cos_t + rotate_half(k) * sin_t, v, is_causal=True)


def sink_attention(q, k, v, sinks):
    # gpt-oss's sdpa: the sink as an extra column of each row's causal scores, dropped after the softmax.
    B, H, n, D = q.shape
    s = (q @ k.transpose(-1, -2)) / math.sqrt(D)
    s = s.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
    s = torch.cat([s, sinks.view(1, H, 1, 1).expand(B, H, n, 1)], dim=-1)
    return torch.softmax(s, dim=-1)[..., :-1] @ v


def diff_attention(q1, k1, q2, k2, v, lam, g, lambda_init=0.8, eps=1e-5):
    # The paper's MultiheadDiffAttn after its projections: both maps' causal softmaxes, their
    # difference with lambda times v, the head's RMSNorm (subln) and 1 - lambda_init.
    n = q1.shape[-2]
    mask = torch.ones(n, n, dtype=torch.bool, device=q1.device).tril()
    scale = 1.0 / math.sqrt(q1.shape[-1])
    a1 = torch.softmax((q1 @ k1.transpose(-1, -2) * scale).masked_fill(~mask, float("-inf")), dim=-1)
    a2 = torch.softmax((q2 @ k2.transpose(-1, -2) * scale).masked_fill(~mask, float("-inf")), dim=-1)
    a = (a1 - lam[0] * a2) @ v
    a = a * torch.rsqrt(a.pow(2).mean(-1, keepdim=True) + eps) * g
    return a * (1 - lambda_init)


def padding_mask(q, k, v, key_padding_mask):
    # nn.MultiheadAttention's key_padding_mask (True: padded) as SDPA's boolean mask (True: attend).
    keep = (key_padding_mask == 0)[:, None, None, :]
    return F.scaled_dot_product_attention(q, k, v, attn_mask=keep)


def varlen_attention(q, k, v, seq, causal):
    # FlashAttention's varlen semantics as PyTorch users run them on the CPU: SDPA once per sequence
    # on its slice of the packed [H, N, D] tensors (cumulative lengths from the sorted sequence ids).
    cu = torch.cumsum(torch.bincount(seq.long()), 0).tolist()
    out = torch.empty_like(q)
    start = 0
    for end in cu:
        sl = slice(start, end)
        out[:, sl] = F.scaled_dot_product_attention(q[:, sl], k[:, sl], v[:, sl], is_causal=causal)
        start = end
    return out


def paged_decode(q, kc, vc, pages, lens):
    # One decoding step against vLLM's paged cache as PyTorch users run it on the CPU: each
    # sequence's keys and values gathered from its pages, then SDPA once per sequence (GQA by
    # repeating the kv heads); an empty sequence gives zeros, as the kernel does.
    B, H, D = q.shape
    _, S, Hkv, _ = kc.shape
    out = torch.zeros_like(q)
    for b in range(B):
        n = int(lens[b])
        if n == 0:
            continue
        ids = pages[b, : (n + S - 1) // S].long()
        k = kc[ids].reshape(-1, Hkv, D)[:n].transpose(0, 1).repeat_interleave(H // Hkv, 0)
        v = vc[ids].reshape(-1, Hkv, D)[:n].transpose(0, 1).repeat_interleave(H // Hkv, 0)
        out[b] = F.scaled_dot_product_attention(q[b][:, None, :], k, v)[:, 0]
    return out


def mhsa(x, w_qkv, b_qkv, w_o, b_o):
    # timm's Attention: fused qkv linear, heads, SDPA, projection.
    B, N, C = x.shape
    _, H, Dh, _ = w_qkv.shape
    qkv = F.linear(x, w_qkv.reshape(3 * H * Dh, C), b_qkv.reshape(3 * H * Dh))
    qkv = qkv.reshape(B, N, 3, H, Dh).permute(2, 0, 3, 1, 4)
    a = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2])
    return F.linear(a.transpose(1, 2).reshape(B, N, H * Dh), w_o.reshape(w_o.shape[0], H * Dh), b_o)


def msda(x, w_qkv, b_qkv, w_o, b_o, hd, dilations):
    # DilateFormer's MultiDilatelocalAttention with DilateAttention (nn.Unfold of k and v).
    B, H, W, C = x.shape
    G = len(dilations)
    Cg = C // G
    nh = Cg // hd
    qkv = F.conv2d(x.permute(0, 3, 1, 2), w_qkv.reshape(3 * C, C, 1, 1), b_qkv.reshape(3 * C))
    qkv = qkv.reshape(B, 3, G, Cg, H, W).permute(2, 1, 0, 3, 4, 5)
    outs = []
    for g, r in enumerate(dilations):
        q, k, v = qkv[g][0], qkv[g][1], qkv[g][2]
        unfold = torch.nn.Unfold(3, r, r * (3 - 1) // 2, 1)
        q = q.reshape(B, nh, hd, 1, H * W).permute(0, 1, 4, 3, 2)
        k = unfold(k).reshape(B, nh, hd, 9, H * W).permute(0, 1, 4, 2, 3)
        attn = ((q @ k) * hd ** -0.5).softmax(dim=-1)
        v = unfold(v).reshape(B, nh, hd, 9, H * W).permute(0, 1, 4, 3, 2)
        outs.append((attn @ v).transpose(1, 2).reshape(B, H, W, Cg))
    return F.linear(torch.cat(outs, dim=-1), w_o, b_o)


def ms_deform_attn_core(value, shapes, start, loc, aw):
    # Deformable DETR's ms_deform_attn_core_pytorch.
    N_, S_, M_, D_ = value.shape
    _, Lq_, M_, L_, P_, _ = loc.shape
    hw = [(int(h), int(w)) for h, w in shapes.tolist()]
    value_list = value.split([h * w for h, w in hw], dim=1)
    sampling_grids = 2 * loc - 1
    sampled = []
    for lid_, (H_, W_) in enumerate(hw):
        value_l_ = value_list[lid_].flatten(2).transpose(1, 2).reshape(N_ * M_, D_, H_, W_)
        grid_l_ = sampling_grids[:, :, :, lid_].transpose(1, 2).flatten(0, 1)
        sampled.append(F.grid_sample(value_l_, grid_l_, mode="bilinear", padding_mode="zeros", align_corners=False))
    attention_weights = aw.transpose(1, 2).reshape(N_ * M_, 1, Lq_, L_ * P_)
    output = (torch.stack(sampled, dim=-2).flatten(-2) * attention_weights).sum(-1).view(N_, M_ * D_, Lq_)
    return output.transpose(1, 2).contiguous()


def deform_attn(x, z, p, w_off, b_off, w_a, b_a, w_v, w_o, b_o):
    # Single-scale deformable attention (Deformable DETR eq. 2) the way MSDeformAttn computes it
    # with one level: value projection first, then grid_sample at the pixel positions.
    B, Y, X, C = x.shape
    M, K = w_a.shape[0], w_a.shape[1]
    D = w_v.shape[1]
    Q = z.shape[1]
    off = F.linear(z, w_off.reshape(M * K * 2, C), b_off.reshape(M * K * 2)).view(B, Q, M, K, 2)
    a = F.linear(z, w_a.reshape(M * K, C), b_a.reshape(M * K)).view(B, Q, M, K).softmax(-1)
    v = F.linear(x, w_v.reshape(M * D, C)).view(B, Y * X, M, D)
    v = v.flatten(2).transpose(1, 2).reshape(B * M, D, Y, X)
    # Pixel (y, x), centres on the integers, as grid_sample's align_corners=False coordinates.
    py = p[:, :, None, None, 0] + off[..., 0]
    px = p[:, :, None, None, 1] + off[..., 1]
    grid = torch.stack(((2 * px + 1) / X - 1, (2 * py + 1) / Y - 1), dim=-1)  # B Q M K 2
    grid = grid.transpose(1, 2).flatten(0, 1)  # (B M) Q K 2
    s = F.grid_sample(v, grid, mode="bilinear", padding_mode="zeros", align_corners=False)  # (B M) D Q K
    h = (s * a.transpose(1, 2).reshape(B * M, 1, Q, K)).sum(-1).view(B, M * D, Q).transpose(1, 2)
    return F.linear(h, w_o.reshape(C, M * D), b_o)


def dat_attn(x, w_q, b_q, w_dw, b_dw, ln_g, ln_b, w_off, w_k, b_k, w_v, b_v, rpe, w_o, b_o, stride, ksize, orf,
             heads, groups):
    # DAT's DAttentionBaseline.forward (use_pe, no dwc_pe, no fixed_pe, no log_cpb), x channels-last.
    B, H, W, C = x.shape
    Cg, hc, hg = C // groups, C // heads, heads // groups
    xc = x.permute(0, 3, 1, 2)
    q = F.conv2d(xc, w_q[:, :, None, None], b_q)
    pad = ksize // 2 if ksize != stride else 0
    off = F.conv2d(q.reshape(B * groups, Cg, H, W), w_dw[:, None], b_dw, stride=stride, padding=pad, groups=Cg)
    off = F.layer_norm(off.permute(0, 2, 3, 1), (Cg,), ln_g, ln_b, 1e-5).permute(0, 3, 1, 2)
    off = F.conv2d(F.gelu(off), w_off[:, :, None, None])
    Hk, Wk = off.shape[2], off.shape[3]
    n_sample = Hk * Wk
    offset_range = torch.tensor([1.0 / (Hk - 1.0), 1.0 / (Wk - 1.0)]).reshape(1, 2, 1, 1)
    off = off.tanh().mul(offset_range).mul(orf).permute(0, 2, 3, 1)
    ref_y, ref_x = torch.meshgrid(torch.linspace(0.5, Hk - 0.5, Hk), torch.linspace(0.5, Wk - 0.5, Wk), indexing="ij")
    ref = torch.stack((ref_y / (Hk - 1.0) * 2.0 - 1.0, ref_x / (Wk - 1.0) * 2.0 - 1.0), -1)
    pos = off + ref[None]
    x_sampled = F.grid_sample(xc.reshape(B * groups, Cg, H, W), pos[..., (1, 0)], mode="bilinear", align_corners=True)
    x_sampled = x_sampled.reshape(B, C, 1, n_sample)
    q = q.reshape(B * heads, hc, H * W)
    k = F.conv2d(x_sampled, w_k[:, :, None, None], b_k).reshape(B * heads, hc, n_sample)
    v = F.conv2d(x_sampled, w_v[:, :, None, None], b_v).reshape(B * heads, hc, n_sample)
    attn = torch.einsum("bcm,bcn->bmn", q, k).mul(hc ** -0.5)
    qy, qx = torch.meshgrid(torch.arange(0, H, dtype=torch.float32), torch.arange(0, W, dtype=torch.float32),
                            indexing="ij")
    q_grid = torch.stack((qy / (H - 1.0) * 2.0 - 1.0, qx / (W - 1.0) * 2.0 - 1.0), -1)
    q_grid = q_grid[None].expand(B * groups, -1, -1, -1)
    displacement = (q_grid.reshape(B * groups, H * W, 2)[:, :, None] - pos.reshape(B * groups, n_sample, 2)[:, None]) * 0.5
    rpe_bias = rpe[None].expand(B, -1, -1, -1).reshape(B * groups, hg, 2 * H - 1, 2 * W - 1)
    attn_bias = F.grid_sample(rpe_bias, displacement[..., (1, 0)], mode="bilinear", align_corners=True)
    attn = (attn + attn_bias.reshape(B * heads, H * W, n_sample)).softmax(dim=2)
    out = torch.einsum("bmn,bcn->bcm", attn, v).reshape(B, C, H, W)
    return F.conv2d(out, w_o[:, :, None, None], b_o).permute(0, 2, 3, 1)


def swin_attention(q, k, v, table, ws, shift):
    # Swin Transformer's SwinTransformerBlock attention path on per-head q, k, v [B, NH, H, W, D]: torch.roll,
    # window_partition, WindowAttention (scale, relative_position_bias_table[relative_position_index], the
    # shifted-window attn_mask, softmax), window_reverse, roll back.
    B, NH, H, W, D = q.shape
    if shift:
        q, k, v = (torch.roll(a, shifts=(-shift, -shift), dims=(2, 3)) for a in (q, k, v))

    def partition(a):
        a = a.view(B, NH, H // ws, ws, W // ws, ws, D).permute(0, 2, 4, 1, 3, 5, 6)
        return a.reshape(-1, NH, ws * ws, D)

    qw, kw, vw = partition(q), partition(k), partition(v)
    coords = torch.flatten(torch.stack(torch.meshgrid(torch.arange(ws), torch.arange(ws), indexing="ij")), 1)
    rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0).contiguous()
    rel[:, :, 0] += ws - 1
    rel[:, :, 1] += ws - 1
    rel[:, :, 0] *= 2 * ws - 1
    index = rel.sum(-1)
    bias = table[index.view(-1)].view(ws * ws, ws * ws, -1).permute(2, 0, 1).contiguous()
    attn = (qw * D ** -0.5) @ kw.transpose(-2, -1) + bias.unsqueeze(0)
    if shift:
        img = torch.zeros((1, H, W, 1))
        cnt = 0
        for hs in (slice(0, -ws), slice(-ws, -shift), slice(-shift, None)):
            for wsl in (slice(0, -ws), slice(-ws, -shift), slice(-shift, None)):
                img[:, hs, wsl, :] = cnt
                cnt += 1
        mw = img.view(1, H // ws, ws, W // ws, ws, 1).permute(0, 1, 3, 2, 4, 5).reshape(-1, ws * ws)
        mask = (mw.unsqueeze(1) - mw.unsqueeze(2)).masked_fill(mw.unsqueeze(1) - mw.unsqueeze(2) != 0, -100.0)
        nW = mask.shape[0]
        attn = (attn.view(B, nW, NH, ws * ws, ws * ws) + mask.unsqueeze(1).unsqueeze(0)).view(-1, NH, ws * ws, ws * ws)
    o = attn.softmax(dim=-1) @ vw
    o = o.view(B, H // ws, W // ws, NH, ws, ws, D).permute(0, 3, 1, 4, 2, 5, 6).reshape(B, NH, H, W, D)
    if shift:
        o = torch.roll(o, shifts=(shift, shift), dims=(2, 3))
    return o


def neighborhood_attention(q, k, v, rpb, ks):
    # NATTEN's na2d with rpb in plain PyTorch (NATTEN itself dropped its CPU kernels in 0.20): each query's ks x ks
    # window, its start clamped into the map, gathered with index tensors; scores plus the bias at key minus query.
    B, NH, H, W, D = q.shape
    iy = (torch.arange(H) - ks // 2).clamp(0, H - ks)[:, None] + torch.arange(ks)  # [H, ks]
    ix = (torch.arange(W) - ks // 2).clamp(0, W - ks)[:, None] + torch.arange(ks)  # [W, ks]
    ky, kx = iy[:, None, :, None], ix[None, :, None, :]
    attn = torch.einsum("bhyxd,bhyxuvd->bhyxuv", q * D ** -0.5, k[:, :, ky, kx])
    by = iy - torch.arange(H)[:, None] + ks - 1
    bx = ix - torch.arange(W)[:, None] + ks - 1
    attn = attn + rpb[:, by[:, None, :, None], bx[None, :, None, :]]
    attn = attn.reshape(B, NH, H, W, ks * ks).softmax(-1).reshape(B, NH, H, W, ks, ks)
    return torch.einsum("bhyxuv,bhyxuvd->bhyxd", attn, v[:, :, ky, kx])


ENTRIES = {f.__name__: f for f in (sdpa, causal_attention, padding_mask, varlen_attention, paged_decode, mhsa, sigmoid_attention, sliding_window, softcap_sliding_window, rotary_attention, sink_attention, diff_attention, linear_attention, msda, ms_deform_attn_core, deform_attn, dat_attn, swin_attention, neighborhood_attention)}


def main():
    entry, d = sys.argv[1], sys.argv[2]
    with open(os.path.join(d, "meta.json")) as f:
        meta = json.load(f)
    args = [torch.from_numpy(np.load(os.path.join(d, n + ".npy"))) for n in meta["inputs"]]
    # A reduced-precision case: float inputs (already rounded to the type by attn-bench) in it.
    dtype = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[meta.get("dtype", "f32")]
    args = [a.to(dtype) if a.is_floating_point() else a for a in args]
    fn = ENTRIES[entry]
    with torch.inference_mode():
        t0 = time.perf_counter()
        out = fn(*args, **meta["consts"])
        first = time.perf_counter() - t0
        np.save(os.path.join(d, "out.npy"), np.ascontiguousarray(out.float().numpy()))
        # attn-bench's policy: the first run is the agreement run, then untimed runs for
        # meta["warmup"] seconds unless the first took longer; it is the only sample where it
        # alone exceeded the budget.
        if first < meta.get("warmup", 0.0):
            w0 = time.perf_counter()
            while time.perf_counter() - w0 < meta["warmup"]:
                fn(*args, **meta["consts"])
        times, total = ([first], 0.0) if first >= meta["budget"] else ([], 0.0)
        while len(times) < meta["reps"] and not (total >= meta["budget"] and len(times) >= min(3, meta["reps"])):
            t0 = time.perf_counter()
            fn(*args, **meta["consts"])
            times.append(time.perf_counter() - t0)
            total += times[-1]
    times.sort()
    n = len(times)
    median = times[n // 2] if n % 2 else (times[n // 2 - 1] + times[n // 2]) / 2
    print(json.dumps({"median_s": median, "runs": n, "threads": torch.get_num_threads()}))


if __name__ == "__main__":
    main()
