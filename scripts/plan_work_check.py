#!/usr/bin/env python3
"""plan_work_check.py: no kernel attnc compiles gets a plan that recomputes work.

For every kernel of every .attn file under the given directories (the bundled variants, the
examples and the lit tests' kernels), `attnc --emit=cost` counts the arithmetic of the plan the
`auto` schedule picks next to the algorithm's own (each definition computed once per point), at
attnc's representative sizes (every size 64). The ratio must stay within MAX_RATIO, the factor
past which `auto` declines a rule's plan (kMaxPlanWorkRatio, schedules/include/attnc/Cost.h), and
attnc must give no warning (but those a file names in a `# plan_work_check: warns "TEXT"` line:
a test of the warning itself). The counts come from Halide's loop nests, not from timing, so the
check is deterministic. Files that attnc rejects (the lit tests' diagnostics) are skipped; a
crash is a failure. Exit status: 0 when every kernel holds, 1 otherwise.
"""
import argparse
import concurrent.futures
import os
import re
import subprocess
import sys

MAX_RATIO = 4.0
KERNEL = re.compile(r"^\s*kernel\s+([A-Za-z_][A-Za-z0-9_]*)\s*\(", re.M)
RATIO = re.compile(r"^ratio (\S+)$", re.M)
EXPECTED = re.compile(r'^#\s*plan_work_check: warns "(.*)"$', re.M)
SCHEDULE = re.compile(r"^schedule (.*)$", re.M)


def kernels(root):
    for d, _, files in os.walk(root):
        for f in sorted(files):
            if f.endswith(".attn"):
                path = os.path.join(d, f)
                with open(path, encoding="utf-8", errors="replace") as fh:
                    for k in KERNEL.findall(fh.read()):
                        yield path, k


def check(attnc, path, kernel, std):
    cmd = [attnc, path, "--kernel=" + kernel, "--emit=cost", "-I", std]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode < 0 or p.returncode > 1:
        return "FAIL", f"{path} {kernel}: attnc exited with {p.returncode}\n{p.stderr}"
    if p.returncode == 1:
        return "SKIP", f"{path} {kernel}: rejected ({p.stderr.strip().splitlines()[-1:]})"
    m = RATIO.search(p.stdout)
    s = SCHEDULE.search(p.stdout)
    if not m:
        return "FAIL", f"{path} {kernel}: no ratio in\n{p.stdout}"
    ratio = float(m.group(1))
    line = f"{ratio:10.3f}  {path} {kernel}: {s.group(1) if s else '?'}"
    with open(path, encoding="utf-8", errors="replace") as fh:
        expected = EXPECTED.findall(fh.read())
    warnings = [w for w in p.stderr.splitlines()
                if "warning" in w and not any(e in w for e in expected)]
    if ratio > MAX_RATIO or warnings:
        return "FAIL", line + "\n" + p.stdout + p.stderr
    return "OK", line


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--attnc", required=True)
    ap.add_argument("--std", required=True, help="dsl/std, for imports")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("dirs", nargs="+")
    a = ap.parse_args()
    todo = [pk for d in a.dirs for pk in kernels(d)]
    counts = {"OK": 0, "SKIP": 0, "FAIL": 0}
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as ex:
        for status, text in ex.map(lambda pk: check(a.attnc, pk[0], pk[1], a.std), todo):
            counts[status] += 1
            if status != "SKIP":
                print(("FAIL " if status == "FAIL" else "") + text, flush=True)
    print(f"{counts['OK']} kernels within {MAX_RATIO}x of their algorithm's work, "
          f"{counts['SKIP']} rejected by attnc (diagnostics tests), {counts['FAIL']} failed")
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
