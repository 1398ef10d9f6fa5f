// medprof's occupancy formula against NVIDIA's reference implementation (the header-only
// cuda_occupancy.h of the CUDA toolkit) over a grid of launch shapes on V100, A100 and H100.
#include <cuda_occupancy.h>

#include <string>

#include "agent/profiler/occupancy.h"
#include "gtest/gtest.h"

namespace medprof::profiler {
namespace {

cudaOccDeviceProp ToOcc(const DeviceLimits& d) {
  cudaOccDeviceProp p;
  p.computeMajor = d.cc_major;
  p.computeMinor = d.cc_minor;
  p.maxThreadsPerBlock = d.max_threads_per_block;
  p.maxThreadsPerMultiprocessor = d.max_threads_per_sm;
  p.regsPerBlock = d.regs_per_block;
  p.regsPerMultiprocessor = d.regs_per_sm;
  p.warpSize = d.warp_size;
  p.sharedMemPerBlock = 48 * 1024;
  p.sharedMemPerMultiprocessor = static_cast<size_t>(d.smem_per_sm);
  p.numSms = 100;
  p.sharedMemPerBlockOptin = static_cast<size_t>(d.smem_per_block_optin);
  p.reservedSharedMemPerBlock = static_cast<size_t>(d.reserved_smem_per_block);
  return p;
}

TEST(OccupancyReferenceTest, MatchesCudaOccupancyCalculator) {
  int compared = 0;
  for (const std::string gpu : {"V100", "A100", "H100"}) {
    const DeviceLimits d = DeviceLimits::ForGpu(gpu);
    const cudaOccDeviceProp prop = ToOcc(d);
    const cudaOccDeviceState state;
    for (int threads : {32, 64, 96, 128, 160, 256, 384, 512, 640, 768, 1024}) {
      for (int regs : {0, 16, 24, 32, 40, 64, 72, 96, 128, 168, 255}) {
        for (int smem : {0, 1000, 8192, 16384, 30000, 49152, 65536, 100000}) {
          cudaOccFuncAttributes attr;
          attr.maxThreadsPerBlock = 1024;
          attr.numRegs = regs;
          attr.sharedSizeBytes = 0;
          attr.partitionedGCConfig = PARTITIONED_GC_OFF;
          attr.shmemLimitConfig = FUNC_SHMEM_LIMIT_OPTIN;
          attr.maxDynamicSharedSizeBytes = prop.sharedMemPerBlockOptin;
          attr.numBlockBarriers = 1;
          cudaOccResult ref;
          ASSERT_EQ(cudaOccMaxActiveBlocksPerMultiprocessor(&ref, &prop, &attr, &state, threads,
                                                            static_cast<size_t>(smem)),
                    CUDA_OCC_SUCCESS);
          LaunchShape l;
          l.threads_per_block = threads;
          l.registers_per_thread = regs;
          l.shared_bytes = smem;
          const Occupancy mine = TheoreticalOccupancy(d, l);
          EXPECT_EQ(mine.active_blocks, ref.activeBlocksPerMultiprocessor)
              << gpu << " threads=" << threads << " regs=" << regs << " smem=" << smem
              << " (medprof limiter " << mine.limiter << ")";
          ++compared;
        }
      }
    }
  }
  EXPECT_EQ(compared, 3 * 11 * 11 * 8);
}

}  // namespace
}  // namespace medprof::profiler
