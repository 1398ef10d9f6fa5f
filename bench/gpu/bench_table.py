"""Prints the workload benchmark table from the worker logs and the peer's output.

Usage: bench_table.py OUT_DIR PRESET... (files written by workload_bench.sh). The worker's last
log line `done: N measured steps, median X ms, peak memory Y MiB` gives its figures; the peer
prints `NAME first_call_s .. train_ms X fwd_ms Y kernels/step K peak_GiB P` (peak over its
train and forward steps for that configuration).
"""
import re
import sys

DONE = re.compile(r"done: (\d+) measured steps, median ([0-9.]+) ms, peak memory ([0-9.]+) MiB")
PEER = re.compile(r"^(\S+)\s+first_call_s\s+[0-9.]+\s+train_ms\s+([0-9.]+)\s+fwd_ms\s+([0-9.]+)\s+"
                  r"kernels/step\s+(\d+)\s+peak_GiB\s+([0-9.]+)")


def worker(out, preset, phase):
    with open(f"{out}/{preset}-{phase}.log") as f:
        m = [DONE.search(line) for line in f]
    m = [x for x in m if x]
    if not m:
        raise SystemExit(f"bench_table: no 'done:' line in {out}/{preset}-{phase}.log")
    return float(m[-1].group(2)), float(m[-1].group(3)) / 1024.0


def main():
    out, presets = sys.argv[1], sys.argv[2:]
    peer = {}
    with open(f"{out}/peer.txt") as f:
        for line in f:
            m = PEER.match(line.strip())
            if m:
                peer[m.group(1)] = dict(train=float(m.group(2)), forward=float(m.group(3)), peak=float(m.group(5)))
    print("| preset | phase | medprof ms | eager ms | medprof/eager | medprof peak GiB | eager peak GiB |")
    print("|---|---|---|---|---|---|---|")
    worst = 0.0
    for p in presets:
        for phase in ("train", "forward"):
            ms, gib = worker(out, p, phase)
            e = peer.get(p)
            if e is None:
                print(f"| {p} | {phase} | {ms:.1f} | - | - | {gib:.1f} | - |")
                continue
            ratio = ms / e[phase]
            worst = max(worst, ratio)
            # The peer reports one peak per configuration (its train step dominates).
            peak = f"{e['peak']:.1f}" if phase == "train" else "(in train)"
            print(f"| {p} | {phase} | {ms:.1f} | {e[phase]:.1f} | {ratio:.3f} | {gib:.1f} | {peak} |")
    print(f"\nworst medprof/eager ratio: {worst:.3f}")


if __name__ == "__main__":
    main()
