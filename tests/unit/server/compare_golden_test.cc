// Golden test of compare: a fixed store built through the real ingest path, compared with the
// committed, hand-checked answer in testdata/compare_golden.json, so that a refactor cannot shift
// a number silently. Regenerate (then re-check by hand) with MEDPROF_UPDATE_GOLDEN=1.
//
// The store (every number below is what the golden file must show):
//  NVIDIA H200 / baseline, 2 runs, steps 10, 12 | 14, 16 ms: pooled median 13, p10 10 + 0.3*2 =
//    10.6, p90 14 + 0.7*2 = 15.4 (rank q*(n-1)). Kernels per run: sm90_fp32_conv (conv) 16 ms,
//    nchwToNhwcKernel (layout, classified from its name) 4 ms -> conv 0.8, layout 0.2.
//    phase:fwd sm_cycles 600 | 1000 and warp_instructions 1200 | 2000 over 2 steps -> per step
//    300 | 500 and 600 | 1000 -> cell means 400 cycles, 800 instructions (ratio 1 to itself);
//    fma_pipe_pct 70 | 50 -> 60; tensor_pipe_pct 0 | 0 -> 0 (measured). Stalls only in run 1:
//    stall.long_scoreboard 2 / cpi 4 = 0.5. Findings: sm90_fp32_conv tensor_cores_idle with
//    priority 0.4 (run 1) and 0.3 (run 2) -> mean 0.35, largest speedup 0.5; the layout kernel has
//    none -> priority 0, listed second (share 0.2).
//  NVIDIA H200 / opt1, steps 4, 6: median 5, p10 4.2, p90 5.8, speedup 13 / 5 = 2.6. Kernels
//    sm90_tf32_conv 6 ms, nchwToNhwcKernel 4 ms -> conv 0.6, layout 0.4. phase:fwd 200 cycles,
//    20 instructions over 2 steps -> 100 and 10 -> ratios 100/400 = 0.25, 10/800 = 0.0125;
//    tensor 60, fma 5. No findings and no stalls: both notes say so.
//  NVIDIA H200 / opt2, steps 20, 20: median 20, speedup 13/20 = 0.65. Op self times only:
//    aten::conv3d 3, aten::add 1 -> ops conv 0.75, elementwise 0.25. Metrics layer "no counter
//    permission": metrics, stalls and findings say so; no metric value at all.
//  cpu / baseline, step 100: median = p10 = p90 = 100; ops conv 9, norm 1 -> 0.9, 0.1;
//    metrics and sampling "no GPU".
//  cpu / opt1, steps 50, 150: median 100, p10 60, p90 140, speedup 1.
//  baseline_gpu "cpu": H200 baseline 100/13 = 7.6923076923076925, opt1 100/5 = 20, opt2 has no
//    cpu cell (note); cpu cells 1.
// Intervals (intervals.h, 2000 seeded replicates; every cell has < 3 runs and < 5 steps: notes):
//  H200 baseline, runs {10, 12} | {14, 16} resampled runs first: a replicate median of 10 needs
//    both draws on run 1 (1/4) and >= 3 of its 4 steps at 10 (5/16): p 0.078 > 0.025, so the
//    interval is [10, 16]. One-run cells of two steps {a, b} reach both: opt1 [4, 6], cpu opt1
//    [50, 150]; constant cells are points (opt2 [20, 20], cpu baseline [100, 100]).
//  Speedups pair independent replicates, so the ends are the extreme ratios whenever each end
//    has p > 0.025: opt2 [10/20, 16/20] = [0.5, 0.8]; opt1 [11/6, 15/4] = [1.833, 3.75] (10/6
//    and 16/4 need two tails at once, p < 0.025); cpu opt1 [100/150, 100/50] = [0.667, 2] holds
//    1.0: not significant; cross-GPU H200 baseline [100/16, 100/10] = [6.25, 10], opt1
//    [50/6, 150/4] = [8.33, 37.5]. The reference cells (baseline, and cpu's own) have none.
#include <google/protobuf/util/json_util.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "server/rpc/convert.h"
#include "tests/unit/server/domain_fixture.h"

namespace medprof::server::testing {
namespace {

using ::medprof::testing::IsOk;
constexpr int64_t kMs = 1'000'000;

v1::WorkerMessage KernelsMsg(const std::vector<std::tuple<std::string, std::string, int64_t>>& rows) {
  v1::WorkerMessage m;
  for (const auto& [name, op, ns] : rows) {
    auto* k = m.mutable_kernels()->add_kernels();
    k->set_name(name);
    k->set_op(op);
    k->set_count(2);
    k->set_total_ns(ns);
  }
  return m;
}

v1::WorkerMessage OpsMsg(const std::vector<std::pair<std::string, int64_t>>& rows) {
  v1::WorkerMessage m;
  for (const auto& [name, ns] : rows) {
    auto* o = m.mutable_ops()->add_ops();
    o->set_name(name);
    o->set_count(1);
    o->set_self_ns(ns);
    o->set_total_ns(ns);
  }
  return m;
}

v1::WorkerMessage FwdMetrics(const std::vector<std::pair<std::string, double>>& values) {
  v1::WorkerMessage m;
  for (const auto& [name, v] : values) {
    auto* mv = m.mutable_metrics()->add_values();
    mv->set_scope("phase:fwd");
    mv->set_name(name);
    mv->set_value(v);
  }
  return m;
}

v1::WorkerMessage ConvFinding(double share, double speedup) {
  v1::WorkerMessage m;
  auto* f = m.mutable_findings()->add_findings();
  f->set_kernel("sm90_fp32_conv");
  f->set_op("aten::conv3d");
  f->set_category("conv");
  f->set_share(share);
  f->set_speedup(speedup);
  f->set_priority(share * speedup);
  f->set_rule("tensor_cores_idle");
  f->set_finding("FP32 FMA-bound convolution, Tensor Cores idle");
  return m;
}

// Equal up to a relative 1e-9 for numbers; same keys and order-insensitive objects otherwise.
bool Same(const nlohmann::json& a, const nlohmann::json& b, const std::string& path, std::string* why) {
  if (a.is_number() && b.is_number()) {
    const double x = a.get<double>(), y = b.get<double>();
    if (std::fabs(x - y) <= 1e-9 * std::max(1.0, std::fabs(y))) return true;
    *why = path + ": " + a.dump() + " != golden " + b.dump();
    return false;
  }
  if (a.type() != b.type()) {
    *why = path + ": " + a.dump() + " != golden " + b.dump();
    return false;
  }
  if (a.is_object()) {
    for (auto it = b.begin(); it != b.end(); ++it) {
      if (!a.contains(it.key())) {
        *why = path + "." + it.key() + ": missing";
        return false;
      }
      if (!Same(a.at(it.key()), it.value(), path + "." + it.key(), why)) return false;
    }
    for (auto it = a.begin(); it != a.end(); ++it) {
      if (!b.contains(it.key())) {
        *why = path + "." + it.key() + ": not in the golden file";
        return false;
      }
    }
    return true;
  }
  if (a.is_array()) {
    if (a.size() != b.size()) {
      *why = path + ": " + std::to_string(a.size()) + " items, golden " + std::to_string(b.size());
      return false;
    }
    for (size_t i = 0; i < a.size(); ++i) {
      if (!Same(a[i], b[i], path + "[" + std::to_string(i) + "]", why)) return false;
    }
    return true;
  }
  if (a != b) *why = path + ": " + a.dump() + " != golden " + b.dump();
  return a == b;
}

class CompareGoldenTest : public DomainTest {
 protected:
  void Run(const std::string& agent, const std::string& gpu, const std::string& backend,
           const std::vector<int64_t>& step_ms, std::vector<v1::WorkerMessage> extra,
           const std::vector<std::pair<std::string, std::string>>& skipped) {
    std::optional<Assignment> a = Acquire(agent);
    ASSERT_TRUE(a.has_value());
    std::vector<std::pair<uint64_t, v1::WorkerMessage>> msgs;
    uint64_t seq = 0;
    msgs.emplace_back(++seq, Started(gpu, backend));
    for (size_t i = 0; i < step_ms.size(); ++i) msgs.emplace_back(++seq, Step(static_cast<int>(i), step_ms[i] * kMs));
    for (auto& m : extra) msgs.emplace_back(++seq, std::move(m));
    v1::WorkerMessage summary;
    auto* trace = summary.mutable_summary()->add_layers();
    trace->set_layer("trace");
    trace->set_ran(true);
    for (const auto& [layer, reason] : skipped) {
      auto* l = summary.mutable_summary()->add_layers();
      l->set_layer(layer);
      l->set_reason(reason);
    }
    msgs.emplace_back(++seq, std::move(summary));
    ASSERT_THAT(Upload(agent, a->run_id, std::move(msgs)), IsOk());
    ASSERT_THAT(Finish(agent, a->run_id, RunState::kSucceeded, seq), IsOk());
  }
};

TEST_F(CompareGoldenTest, MatchesTheHandCheckedAnswer) {
  const std::string gpu = Register("h200-node", {Gpu(0, "NVIDIA H200")});
  const std::string cpu = Register("cpu-node", {Cpu()});
  const std::string study = Submit({"baseline", "opt1", "opt2"}, {"gpu=h200", "device=cpu"}, 2).study_id;
  const std::string h200 = "NVIDIA H200";
  // H200, in queue order: baseline r1, opt1 r1, opt2 r1, baseline r2.
  Run(gpu, h200, "cupti", {10, 12},
      {KernelsMsg({{"sm90_fp32_conv", "aten::conv3d", 16 * kMs}, {"nchwToNhwcKernel", "", 4 * kMs}}),
       FwdMetrics({{"sm_cycles", 600}, {"warp_instructions", 1200}, {"tensor_pipe_pct", 0}, {"fma_pipe_pct", 70},
                   {"cpi", 4}, {"stall.long_scoreboard", 2}}),
       ConvFinding(0.8, 0.5)},
      {});
  Run(gpu, h200, "cupti", {4, 6},
      {KernelsMsg({{"sm90_tf32_conv", "aten::conv3d", 6 * kMs}, {"nchwToNhwcKernel", "", 4 * kMs}}),
       FwdMetrics({{"sm_cycles", 200}, {"warp_instructions", 20}, {"tensor_pipe_pct", 60}, {"fma_pipe_pct", 5}})},
      {});
  Run(gpu, h200, "cupti", {20, 20}, {OpsMsg({{"aten::conv3d", 3}, {"aten::add", 1}})},
      {{"metrics", "no counter permission"}});
  Run(gpu, h200, "cupti", {14, 16},
      {KernelsMsg({{"sm90_fp32_conv", "aten::conv3d", 16 * kMs}, {"nchwToNhwcKernel", "", 4 * kMs}}),
       FwdMetrics({{"sm_cycles", 1000}, {"warp_instructions", 2000}, {"tensor_pipe_pct", 0}, {"fma_pipe_pct", 50}}),
       ConvFinding(0.75, 0.4)},
      {});
  // CPU, in queue order: baseline r1, opt1 r1.
  Run(cpu, "cpu", "cpu", {100}, {OpsMsg({{"aten::conv3d", 9}, {"aten::native_group_norm", 1}})},
      {{"metrics", "no GPU"}, {"sampling", "no GPU"}});
  Run(cpu, "cpu", "cpu", {50, 150}, {OpsMsg({{"aten::conv3d", 9}, {"aten::native_group_norm", 1}})},
      {{"metrics", "no GPU"}, {"sampling", "no GPU"}});

  CompareRequest r;
  r.study_id = study;
  r.baseline_gpu = "cpu";
  r.top_categories = 12;
  auto out = domain_->queries().Compare(ctx_, r);
  ASSERT_THAT(out, IsOk());
  v1::CompareResponse p = rpc::ToProto(*out);
  p.clear_study_id();  // random per run
  google::protobuf::util::JsonPrintOptions opts;
  opts.add_whitespace = true;
  opts.preserve_proto_field_names = true;
  opts.always_print_primitive_fields = true;
  std::string got;
  ASSERT_TRUE(google::protobuf::util::MessageToJsonString(p, &got, opts).ok());

  const std::string path = std::string(MEDPROF_SERVER_TESTDATA_DIR) + "/compare_golden.json";
  if (const char* update = std::getenv("MEDPROF_UPDATE_GOLDEN"); update != nullptr && std::string(update) == "1") {
    std::ofstream(path) << got;
    GTEST_SKIP() << "wrote " << path << ": check it by hand against the comment above";
  }
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << "missing " << path;
  std::stringstream golden;
  golden << in.rdbuf();
  std::string why;
  EXPECT_TRUE(Same(nlohmann::json::parse(got), nlohmann::json::parse(golden.str()), "$", &why))
      << why << "\n--- got:\n"
      << got;
}

}  // namespace
}  // namespace medprof::server::testing
