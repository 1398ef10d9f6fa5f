// The worker's workload factory: a job gets the implementation it asks for (Med-DDPM here; a user
// model in tests/unit/workloads/torchscript_test.cc),
// configured by the job, behind the interface the profiler sees; bad configurations fail with
// the field named, before any model is built.
#include "agent/worker/workload_factory.h"

#include "agent/worker/config_mapping.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"
#include "workloads/meddpm/workload.h"

namespace medprof::worker {
namespace {

using ::medprof::testing::IsOk;
using ::medprof::testing::StatusIs;
using ::testing::HasSubstr;

v1::WorkloadConfig TinyJob() {
  v1::WorkloadConfig c;
  c.set_preset("baseline");
  c.set_phase(v1::PHASE_FORWARD);
  c.set_base_channels(8);
  c.add_channel_mult(1);
  c.add_channel_mult(2);
  c.set_groups(8);
  c.set_volume(16);
  c.set_steps(2);
  c.set_warmup(1);
  return c;
}

// Counts what the workload reports through the interface.
class CountingObserver : public workload::PhaseObserver {
 public:
  void OnStepEnd(const workload::StepReport& report) override { (report.measured ? measured : warmup)++; }
  void OnPhaseBegin(std::string_view name) override { phases.push_back(std::string(name)); }
  int measured = 0;
  int warmup = 0;
  std::vector<std::string> phases;
};

TEST(WorkloadFactoryTest, AJobNamingNoModelIsMedDdpm) {
  EXPECT_EQ(WorkloadKindOf(TinyJob()), WorkloadKind::kMedDdpm);
  EXPECT_EQ(WorkloadKindName(WorkloadKind::kMedDdpm), "meddpm");
}

TEST(WorkloadFactoryTest, CreatesTheJobsModelBehindTheInterface) {
  MEDPROF_ASSERT_OK_AND_ASSIGN(v1::WorkloadConfig e, Effective(TinyJob()));
  MEDPROF_ASSERT_OK_AND_ASSIGN(std::unique_ptr<workload::Workload> w, CreateWorkload(e, v1::DEVICE_KIND_CPU));
  EXPECT_EQ(w->ParameterCount(), meddpm::CountParameters(ToWorkloadOptions(e, v1::DEVICE_KIND_CPU).model));
  EXPECT_EQ(w->flags().device, "cpu");
  CountingObserver observer;
  ASSERT_THAT(w->Run(&observer), IsOk());
  EXPECT_EQ(observer.warmup, 1);
  EXPECT_EQ(observer.measured, 2);
  EXPECT_THAT(observer.phases, ::testing::Each(std::string("fwd")));
  ASSERT_THAT(w->RunExtraSteps(1, &observer), IsOk());
  EXPECT_EQ(observer.warmup, 2);  // extra steps are unmeasured
  EXPECT_GT(w->PeakMemoryBytes(), 0u);
}

TEST(WorkloadFactoryTest, ABadConfigurationNamesTheField) {
  MEDPROF_ASSERT_OK_AND_ASSIGN(v1::WorkloadConfig e, Effective(TinyJob()));
  e.set_groups(3);  // does not divide the 8 base channels
  EXPECT_THAT(CreateWorkload(e, v1::DEVICE_KIND_CPU),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("groups")));
}

}  // namespace
}  // namespace medprof::worker
