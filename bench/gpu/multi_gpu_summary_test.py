#!/usr/bin/env python3
"""Checks multi_gpu_summary.py's GPU verdicts on made-up inputs (no GPU needed, < 1 s):
a good 2-GPU outcome passes every point, and each way issue 9 can go wrong fails its point.

  python3 bench/gpu/multi_gpu_summary_test.py
"""
import copy
import datetime
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
UUIDS = ["GPU-aaaaaaaa-0000-0000-0000-000000000000", "GPU-bbbbbbbb-1111-1111-1111-111111111111"]
SUBMIT = {"all": 1_800_000_000_000, "kill": 1_800_000_200_000, "one": 1_800_000_300_000}
PRESETS = ["baseline", "opt1", "opt2", "opt12"]


def good_case():
    """Two GPUs; the all-GPU study 40 s, the one-GPU study 80 s; one killed worker."""
    runs, meta = [], {"mode": "gpu", "n": "2", "all_agent": "mgpu-all", "util_t0": str(SUBMIT["all"] / 1000 - 5)}
    k = 0
    for phase in ("all", "kill", "one"):
        meta[f"{phase}.study"] = f"st-{phase}"
        meta[f"{phase}.submit_ms"] = str(SUBMIT[phase])
        meta[f"{phase}.jobs"] = "8"
        slot_end = [SUBMIT[phase] + 500, SUBMIT[phase] + 500]
        for i in range(8):
            gpu = 0 if phase == "one" else i % 2
            dur = 9_500 if phase != "kill" else 3_000
            start = slot_end[gpu] + 100
            end = start + dur
            slot_end[gpu] = end
            k += 1
            runs.append({"run_id": f"run-{k:03d}", "phase": phase, "preset": PRESETS[i % 4],
                         "state": "RUN_SUCCEEDED", "error": "", "steps_count": 60,
                         "started_unix_ms": str(start), "finished_unix_ms": str(end),
                         "environment": {"cuda_visible_devices": str(gpu), "gpu_uuid": UUIDS[gpu]}})
        meta[f"{phase}.end_ms"] = str(max(slot_end) + 300)
    victim = next(r for r in runs if r["phase"] == "kill")
    victim.update(state="RUN_FAILED", error="worker crashed: signal 9 (SIGKILL)", environment={})
    meta.update({"kill.killed_run": victim["run_id"], "kill.killed_pid": "4242", "kill.killed_device": "0",
                 "kill.workers_at_kill": "2"})
    # Workers every 0.2 s of the all-GPU study: two at once, each on its own GPU.
    workers = []
    for t in range(SUBMIT["all"] + 600, SUBMIT["all"] + 38_000, 200):
        workers += [f"{t} {100 + g} run-x{g} {g} {g}" for g in (0, 1)]
    # NVML every 0.5 s from 5 s before the submit to 5 s after the end: busy, bar the first 2 s.
    util = []
    t = SUBMIT["all"] / 1000 - 5
    while t < SUBMIT["all"] / 1000 + 45:
        stamp = datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
        busy = SUBMIT["all"] / 1000 + 2 <= t <= SUBMIT["all"] / 1000 + 39
        for g in (0, 1):
            util.append(f"{stamp}, {g}, {UUIDS[g]}, {97 if busy else 0}")
        t += 0.5
    agents = {"agents": [{"name": "mgpu-all", "devices": [{"index": g, "uuid": UUIDS[g]} for g in (0, 1)]}]}
    return {"runs": runs, "meta": meta, "workers": workers, "util": util, "agents": agents,
            "gpus": [f"{g}, {UUIDS[g]}" for g in (0, 1)]}


def judge(case):
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "meta.txt"), "w") as f:
            f.writelines(f"{k} {v}\n" for k, v in case["meta"].items())
        json.dump(case["runs"], open(os.path.join(d, "runs.json"), "w"))
        json.dump(case["agents"], open(os.path.join(d, "agents.json"), "w"))
        for name, key in (("workers.txt", "workers"), ("util.csv", "util"), ("gpus.csv", "gpus")):
            with open(os.path.join(d, name), "w") as f:
                f.writelines(line + "\n" for line in case[key])
        p = subprocess.run([sys.executable, os.path.join(HERE, "multi_gpu_summary.py"), d],
                           capture_output=True, text=True, check=False)
    verdicts = {}
    for line in p.stdout.splitlines():
        for status in ("PASS", "FAIL", "SKIPPED", "INCONCLUSIVE"):
            if line.startswith(status + " "):
                verdicts[line[len(status):].strip().split(":")[0]] = status
    return p.returncode, verdicts, p.stdout + p.stderr


REG, DONE, PIN, ONE_EACH, UTIL, TIME, KILL = (
    "one agent registers every GPU", "every job of the all-GPU and one-GPU studies succeeded",
    "CUDA_VISIBLE_DEVICES pinning in each run's environment, no mix-up",
    "one worker per GPU at a time, all GPUs at once", "every GPU > 80 % busy for >= 70% of the all-GPU study",
    "T_N <= 1.2 x T_1 / N", "killing one worker fails only its job")


class SummaryTest(unittest.TestCase):
    def expect(self, case, rc, failing):
        got_rc, verdicts, text = judge(case)
        self.assertEqual(len(verdicts), 7, text)  # (8 with "two or more GPUs" on one GPU)
        for point, status in verdicts.items():
            self.assertEqual(status, "FAIL" if point in failing else "PASS", f"{point}\n{text}")
        self.assertEqual(got_rc, rc, text)
        return text

    def test_good_outcome_passes_every_point(self):
        text = self.expect(good_case(), 0, set())
        self.assertIn("speedup 1.99x", text)
        self.assertIn("2 distinct GPU UUIDs", text)

    def test_agent_missing_a_gpu(self):
        case = good_case()
        case["agents"]["agents"][0]["devices"].pop()
        self.expect(case, 3, {REG})

    def test_run_stored_under_the_wrong_gpu(self):
        case = good_case()
        r = next(r for r in case["runs"] if r["phase"] == "all" and r["environment"]["cuda_visible_devices"] == "1")
        r["environment"]["gpu_uuid"] = UUIDS[0]
        self.expect(case, 3, {PIN})

    def test_one_gpu_study_on_another_gpu(self):
        case = good_case()
        r = next(r for r in case["runs"] if r["phase"] == "one")
        r["environment"] = {"cuda_visible_devices": "1", "gpu_uuid": UUIDS[1]}
        self.expect(case, 3, {PIN})

    def test_two_workers_on_one_gpu(self):
        case = good_case()
        case["workers"] = [w[:-1] + "0" for w in case["workers"]]
        self.expect(case, 3, {ONE_EACH})

    def test_gpus_never_busy_together(self):
        case = good_case()
        case["workers"] = [w for w in case["workers"] if not w.endswith(" 1 1")]
        self.expect(case, 3, {ONE_EACH})

    def test_idle_gpu_fails_utilization(self):
        case = good_case()
        case["util"] = [u if ", 1, " not in u else u.rsplit(",", 1)[0] + ", 40" for u in case["util"]]
        self.expect(case, 3, {UTIL})

    def test_local_time_stamps_are_shifted_back(self):
        case = good_case()
        shifted = []
        for u in case["util"]:
            stamp, rest = u.split(", ", 1)
            ts = datetime.datetime.strptime(stamp, "%Y/%m/%d %H:%M:%S.%f") + datetime.timedelta(hours=2)
            shifted.append(ts.strftime("%Y/%m/%d %H:%M:%S.%f")[:-3] + ", " + rest)
        case["util"] = shifted
        self.assertIn("shifted by 7200 s", self.expect(case, 0, set()))

    def test_too_slow_on_n_gpus(self):
        case = good_case()
        for r in case["runs"]:
            if r["phase"] == "all":
                r["finished_unix_ms"] = str(int(r["finished_unix_ms"]) + 20_000)  # the last ends ~60 s in
        text = self.expect(case, 3, {TIME})
        self.assertIn("FAIL", text)

    def test_cut_one_gpu_study_gives_a_lower_bound(self):
        case = good_case()
        case["runs"] = [r for r in case["runs"] if not (r["phase"] == "one" and int(r["started_unix_ms"]) > SUBMIT["one"] + 60_000)]
        case["meta"]["one.cut"] = "1"
        case["meta"]["one.end_ms"] = str(SUBMIT["one"] + 70_000)
        got_rc, verdicts, text = judge(case)
        self.assertEqual(verdicts[TIME], "PASS", text)  # 39.6 s <= 1.2 x 70 / 2 = 42 s
        self.assertEqual(verdicts[DONE], "INCONCLUSIVE", text)
        self.assertEqual(got_rc, 4, text)

    def test_cut_all_gpu_study_is_inconclusive_not_failed(self):
        case = good_case()
        last = [r for r in case["runs"] if r["phase"] == "all"][-1]
        last.update(state="RUN_INTERRUPTED", error="agent received SIGTERM")
        case["meta"]["all.cut"] = "1"
        got_rc, verdicts, text = judge(case)
        self.assertEqual(verdicts[DONE], "INCONCLUSIVE", text)
        self.assertEqual(verdicts[TIME], "INCONCLUSIVE", text)
        self.assertEqual(got_rc, 4, text)

    def test_one_gpu_machine_does_not_validate(self):
        case = good_case()
        case["meta"]["n"] = "1"
        case["gpus"] = case["gpus"][:1]
        got_rc, verdicts, text = judge(case)
        self.assertEqual(verdicts["two or more GPUs"], "INCONCLUSIVE", text)
        self.assertEqual(got_rc, 3, text)  # and the 2-GPU runs do not fit one GPU's inventory
        self.assertEqual(verdicts[REG], "FAIL", text)

    def test_killed_job_retried_or_others_failed(self):
        case = good_case()
        victim = next(r for r in case["runs"] if r["run_id"] == case["meta"]["kill.killed_run"])
        victim.update(state="RUN_SUCCEEDED", error="", environment={"cuda_visible_devices": "0", "gpu_uuid": UUIDS[0]})
        self.expect(case, 3, {KILL})
        case = good_case()
        other = [r for r in case["runs"] if r["phase"] == "kill"][3]
        other.update(state="RUN_FAILED", error="worker crashed: signal 6 (SIGABRT)")
        self.expect(case, 3, {KILL})
        case = good_case()
        del case["meta"]["kill.killed_run"]
        self.expect(case, 3, {KILL})

    def test_failed_job_in_the_all_gpu_study(self):
        case = good_case()
        r = [r for r in case["runs"] if r["phase"] == "all"][5]
        r.update(state="RUN_FAILED", error="cuda: out of memory")
        self.expect(case, 3, {DONE})


if __name__ == "__main__":
    unittest.main()
