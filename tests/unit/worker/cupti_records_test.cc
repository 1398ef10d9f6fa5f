// CUPTI-shaped records (the real CUPTI 13 structs, filled by hand) through ConvertActivity
// into the KernelAggregator: exact aggregates and op attribution via correlation, no GPU.
#include "agent/profiler/cupti_records.h"

#include <cupti.h>

#include <cstring>
#include <vector>

#include "agent/profiler/kernel_aggregator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace medprof::profiler {
namespace {

using ::testing::ElementsAre;

#if CUPTI_API_VERSION >= 130000
using KernelRecord = CUpti_ActivityKernel10;
using MemcpyRecord = CUpti_ActivityMemcpy6;
using MemsetRecord = CUpti_ActivityMemset4;
#else
using KernelRecord = CUpti_ActivityKernel4;
using MemcpyRecord = CUpti_ActivityMemcpy;
using MemsetRecord = CUpti_ActivityMemset;
#endif

KernelRecord MakeKernel(const char* name, uint64_t start, uint64_t end, uint32_t corr) {
  KernelRecord k;
  std::memset(&k, 0, sizeof k);
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.name = name;
  k.start = start;
  k.end = end;
  k.correlationId = corr;
  k.deviceId = 0;
  k.streamId = 7;
  k.gridX = 64; k.gridY = 4; k.gridZ = 2;
  k.blockX = 128; k.blockY = 1; k.blockZ = 1;
  k.registersPerThread = 40;
  k.staticSharedMemory = 4096;
  k.dynamicSharedMemory = 12288;
  k.sharedMemoryExecuted = 65536;
  return k;
}

CUpti_ActivityExternalCorrelation MakeCorrelation(uint32_t corr, uint64_t external,
                                                  CUpti_ExternalCorrelationKind kind =
                                                      CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) {
  CUpti_ActivityExternalCorrelation e;
  std::memset(&e, 0, sizeof e);
  e.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  e.externalKind = kind;
  e.externalId = external;
  e.correlationId = corr;
  return e;
}

template <typename T>
TraceRecord Convert(const T& record) {
  TraceRecord out;
  EXPECT_TRUE(ConvertActivity(reinterpret_cast<const CUpti_Activity*>(&record), &out));
  return out;
}

TEST(CuptiRecordsTest, ConvertsKernelRecordFields) {
  const KernelRecord k = MakeKernel("_Z6kernelPf", 1000, 1750, 42);
  const TraceRecord r = Convert(k);
  EXPECT_EQ(r.kind, RecordKind::kKernel);
  EXPECT_EQ(r.name, "_Z6kernelPf");
  EXPECT_EQ(r.start_ns, 1000u);
  EXPECT_EQ(r.end_ns, 1750u);
  EXPECT_EQ(r.correlation_id, 42u);
  EXPECT_EQ(r.stream_id, 7u);
  EXPECT_THAT(r.grid, ElementsAre(64, 4, 2));
  EXPECT_THAT(r.block, ElementsAre(128, 1, 1));
  EXPECT_EQ(r.registers_per_thread, 40);
  EXPECT_EQ(r.static_shared_bytes, 4096);
  EXPECT_EQ(r.dynamic_shared_bytes, 12288);
  EXPECT_EQ(r.shared_carveout_bytes, 65536u);
}

TEST(CuptiRecordsTest, ConvertsCopiesSetsApisAndFiltersOtherKinds) {
  MemcpyRecord m;
  std::memset(&m, 0, sizeof m);
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH;
  m.bytes = 1 << 20;
  m.start = 10;
  m.end = 30;
  m.correlationId = 5;
  TraceRecord r = Convert(m);
  EXPECT_EQ(r.kind, RecordKind::kMemcpy);
  EXPECT_EQ(r.name, "[memcpy DtoH]");
  EXPECT_EQ(r.bytes, 1u << 20);
  EXPECT_EQ(r.correlation_id, 5u);

  MemsetRecord s;
  std::memset(&s, 0, sizeof s);
  s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  s.bytes = 512;
  s.start = 40;
  s.end = 41;
  s.correlationId = 6;
  r = Convert(s);
  EXPECT_EQ(r.kind, RecordKind::kMemset);
  EXPECT_EQ(r.name, "[memset]");
  EXPECT_EQ(r.bytes, 512u);

  CUpti_ActivityAPI api;
  std::memset(&api, 0, sizeof api);
  api.kind = CUPTI_ACTIVITY_KIND_DRIVER;
  api.cbid = CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel;
  api.start = 3;
  api.end = 4;
  api.correlationId = 9;
  api.threadId = 1234;
  r = Convert(api);
  EXPECT_EQ(r.kind, RecordKind::kApi);
  EXPECT_TRUE(r.api_driver);
  EXPECT_EQ(r.api_cbid, static_cast<uint32_t>(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));
  EXPECT_EQ(r.thread_id, 1234u);

  // Other external-correlation kinds (OpenACC, CUSTOM1) and other record kinds are skipped.
  const auto openacc = MakeCorrelation(1, 2, CUPTI_EXTERNAL_CORRELATION_KIND_OPENACC);
  TraceRecord skipped;
  EXPECT_FALSE(ConvertActivity(reinterpret_cast<const CUpti_Activity*>(&openacc), &skipped));
  CUpti_ActivityStream stream;
  std::memset(&stream, 0, sizeof stream);
  stream.kind = CUPTI_ACTIVITY_KIND_STREAM;
  EXPECT_FALSE(ConvertActivity(reinterpret_cast<const CUpti_Activity*>(&stream), &skipped));
}

TEST(CuptiRecordsTest, AggregatesConvertedRecordsWithOpAttribution) {
  KernelAggregatorOptions o;
  o.device = DeviceLimits::ForGpu("H100");
  // External ids are OpAggregator ids + 1, as the CUPTI backend pushes them.
  OpAggregator ops;
  const uint32_t conv = ops.Intern("aten::cudnn_convolution", "fwd");
  const uint32_t gn = ops.Intern("aten::native_group_norm", "fwd");
  KernelAggregator agg(o, [&ops](uint64_t ext, OpKey* out) {
    return ext > 0 && ops.Lookup(static_cast<uint32_t>(ext - 1), out);
  });
  agg.BeginStep(0, true, 0);
  std::vector<TraceRecord> batch = {
      Convert(MakeCorrelation(1, conv + 1)), Convert(MakeKernel("_Z6kernelPf", 100, 400, 1)),
      Convert(MakeCorrelation(2, conv + 1)), Convert(MakeKernel("_Z6kernelPf", 500, 600, 2)),
      Convert(MakeCorrelation(3, gn + 1)),   Convert(MakeKernel("_Z6kernelPf", 700, 1400, 3)),
  };
  agg.Add(batch);
  agg.EndStep(10'000);
  agg.Finish();
  const v1::KernelAggregates a = agg.Snapshot();
  ASSERT_EQ(a.kernels_size(), 2);
  // GroupNorm's row first (700 ns total), then the convolution's (400 ns).
  EXPECT_EQ(a.kernels(0).name(), "kernel(float*)");
  EXPECT_EQ(a.kernels(0).op(), "aten::native_group_norm");
  EXPECT_EQ(a.kernels(0).category(), "norm");
  EXPECT_EQ(a.kernels(0).count(), 1);
  EXPECT_EQ(a.kernels(0).total_ns(), 700);
  EXPECT_EQ(a.kernels(1).op(), "aten::cudnn_convolution");
  EXPECT_EQ(a.kernels(1).phase(), "fwd");
  EXPECT_EQ(a.kernels(1).category(), "conv");
  EXPECT_EQ(a.kernels(1).count(), 2);
  EXPECT_EQ(a.kernels(1).total_ns(), 400);
  EXPECT_EQ(a.kernels(1).min_ns(), 100);
  EXPECT_EQ(a.kernels(1).max_ns(), 300);
  EXPECT_EQ(a.kernels(1).shared_bytes(), 16384);
  EXPECT_EQ(a.kernels(1).registers(), 40);
  // H100, 128 threads (4 warps), 40 regs -> 1280/warp -> 12 warps per sub-partition -> 48
  // warps -> 12 blocks; shared: 16384 + 1024 = 17408 B per block in a 64 KiB carveout -> 3
  // blocks -> 12 of 64 warps.
  EXPECT_DOUBLE_EQ(a.kernels(1).theoretical_occupancy(), 12.0 / 64.0);
}

}  // namespace
}  // namespace medprof::profiler
