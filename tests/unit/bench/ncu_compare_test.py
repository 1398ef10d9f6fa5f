#!/usr/bin/env python3
"""bench/gpu/ncu_compare.py against the Nsight Compute CSV recorded on the H200
(tests/testdata/ncu/h200_opt1_forward_raw.csv) and kernel names as medprof's worker records them
(cxxabi, from ../shared/testdata/kernel_names_h200_sample.tsv): the narrow --kernel-name regex,
the launch-per-step medians and the coverage check the profiler's ncu stage relies on."""
import csv
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

ROOT = os.environ.get("MEDPROF_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "../../.."))
sys.path.insert(0, os.path.join(ROOT, "bench/gpu"))
import ncu_compare as nc  # noqa: E402

CSV = os.path.join(ROOT, "tests/testdata/ncu/h200_opt1_forward_raw.csv")

# Names of kernels in that CSV as the worker records them on the H200 (cxxabi demangler).
WORKER_NAMES = [
    "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::CUDAFunctor_add<float> >"
    "(at::TensorIteratorBase&, at::native::CUDAFunctor_add<float> const&)::{lambda(int)#1}>(int, at::native::"
    "gpu_kernel_impl_nocast<at::native::CUDAFunctor_add<float> >(at::TensorIteratorBase&, at::native::CUDAFunctor_add"
    "<float> const&)::{lambda(int)#1})",
    "void at::native::vectorized_elementwise_kernel<4, at::native::BUnaryFunctor<float, float, float, "
    "at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul> >(int, at::native::"
    "BUnaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul>)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::cos_kernel_cuda(at::TensorIteratorBase&)::"
    "{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul> >"
    "(int, at::native::cos_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() const::{lambda()#2}::"
    "operator()() const::{lambda(float)#1}, std::array<char*, 2ul>)",
    "void cudnn::engines_precompiled::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)0>"
    "(cudnn::engines_precompiled::nchw2nhwc_params_t<float>, float const*, float*)",
]


def ncu_rows():
    lines = [l for l in open(CSV).read().splitlines() if l.startswith('"')]
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    return rows[0], rows[2:]


class NarrowRegex(unittest.TestCase):
    def test_each_worker_name_matches_its_ncu_twins_and_only_other_instantiations_besides(self):
        header, data = ncu_rows()
        names = sorted({r[header.index("Kernel Name")] for r in data})
        for w in WORKER_NAMES:
            pattern = nc.demangled_pattern(w)
            matched = {n for n in names if re.search(pattern, n)}
            twins = {n for n in names if nc.norm(n) == nc.norm(w)}
            self.assertTrue(twins, w)
            # The pattern names identifiers only: it also takes in other instantiations of the same
            # template (nchwToNhwcKernel<..., 0> beside <..., 2>), which the key then tells apart.
            self.assertLessEqual(twins, matched, pattern)
            for other in matched - twins:
                self.assertEqual(nc.norm(other)[0], nc.norm(w)[0], other)
                self.assertNotEqual(nc.template_numbers(other), nc.template_numbers(w), other)

    def test_every_ncu_name_is_matched_by_its_own_pattern_and_plain_names_stay_whole(self):
        header, data = ncu_rows()
        for n in {r[header.index("Kernel Name")] for r in data}:
            self.assertRegex(n, nc.demangled_pattern(n))
        self.assertEqual(nc.demangled_pattern("sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc"),
                         "sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc")
        self.assertEqual(nc.demangled_pattern(WORKER_NAMES[1]),
                         "vectorized_elementwise_kernel.*BUnaryFunctor.*binary_internal.*MulFunctor.*array")


class KernelKey(unittest.TestCase):
    BF16_MUL = ("void at::native::vectorized_elementwise_kernel<8, at::native::BUnaryFunctor<c10::BFloat16, "
                "c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, std::array<char*, "
                "2ul> >(int, at::native::BUnaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, "
                "at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul>)")

    def test_the_two_demanglers_spellings_of_one_instantiation_are_one_key(self):
        self.assertEqual(nc.norm(WORKER_NAMES[3]),
                         nc.norm("void cudnn::nchwToNhwcKernel<float, float, float, 0, 1, 0>"
                                 "(cudnn::nchw2nhwc_params_t<T3>, const T1 *, T2 *)"))
        self.assertEqual(nc.norm("void medprof::meddpm::gn::(anonymous namespace)::medprof_group_norm_stats_nsc"
                                 "<__nv_bfloat16>(__nv_bfloat16 const*, long, long, long, float2*)"),
                         nc.norm("void medprof::<unnamed>::medprof_group_norm_stats_nsc<__nv_bfloat16>"
                                 "(const T1 *, long, long, long, float2 *)"))

    def test_instantiations_that_differ_in_a_numeric_argument_are_different_kernels(self):
        self.assertNotEqual(nc.norm(WORKER_NAMES[3]), nc.norm(WORKER_NAMES[3].replace(")0>", ")2>")))
        self.assertEqual(nc.template_numbers(WORKER_NAMES[3]), ("0", "1", "0"))
        self.assertNotEqual(nc.norm(self.BF16_MUL), nc.norm(WORKER_NAMES[1]))  # vec 8 vs vec 4
        header, data = ncu_rows()  # the FP32 export has no twin of the BF16 kernel
        self.assertFalse({n for n in (r[header.index("Kernel Name")] for r in data)
                          if nc.norm(n) == nc.norm(self.BF16_MUL)})


class LaunchesPerStep(unittest.TestCase):
    def test_first_of_each_step_when_steps_split_evenly(self):
        self.assertEqual(nc.first_per_step(list(range(12)), 3), [0, 4, 8])
        self.assertEqual(nc.first_per_step(list(range(12)), 5), [0])  # uneven: just the first
        self.assertEqual(nc.first_per_step(list(range(12)), 1), [0])
        self.assertEqual(nc.median_of([{"duration_ns": 3.0}, {"duration_ns": 1.0}, {"duration_ns": 2.0}]),
                         {"duration_ns": 2.0})


class CoveredAndCompare(unittest.TestCase):
    def run_tool(self, *args):
        return subprocess.run([sys.executable, os.path.join(ROOT, "bench/gpu/ncu_compare.py"), *args],
                              capture_output=True, text=True)

    def test_a_run_equal_to_ncu_agrees_and_three_steps_are_not_covered_by_a_one_step_csv(self):
        header, data = ncu_rows()
        r = data[0]
        name = r[header.index("Kernel Name")]
        grid = [int(x) for x in re.findall(r"\d+", r[header.index("Grid Size")])]
        theirs = nc.median_of(nc.load_ncu(CSV)[(nc.norm(name), tuple(grid))][:1])
        values = [{"scope": "kernel:" + name, "name": m, "value": v} for m, v in theirs.items()]
        values += [{"scope": "kernel:" + name, "name": f"launch.grid_{a}", "value": g} for a, g in zip("xyz", grid)]
        values.append({"scope": "kernel:" + name, "name": "launch.samples", "value": 1})
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
            f.write(json.dumps({"kernels": {"kernels": [{"name": name, "total_ns": 100}]}}) + "\n")
            f.write(json.dumps({"metrics": {"values": values}}) + "\n")
        try:
            same = self.run_tool("compare", f.name, CSV, "--top", "1")
            self.assertEqual(same.returncode, 0, same.stdout + same.stderr)
            self.assertIn("compared 9 values over 1 kernels: 9 agree, 0 disagree", same.stdout)
            self.assertEqual(self.run_tool("covered", f.name, CSV, "--top", "1").returncode, 0)
            three = self.run_tool("covered", f.name, CSV, "--top", "1", "--steps", "3")
            self.assertEqual(three.returncode, 1)
            self.assertIn("covered: 0 of 1 kernels", three.stdout)
        finally:
            os.unlink(f.name)


if __name__ == "__main__":
    unittest.main()
