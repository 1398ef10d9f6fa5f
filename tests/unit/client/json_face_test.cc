// One JSON face: every listing command's --format json spells enums as its table does
// ("train", "succeeded", "cpu") and its keys in snake_case — one test per command, each fed a
// response holding every enum the command can print.
#include <string>

#include "client/format.h"
#include "client/query_format.h"
#include "common/proto_json.h"
#include "gmock/gmock.h"
#include "gtest/gtest-spi.h"
#include "gtest/gtest.h"
#include "tests/testing/json_face.h"

namespace medprof::client {
namespace {

using ::medprof::testing::ExpectTableSpellings;
using ::testing::HasSubstr;

v1::Job SampleJob(v1::JobState state) {
  v1::Job j;
  j.set_job_id("j-1");
  j.set_preset("opt1");
  j.set_state(state);
  return j;
}

v1::Study SampleStudy() {
  v1::Study s;
  s.set_study_id("st-1");
  s.set_state(v1::STUDY_DONE);
  *s.add_jobs() = SampleJob(v1::JOB_SUCCEEDED);
  *s.add_jobs() = SampleJob(v1::JOB_FAILED);
  return s;
}

v1::Run SampleRun() {
  v1::Run r;
  r.set_run_id("r-1");
  r.set_state(v1::RUN_SUCCEEDED);
  r.mutable_effective()->set_phase(v1::PHASE_TRAIN);
  r.mutable_effective()->set_device(v1::DEVICE_KIND_CPU);
  r.mutable_effective()->set_counter_api("auto");
  v1::StepTiming* step = r.add_steps();
  step->set_phase(v1::PHASE_TRAIN);
  (*step->mutable_phase_ns())["fwd"] = 5;
  r.mutable_environment()->set_host("gpu01");
  return r;
}

TEST(JsonFaceTest, Submit) {
  v1::SubmitStudyResponse r;
  r.set_study_id("st-1");
  *r.add_jobs() = SampleJob(v1::JOB_QUEUED);
  const std::string json = FormatSubmit(r, OutputFormat::kJson);
  ExpectTableSpellings(json, "submit");
  EXPECT_THAT(json, HasSubstr("\"queued\""));
}

TEST(JsonFaceTest, WatchAndSubmitWait) {
  const std::string json = FormatStudy(SampleStudy(), OutputFormat::kJson);
  ExpectTableSpellings(json, "watch");
  EXPECT_THAT(json, HasSubstr("\"done\""));
  EXPECT_THAT(json, HasSubstr("\"failed\""));
}

TEST(JsonFaceTest, Studies) {
  v1::ListStudiesResponse r;
  *r.add_studies() = SampleStudy();
  r.mutable_studies(0)->clear_jobs();
  ExpectTableSpellings(FormatStudies(r, OutputFormat::kJson), "studies");
}

TEST(JsonFaceTest, Runs) {
  v1::ListRunsResponse r;
  *r.add_runs() = SampleRun();
  r.add_runs()->set_state(v1::RUN_INTERRUPTED);
  const std::string json = FormatRuns(r, OutputFormat::kJson);
  ExpectTableSpellings(json, "runs");
  EXPECT_THAT(json, HasSubstr("\"interrupted\""));
}

TEST(JsonFaceTest, Run) {
  const std::string json = FormatRun(SampleRun(), OutputFormat::kJson);
  ExpectTableSpellings(json, "run");
  EXPECT_THAT(json, HasSubstr("\"state\": \"succeeded\""));
  EXPECT_THAT(json, HasSubstr("\"phase\": \"train\""));
  EXPECT_THAT(json, HasSubstr("\"device\": \"cpu\""));
  EXPECT_THAT(json, HasSubstr("\"phase_ns\""));  // proto names, not phaseNs
}

TEST(JsonFaceTest, Export) {
  ExpectTableSpellings(FormatRunExport(SampleRun(), OutputFormat::kJson), "export");
}

TEST(JsonFaceTest, Agents) {
  v1::ListAgentsResponse r;
  v1::Agent* a = r.add_agents();
  a->set_agent_id("ag-1");
  a->add_devices()->set_kind("cpu");
  ExpectTableSpellings(FormatAgents(r, OutputFormat::kJson, 0), "agents");
}

TEST(JsonFaceTest, Compare) {
  v1::CompareResponse r;
  v1::CompareCell* c = r.add_cells();
  c->set_gpu("cpu");
  c->set_preset("opt1");
  c->set_phase(v1::PHASE_SAMPLE);
  const std::string json = FormatCompare(r, OutputFormat::kJson);
  ExpectTableSpellings(json, "compare");
  EXPECT_THAT(json, HasSubstr("\"sample\""));
}

TEST(JsonFaceTest, Kernels) {
  v1::ListKernelsResponse r;
  r.set_run_id("r-1");
  v1::KernelShare* k = r.add_kernels();
  k->set_name("k_conv");
  k->set_category("conv");
  k->set_phase("fwd");
  ExpectTableSpellings(FormatKernels(r, OutputFormat::kJson), "kernels");
}

TEST(JsonFaceTest, Diff) {
  v1::DiffRunsResponse r;
  r.add_rows()->set_op("aten::conv3d");
  ExpectTableSpellings(FormatDiff(r, OutputFormat::kJson), "diff");
}

// The helper itself catches what it is for.
TEST(JsonFaceTest, TheCheckFailsOnProtoSpellings) {
  EXPECT_NONFATAL_FAILURE(ExpectTableSpellings(R"({"state": "RUN_SUCCEEDED"})", "planted"), "proto enum name");
  EXPECT_NONFATAL_FAILURE(ExpectTableSpellings(R"({"agentName": "a"})", "planted"), "not snake_case");
}

TEST(EnumSpellingTest, TheTablesWords) {
  EXPECT_EQ(EnumSpelling(v1::Phase_descriptor(), v1::PHASE_TRAIN), "train");
  EXPECT_EQ(EnumSpelling(v1::RunState_descriptor(), v1::RUN_SUCCEEDED), "succeeded");
  EXPECT_EQ(EnumSpelling(v1::JobState_descriptor(), v1::JOB_CANCELLED), "cancelled");
  EXPECT_EQ(EnumSpelling(v1::DeviceKind_descriptor(), v1::DEVICE_KIND_CPU), "cpu");
  EXPECT_EQ(EnumSpelling(v1::DeviceKind_descriptor(), v1::DEVICE_KIND_UNSPECIFIED), "auto");
  EXPECT_EQ(EnumSpelling(v1::StudyState_descriptor(), v1::STUDY_STATE_UNSPECIFIED), "unspecified");
  EXPECT_EQ(EnumSpelling(v1::ProtocolVersion_descriptor(), v1::PROTOCOL_VERSION_1), "1");
  EXPECT_EQ(EnumSpelling(v1::RunState_descriptor(), 99), "unknown");
  EXPECT_EQ(RunStateName(v1::RUN_LOST), "lost");
}

}  // namespace
}  // namespace medprof::client
