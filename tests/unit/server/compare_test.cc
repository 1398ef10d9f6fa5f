// Compare on hand-made runs with exact expected medians, spreads, speedups and shares.
#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "tests/unit/server/domain_fixture.h"

namespace medprof::server::testing {
namespace {

using ::medprof::testing::IsOk;
using ::medprof::testing::StatusIs;
using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

constexpr int64_t kMs = 1'000'000;

TEST(Quantile, InterpolatesBetweenClosestRanks) {
  EXPECT_DOUBLE_EQ(Quantile({}, 0.5), 0);
  EXPECT_DOUBLE_EQ(Quantile({7}, 0.9), 7);
  EXPECT_DOUBLE_EQ(Quantile({40, 10, 30, 20}, 0.5), 25);  // even count: mean of the middle two
  EXPECT_DOUBLE_EQ(Quantile({10, 20, 30, 40}, 0.1), 13);
  EXPECT_DOUBLE_EQ(Quantile({10, 20, 30, 40}, 0.9), 37);
  EXPECT_DOUBLE_EQ(Quantile({1, 2, 3}, 0.5), 2);
  EXPECT_DOUBLE_EQ(Quantile({1, 2, 3}, 0.0), 1);
  EXPECT_DOUBLE_EQ(Quantile({1, 2, 3}, 1.0), 3);
}

class CompareTest : public DomainTest {
 protected:
  // Uploads RunStarted + steps (+ extra records) + a summary, and finishes the run.
  void Complete(const std::string& agent, const Assignment& a, const std::string& gpu, const std::string& backend,
                const std::vector<int64_t>& step_ns, std::vector<v1::WorkerMessage> extra,
                const std::vector<std::pair<std::string, std::string>>& skipped_layers) {
    std::vector<std::pair<uint64_t, v1::WorkerMessage>> msgs;
    uint64_t seq = 0;
    msgs.emplace_back(++seq, Started(gpu, backend));
    for (size_t i = 0; i < step_ns.size(); ++i) msgs.emplace_back(++seq, Step(static_cast<int>(i), step_ns[i]));
    for (auto& m : extra) msgs.emplace_back(++seq, std::move(m));
    v1::WorkerMessage summary;
    summary.mutable_summary()->set_measured_steps(static_cast<int>(step_ns.size()));
    auto* trace = summary.mutable_summary()->add_layers();
    trace->set_layer("trace");
    trace->set_ran(true);
    for (const auto& [layer, reason] : skipped_layers) {
      auto* l = summary.mutable_summary()->add_layers();
      l->set_layer(layer);
      l->set_reason(reason);
    }
    msgs.emplace_back(++seq, std::move(summary));
    ASSERT_THAT(Upload(agent, a.run_id, std::move(msgs)), IsOk());
    ASSERT_THAT(Finish(agent, a.run_id, RunState::kSucceeded, seq), IsOk());
  }

  static v1::WorkerMessage Ops(std::vector<std::pair<std::string, int64_t>> self_ns) {
    v1::WorkerMessage m;
    for (const auto& [name, ns] : self_ns) {
      auto* o = m.mutable_ops()->add_ops();
      o->set_name(name);
      o->set_count(1);
      o->set_self_ns(ns);
      o->set_total_ns(ns);
    }
    return m;
  }

  static v1::WorkerMessage Kernels(std::vector<std::tuple<std::string, std::string, std::string, int64_t>> rows) {
    v1::WorkerMessage m;
    for (const auto& [name, op, category, ns] : rows) {
      auto* k = m.mutable_kernels()->add_kernels();
      k->set_name(name);
      k->set_op(op);
      k->set_category(category);
      k->set_count(1);
      k->set_total_ns(ns);
    }
    return m;
  }
};

TEST_F(CompareTest, MediansSpreadsSpeedupsAndShares) {
  const std::string gpu = Register("node-gpu", {Gpu(0)});
  const std::string cpu = Register("node-cpu", {Cpu()});
  // Jobs, in queue order: r1 h200 baseline, r1 h200 opt1, r1 cpu baseline, r1 cpu opt1, then r2 the same.
  const SubmitStudyResult s = Submit({"baseline", "opt1"}, {"gpu=h200", "device=cpu"}, 2);

  std::optional<Assignment> h_base1 = Acquire(gpu);
  ASSERT_TRUE(h_base1.has_value());
  Complete(gpu, *h_base1, "NVIDIA H200", "cupti", {10 * kMs, 20 * kMs, 30 * kMs},
           {Ops({{"aten::conv3d", 700}, {"aten::add", 300}})}, {{"metrics", "no counter permission"}});
  std::optional<Assignment> h_opt1 = Acquire(gpu);
  ASSERT_TRUE(h_opt1.has_value());
  Complete(gpu, *h_opt1, "NVIDIA H200", "cupti", {5 * kMs, 5 * kMs, 6 * kMs},
           {Kernels({{"sm90_xmma_fprop_implicit_gemm_tf32", "aten::conv3d", "conv", 600},
                     {"nvjet_tst_128x64", "aten::mm", "gemm", 300},
                     {"void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>()",
                      "aten::add", "", 100}}),
            Ops({{"aten::conv3d", 999}})},
           {});
  std::optional<Assignment> h_base2 = Acquire(gpu);
  ASSERT_TRUE(h_base2.has_value());
  Complete(gpu, *h_base2, "NVIDIA H200", "cupti", {40 * kMs}, {}, {{"metrics", "no counter permission"}});
  std::optional<Assignment> h_opt2 = Acquire(gpu);  // fails: not compared
  ASSERT_TRUE(h_opt2.has_value());
  ASSERT_THAT(Upload(gpu, h_opt2->run_id, {{1, Started("NVIDIA H200", "cupti")}, {2, Step(0, 1 * kMs)}}), IsOk());
  ASSERT_THAT(Finish(gpu, h_opt2->run_id, RunState::kFailed, 2, "cuda: illegal address"), IsOk());

  std::optional<Assignment> c_base1 = Acquire(cpu);
  ASSERT_TRUE(c_base1.has_value());
  ASSERT_THAT(Finish(cpu, c_base1->run_id, RunState::kFailed, 0, "crash"), IsOk());
  std::optional<Assignment> c_opt1 = Acquire(cpu);
  ASSERT_TRUE(c_opt1.has_value());
  Complete(cpu, *c_opt1, "cpu", "cpu", {100 * kMs, 200 * kMs},
           {Ops({{"aten::conv3d", 600}, {"aten::native_group_norm", 300}, {"aten::silu", 100}})},
           {{"metrics", "no GPU"}, {"sampling", "no GPU"}});
  std::optional<Assignment> c_base2 = Acquire(cpu);
  ASSERT_TRUE(c_base2.has_value());
  ASSERT_THAT(Finish(cpu, c_base2->run_id, RunState::kFailed, 0, "crash"), IsOk());
  std::optional<Assignment> c_opt2 = Acquire(cpu);  // still running: not compared
  ASSERT_TRUE(c_opt2.has_value());

  CompareRequest r;
  r.study_id = s.study_id;
  r.top_categories = 2;
  auto out = domain_->queries().Compare(ctx_, r);
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ(out->baseline_preset, "baseline");
  ASSERT_EQ(out->cells.size(), 3u);

  const CompareCell& base = out->cells[0];
  EXPECT_EQ(base.gpu, "NVIDIA H200");
  EXPECT_EQ(base.preset, "baseline");
  EXPECT_EQ(base.phase, v1::PHASE_TRAIN);
  EXPECT_EQ(base.n, 2);
  EXPECT_EQ(base.steps, 4);
  EXPECT_DOUBLE_EQ(base.step_ms_median, 25.0);
  EXPECT_DOUBLE_EQ(base.step_ms_p10, 13.0);
  EXPECT_DOUBLE_EQ(base.step_ms_p90, 37.0);
  EXPECT_TRUE(base.has_baseline);
  EXPECT_DOUBLE_EQ(base.speedup_vs_baseline, 1.0);
  EXPECT_EQ(base.time_source, "ops");
  EXPECT_THAT(base.categories, ElementsAre(Pair("conv", DoubleNear(0.7, 1e-12)),
                                           Pair("elementwise", DoubleNear(0.3, 1e-12))));
  EXPECT_THAT(base.notes, ElementsAre("metrics not collected: no counter permission",
                                      "2 runs (< 3): the interval misses run-to-run variation; submit --repeats 3 or more",
                                      "4 measured steps (< 5): too few for a usable interval; use --steps 5 or more"));
  EXPECT_EQ(base.interval_method, "runs, then steps");
  // Every replicate median lies between the smallest and largest step.
  EXPECT_GE(base.step_ms_ci_lo, 10.0);
  EXPECT_LE(base.step_ms_ci_lo, base.step_ms_median);
  EXPECT_GE(base.step_ms_ci_hi, base.step_ms_median);
  EXPECT_LE(base.step_ms_ci_hi, 40.0);
  EXPECT_FALSE(base.speedup_ci.has_value());  // the reference cell

  const CompareCell& opt1 = out->cells[1];
  EXPECT_EQ(opt1.gpu, "NVIDIA H200");
  EXPECT_EQ(opt1.preset, "opt1");
  EXPECT_EQ(opt1.n, 1);
  EXPECT_EQ(opt1.steps, 3);
  EXPECT_DOUBLE_EQ(opt1.step_ms_median, 5.0);
  EXPECT_DOUBLE_EQ(opt1.step_ms_p10, 5.0);
  EXPECT_DOUBLE_EQ(opt1.step_ms_p90, 5.8);
  EXPECT_TRUE(opt1.has_baseline);
  EXPECT_DOUBLE_EQ(opt1.speedup_vs_baseline, 5.0);
  EXPECT_EQ(opt1.time_source, "kernels");  // kernel rows win over op rows
  EXPECT_THAT(opt1.categories,
              ElementsAre(Pair("conv", DoubleNear(0.6, 1e-12)), Pair("gemm", DoubleNear(0.3, 1e-12))));
  EXPECT_THAT(opt1.notes,
              ElementsAre("1 run (< 3): the interval misses run-to-run variation; submit --repeats 3 or more",
                          "3 measured steps (< 5): too few for a usable interval; use --steps 5 or more"));
  EXPECT_EQ(opt1.interval_method, "steps of 1 run");
  ASSERT_TRUE(opt1.speedup_ci.has_value());
  // baseline replicates lie in [10, 40], opt1's in [5, 6]: the ratio in [10/6, 40/5].
  EXPECT_GE(opt1.speedup_ci->lo, 10.0 / 6);
  EXPECT_LE(opt1.speedup_ci->hi, 8.0);
  EXPECT_TRUE(opt1.speedup_ci->significant);

  const CompareCell& cpu_cell = out->cells[2];
  EXPECT_EQ(cpu_cell.gpu, "cpu");
  EXPECT_EQ(cpu_cell.preset, "opt1");
  EXPECT_EQ(cpu_cell.n, 1);
  EXPECT_DOUBLE_EQ(cpu_cell.step_ms_median, 150.0);
  EXPECT_DOUBLE_EQ(cpu_cell.step_ms_p10, 110.0);
  EXPECT_DOUBLE_EQ(cpu_cell.step_ms_p90, 190.0);
  EXPECT_FALSE(cpu_cell.has_baseline);
  EXPECT_DOUBLE_EQ(cpu_cell.speedup_vs_baseline, 0.0);
  EXPECT_EQ(cpu_cell.time_source, "ops");
  EXPECT_THAT(cpu_cell.categories,
              ElementsAre(Pair("conv", DoubleNear(0.6, 1e-12)), Pair("norm", DoubleNear(0.3, 1e-12))));
  EXPECT_THAT(cpu_cell.notes,
              ElementsAre("metrics not collected: no GPU", "sampling not collected: no GPU",
                          "1 run (< 3): the interval misses run-to-run variation; submit --repeats 3 or more",
                          "2 measured steps (< 5): too few for a usable interval; use --steps 5 or more",
                          "no baseline cell on this GPU and phase: no speedup"));
  EXPECT_FALSE(cpu_cell.speedup_ci.has_value());

  // All categories when asked; the unclassified kernel was classified from its op.
  r.top_categories = 12;
  out = domain_->queries().Compare(ctx_, r);
  ASSERT_THAT(out, IsOk());
  EXPECT_THAT(out->cells[1].categories,
              ElementsAre(Pair("conv", DoubleNear(0.6, 1e-12)), Pair("gemm", DoubleNear(0.3, 1e-12)),
                          Pair("elementwise", DoubleNear(0.1, 1e-12))));

  // Another baseline: speedups are relative to it.
  r.baseline_preset = "opt1";
  out = domain_->queries().Compare(ctx_, r);
  ASSERT_THAT(out, IsOk());
  EXPECT_DOUBLE_EQ(out->cells[0].speedup_vs_baseline, 0.2);
  EXPECT_TRUE(out->cells[2].has_baseline);

  // A phase filter with no steps of that phase: no cells.
  r.phase = v1::PHASE_FORWARD;
  out = domain_->queries().Compare(ctx_, r);
  ASSERT_THAT(out, IsOk());
  EXPECT_TRUE(out->cells.empty());
}

// Three runs per preset. opt1 is twice as fast in every run: significant. opt2's runs are one slow
// and two fast, like baseline's (the 82.7 vs 203.9 ms repeats): its point speedup is near
// 1, and its interval, from resamples that draw the slow run for one cell and not the other,
// spans 80/204 to 235/83 — it contains 1.0, so not significant.
TEST_F(CompareTest, IntervalsSeparateResultsFromNoise) {
  const std::string gpu = Register("node-gpu", {Gpu(0)});
  const SubmitStudyResult s = Submit({"baseline", "opt1", "opt2"}, {"gpu=h200"}, 3);
  const std::map<std::string, std::vector<std::vector<int64_t>>> steps = {
      {"baseline", {{100, 101, 99, 100, 102}, {98, 100, 101, 99, 100}, {100, 100, 101, 99, 98}}},
      {"opt1", {{50, 51, 49, 50, 52}, {49, 50, 51, 50, 50}, {50, 49, 50, 51, 50}}},
      {"opt2", {{80, 85, 83, 82, 84}, {200, 205, 203, 204, 202}, {83, 84, 82, 83, 85}}}};
  std::map<std::string, int> seen;
  for (int i = 0; i < 9; ++i) {
    std::optional<Assignment> a = Acquire(gpu);
    ASSERT_TRUE(a.has_value());
    const std::string preset = a->config.preset();
    std::vector<int64_t> ns;
    for (int64_t ms : steps.at(preset).at(static_cast<size_t>(seen[preset]++))) ns.push_back(ms * kMs);
    Complete(gpu, *a, "NVIDIA H200", "cupti", ns, {}, {});
  }
  CompareRequest r;
  r.study_id = s.study_id;
  auto out = domain_->queries().Compare(ctx_, r);
  ASSERT_THAT(out, IsOk());
  ASSERT_EQ(out->cells.size(), 3u);
  const CompareCell& base = out->cells[0];
  EXPECT_THAT(base.notes, ElementsAre("no kernel or op times recorded"));  // 3 runs, 15 steps: no sample-size note
  EXPECT_GE(base.step_ms_ci_lo, 98.0);
  EXPECT_LE(base.step_ms_ci_hi, 102.0);

  const CompareCell& opt1 = out->cells[1];
  ASSERT_TRUE(opt1.speedup_ci.has_value());
  EXPECT_GE(opt1.speedup_ci->lo, 98.0 / 52);  // replicate medians: baseline in [98, 102], opt1 in [49, 52]
  EXPECT_LE(opt1.speedup_ci->hi, 102.0 / 49);
  EXPECT_LE(opt1.speedup_ci->lo, opt1.speedup_vs_baseline);
  EXPECT_GE(opt1.speedup_ci->hi, opt1.speedup_vs_baseline);
  EXPECT_TRUE(opt1.speedup_ci->significant);

  const CompareCell& opt2 = out->cells[2];
  ASSERT_TRUE(opt2.speedup_ci.has_value());
  EXPECT_LT(opt2.speedup_ci->lo, 1.0);
  EXPECT_GT(opt2.speedup_ci->hi, 1.0);
  EXPECT_FALSE(opt2.speedup_ci->significant);

  // Deterministic: the same store gives the same intervals.
  auto again = domain_->queries().Compare(ctx_, r);
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(again->cells[2].speedup_ci->lo, opt2.speedup_ci->lo);
  EXPECT_EQ(again->cells[0].step_ms_ci_hi, base.step_ms_ci_hi);
}

// Two studies of the same presets (before / after a change): cells per study, side by side, and
// the second study's speedup vs the first at the same GPU and preset.
TEST_F(CompareTest, AcrossStudies) {
  const std::string gpu = Register("node-gpu", {Gpu(0)});
  const SubmitStudyResult first = Submit({"baseline", "opt1"}, {"gpu=h200"}, 1);
  for (int64_t ms : {100, 50}) {
    std::optional<Assignment> a = Acquire(gpu);
    ASSERT_TRUE(a.has_value());
    Complete(gpu, *a, "NVIDIA H200", "cupti", {ms * kMs, ms * kMs, ms * kMs, ms * kMs, ms * kMs}, {}, {});
  }
  const SubmitStudyResult second = Submit({"baseline", "opt1"}, {"gpu=h200"}, 1);
  for (int64_t ms : {80, 40}) {
    std::optional<Assignment> a = Acquire(gpu);
    ASSERT_TRUE(a.has_value());
    Complete(gpu, *a, "NVIDIA H200", "cupti", {ms * kMs, ms * kMs, ms * kMs, ms * kMs, ms * kMs}, {}, {});
  }
  CompareRequest r;
  r.study_id = first.study_id;
  r.more_study_ids = {second.study_id};
  auto out = domain_->queries().Compare(ctx_, r);
  ASSERT_THAT(out, IsOk());
  EXPECT_THAT(out->study_ids, ElementsAre(first.study_id, second.study_id));
  ASSERT_EQ(out->cells.size(), 4u);
  // baseline of the first, baseline of the second, opt1 of the first, opt1 of the second.
  EXPECT_EQ(out->cells[0].study_id, first.study_id);
  EXPECT_EQ(out->cells[0].preset, "baseline");
  EXPECT_FALSE(out->cells[0].has_study_baseline);
  EXPECT_EQ(out->cells[1].study_id, second.study_id);
  EXPECT_EQ(out->cells[1].preset, "baseline");
  ASSERT_TRUE(out->cells[1].has_study_baseline);
  EXPECT_DOUBLE_EQ(out->cells[1].speedup_vs_first_study, 100.0 / 80);
  ASSERT_TRUE(out->cells[1].speedup_study_ci.has_value());  // constant steps: a point interval
  EXPECT_DOUBLE_EQ(out->cells[1].speedup_study_ci->lo, 1.25);
  EXPECT_TRUE(out->cells[1].speedup_study_ci->significant);
  EXPECT_EQ(out->cells[3].study_id, second.study_id);
  EXPECT_EQ(out->cells[3].preset, "opt1");
  EXPECT_DOUBLE_EQ(out->cells[3].speedup_vs_first_study, 50.0 / 40);
  // Within a study the baseline is that study's own.
  EXPECT_DOUBLE_EQ(out->cells[3].speedup_vs_baseline, 80.0 / 40);

  r.more_study_ids = {first.study_id};
  EXPECT_THAT(domain_->queries().Compare(ctx_, r),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("more_study_ids[0]: study " + first.study_id +
                                                                     " is given twice")));
  r.more_study_ids = {"st-000000000000"};
  EXPECT_THAT(domain_->queries().Compare(ctx_, r),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("more_study_ids[0]: no study")));
}

// Two user models are never "the same preset": each is its own cell, and a speedup compares
// presets of one model (issue 21).
TEST_F(CompareTest, TheUserModelIsACellKey) {
  const std::string gpu = Register("node-gpu", {Gpu(0)});
  std::vector<std::string> runs;
  auto study_of = [&](const std::string& sha_digit, const std::string& file, std::vector<int64_t> ms_per_preset) {
    SubmitStudyRequest req;
    req.name = file;
    req.presets = {"baseline", "opt1"};
    req.config = TinyConfig();
    req.config.mutable_model()->set_sha256(std::string(64, sha_digit[0]));
    req.config.mutable_model()->set_file_name(file);
    req.config.mutable_model()->set_size_bytes(1000);
    req.targets = {"gpu=h200"};
    ASSERT_THAT(domain_->studies().SubmitStudy(ctx_, req), IsOk());
    for (int64_t ms : ms_per_preset) {
      std::optional<Assignment> a = Acquire(gpu);
      ASSERT_TRUE(a.has_value());
      runs.push_back(a->run_id);
      Complete(gpu, *a, "NVIDIA H200", "cupti", {ms * kMs, ms * kMs, ms * kMs}, {}, {});
    }
  };
  study_of("a", "unet-a.pt", {100, 50});
  study_of("b", "unet-b.pt", {30, 20});
  CompareRequest r;
  r.run_ids = runs;
  auto out = domain_->queries().Compare(ctx_, r);
  ASSERT_THAT(out, IsOk());
  ASSERT_EQ(out->cells.size(), 4u);
  std::map<std::pair<std::string, std::string>, const CompareCell*> by;
  for (const CompareCell& c : out->cells) by[{c.model_file_name, c.preset}] = &c;
  ASSERT_EQ(by.size(), 4u);
  const CompareCell& a_base = *by[{"unet-a.pt", "baseline"}];
  const CompareCell& b_base = *by[{"unet-b.pt", "baseline"}];
  EXPECT_EQ(a_base.model_sha256, std::string(64, 'a'));
  EXPECT_DOUBLE_EQ(a_base.step_ms_median, 100);
  EXPECT_DOUBLE_EQ(b_base.step_ms_median, 30);
  const CompareCell& a_opt1 = *by[{"unet-a.pt", "opt1"}];
  const CompareCell& b_opt1 = *by[{"unet-b.pt", "opt1"}];
  EXPECT_DOUBLE_EQ(a_opt1.speedup_vs_baseline, 100.0 / 50);
  EXPECT_DOUBLE_EQ(b_opt1.speedup_vs_baseline, 30.0 / 20);
}

// The committed H200 study (bench/results/h200-gpu-node-2026-12-02/compare.json: one run of two
// measured steps per preset). Its two steps per cell are recovered exactly from p10 and p90
// (with two steps a < b: p10 = a + 0.1 (b - a), p90 = a + 0.9 (b - a)), stored, and compared
// again: opt1's 5.25x over baseline must come out significant even from n = 1 and 2 steps,
// since every resample of baseline (1265.97..1269.37 ms) is far above every one of opt1's
// (241.22..241.61 ms): the interval is [1265.97 / 241.61, 1269.37 / 241.22] = [5.24, 5.26].
TEST_F(CompareTest, CommittedH200StudyOpt1IsSignificant) {
  std::ifstream in(std::string(MEDPROF_SOURCE_DIR) + "/bench/results/h200-gpu-node-2026-12-02/compare.json");
  ASSERT_TRUE(in.good());
  const nlohmann::json committed = nlohmann::json::parse(in);
  std::map<std::string, std::vector<int64_t>> steps;
  for (const nlohmann::json& c : committed.at("cells")) {
    const double p10 = c.at("step_ms_p10"), p90 = c.at("step_ms_p90");
    const double a = p10 - 0.1 * (p90 - p10) / 0.8, b = a + (p90 - p10) / 0.8;
    ASSERT_NEAR((a + b) / 2, c.at("step_ms_median").get<double>(), 1e-6);
    steps[c.at("preset")] = {std::llround(a * 1e6), std::llround(b * 1e6)};
  }
  ASSERT_EQ(steps.size(), 5u);
  const std::string gpu = Register("h200", {Gpu(0)});
  const SubmitStudyResult s = Submit({"baseline", "opt1", "opt2", "opt12", "bf16"}, {"gpu=h200"}, 1);
  for (int i = 0; i < 5; ++i) {
    std::optional<Assignment> a = Acquire(gpu);
    ASSERT_TRUE(a.has_value());
    Complete(gpu, *a, "NVIDIA H200", "cupti", steps.at(a->config.preset()), {}, {});
  }
  CompareRequest r;
  r.study_id = s.study_id;
  auto out = domain_->queries().Compare(ctx_, r);
  ASSERT_THAT(out, IsOk());
  ASSERT_EQ(out->cells.size(), 5u);
  const CompareCell& opt1 = out->cells[1];
  ASSERT_EQ(opt1.preset, "opt1");
  EXPECT_NEAR(opt1.speedup_vs_baseline, 5.2510797237773, 1e-6);  // the committed figure
  ASSERT_TRUE(opt1.speedup_ci.has_value());
  EXPECT_TRUE(opt1.speedup_ci->significant);
  EXPECT_NEAR(opt1.speedup_ci->lo, 1265.97 / 241.61, 0.01);
  EXPECT_NEAR(opt1.speedup_ci->hi, 1269.37 / 241.22, 0.01);
  // One run, two steps: both sample-size notes.
  EXPECT_THAT(opt1.notes, ::testing::Contains(HasSubstr("1 run (< 3)")));
  EXPECT_THAT(opt1.notes, ::testing::Contains(HasSubstr("2 measured steps (< 5)")));
}

TEST_F(CompareTest, ValidatesTheRequest) {
  CompareRequest r;
  EXPECT_THAT(domain_->queries().Compare(ctx_, r),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("study_id: required")));
  r.study_id = "st-nope";
  EXPECT_THAT(domain_->queries().Compare(ctx_, r),
              StatusIs(absl::StatusCode::kNotFound, "study_id: no study 'st-nope'"));
  r.baseline_preset = "fp64";
  EXPECT_THAT(domain_->queries().Compare(ctx_, r),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("baseline_preset: unknown preset 'fp64'")));
  r.baseline_preset = "";
  r.top_categories = 13;
  EXPECT_THAT(domain_->queries().Compare(ctx_, r),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("top_categories: 13 is out of range")));
  r.top_categories = 0;
  r.phase = static_cast<v1::Phase>(9);
  EXPECT_THAT(domain_->queries().Compare(ctx_, r),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("phase: 9 is not a phase")));
}

}  // namespace
}  // namespace medprof::server::testing
