#!/usr/bin/env python3
"""Writes the fuzzers' seed corpora: .attn texts for fuzz_frontend and .npy files for fuzz_npy.

usage: make_corpus.py --src REPO_ROOT --out DIR   (writes DIR/frontend/ and DIR/npy/, replacing both)

Front end: the bundled variants and standard library, every .attn file under tests/lit, and the
.attn parts of the lit .test files (split-file `#--- name.attn` sections), and kernels at the
parser's nesting and tree-height limits. A file whose RUN lines pass -D, --sizes, --sample-order,
--online-tile or --online-softmax=off also gets a copy per RUN line headed by the harness's option
lines for them (see fuzz_frontend.cpp), and variants headed by the harness's binary prefix that
sets extreme -D values and reserved kernel names.
npy: valid files (versions 1.0-3.0, f32/i32, scalars, empty arrays, the widest rank) and files
breaking each rule the reader enforces; written byte by byte, so numpy is not needed.
"""
import argparse
import hashlib
import os
import re
import shutil
import struct


def write(out_dir, name, data):
    if isinstance(data, str):
        data = data.encode()
    # Distinct names even when two sources share a basename; the hash keeps them stable.
    digest = hashlib.sha1(data).hexdigest()[:8]
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", name)
    with open(os.path.join(out_dir, f"{name}-{digest}"), "wb") as f:
        f.write(data)


def run_headers(text):
    """The harness's option lines (`#D`, `#S`, `#O`, `#T`, `#F`) for each RUN line that passes -D,
    --sizes, --sample-order, --online-tile or --online-softmax=off, without duplicates."""
    headers = []
    for line in text.splitlines():
        if "RUN:" not in line:
            continue
        # Numeric -D values only: FileCheck's -DFILE=... share the spelling.
        defs = re.findall(r"-D\s*([A-Za-z_][A-Za-z_0-9]*=-?[0-9][0-9.eE+-]*)(?=[\s'\"]|$)", line)
        h = "#D " + " ".join(dict.fromkeys(defs)) + "\n" if defs else ""
        for flag, tag in (("sizes", "S"), ("sample-order", "O"), ("online-tile", "T")):
            m = re.search(r"--" + flag + r"=([A-Za-z0-9_=,-]+)", line)
            if m:
                h += f"#{tag} {m.group(1)}\n"
        if "--online-softmax=off" in line:
            h += "#F off\n"
        if h and h not in headers:
            headers.append(h)
    return headers


def split_file(text):
    """The sections of a split-file input: [(name, text)], each with its leading lines blanked
    (as `split-file --leading-lines` does) so that line numbers match the original."""
    parts, name, start, lines = [], None, 0, text.splitlines(keepends=True)
    for i, line in enumerate(lines + ["#--- \n"]):
        m = re.match(r"^(#|//)--- (\S*)", line)
        if m:
            if name is not None:
                parts.append((name, "\n" * start + "".join(lines[start:i])))
            name, start = m.group(2), i + 1
    return parts


def frontend(src, out):
    seeds = []
    for sub in ("dsl/variants", "dsl/std"):
        d = os.path.join(src, sub)
        for f in sorted(os.listdir(d)):
            if f.endswith(".attn"):
                seeds.append((sub.replace("/", "_") + "_" + f, open(os.path.join(d, f), encoding="utf-8", errors="replace").read()))
    lit = os.path.join(src, "tests", "lit")
    for root, _, files in sorted(os.walk(lit)):
        rel = os.path.relpath(root, lit).replace(os.sep, "_")
        for f in sorted(files):
            path = os.path.join(root, f)
            with open(path, "rb") as fh:
                raw = fh.read()
            text = raw.decode("utf-8", errors="replace")
            if f.endswith(".attn"):
                seeds.append((f"lit_{rel}_{f}", raw))
                for h in run_headers(text):
                    seeds.append((f"lit_{rel}_{f}_options", h.encode() + raw))
            elif f.endswith(".test"):
                headers = run_headers(text)
                for name, part in split_file(text):
                    if name.endswith(".attn"):
                        seeds.append((f"lit_{rel}_{f}_{name}", part))
                        for h in headers:
                            seeds.append((f"lit_{rel}_{f}_{name}_options", h + part))
    # The harness's binary prefix (0x01, then a -D value, a constant and a kernel name, by index
    # into its tables): extreme constants of the window, dilation and level kernels, and reserved
    # kernel names, which mutations of the text rarely spell.
    values = {"2^29": 13, "2^30": 15, "2^31-1": 17, "46341": 11, "-2^31": 19, "0": 0}
    for f, consts in (("swda.attn", 3), ("msda.attn", 3), ("dat_attn.attn", 4)):
        text = open(os.path.join(src, "dsl", "variants", f), "rb").read()
        for label, v in values.items():
            for c in range(consts):
                if label in ("2^29", "2^31-1") or c == 1:
                    seeds.append((f"select_{f}_{label}_const{c}", bytes([1, v, c, 0xFF]) + text))
    text = open(os.path.join(src, "dsl", "variants", "sdpa.attn"), "rb").read()
    for n in (0, 3, 5, 6, 9, 10, 15):
        seeds.append((f"select_sdpa_name{n}", bytes([1, 0, 0xFF, n]) + text))
    # At the parser's limits (nesting depth 256, tree height 2000), which mutations rarely reach.
    kernel = "kernel k(q: f32[N]) -> o: f32[N] {{\n  o(i) = {}\n}}\n"
    seeds.append(("limit_nesting", kernel.format("(" * 120 + "q(i)" + ")" * 120)))
    seeds.append(("limit_chain", kernel.format("q(i) * (1.0" + " + 1.0" * 1990 + ")")))
    seeds.append(("limit_unary", kernel.format("-" * 250 + "q(i)")))
    for name, data in seeds:
        write(out, name, data)
    return len(seeds)


def npy_file(dict_text, data=b"", major=1, minor=0, pad=True, header_len=None):
    header = dict_text.encode("latin1")
    pre = 10 if major == 1 else 12
    if pad:
        header += b" " * ((64 - (pre + len(header) + 1) % 64) % 64) + b"\n"
    n = len(header) if header_len is None else header_len
    length = struct.pack("<H", n) if major == 1 else struct.pack("<I", n)
    return b"\x93NUMPY" + bytes([major, minor]) + length + header + data


def npy_dict(descr="<f4", fortran="False", shape="(2,)"):
    return f"{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {shape}, }}"


def npy(out):
    f32 = lambda *v: struct.pack(f"<{len(v)}f", *v)
    i32 = lambda *v: struct.pack(f"<{len(v)}i", *v)
    seeds = {
        # Accepted.
        "f32_1d": npy_file(npy_dict(), f32(1, 2)),
        "i32_2d": npy_file(npy_dict("<i4", shape="(2, 3)"), i32(*range(6))),
        "f32_scalar": npy_file(npy_dict(shape="()"), f32(7)),
        "f32_empty": npy_file(npy_dict(shape="(0, 4)")),
        "empty_huge_dims": npy_file(npy_dict(shape="(0, 4294967296, 4294967296)")),
        "f32_rank8": npy_file(npy_dict(shape="(1, 1, 1, 1, 1, 1, 1, 2)"), f32(1, 2)),
        "f32_v2": npy_file(npy_dict(shape="(2, 2)"), f32(1, 2, 3, 4), major=2),
        "i32_v3": npy_file(npy_dict("<i4", shape="(1,)"), i32(5), major=3),
        "native_order": npy_file(npy_dict("=f4"), f32(1, 2)),
        "py2_long_dquote": npy_file('{"shape": (2L,), "fortran_order": False, "descr": "<i4"}', i32(1, 2)),
        "unpadded": npy_file(npy_dict(), f32(1, 2), pad=False),
        # Rejected, one rule each.
        "empty": b"",
        "bad_magic": b"PK\x03\x04" + npy_file(npy_dict(), f32(1, 2))[4:],
        "magic_only": b"\x93NUMPY",
        "no_header_len": b"\x93NUMPY\x01\x00",
        "version_4": npy_file(npy_dict(), f32(1, 2), major=4),
        "version_1_1": npy_file(npy_dict(), f32(1, 2), minor=1),
        "header_len_beyond_file": npy_file(npy_dict(), f32(1, 2), header_len=0xFFFF),
        "header_len_too_short": npy_file(npy_dict(), f32(1, 2), header_len=20),
        "header_len_into_data": npy_file(npy_dict(), f32(1, 2), pad=False, header_len=len(npy_dict()) + 4),
        "big_endian": npy_file(npy_dict(">f4"), f32(1, 2)),
        "fortran": npy_file(npy_dict(fortran="True", shape="(2, 1)"), f32(1, 2)),
        "f8": npy_file(npy_dict("<f8"), b"\0" * 16),
        "u1": npy_file(npy_dict("|u1"), b"\0\0"),
        "bar_f4": npy_file(npy_dict("|f4"), f32(1, 2)),
        "structured": npy_file("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", f32(1, 2)),
        "truncated_data": npy_file(npy_dict(shape="(3,)"), f32(1, 2)),
        "trailing_bytes": npy_file(npy_dict(), f32(1, 2, 3)),
        "negative_dim": npy_file(npy_dict(shape="(2, -1)"), f32(1, 2)),
        "int_min_dim": npy_file(npy_dict(shape="(-9223372036854775808,)"), f32(1, 2)),
        "overflow_dim": npy_file(npy_dict(shape="(99999999999999999999,)"), f32(1, 2)),
        "huge_shape": npy_file(npy_dict(shape="(4294967296, 4294967296)"), f32(1, 2)),
        "rank9": npy_file(npy_dict(shape="(1, 1, 1, 1, 1, 1, 1, 1, 2)"), f32(1, 2)),
        "shape_list": npy_file(npy_dict(shape="[2]"), f32(1, 2)),
        "shape_nested": npy_file(npy_dict(shape="((2,),)"), f32(1, 2)),
        "duplicate_key": npy_file("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", f32(1, 2)),
        "unknown_key": npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': None}", f32(1, 2)),
        "missing_shape": npy_file("{'descr': '<f4', 'fortran_order': False}", f32(1, 2)),
        "unterminated_string": npy_file("{'descr': '<f4, 'fortran_order': False, 'shape': (2,)}", f32(1, 2)),
        "deep_nesting": npy_file(npy_dict(shape="(" * 40), f32(1, 2)),
        "junk_after_dict": npy_file(npy_dict() + " junk", f32(1, 2)),
    }
    for name, data in seeds.items():
        write(out, name, data)
    return len(seeds)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    counts = {}
    for name, fn in (("frontend", frontend), ("npy", npy)):
        d = os.path.join(args.out, name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        counts[name] = fn(args.src, d) if name == "frontend" else fn(d)
    print("make_corpus: " + ", ".join(f"{n} {c} seeds" for n, c in counts.items()))


if __name__ == "__main__":
    main()
