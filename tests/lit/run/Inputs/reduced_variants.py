# bf16 and f16 builds (-D f32=bf16 / f16) of the bundled variants that tests/numerics/reduced_numerics_test.cpp does not cover, against the fp64 interpreter.
#
# Usage: reduced_variants.py VARIANTS_DIR OUT_DIR GROUP. For each kernel of GROUP (CASES below) and each type T:
# random f32 inputs are rounded to T; `attn-run -D f32=T` computes on them stored as T ('<V2'
# for bf16, as ml_dtypes saves it; '<f2' for f16), and `attn-run --reference` (the fp64
# interpreter) on the same values stored as f32 gives the exact result. Every f32 tensor of a
# kernel is stored as T, so (docs/language.md §3) the kernel computes in f32 and rounds once at
# the store: each output element is within half a unit in the last place of T of the exact
# value, plus f32's own error, bounded here by 2^-16 of the output's largest magnitude (256
# units of f32 at that scale, 128x below bf16's half unit and 32x below f16's there). That is
# far tighter than PyTorch's tests allow for bf16 (a multiple of a bf16 reference's error, which
# rounds every intermediate tensor); a conversion that truncated, read the wrong half of a value
# or rounded an intermediate definition to T fails it. Prints one line per kernel and type.
import os
import subprocess
import sys

import numpy as np

def rng(seed):
    r = np.random.default_rng(seed)
    return lambda *s, sc=1.0: (r.standard_normal(s) * sc).astype(np.float32)


def ints(a):
    return np.asarray(a, np.int32)


def qkv(f, B, H, Nq, Nk, D, E=None, sc=1.0):
    return dict(q=f(B, H, Nq, D, sc=sc), k=f(B, H, Nk, D, sc=sc), v=f(B, H, Nk, E or D))


def mask_bool():
    # Random keys allowed; row 3 allows none (its output is 0), row 5 only its last key.
    r = np.random.default_rng(3)
    m = (r.uniform(size=(20, 33)) < 0.6).astype(np.int32)
    m[3, :] = 0
    m[5, :] = 0
    m[5, 32] = 1
    return m


def bias_additive():
    f = rng(4)
    b = f(20, 33, sc=30.0)  # scores of ~100: the max subtraction matters in any precision
    b[2, :] = -np.inf  # a row with only -inf scores: zeros
    b[6, ::2] = -np.inf
    return b


def paged():
    # Two sequences of 20 and 7 tokens in pages of 8 tokens; the table is padded with -1 past
    # each sequence's pages (masked keys are never read).
    f = rng(5)
    pages = ints([[4, 0, 7, -1], [2, -1, -1, -1]])
    return dict(q=f(2, 4, 16), kc=f(10, 8, 2, 16), vc=f(10, 8, 2, 16), pages=pages, lens=ints([20, 7]))


def varlen():
    f = rng(6)
    seq = np.repeat(np.arange(4), [17, 1, 30, 12]).astype(np.int32)
    return dict(q=f(2, 60, 16), k=f(2, 60, 16), v=f(2, 60, 16), seq=seq)


def rotary():
    f = rng(7)
    pos = np.arange(40)[:, None]
    inv = 10000.0 ** (-np.arange(8) / 8.0)
    ang = np.concatenate([pos * inv, pos * inv], axis=1)
    d = qkv(f, 1, 2, 40, 40, 16)
    d.update(cos_t=np.cos(ang).astype(np.float32), sin_t=np.sin(ang).astype(np.float32))
    return d


def ms_deform():
    f = rng(8)
    r = np.random.default_rng(9)
    B, Q, C, M, P = 2, 4, 6, 2, 2
    D = C // M
    shapes = ints([[4, 5], [2, 3], [1, 1]])
    L = len(shapes)
    start = ints([0, 20, 26])
    S = 27
    return dict(query=f(B, Q, C), ref=r.uniform(0, 1, (B, Q, L, 2)).astype(np.float32), input=f(B, S, C),
                shapes=shapes, start=start, w_v=f(M, D, C, sc=0.4), b_v=f(M, D, sc=0.1),
                w_off=f(M, L, P, 2, C, sc=0.5), b_off=f(M, L, P, 2, sc=0.5), w_aw=f(M, L, P, C, sc=0.4),
                b_aw=f(M, L, P, sc=0.1), w_o=f(C, M, D, sc=0.4), b_o=f(C, sc=0.1))


def deform():
    f = rng(10)
    r = np.random.default_rng(11)
    B, Y, X, C, Q, M, K = 2, 5, 6, 6, 4, 2, 3
    D = C // M
    return dict(x=f(B, Y, X, C), z=f(B, Q, C), p=r.uniform(-1, 6, (B, Q, 2)).astype(np.float32),
                w_off=f(M, K, 2, C, sc=0.7), b_off=f(M, K, 2, sc=0.5), w_a=f(M, K, C, sc=0.5),
                b_a=f(M, K, sc=0.1), w_v=f(M, D, C, sc=0.4), w_o=f(C, M, D, sc=0.4), b_o=f(C, sc=0.1))


def dat():
    # DAT's s1k3 configuration of tests/lit/run/dat_attn.test.py (B1, 5x4 map, C6, two heads).
    f = rng(12)
    B, Y, X, C, kk, nh = 1, 5, 4, 6, 3, 2
    ws = C ** -0.5
    return dict(x=f(B, Y, X, C), w_q=f(C, C, sc=ws), b_q=f(C, sc=0.1), w_dw=f(C, kk, kk, sc=0.5),
                b_dw=f(C, sc=0.1), ln_g=(1 + f(C, sc=0.1)), ln_b=f(C, sc=0.1), w_off=f(2, C),
                w_k=f(C, C, sc=ws), b_k=f(C, sc=0.1), w_v=f(C, C, sc=ws), b_v=f(C, sc=0.1),
                rpe=f(nh, 2 * Y - 1, 2 * X - 1), w_o=f(C, C, sc=ws), b_o=f(C, sc=0.1))


def msda(bias):
    # Three groups of one 4-channel head (-D hd=4): C = 12.
    f = rng(13)
    d = dict(x=f(1, 6, 7, 12), w_qkv=f(3, 3, 4, 12, sc=0.3))
    if bias:
        d["b_qkv"] = f(3, 3, 4, sc=0.1)
    d.update(w_o=f(12, 12, sc=0.3), b_o=f(12, sc=0.1))
    return d


def dilate_block():
    f = rng(14)
    C, F = 12, 24
    return dict(x=f(1, C, 6, 7), w_pos=f(C, 3, 3, sc=0.3), b_pos=f(C, sc=0.1), ln1_g=1 + f(C, sc=0.1),
                ln1_b=f(C, sc=0.1), w_qkv=f(3, 3, 4, C, sc=0.3), b_qkv=f(3, 3, 4, sc=0.1),
                w_o=f(C, C, sc=0.3), b_o=f(C, sc=0.1), ln2_g=1 + f(C, sc=0.1), ln2_b=f(C, sc=0.1),
                w_fc1=f(F, C, sc=0.3), b_fc1=f(F, sc=0.1), w_fc2=f(C, F, sc=0.2), b_fc2=f(C, sc=0.1))


def encoder_block():
    f = rng(15)
    B, N, C, H, Dh, F = 1, 10, 16, 2, 8, 32
    return dict(x=f(B, N, C, sc=2.0), ln1_g=f(C, sc=0.5), ln1_b=f(C, sc=0.5), w_qkv=f(3, H, Dh, C, sc=0.25),
                b_qkv=f(3, H, Dh, sc=0.5), w_o=f(C, H, Dh, sc=0.25), b_o=f(C, sc=0.5), ln2_g=f(C, sc=0.5),
                ln2_b=f(C, sc=0.5), w_fc1=f(F, C, sc=0.25), b_fc1=f(F, sc=0.5), w_fc2=f(C, F, sc=0.18),
                b_fc2=f(C, sc=0.5))


def attn(seed, Nq, Nk, **extra):
    f = rng(seed)
    d = qkv(f, 1, 2, Nq, Nk, 16, sc=extra.pop("sc", 1.0))
    for name, shape in extra.items():
        d[name] = f(*shape)
    return d


# kernel: (file, -D constants, inputs). Shapes stay small: the interpreter runs every case.
CASES = {
    1: {
        "alibi": ("alibi", [], lambda: qkv(rng(20), 2, 3, 20, 37, 16)),
        "attn_mask_bool": ("attn_mask", [], lambda: dict(attn(21, 20, 33), mask=mask_bool())),
        "attn_mask_additive": ("attn_mask", [], lambda: dict(attn(22, 20, 33), bias=bias_additive())),
        "cross_attention": ("cross_attention", [], lambda: (lambda f: dict(
            x_q=f(2, 9, 24), x_k=f(2, 13, 24), x_v=f(2, 13, 24), w_q=f(3, 8, 24, sc=0.2), w_k=f(3, 8, 24, sc=0.2),
            w_v=f(3, 8, 24, sc=0.2), w_o=f(24, 3, 8, sc=0.2), b_o=f(24, sc=0.5)))(rng(23))),
        "gqa": ("gqa", [], lambda: (lambda f: dict(q=f(1, 4, 20, 16), k=f(1, 2, 30, 16), v=f(1, 2, 30, 16)))(rng(24))),
        "relative_bias": ("relative_bias", [], lambda: attn(25, 9, 13, table=(2, 21))),
        "mhsa_nobias": ("mhsa", [], lambda: (lambda f: dict(
            x=f(2, 17, 24), w_qkv=f(3, 3, 8, 24, sc=0.3), w_o=f(24, 3, 8, sc=0.3), b_o=f(24, sc=0.1)))(rng(26))),
        "t2t_attention": ("t2t_attention", [], lambda: (lambda f: dict(
            x=f(2, 9, 20), w_qkv=f(3, 2, 8, 20, sc=0.3), w_o=f(16, 2, 8, sc=0.3), b_o=f(16, sc=0.1)))(rng(27))),
    },
    2: {
        "positional_encoding": ("positional_encoding", [], lambda: dict(x=rng(30)(2, 10, 16))),
        "encoder_block": ("encoder_block", [], encoder_block),
        "sink_attention": ("sink_attention", [], lambda: attn(31, 40, 40, sinks=(2,))),
        "sigmoid_attention": ("sigmoid_attention", [], lambda: attn(32, 20, 37)),
        "linear_attention": ("linear_attention", [], lambda: qkv(rng(33), 1, 2, 40, 40, 16, E=24)),
        "diff_attention": ("diff_attention", [], lambda: (lambda f: dict(
            q1=f(1, 2, 40, 16), k1=f(1, 2, 40, 16), q2=f(1, 2, 40, 16), k2=f(1, 2, 40, 16), v=f(1, 2, 40, 24),
            lam=np.array([0.3], np.float32), g=1 + f(24, sc=0.1)))(rng(34))),
        "rotary_attention": ("rotary_attention", [], rotary),
    },
    3: {
        "sliding_window": ("sliding_window", ["window=20"], lambda: attn(40, 90, 90, sc=3.0)),
        "softcap_attention": ("softcap_attention", ["cap=5.0"], lambda: attn(41, 40, 40, sc=3.0)),
        "softcap_sliding_window": ("softcap_attention", ["cap=5.0", "window=20"], lambda: attn(42, 90, 90, sc=3.0)),
        "varlen_attention": ("varlen_attention", [], varlen),
        "varlen_causal": ("varlen_attention", [], varlen),
        "paged_decode": ("paged_decode", [], paged),
        "swin_attention": ("swin_attention", ["shift=3"], lambda: (lambda f: dict(
            q=f(1, 2, 7, 14, 8), k=f(1, 2, 7, 14, 8), v=f(1, 2, 7, 14, 8), table=f(169, 2)))(rng(43))),
        "neighborhood_attention": ("neighborhood_attention", ["ks=3"], lambda: (lambda f: dict(
            q=f(1, 2, 5, 6, 8), k=f(1, 2, 5, 6, 8), v=f(1, 2, 5, 6, 8), rpb=f(2, 5, 5)))(rng(44))),
        "dilate_block": ("dilate_block", ["hd=4"], dilate_block),
    },
    4: {
        "swda": ("swda", ["hd=4", "r=2"], lambda: (lambda f: dict(q=f(1, 8, 5, 6), k=f(1, 8, 5, 6), v=f(1, 8, 5, 6)))(rng(50))),
        "swda_natten": ("swda", ["hd=4", "w=5"], lambda: (lambda f: dict(q=f(1, 8, 5, 6), k=f(1, 8, 5, 6), v=f(1, 8, 5, 6)))(rng(51))),
        "msda": ("msda", ["hd=4"], lambda: msda(True)),
        "msda_nobias": ("msda", ["hd=4"], lambda: msda(False)),
        "deform_attn": ("deform_attn", [], deform),
        "ms_deform_attn": ("ms_deform_attn", [], ms_deform),
        "dat_attn": ("dat_attn", ["r=1", "ks=3", "orf=0.5", "nh=2", "ng=1"], dat),
    },
    # Past a whole tile of 256 keys: on a CPU with AMX, cpu-online's tile products (tileScore,
    # tileValues) compute these tiles; head dimensions that pad to 32 and value widths to 16.
    5: {
        "alibi": ("alibi", [], lambda: qkv(rng(60), 1, 2, 20, 300, 40)),
        "gqa": ("gqa", [], lambda: (lambda f: dict(q=f(1, 4, 20, 24), k=f(1, 2, 530, 24), v=f(1, 2, 530, 24)))(rng(61))),
        "softcap_attention": ("softcap_attention", ["cap=5.0"], lambda: qkv(rng(62), 1, 2, 300, 300, 32, sc=3.0)),
        "sigmoid_attention": ("sigmoid_attention", [], lambda: qkv(rng(64), 1, 2, 20, 260, 16)),
    },
}


def to_bf16_bits(x):
    # Round to nearest even, as ml_dtypes and PyTorch do; NaNs stay NaN (none here) and
    # infinities stay infinite.
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def rounded(a, kind):
    # The values of f32 array `a` rounded to `kind`, as f32, and as the file attn-run reads for T.
    if kind == "bf16":
        bits = to_bf16_bits(a)
        return (bits.astype(np.uint32) << 16).view(np.float32), bits.view("V2")
    h = a.astype(np.float16)
    return h.astype(np.float32), h


def load_out(path, kind):
    a = np.load(path)
    if kind == "bf16":
        assert a.dtype == np.dtype("V2"), a.dtype
        return (a.view(np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if kind == "f16":
        assert a.dtype == np.float16, a.dtype
    return a.astype(np.float64)


def ulp(x, kind):
    digits, emin = (8, -126) if kind == "bf16" else (11, -14)
    e = np.maximum(np.floor(np.log2(np.maximum(np.abs(x), 1e-300))), emin)
    return np.exp2(e - (digits - 1))


def attn_run(args):
    p = subprocess.run(["attn-run"] + args, capture_output=True, text=True)
    if p.returncode != 0:
        print("FAIL: attn-run " + " ".join(args) + "\n" + p.stdout + p.stderr)
        return False
    return True


def main():
    variants, out, group = sys.argv[1], sys.argv[2], int(sys.argv[3])
    os.makedirs(out, exist_ok=True)
    failed = 0
    for kernel, (file, defines, make) in CASES[group].items():
        src = os.path.join(variants, file + ".attn")
        ins = make()
        dflags = [a for d in defines for a in ("-D", d)]
        for kind in ("bf16", "f16"):
            exact_in, typed_in = [], []
            for name, a in ins.items():
                if a.dtype == np.int32:
                    path = f"{out}/{kernel}_{name}.npy"
                    np.save(path, a)
                    exact_in += ["--input", f"{name}={path}"]
                    typed_in += ["--input", f"{name}={path}"]
                    continue
                f, t = rounded(a, kind)
                np.save(f"{out}/{kernel}_{name}_{kind}_f32.npy", f)
                np.save(f"{out}/{kernel}_{name}_{kind}.npy", t)
                exact_in += ["--input", f"{name}={out}/{kernel}_{name}_{kind}_f32.npy"]
                typed_in += ["--input", f"{name}={out}/{kernel}_{name}_{kind}.npy"]
            # (Each kernel has one output; attn-run names it in its summary, the file is all we read.)
            exact_path, got_path = f"{out}/{kernel}_{kind}_exact.npy", f"{out}/{kernel}_{kind}.npy"
            outname = output_name(src, kernel)
            ok = attn_run([src, f"--kernel={kernel}", "--reference"] + dflags + exact_in +
                          [f"--output={outname}={exact_path}"])
            ok = ok and attn_run([src, f"--kernel={kernel}", "-D", f"f32={kind}"] + dflags + typed_in +
                                 [f"--output={outname}={got_path}"])
            if not ok:
                failed += 1
                continue
            exact = np.load(exact_path).astype(np.float64)
            got = load_out(got_path, kind)
            scale = np.max(np.abs(exact)) if exact.size else 0.0
            tol = 0.5 * ulp(exact, kind) + 2.0**-16 * scale
            err = np.abs(got - exact)
            bad = ~(err <= tol)
            worst = float(np.max(np.where(np.isnan(err), np.inf, err / tol))) if exact.size else 0.0
            if bad.any() or not np.isfinite(scale):
                failed += 1
                i = np.flatnonzero(bad.ravel())[:5]
                print(f"FAIL: {kernel} {kind}: {bad.sum()} of {exact.size} outside the tolerance; elements {i.tolist()}: "
                      f"got {got.ravel()[i].tolist()}, exact {exact.ravel()[i].tolist()}")
            else:
                print(f"{kernel} {kind}: {exact.size} elements, worst {worst:.3f} of the tolerance")
    print(f"group {group}: " + ("all within the tolerance" if failed == 0 else f"{failed} FAILED"))


def output_name(src, kernel):
    # The kernel's output name, from its signature `kernel NAME(...) -> OUT: ...`.
    text = open(src).read()
    at = text.index(f"kernel {kernel}(")
    arrow = text.index("->", at)
    return text[arrow + 2:].split(":")[0].strip()


if __name__ == "__main__":
    main()
