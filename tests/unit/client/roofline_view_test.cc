// `medprof roofline` (client/roofline_view.h): parsing and validation, the rows of a hand-made run
// (numbers checked in the comments) and the three output formats.
#include "client/roofline_view.h"

#include <nlohmann/json.hpp>

#include "client/cli.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace medprof::client {
namespace {

using ::medprof::testing::StatusIs;
using ::testing::HasSubstr;
using json = nlohmann::json;

absl::StatusOr<Command> Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "medprof");
  return ParseCommandLine(args, [](const std::string&) -> std::optional<std::string> { return std::nullopt; });
}

TEST(RooflineCli, RunOrStudyWithTheLevelAndPhaseChecked) {
  auto c = Parse({"roofline", "run-1", "--level", "l2", "--phase", "fwd", "--signatures", "--format", "csv"});
  ASSERT_TRUE(c.ok()) << c.status();
  const auto& r = std::get<RooflineCommand>(c->body);
  EXPECT_EQ(r.run_id, "run-1");
  EXPECT_EQ(r.level, "l2");
  EXPECT_EQ(r.phase, "fwd");
  EXPECT_TRUE(r.signatures);
  EXPECT_EQ(r.format, OutputFormat::kCsv);
  auto s = Parse({"roofline", "--study", "st-1"});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(std::get<RooflineCommand>(s->body).study_id, "st-1");
  EXPECT_EQ(std::get<RooflineCommand>(s->body).level, "dram");
  EXPECT_THAT(Parse({"roofline"}).status(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("one RUN id or --study")));
  EXPECT_THAT(Parse({"roofline", "r", "--study", "s"}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not both")));
  EXPECT_THAT(Parse({"roofline", "r", "--level", "hbm"}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--level: 'hbm' is not a level (allowed: dram, l2, l1)")));
  EXPECT_THAT(Parse({"roofline", "r", "--phase", "train"}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--phase: 'train'")));
}

// Ceilings DRAM 4 TB/s (measured), TF32 400 TFLOP/s (datasheet). Kernel conv: 3 ms per step of trace
// time out of 4 ms, aggregate 3e6 ns, 9e11 TF32 FLOPs (2.25 ms), 0.4 GB DRAM (0.1 ms): compute-bound at
// 75 %, intensity 2250 FLOP/B, 300 TFLOP/s. Kernel add: 1 ms, 3.2 GB (0.8 ms): memory-bound at 80 %.
// Phase fwd: 4 ms, 9e11 FLOPs + 3.6 GB: t_c 2.25, t_dram 0.9 -> compute-bound at 56.25 % -> latency.
v1::Run SampleRun() {
  v1::Run run;
  run.set_run_id("run-1");
  run.set_gpu("NVIDIA H200");
  run.set_preset("opt1");
  auto* c = run.mutable_environment()->mutable_ceilings();
  auto ceiling = [&](const char* name, double measured, double datasheet) {
    v1::Ceiling* x = c->add_ceilings();
    x->set_name(name);
    x->set_measured(measured);
    x->set_datasheet(datasheet);
  };
  ceiling("dram", 4e12, 4.8e12);
  ceiling("tensor_tf32", 0, 4e14);
  auto kernel = [&](const char* name, const char* cat, const char* phase, int64_t ns) {
    v1::KernelStat* k = run.add_kernels();
    k->set_name(name);
    k->set_category(cat);
    k->set_phase(phase);
    k->set_total_ns(ns);
  };
  kernel("conv", "conv", "fwd", 3'000'000);
  kernel("add", "elementwise", "bwd", 1'000'000);
  kernel("idle", "other", "fwd", 0);
  auto metric = [&](const std::string& scope, const char* name, double v) {
    v1::MetricValue* m = run.add_metrics();
    m->set_scope(scope);
    m->set_name(name);
    m->set_value(v);
  };
  metric("kernel:conv", "duration_ns", 3e6);
  metric("kernel:conv", "flops.tensor_tf32", 9e11);
  metric("kernel:conv", "bytes.dram", 4e8);
  metric("kernel:add", "duration_ns", 1e6);
  metric("kernel:add", "bytes.dram", 3.2e9);
  metric("kernel:idle", "duration_ns", 5);  // no work or traffic: left out
  metric("signature:abc", "duration_ns", 1e6);
  metric("signature:abc", "flops.tensor_tf32", 3e11);
  metric("phase:fwd", "duration_ns", 4e6);
  metric("phase:fwd", "flops.tensor_tf32", 9e11);
  metric("phase:fwd", "bytes.dram", 3.6e9);
  return run;
}

TEST(RooflineView, RowsPlaceEachKernelSignatureAndPhaseOnTheRunsOwnRoofs) {
  v1::SignatureShare sig;
  sig.set_id("abc");
  sig.set_kernel("conv");
  sig.set_op("aten::cudnn_convolution");
  sig.set_shapes("f32[1,64,128,128,128]cl");
  sig.set_share_of_kernel(0.5);
  const auto rows = RooflineRows(SampleRun(), {sig}, {"", "dram", true});
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].scope, "kernel");
  EXPECT_EQ(rows[0].name, "conv");
  EXPECT_DOUBLE_EQ(rows[0].time_share, 0.75);
  EXPECT_EQ(rows[0].point.binding, "tensor_tf32");
  EXPECT_DOUBLE_EQ(rows[0].point.pct_of_roof, 75.0);
  EXPECT_EQ(rows[0].point.bound, roofline::Bound::kCompute);
  EXPECT_EQ(rows[1].scope, "signature");
  EXPECT_EQ(rows[1].name, "abc aten::cudnn_convolution f32[1,64,128,128,128]cl");
  EXPECT_EQ(rows[2].name, "add");
  EXPECT_EQ(rows[2].point.bound, roofline::Bound::kMemory);
  EXPECT_DOUBLE_EQ(rows[2].point.pct_of_roof, 80.0);
  EXPECT_EQ(rows[3].scope, "phase");
  EXPECT_DOUBLE_EQ(rows[3].point.pct_of_roof, 56.25);
  EXPECT_EQ(rows[3].point.bound, roofline::Bound::kLatency);
  // --phase fwd: the fwd range and the kernels that ran in it only; no signatures unless asked.
  const auto fwd = RooflineRows(SampleRun(), {sig}, {"fwd", "dram", false});
  ASSERT_EQ(fwd.size(), 2u);
  EXPECT_EQ(fwd[0].name, "conv");
  EXPECT_EQ(fwd[1].name, "fwd");
}

TEST(RooflineView, TableJsonAndCsv) {
  const v1::Run run = SampleRun();
  const RooflineOptions o{"", "dram", false};
  const auto rows = RooflineRows(run, {}, o);
  const std::string table = FormatRoofline({run}, rows, o, OutputFormat::kTable);
  EXPECT_THAT(table, HasSubstr("run run-1 (NVIDIA H200, opt1): roofs measured (datasheet) in TB/s and TFLOP/s: "
                               "DRAM 4.0 (4.8), TF32 Tensor Core - (400.0)"));
  EXPECT_THAT(table, HasSubstr("DRAM MB"));
  EXPECT_THAT(table, HasSubstr("TF32 Tensor Core    75.0  compute-bound"));
  EXPECT_THAT(table, HasSubstr("DRAM                80.0  memory-bound"));
  const json j = json::parse(FormatRoofline({run}, rows, o, OutputFormat::kJson));
  EXPECT_EQ(j["level"], "dram");
  ASSERT_EQ(j["runs"].size(), 1u);
  EXPECT_EQ(j["runs"][0]["ceilings"][0]["measured"], 4e12);
  EXPECT_EQ(j["runs"][0]["rows"][0]["bound"], "compute-bound");
  EXPECT_EQ(j["runs"][0]["rows"][0]["intensity"]["dram"], 2250.0);
  EXPECT_EQ(j["runs"][0]["rows"][1]["bytes_per_s"]["dram"], 3.2e12);
  const std::string csv = FormatRoofline({run}, rows, o, OutputFormat::kCsv);
  EXPECT_THAT(csv, HasSubstr("run_id,gpu,preset,scope,name,category,time_share,duration_ns,flops,level,bytes,"));
  EXPECT_THAT(csv, HasSubstr("run-1,NVIDIA H200,opt1,kernel,add,elementwise,0.25,1000000.0,0.0,dram,3200000000.0,0.0,0.0,"
                             "3200000000000.0,dram,80.0,memory-bound\n"));
  // A run without counters says how to get them.
  v1::Run bare;
  bare.set_run_id("cpu-1");
  bare.mutable_environment()->mutable_ceilings()->set_note("CPU backend: no ceilings");
  EXPECT_THAT(FormatRoofline({bare}, {}, o, OutputFormat::kTable),
              HasSubstr("roofs measured (datasheet) in TB/s and TFLOP/s: none; CPU backend: no ceilings\n  no kernel"));
}

}  // namespace
}  // namespace medprof::client
