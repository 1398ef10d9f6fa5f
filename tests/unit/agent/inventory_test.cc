#include "agent/agent/inventory.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "agent/agent/host_facts.h"
#include "agent/agent/launcher.h"
#include "agent/agent/nvml_probe.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/agent/test_files.h"

namespace medprof::agent {
namespace {

using ::medprof::agent::testing::FreshDir;
using ::medprof::agent::testing::TempRoot;
using ::medprof::agent::testing::WriteTemp;

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

v1::Device Gpu(int index, const std::string& name, const std::string& uuid) {
  v1::Device d;
  d.set_index(index);
  d.set_kind("cuda");
  d.set_name(name);
  d.set_uuid(uuid);
  d.set_compute_capability("9.0");
  d.set_memory_bytes(150'000'000'000ULL);
  d.set_driver_version("580.65");
  d.set_cuda_driver_version("13.0");
  return d;
}

class FakeProbe : public GpuProbe {
 public:
  explicit FakeProbe(absl::StatusOr<std::vector<v1::Device>> result) : result_(std::move(result)) {}
  absl::StatusOr<std::vector<v1::Device>> Probe() override { return result_; }

 private:
  absl::StatusOr<std::vector<v1::Device>> result_;
};

InventoryInputs Inputs() {
  InventoryInputs in;
  in.cpuinfo_path =
      WriteTemp("cpuinfo",
                "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9654 96-Core "
                "Processor\n\nprocessor\t: 1\nmodel name\t: AMD EPYC 9654 96-Core Processor\n");
  in.meminfo_path = WriteTemp("meminfo", "MemTotal:       131072000 kB\nMemFree:         1000 kB\n");
  in.nvidia_params_path =
      WriteTemp("params", "ResmanDebugLevel: 4294967295\nRmProfilingAdminOnly: 0\nEnableMSI: 1\n");
  return in;
}

// The real probe over the fake NVML of the Slurm tests (tests/slurm/fake_nvml.cc), loaded
// through agent/nvml like the driver's library: every device field it answers, and the
// optional entry points it lacks (MIG, ECC, attributes) left unset.
TEST(InventoryTest, NvmlProbeReadsEveryDeviceOfTheFakeDriver) {
  ::setenv("MEDPROF_FAKE_NVML_GPUS", "2", 1);
  absl::StatusOr<std::vector<v1::Device>> probed = MakeNvmlProbe(MEDPROF_FAKE_NVML)->Probe();
  ::unsetenv("MEDPROF_FAKE_NVML_GPUS");
  ASSERT_TRUE(probed.ok()) << probed.status();
  ASSERT_EQ(probed->size(), 2u);
  const v1::Device& d = (*probed)[1];
  EXPECT_EQ(d.index(), 1);
  EXPECT_EQ(d.kind(), "cuda");
  EXPECT_EQ(d.name(), "medprof fake GPU");
  EXPECT_EQ(d.uuid(), "GPU-fake0000-0000-0000-0000-000000000001");
  EXPECT_EQ(d.compute_capability(), "9.0");
  EXPECT_EQ(d.memory_bytes(), 1ull << 30);
  EXPECT_EQ(d.driver_version(), "999.99-fake");
  EXPECT_EQ(d.cuda_driver_version(), "13.0");
  EXPECT_FALSE(d.mig_enabled());
  EXPECT_FALSE(d.ecc_enabled());
  EXPECT_EQ(d.sm_count(), 0);
}

TEST(InventoryTest, NvmlProbeReportsAFailedInit) {
  ::unsetenv("MEDPROF_FAKE_NVML_GPUS");  // the fake then answers like a machine without a driver
  absl::StatusOr<std::vector<v1::Device>> probed = MakeNvmlProbe(MEDPROF_FAKE_NVML)->Probe();
  ASSERT_FALSE(probed.ok());
  EXPECT_EQ(probed.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(probed.status().message()), HasSubstr("NVML Init() failed: Driver Not Loaded"));
}

TEST(InventoryTest, WithoutNvmlTheAgentOffersTheCpu) {
  // The real NVML probe pointed at a library that does not exist behaves like a machine
  // without an NVIDIA driver.
  std::unique_ptr<GpuProbe> nvml = MakeNvmlProbe("libnvidia-ml-does-not-exist.so.1");
  absl::StatusOr<std::vector<v1::Device>> probed = nvml->Probe();
  ASSERT_FALSE(probed.ok());
  EXPECT_EQ(probed.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(probed.status().message()),
              HasSubstr("no NVIDIA driver: cannot load libnvidia-ml-does-not-exist.so.1"));

  const Inventory inv = BuildInventory(nvml.get(), Inputs());
  EXPECT_FALSE(inv.HasGpu());
  EXPECT_THAT(inv.no_gpu_reason, HasSubstr("cannot load libnvidia-ml-does-not-exist.so.1"));
  ASSERT_EQ(inv.devices.size(), 1u);
  const v1::Device& cpu = inv.devices[0].device;
  EXPECT_EQ(cpu.index(), -1);
  EXPECT_EQ(cpu.kind(), "cpu");
  EXPECT_EQ(cpu.name(), "AMD EPYC 9654 96-Core Processor");
  EXPECT_EQ(cpu.memory_bytes(), 131072000ULL * 1024);
  EXPECT_EQ(inv.devices[0].visible_token, "");
  EXPECT_EQ(inv.Find(-1), &inv.devices[0]);
  EXPECT_EQ(inv.Find(0), nullptr);
}

TEST(InventoryTest, CpuNameFallsBackWhenCpuinfoHasNoModelName) {
  const v1::Device cpu =
      CpuDevice(WriteTemp("arm-cpuinfo", "processor\t: 0\nBogoMIPS\t: 50.00\n"), "/nonexistent");
  EXPECT_EQ(cpu.name(), "cpu");
  EXPECT_EQ(cpu.memory_bytes(), 0u);
}

TEST(InventoryTest, ProbedGpusAreOfferedInOrderWithCounterPermission) {
  FakeProbe probe(std::vector<v1::Device>{
      Gpu(0, "NVIDIA H100 80GB HBM3", "GPU-aaaa"), Gpu(1, "NVIDIA H100 80GB HBM3", "GPU-bbbb"),
      Gpu(2, "NVIDIA H100 80GB HBM3", "GPU-cccc"), Gpu(3, "NVIDIA H100 80GB HBM3", "GPU-dddd")});
  const Inventory inv = BuildInventory(&probe, Inputs());
  ASSERT_TRUE(inv.HasGpu());
  ASSERT_EQ(inv.devices.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(inv.devices[i].device.index(), i);
    EXPECT_EQ(inv.devices[i].device.kind(), "cuda");
    EXPECT_EQ(inv.devices[i].visible_token, std::to_string(i));
    EXPECT_FALSE(inv.devices[i].device.counters_admin_only());  // RmProfilingAdminOnly: 0
  }
  EXPECT_EQ(inv.devices[2].device.uuid(), "GPU-cccc");
}

TEST(InventoryTest, AgentCudaVisibleDevicesSelectsAndRenumbers) {
  FakeProbe probe(std::vector<v1::Device>{Gpu(0, "A", "GPU-aaaa-1111"), Gpu(1, "B", "GPU-bbbb-2222"),
                                          Gpu(2, "C", "GPU-cccc-3333"), Gpu(3, "D", "GPU-dddd-4444")});
  InventoryInputs in = Inputs();
  in.cuda_visible_devices = "2, 0";
  Inventory inv = BuildInventory(&probe, in);
  ASSERT_EQ(inv.devices.size(), 2u);
  EXPECT_EQ(inv.devices[0].device.name(), "C");
  EXPECT_EQ(inv.devices[0].device.index(), 0);
  EXPECT_EQ(inv.devices[0].visible_token, "2");
  EXPECT_EQ(inv.devices[1].device.name(), "A");
  EXPECT_EQ(inv.devices[1].device.index(), 1);
  EXPECT_EQ(inv.devices[1].visible_token, "0");

  in.cuda_visible_devices = "GPU-dddd,7,1";  // UUID prefix; like CUDA, stop at the first bad entry
  inv = BuildInventory(&probe, in);
  ASSERT_EQ(inv.devices.size(), 1u);
  EXPECT_EQ(inv.devices[0].device.name(), "D");
  EXPECT_EQ(inv.devices[0].visible_token, "GPU-dddd");

  in.cuda_visible_devices = "";  // every GPU hidden
  inv = BuildInventory(&probe, in);
  EXPECT_FALSE(inv.HasGpu());
  EXPECT_THAT(inv.no_gpu_reason, HasSubstr("CUDA_VISIBLE_DEVICES='' hides every GPU"));
  ASSERT_EQ(inv.devices.size(), 1u);
  EXPECT_EQ(inv.devices[0].device.kind(), "cpu");
}

TEST(InventoryTest, CountersAreAdminOnlyUnlessTheDriverSaysOtherwise) {
  EXPECT_FALSE(CountersAdminOnly(WriteTemp("p0", "RmProfilingAdminOnly: 0\n")));
  EXPECT_TRUE(CountersAdminOnly(WriteTemp("p1", "RmProfilingAdminOnly: 1\n")));
  EXPECT_TRUE(CountersAdminOnly(WriteTemp("p-none", "EnableMSI: 1\n")));
  EXPECT_TRUE(CountersAdminOnly("/nonexistent/params"));
}

TEST(InventoryTest, AProbeErrorOrNoGpuGivesTheCpu) {
  FakeProbe failing(absl::UnavailableError("NVML nvmlInit_v2() failed: Driver Not Loaded (9)"));
  Inventory inv = BuildInventory(&failing, Inputs());
  EXPECT_EQ(inv.no_gpu_reason, "NVML nvmlInit_v2() failed: Driver Not Loaded (9)");
  ASSERT_EQ(inv.devices.size(), 1u);
  EXPECT_EQ(inv.devices[0].device.index(), -1);
  FakeProbe empty(std::vector<v1::Device>{});
  inv = BuildInventory(&empty, Inputs());
  EXPECT_EQ(inv.no_gpu_reason, "the NVIDIA driver reports no GPU");
  EXPECT_EQ(inv.devices.size(), 1u);
}

TEST(InventoryTest, WorkersArePinnedToTheirDevice) {
  FakeProbe probe(std::vector<v1::Device>{Gpu(0, "A", "GPU-a"), Gpu(1, "B", "GPU-b"), Gpu(2, "C", "GPU-c")});
  InventoryInputs in = Inputs();
  in.cuda_visible_devices = "1,2";  // e.g. Slurm gave this job GPUs 1 and 2
  const Inventory inv = BuildInventory(&probe, in);
  ASSERT_EQ(inv.devices.size(), 2u);
  const LaunchSpec spec =
      MakeWorkerLaunchSpec("/opt/medprof/bin/medprof-worker", "/w/spool/r-7", "r-7", *inv.Find(1), "/w/cache");
  EXPECT_EQ(spec.executable, "/opt/medprof/bin/medprof-worker");
  EXPECT_THAT(spec.argv, ElementsAre("/opt/medprof/bin/medprof-worker", "--job", "/w/spool/r-7/job.pb",
                                     "--result-fd", "3"));
  EXPECT_THAT(spec.env,
              ElementsAre(Pair("CUDA_DEVICE_ORDER", "PCI_BUS_ID"), Pair("CUDA_VISIBLE_DEVICES", "2"),
                          Pair("MEDPROF_CACHE_DIR", "/w/cache"), Pair("MEDPROF_DEVICE_INDEX", "1"),
                          Pair("MEDPROF_RUN_ID", "r-7")));
  EXPECT_EQ(spec.working_dir, "/w/spool/r-7");
  EXPECT_EQ(spec.stderr_path, "/w/spool/r-7/worker.stderr");
  EXPECT_EQ(spec.stdout_path, "/w/spool/r-7/worker.stdout");

  const Inventory cpu_only = BuildInventory(nullptr, Inputs());
  const LaunchSpec cpu = MakeWorkerLaunchSpec("w", "/d", "r", cpu_only.devices[0], "/w/cache");  // no cache on the CPU
  EXPECT_THAT(cpu.env, ElementsAre(Pair("CUDA_VISIBLE_DEVICES", ""), Pair("MEDPROF_DEVICE_INDEX", "-1"),
                                   Pair("MEDPROF_RUN_ID", "r")));
}

TEST(HostFactsTest, LabelsCarrySlurmAndContainerFactsAndExtrasWin) {
  const EnvLookup env = [](const std::string& name) -> std::optional<std::string> {
    if (name == "SLURM_JOB_ID") return "4242";
    if (name == "SLURM_JOB_PARTITION") return "gpu-shared";
    if (name == "SLURM_JOB_NODELIST") return "exp-7-[12-13]";
    if (name == "SLURM_RESTART_COUNT") return "2";
    if (name == "SINGULARITY_CONTAINER") return "/scratch/agent.sif";
    return std::nullopt;
  };
  HostFacts facts = CaptureHostFacts(env, "expanse");
  EXPECT_FALSE(facts.host.empty());
  EXPECT_EQ(facts.container_image, "/scratch/agent.sif");
  facts.host = "exp-7-12";
  EXPECT_THAT(MakeLabels(facts, {{"site", "override"}, {"rack", "r1"}}),
              ElementsAre(Pair("container", "/scratch/agent.sif"), Pair("host", "exp-7-12"),
                          Pair("partition", "gpu-shared"), Pair("rack", "r1"), Pair("site", "override"),
                          Pair("slurm_job_id", "4242"), Pair("slurm_nodelist", "exp-7-[12-13]"),
                          Pair("slurm_restart_count", "2")));
  const v1::Environment e = AgentEnvironment(facts, "1");
  EXPECT_EQ(e.host(), "exp-7-12");
  EXPECT_EQ(e.site(), "expanse");
  EXPECT_EQ(e.slurm_job_id(), "4242");
  EXPECT_EQ(e.slurm_partition(), "gpu-shared");
  EXPECT_EQ(e.container_image(), "/scratch/agent.sif");
  EXPECT_EQ(e.cuda_visible_devices(), "1");
  EXPECT_FALSE(e.agent_version().empty());
  const EnvLookup apptainer = [](const std::string& name) -> std::optional<std::string> {
    if (name == "APPTAINER_CONTAINER") return "/a.sif";
    if (name == "SINGULARITY_CONTAINER") return "/s.sif";
    return std::nullopt;
  };
  EXPECT_EQ(CaptureHostFacts(apptainer, "").container_image, "/a.sif");
  EXPECT_THAT(MakeLabels(CaptureHostFacts([](const std::string&) { return std::nullopt; }, ""), {}),
              ElementsAre(Pair("host", ::testing::Not(::testing::IsEmpty()))));
}

TEST(HostFactsTest, FirstSlurmRunCountsZeroRestartsAndLongNodeListsAreCut) {
  const std::string nodes(300, 'c');
  const EnvLookup env = [&](const std::string& name) -> std::optional<std::string> {
    if (name == "SLURM_JOB_ID") return "7";
    if (name == "SLURM_JOB_NODELIST") return nodes;
    return std::nullopt;  // Slurm sets no SLURM_RESTART_COUNT on a job's first run
  };
  const std::map<std::string, std::string> labels = MakeLabels(CaptureHostFacts(env, ""), {});
  EXPECT_EQ(labels.at("slurm_restart_count"), "0");
  EXPECT_EQ(labels.at("slurm_nodelist"), nodes.substr(0, 256));
}

}  // namespace
}  // namespace medprof::agent
