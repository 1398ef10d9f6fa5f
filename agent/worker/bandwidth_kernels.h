// The L2 bandwidth kernel of the ceilings probe (ceilings_probe.h): plain CUDA, no LibTorch and no
// Abseil (nvcc compiles it), so the probe's checked calls and timing stay in C++.
//
// Thread-safe as CUDA launches are.
#pragma once

#include <cstddef>

#include <cuda_runtime_api.h>

namespace medprof::worker {

// Launches one kernel that copies a -> b, then b -> a, ... `rounds` times (`n` float4 each way),
// grid-stride with each thread on its own elements (no race), loading and storing with the
// .cg (cache-global) qualifier so the traffic goes to L2 and not to L1, through volatile PTX so the
// compiler neither drops nor forwards any of it. With a and b together well inside L2, every byte
// after the first round is L2 traffic: 2 * n * 16 bytes a round (read + write).
cudaError_t LaunchL2PingPong(void* a, void* b, size_t n, int rounds, int blocks, int threads, cudaStream_t stream);

}  // namespace medprof::worker
