#include "agent/worker/bandwidth_kernels.h"

namespace medprof::worker {
namespace {

__device__ __forceinline__ float4 LoadCg(const float4* p) {
  float4 v;
  asm volatile("ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "l"(p));
  return v;
}

__global__ void L2Read(const float4* a, size_t n, int rounds, float* sink) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  float acc = 0.0f;
  for (int r = 0; r < rounds; ++r) {
    for (size_t i = first; i < n; i += stride) {
      const float4 v = LoadCg(a + i);
      acc += (v.x + v.y) + (v.z + v.w);
    }
  }
  if (acc == 1.2345f) sink[first] = acc;  // never, on zeroed data; the compiler cannot know it
}

}  // namespace

cudaError_t LaunchL2Read(const void* a, size_t n, int rounds, void* sink, int blocks, int threads,
                         cudaStream_t stream) {
  L2Read<<<blocks, threads, 0, stream>>>(static_cast<const float4*>(a), n, rounds, static_cast<float*>(sink));
  return cudaGetLastError();
}

}  // namespace medprof::worker
