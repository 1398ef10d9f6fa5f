// Backend choice: the rules with fake probes, and the real decision on this machine — where
// (without an NVIDIA driver) cudaGetDeviceCount fails and the worker must fall back to the CPU
// backend with the cause recorded, never crash.
#include "agent/profiler/backend.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

#if MEDPROF_HAVE_CUDA
#include "agent/profiler/cupti_tracer.h"
#endif

namespace medprof::profiler {
namespace {

using ::medprof::testing::IsOk;
using ::medprof::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::StartsWith;

GpuProbe FakeGpu() {
  GpuProbe p;
  p.available = true;
  p.device_count = 1;
  p.gpu.name = "NVIDIA H200";
  return p;
}

GpuProbe NoGpu() {
  GpuProbe p;
  p.reason = "no GPU: cudaGetDeviceCount(&count) failed: cudaErrorInsufficientDriver (35): x";
  return p;
}

TEST(ChooseBackendTest, AutoUsesTheGpuWhenTorchCanAndCpuOtherwise) {
  MEDPROF_ASSERT_OK_AND_ASSIGN(BackendChoice gpu, ChooseBackend(v1::DEVICE_KIND_UNSPECIFIED, FakeGpu(), true));
  EXPECT_EQ(gpu.device, v1::DEVICE_KIND_CUDA);
  EXPECT_EQ(gpu.backend, "cupti");
  EXPECT_EQ(gpu.reason, "");

  MEDPROF_ASSERT_OK_AND_ASSIGN(BackendChoice none, ChooseBackend(v1::DEVICE_KIND_UNSPECIFIED, NoGpu(), true));
  EXPECT_EQ(none.device, v1::DEVICE_KIND_CPU);
  EXPECT_EQ(none.backend, "cpu");
  EXPECT_EQ(none.reason, NoGpu().reason);

  MEDPROF_ASSERT_OK_AND_ASSIGN(BackendChoice cpu_torch, ChooseBackend(v1::DEVICE_KIND_UNSPECIFIED, FakeGpu(), false));
  EXPECT_EQ(cpu_torch.device, v1::DEVICE_KIND_CPU);
  EXPECT_THAT(cpu_torch.reason, HasSubstr("CPU-only LibTorch"));
  EXPECT_THAT(cpu_torch.reason, HasSubstr("NVIDIA H200"));
}

TEST(ChooseBackendTest, ExplicitDevices) {
  MEDPROF_ASSERT_OK_AND_ASSIGN(BackendChoice cpu, ChooseBackend(v1::DEVICE_KIND_CPU, FakeGpu(), true));
  EXPECT_EQ(cpu.device, v1::DEVICE_KIND_CPU);
  EXPECT_EQ(cpu.reason, "device cpu requested");
  EXPECT_THAT(ChooseBackend(v1::DEVICE_KIND_CUDA, NoGpu(), true),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("device: cuda requested, but no GPU: cudaGetDeviceCount")));
}

TEST(RealMachineTest, NoDriverFallsBackToCpuWithTheCauseRecorded) {
  const GpuProbe probe = ProbeGpu();
  if (probe.available) GTEST_SKIP() << "a GPU is usable here: " << probe.gpu.name;
  EXPECT_THAT(probe.reason, StartsWith("no GPU: "));
#if MEDPROF_HAVE_CUDA
  // The CUDA runtime call and its error are named (error 35 without a driver).
  EXPECT_THAT(probe.reason, HasSubstr("cudaGetDeviceCount"));
#endif
  MEDPROF_ASSERT_OK_AND_ASSIGN(BackendChoice choice,
                               ChooseBackend(v1::DEVICE_KIND_UNSPECIFIED, probe, TorchHasCuda()));
  EXPECT_EQ(choice.device, v1::DEVICE_KIND_CPU);
  EXPECT_EQ(choice.backend, "cpu");
  MEDPROF_ASSERT_OK_AND_ASSIGN(CreatedProfiler created, CreateProfiler(choice, probe));
  EXPECT_EQ(created.profiler->backend(), "cpu");
  EXPECT_EQ(created.fallback_reason, "");
  const std::vector<v1::LayerStatus> layers = created.profiler->Layers();
  ASSERT_EQ(layers.size(), 4u);
  EXPECT_EQ(layers[0].layer(), "cpu");
  EXPECT_TRUE(layers[0].ran());
  for (size_t i = 1; i < layers.size(); ++i) {
    EXPECT_FALSE(layers[i].ran());
    EXPECT_THAT(layers[i].reason(), StartsWith("no GPU: ")) << layers[i].layer();
  }
  EXPECT_FALSE(created.profiler->Kernels().has_value());
  v1::Environment env;
  created.profiler->DescribeEnvironment(&env);
  EXPECT_EQ(env.gpu_name(), "cpu");
#if MEDPROF_HAVE_CUDA
  EXPECT_THAT(env.cupti_library(), HasSubstr("libcupti"));
#endif
}

#if MEDPROF_HAVE_CUDA
TEST(RealMachineTest, CuptiWithoutDriverFailsCleanlyAndTheProfilerFallsBack) {
  const GpuProbe probe = ProbeGpu();
  if (probe.available) GTEST_SKIP() << "a GPU is usable here: " << probe.gpu.name;
  // Enabling CUPTI without a driver fails with the call text; a second try fails the same way
  // (nothing was left half-enabled).
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto tracer = CuptiTracer::Start(CuptiTracerOptions{}, nullptr, nullptr);
    ASSERT_FALSE(tracer.ok());
    EXPECT_THAT(std::string(tracer.status().message()), HasSubstr("cupti")) << tracer.status();
    EXPECT_THAT(std::string(tracer.status().message()), HasSubstr("failed: CUPTI_ERROR")) << tracer.status();
  }
  // Forcing the CUPTI backend here: the factory falls back to the CPU backend and says why.
  BackendChoice forced;
  forced.device = v1::DEVICE_KIND_CUDA;
  forced.backend = "cupti";
  MEDPROF_ASSERT_OK_AND_ASSIGN(CreatedProfiler created, CreateProfiler(forced, probe));
  EXPECT_EQ(created.profiler->backend(), "cpu");
  EXPECT_THAT(created.fallback_reason, HasSubstr("CUPTI activity tracing unavailable"));
  EXPECT_THAT(created.profiler->Layers()[1].reason(), HasSubstr("CUPTI activity tracing unavailable"));
  EXPECT_THAT(created.profiler->Start(), IsOk());
  EXPECT_THAT(created.profiler->Stop(), IsOk());
}

TEST(CuptiTracerTest, RejectsOutOfRangeOptions) {
  CuptiTracerOptions o;
  o.buffer_bytes = 1024;
  EXPECT_THAT(CuptiTracer::Start(o, nullptr, nullptr).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("buffer_bytes")));
  o = CuptiTracerOptions{};
  o.max_buffers = 1;
  EXPECT_THAT(CuptiTracer::Start(o, nullptr, nullptr).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_buffers")));
}
#endif

}  // namespace
}  // namespace medprof::profiler
