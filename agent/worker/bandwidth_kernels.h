// The L2 bandwidth kernel of the ceilings probe (ceilings_probe.h): plain CUDA, no LibTorch and no
// Abseil (nvcc compiles it), so the probe's checked calls and timing stay in C++.
//
// Thread-safe as CUDA launches are.
#pragma once

#include <cstddef>

#include <cuda_runtime_api.h>

namespace medprof::worker {

// Launches one kernel that reads a[0..n) (`n` float4) `rounds` times, grid-stride, with .cg loads
// through volatile PTX, summing into a register that is stored to sink[thread] only if it equals a
// value zeroed data never gives (so nothing is dropped and nothing is written). With `a` well inside
// L2, every byte after the first round is an L2 -> SM read: n * 16 bytes a round. `sink` holds at
// least blocks * threads floats.
cudaError_t LaunchL2Read(const void* a, size_t n, int rounds, void* sink, int blocks, int threads,
                         cudaStream_t stream);

}  // namespace medprof::worker
