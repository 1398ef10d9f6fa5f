// Element access shared by medprof's CUDA kernels (group_norm_kernels.cu, volume_kernels.cu):
// FP32 or BF16 elements read into FP32 registers and written back with round-to-nearest, one at
// a time or 4 consecutive ones in a single 16- or 8-byte access (the caller guarantees the
// 4-element alignment). Device code only; include from .cu files.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace medprof::meddpm::access {


template <typename T>
__device__ __forceinline__ float ToF(T v);
template <>
__device__ __forceinline__ float ToF<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ float ToF<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

template <typename T>
__device__ __forceinline__ T FromF(float v);
template <>
__device__ __forceinline__ float FromF<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromF<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// V consecutive elements; V == 4 needs a 4-element-aligned address.
template <typename T, int V>
__device__ __forceinline__ void Load(const T* p, float* out) {
#pragma unroll
  for (int k = 0; k < V; ++k) out[k] = ToF(p[k]);
}
template <>
__device__ __forceinline__ void Load<float, 4>(const float* p, float* out) {
  const float4 v = *reinterpret_cast<const float4*>(p);
  out[0] = v.x, out[1] = v.y, out[2] = v.z, out[3] = v.w;
}
template <>
__device__ __forceinline__ void Load<__nv_bfloat16, 4>(const __nv_bfloat16* p, float* out) {
  const uint2 raw = *reinterpret_cast<const uint2*>(p);
  const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.x));
  const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.y));
  out[0] = lo.x, out[1] = lo.y, out[2] = hi.x, out[3] = hi.y;
}

template <typename T, int V>
__device__ __forceinline__ void Store(T* p, const float* v) {
#pragma unroll
  for (int k = 0; k < V; ++k) p[k] = FromF<T>(v[k]);
}
template <>
__device__ __forceinline__ void Store<float, 4>(float* p, const float* v) {
  *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
}
template <>
__device__ __forceinline__ void Store<__nv_bfloat16, 4>(__nv_bfloat16* p, const float* v) {
  const __nv_bfloat162 lo = __floats2bfloat162_rn(v[0], v[1]);
  const __nv_bfloat162 hi = __floats2bfloat162_rn(v[2], v[3]);
  uint2 raw;
  raw.x = *reinterpret_cast<const uint32_t*>(&lo);
  raw.y = *reinterpret_cast<const uint32_t*>(&hi);
  *reinterpret_cast<uint2*>(p) = raw;
}

}  // namespace medprof::meddpm::access
