"""Kernel mix per run from the worker's own trace: GPU time by medprof category.

Usage: kernel_mix.py RUN.jsonl [RUN.jsonl ...]   (each from `medprof-worker --decode RUN.pb`)

Prints one markdown table: a column per run (named by the file's stem), a row per category,
each cell the category's share of the run's kernel time over the measured steps, plus the
total GPU ms per measured step and the kernel launches per step. The layout and elementwise
rows are the ones the fused GroupNorm should collapse (issue: opt3).
"""
import json
import os
import sys

ORDER = ["conv", "gemm", "norm", "elementwise", "layout", "copy", "reduction", "softmax", "optimizer",
         "upsample", "memset", "other"]


def load(path):
    cats, steps = {}, 0
    launches = 0
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            agg = rec.get("kernels")
            if not agg:
                continue
            steps = max(steps, int(agg.get("steps", 0)))
            for k in agg.get("kernels", []):
                c = k.get("category") or "other"
                cats[c] = cats.get(c, 0) + int(k.get("total_ns", 0))
                launches += int(k.get("count", 0))
    if not cats:
        raise SystemExit(f"kernel_mix: no kernel aggregates in {path} (was the trace layer on?)")
    return cats, max(steps, 1), launches


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    runs = [(os.path.splitext(os.path.basename(p))[0], *load(p)) for p in sys.argv[1:]]
    print("| category | " + " | ".join(name for name, *_ in runs) + " |")
    print("|---|" + "---|" * len(runs))
    for c in ORDER + sorted({c for _, cats, *_ in runs for c in cats} - set(ORDER)):
        if not any(c in cats for _, cats, *_ in runs):
            continue
        cells = []
        for _, cats, *_ in runs:
            total = sum(cats.values())
            cells.append(f"{100.0 * cats.get(c, 0) / total:.1f} %")
        print(f"| {c} | " + " | ".join(cells) + " |")
    print("| GPU ms / step | " + " | ".join(f"{sum(cats.values()) / steps / 1e6:.1f}" for _, cats, steps, _ in runs) + " |")
    print("| launches / step | " + " | ".join(f"{n / steps:.0f}" for _, _, steps, n in runs) + " |")


if __name__ == "__main__":
    main()
