// The TorchScript user-model workload on the CPU, over the models workloads/examples/
// make_denoisers.py scripts at test time (the ctest fixture torchscript_example_models; without
// python3 + torch that fixture fails and so does this test): every bad model is refused with its
// cause before the loop runs; good models run forward / train / sample in the shared DDPM loop
// with Med-DDPM's sub-phases; the presets say what they did to the module; the worker's factory
// routes a job naming a model to this workload.
#include "workloads/torchscript/workload.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/worker/config_mapping.h"
#include "agent/worker/workload_factory.h"
#include "common/sha256.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace medprof::torchscript {
namespace {

using ::medprof::testing::IsOk;
using ::medprof::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Where the fixture wrote the models (tests/CMakeLists.txt).
std::string ModelPath(const std::string& name) { return std::string(MEDPROF_TEST_MODELS_DIR) + "/" + name; }

class TorchScriptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(ModelPath("manifest.json"))) {
      FAIL() << "no example models in " << MEDPROF_TEST_MODELS_DIR
             << ": the ctest fixture torchscript_example_models (workloads/examples/make_denoisers.py, run by "
                "/usr/bin/python3 with torch) did not run or failed; run it through ctest";
    }
    std::ifstream in(ModelPath("manifest.json"));
    manifest_ = nlohmann::json::parse(in);
  }

  // A tiny CPU job: 16^3, batch 1, one warm-up and two measured steps.
  static Options Tiny(const std::string& model, ddpm::Phase phase = ddpm::Phase::kForward) {
    Options o;
    o.path = ModelPath(model);
    o.device = ddpm::Device::kCpu;
    o.loop.phase = phase;
    o.loop.depth = o.loop.height = o.loop.width = 16;
    o.loop.image_channels = 1;
    o.loop.cond_channels = 2;
    o.loop.steps = 2;
    o.loop.warmup = 1;
    o.loop.grad_accum = 1;
    o.loop.sample_steps = 3;
    o.cpu_threads = 1;
    return o;
  }

  nlohmann::json manifest_;
};

// Records what the workload reports through the interface.
class Recorder : public workload::PhaseObserver {
 public:
  void OnStepEnd(const workload::StepReport& r) override { reports.push_back(r); }
  void OnPhaseBegin(std::string_view name) override { phases.emplace_back(name); }
  std::vector<workload::StepReport> reports;
  std::vector<std::string> phases;
};

struct BadCase {
  std::string model;
  absl::StatusCode code;
  std::string cause;
};

TEST_F(TorchScriptTest, EveryBadModelIsRefusedWithItsCause) {
  const std::string text = ::testing::TempDir() + "/plain_text.pt";
  std::ofstream(text) << "not a model\n";
  const std::vector<BadCase> cases = {
      {"not_torchscript.pt", absl::StatusCode::kInvalidArgument, "not_torchscript.pt is not a TorchScript module"},
      {text, absl::StatusCode::kInvalidArgument, "is not a TorchScript module"},
      {"no_such_file.pt", absl::StatusCode::kInvalidArgument, "model: cannot open"},
      {"wrong_signature.pt", absl::StatusCode::kInvalidArgument, "forward has the wrong signature: found forward("},
      {"wrong_shape.pt", absl::StatusCode::kInvalidArgument,
       "output shape [1, 2, 16, 16, 16] differs from the target's [1, 1, 16, 16, 16]"},
      {"nan_output.pt", absl::StatusCode::kInvalidArgument, "output has 4096 NaN/Inf values of 4096"},
      {"ignores_t.pt", absl::StatusCode::kInvalidArgument, "the output does not depend on t"},
      {"out_of_memory.pt", absl::StatusCode::kResourceExhausted, "model: out of memory in the dry run's forward"},
  };
  for (const BadCase& c : cases) {
    Options o = Tiny(c.model);
    if (c.model[0] == '/') o.path = c.model;
    EXPECT_THAT(Describe(o), StatusIs(c.code, HasSubstr(c.cause))) << c.model;
    EXPECT_THAT(Workload::Create(o), StatusIs(c.code, HasSubstr(c.cause))) << c.model;
  }
}

TEST_F(TorchScriptTest, AVolumeTheModelCannotTakeFailsInTheDryRunNamingTheInputs) {
  Options o = Tiny("tiny_unet.pt");
  o.loop.depth = o.loop.height = o.loop.width = 9;  // downsampled to 5, upsampled to 10: cat fails
  EXPECT_THAT(Describe(o), StatusIs(absl::StatusCode::kInvalidArgument,
                                    HasSubstr("forward failed on the dry run with x [1, 1, 9, 9, 9], t [1], "
                                              "cond [1, 2, 9, 9, 9]: ")));
}

TEST_F(TorchScriptTest, AConditionalModelNeedsConditioningChannels) {
  Options o = Tiny("tiny_unet.pt");
  o.loop.cond_channels = 0;  // in_channels == out_channels
  EXPECT_THAT(Describe(o), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("in_channels: forward(x, t, cond)")));
}

TEST_F(TorchScriptTest, DescribeReportsTheDryRun) {
  Options o = Tiny("tiny_unet.pt", ddpm::Phase::kTrain);
  o.loop.batch = 2;
  MEDPROF_ASSERT_OK_AND_ASSIGN(const Description d, Describe(o));
  EXPECT_EQ(d.parameters, manifest_["tiny_unet.pt"]["parameters"].get<int64_t>());
  EXPECT_TRUE(d.conditional);
  EXPECT_THAT(d.signature, HasSubstr("Tensor x, Tensor t, Tensor cond) -> Tensor"));
  EXPECT_THAT(d.x_shape, ElementsAre(1, 1, 16, 16, 16));
  EXPECT_THAT(d.cond_shape, ElementsAre(1, 2, 16, 16, 16));
  EXPECT_THAT(d.output_shape, ElementsAre(1, 1, 16, 16, 16));
  EXPECT_EQ(d.output_dtype, "Float");
  EXPECT_TRUE(d.t_dependence_checked);
  EXPECT_EQ(d.device, "cpu");
  // Train: weights, gradients, Adam m and v, EMA, all float32.
  EXPECT_EQ(d.state_bytes, static_cast<uint64_t>(d.parameters) * 4 * 5);
  EXPECT_EQ(d.estimated_peak_bytes, d.state_bytes + d.activation_bytes);

  MEDPROF_ASSERT_OK_AND_ASSIGN(const Description plain, Describe(Tiny("tiny_resnet.pt")));
  EXPECT_FALSE(plain.conditional);
  EXPECT_TRUE(plain.cond_shape.empty());
  EXPECT_EQ(plain.parameters, manifest_["tiny_resnet.pt"]["parameters"].get<int64_t>());
  EXPECT_EQ(plain.state_bytes, static_cast<uint64_t>(plain.parameters) * 4);  // forward: weights only
}

TEST_F(TorchScriptTest, AnAllZeroOutputPassesWithANote) {
  MEDPROF_ASSERT_OK_AND_ASSIGN(const Description d, Describe(Tiny("zero_output.pt")));
  EXPECT_FALSE(d.t_dependence_checked);
  EXPECT_THAT(d.flags.note, HasSubstr("t-dependence not checked"));
}

TEST_F(TorchScriptTest, ForwardTrainAndSampleRunWithMedDdpmsSubPhases) {
  const std::vector<std::pair<ddpm::Phase, std::vector<std::string>>> phases = {
      {ddpm::Phase::kForward, {"fwd"}},
      {ddpm::Phase::kTrain, {"fwd", "bwd", "optim"}},
      {ddpm::Phase::kSample, {"sample_step"}},
  };
  for (const auto& [phase, names] : phases) {
    MEDPROF_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Workload> w, Workload::Create(Tiny("tiny_unet.pt", phase)));
    EXPECT_EQ(w->ParameterCount(), manifest_["tiny_unet.pt"]["parameters"].get<int64_t>());
    Recorder r;
    ASSERT_THAT(w->Run(&r), IsOk()) << ddpm::PhaseLabel(phase);
    ASSERT_EQ(r.reports.size(), 3u);
    EXPECT_FALSE(r.reports[0].measured);
    EXPECT_TRUE(r.reports[2].measured);
    std::vector<std::string> expected;
    for (int step = 0; step < 3; ++step) expected.insert(expected.end(), names.begin(), names.end());
    EXPECT_EQ(r.phases, expected) << ddpm::PhaseLabel(phase);
    for (const std::string& name : names) EXPECT_GT(r.reports[2].phase_ns.at(name), 0) << name;
    if (phase == ddpm::Phase::kTrain) {
      EXPECT_TRUE(std::isfinite(r.reports[2].loss));
      EXPECT_GT(r.reports[2].loss, 0.0);
    }
    ASSERT_THAT(w->RunExtraSteps(1, &r), IsOk());
    EXPECT_FALSE(r.reports.back().measured);
    EXPECT_GT(w->PeakMemoryBytes(), 0u);
  }
}

TEST_F(TorchScriptTest, TrainingIsDeterministicAndLearns) {
  std::vector<double> losses[2];
  for (std::vector<double>& run : losses) {
    Options o = Tiny("tiny_resnet.pt", ddpm::Phase::kTrain);
    o.loop.steps = 12;
    o.loop.fixed_noise = true;  // one (eps, t): the loss must fall
    o.loop.learning_rate = 1e-3;
    MEDPROF_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Workload> w, Workload::Create(o));
    Recorder r;
    ASSERT_THAT(w->Run(&r), IsOk());
    for (const workload::StepReport& s : r.reports) run.push_back(s.loss);
  }
  EXPECT_EQ(losses[0], losses[1]);  // same seed, same thread count: bit-identical on the CPU
  EXPECT_LT(losses[0].back(), 0.9 * losses[0].front())
      << "first " << losses[0].front() << " last " << losses[0].back();
}

TEST_F(TorchScriptTest, EachPresetSaysWhatItDidToTheModule) {
  Options o = Tiny("tiny_unet.pt");
  o.tf32 = o.channels_last = o.bf16 = o.fused = true;  // opt3's flags
  MEDPROF_ASSERT_OK_AND_ASSIGN(std::unique_ptr<Workload> w, Workload::Create(o));
  const workload::EffectiveFlags& f = w->flags();
  EXPECT_TRUE(f.channels_last);
  EXPECT_TRUE(f.bf16);
  EXPECT_FALSE(f.fused);
  EXPECT_THAT(f.note, HasSubstr("tf32 has no effect on CPU"));
  EXPECT_THAT(f.note, HasSubstr("channels_last: 11 of 11 5-D parameters and the inputs in ChannelsLast3d"));
  EXPECT_THAT(f.note, HasSubstr("bf16: autocast around forward; the dry run's output is "));
  EXPECT_THAT(f.note, HasSubstr("fused: medprof's fused kernels are Med-DDPM's own"));
  Recorder r;
  EXPECT_THAT(w->Run(&r), IsOk());
}

TEST_F(TorchScriptTest, TheWorkersFactoryRunsAJobNamingAModel) {
  v1::WorkloadConfig c;
  c.set_preset("opt2");
  c.set_phase(v1::PHASE_SAMPLE);
  c.set_volume(16);
  c.set_steps(1);
  c.set_warmup(0);
  c.set_sample_steps(2);
  const std::string path = ModelPath("tiny_unet.pt");
  MEDPROF_ASSERT_OK_AND_ASSIGN(const std::string sha256, Sha256OfFile(path));
  c.mutable_model()->set_sha256(sha256);
  c.mutable_model()->set_file_name("tiny_unet.pt");
  c.mutable_model()->set_size_bytes(std::filesystem::file_size(path));
  c.mutable_model()->set_local_path(path);
  MEDPROF_ASSERT_OK_AND_ASSIGN(const v1::WorkloadConfig e, worker::Effective(c));
  EXPECT_EQ(worker::WorkloadKindOf(e), worker::WorkloadKind::kTorchScript);
  EXPECT_EQ(worker::WorkloadKindName(worker::WorkloadKind::kTorchScript), "torchscript");
  MEDPROF_ASSERT_OK_AND_ASSIGN(std::unique_ptr<workload::Workload> w, worker::CreateWorkload(e, v1::DEVICE_KIND_CPU));
  EXPECT_EQ(w->ParameterCount(), manifest_["tiny_unet.pt"]["parameters"].get<int64_t>());
  EXPECT_TRUE(w->flags().channels_last);  // opt2 reached the module
  Recorder r;
  ASSERT_THAT(w->Run(&r), IsOk());
  EXPECT_THAT(r.phases, ElementsAre("sample_step"));

  c.mutable_model()->set_local_path(ModelPath("ignores_t.pt"));  // a bad model through the factory
  c.set_out_channels(1);
  MEDPROF_ASSERT_OK_AND_ASSIGN(const v1::WorkloadConfig bad, worker::Effective(c));
  EXPECT_THAT(worker::CreateWorkload(bad, v1::DEVICE_KIND_CPU),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("does not depend on t")));
}

}  // namespace
}  // namespace medprof::torchscript
