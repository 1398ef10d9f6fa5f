#!/usr/bin/env python3
"""bench/gpu/ncu_agree.py, the two-level agreement harness: `runs` compares only the kernels in both
runs' top N and names the others; a duration miss records which side the unprofiled trace supports;
`count` says how many kernels and signatures have metric rows and fails on none."""
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

ROOT = os.environ.get("MEDPROF_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "../../.."))
sys.path.insert(0, os.path.join(ROOT, "bench/gpu"))
import ncu_agree as na  # noqa: E402

CORE = {"duration_ns": 1000.0, "sm_cycles": 2000.0, "warp_instructions": 500.0, "l1_hit_pct": 10.0,
        "l2_hit_pct": 50.0, "dram_throughput_pct": 40.0, "achieved_occupancy_pct": 60.0, "tensor_pipe_pct": 0.0,
        "fma_pipe_pct": 5.0}


def run_file(kernel_ns):
    """A decoded run: kernels with these trace times, one signature each, the same metrics on both."""
    values = [{"scope": scope + k, "name": m, "value": v}
              for k in kernel_ns for scope in ("kernel:", "signature:s-") for m, v in CORE.items()]
    signatures = [{"id": "s-" + k, "kernel": k, "count": "1", "total_ns": str(t)} for k, t in kernel_ns.items()]
    f = tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False)
    f.write(json.dumps({"kernels": {"kernels": [{"name": k, "total_ns": t} for k, t in kernel_ns.items()]}}) + "\n")
    f.write(json.dumps({"signatures": {"signatures": signatures, "steps": 1}}) + "\n")
    f.write(json.dumps({"metrics": {"values": values}}) + "\n")
    f.close()
    return f.name


class LaunchDims(unittest.TestCase):
    def test_thousands_separators_are_part_of_one_dimension(self):
        self.assertEqual(na.parse_dim3("(2,048, 1, 1)"), (2048, 1, 1))
        self.assertEqual(na.parse_dim3("(128, 1,024, 3)"), (128, 1024, 3))
        self.assertEqual(na.parse_dim3("(7, 1, 1)"), (7, 1, 1))

    def test_the_row_of_a_raw_export_gives_grid_then_block(self):
        _, _, data, idx = na.read_raw_csv(os.path.join(ROOT, "tests/testdata/ncu/tiny_raw.csv"))
        self.assertEqual(na.launch_dims(data[0], idx), ((2048, 1, 1), (128, 1, 1)))


class Runs(unittest.TestCase):
    def tool(self, *args):
        return subprocess.run([sys.executable, os.path.join(ROOT, "bench/gpu/ncu_agree.py"), *args],
                              capture_output=True, text=True)

    def test_kernels_that_swap_the_last_place_are_named_not_counted_as_missing(self):
        a = run_file({"k1": 300, "k2": 200, "k3": 100})
        b = run_file({"k1": 300, "k2": 200, "k4": 150, "k3": 100})
        try:
            r = self.tool("runs", a, b, "--top", "3")
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("k3", r.stdout.split("not among the other run's top 3")[0].splitlines()[-1])
            self.assertIn("not among this run's top 3: not compared", r.stdout)
            self.assertIn("level a: 18 of 18 values agree (100.0 %), 0 missing", r.stdout)
            self.assertIn("level b: 18 of 18 values agree (100.0 %), 0 missing", r.stdout)
        finally:
            os.unlink(a)
            os.unlink(b)


class Count(unittest.TestCase):
    def tool(self, *args):
        return subprocess.run([sys.executable, os.path.join(ROOT, "bench/gpu/ncu_agree.py"), *args],
                              capture_output=True, text=True)

    def test_a_measured_run_is_counted_and_a_run_without_metric_rows_fails(self):
        measured = run_file({"k1": 300, "k2": 200})
        empty = tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False)
        empty.close()
        cut = tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False)
        cut.write('{"kernels": {"kern')
        cut.close()
        try:
            r = self.tool("count", measured)
            self.assertEqual((r.returncode, r.stdout.strip()), (0, "2 kernels and 2 signatures with metrics"))
            r = self.tool("count", empty.name)
            self.assertEqual((r.returncode, r.stdout.strip()), (1, "0 kernels and 0 signatures with metrics"))
            r = self.tool("count", cut.name)
            self.assertEqual(r.returncode, 1)
            self.assertTrue(r.stdout.startswith("no decodable run in " + cut.name), r.stdout)
            r = self.tool("runs", measured)
            self.assertEqual(r.returncode, 2)
            self.assertIn("runs needs a second file", r.stderr)
        finally:
            for f in (measured, empty.name, cut.name):
                os.unlink(f)


class TraceVote(unittest.TestCase):
    def test_a_duration_miss_says_which_side_the_trace_supports(self):
        t = na.Tally("a")
        with redirect_stdout(io.StringIO()) as out:
            t.row("sig", dict(CORE, duration_ns=1000.0), dict(CORE, duration_ns=1200.0), trace_ns=1010.0)
            t.row("sig2", dict(CORE, duration_ns=1000.0), dict(CORE, duration_ns=1200.0), trace_ns=1190.0)
            t.summary()
        self.assertEqual((t.duration_misses, t.closer_to_trace), (2, 1))
        self.assertIn("duration misses: 2, medprof closer to the unprofiled trace in 1", out.getvalue())
        self.assertIn("(trace 1010)", out.getvalue())


if __name__ == "__main__":
    unittest.main()
