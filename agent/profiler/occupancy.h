// Theoretical occupancy of a kernel launch, computed from what a CUPTI kernel record carries
// (block size, registers per thread, static + dynamic shared memory, the shared-memory carveout
// the driver chose) and the device's limits — no function pointer needed, unlike
// cudaOccupancyMaxActiveBlocksPerMultiprocessor, which the trace layer cannot call for
// kernels it did not compile.
//
// The formula follows NVIDIA's occupancy calculator (cuda_occupancy.h) for CC >= 7.0; resident
// blocks per SM = min of four limits:
//   warps   W = ceil(threads / warp_size);           blocks_warps = floor(max_warps_per_sm / W)
//   blocks  blocks_sm = max_blocks_per_sm
//   regs    R = roundup(regs_per_thread * warp_size, 256) registers per warp;
//           0 blocks when R * roundup(W, 4) > regs_per_block or regs_per_thread > 255 (256 for
//           CC >= 7); else warps per SM = floor(regs_per_sm / 4 / R) * 4 (four sub-partitions,
//           two on CC 6.0) and blocks_regs = floor(that / W)
//   smem    S = roundup(static + dynamic + reserved_per_block, G) with G = 128 bytes on
//           CC >= 8, 256 before; 0 blocks when S > smem_per_block_optin + reserved;
//           blocks_smem = floor(carveout / S), carveout = the record's executed shared-memory
//           size when it is at least S, else the SM's full shared memory
// occupancy = blocks * W / max_warps_per_sm, in 0..1. Block-barrier and virtual-resource
// limits (not visible in trace records) are not modelled; partitioned global caching (CC 5.2
// only) neither.
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>

namespace medprof::profiler {

// Device limits, as cudaGetDeviceProperties reports them. All zero = unknown.
struct DeviceLimits {
  int cc_major = 0;
  int cc_minor = 0;
  int warp_size = 32;
  int max_threads_per_block = 0;
  int max_threads_per_sm = 0;
  int max_blocks_per_sm = 0;
  int regs_per_block = 0;
  int regs_per_sm = 0;
  int64_t smem_per_sm = 0;              // sharedMemPerMultiprocessor
  int64_t smem_per_block_optin = 0;     // sharedMemPerBlockOptin
  int64_t reserved_smem_per_block = 0;  // reservedSharedMemPerBlock

  bool known() const { return cc_major > 0 && max_threads_per_sm > 0 && warp_size > 0; }
  // Published limits of a few GPUs, for tests and offline estimates: "V100", "A100", "H100".
  static DeviceLimits ForGpu(const std::string& name);
};

struct LaunchShape {
  int64_t threads_per_block = 0;
  int registers_per_thread = 0;
  int64_t shared_bytes = 0;          // static + dynamic shared memory per block
  int64_t smem_carveout_bytes = 0;   // shared memory per SM the driver configured (0 = unknown)
};

struct Occupancy {
  int active_blocks = 0;   // resident blocks per SM
  int active_warps = 0;
  int max_warps = 0;
  double occupancy = 0.0;  // active_warps / max_warps
  // What bounds it: "warps" | "blocks" | "registers" | "shared_memory" | "invalid" | "unknown".
  std::string limiter;
};

Occupancy TheoreticalOccupancy(const DeviceLimits& device, const LaunchShape& launch);

}  // namespace medprof::profiler
