"""Built-in Med-DDPM against the same network run as a TorchScript user model, per preset.

Usage: user_model_compare.py DIR PRESET [PRESET ...]
  reads DIR/builtin-PRESET.jsonl and DIR/user-PRESET.jsonl (`medprof-worker --decode RUN.pb`)

Prints a markdown table per preset: median measured step time (CUDA-event time) of each and their
ratio, and the kernel mix (kernel_mix.py's categories, share of kernel time) side by side with the
difference in points; then one verdict line per preset against issue 21's acceptance: step time
within 10 % and every category within 5 points. Exit status 1 when a preset misses either.
"""
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kernel_mix import ORDER, load  # noqa: E402


def step_ms(path):
    times = []
    with open(path) as f:
        for line in f:
            s = json.loads(line).get("step")
            if s:
                times.append(int(s.get("device_ns") or s.get("wall_ns", 0)) / 1e6)
    if not times:
        raise SystemExit(f"user_model_compare: no measured steps in {path}")
    return statistics.median(times)


def compare(d, preset):
    b, u = os.path.join(d, f"builtin-{preset}.jsonl"), os.path.join(d, f"user-{preset}.jsonl")
    tb, tu = step_ms(b), step_ms(u)
    cb, _, lb = load(b)
    cu, _, lu = load(u)
    sb, su = sum(cb.values()), sum(cu.values())
    print(f"\n### {preset}\n")
    print(f"| | built-in | user model | |\n|---|---|---|---|")
    print(f"| median step ms | {tb:.1f} | {tu:.1f} | ratio {tu / tb:.3f} |")
    worst = 0.0
    for c in ORDER + sorted((set(cb) | set(cu)) - set(ORDER)):
        if c not in cb and c not in cu:
            continue
        pb, pu = 100.0 * cb.get(c, 0) / sb, 100.0 * cu.get(c, 0) / su
        worst = max(worst, abs(pu - pb))
        print(f"| {c} % | {pb:.1f} | {pu:.1f} | {pu - pb:+.1f} pt |")
    ok = abs(tu / tb - 1.0) <= 0.10 and worst <= 5.0
    return ok, f"{preset}: step time ratio {tu / tb:.3f} (within 10 %: {abs(tu / tb - 1) <= 0.10}), " \
               f"largest category difference {worst:.1f} pt (within 5: {worst <= 5.0}) -> {'PASS' if ok else 'FAIL'}"


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    verdicts = [compare(sys.argv[1], p) for p in sys.argv[2:]]
    print()
    for _, line in verdicts:
        print(line)
    sys.exit(0 if all(ok for ok, _ in verdicts) else 1)


if __name__ == "__main__":
    main()
