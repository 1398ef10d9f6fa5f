// QueryEngine beyond step times: counter metrics (phase and kernel scopes), stall shares
// (metrics and PC sampling), findings and top kernels, "not collected" cells, cross-GPU
// speedups, the run filter, and the kernels / diff / timeline queries, on hand-made runs whose
// expected values are worked out in the comments.
#include "server/domain/cell_metrics.h"
#include "tests/unit/server/domain_fixture.h"

namespace medprof::server::testing {
namespace {

using ::medprof::testing::IsOk;
using ::medprof::testing::StatusIs;
using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Optional;
using ::testing::Pair;

constexpr int64_t kMs = 1'000'000;

v1::WorkerMessage Metrics(const std::vector<std::tuple<std::string, std::string, double>>& values) {
  v1::WorkerMessage m;
  for (const auto& [scope, name, v] : values) {
    auto* mv = m.mutable_metrics()->add_values();
    mv->set_scope(scope);
    mv->set_name(name);
    mv->set_value(v);
  }
  return m;
}

v1::WorkerMessage Kernels(const std::vector<std::tuple<std::string, std::string, std::string, int64_t, int64_t>>& rows) {
  v1::WorkerMessage m;
  for (const auto& [name, op, category, count, ns] : rows) {
    auto* k = m.mutable_kernels()->add_kernels();
    k->set_name(name);
    k->set_op(op);
    k->set_category(category);
    k->set_count(count);
    k->set_total_ns(ns);
  }
  return m;
}

v1::WorkerMessage Finding(const std::string& kernel, const std::string& op, const std::string& rule, double share,
                          double speedup, const std::string& text) {
  v1::WorkerMessage m;
  auto* f = m.mutable_findings()->add_findings();
  f->set_kernel(kernel);
  f->set_op(op);
  f->set_rule(rule);
  f->set_share(share);
  f->set_speedup(speedup);
  f->set_priority(share * speedup);
  f->set_finding(text);
  return m;
}

class QueryTest : public DomainTest {
 protected:
  // RunStarted, steps, extra records, a summary with the given layers; then SUCCEEDED.
  void Complete(const std::string& agent, const Assignment& a, const std::string& gpu,
                const std::vector<int64_t>& step_ns, std::vector<v1::WorkerMessage> extra,
                const std::vector<std::pair<std::string, std::string>>& skipped_layers) {
    std::vector<std::pair<uint64_t, v1::WorkerMessage>> msgs;
    uint64_t seq = 0;
    msgs.emplace_back(++seq, Started(gpu, "cupti"));
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

  // H100: baseline (phase-scope metrics, findings, a timeline) and opt1 (kernel-scope metrics,
  // PC sampling); A100: baseline and opt1 without counters ("no counter permission").
  void SetUp() override {
    DomainTest::SetUp();
    const std::string h100 = Register("h100-node", {Gpu(0, "NVIDIA H100 80GB HBM3")});
    const std::string a100 = Register("a100-node", {Gpu(0, "NVIDIA A100-SXM4-40GB", "8.0")});
    study_ = Submit({"baseline", "opt1"}, {"gpu=h100", "gpu=a100"}).study_id;

    std::optional<Assignment> hb = Acquire(h100);
    ASSERT_TRUE(hb.has_value());
    h_base_ = hb->run_id;
    v1::WorkerMessage timeline;
    timeline.mutable_timeline()->set_origin_unix_ns(1'000);
    timeline.mutable_timeline()->set_steps(1);
    for (int i = 0; i < 3; ++i) {
      auto* e = timeline.mutable_timeline()->add_events();
      e->set_name(i == 2 ? "aten::conv3d" : "k_conv_fp32");
      e->set_kind(i == 2 ? "op" : "kernel");
      e->set_start_ns(100 * i);
      e->set_duration_ns(50);
      e->set_stream(i == 2 ? -1 : 7);
    }
    v1::WorkerMessage timeline2;
    timeline2.mutable_timeline()->set_origin_unix_ns(2'000);
    timeline2.mutable_timeline()->set_truncated(true);
    timeline2.mutable_timeline()->add_events()->set_name("k_add");
    v1::WorkerMessage util;
    util.mutable_utilization()->add_metrics("sm_active_pct");
    util.mutable_utilization()->set_interval_ns(100);
    for (int i = 0; i < 2; ++i) {
      auto* s = util.mutable_utilization()->add_samples();
      s->set_t_ns(100 * i);
      s->add_values(50 + i);
    }
    // Per step: sm_cycles (3000 + 6000) / 3 = 3000, warp instructions 27000 / 3 = 9000.
    // Weighted by duration 20 (fwd) and 60 (bwd): fma (80*20 + 60*60) / 80 = 65, occupancy 65,
    // L1 25, L2 75, DRAM 45, tensor 0 (measured as 0). Stalls: long_scoreboard
    // (0.4*20 + 0.6*60) / 80 = 0.55, math_pipe_throttle (0.2*20 + 0.1*60) / 80 = 0.125.
    Complete(h100, *hb, "NVIDIA H100 80GB HBM3", {10 * kMs, 10 * kMs, 10 * kMs},
             {Kernels({{"k_conv_fp32", "aten::conv3d", "conv", 6, 24 * kMs},
                       {"k_add", "aten::add", "elementwise", 3, 6 * kMs}}),
              Metrics({{"phase:fwd", "sm_cycles", 3000}, {"phase:fwd", "warp_instructions", 9000},
                       {"phase:fwd", "duration_ns", 20}, {"phase:fwd", "tensor_pipe_pct", 0},
                       {"phase:fwd", "fma_pipe_pct", 80}, {"phase:fwd", "achieved_occupancy_pct", 50},
                       {"phase:fwd", "l1_hit_pct", 40}, {"phase:fwd", "l2_hit_pct", 60},
                       {"phase:fwd", "dram_throughput_pct", 30}, {"phase:fwd", "cpi", 10},
                       {"phase:fwd", "stall.long_scoreboard", 4}, {"phase:fwd", "stall.math_pipe_throttle", 2},
                       {"phase:bwd", "sm_cycles", 6000}, {"phase:bwd", "warp_instructions", 18000},
                       {"phase:bwd", "duration_ns", 60}, {"phase:bwd", "tensor_pipe_pct", 0},
                       {"phase:bwd", "fma_pipe_pct", 60}, {"phase:bwd", "achieved_occupancy_pct", 70},
                       {"phase:bwd", "l1_hit_pct", 20}, {"phase:bwd", "l2_hit_pct", 80},
                       {"phase:bwd", "dram_throughput_pct", 50}, {"phase:bwd", "cpi", 10},
                       {"phase:bwd", "stall.long_scoreboard", 6}, {"phase:bwd", "stall.math_pipe_throttle", 1},
                       {"kernel:k_conv_fp32", "sm_cycles", 1}, {"run", "share.conv", 0.8}}),
              Finding("k_conv_fp32", "aten::conv3d", "tensor_cores_idle", 0.8, 0.5, "FP32 FMA-bound convolution"),
              Finding("k_add", "aten::add", "memory_bound", 0.2, 0.25, "DRAM-bound elementwise"), timeline,
              timeline2, util},
             {});

    std::optional<Assignment> ho = Acquire(h100);
    ASSERT_TRUE(ho.has_value());
    h_opt1_ = ho->run_id;
    // Kernel scopes: conv 2 launches/step * 200 + add 1 * 100 = 500 cycles/step; instructions
    // 2 * 100 + 300 = 500. Weighted by traced time 9 ms and 6 ms: tensor (40*9 + 0*6) / 15 = 24,
    // fma (10*9 + 20*6) / 15 = 14, occupancy (30*9 + 90*6) / 15 = 54, L2 (70*9 + 50*6) / 15 = 62.
    // PC sampling: long_scoreboard (0.5*9 + 0.8*6) / 15 = 0.62, selected 0.5*9/15 = 0.3,
    // wait 0.2*6/15 = 0.08.
    Complete(h100, *ho, "NVIDIA H100 80GB HBM3", {5 * kMs, 5 * kMs, 5 * kMs},
             {Kernels({{"k_conv_tf32", "aten::conv3d", "conv", 6, 9 * kMs},
                       {"k_add", "aten::add", "elementwise", 3, 6 * kMs}}),
              Metrics({{"kernel:k_conv_tf32", "sm_cycles", 200}, {"kernel:k_conv_tf32", "warp_instructions", 100},
                       {"kernel:k_conv_tf32", "tensor_pipe_pct", 40}, {"kernel:k_conv_tf32", "fma_pipe_pct", 10},
                       {"kernel:k_conv_tf32", "achieved_occupancy_pct", 30}, {"kernel:k_conv_tf32", "l2_hit_pct", 70},
                       {"kernel:k_conv_tf32", "pcsamp.long_scoreboard", 0.5},
                       {"kernel:k_conv_tf32", "pcsamp.selected", 0.5}, {"kernel:k_conv_tf32", "pcsamp.samples", 900},
                       {"kernel:k_add", "sm_cycles", 100}, {"kernel:k_add", "warp_instructions", 300},
                       {"kernel:k_add", "tensor_pipe_pct", 0}, {"kernel:k_add", "fma_pipe_pct", 20},
                       {"kernel:k_add", "achieved_occupancy_pct", 90}, {"kernel:k_add", "l2_hit_pct", 50},
                       {"kernel:k_add", "pcsamp.long_scoreboard", 0.8}, {"kernel:k_add", "pcsamp.wait", 0.2}})},
             {});

    std::optional<Assignment> ab = Acquire(a100);
    ASSERT_TRUE(ab.has_value());
    a_base_ = ab->run_id;
    Complete(a100, *ab, "NVIDIA A100-SXM4-40GB", {20 * kMs, 20 * kMs},
             {Kernels({{"k_conv_fp32", "aten::conv3d", "conv", 4, 30 * kMs}})},
             {{"metrics", "no counter permission"}, {"sampling", "no counter permission"}});
    std::optional<Assignment> ao = Acquire(a100);
    ASSERT_TRUE(ao.has_value());
    a_opt1_ = ao->run_id;
    Complete(a100, *ao, "NVIDIA A100-SXM4-40GB", {8 * kMs, 8 * kMs}, {},
             {{"metrics", "no counter permission"}, {"sampling", "no counter permission"}});
  }

  const CompareCell& Cell(const CompareResult& r, const std::string& gpu_part, const std::string& preset) {
    for (const CompareCell& c : r.cells) {
      if (c.gpu.find(gpu_part) != std::string::npos && c.preset == preset) return c;
    }
    ADD_FAILURE() << "no cell " << gpu_part << "/" << preset;
    static CompareCell none;
    return none;
  }

  std::string study_, h_base_, h_opt1_, a_base_, a_opt1_;
};

TEST_F(QueryTest, IngestStoresFindingsAndTimelines) {
  EXPECT_EQ(Count("run_findings"), 2);
  EXPECT_EQ(Count("run_timelines"), 3);  // two timeline parts, one utilization part
}

TEST_F(QueryTest, CompareMetricsFromPhaseScopes) {
  CompareRequest r;
  r.study_id = study_;
  auto out = domain_->queries().Compare(ctx_, r);
  ASSERT_THAT(out, IsOk());
  ASSERT_EQ(out->cells.size(), 4u);
  EXPECT_EQ(out->runs_compared, 4);
  const CompareCell& c = Cell(*out, "H100", "baseline");
  const CellMetrics& m = c.metrics;
  EXPECT_TRUE(m.collected);
  EXPECT_EQ(m.source, "phase");
  EXPECT_EQ(m.runs_with_metrics, 1);
  EXPECT_THAT(m.sm_cycles, Optional(DoubleNear(3000, 1e-9)));
  EXPECT_THAT(m.warp_instructions, Optional(DoubleNear(9000, 1e-9)));
  EXPECT_THAT(m.sm_cycles_ratio, Optional(DoubleNear(1.0, 1e-12)));
  EXPECT_THAT(m.tensor_pipe_pct, Optional(DoubleNear(0, 1e-12)));  // measured zero, not missing
  EXPECT_THAT(m.fma_pipe_pct, Optional(DoubleNear(65, 1e-9)));
  EXPECT_THAT(m.achieved_occupancy_pct, Optional(DoubleNear(65, 1e-9)));
  EXPECT_THAT(m.l1_hit_pct, Optional(DoubleNear(25, 1e-9)));
  EXPECT_THAT(m.l2_hit_pct, Optional(DoubleNear(75, 1e-9)));
  EXPECT_THAT(m.dram_throughput_pct, Optional(DoubleNear(45, 1e-9)));
  EXPECT_TRUE(c.stalls.collected);
  EXPECT_EQ(c.stalls.source, "metrics");
  EXPECT_THAT(c.stalls.shares, ElementsAre(Pair("long_scoreboard", DoubleNear(0.55, 1e-12)),
                                           Pair("math_pipe_throttle", DoubleNear(0.125, 1e-12))));
  // Top kernels by priority, with their findings.
  ASSERT_EQ(c.top_kernels.size(), 2u);
  EXPECT_EQ(c.top_kernels[0].name, "k_conv_fp32");
  EXPECT_DOUBLE_EQ(c.top_kernels[0].priority, 0.4);
  EXPECT_DOUBLE_EQ(c.top_kernels[0].share, 0.8);
  EXPECT_EQ(c.top_kernels[0].total_ns, 24 * kMs);
  ASSERT_EQ(c.top_kernels[0].findings.size(), 1u);
  EXPECT_EQ(c.top_kernels[0].findings[0].rule, "tensor_cores_idle");
  EXPECT_EQ(c.top_kernels[1].name, "k_add");
  EXPECT_DOUBLE_EQ(c.top_kernels[1].priority, 0.05);
  EXPECT_DOUBLE_EQ(c.top_kernels[1].speedup, 0.25);
  EXPECT_EQ(c.findings_note, "");
}

TEST_F(QueryTest, CompareMetricsFromKernelScopesAndPcSampling) {
  CompareRequest r;
  r.study_id = study_;
  auto out = domain_->queries().Compare(ctx_, r);
  ASSERT_THAT(out, IsOk());
  const CompareCell& c = Cell(*out, "H100", "opt1");
  const CellMetrics& m = c.metrics;
  EXPECT_TRUE(m.collected);
  EXPECT_EQ(m.source, "kernels");
  EXPECT_THAT(m.sm_cycles, Optional(DoubleNear(500, 1e-9)));
  EXPECT_THAT(m.warp_instructions, Optional(DoubleNear(500, 1e-9)));
  EXPECT_THAT(m.sm_cycles_ratio, Optional(DoubleNear(500.0 / 3000.0, 1e-12)));
  EXPECT_THAT(m.warp_instructions_ratio, Optional(DoubleNear(500.0 / 9000.0, 1e-12)));
  EXPECT_THAT(m.tensor_pipe_pct, Optional(DoubleNear(24, 1e-9)));
  EXPECT_THAT(m.fma_pipe_pct, Optional(DoubleNear(14, 1e-9)));
  EXPECT_THAT(m.achieved_occupancy_pct, Optional(DoubleNear(54, 1e-9)));
  EXPECT_THAT(m.l2_hit_pct, Optional(DoubleNear(62, 1e-9)));
  EXPECT_EQ(m.l1_hit_pct, std::nullopt);  // not measured: absent, not zero
  EXPECT_EQ(m.dram_throughput_pct, std::nullopt);
  EXPECT_EQ(c.stalls.source, "pc_sampling");
  EXPECT_THAT(c.stalls.shares, ElementsAre(Pair("long_scoreboard", DoubleNear(0.62, 1e-12)),
                                           Pair("selected", DoubleNear(0.3, 1e-12)),
                                           Pair("wait", DoubleNear(0.08, 1e-12))));
  // No findings: top kernels by time, and the note says why.
  ASSERT_EQ(c.top_kernels.size(), 2u);
  EXPECT_EQ(c.top_kernels[0].name, "k_conv_tf32");
  EXPECT_DOUBLE_EQ(c.top_kernels[0].share, 0.6);
  EXPECT_DOUBLE_EQ(c.top_kernels[0].priority, 0);
  EXPECT_EQ(c.findings_note, "findings not collected: no findings stored for these runs");
}

TEST_F(QueryTest, CellsWithoutCountersSayWhyAndCarryNoValues) {
  CompareRequest r;
  r.study_id = study_;
  auto out = domain_->queries().Compare(ctx_, r);
  ASSERT_THAT(out, IsOk());
  for (const char* preset : {"baseline", "opt1"}) {
    const CompareCell& c = Cell(*out, "A100", preset);
    EXPECT_FALSE(c.metrics.collected) << preset;
    EXPECT_EQ(c.metrics.not_collected, "metrics not collected: no counter permission");
    EXPECT_EQ(c.metrics.sm_cycles, std::nullopt);
    EXPECT_EQ(c.metrics.sm_cycles_ratio, std::nullopt);
    EXPECT_EQ(c.metrics.tensor_pipe_pct, std::nullopt);
    EXPECT_EQ(c.metrics.source, "");
    EXPECT_FALSE(c.stalls.collected);
    EXPECT_EQ(c.stalls.not_collected,
              "stalls not collected: sampling: no counter permission; metrics: no counter permission");
    EXPECT_EQ(c.findings_note, "findings not collected: no counter permission");
  }
  // The A100 opt1 run has no kernel rows: no top kernels at all.
  EXPECT_TRUE(Cell(*out, "A100", "opt1").top_kernels.empty());
  EXPECT_EQ(Cell(*out, "A100", "baseline").top_kernels.size(), 1u);
}

TEST_F(QueryTest, CrossGpuSpeedupAtAFixedPreset) {
  CompareRequest r;
  r.study_id = study_;
  r.baseline_gpu = "h100";  // a unique, case-insensitive part of the name
  auto out = domain_->queries().Compare(ctx_, r);
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ(out->baseline_gpu, "NVIDIA H100 80GB HBM3");
  EXPECT_DOUBLE_EQ(Cell(*out, "A100", "baseline").speedup_vs_baseline_gpu, 10.0 / 20.0);
  EXPECT_DOUBLE_EQ(Cell(*out, "A100", "opt1").speedup_vs_baseline_gpu, 5.0 / 8.0);
  EXPECT_TRUE(Cell(*out, "H100", "opt1").has_gpu_baseline);
  EXPECT_DOUBLE_EQ(Cell(*out, "H100", "opt1").speedup_vs_baseline_gpu, 1.0);
  // Same-GPU speedups are unchanged.
  EXPECT_DOUBLE_EQ(Cell(*out, "A100", "opt1").speedup_vs_baseline, 20.0 / 8.0);

  r.baseline_gpu = "nvidia";
  EXPECT_THAT(domain_->queries().Compare(ctx_, r),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("matches several GPUs")));
  r.baseline_gpu = "v100";
  EXPECT_THAT(domain_->queries().Compare(ctx_, r),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("baseline_gpu: 'v100' matches no GPU")));
}

TEST_F(QueryTest, RunFilter) {
  CompareRequest r;
  r.run_ids = {h_base_, h_opt1_};
  auto out = domain_->queries().Compare(ctx_, r);
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ(out->runs_compared, 2);
  ASSERT_EQ(out->cells.size(), 2u);
  EXPECT_EQ(out->cells[0].preset, "baseline");
  EXPECT_DOUBLE_EQ(out->cells[1].speedup_vs_baseline, 2.0);

  r.run_ids = {h_base_, "run-nope"};
  EXPECT_THAT(domain_->queries().Compare(ctx_, r),
              StatusIs(absl::StatusCode::kNotFound, "run_ids[1]: no run 'run-nope'"));
  r.run_ids = {h_base_};
  r.study_id = "st-other";
  EXPECT_THAT(domain_->queries().Compare(ctx_, r),
              StatusIs(absl::StatusCode::kNotFound, "study_id: no study 'st-other'"));
  r.study_id = "";
  r.top_kernels = 51;
  EXPECT_THAT(domain_->queries().Compare(ctx_, r),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("top_kernels: 51 is out of range")));
}

TEST_F(QueryTest, RunFilterRefusesUnfinishedRuns) {
  const std::string h100 = Register("h100-node-2", {Gpu(0, "NVIDIA H100 80GB HBM3")});
  const std::string other = Submit({"opt2"}, {"gpu=h100"}).study_id;
  std::optional<Assignment> a = Acquire(h100);
  ASSERT_TRUE(a.has_value());
  CompareRequest r;
  r.run_ids = {a->run_id};
  EXPECT_THAT(domain_->queries().Compare(ctx_, r),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("is running (only succeeded runs")));
  r.study_id = study_;
  EXPECT_THAT(domain_->queries().Compare(ctx_, r),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("belongs to study " + other)));
}

TEST_F(QueryTest, KernelsLargestFirstWithShares) {
  KernelsRequest r;
  r.run_id = h_base_;
  auto out = domain_->queries().Kernels(ctx_, r);
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ(out->time_source, "kernels");
  EXPECT_EQ(out->total_ns, 30 * kMs);
  ASSERT_EQ(out->kernels.size(), 2u);
  EXPECT_EQ(out->kernels[0].name, "k_conv_fp32");
  EXPECT_EQ(out->kernels[0].count, 6);
  EXPECT_DOUBLE_EQ(out->kernels[0].share, 0.8);
  EXPECT_EQ(out->kernels[1].category, "elementwise");
  r.top = 1;
  out = domain_->queries().Kernels(ctx_, r);
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ(out->kernels.size(), 1u);
  EXPECT_EQ(out->total_rows, 2);
  EXPECT_DOUBLE_EQ(out->kernels[0].share, 0.8);  // of every row, not of the listed ones
  r.run_id = "run-nope";
  EXPECT_THAT(domain_->queries().Kernels(ctx_, r), StatusIs(absl::StatusCode::kNotFound, "run_id: no run 'run-nope'"));
  r.run_id = h_base_;
  r.top = -1;
  EXPECT_THAT(domain_->queries().Kernels(ctx_, r),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("top: -1 is out of range")));
}

// Signatures are stored from the worker's message and listed per listed kernel with their share of
// it; the kernel row says its aggregate's coverage, the signature row whether it was measured.
TEST_F(QueryTest, KernelsWithSignaturesAndCoverage) {
  const std::string node = Register("h200-node", {Gpu(0, "NVIDIA H200")});
  const std::string study = Submit({"opt12"}, {"gpu=h200"}).study_id;
  std::optional<Assignment> a = Acquire(node);
  ASSERT_TRUE(a.has_value());
  v1::WorkerMessage sigs;
  sigs.mutable_signatures()->set_steps(2);
  // The copy into channels-last (3 ms) and back (1 ms), same sizes, 2 launches each over 2 steps.
  for (const auto& [id, shapes, ns] : std::vector<std::tuple<std::string, std::string, int64_t>>{
           {"aaaaaaaaaaaa", "f32[1,64,8,8,8]cl f32[1,64,8,8,8] false", 6 * kMs},
           {"bbbbbbbbbbbb", "f32[1,64,8,8,8] f32[1,64,8,8,8]cl false", 2 * kMs}}) {
    v1::KernelSignature* k = sigs.mutable_signatures()->add_signatures();
    k->set_id(id);
    k->set_kernel("k_copy");
    k->set_op("aten::copy_");
    k->set_shapes(shapes);
    k->add_grid(512);
    k->add_block(128);
    k->set_count(2);
    k->set_total_ns(ns);
  }
  Complete(node, *a, "NVIDIA H200", {10 * kMs, 10 * kMs},
           {Kernels({{"k_copy", "aten::copy_", "layout", 4, 8 * kMs}, {"k_add", "aten::add", "elementwise", 2, kMs}}),
            std::move(sigs),
            Metrics({{"kernel:k_copy", "coverage_pct", 75}, {"signature:aaaaaaaaaaaa", "duration_ns", 3e6}})},
           {});
  KernelsRequest r;
  r.run_id = a->run_id;
  r.signatures = true;
  auto out = domain_->queries().Kernels(ctx_, r);
  ASSERT_THAT(out, IsOk());
  ASSERT_EQ(out->kernels.size(), 2u);
  EXPECT_DOUBLE_EQ(out->kernels[0].coverage_pct, 75);
  EXPECT_DOUBLE_EQ(out->kernels[1].coverage_pct, -1);  // not measured
  ASSERT_EQ(out->signatures.size(), 2u);
  EXPECT_EQ(out->signatures[0].row.id, "aaaaaaaaaaaa");  // largest first
  EXPECT_DOUBLE_EQ(out->signatures[0].share_of_kernel, 0.75);
  EXPECT_DOUBLE_EQ(out->signatures[0].launches_per_step, 1.0);
  EXPECT_TRUE(out->signatures[0].measured);
  EXPECT_FALSE(out->signatures[1].measured);
  EXPECT_EQ(out->signatures[1].row.shapes, "f32[1,64,8,8,8] f32[1,64,8,8,8]cl false");
  EXPECT_EQ(out->signatures[1].row.grid, std::vector<int>({512}));
  r.top = 1;  // only the listed kernels' signatures
  r.run_id = h_base_;
  out = domain_->queries().Kernels(ctx_, r);
  ASSERT_THAT(out, IsOk());
  EXPECT_TRUE(out->signatures.empty());  // a run stored without signatures

  // compare's top kernels say the same coverage (-1: not measured).
  CompareRequest c;
  c.study_id = study;
  auto cmp = domain_->queries().Compare(ctx_, c);
  ASSERT_THAT(cmp, IsOk());
  ASSERT_EQ(cmp->cells.size(), 1u);
  std::map<std::string, double> coverage;
  for (const TopKernel& k : cmp->cells[0].top_kernels) coverage[k.name] = k.coverage_pct;
  EXPECT_DOUBLE_EQ(coverage.at("k_copy"), 75);
  EXPECT_DOUBLE_EQ(coverage.at("k_add"), -1);
}

TEST_F(QueryTest, DiffAlignsByOpAndCategoryPerStep) {
  DiffRequest r;
  r.run_a = h_base_;
  r.run_b = h_opt1_;
  auto out = domain_->queries().Diff(ctx_, r);
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ(out->time_source, "kernels");
  EXPECT_EQ(out->a_steps, 3);
  EXPECT_EQ(out->a_total_ns, 10 * kMs);  // 30 ms over 3 steps
  EXPECT_EQ(out->b_total_ns, 5 * kMs);
  ASSERT_EQ(out->rows.size(), 2u);
  const DiffRowView& conv = out->rows[0];
  EXPECT_EQ(conv.op, "aten::conv3d");
  EXPECT_EQ(conv.category, "conv");
  EXPECT_EQ(conv.a_ns, 8 * kMs);
  EXPECT_EQ(conv.b_ns, 3 * kMs);
  EXPECT_EQ(conv.delta_ns, -5 * kMs);
  EXPECT_DOUBLE_EQ(conv.ratio, 0.375);
  EXPECT_DOUBLE_EQ(conv.a_share, 0.8);
  EXPECT_DOUBLE_EQ(conv.b_share, 0.6);
  EXPECT_EQ(conv.a_count, 2);
  EXPECT_EQ(conv.a_kernels, 1);
  EXPECT_EQ(out->rows[1].delta_ns, 0);
  // A run without kernel or op rows cannot be diffed.
  r.run_b = a_opt1_;
  EXPECT_THAT(domain_->queries().Diff(ctx_, r),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("has no kernel or op times")));
}

TEST_F(QueryTest, TimelinePartsMergedOrTheReasonThereIsNone) {
  auto out = domain_->queries().Timeline(ctx_, h_base_);
  ASSERT_THAT(out, IsOk());
  EXPECT_EQ(out->timeline.origin_unix_ns(), 1000);
  ASSERT_EQ(out->timeline.events_size(), 4);
  EXPECT_EQ(out->timeline.events(2).kind(), "op");
  EXPECT_EQ(out->timeline.events(3).name(), "k_add");
  EXPECT_EQ(out->timeline.events(3).start_ns(), 1000);  // second part's origin is 1000 ns later
  EXPECT_TRUE(out->timeline.truncated());
  ASSERT_TRUE(out->utilization.has_value());
  EXPECT_EQ(out->utilization->samples_size(), 2);

  EXPECT_THAT(domain_->queries().Timeline(ctx_, a_base_),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       "run " + a_base_ + " has no stored timeline: the worker sent no Timeline record (a worker "
                                          "without the raw-timeline feature)"));
}

TEST(CellMetrics, PhaseScopesOfEachStepPhase) {
  EXPECT_THAT(PhaseScopes(v1::PHASE_TRAIN), ElementsAre("fwd", "bwd", "optim", "train"));
  EXPECT_THAT(PhaseScopes(v1::PHASE_FORWARD), ElementsAre("fwd", "forward"));
  EXPECT_THAT(PhaseScopes(v1::PHASE_SAMPLE), ElementsAre("sample_step", "sample"));
}

TEST(CellMetrics, ForwardCellUsesOnlyTheFwdScopeAndIgnoresDerivedRows) {
  // Only derived rows in the phase scope: fall back to the kernel scope.
  RunMetrics m = ExtractRunMetrics({{"phase:fwd", "gpu_time_ns", 5, ""}, {"kernel:k", "sm_cycles", 7, ""}}, {},
                                   v1::PHASE_FORWARD, 1, {});
  EXPECT_EQ(m.source, "kernels");
  EXPECT_THAT(m.sm_cycles, Optional(7.0));
  m = ExtractRunMetrics({{"phase:fwd", "sm_cycles", 40, ""}, {"phase:bwd", "sm_cycles", 1000, ""}}, {},
                        v1::PHASE_FORWARD, 4, {});
  EXPECT_EQ(m.source, "phase");
  EXPECT_THAT(m.sm_cycles, Optional(10.0));  // 40 over 4 steps; bwd is not part of forward
  m = ExtractRunMetrics({}, {}, v1::PHASE_TRAIN, 3, {});
  EXPECT_FALSE(m.any);
  EXPECT_EQ(m.source, "");
}

// Roofs: DRAM 4 TB/s, TF32 Tensor Cores 400 TFLOP/s. Kernel a (1 ms per step): 3.2 GB DRAM -> 0.8 ms
// -> memory-bound at 80 %. Kernel b (3 ms): 900 GFLOP TF32 -> 2.25 ms -> compute-bound at 75 %.
// An older per-launch row (no coverage_pct) and a kernel without work or traffic are not placed.
// Time-weighted: (80 * 1 + 75 * 3) / 4 = 76.25 %; a quarter of the time memory-bound, the rest compute.
TEST(CellMetrics, TheRooflineWeighsTheKernelAggregatesByTime) {
  const std::vector<MetricRow> rows = {
      {"kernel:a", "coverage_pct", 100, ""},   {"kernel:a", "duration_ns", 1e6, "ns"},
      {"kernel:a", "bytes.dram", 3.2e9, "bytes"}, {"kernel:a", "flops.fp32", 1e9, "flop"},
      {"kernel:b", "coverage_pct", 100, ""},   {"kernel:b", "duration_ns", 3e6, "ns"},
      {"kernel:b", "flops.tensor_tf32", 9e11, "flop"},
      {"kernel:c", "duration_ns", 1e6, "ns"},  {"kernel:c", "bytes.dram", 4e9, "bytes"},
      {"kernel:d", "coverage_pct", 100, ""},   {"kernel:d", "duration_ns", 5e6, "ns"},
      {"kernel:d", "sm_cycles", 9e6, "cycles"}};
  const roofline::Roofs roofs = {{"dram", {4e12, true}}, {"tensor_tf32", {4e14, false}}};
  RunMetrics m = ExtractRunMetrics(rows, {}, v1::PHASE_FORWARD, 1, roofs);
  ASSERT_TRUE(m.roofline.has_value());
  EXPECT_DOUBLE_EQ(m.roofline->duration_ns, 4e6);
  EXPECT_NEAR(m.roofline->pct_of_roof, 76.25, 1e-9);
  EXPECT_DOUBLE_EQ(m.roofline->share.at(roofline::Bound::kMemory), 0.25);
  EXPECT_DOUBLE_EQ(m.roofline->share.at(roofline::Bound::kCompute), 0.75);
  EXPECT_FALSE(m.roofline->share.count(roofline::Bound::kLatency));
  // The same rows without ceilings (a CPU run, or one stored before them): no roofline.
  EXPECT_FALSE(ExtractRunMetrics(rows, {}, v1::PHASE_FORWARD, 1, {}).roofline.has_value());
}

}  // namespace
}  // namespace medprof::server::testing
