"""Prints the workload benchmark table from the worker logs and the peer's output.

Usage: bench_table.py OUT_DIR PRESET... (files written by workload_bench.sh). The worker's last
log line `done: N measured steps, median X ms, peak memory Y MiB` gives its figures; the peer
prints `NAME first_call_s .. train_ms X fwd_ms Y kernels/step K peak_GiB P` (peak over its
train and forward steps for that configuration; NAME+compile under torch.compile).

Rows the peer has no configuration for (opt3, PRESET+fused) are compared in a second table with
the peer's best: eager opt1 and bf16, and bf16 under torch.compile when it ran, against the
issue's targets (train micro-step <= 100 ms, forward <= 30 ms) and the floor of one micro-step
(16.6 TFLOP: 21 ms at the measured bf16 matrix rate of 790 TFLOP/s, 34 ms at TF32's 495).
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
    beyond = [p for p in presets if p not in peer]
    if not beyond:
        return
    targets = {"train": 100.0, "forward": 30.0}
    floor_ms = {"train": (21.0, 34.0), "forward": (21.0 / 3, 34.0 / 3)}  # forward = 1/3 of the FLOPs
    refs = [r for r in ("opt1", "bf16", "bf16+compile") if r in peer]
    print("\n| medprof | phase | ms | " + " | ".join(f"speedup vs {r} ({r} ms)" for r in refs) +
          " | target | x bf16 floor | x TF32 floor |")
    print("|---|---|---|" + "---|" * len(refs) + "---|---|---|")
    for p in beyond:
        for phase in ("train", "forward"):
            ms, _ = worker(out, p, phase)
            cells = [f"{peer[r][phase] / ms:.2f}x ({peer[r][phase]:.1f})" for r in refs]
            verdict = "met" if ms <= targets[phase] else "MISSED"
            bf, tf = floor_ms[phase]
            print(f"| {p} | {phase} | {ms:.1f} | " + " | ".join(cells) +
                  f" | <= {targets[phase]:.0f} ms {verdict} | {ms / bf:.1f} | {ms / tf:.1f} |")


if __name__ == "__main__":
    main()
