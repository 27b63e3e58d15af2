"""attnc kernels as torch.ops against PyTorch itself: SDPA, the seeds' modules, grid_sample.

Run by ctest (torch_ops) with ATTNC_TORCH_MODULES, the operator modules the build made
(attnc_add_torch_module), separated by ':'. Numerics compare against float64 PyTorch with a
tolerance scaled from the error of PyTorch's own float32 computation of the same thing.
"""

import math
import os
import sys
import tempfile
import unittest

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import attnc

# The PyTorch references the examples compare against are the ones checked here too: timm's ViT
# attention and Deformable DETR's grid_sample core.
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "pytorch"))
from deformable_detr_layer import ms_deform_attn_core_pytorch  # noqa: E402
from vit_block import Attention  # noqa: E402

torch.manual_seed(0)
MODULES = {}
for path in filter(None, os.environ.get("ATTNC_TORCH_MODULES", "").split(":")):
    for name in attnc.load(path).kernels:
        MODULES[name] = path


def op(name):
    if name not in MODULES:
        raise unittest.SkipTest(f"no operator module for {name} (ATTNC_TORCH_MODULES)")
    return getattr(torch.ops.attnc, name)


class Tolerance:
    """|attnc - fp64| <= max(8 x |PyTorch fp32 - fp64|, 1e-6 x max|fp64|), elementwise max."""

    @staticmethod
    def check(case, got, ref32, ref64):
        got, ref32, ref64 = got.double(), ref32.double(), ref64.double()
        scale = max(ref64.abs().max().item(), 1e-30)
        base = (ref32 - ref64).abs().max().item()
        tol = max(8 * base, 1e-6 * scale)
        err = (got - ref64).abs().max().item()
        case.assertLessEqual(err, tol, f"error {err:.3g} > tolerance {tol:.3g} (PyTorch fp32: {base:.3g})")


def both(fn, *args):
    """fn in float32 and in float64 on the same inputs."""
    return fn(*args), fn(*[a.double() if a.is_floating_point() else a for a in args])


class SdpaTest(unittest.TestCase):
    def test_against_sdpa(self):
        sdpa = op("sdpa_auto")
        for B, H, Nq, Nk, D in [(1, 1, 1, 1, 1), (2, 3, 37, 53, 16), (1, 4, 128, 128, 64)]:
            q, k, v = (torch.randn(B, H, n, D) for n in (Nq, Nk, Nk))
            r32, r64 = both(F.scaled_dot_product_attention, q, k, v)
            Tolerance.check(self, sdpa(q, k, v), r32, r64)

    def test_causal_against_sdpa(self):
        causal = op("causal_attention")
        q, k, v = (torch.randn(2, 2, 77, 32) for _ in range(3))
        r32, r64 = both(lambda *a: F.scaled_dot_product_attention(*a, is_causal=True), q, k, v)
        Tolerance.check(self, causal(q, k, v), r32, r64)

    def test_non_contiguous_inputs(self):
        sdpa = op("sdpa_auto")
        base = torch.randn(2, 40, 3, 16)  # [B, N, H, D] as a projection leaves it
        q = k = v = base.transpose(1, 2)  # [B, H, N, D], not contiguous
        self.assertFalse(q.is_contiguous())
        torch.testing.assert_close(sdpa(q, k, v), sdpa(q.contiguous(), k.contiguous(), v.contiguous()),
                                   rtol=0, atol=0)

    def test_empty(self):
        sdpa = op("sdpa_auto")
        o = sdpa(torch.randn(1, 2, 0, 8), torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 8))
        self.assertEqual(tuple(o.shape), (1, 2, 0, 8))


class SeedModulesTest(unittest.TestCase):
    """The seeds' PyTorch modules with attnc's kernel inside, against the modules themselves."""

    def test_mhsa(self):
        mhsa = op("mhsa")
        C, H = 48, 4
        m = Attention(C, H)  # ViT's MSA (seed 004), from examples/pytorch/vit_block.py
        x = torch.randn(2, 50, C)
        args = (x, m.qkv.weight.view(3, H, C // H, C), m.qkv.bias.view(3, H, C // H),
                m.proj.weight.view(C, H, C // H), m.proj.bias)
        with torch.no_grad():
            got = mhsa(*args)
            r32 = m(x)
            r64 = m.double()(x.double())
        Tolerance.check(self, got, r32, r64)

    def test_cross_attention(self):
        cross = op("cross_attention")
        C, H, Nq, Nk = 32, 2, 9, 21
        lq, lk, lv = (nn.Linear(C, C, bias=False) for _ in range(3))
        lo = nn.Linear(C, C)
        xq, xk, xv = torch.randn(2, Nq, C), torch.randn(2, Nk, C), torch.randn(2, Nk, C)

        def ref(xq, xk, xv, dt):
            def heads(l, x):
                return l.to(dt)(x).view(x.shape[0], x.shape[1], H, C // H).transpose(1, 2)

            a = F.scaled_dot_product_attention(heads(lq, xq), heads(lk, xk), heads(lv, xv))
            return lo.to(dt)(a.transpose(1, 2).reshape(xq.shape[0], Nq, C))

        with torch.no_grad():
            got = cross(xq, xk, xv, *(l.weight.view(H, C // H, C) for l in (lq, lk, lv)),
                        lo.weight.view(C, H, C // H), lo.bias)
            r32 = ref(xq, xk, xv, torch.float32)
            r64 = ref(xq.double(), xk.double(), xv.double(), torch.float64)
        Tolerance.check(self, got, r32, r64)

    class T2TAttention(nn.Module):  # Tokens-to-Token ViT's attention (seed 004)
        def __init__(self, dim, chan, num_heads):
            super().__init__()
            self.num_heads, self.chan, self.head_dim = num_heads, chan, chan // num_heads
            self.scale = self.head_dim ** -0.5
            self.qkv = nn.Linear(dim, chan * 3, bias=False)
            self.proj = nn.Linear(chan, chan)

        def forward(self, x):
            B, N, C = x.shape
            qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            attn = ((q * self.scale) @ k.transpose(-2, -1)).softmax(dim=-1)
            x = self.proj((attn @ v).transpose(1, 2).reshape(B, N, self.chan))
            return v.transpose(1, 2).reshape(B, N, self.chan) + x

    def test_t2t_attention(self):
        t2t = op("t2t_attention")
        for dim, chan, heads in [(49, 64, 1), (147, 64, 2)]:  # T2T-ViT's token lengths 7*7, 3*7*7
            m = self.T2TAttention(dim, chan, heads)
            x = torch.randn(3, 100, dim)
            with torch.no_grad():
                got = t2t(x, m.qkv.weight.view(3, heads, chan // heads, dim),
                          m.proj.weight.view(chan, heads, chan // heads), m.proj.bias)
                r32 = m(x)
                r64 = m.double()(x.double())
            Tolerance.check(self, got, r32, r64)

    def test_msda(self):
        """DilateFormer's MultiDilatelocalAttention (seed 001), dilations 1, 2, 3, head_dim 24."""
        msda = op("dilate_msda_default")
        B, Y, X, C, G, k = 2, 9, 11, 72, 3, 3
        qkv = nn.Conv2d(C, 3 * C, 1, bias=True)
        proj = nn.Linear(C, C)
        x = torch.randn(B, Y, X, C)

        def ref(x, dt):
            q_, p_ = qkv.to(dt), proj.to(dt)
            xc = x.permute(0, 3, 1, 2)
            t = q_(xc).reshape(B, 3, G, C // G, Y, X).permute(2, 1, 0, 3, 4, 5)
            outs = []
            for g, dil in enumerate([1, 2, 3]):
                q, kk, v = t[g][0], t[g][1], t[g][2]
                unfold = nn.Unfold(k, dil, dil * (k - 1) // 2, 1)
                d = C // G
                hd = 24
                q = q.reshape(B, d // hd, hd, 1, Y * X).permute(0, 1, 4, 3, 2)
                kk = unfold(kk).reshape(B, d // hd, hd, k * k, Y * X).permute(0, 1, 4, 2, 3)
                a = ((q @ kk) * hd ** -0.5).softmax(dim=-1)
                v = unfold(v).reshape(B, d // hd, hd, k * k, Y * X).permute(0, 1, 4, 3, 2)
                outs.append((a @ v).transpose(1, 2).reshape(B, Y, X, d))
            return p_(torch.stack(outs, 3).reshape(B, Y, X, C))

        with torch.no_grad():
            got = msda(x, qkv.weight.view(3, G, C // G, C), qkv.bias.view(3, G, C // G),
                       proj.weight, proj.bias)
            r32 = ref(x, torch.float32)
            r64 = ref(x.double(), torch.float64)
        Tolerance.check(self, got, r32, r64)

    def test_ms_deform_attn_core(self):
        """Deformable DETR's ms_deform_attn_core_pytorch (the grid_sample formulation)."""
        core = op("deform_ms_deform_attn_core")
        shapes = torch.tensor([[8, 10], [4, 5], [2, 3]], dtype=torch.int32)
        start = torch.tensor([0, 80, 100], dtype=torch.int32)
        B, M, D, Q, L, P = 2, 2, 8, 13, 3, 4
        S = int((shapes[:, 0] * shapes[:, 1]).sum())
        value = torch.randn(B, S, M, D)
        loc = torch.rand(B, Q, M, L, P, 2) * 1.2 - 0.1  # some samples outside the map
        aw = torch.rand(B, Q, M, L, P).softmax(-1)

        def ref(value, loc, aw):
            return ms_deform_attn_core_pytorch(value, shapes, start, loc, aw)

        got = core(value, shapes, start, loc, aw)
        Tolerance.check(self, got, ref(value, loc, aw), ref(value.double(), loc.double(), aw.double()))


class OperatorTest(unittest.TestCase):
    def test_opcheck(self):
        """PyTorch's own checks of a custom operator: schema, fake tensors, autograd registration,
        AOT dispatch with static and dynamic shapes."""
        for name, args in [
            ("sdpa_auto", [torch.randn(1, 2, 9, 8), torch.randn(1, 2, 12, 8), torch.randn(1, 2, 12, 8)]),
            ("causal_attention", [torch.randn(1, 2, 9, 8) for _ in range(3)]),
        ]:
            with self.subTest(op=name):
                torch.library.opcheck(op(name), args)

    def test_torch_compile_no_graph_break(self):
        sdpa = op("sdpa_auto")

        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(16, 16)

            def forward(self, q, k, v):
                return self.lin(sdpa(q, k, v)).relu()

        m = Block()
        q, k, v = (torch.randn(1, 2, 10, 16) for _ in range(3))
        explain = torch._dynamo.explain(m)(q, k, v)
        self.assertEqual(explain.graph_break_count, 0, explain.break_reasons)
        compiled = torch.compile(m, fullgraph=True, backend="aot_eager")
        with torch.no_grad():
            torch.testing.assert_close(compiled(q, k, v), m(q, k, v))

    def test_export(self):
        sdpa = op("sdpa_auto")

        class M(nn.Module):
            def forward(self, q, k, v):
                return sdpa(q, k, v) * 2

        q, k, v = (torch.randn(1, 2, 10, 16) for _ in range(3))
        ep = torch.export.export(M(), (q, k, v))
        self.assertIn("attnc.sdpa_auto", str(ep.graph))
        torch.testing.assert_close(ep.module()(q, k, v), M()(q, k, v))

    def test_meta_shapes(self):
        sdpa = op("sdpa_auto")
        o = sdpa(*(torch.empty(2, 3, n, 8, device="meta") for n in (5, 7, 7)))
        self.assertEqual((o.device.type, tuple(o.shape), o.dtype), ("meta", (2, 3, 5, 8), torch.float32))
        core = op("deform_ms_deform_attn_core")
        o = core(torch.empty(2, 30, 4, 8, device="meta"), torch.empty(1, 2, dtype=torch.int32, device="meta"),
                 torch.empty(1, dtype=torch.int32, device="meta"), torch.empty(2, 6, 4, 1, 3, 2, device="meta"),
                 torch.empty(2, 6, 4, 1, 3, device="meta"))
        self.assertEqual(tuple(o.shape), (2, 6, 32))  # M * D

    def test_bad_inputs(self):
        sdpa = op("sdpa_auto")
        q, k, v = (torch.randn(1, 2, 4, 8) for _ in range(3))
        cases = [
            ((q.double(), k, v), TypeError, "sdpa_auto: input 'q' has dtype Double, expected f32"),
            ((q, k[0], v), ValueError, "sdpa_auto: input 'k' has rank 3"),
            ((q, k, torch.randn(1, 2, 5, 8)), ValueError, "input 'v' dimension 2 (Nk)"),
        ]
        for args, exc, text in cases:
            with self.subTest(text=text):
                with self.assertRaises(exc) as cm:
                    sdpa(*args)
                self.assertIn(text, str(cm.exception))
        # The runtime's text, from the CPU kernel and from the Meta kernel (torch.compile's tracing).
        text = "sdpa_auto: input 'k' dimension 3 (D) is 7, but 'q' dimension 3 set D = 8"
        for dev in ("cpu", "meta"):
            with self.subTest(device=dev):
                with self.assertRaises(ValueError) as cm:
                    sdpa(q.to(dev), torch.empty(1, 2, 4, 7, device=dev), v.to(dev))
                self.assertEqual(str(cm.exception).splitlines()[0], text)
        # A requirement on input values: the level table must cover value's S rows.
        core = op("deform_ms_deform_attn_core")
        with self.assertRaises(RuntimeError) as cm:
            core(torch.randn(1, 10, 1, 4), torch.tensor([[2, 3]], dtype=torch.int32),
                 torch.tensor([0], dtype=torch.int32), torch.rand(1, 2, 1, 1, 1, 2), torch.rand(1, 2, 1, 1, 1))
        self.assertIn("requirement failed: the levels' H * W (shapes) must add up to S", str(cm.exception))

    def test_wrong_device(self):
        sdpa = op("sdpa_auto")
        q = torch.randn(1, 1, 4, 8)
        with self.assertRaises(ValueError) as cm:  # not a shape computation on a meta tensor
            sdpa(q, q.to("meta"), q)
        self.assertIn("sdpa_auto: input 'q' is on cpu, but the other inputs are meta tensors", str(cm.exception))
        if not torch.cuda.is_available():
            self.skipTest("needs a CUDA device: a CUDA tensor given to a CPU kernel")
        with self.assertRaises(ValueError) as cm:
            sdpa(q.cuda(), q, q)
        self.assertIn("sdpa_auto: input 'q' is on cuda:0, but kernel 'sdpa_auto' was built for the CPU",
                      str(cm.exception))

    def test_same_kernel_twice(self):
        """A second module of a kernel already registered is an error, not a silent no-op."""
        path = MODULES.get("sdpa_auto")
        if path is None:
            self.skipTest("no sdpa_auto module")
        with tempfile.TemporaryDirectory() as d:
            copy = os.path.join(d, "copy.so")
            with open(path, "rb") as f, open(copy, "wb") as g:
                g.write(f.read())
            with self.assertRaises(attnc.AttncError) as cm:
                attnc.load(copy)
            self.assertIn("sdpa_auto", str(cm.exception))

    def test_no_backward(self):
        """No derivatives yet: backward through a kernel is an error, not a silent zero gradient."""
        sdpa = op("sdpa_auto")
        q = torch.randn(1, 1, 4, 8, requires_grad=True)
        o = sdpa(q, q.detach(), q.detach())
        self.assertTrue(o.requires_grad)
        with self.assertRaises(RuntimeError) as cm:
            o.sum().backward()
        self.assertIn("derivative for attnc::sdpa_auto is not implemented", str(cm.exception))


class JitTest(unittest.TestCase):
    SOURCE = """
kernel scaled_sum(a: f32[N, D], b: f32[N, D]) -> o: f32[N] {
  const c = 2
  o(i) = c * sum(d) a(i, d) * b(i, d)
}
"""

    def setUp(self):
        self.cache = tempfile.TemporaryDirectory(prefix="attnc-cache-")
        os.environ["ATTNC_CACHE_DIR"] = self.cache.name

    def tearDown(self):
        self.cache.cleanup()

    def test_compile_and_cache(self):
        k = attnc.compile(self.SOURCE)
        a, b = torch.randn(5, 3), torch.randn(5, 3)
        torch.testing.assert_close(k(a, b), 2 * (a * b).sum(1))
        torch.testing.assert_close(k(b=b, a=a), 2 * (a * b).sum(1))
        # numpy in, numpy out
        r = k(a.numpy(), b.numpy())
        self.assertIsInstance(r, np.ndarray)
        # The same source again: the cached module, no second compilation.
        entries = [p for p in os.listdir(self.cache.name)]
        k2 = attnc.compile(self.SOURCE)
        self.assertEqual(k2.name, k.name)
        self.assertEqual(os.listdir(self.cache.name), entries)
        # Another constant is another operator.
        k3 = attnc.compile(self.SOURCE, defines={"c": 3})
        self.assertNotEqual(k3.name, k.name)
        torch.testing.assert_close(k3(a, b), 3 * (a * b).sum(1))

    def test_outputs_scalars_and_ints(self):
        """Several outputs (a tuple), a 0-dim input and output, an i32 output, an empty size."""
        k = attnc.compile("""
kernel stats(a: f32[], b: f32[N]) -> (o: f32[N], m: f32[], z: i32[N]) {
  o(i) = a() * b(i)
  m() = max(i) b(i)
  z(i) = 7
}
""")
        self.assertEqual(k.info["schema"].split(") -> ")[1], "(Tensor, Tensor, Tensor)")
        b = torch.randn(5)
        o, m, z = k(torch.tensor(3.0), b)
        torch.testing.assert_close(o, 3 * b)
        self.assertEqual(m.item(), b.max().item())
        self.assertEqual((z.dtype, z.tolist()), (torch.int32, [7] * 5))
        metas = getattr(torch.ops.attnc, k.name)(torch.empty((), device="meta"), torch.empty(5, device="meta"))
        self.assertEqual([(tuple(t.shape), t.dtype) for t in metas],
                         [((5,), torch.float32), ((), torch.float32), ((5,), torch.int32)])
        o, m, z = k(torch.tensor(3.0), torch.randn(0))
        self.assertEqual((o.numel(), m.item(), z.numel()), (0, -math.inf, 0))

    def test_edited_import(self):
        """An edited import is a cache miss and another operator, in the same process too."""
        d = self.cache.name
        with open(os.path.join(d, "scale.attn"), "w") as f:
            f.write("def scale(x) = 2 * x\n")
        main = os.path.join(d, "main.attn")
        with open(main, "w") as f:
            f.write("import scale\n\nkernel scaled(a: f32[N]) -> o: f32[N] {\n  o(i) = scale(a(i))\n}\n")
        a = torch.randn(7)
        k1 = attnc.compile(main)
        torch.testing.assert_close(k1(a), 2 * a)
        with open(os.path.join(d, "scale.attn"), "w") as f:
            f.write("def scale(x) = 3 * x\n")
        k2 = attnc.compile(main)
        self.assertNotEqual(k1.name, k2.name)
        torch.testing.assert_close(k2(a), 3 * a)
        torch.testing.assert_close(k1(a), 2 * a)  # the first operator is still what it was

    def test_file_and_kernel(self):
        root = os.path.join(os.path.dirname(__file__), "..", "..", "dsl", "variants")
        k = attnc.compile(os.path.join(root, "mhsa.attn"), kernel="mhsa_nobias")
        self.assertTrue(k.name.startswith("mhsa_nobias_"))
        with self.assertRaises(attnc.AttncError) as cm:
            attnc.compile(os.path.join(root, "mhsa.attn"))
        self.assertIn("mhsa", str(cm.exception))

    def test_bf16_and_f16(self):
        # -D f32=bf16 / f16: torch.bfloat16 / float16 tensors in and out, computed in f32 and
        # rounded once, so within half a unit in the last place of the exact result (plus f32's
        # own error), where PyTorch's SDPA in the same dtype rounds its intermediate tensors.
        root = os.path.join(os.path.dirname(__file__), "..", "..", "dsl", "variants")
        for dtype, name, digits in [(torch.bfloat16, "bf16", 8), (torch.float16, "f16", 11)]:
            with self.subTest(name):
                k = attnc.compile(os.path.join(root, "sdpa.attn"), defines={"f32": name})
                q, kk, v = (torch.randn(2, 3, 37, 16).to(dtype) for _ in range(3))
                o = k(q, kk, v)
                self.assertEqual(o.dtype, dtype)
                exact = F.scaled_dot_product_attention(q.double(), kk.double(), v.double())
                ulp = torch.exp2(torch.floor(torch.log2(exact.abs().clamp_min(1e-30))) - (digits - 1))
                err = ((o.double() - exact).abs() / (0.5 * ulp + 1e-6)).max().item()
                self.assertLessEqual(err, 1.0)
                with self.assertRaises(Exception) as cm:
                    k(q.float(), kk, v)
                self.assertIn(f"expected {name}", str(cm.exception))

    def test_schedule_params(self):
        # Knob values reach attnc (--schedule-params) and are part of the cache key: bf16 sdpa at
        # D = 64 with and without the bf16 dot products (online.bf16_dot, where the CPU has
        # AVX512_BF16; elsewhere the rule has no such knob and says so) agrees with fp64 within
        # half a bf16 ulp; a value out of range is attnc's error.
        root = os.path.join(os.path.dirname(__file__), "..", "..", "dsl", "variants")
        q, kk, v = (torch.randn(1, 2, 300, 64).to(torch.bfloat16) for _ in range(3))
        exact = F.scaled_dot_product_attention(q.double(), kk.double(), v.double())
        ulp = torch.exp2(torch.floor(torch.log2(exact.abs().clamp_min(1e-30))) - 7)
        with open("/proc/cpuinfo") as f:
            bf16_dot = "avx512_bf16" in f.read()
        for params in ({}, {"online.bf16_dot": 1}, {"online.bf16_dot": 2}):
            if params and not bf16_dot:
                with self.assertRaises(attnc.AttncError) as cm:
                    attnc.compile(os.path.join(root, "sdpa.attn"), defines={"f32": "bf16"},
                                  schedule_params=params)
                self.assertIn("no knob 'online.bf16_dot'", str(cm.exception))
                continue
            k = attnc.compile(os.path.join(root, "sdpa.attn"), defines={"f32": "bf16"},
                              schedule_params=params)
            err = ((k(q, kk, v).double() - exact).abs() / (0.5 * ulp + 1e-6)).max().item()
            self.assertLessEqual(err, 1.0, params)
        with self.assertRaises(attnc.AttncError) as cm:
            attnc.compile(os.path.join(root, "sdpa.attn"), schedule_params={"online.query_tile": 0})
        self.assertIn("online.query_tile=0", str(cm.exception))

    def test_tune(self):
        src = os.path.join(self.cache.name, "scaled_sum.attn")
        with open(src, "w") as f:
            f.write(self.SOURCE)
        db = os.path.join(self.cache.name, "tuning.json")
        r = attnc.tune(src, sizes={"N": 64, "D": 16}, budget=5, max_trials=2, db=db, progress=False)
        self.assertIn("attn-tune", r["output"])
        self.assertEqual(r["db"], db)
        self.assertTrue(os.path.isfile(db))
        with self.assertRaises(attnc.AttncError):
            attnc.tune(src, sizes={"N": 64}, budget=1, db=db, progress=False)  # D missing

    def test_compile_error(self):
        with self.assertRaises(attnc.AttncError) as cm:
            attnc.compile("kernel bad(a: f32[N]) -> o: f32[N] {\n  o(i) = a(i) + zz(i)\n}\n")
        self.assertRegex(str(cm.exception), r"<source>:2:\d+: error: .*zz")


if __name__ == "__main__":
    unittest.main(verbosity=2)
