#include "agent/profiler/occupancy.h"

#include "gtest/gtest.h"

namespace medprof::profiler {
namespace {

Occupancy On(const char* gpu, int threads, int regs, int smem, int carveout = 0) {
  LaunchShape l;
  l.threads_per_block = threads;
  l.registers_per_thread = regs;
  l.shared_bytes = smem;
  l.smem_carveout_bytes = carveout;
  return TheoreticalOccupancy(DeviceLimits::ForGpu(gpu), l);
}

TEST(OccupancyTest, WarpLimitedFullOccupancy) {
  const Occupancy o = On("H100", 256, 32, 0);
  EXPECT_EQ(o.active_blocks, 8);
  EXPECT_EQ(o.active_warps, 64);
  EXPECT_EQ(o.max_warps, 64);
  EXPECT_DOUBLE_EQ(o.occupancy, 1.0);
  EXPECT_EQ(o.limiter, "warps");
}

TEST(OccupancyTest, RegisterLimited) {
  // 128 regs x 32 = 4096 per warp; 16384 per sub-partition -> 4 warps x 4 = 16 warps; 4-warp blocks.
  const Occupancy o = On("A100", 128, 128, 0);
  EXPECT_EQ(o.active_blocks, 4);
  EXPECT_DOUBLE_EQ(o.occupancy, 16.0 / 64.0);
  EXPECT_EQ(o.limiter, "registers");
}

TEST(OccupancyTest, SharedMemoryLimitedUsesCarveout) {
  // 48 KiB + 1 KiB reserved = 50176 B per block; carveout 100 KiB -> 2 blocks of 4 warps.
  const Occupancy o = On("H100", 128, 32, 48 * 1024, 100 * 1024);
  EXPECT_EQ(o.active_blocks, 2);
  EXPECT_DOUBLE_EQ(o.occupancy, 8.0 / 64.0);
  EXPECT_EQ(o.limiter, "shared_memory");
  // Without a carveout the SM's full 228 KiB decides: 4 blocks.
  EXPECT_EQ(On("H100", 128, 32, 48 * 1024).active_blocks, 4);
}

TEST(OccupancyTest, BlockLimitedSmallBlocks) {
  // 32-thread blocks: warps allow 64 blocks, the SM holds 32 (V100: 32).
  const Occupancy o = On("V100", 32, 16, 0);
  EXPECT_EQ(o.active_blocks, 32);
  EXPECT_DOUBLE_EQ(o.occupancy, 0.5);
  EXPECT_EQ(o.limiter, "blocks");
}

TEST(OccupancyTest, ImpossibleLaunchesAndUnknownDevices) {
  EXPECT_EQ(On("H100", 2048, 32, 0).limiter, "invalid");
  EXPECT_EQ(On("H100", 1024, 255, 0).active_blocks, 0);  // 255 regs x 1024 threads > 64 K
  EXPECT_EQ(On("H100", 128, 32, 300 * 1024).active_blocks, 0);  // over the opt-in limit
  const Occupancy u = TheoreticalOccupancy(DeviceLimits{}, LaunchShape{256, 32, 0, 0});
  EXPECT_EQ(u.limiter, "unknown");
  EXPECT_DOUBLE_EQ(u.occupancy, 0.0);
}

}  // namespace
}  // namespace medprof::profiler
