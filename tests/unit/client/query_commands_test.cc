// The query commands of the CLI: parsing (compare --runs/--baseline-gpu/--top-kernels, kernels
// RUN, diff, export) and their output formats (kernels and diff JSON/CSV/table, the Chrome trace,
// compare cells whose metrics were not collected).
#include <nlohmann/json.hpp>

#include "client/cli.h"
#include "client/format.h"
#include "client/query_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace medprof::client {
namespace {

using ::medprof::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;

absl::StatusOr<Command> Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "medprof");
  return ParseCommandLine(args, [](const std::string&) -> std::optional<std::string> { return std::nullopt; });
}

template <typename T>
T Body(const absl::StatusOr<Command>& c) {
  EXPECT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(std::holds_alternative<T>(c->body));
  return std::get<T>(c->body);
}

TEST(QueryCli, CompareTakesARunFilterAndCrossGpuBaseline) {
  auto c = Body<CompareCommand>(
      Parse({"compare", "--runs", "run-a, run-b", "--baseline-gpu", "a100", "--top-kernels", "7", "--format", "json"}));
  EXPECT_EQ(c.request.study_id(), "");
  EXPECT_THAT(c.request.run_ids(), ElementsAre("run-a", "run-b"));
  EXPECT_EQ(c.request.baseline_gpu(), "a100");
  EXPECT_EQ(c.request.top_kernels(), 7);
  EXPECT_EQ(c.format, OutputFormat::kJson);
  EXPECT_EQ(Body<CompareCommand>(Parse({"compare", "st-1"})).request.run_ids_size(), 0);
  EXPECT_THAT(Parse({"compare"}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "compare: give a STUDY, --runs RUN,RUN.., or both"));
  EXPECT_THAT(Parse({"compare", "--runs", "a,,b"}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--runs: an empty run id")));
  EXPECT_THAT(Parse({"compare", "st-1", "--top-kernels", "51"}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--top: 51")));
}

TEST(QueryCli, KernelsRunAndClassifyBothParse) {
  auto k = Body<KernelsCommand>(Parse({"kernels", "run-1", "--top", "5", "--format", "json"}));
  EXPECT_EQ(k.request.run_id(), "run-1");
  EXPECT_EQ(k.request.top(), 5);
  EXPECT_EQ(k.format, OutputFormat::kJson);
  EXPECT_THAT(Body<ClassifyCommand>(Parse({"kernels", "classify", "nchwToNhwcKernel"})).names,
              ElementsAre("nchwToNhwcKernel"));
  EXPECT_THAT(Parse({"kernels", "run-1", "--top", "0"}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--top")));
}

TEST(QueryCli, DiffAndExport) {
  auto d = Body<DiffCommand>(Parse({"diff", "run-a", "run-b", "--format", "csv"}));
  EXPECT_EQ(d.request.run_a(), "run-a");
  EXPECT_EQ(d.request.run_b(), "run-b");
  EXPECT_EQ(d.format, OutputFormat::kCsv);
  EXPECT_THAT(Parse({"diff", "run-a"}).status(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("RUN_B")));
  auto e = Body<ExportCommand>(Parse({"export", "run-1", "--format", "chrome-trace", "-o", "t.json"}));
  EXPECT_EQ(e.run_id, "run-1");
  EXPECT_EQ(e.export_format, ExportFormat::kChromeTrace);
  EXPECT_EQ(e.output, "t.json");
  EXPECT_EQ(Body<ExportCommand>(Parse({"export", "run-1"})).export_format, ExportFormat::kJson);
  EXPECT_THAT(Parse({"export", "run-1", "--format", "pprof"}).status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--format: 'pprof' is not a format of 'export' (allowed: chrome-trace|csv|json)"));
}

v1::ListKernelsResponse KernelsResponse() {
  v1::ListKernelsResponse r;
  r.set_run_id("run-1");
  r.set_time_source("kernels");
  r.set_total_ns(10'000'000);
  r.set_total_rows(3);
  for (const auto& [name, ns] : std::vector<std::pair<std::string, int64_t>>{{"k_conv", 8'000'000}, {"k_add", 1'500'000}}) {
    auto* k = r.add_kernels();
    k->set_name(name);
    k->set_category(name == "k_conv" ? "conv" : "elementwise");
    k->set_op(name == "k_conv" ? "aten::conv3d" : "aten::add");
    k->set_phase("fwd");
    k->set_count(4);
    k->set_total_ns(ns);
    k->set_share(static_cast<double>(ns) / 1e7);
  }
  return r;
}

TEST(QueryFormat, KernelsJsonHasTheDocumentedKeys) {
  const json j = json::parse(FormatKernels(KernelsResponse(), OutputFormat::kJson));
  ASSERT_EQ(j.at("kernels").size(), 2u);
  const json& k = j.at("kernels")[0];
  std::vector<std::string> keys;
  for (auto it = k.begin(); it != k.end(); ++it) keys.push_back(it.key());
  EXPECT_THAT(keys,
              ::testing::UnorderedElementsAre("name", "category", "op", "phase", "count", "total_ns", "share", "coverage_pct"));
  EXPECT_TRUE(k.at("coverage_pct").is_null());  // not measured by the metrics layer
  EXPECT_EQ(k.at("name"), "k_conv");
  EXPECT_EQ(k.at("total_ns"), 8'000'000);
  EXPECT_DOUBLE_EQ(k.at("share").get<double>(), 0.8);
  EXPECT_EQ(j.at("total_rows"), 3);
  const std::string csv = FormatKernels(KernelsResponse(), OutputFormat::kCsv);
  EXPECT_THAT(csv, HasSubstr("name,category,op,phase,count,total_ns,share,coverage_pct\nk_conv,conv,aten::conv3d,fwd,4,8000000,0.8,\n"));
  const std::string table = FormatKernels(KernelsResponse(), OutputFormat::kTable);
  EXPECT_THAT(table, HasSubstr("run run-1: 2 of 3 kernels, 10.000 ms in total"));
  EXPECT_THAT(table, HasSubstr("80%"));
}

// With --signatures: the kernel's coverage and one block of signatures per kernel, measured ones
// starred; JSON carries them whole, CSV is the signature table.
TEST(QueryFormat, KernelsWithSignatures) {
  v1::ListKernelsResponse r = KernelsResponse();
  r.mutable_kernels(0)->set_coverage_pct(75);
  v1::SignatureShare* s = r.add_signatures();
  s->set_id("aaaaaaaaaaaa");
  s->set_kernel("k_conv");
  s->set_op("aten::cudnn_convolution");
  s->set_shapes("f32[1,64,8,8,8]cl f32[64,64,3,3,3]cl [2] [1] [1] 1");
  s->add_grid(15);
  s->add_grid(8);
  s->add_grid(1);
  s->add_block(384);
  s->set_launches_per_step(2);
  s->set_mean_ns(1'500'000);
  s->set_total_ns(6'000'000);
  s->set_share_of_kernel(0.75);
  s->set_measured(true);
  const std::string table = FormatKernels(r, OutputFormat::kTable);
  EXPECT_THAT(table, HasSubstr("75%"));
  EXPECT_THAT(table, HasSubstr("aaaaaaaaaaaa*"));
  EXPECT_THAT(table, HasSubstr("15,8,1"));
  EXPECT_THAT(table, HasSubstr("1500.0"));
  EXPECT_THAT(table, HasSubstr("[2] [1] [1] 1"));
  const json j = json::parse(FormatKernels(r, OutputFormat::kJson));
  EXPECT_DOUBLE_EQ(j.at("kernels")[0].at("coverage_pct").get<double>(), 75);
  EXPECT_EQ(j.at("signatures")[0].at("grid"), json::array({15, 8, 1}));
  EXPECT_EQ(j.at("signatures")[0].at("measured"), true);
  EXPECT_THAT(FormatKernels(r, OutputFormat::kCsv),
              HasSubstr("k_conv,aaaaaaaaaaaa,aten::cudnn_convolution,,\"f32[1,64,8,8,8]cl f32[64,64,3,3,3]cl [2] [1] "
                        "[1] 1\",\"15,8,1\",384,0,2.0,6000000,1500000,0.75,true\n"));
}

// A CPU run's op rows: no second op column, the rows under 0.5 % hidden from the table (said, and
// listed with --all), every row in JSON.
TEST(QueryFormat, KernelsTableHidesTinyRowsUnlessAll) {
  v1::ListKernelsResponse r;
  r.set_run_id("run-cpu");
  r.set_time_source("ops");
  r.set_total_ns(1'000'000'000);
  r.set_total_rows(3);
  for (const auto& [name, share] : std::vector<std::pair<std::string, double>>{
           {"aten::conv3d", 0.9}, {"aten::add", 0.099}, {"aten::zeros", 0.001}}) {
    v1::KernelShare* k = r.add_kernels();
    k->set_name(name);
    k->set_op(name);
    k->set_category("conv");
    k->set_share(share);
  }
  const std::string table = FormatKernels(r, OutputFormat::kTable);
  EXPECT_THAT(table, Not(HasSubstr("aten::zeros")));
  EXPECT_THAT(table, HasSubstr("1 rows under 0.5 % of the time not shown (--all lists them)"));
  EXPECT_THAT(table, Not(HasSubstr("METRICS COV")));  // nothing measured
  const std::string header = table.substr(table.find('\n') + 1, table.find('\n', table.find('\n') + 1) - table.find('\n') - 1);
  EXPECT_EQ(header.find("OP"), header.rfind("OP")) << header;  // one op column: "OP (CPU)"
  EXPECT_THAT(header, HasSubstr("OP (CPU)"));
  EXPECT_THAT(FormatKernels(r, OutputFormat::kTable, /*all=*/true), HasSubstr("aten::zeros"));
  EXPECT_EQ(json::parse(FormatKernels(r, OutputFormat::kJson)).at("kernels").size(), 3u);
}

TEST(QueryFormat, DiffTableAndJson) {
  v1::DiffRunsResponse r;
  r.set_run_a("run-a");
  r.set_run_b("run-b");
  r.set_time_source("kernels");
  r.set_a_total_ns(10'000'000);
  r.set_b_total_ns(5'000'000);
  r.set_a_step_ms_median(12.5);
  r.set_b_step_ms_median(6.25);
  auto* d = r.add_rows();
  d->set_op("aten::conv3d");
  d->set_category("conv");
  d->set_a_ns(8'000'000);
  d->set_b_ns(3'000'000);
  d->set_delta_ns(-5'000'000);
  d->set_ratio(0.375);
  auto* n = r.add_rows();
  n->set_op("aten::contiguous");
  n->set_category("layout");
  n->set_b_ns(1'000'000);
  n->set_delta_ns(1'000'000);
  const json j = json::parse(FormatDiff(r, OutputFormat::kJson));
  EXPECT_EQ(j.at("rows")[0].at("delta_ns"), -5'000'000);
  EXPECT_DOUBLE_EQ(j.at("rows")[0].at("ratio").get<double>(), 0.375);
  EXPECT_TRUE(j.at("rows")[1].at("ratio").is_null());  // no time in A: no ratio, not 0
  EXPECT_DOUBLE_EQ(j.at("a_step_ms_median").get<double>(), 12.5);
  const std::string t = FormatDiff(r, OutputFormat::kTable);
  // The header names both numbers: the step time and the summed kernel time, which differ.
  EXPECT_THAT(t, HasSubstr("A = run run-a: median step 12.50 ms, GPU kernel time summed 10.000 ms/step\n"
                           "B = run run-b: median step 6.25 ms, GPU kernel time summed 5.000 ms/step\n"
                           "GPU kernel time per measured step, by op and category (a sum of kernel durations, "
                           "not the step time)\n"));
  EXPECT_THAT(t, HasSubstr("-5.000"));
  EXPECT_THAT(t, HasSubstr("0.38x"));
  EXPECT_THAT(t, HasSubstr("+1.000"));
  EXPECT_THAT(t, HasSubstr("new"));
}

TEST(QueryFormat, ChromeTraceIsTraceEventFormat) {
  v1::GetTimelineResponse r;
  r.set_run_id("run-1");
  r.mutable_timeline()->set_origin_unix_ns(5'000);
  auto* k = r.mutable_timeline()->add_events();
  k->set_name("k_conv");
  k->set_kind("kernel");
  k->set_start_ns(2'000);
  k->set_duration_ns(1'500);
  k->set_stream(7);
  k->set_op("aten::conv3d");
  auto* o = r.mutable_timeline()->add_events();
  o->set_name("aten::conv3d");
  o->set_kind("op");
  o->set_start_ns(1'000);
  o->set_duration_ns(4'000);
  o->set_stream(-1);
  r.mutable_utilization()->add_metrics("sm_active_pct");
  r.mutable_utilization()->set_origin_unix_ns(6'000);
  auto* s = r.mutable_utilization()->add_samples();
  s->set_t_ns(0);
  s->add_values(42);
  const json j = json::parse(FormatChromeTrace(r));
  ASSERT_TRUE(j.at("traceEvents").is_array());
  std::vector<json> complete, counters;
  bool named_stream = false;
  for (const json& e : j.at("traceEvents")) {
    if (e.at("ph") == "X") complete.push_back(e);
    if (e.at("ph") == "C") counters.push_back(e);
    if (e.at("ph") == "M" && e.at("name") == "thread_name" && e.at("args").at("name") == "stream 7") named_stream = true;
  }
  ASSERT_EQ(complete.size(), 2u);
  EXPECT_EQ(complete[0].at("pid"), 1);  // device
  EXPECT_EQ(complete[0].at("tid"), 7);
  EXPECT_DOUBLE_EQ(complete[0].at("ts").get<double>(), 2.0);  // µs
  EXPECT_DOUBLE_EQ(complete[0].at("dur").get<double>(), 1.5);
  EXPECT_EQ(complete[0].at("args").at("op"), "aten::conv3d");
  EXPECT_EQ(complete[1].at("pid"), 0);  // host
  EXPECT_EQ(complete[1].at("tid"), 1);  // ops thread
  EXPECT_TRUE(named_stream);
  ASSERT_EQ(counters.size(), 1u);
  EXPECT_DOUBLE_EQ(counters[0].at("ts").get<double>(), 1.0);  // 1000 ns later origin
  EXPECT_DOUBLE_EQ(counters[0].at("args").at("value").get<double>(), 42);
  EXPECT_EQ(j.at("otherData").at("run_id"), "run-1");
}

TEST(QueryFormat, CompareNeverPrintsAZeroForMetricsNotCollected) {
  v1::CompareResponse r;
  r.set_study_id("st-1");
  auto* measured = r.add_cells();
  measured->set_gpu("NVIDIA H100");
  measured->set_preset("opt1");
  measured->set_phase(v1::PHASE_TRAIN);
  measured->mutable_metrics()->set_collected(true);
  measured->mutable_metrics()->set_source("phase");
  measured->mutable_metrics()->set_sm_cycles_ratio(0.25);
  measured->mutable_metrics()->set_tensor_pipe_pct(61.5);
  auto* top = measured->add_top_kernels();
  top->set_name("sm90_xmma_fprop");
  top->set_share(0.5);
  top->set_priority(0.2);
  auto* f = top->add_findings();
  f->set_rule("small_grid");
  f->set_finding("grid smaller than the SMs");
  f->set_speedup(0.4);
  auto* missing = r.add_cells();
  missing->set_gpu("NVIDIA A100");
  missing->set_preset("opt1");
  missing->set_phase(v1::PHASE_TRAIN);
  missing->mutable_metrics()->set_not_collected("metrics not collected: no counter permission");
  missing->mutable_stalls()->set_not_collected("stalls not collected: sampling: no counter permission");

  const json j = json::parse(FormatCompare(r, OutputFormat::kJson));
  const json& m0 = j.at("cells")[0].at("metrics");
  EXPECT_EQ(m0.at("collected"), true);
  EXPECT_DOUBLE_EQ(m0.at("sm_cycles_ratio").get<double>(), 0.25);
  EXPECT_TRUE(m0.at("l2_hit_pct").is_null());  // not measured: null, not 0
  EXPECT_EQ(j.at("cells")[0].at("top_kernels")[0].at("findings")[0].at("rule"), "small_grid");
  const json& m1 = j.at("cells")[1].at("metrics");
  EXPECT_EQ(m1.at("collected"), false);
  EXPECT_EQ(m1.at("note"), "metrics not collected: no counter permission");
  EXPECT_FALSE(m1.contains("tensor_pipe_pct"));
  EXPECT_EQ(j.at("cells")[1].at("stalls").at("note"), "stalls not collected: sampling: no counter permission");

  const std::string table = FormatCompare(r, OutputFormat::kTable);
  EXPECT_THAT(table, HasSubstr("0.25x"));
  EXPECT_THAT(table, HasSubstr("61.5"));
  EXPECT_THAT(table, HasSubstr("small_grid: grid smaller than the SMs (speedup 40%)"));
  const std::string csv = FormatCompare(r, OutputFormat::kCsv);
  EXPECT_THAT(csv, HasSubstr("metrics not collected: no counter permission"));
  EXPECT_THAT(csv, Not(HasSubstr(",0,0,0,")));
}

}  // namespace
}  // namespace medprof::client
