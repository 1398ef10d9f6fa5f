#include "agent/profiler/occupancy.h"

#include <algorithm>
#include <climits>

namespace medprof::profiler {
namespace {

int64_t DivUp(int64_t x, int64_t y) { return (x + y - 1) / y; }
int64_t RoundUp(int64_t x, int64_t y) { return DivUp(x, y) * y; }

int SubPartitions(const DeviceLimits& d) { return (d.cc_major == 6 && d.cc_minor == 0) ? 2 : 4; }
int MaxRegsPerThread(const DeviceLimits& d) { return d.cc_major >= 7 ? 256 : 255; }
int SmemGranularity(const DeviceLimits& d) { return d.cc_major >= 8 ? 128 : 256; }
constexpr int kRegGranularity = 256;

}  // namespace

DeviceLimits DeviceLimits::ForGpu(const std::string& name) {
  DeviceLimits d;
  d.warp_size = 32;
  d.max_threads_per_block = 1024;
  d.max_threads_per_sm = 2048;
  d.max_blocks_per_sm = 32;
  d.regs_per_block = 65536;
  d.regs_per_sm = 65536;
  if (name == "V100") {
    d.cc_major = 7; d.cc_minor = 0;
    d.smem_per_sm = 98304; d.smem_per_block_optin = 98304; d.reserved_smem_per_block = 0;
  } else if (name == "A100") {
    d.cc_major = 8; d.cc_minor = 0;
    d.smem_per_sm = 167936; d.smem_per_block_optin = 166912; d.reserved_smem_per_block = 1024;
  } else if (name == "H100") {
    d.cc_major = 9; d.cc_minor = 0;
    d.smem_per_sm = 233472; d.smem_per_block_optin = 232448; d.reserved_smem_per_block = 1024;
  } else {
    return DeviceLimits{};
  }
  return d;
}

Occupancy TheoreticalOccupancy(const DeviceLimits& d, const LaunchShape& l) {
  Occupancy out;
  if (!d.known()) {
    out.limiter = "unknown";
    return out;
  }
  out.max_warps = d.max_threads_per_sm / d.warp_size;
  if (l.threads_per_block <= 0 ||
      (d.max_threads_per_block > 0 && l.threads_per_block > d.max_threads_per_block)) {
    out.limiter = "invalid";
    return out;
  }
  const int64_t warps = DivUp(l.threads_per_block, d.warp_size);

  // Warps and blocks.
  int64_t best = out.max_warps / warps;
  out.limiter = "warps";
  if (d.max_blocks_per_sm > 0 && d.max_blocks_per_sm < best) {
    best = d.max_blocks_per_sm;
    out.limiter = "blocks";
  }

  // Registers.
  int64_t by_regs = INT_MAX;
  const int64_t regs_per_warp = RoundUp(int64_t{l.registers_per_thread} * d.warp_size, kRegGranularity);
  if (regs_per_warp > 0) {
    const int sub = SubPartitions(d);
    const int64_t assumed_per_block = regs_per_warp * RoundUp(warps, sub);
    if (l.registers_per_thread > MaxRegsPerThread(d) ||
        (d.regs_per_block > 0 && (assumed_per_block > d.regs_per_block ||
                                  regs_per_warp * warps > d.regs_per_block))) {
      by_regs = 0;
    } else {
      const int64_t warps_per_sub = (d.regs_per_sm / sub) / regs_per_warp;
      by_regs = (warps_per_sub * sub) / warps;
    }
  }
  if (by_regs < best) {
    best = by_regs;
    out.limiter = "registers";
  }

  // Shared memory.
  int64_t by_smem = INT_MAX;
  const int64_t total = l.shared_bytes + d.reserved_smem_per_block;
  const int64_t alloc = RoundUp(total, SmemGranularity(d));
  if (l.shared_bytes > 0 || d.reserved_smem_per_block > 0) {
    const int64_t per_block_limit =
        std::max(d.smem_per_block_optin, int64_t{0}) + d.reserved_smem_per_block;
    if (d.smem_per_block_optin > 0 && alloc > per_block_limit) {
      by_smem = 0;
    } else {
      int64_t per_sm = d.smem_per_sm;
      if (l.smem_carveout_bytes >= alloc && l.smem_carveout_bytes > 0) {
        per_sm = std::min(l.smem_carveout_bytes, d.smem_per_sm > 0 ? d.smem_per_sm : l.smem_carveout_bytes);
      }
      by_smem = alloc > 0 ? per_sm / alloc : INT_MAX;
    }
  }
  if (by_smem < best) {
    best = by_smem;
    out.limiter = "shared_memory";
  }

  out.active_blocks = static_cast<int>(std::max<int64_t>(best, 0));
  out.active_warps = static_cast<int>(out.active_blocks * warps);
  out.occupancy = out.max_warps > 0 ? static_cast<double>(out.active_warps) / out.max_warps : 0.0;
  if (out.occupancy > 1.0) out.occupancy = 1.0;
  return out;
}

}  // namespace medprof::profiler
