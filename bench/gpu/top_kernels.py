"""Top kernels of one run by GPU time per measured step, from the worker's own trace.

Usage: top_kernels.py RUN.jsonl [N]   (RUN.jsonl from `medprof-worker --decode RUN.pb`; N default 25)

One row per (kernel, op, phase) aggregate: ms per step, launches per step, category, LibTorch op,
phase, grid, and the first 90 characters of the kernel name. Used to find what to fuse next.
"""
import json
import sys


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 25
    rows, steps = [], 1
    with open(sys.argv[1]) as f:
        for line in f:
            agg = json.loads(line).get("kernels")
            if not agg:
                continue
            steps = max(steps, int(agg.get("steps", 0)))
            rows.extend(agg.get("kernels", []))
    if not rows:
        raise SystemExit(f"top_kernels: no kernel aggregates in {sys.argv[1]} (was the trace layer on?)")
    total = sum(int(k.get("total_ns", 0)) for k in rows)
    print(f"{sys.argv[1]}: {total / steps / 1e6:.1f} GPU ms per step over {steps} steps, {len(rows)} aggregates")
    print(f"{'ms/step':>8} {'share':>6} {'n/step':>6}  {'category':<11} {'op':<28} {'phase':<6} {'grid':<14} name")
    for k in sorted(rows, key=lambda k: -int(k.get("total_ns", 0)))[:n]:
        t = int(k.get("total_ns", 0))
        grid = k.get("grid", "")
        if isinstance(grid, dict):
            grid = "x".join(str(grid.get(a, 1)) for a in ("x", "y", "z"))
        elif isinstance(grid, list):
            grid = "x".join(map(str, grid))
        print(f"{t / steps / 1e6:8.2f} {100.0 * t / total:5.1f}% {int(k.get('count', 0)) / steps:6.1f}  "
              f"{k.get('category', ''):<11} {str(k.get('op', ''))[:28]:<28} {str(k.get('phase', ''))[:6]:<6} "
              f"{str(grid)[:14]:<14} {str(k.get('name', ''))[:90]}")


if __name__ == "__main__":
    main()
