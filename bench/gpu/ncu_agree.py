#!/usr/bin/env python3
"""Two-level agreement of medprof's metrics layer with Nsight Compute, or of two medprof runs
(issue: per-kernel metrics on every configuration; docs/metrics.md has the formulas).

  ncu_agree.py ncu RUN.jsonl NCU.csv[,NCU2.csv] [--top N]
      RUN.jsonl: `medprof-worker --decode run.pb` of a run with --metrics. NCU.csv: `ncu --csv
      --page raw --print-kernel-base demangled` over ONE measured step of the same workload
      (--nvtx-include medprof_measured_step: a start/end range, so the backward kernels of the
      autograd thread are inside it), every launch of the run's top-N kernels profiled.
      (a) per signature: each signature medprof measured (scope signature:<id>) against ncu's
          launch of the same kernel, grid and block at the same position among that kernel's
          launches with that grid and block in the step (the signature's ordinals give it);
      (b) per kernel: medprof's aggregate (scope kernel:<name>) against ncu's sum over all the
          kernel's launches in the step (counters) or their duration-weighted mean (rates).
  ncu_agree.py runs RUN_A.jsonl RUN_B.jsonl [--top N]
      the same two levels between two medprof runs (the legacy Profiling API against the range
      profiler): signatures matched by id, kernels by name.
  ncu_agree.py count RUN.jsonl
      how many kernels and signatures of the run have metric rows; exit 1 when none (or the
      decode is empty), so a harness can say that a run measured nothing.

Agreement: within 5 % relative, or 2 points for percentages (both sides clamped to 0..100).
Prints one line per compared value and a summary per level; exit 0 when both levels have at
least 95 % of values agreeing and none of the top-3 kernels disagrees on duration, SM cycles or
warp instructions.
"""
import argparse
import json
import sys

from ncu_compare import METRICS, UNIT, norm, parse_dim3, read_raw_csv

CORE = ("duration_ns", "sm_cycles", "warp_instructions")


def load_run(path):
    run = {"kernels": {}, "kernel_metrics": {}, "signature_metrics": {}, "signatures": {}}
    for line in open(path):
        m = json.loads(line)
        for k in m.get("kernels", {}).get("kernels", []):
            run["kernels"][k["name"]] = run["kernels"].get(k["name"], 0) + int(k.get("total_ns", 0))
        for v in m.get("metrics", {}).get("values", []):
            scope = v.get("scope", "")
            if scope.startswith("kernel:"):
                run["kernel_metrics"].setdefault(scope[7:], {})[v["name"]] = float(v.get("value", 0.0))
            elif scope.startswith("signature:"):
                run["signature_metrics"].setdefault(scope[10:], {})[v["name"]] = float(v.get("value", 0.0))
        for s in m.get("signatures", {}).get("signatures", []):
            run["signatures"][s["id"]] = s
        if m.get("signatures", {}).get("steps"):
            run["steps"] = int(m["signatures"]["steps"])
    run["top"] = sorted((n for n in run["kernels"] if not n.startswith("[")), key=lambda n: -run["kernels"][n])
    return run


def dims(v):
    return tuple(int(x) for x in (v or [])) + (1,) * (3 - len(v or []))


def launch_dims(row, idx):
    """(grid, block) of one row of an ncu raw export."""
    return tuple(parse_dim3(row[idx[c]]) for c in ("Grid Size", "Block Size"))


def load_ncu(path):
    """Every launch in order: (name key, grid, block, values)."""
    header, units, data, idx = read_raw_csv(path)
    out = []
    for r in data:
        vals = {}
        for mname, (pw, _) in METRICS.items():
            if pw in idx:
                try:
                    vals[mname] = float(r[idx[pw]].replace(",", "")) * UNIT.get(units[idx[pw]], 1.0)
                except ValueError:
                    pass
        out.append((norm(r[idx["Kernel Name"]]), *launch_dims(r, idx), vals))
    return out


def agree(m, x, y):
    if METRICS[m][1]:
        x, y = min(max(x, 0.0), 100.0), min(max(y, 0.0), 100.0)
        return abs(x - y) <= 2.0, f"{x - y:+.2f}pt"
    rel = (x - y) / y if y else (0.0 if x == 0 else float("inf"))
    return abs(rel) <= 0.05, f"{100 * rel:+.2f}%"


class Tally:
    def __init__(self, level):
        self.level, self.compared, self.agreed, self.missing, self.top3_core_misses = level, 0, 0, 0, []
        self.duration_misses, self.closer_to_trace = 0, 0

    def row(self, label, mine, theirs, rank=None, trace_ns=None):
        """trace_ns: the same launches' mean duration in the unprofiled trace, the application's
        own time; a duration miss records which side is closer to it."""
        if mine is None or theirs is None:
            print(f"{self.level} {label[:70]:70s} MISSING in {'medprof' if mine is None else 'the other side'}")
            self.missing += 1
            return
        for m in METRICS:
            if m not in mine or m not in theirs:
                print(f"{self.level} {label[:70]:70s} {m:22s} missing {'medprof' if m not in mine else 'other'}")
                self.missing += 1
                continue
            ok, shown = agree(m, mine[m], theirs[m])
            self.compared += 1
            self.agreed += ok
            if not ok and rank is not None and rank < 3 and m in CORE:
                self.top3_core_misses.append(f"{label[:60]} {m}")
            note = ""
            if m == "duration_ns" and not ok and trace_ns:
                self.duration_misses += 1
                self.closer_to_trace += abs(mine[m] - trace_ns) < abs(theirs[m] - trace_ns)
                note = f"  (trace {trace_ns:.5g})"
            print(f"{self.level} {label[:70]:70s} {m:22s} {mine[m]:13.5g} {theirs[m]:13.5g} {shown:>9s} "
                  f"{'yes' if ok else 'NO'}{note}")

    def summary(self):
        total = self.compared + self.missing
        pct = 100.0 * self.agreed / total if total else 0.0
        print(f"level {self.level}: {self.agreed} of {total} values agree ({pct:.1f} %), {self.missing} missing; "
              f"top-3 core misses: {', '.join(self.top3_core_misses) or 'none'}")
        if self.duration_misses:
            print(f"level {self.level} duration misses: {self.duration_misses}, medprof closer to the unprofiled "
                  f"trace in {self.closer_to_trace}")
        return total > 0 and pct >= 95.0 and not self.top3_core_misses


def weighted(launches):
    """Counters summed, rates weighted by duration over a list of value dicts."""
    out = {}
    for m, (_, pct) in METRICS.items():
        have = [l for l in launches if m in l]
        if not have:
            continue
        if pct:
            w = [l.get("duration_ns", 1.0) for l in have]
            out[m] = sum(l[m] * wi for l, wi in zip(have, w)) / (sum(w) or 1.0)
        else:
            out[m] = sum(l[m] for l in have)
    return out


def signature_position(run, sig):
    """Position of the signature's first launch among its kernel's launches with its grid and block."""
    key = (sig["kernel"], dims(sig.get("grid")), dims(sig.get("block")))
    ordinals = sorted(o for s in run["signatures"].values()
                      if (s["kernel"], dims(s.get("grid")), dims(s.get("block"))) == key
                      for o in s.get("ordinals", []))
    first = min(sig.get("ordinals", [0]) or [0])
    return ordinals.index(first) if first in ordinals else 0


def compare_ncu(run, launches, top):
    a, b = Tally("a"), Tally("b")
    for rank, name in enumerate(top):
        key = norm(name)
        mine_sigs = [(sid, run["signatures"].get(sid)) for sid in run["signature_metrics"]]
        for sid, sig in mine_sigs:
            if sig is None or sig["kernel"] != name:
                continue
            same = [v for (k, g, bl, v) in launches if k == key and g == dims(sig.get("grid")) and bl == dims(sig.get("block"))]
            pos = signature_position(run, sig)
            theirs = same[pos] if pos < len(same) else None
            label = f"{sid} {sig.get('op', '')} {sig.get('shapes', '')[:24]} @{pos} {name[:30]}"
            a.row(label, run["signature_metrics"][sid], theirs, rank, int(sig["total_ns"]) / max(1, int(sig["count"])))
        all_launches = [v for (k, g, bl, v) in launches if k == key]
        trace = sum(int(s["total_ns"]) for s in run["signatures"].values() if s["kernel"] == name) / run.get("steps", 1)
        b.row(name, run["kernel_metrics"].get(name), weighted(all_launches) if all_launches else None, rank, trace)
    return a.summary() & b.summary()


def compare_runs(run, other, top):
    a, b = Tally("a"), Tally("b")
    for rank, name in enumerate(top):
        for sid, values in run["signature_metrics"].items():
            sig = run["signatures"].get(sid)
            if sig is not None and sig["kernel"] == name:
                a.row(f"{sid} {sig.get('op', '')} {name[:40]}", values, other["signature_metrics"].get(sid), rank)
        b.row(name, run["kernel_metrics"].get(name), other["kernel_metrics"].get(name), rank)
    return a.summary() & b.summary()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["ncu", "runs", "count"])
    ap.add_argument("run")
    ap.add_argument("other", nargs="?")
    ap.add_argument("--top", type=int, default=10)
    a = ap.parse_args()
    if a.mode != "count" and not a.other:
        ap.error(f"{a.mode} needs a second file")
    try:
        run = load_run(a.run)
    except (OSError, ValueError) as e:
        print(f"no decodable run in {a.run}: {e}")
        return 1
    if a.mode == "count":
        print(f"{len(run['kernel_metrics'])} kernels and {len(run['signature_metrics'])} signatures with metrics")
        return 0 if run["kernel_metrics"] else 1
    top = run["top"][: a.top]
    print(f"{'lvl'} {'what':70s} {'metric':22s} {'medprof':>13s} {'other':>13s} {'diff':>9s} ok")
    if a.mode == "ncu":  # several exports (a fallback run for the kernels the first one missed) are joined
        ok = compare_ncu(run, [l for p in a.other.split(",") if p for l in load_ncu(p)], top)
    else:
        other = load_run(a.other)
        # Two processes may not run the same kernels, or rank them alike: cuBLAS/cuDNN heuristics
        # can pick another GEMM in each, and two kernels near the N-th place by time can swap. Only
        # the kernels in both runs' top N have metrics on both sides; the others are named.
        mine, theirs = run["top"][: a.top], other["top"][: a.top]
        for n in mine + theirs:
            if (n in mine) != (n in theirs):
                side = "the other run" if n in mine else "this run"
                print(f"-   {n[:70]:70s} not among {side}'s top {a.top}: not compared")
        top = [n for n in mine if n in theirs]
        ok = compare_runs(run, other, top)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
