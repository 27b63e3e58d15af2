"""A Deformable-DETR encoder layer whose sampling core is an attnc kernel, checked against PyTorch.

    .venv/bin/python examples/pytorch/deformable_detr_layer.py      # after `make build`

MSDeformAttn keeps Deformable DETR's parameters and projections; only the multi-scale sampling
(`ms_deform_attn_core_pytorch`, F.grid_sample per level, or MMCV's CUDA op) is replaced, by
attnc's `ms_deform_attn_core` (dsl/variants/ms_deform_attn_core.attn), compiled just in time for
the CPU. Inference only: attnc kernels have no backward yet.
"""

import sys
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

import attnc

VARIANTS = Path(__file__).resolve().parents[2] / "dsl" / "variants"


def ms_deform_attn_core_pytorch(value, shapes, start, loc, aw):
    """Deformable DETR's reference implementation (grid_sample per level)."""
    N, S, M, D = value.shape
    _, Q, M, L, P, _ = loc.shape
    values = value.split([int(h * w) for h, w in shapes], dim=1)
    grids = 2 * loc - 1
    sampled = []
    for l, (h, w) in enumerate(shapes.tolist()):
        v = values[l].flatten(2).transpose(1, 2).reshape(N * M, D, h, w)
        g = grids[:, :, :, l].transpose(1, 2).flatten(0, 1)
        sampled.append(F.grid_sample(v, g, mode="bilinear", padding_mode="zeros", align_corners=False))
    aw = aw.transpose(1, 2).reshape(N * M, 1, Q, L * P)
    out = (torch.stack(sampled, dim=-2).flatten(-2) * aw).sum(-1).view(N, M * D, Q)
    return out.transpose(1, 2).contiguous()


class MSDeformAttn(nn.Module):
    def __init__(self, d_model=256, n_levels=4, n_heads=8, n_points=4, core=ms_deform_attn_core_pytorch):
        super().__init__()
        self.d_model, self.n_levels, self.n_heads, self.n_points = d_model, n_levels, n_heads, n_points
        self.sampling_offsets = nn.Linear(d_model, n_heads * n_levels * n_points * 2)
        self.attention_weights = nn.Linear(d_model, n_heads * n_levels * n_points)
        self.value_proj = nn.Linear(d_model, d_model)
        self.output_proj = nn.Linear(d_model, d_model)
        self.core = core

    def forward(self, query, reference_points, input_flatten, shapes, start):
        N, Lq, _ = query.shape
        _, Lin, _ = input_flatten.shape
        M, L, P = self.n_heads, self.n_levels, self.n_points
        value = self.value_proj(input_flatten).view(N, Lin, M, self.d_model // M)
        offsets = self.sampling_offsets(query).view(N, Lq, M, L, P, 2)
        aw = F.softmax(self.attention_weights(query).view(N, Lq, M, L * P), -1).view(N, Lq, M, L, P)
        normalizer = torch.stack([shapes[..., 1], shapes[..., 0]], -1).to(query.dtype)
        loc = reference_points[:, :, None, :, None, :] + offsets / normalizer[None, None, None, :, None, :]
        return self.output_proj(self.core(value, shapes, start, loc, aw))


class EncoderLayer(nn.Module):
    def __init__(self, d_model=256, d_ffn=1024, n_levels=4, n_heads=8, n_points=4, core=ms_deform_attn_core_pytorch):
        super().__init__()
        self.self_attn = MSDeformAttn(d_model, n_levels, n_heads, n_points, core)
        self.norm1 = nn.LayerNorm(d_model)
        self.linear1 = nn.Linear(d_model, d_ffn)
        self.linear2 = nn.Linear(d_ffn, d_model)
        self.norm2 = nn.LayerNorm(d_model)

    def forward(self, src, pos, reference_points, shapes, start):
        src = self.norm1(src + self.self_attn(src + pos, reference_points, src, shapes, start))
        return self.norm2(src + self.linear2(F.relu(self.linear1(src))))


def reference_points(shapes, batch):
    """Each pixel's centre, normalised, for every level (valid ratios of 1)."""
    points = []
    for h, w in shapes.tolist():
        y, x = torch.meshgrid(torch.linspace(0.5, h - 0.5, h), torch.linspace(0.5, w - 0.5, w), indexing="ij")
        points.append(torch.stack((x.reshape(-1) / w, y.reshape(-1) / h), -1))
    p = torch.cat(points, 0)[None, :, None].expand(batch, -1, len(shapes), -1)
    return p.contiguous()


def timed(fn, reps=10):
    fn()
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        t.append(time.perf_counter() - t0)
    return sorted(t)[len(t) // 2] * 1e3


def main(batch=1, d_model=256):
    torch.manual_seed(0)
    # Feature maps of a 256 x 320 image at strides 8, 16, 32, 64.
    shapes = torch.tensor([[32, 40], [16, 20], [8, 10], [4, 5]], dtype=torch.int32)
    start = torch.cat((torch.zeros(1, dtype=torch.int32), (shapes[:, 0] * shapes[:, 1]).cumsum(0)[:-1].int()))
    S = int((shapes[:, 0] * shapes[:, 1]).sum())
    core = attnc.compile(VARIANTS / "ms_deform_attn_core.attn")
    ref = EncoderLayer().eval()
    ours = EncoderLayer(core=core).eval()
    ours.load_state_dict(ref.state_dict())
    src, pos = torch.randn(batch, S, d_model), torch.randn(batch, S, d_model)
    refp = reference_points(shapes, batch)
    with torch.inference_mode():
        got, want = ours(src, pos, refp, shapes, start), ref(src, pos, refp, shapes, start)
        want64 = ref.double()(src.double(), pos.double(), refp.double(), shapes, start)
        err = (got.double() - want64).abs().max().item()
        base = (want.double() - want64).abs().max().item()
        print(f"Deformable-DETR encoder layer (S={S} tokens, 4 levels, 8 heads, 4 points): "
              f"max |attnc - fp64| = {err:.2e}, max |PyTorch fp32 - fp64| = {base:.2e}")
        ref.float()
        args = (src, pos, refp, shapes, start)
        print(f"  layer: attnc core {timed(lambda: ours(*args)):.2f} ms, grid_sample core "
              f"{timed(lambda: ref(*args)):.2f} ms ({torch.get_num_threads()} threads; one run, not a benchmark)")
    ok = err <= max(8 * base, 1e-5)
    print("OK" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
