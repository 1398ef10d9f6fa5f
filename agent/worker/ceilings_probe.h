// The roofline ceilings of the GPU this worker runs on, measured (docs/metrics.md "Roofline"):
//   tensor_tf32, tensor_bf16, fp32   dense GEMM rates of the precisions the presets use: at::mm of
//                                    two kGemmN x kGemmN matrices (TF32 on, BF16, FP32 with TF32
//                                    off — cuBLAS's CUDA-core SGEMM), best of kGemmReps, 2 n^3 FLOPs
//   dram                             a device-to-device cudaMemcpyAsync of 8x the L2 size (at least
//                                    256 MiB), read + write bytes, best of kCopyReps
//   l2                               an L2-resident read (one buffer of L2/2, .cg loads,
//                                    bandwidth_kernels.h), read bytes — the roofline's L2 bytes are
//                                    what SMs read from L2 — best of kCopyReps
// Each Ceiling gets `measured` and its `method`; datasheet values are the caller's
// (common/chip_datasheet.h). About 1 s on an H200 (bench/gpu/roofline_check.sh prints it); the
// worker runs it after creating its profiler and before the first step (CUPTI must see the CUDA
// context created: see run.cc), so its kernels count in no step; it hands the caching allocator's
// blocks back afterwards so the run's peak memory is its own.
//
// Needs a CUDA build (MEDPROF_HAVE_CUDA), else UNIMPLEMENTED; LibTorch without CUDA (Debian's)
// compiles it and fails the GEMMs at run time with LibTorch's error. A CUDA or LibTorch error is
// returned as a Status naming the step. Touches
// process-global LibTorch state (the TF32 flag, restored): call it from the worker's main thread
// before the workload is set up.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "agent/profiler/gpu_probe.h"
#include "medprof/v1/workload.pb.h"

namespace medprof::worker {

inline constexpr int kGemmN = 8192, kGemmReps = 5, kCopyReps = 5;

// Measures on CUDA device `device` (the current one of this process).
absl::StatusOr<v1::Ceilings> MeasureCeilings(int device);

// A run's Environment.ceilings. On the CPU backend (`on_gpu` false): no ceilings and a note
// saying so. On a GPU: the node's measurement — from the cache in `cache_dir` (the agent passes
// its work directory's cache folder in MEDPROF_CACHE_DIR; "" = measure, cache nothing), keyed on
// the GPU's UUID, the NVIDIA driver, the maximum SM and memory clocks and the power cap NVML
// reports — with the datasheet's values beside it (common/chip_datasheet.h). A failed measurement
// keeps the datasheet values and says why in `note`; never fails the run.
v1::Ceilings NodeCeilings(bool on_gpu, const profiler::GpuInfo& gpu, const std::string& cache_dir);

}  // namespace medprof::worker
