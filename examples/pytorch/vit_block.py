"""A ViT block whose attention is an attnc kernel (JIT), checked against the all-PyTorch block.

    .venv/bin/python examples/pytorch/vit_block.py            # after `make build`

The attention module keeps timm's parameters (qkv: Linear(C, 3C), proj: Linear(C, C)), so a
pretrained state_dict loads unchanged; attnc's `mhsa` kernel (dsl/variants/mhsa.attn) takes views
of them: qkv.weight [3C, C] as [3, H, Dh, C], proj.weight [C, C] as [C, H, Dh]. Inference only:
attnc kernels have no backward yet (backward through one raises).
"""

import sys
import time
from pathlib import Path

import torch
import torch.nn as nn

import attnc

VARIANTS = Path(__file__).resolve().parents[2] / "dsl" / "variants"


class Attention(nn.Module):
    """timm's ViT attention in PyTorch (the reference)."""

    def __init__(self, dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.scale = (dim // num_heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = ((q @ k.transpose(-2, -1)) * self.scale).softmax(dim=-1)
        return self.proj((attn @ v).transpose(1, 2).reshape(B, N, C))


class AttncAttention(Attention):
    """The same module and parameters; forward is one attnc kernel (projections, softmax, output)."""

    def __init__(self, dim, num_heads):
        super().__init__(dim, num_heads)
        self.kernel = attnc.compile(VARIANTS / "mhsa.attn", kernel="mhsa")

    def forward(self, x):
        C, H = x.shape[-1], self.num_heads
        return self.kernel(x, self.qkv.weight.view(3, H, C // H, C), self.qkv.bias.view(3, H, C // H),
                           self.proj.weight.view(C, H, C // H), self.proj.bias)


class Block(nn.Module):
    """Pre-norm transformer block (ViT): x + attn(norm1(x)), then x + mlp(norm2(x))."""

    def __init__(self, dim, num_heads, attention=Attention, mlp_ratio=4.0):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = attention(dim, num_heads)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        hidden = int(dim * mlp_ratio)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


def timed(fn, reps=20):
    fn()
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        t.append(time.perf_counter() - t0)
    return sorted(t)[len(t) // 2] * 1e3


def main(dim=192, heads=3, tokens=197, batch=2):  # ViT-Ti/16 at 224x224
    torch.manual_seed(0)
    ref = Block(dim, heads).eval()
    ours = Block(dim, heads, AttncAttention).eval()
    ours.load_state_dict(ref.state_dict())  # the same parameters, the same names
    x = torch.randn(batch, tokens, dim)
    with torch.inference_mode():
        got, want = ours(x), ref(x)
        want64 = ref.double()(x.double())
        err = (got.double() - want64).abs().max().item()
        base = (want.double() - want64).abs().max().item()
        print(f"ViT block (C={dim}, H={heads}, N={tokens}, B={batch}): max |attnc - fp64| = {err:.2e}, "
              f"max |PyTorch fp32 - fp64| = {base:.2e}")
        ref.float()
        print(f"  block: attnc {timed(lambda: ours(x)):.3f} ms, PyTorch {timed(lambda: ref(x)):.3f} ms "
              f"({torch.get_num_threads()} threads; one run, not a benchmark)")
    ok = err <= max(8 * base, 1e-5)
    print("OK" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
