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

__device__ __forceinline__ void StoreCg(float4* p, float4 v) {
  asm volatile("st.global.cg.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w)
               : "memory");
}

__global__ void L2PingPong(float4* a, float4* b, size_t n, int rounds) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int r = 0; r < rounds; ++r) {
    const float4* src = (r & 1) ? b : a;
    float4* dst = (r & 1) ? a : b;
    for (size_t i = first; i < n; i += stride) StoreCg(dst + i, LoadCg(src + i));
  }
}

}  // namespace

cudaError_t LaunchL2PingPong(void* a, void* b, size_t n, int rounds, int blocks, int threads, cudaStream_t stream) {
  L2PingPong<<<blocks, threads, 0, stream>>>(static_cast<float4*>(a), static_cast<float4*>(b), n, rounds);
  return cudaGetLastError();
}

}  // namespace medprof::worker
