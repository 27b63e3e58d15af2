#!/usr/bin/env python3
"""ptx_report.py: assembles the CUDA code of every bundled kernel with ptxas and reports its resources.

For each kernel in dsl/variants/*.attn and each CUDA capability attnc supports, attnc writes the
PTX (--emit=ptx); ptxas assembles it for the matching GPU generations (PTX for capability 8.0 also
for sm_90, as the driver would JIT it there) and reports registers, shared memory, barriers and
spill bytes per GPU kernel (entry). Any attnc or ptxas error, or any spill, fails the run. There is
no GPU on the build machines, so this is how the CUDA code is checked; a device is not needed.
Exit status: 0 all assembled, 1 a failure, 77 no ptxas (ctest reports the test as skipped).
"""
import argparse
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile

# Capability attnc compiles for -> the sm_ architectures its PTX is assembled for.
ARCHS = {"80": ["sm_80", "sm_90"], "86": ["sm_86"]}

ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(sm_\d+)'")
USED = re.compile(r"Used (\d+) registers(?:, used (\d+) barriers)?(?:, (\d+) bytes smem)?")
SPILL = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")


def find_ptxas(given):
    for cand in [given, shutil.which("ptxas"), "/usr/local/cuda/bin/ptxas"]:
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


def kernels_of(path):
    with open(path, encoding="utf-8") as f:
        return re.findall(r"^\s*kernel\s+([A-Za-z_][A-Za-z0-9_]*)\s*\(", f.read(), re.M)


def parse_ptxas(text):
    """Rows (entry, arch, registers, barriers, smem, stack, spill stores, spill loads)."""
    rows, cur = [], None
    for line in text.splitlines():
        m = ENTRY.search(line)
        if m:
            cur = {"entry": m.group(1), "arch": m.group(2), "stack": 0, "spill_st": 0, "spill_ld": 0,
                   "regs": 0, "barriers": 0, "smem": 0}
            rows.append(cur)
            continue
        if cur is None:
            continue
        m = SPILL.search(line)
        if m:
            cur["stack"], cur["spill_st"], cur["spill_ld"] = (int(g) for g in m.groups())
        m = USED.search(line)
        if m:
            cur["regs"] = int(m.group(1))
            cur["barriers"] = int(m.group(2) or 0)
            cur["smem"] = int(m.group(3) or 0)
    return rows


def check(job, attnc, ptxas, tmp):
    path, kernel, cap, dtype = job
    ptx = os.path.join(tmp, f"{kernel}_{cap}_{dtype}.ptx")
    target = f"x86-64-linux-cuda-cuda_capability_{cap}"
    # -D f32=bf16 stores every f32 tensor as bf16 (f16); the kernel still computes in f32.
    storage = [] if dtype == "f32" else ["-D", f"f32={dtype}"]
    r = subprocess.run([attnc, path, f"--kernel={kernel}", f"--target={target}", "--emit=ptx", "-o", ptx]
                       + storage, capture_output=True, text=True)
    if r.returncode != 0:
        return job, None, f"attnc --emit=ptx failed:\n{r.stderr.strip()}"
    with open(ptx, encoding="utf-8") as f:
        text = f.read()
    # Halide keeps GPU scratch in dynamic shared memory, which ptxas cannot size; say whether the
    # kernel uses shared memory at all.
    dynamic_shared = "ld.shared" in text or "st.shared" in text
    rows = []
    for arch in ARCHS[cap]:
        a = subprocess.run([ptxas, f"-arch={arch}", "-v", ptx, "-o", os.devnull], capture_output=True, text=True)
        if a.returncode != 0:
            return job, None, f"ptxas -arch={arch} failed:\n{a.stderr.strip()}"
        parsed = parse_ptxas(a.stderr + a.stdout)
        if not parsed:
            return job, None, f"ptxas -arch={arch} reported no GPU kernel"
        for p in parsed:
            p["shared"] = dynamic_shared
        rows += parsed
    return job, rows, None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--attnc", required=True)
    ap.add_argument("--variants", required=True, help="directory of .attn files")
    ap.add_argument("--ptxas", default=None)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--filter", default="", help="only kernels whose name contains this")
    ap.add_argument("--dtypes", default="f32",
                    help="comma-separated storage types of the f32 tensors to check: f32, bf16, f16")
    args = ap.parse_args()

    ptxas = find_ptxas(args.ptxas)
    if not ptxas:
        print("SKIP: ptxas not found (install the CUDA toolkit, or pass --ptxas); the PTX was not checked")
        return 77
    jobs = []
    for name in sorted(os.listdir(args.variants)):
        if name.endswith(".attn"):
            path = os.path.join(args.variants, name)
            for k in kernels_of(path):
                if args.filter in k:
                    jobs += [(path, k, cap, t) for t in args.dtypes.split(",") for cap in ARCHS]
    failures, table = [], []
    with tempfile.TemporaryDirectory(prefix="attnc-ptx.") as tmp:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as ex:
            for job, rows, err in ex.map(lambda j: check(j, args.attnc, ptxas, tmp), jobs):
                if err:
                    failures.append(f"{job[1]} {job[3]} (capability {job[2]}): {err}")
                    continue
                for r in rows:
                    table.append((job[1], job[3], r))
                    if r["spill_st"] or r["spill_ld"]:
                        failures.append(f"{job[1]} {job[3]} {r['entry']} on {r['arch']}: spills "
                                        f"{r['spill_st']} bytes stored, {r['spill_ld']} loaded")

    print(f"ptxas: {ptxas}")
    print(f"{'kernel':<22} {'dtype':<5} {'arch':<6} {'regs':>4} {'bar':>3} {'smem':>5} {'shared':>6} "
          f"{'spill':>9}  entry")
    for kernel, dtype, r in table:
        print(f"{kernel:<22} {dtype:<5} {r['arch']:<6} {r['regs']:>4} {r['barriers']:>3} {r['smem']:>5} "
              f"{('dyn' if r['shared'] else '-'):>6} {r['spill_st']:>4}/{r['spill_ld']:<4}  {r['entry']}")
    kernels = sorted({k for k, _, _ in table})
    print(f"{len(kernels)} kernels in {args.dtypes}, {len(table)} GPU kernel x architecture rows, "
          f"max registers {max((r['regs'] for _, _, r in table), default=0)}")
    if failures:
        print(f"\n{len(failures)} FAILURE(S):")
        for f in failures:
            print("  " + f)
        return 1
    print("all assembled without errors or spills")
    return 0


if __name__ == "__main__":
    sys.exit(main())
