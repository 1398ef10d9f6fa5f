#!/usr/bin/env python3
"""bench/gpu/roofline_agree.py ncu, the roofline's work/traffic check against Nsight Compute: the
signature level matches each measured signature to ncu's launch of the same kernel, grid and block
at the same position (the acceptance's "same launches"), and a counter the export lacks is a miss."""
import csv
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.environ.get("MEDPROF_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "../../.."))
TOOL = os.path.join(ROOT, "bench/gpu/roofline_agree.py")
K = "void gn_stats<float>(long, float const*)"
COLS = ["smsp__sass_thread_inst_executed_op_fadd_pred_on.sum", "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum",
        "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", "dram__bytes.sum", "lts__lts2xbar_cycles_active.sum"]


def ncu_csv(launches, cols=COLS):
    """launches: (grid x, fadd, fmul, ffma, dram bytes, lts2xbar cycles) per launch, in step order."""
    out = io.StringIO()
    w = csv.writer(out, quoting=csv.QUOTE_ALL)
    w.writerow(["ID", "Kernel Name", "Block Size", "Grid Size", *cols])
    w.writerow(["", "", "", "", *([""] * len(cols))])
    for i, (gx, *vals) in enumerate(launches):
        w.writerow([str(i), K, "(512, 1, 1)", f"({gx}, 1, 1)", *[str(v) for v in vals[: len(cols)]]])
    f = tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False)
    f.write(out.getvalue())
    f.close()
    return f.name


def run_file(signatures):
    """signatures: id -> (grid x, ordinals, flops.fp32, bytes.dram, bytes.l2) of one launch."""
    sigs, values = [], []
    for sid, (gx, ordinals, fp32, dram, l2) in signatures.items():
        sigs.append({"id": sid, "kernel": K, "grid": [gx, 1, 1], "block": [512, 1, 1], "count": "1",
                     "total_ns": "100", "ordinals": ordinals})
        for name, v in (("flops.fp32", fp32), ("bytes.dram", dram), ("bytes.l2", l2)):
            values.append({"scope": "signature:" + sid, "name": name, "value": v})
    total = {"flops.fp32": 0.0, "bytes.dram": 0.0, "bytes.l2": 0.0}
    for v in values:
        total[v["name"]] += v["value"]
    values += [{"scope": "kernel:" + K, "name": n, "value": v} for n, v in total.items()]
    f = tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False)
    f.write(json.dumps({"kernels": {"kernels": [{"name": K, "total_ns": 300}]}}) + "\n")
    f.write(json.dumps({"signatures": {"signatures": sigs, "steps": 1}}) + "\n")
    f.write(json.dumps({"metrics": {"values": values}}) + "\n")
    f.close()
    return f.name


class SignatureLevel(unittest.TestCase):
    def tool(self, run, ncu):
        return subprocess.run([sys.executable, TOOL, "ncu", run, ncu], capture_output=True, text=True)

    def test_the_second_launch_of_a_grid_is_matched_by_its_position_not_the_first(self):
        # Grid 32 runs twice: ordinal 0 is 1e8 FLOPs (1e7 add + 1e7 mul + 4e7 fma: 1e7 + 1e7 + 8e7), ordinal 2 is
        # 4e8 (4x the work). Grid 64 at ordinal 1. Signature s2 is the grid-32 launch at ordinal 2.
        ncu = ncu_csv([(32, 1e7, 1e7, 4e7, 2e8, 1e7), (64, 2e7, 2e7, 8e7, 4e8, 2e7), (32, 4e7, 4e7, 16e7, 8e8, 4e7)])
        run = run_file({"s1": (32, [0], 1e8, 2e8, 32e7), "s3": (64, [1], 2e8, 4e8, 64e7), "s2": (32, [2], 4e8, 8e8, 128e7)})
        try:
            r = self.tool(run, ncu)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("level signature: 9/9 values within 5 % (the same launches)", r.stdout)
            self.assertIn("level kernel: 3/3 values within 5 %", r.stdout)
        finally:
            os.unlink(run)
            os.unlink(ncu)

    def test_a_signature_measured_on_the_wrong_launch_and_a_missing_counter_are_misses(self):
        ncu = ncu_csv([(32, 1e7, 1e7, 4e7, 2e8), (32, 4e7, 4e7, 16e7, 8e8)], cols=COLS[:4])  # no L2 counter
        run = run_file({"s1": (32, [0], 1e8, 2e8, 32e7), "s2": (32, [1], 1e8, 2e8, 32e7)})  # s2: s1's values
        try:
            r = self.tool(run, ncu)
            self.assertEqual(r.returncode, 1, r.stdout)
            # s1: fp32 and dram agree, l2 has no ncu value; s2: all three differ.
            self.assertIn("level signature: 2/6 values within 5 % (the same launches)", r.stdout)
            self.assertRegex(r.stdout, r"sig s2 @1 .* flops.fp32 +medprof +1e\+08 ncu +4e\+08  DIFFERS")
        finally:
            os.unlink(run)
            os.unlink(ncu)


    def test_a_value_medprof_did_not_produce_is_a_miss_even_where_ncu_counts_almost_nothing(self):
        # s1 has no bytes.l2 in the run while ncu counts 100 lts2xbar cycles (3200 bytes, under the
        # 1e6 "nothing to measure" floor): still a miss, and said to be one medprof did not produce.
        ncu = ncu_csv([(32, 1e7, 1e7, 4e7, 2e8, 100)])
        run = run_file({"s1": (32, [0], 1e8, 2e8, 3200)})
        with open(run) as f:
            lines = [json.loads(line) for line in f]
        values = lines[2]["metrics"]["values"]
        lines[2]["metrics"]["values"] = [v for v in values if not (v["scope"] == "signature:s1" and v["name"] == "bytes.l2")]
        with open(run, "w") as f:
            f.write("".join(json.dumps(line) + "\n" for line in lines))
        try:
            r = self.tool(run, ncu)
            self.assertEqual(r.returncode, 1, r.stdout)
            self.assertIn("level signature: 2/3 values within 5 % (the same launches); "
                          "FLOPs+DRAM+L2 2/3 (1 not produced by medprof)", r.stdout)
            self.assertRegex(r.stdout, r"sig s1 @0 .* bytes.l2 +medprof \(not measured\) ncu +3200  MISS")
        finally:
            os.unlink(run)
            os.unlink(ncu)


if __name__ == "__main__":
    unittest.main()
