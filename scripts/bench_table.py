#!/usr/bin/env python3
# bench_table.py: turns attn-bench's JSON (--json=PATH) into the Markdown table of README's Performance section.
"""usage: bench_table.py RESULTS.json > table.md

One row per case: the kernel's median time under the default schedule, its rate (GFLOP/s, or GB/s
for memory-bound variants), its share of the FMA peak measured in the same run, and its speedup
over each baseline of that run (t(baseline) / t(attnc)). A header line gives the machine, the
peak and the load, since every number depends on them."""
import argparse
import json
import sys


def speedup(case, impl):
    base = case["impls"][0]
    if impl is None or impl["median_s"] is None or not base["median_s"]:
        return "-"
    v = impl["median_s"] / base["median_s"]
    return f"{v:.0f}x" if v >= 100 else f"{v:.1f}x" if v >= 10 else f"{v:.2f}x"


def first(case, kind):
    for impl in case["impls"]:
        if impl["kind"] == kind and impl["median_s"] is not None:
            return impl
    return None


def rows(data):
    torch = data.get("torch")
    head = ["variant", "shape", "dtype", "attnc ms", "rate", "% FMA peak", "vs naive C++", "vs unscheduled"]
    if torch:
        head.append(f"vs PyTorch {torch}")
    head += ["other baselines", "max abs diff"]
    out = [head]
    for c in data["cases"]:
        k = c["impls"][0]
        if not c["agree"] or k["median_s"] is None:
            out.append([c["variant"], c["shape"], c.get("dtype", "f32"), "disagrees: not timed"]
                       + [""] * (len(head) - 4))
            continue
        rate = f"{k['gbs']:.2f} GB/s" if c["bound"] == "memory" else f"{k['gflops']:.2f} GFLOP/s"
        other = [f"{i['name']} {speedup(c, i)}" for i in c["impls"] if i["kind"] in ("schedule", "cpp") and i["median_s"]]
        other += [f"{i['name']} = auto (same schedule)" for i in c["impls"] if i.get("same_as_auto")]
        if c.get("vs_unmasked"):
            other.append(f"time / {c['unmasked']}'s (no mask, in turns): {c['vs_unmasked']:.2f}")
        for t in c.get("tiles", []):
            if t["visited"] < t["total"]:
                other.append(f"key tiles visited: {100 * t['visited'] / t['total']:.1f}%")
        # PyTorch in bf16/f16 may be further from the f32 reference than the tolerance (its
        # intermediates are in that type): its difference is shown apart.
        reduced = c.get("dtype", "f32") != "f32"
        diffs = [i["max_abs_diff"] for i in c["impls"]
                 if i["max_abs_diff"] is not None and not (reduced and i["kind"] == "torch")]
        row = [c["variant"], c["shape"], c.get("dtype", "f32"), f"{k['median_s'] * 1e3:.3f}", rate,
               f"{k['pct_peak']:.1f}%" if k["pct_peak"] is not None else "-",
               speedup(c, first(c, "reference")), speedup(c, first(c, "unscheduled"))]
        if torch:
            row.append(speedup(c, first(c, "torch")))
        row += ["; ".join(other) or "-", f"{max(diffs):.1g}" if diffs else "-"]
        out.append(row)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", help="attn-bench --json output")
    args = ap.parse_args()
    with open(args.results) as f:
        data = json.load(f)
    m, p, o = data["machine"], data["fma_peak"], data["options"]
    print(f"{m['cpu']}, {m['cores']} hardware threads; fp32 FMA peak (attn-bench's microkernel, {p['isa']}): "
          f"{p['gflops']:.1f} GFLOP/s on {p['threads']} threads, {p['gflops_1thread']:.1f} on 1; "
          f"median of up to {o['reps']} runs{' (--quick)' if o['quick'] else ''}; "
          f"load average {m['load_start']:.2f} at the start, {m['load_end']:.2f} at the end.")
    print()
    table = rows(data)
    print("| " + " | ".join(table[0]) + " |")
    print("|" + "|".join("---" if i < 3 or i >= len(table[0]) - 2 else "--:" for i in range(len(table[0]))) + "|")
    for r in table[1:]:
        print("| " + " | ".join(r) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
