#!/usr/bin/env python3
"""The verdicts of bench/gpu/multi_gpu_check.sh (issue 9, one agent driving every GPU).

Reads what the script collected and prints one line per acceptance point, PASS, FAIL,
SKIPPED or INCONCLUSIVE with the figures behind it, then a table of every run:

  meta.txt    "key value" lines the script wrote: mode (gpu|cpu), n (GPUs used), and per study
              (all = the all-GPU study, kill = the study with one worker SIGKILLed, one = the
              one-GPU study): <s>.study, <s>.submit_ms, <s>.end_ms, <s>.cut (1 when the deadline
              cancelled it), <s>.jobs; kill.killed_run, kill.killed_pid, kill.workers_at_kill;
              all_agent (its name); util_t0 (epoch seconds when the NVML sampler started)
  runs.json   a list of `medprof run RUN --format json` objects, each with "phase" added
  runs-list   `medprof runs --study S --format json` of the three studies, one file per study
              (runs-<s>.json: the only place a run's error is)
  agents.json `medprof agents --format json`
  gpus.csv    `nvidia-smi --query-gpu=index,uuid --format=csv,noheader` (empty without a GPU)
  workers.txt the all-GPU study's worker processes every 0.2 s: "epoch_ms pid run device cvd"
  util.csv    `nvidia-smi --query-gpu=timestamp,index,uuid,utilization.gpu
               --format=csv,noheader,nounits -lms 500`, run with TZ=UTC

Usage: multi_gpu_summary.py WORK_DIR [--util-pct 80] [--util-frac 0.70] [--slack 1.2]
Exit status: 0 every point PASS (SKIPPED allowed only in cpu mode), 3 a point FAILED,
4 none failed but one is INCONCLUSIVE or SKIPPED on a GPU machine.
"""
import argparse
import datetime
import json
import os
import sys


def load_json(path, default):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def read_meta(path):
    meta = {}
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip():
                continue
            key, _, value = line.partition(" ")
            meta[key] = value
    return meta


def read_gpus(path):
    """index -> uuid from nvidia-smi."""
    out = {}
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            parts = [p.strip() for p in line.split(",")]
            if len(parts) >= 2 and parts[0].isdigit():
                out[int(parts[0])] = parts[1]
    return out


def read_util(path, t0):
    """[(epoch_s, index, util_pct)] from nvidia-smi's CSV; timestamps taken as UTC and, should
    nvidia-smi have printed local time anyway, shifted by the whole quarter hours between its
    first sample and the sampler's start (t0)."""
    samples = []
    if not os.path.exists(path):
        return samples, 0.0
    with open(path) as f:
        for line in f:
            parts = [p.strip() for p in line.split(",")]
            if len(parts) < 4 or not parts[1].isdigit():
                continue
            try:
                ts = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f")
                util = float(parts[3])
            except ValueError:
                continue  # "[N/A]", a cut line
            t = ts.replace(tzinfo=datetime.timezone.utc).timestamp()
            samples.append((t, int(parts[1]), util))
    shift = 0.0
    if samples and t0 is not None:
        off = samples[0][0] - t0
        if abs(off) > 120:
            shift = round(off / 900.0) * 900.0
            samples = [(t - shift, i, u) for t, i, u in samples]
    return samples, shift


def read_workers(path):
    """epoch_ms -> [(pid, run, cvd)] from workers.txt ("epoch_ms pid run device cvd" lines)."""
    snaps = {}
    if not os.path.exists(path):
        return snaps
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 5:
                snaps.setdefault(parts[0], []).append((parts[1], parts[2], parts[4]))
    return snaps


def state_ok(state):
    return str(state).upper().endswith(("SUCCEEDED", "COMPLETED"))


def as_int(v, default=None):
    try:
        return int(v)
    except (TypeError, ValueError):
        return default


class Verdicts:
    def __init__(self):
        self.points = []

    def add(self, name, status, detail):
        self.points.append((name, status, detail))

    def lines(self):
        return [f"{status:12s} {name}: {detail}" for name, status, detail in self.points]

    def exit_code(self, cpu_mode):
        statuses = [s for _, s, _ in self.points]
        if "FAIL" in statuses:
            return 3
        if "INCONCLUSIVE" in statuses or (not cpu_mode and "SKIPPED" in statuses):
            return 4
        return 0


def study_wall_s(meta, runs, phase):
    """Submit to the last run's end (server clock = this machine's clock), in seconds; the
    script's own end time when no run ended."""
    submit = as_int(meta.get(f"{phase}.submit_ms"))
    ends = [as_int(r.get("finished_unix_ms"), 0) for r in runs if r["phase"] == phase]
    ends = [e for e in ends if e > 0]
    end = max(ends) if ends else as_int(meta.get(f"{phase}.end_ms"))
    if submit is None or end is None:
        return None, None, None
    return (end - submit) / 1000.0, submit, end


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("work")
    ap.add_argument("--util-pct", type=float, default=80.0)
    ap.add_argument("--util-frac", type=float, default=0.70)
    ap.add_argument("--slack", type=float, default=1.2)
    a = ap.parse_args()
    w = a.work
    meta = read_meta(os.path.join(w, "meta.txt"))
    cpu_mode = meta.get("mode") == "cpu"
    n = as_int(meta.get("n"), 1)
    gpus = read_gpus(os.path.join(w, "gpus.csv"))
    runs = load_json(os.path.join(w, "runs.json"), [])
    errors = {}
    for phase in ("all", "kill", "one"):
        doc = load_json(os.path.join(w, f"runs-{phase}.json"), {})
        for r in doc.get("runs", []) if isinstance(doc, dict) else []:
            errors[r.get("run_id")] = r.get("error", "")
    for r in runs:
        r.setdefault("error", errors.get(r.get("run_id"), ""))
    v = Verdicts()
    no_gpu = "skipped: no GPU (the CPU check: the agent offers one cpu device)"

    # ---- 1. one agent registers every GPU
    agents = load_json(os.path.join(w, "agents.json"), {}).get("agents", [])
    all_agent = next((ag for ag in agents if ag.get("name") == meta.get("all_agent")), None)
    if cpu_mode:
        v.add("one agent registers every GPU", "SKIPPED", no_gpu)
    elif all_agent is None:
        v.add("one agent registers every GPU", "FAIL", f"agent {meta.get('all_agent')} not listed by `medprof agents`")
    else:
        dev = {d.get("index"): d.get("uuid", "") for d in all_agent.get("devices", [])}
        want = {i: gpus[i] for i in range(n) if i in gpus}
        ok = len(dev) == n and all(dev.get(i, "").lower() == u.lower() for i, u in want.items()) and len(want) == n
        v.add("one agent registers every GPU", "PASS" if ok else "FAIL",
              f"agent {all_agent.get('name')}: {len(dev)} devices "
              + ", ".join(f"{i}={u}" for i, u in sorted(dev.items(), key=lambda x: (x[0] is None, x[0])))
              + f"; nvidia-smi: {n} used of {len(gpus)}")

    # ---- 2. the all-GPU and one-GPU studies complete
    detail = []
    ok2 = True
    inconclusive2 = False
    for phase in ("all", "one"):
        pr = [r for r in runs if r["phase"] == phase]
        jobs = as_int(meta.get(f"{phase}.jobs"), 0)
        good = sum(1 for r in pr if state_ok(r.get("state")))
        cut = meta.get(f"{phase}.cut") == "1"
        # A study cut at the deadline: its runs stopped by the cancel or by the agent's stop
        # (CANCELLED, INTERRUPTED) are the script's doing, not failures.
        bad = [r for r in pr if not state_ok(r.get("state"))
               and not (cut and any(x in str(r.get("state")).upper() for x in ("CANCEL", "INTERRUPT")))]
        detail.append(f"{phase}-GPU study {meta.get(phase + '.study', '?')}: {good}/{jobs} jobs succeeded"
                      + (f", {len(bad)} failed ({'; '.join(str(r.get('error'))[:80] for r in bad)})" if bad else "")
                      + (" (cancelled at the deadline)" if cut else ""))
        if bad:
            ok2 = False
        elif good < jobs:
            if cut:
                inconclusive2 = True
            else:
                ok2 = False
    v.add("every job of the all-GPU and one-GPU studies succeeded",
          "FAIL" if not ok2 else ("INCONCLUSIVE" if inconclusive2 else "PASS"), "; ".join(detail))

    # ---- 3. pinning visible in each run's environment, results per GPU without a mix-up
    def env(r):
        return r.get("environment") or {}

    if cpu_mode:
        cpu_runs = [r for r in runs if state_ok(r.get("state"))]
        pinned = all(env(r).get("device", "cpu") == "cpu" and not env(r).get("cuda_visible_devices") for r in cpu_runs)
        v.add("CUDA_VISIBLE_DEVICES pinning in each run's environment, no mix-up", "SKIPPED",
              no_gpu + f"; {len(cpu_runs)} succeeded runs on device cpu with CUDA_VISIBLE_DEVICES empty: "
              + ("yes" if pinned else "NO"))
    else:
        problems = []
        per_gpu = {}
        for r in runs:
            if not state_ok(r.get("state")):
                continue
            e = env(r)
            cvd = str(e.get("cuda_visible_devices", ""))
            uuid = str(e.get("gpu_uuid", ""))
            rid = r.get("run_id")
            if not cvd.isdigit():
                problems.append(f"{rid}: CUDA_VISIBLE_DEVICES '{cvd}' is not one GPU index")
                continue
            k = int(cvd)
            if r["phase"] == "one" and k != 0:
                problems.append(f"{rid}: one-GPU study ran with CUDA_VISIBLE_DEVICES={k}")
            if k not in gpus or gpus[k].lower() != uuid.lower():
                problems.append(f"{rid}: CUDA_VISIBLE_DEVICES={k} but stored GPU {uuid or '(none)'}"
                                f" (nvidia-smi: index {k} is {gpus.get(k, '(absent)')})")
            if as_int(r.get("steps_count"), 0) <= 0:
                problems.append(f"{rid}: no step rows stored")
            if r["phase"] == "all":
                per_gpu.setdefault(uuid.lower(), []).append(rid)
        distinct = len(per_gpu)
        if distinct != n:
            problems.append(f"the all-GPU study's runs used {distinct} distinct GPUs, not {n}")
        v.add("CUDA_VISIBLE_DEVICES pinning in each run's environment, no mix-up",
              "FAIL" if problems else "PASS",
              (f"all-GPU study: {distinct} distinct GPU UUIDs ("
               + ", ".join(f"{u[:12]}…: {len(ids)} runs" for u, ids in sorted(per_gpu.items()))
               + "); every run's CUDA_VISIBLE_DEVICES names the GPU whose UUID it stored")
              if not problems else "; ".join(problems[:8]) + (f"; … {len(problems) - 8} more" if len(problems) > 8 else ""))

    # ---- 4. one worker per GPU at a time, every GPU at once: the agent's worker processes as
    # listed every 0.2 s during the all-GPU study (the server's run times cannot show it: the
    # agent frees a device when its worker exits, before the run's FinishRun reaches the server)
    snaps = read_workers(os.path.join(w, "workers.txt"))
    peak = max((len(ws) for ws in snaps.values()), default=0)
    shared = [(t, ws) for t, ws in sorted(snaps.items())
              if len({cvd for _, _, cvd in ws}) < len(ws)]
    at_peak = sum(1 for ws in snaps.values() if len(ws) == n)
    text = (f"{len(snaps)} snapshots of the agent's workers with at least one running; peak {peak} at once "
            f"(want {n}), {at_peak} snapshots with all {n}; snapshots where two workers shared a "
            f"CUDA_VISIBLE_DEVICES: {len(shared)}")
    if shared:
        t, ws = shared[0]
        text += f" (first at {t}: " + ", ".join(f"pid {p} cvd {c}" for p, _, c in ws) + ")"
    if cpu_mode:
        v.add("one worker per GPU at a time, all GPUs at once", "SKIPPED", no_gpu + "; " + text)
    elif not snaps:
        v.add("one worker per GPU at a time, all GPUs at once", "FAIL", "no worker seen (workers.txt empty)")
    else:
        v.add("one worker per GPU at a time, all GPUs at once",
              "PASS" if peak == n and not shared else "FAIL", text)

    # ---- 5. utilization through NVML during the all-GPU study
    t_all, submit_all, end_all = study_wall_s(meta, runs, "all")
    if cpu_mode:
        v.add(f"every GPU > {a.util_pct:.0f} % busy for >= {a.util_frac:.0%} of the all-GPU study", "SKIPPED", no_gpu)
    else:
        t0 = float(meta["util_t0"]) if meta.get("util_t0") else None
        samples, shift = read_util(os.path.join(w, "util.csv"), t0)
        parts = []
        ok = submit_all is not None and bool(samples)
        for i in range(n):
            win = [u for t, k, u in samples if k == i and submit_all is not None
                   and submit_all / 1000.0 <= t <= end_all / 1000.0]
            if len(win) < 4:
                ok = False
                parts.append(f"GPU {i}: {len(win)} samples in the window")
                continue
            frac = sum(1 for u in win if u > a.util_pct) / len(win)
            mean = sum(win) / len(win)
            ok = ok and frac >= a.util_frac
            parts.append(f"GPU {i}: {frac:.0%} of {len(win)} samples (mean {mean:.0f} %)")
        if not samples:
            parts.append("no NVML samples (util.csv empty)")
        all_cut = meta.get("all.cut") == "1"
        v.add(f"every GPU > {a.util_pct:.0f} % busy for >= {a.util_frac:.0%} of the all-GPU study",
              "PASS" if ok else ("INCONCLUSIVE" if all_cut else "FAIL"),
              "; ".join(parts) + (f"; nvidia-smi timestamps shifted by {shift:.0f} s" if shift else ""))

    # ---- 6. T_N <= slack * T_1 / N
    t_one, _, _ = study_wall_s(meta, runs, "one")
    one_cut = meta.get("one.cut") == "1"
    if t_all is None or t_one is None:
        v.add(f"T_N <= {a.slack} x T_1 / N", "FAIL", f"a study did not run (T_N {t_all}, T_1 {t_one})")
    else:
        if one_cut:
            # The one-GPU study was cancelled at the deadline: its time so far is a lower bound.
            t_one = (as_int(meta.get("one.end_ms")) - as_int(meta.get("one.submit_ms"))) / 1000.0
        bound = a.slack * t_one / n
        text = (f"T_N = {t_all:.1f} s on {n} GPUs, T_1 {'>= ' if one_cut else '= '}{t_one:.1f} s on one; "
                f"bound {a.slack} x T_1 / {n} = {bound:.1f} s; speedup {t_one / t_all:.2f}x")
        if cpu_mode:
            v.add(f"T_N <= {a.slack} x T_1 / N", "SKIPPED", no_gpu + "; " + text)
        elif meta.get("all.cut") == "1":
            v.add(f"T_N <= {a.slack} x T_1 / N", "INCONCLUSIVE", text + " (the all-GPU study was cut at the deadline)")
        elif t_all <= bound:
            v.add(f"T_N <= {a.slack} x T_1 / N", "PASS", text)
        elif one_cut:
            v.add(f"T_N <= {a.slack} x T_1 / N", "INCONCLUSIVE", text + " (the one-GPU study was cut at the deadline)")
        else:
            v.add(f"T_N <= {a.slack} x T_1 / N", "FAIL", text)

    # ---- 7. killing one worker fails only its job
    kr = [r for r in runs if r["phase"] == "kill"]
    killed = meta.get("kill.killed_run", "")
    jobs = as_int(meta.get("kill.jobs"), 0)
    failed = [r for r in kr if not state_ok(r.get("state"))]
    good = [r for r in kr if state_ok(r.get("state"))]
    if not killed:
        v.add("killing one worker fails only its job", "FAIL",
              f"no worker was killed ({meta.get('kill.note', 'the study ended before the workers were seen')})")
    else:
        victim = next((r for r in kr if r.get("run_id") == killed), None)
        problems = []
        if victim is None:
            problems.append(f"the killed run {killed} is not in the study")
        else:
            if "FAIL" not in str(victim.get("state")).upper():
                problems.append(f"{killed} ended {victim.get('state')}")
            if "signal 9" not in str(victim.get("error", "")):
                problems.append(f"{killed}'s error does not mention signal 9: '{victim.get('error', '')}'")
        others = [r for r in failed if r.get("run_id") != killed]
        if others:
            problems.append("other runs failed: " + "; ".join(f"{r.get('run_id')} {r.get('state')} {str(r.get('error'))[:60]}" for r in others))
        if len(good) != jobs - 1:
            problems.append(f"{len(good)} runs succeeded, want {jobs - 1} (every job but the killed one)")
        if len(kr) != jobs:
            problems.append(f"{len(kr)} runs for {jobs} jobs (a retry or a missing run)")
        if meta.get("kill.cut") == "1":
            problems.append("the study was cancelled at the deadline")
        v.add("killing one worker fails only its job", "FAIL" if problems else "PASS",
              (f"killed pid {meta.get('kill.killed_pid')} (run {killed}, device {meta.get('kill.killed_device', '?')}) "
               f"while {meta.get('kill.workers_at_kill')} workers ran: "
               + (f"it ended {victim.get('state')} '{victim.get('error', '')}', the other {len(good)} succeeded"
                  if victim is not None and not problems else "; ".join(problems))))

    if not cpu_mode and n < 2:
        v.add("two or more GPUs", "INCONCLUSIVE", f"{n} GPU: issue 9 needs a machine with 2 or more")

    # ---- print
    print("== per-run table (phase, preset, state, CUDA_VISIBLE_DEVICES, GPU UUID, start..end s after submit)")
    for r in sorted(runs, key=lambda r: (r["phase"], as_int(r.get("started_unix_ms"), 0))):
        e = env(r)
        sub = as_int(meta.get(f"{r['phase']}.submit_ms"), 0)
        st, fi = as_int(r.get("started_unix_ms"), 0), as_int(r.get("finished_unix_ms"), 0)
        print(f"  {r['phase']:4s} {r.get('run_id', '?'):18s} {str(r.get('preset', '?')):9s} {str(r.get('state', '?')):14s} "
              f"cvd={e.get('cuda_visible_devices', '') or '-':3s} {e.get('gpu_uuid', '') or e.get('device', '-'):42s} "
              f"{(st - sub) / 1000.0 if st else float('nan'):7.1f}..{(fi - sub) / 1000.0 if fi else float('nan'):7.1f}"
              + (f"  error: {str(r.get('error'))[:90]}" if r.get("error") else ""))
    print("== issue 9 acceptance" + (" (CPU check: GPU points skipped)" if cpu_mode else f" on {n} GPUs"))
    for line in v.lines():
        print(line)
    rc = v.exit_code(cpu_mode)
    print(f"== verdict: {'PASS' if rc == 0 else ('FAIL' if rc == 3 else 'NOT VALIDATED')} (exit {rc})")
    return rc


if __name__ == "__main__":
    sys.exit(main())
