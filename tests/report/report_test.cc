// `medprof report` end to end: a fixture store (the real SqliteStore on :memory:, filled through
// the real domain: register, submit, acquire, upload worker records, finish) behind the real
// gRPC server on 127.0.0.1, the real `medprof report` CLI path (RunCli), and the HTML it writes
// opened in real headless Chromium. The test fails on any console error or any request that is
// not file:// or data:, checks in the rendered DOM that every named chart is an SVG with one mark
// per data point (counted independently from the server's Compare answer) or a "not collected"
// panel with the server's reason, and saves a full-page screenshot in the test's output dir
// ($MEDPROF_TEST_OUTPUT_DIR, set by CMake to <build>/tests/report/output).
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "client/client.h"
#include "client/commands.h"
#include "client/report/report.h"
#include "common/workload_config.h"
#include "server/rpc/grpc_server.h"
#include "tests/report/headless_chromium.h"
#include "tests/unit/server/domain_fixture.h"

namespace medprof::server::testing {
namespace {

using json = nlohmann::json;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kConvFp32[] =
    "sm80_xmma_fprop_implicit_gemm_f32f32_f32f32_f32_nchwkcrs_nchw_tilesize256x64x8_stage3_warpsize2x2x1_g1_ffma_"
    "aligna4_alignc4_execute_kernel__5x_cudnn";
constexpr char kConvTf32[] =
    "sm80_xmma_fprop_implicit_gemm_indexed_wo_smem_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x32x16_stage1_"
    "warpsize4x1x1_g1_tensor16x8x8_aligna4_alignc8_execute_kernel__5x_cudnn";
constexpr char kNorm[] = "void at::native::(anonymous namespace)::RowwiseMomentsCUDAKernel<float, float>(long, float, float const*, float*, float*)";
constexpr char kSilu[] =
    "void at::native::vectorized_elementwise_kernel<4, at::native::silu_kernel(at::TensorIteratorBase&)::{lambda()#1}::"
    "operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2> >(int, "
    "at::native::silu_kernel(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#2}::operator()() "
    "const::{lambda(float)#1}, at::detail::Array<char*, 2>)";
constexpr char kToNhwc[] =
    "void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true, (cudnnKernelDataType_t)2>(cudnn::ops::"
    "nchw2nhwc_params_t<float>, float const*, float*)";

std::string OutputDir() {
  const char* dir = std::getenv("MEDPROF_TEST_OUTPUT_DIR");
  std::string out = dir != nullptr && *dir != '\0' ? dir : std::filesystem::temp_directory_path().string() + "/medprof-report-test";
  std::filesystem::create_directories(out);
  return out;
}

v1::WorkerMessage Msg(const v1::RunStarted& m) { v1::WorkerMessage w; *w.mutable_started() = m; return w; }

// What a worker would send for one run of `preset`: on the H200 with the trace and metrics
// layers, or on the CPU backend with no profiler layer but op times.
std::vector<v1::WorkerMessage> RunRecords(const std::string& preset, bool gpu, const std::string& gpu_name = "NVIDIA H200",
                                          double slowdown = 1.0) {
  const bool tf32 = preset == "opt1" || preset == "opt12";
  const bool nhwc = preset == "opt2" || preset == "opt12";
  const std::map<std::string, double> base_ms = {{"baseline", 410}, {"opt1", 150}, {"opt2", 520}, {"opt12", 210}};
  const double step_ms = (gpu ? slowdown : 9.0) * base_ms.at(preset);
  std::vector<v1::WorkerMessage> out;

  v1::RunStarted started;
  v1::Environment* env = started.mutable_environment();
  started.set_backend(gpu ? "cupti" : "cpu");
  started.set_parameters(40226433);
  started.mutable_effective()->set_preset(preset);
  started.mutable_effective()->set_phase(v1::PHASE_TRAIN);
  if (gpu) {
    env->set_host("gpu-node-7");
    env->set_gpu_name(gpu_name);
    env->set_compute_capability("9.0");
    env->set_driver_version("580.95.05");
    env->set_cuda_runtime_version("13.0");
    env->set_cudnn_version("9.19.0");
    env->set_torch_version("2.11.0");
    env->set_cupti_version("13.0");
    env->set_container_image("medprof-cuda13.sif");
    env->set_slurm_job_id("123456");
    env->set_slurm_partition("gh");
    env->set_site("tacc");
    // The roofline's ceilings as the worker stores them: measured on the node beside the datasheet.
    auto ceiling = [&](const char* name, double measured, double datasheet) {
      v1::Ceiling* c = env->mutable_ceilings()->add_ceilings();
      c->set_name(name);
      c->set_measured(measured);
      c->set_datasheet(datasheet);
    };
    ceiling("dram", 4.1e12, 4.8e12);
    ceiling("fp32", 51e12, 67e12);
    ceiling("tensor_tf32", 420e12, 494.7e12);
  } else {
    env->set_host("laptop-3");
    env->set_gpu_name("cpu");
    env->set_torch_version("1.13.1");
    env->set_cpu_threads(2);
  }
  out.push_back(Msg(started));

  for (int i = 0; i < 5; ++i) {
    v1::WorkerMessage m;
    m.mutable_step()->set_phase(v1::PHASE_TRAIN);
    m.mutable_step()->set_step(i);
    m.mutable_step()->set_wall_ns(static_cast<int64_t>((step_ms + 3.0 * ((i * 7) % 5 - 2)) * 1e6));
    out.push_back(m);
  }

  v1::WorkerMessage summary;
  v1::RunSummary* s = summary.mutable_summary();
  s->set_measured_steps(5);
  s->set_step_ms_median(step_ms);
  auto layer = [&](const char* name, bool ran, const char* reason) {
    v1::LayerStatus* l = s->add_layers();
    l->set_layer(name);
    l->set_ran(ran);
    l->set_reason(reason);
  };

  if (!gpu) {
    v1::WorkerMessage ops;
    ops.mutable_ops()->set_steps(5);
    const std::vector<std::tuple<const char*, const char*, double>> op_rows = {
        {"aten::conv3d", "conv", 0.62}, {"aten::native_group_norm", "norm", 0.18},
        {"aten::silu", "elementwise", 0.12}, {"aten::add", "elementwise", 0.05}, {"Optimizer.step#Adam.step", "optimizer", 0.03}};
    for (const auto& [name, category, share] : op_rows) {
      v1::OpStat* o = ops.mutable_ops()->add_ops();
      o->set_name(name);
      o->set_category(category);
      o->set_phase("fwd");
      o->set_count(50);
      o->set_total_ns(static_cast<int64_t>(share * step_ms * 5e6));
      o->set_self_ns(static_cast<int64_t>(share * step_ms * 5e6));
    }
    out.push_back(ops);
    layer("trace", false, "no GPU");
    layer("sampling", false, "no GPU");
    layer("metrics", false, "no GPU");
    layer("cpu", true, "");
    out.push_back(summary);
    return out;
  }

  // Kernels per step (x5 steps): conv dominates; channels-last adds layout conversions.
  struct K {
    std::string name, op, category;
    double ms;  // per step
    double tensor, fma, l2, dram;
  };
  std::vector<K> ks = {
      {tf32 ? kConvTf32 : kConvFp32, "aten::cudnn_convolution", "conv", step_ms * (nhwc ? 0.45 : 0.70), tf32 ? 62.0 : 0.0,
       tf32 ? 9.0 : 71.0, nhwc ? 78.0 : 64.0, nhwc ? 22.0 : 35.0},
      {kNorm, "aten::native_group_norm", "norm", step_ms * 0.12, 0, 18, 55, 71},
      {kSilu, "aten::silu", "elementwise", step_ms * 0.18, 0, 12, 48, 83},
  };
  if (nhwc) ks.push_back({kToNhwc, "aten::contiguous", "layout", step_ms * 0.25, 0, 3, 81, 64});
  v1::WorkerMessage kernels;
  kernels.mutable_kernels()->set_steps(5);
  v1::WorkerMessage metrics;
  v1::WorkerMessage findings;
  double total_ms = 0;
  for (const K& k : ks) total_ms += k.ms;
  for (const K& k : ks) {
    v1::KernelStat* st = kernels.mutable_kernels()->add_kernels();
    st->set_name(k.name);
    st->set_op(k.op);
    st->set_phase("fwd");
    st->set_category(k.category);
    st->set_count(10);
    st->set_total_ns(static_cast<int64_t>(k.ms * 5e6));
    st->set_min_ns(static_cast<int64_t>(k.ms * 0.09e6));
    st->set_max_ns(static_cast<int64_t>(k.ms * 0.11e6));
    const std::string scope = "kernel:" + k.name;
    auto metric = [&](const std::string& name, double value, const char* unit) {
      v1::MetricValue* v = metrics.mutable_metrics()->add_values();
      v->set_scope(scope);
      v->set_name(name);
      v->set_value(value);
      v->set_unit(unit);
    };
    metric("duration_ns", k.ms * 0.1e6, "ns");
    metric("sm_cycles", k.ms * 0.1e6 * 1.98 * (tf32 ? 1.0 : 1.0), "cycles");
    metric("warp_instructions", k.ms * 1e5 * (tf32 && k.category == "conv" ? 3 : 40), "inst");
    metric("tensor_pipe_pct", k.tensor, "%");
    metric("fma_pipe_pct", k.fma, "%");
    metric("achieved_occupancy_pct", 41, "%");
    metric("l1_hit_pct", 22, "%");
    metric("l2_hit_pct", k.l2, "%");
    metric("dram_throughput_pct", k.dram, "%");
    metric("cpi", 10, "cycles/inst");
    metric("stall.long_scoreboard", k.category == "conv" ? 2.5 : 5.5, "cycles/issue");
    metric("stall.math_pipe_throttle", k.category == "conv" ? 4.0 : 0.5, "cycles/issue");
    metric("stall.wait", 1.5, "cycles/issue");
    // Work and traffic: the convolution near its compute roof (TF32 Tensor Cores, or FP32 CUDA cores
    // under strict FP32), GroupNorm and SiLU under the DRAM roof; the layout copy moves bytes only.
    const double seconds = k.ms * 0.1e-3;
    if (k.category == "conv") {
      const double flops = tf32 ? 0.6 * 420e12 * seconds : 0.8 * 51e12 * seconds;
      metric(tf32 ? "flops.tensor_tf32" : "flops.fp32", flops, "flop");
      metric("bytes.dram", flops / (tf32 ? 300 : 40), "bytes");
    } else {
      const double bytes = (k.category == "elementwise" ? 0.85 : 0.7) * 4.1e12 * seconds;
      metric("bytes.dram", bytes, "bytes");
      if (k.category != "layout") metric("flops.fp32", bytes * 0.25, "flop");
    }
    if (k.category == "conv" && !tf32) {
      v1::KernelFinding* f = findings.mutable_findings()->add_findings();
      f->set_kernel(k.name);
      f->set_op(k.op);
      f->set_phase("fwd");
      f->set_category("conv");
      f->set_share(k.ms / total_ms);
      f->set_speedup(0.6);
      f->set_priority(0.6 * k.ms / total_ms);
      f->set_rule("tensor_cores_idle");
      f->set_finding("FP32 FMA-bound convolution, Tensor Cores idle");
    }
    if (k.category == "layout") {
      v1::KernelFinding* f = findings.mutable_findings()->add_findings();
      f->set_kernel(k.name);
      f->set_op(k.op);
      f->set_phase("fwd");
      f->set_category("layout");
      f->set_share(k.ms / total_ms);
      f->set_speedup(0.5);
      f->set_priority(0.5 * k.ms / total_ms);
      f->set_rule("memory_bound");
      f->set_finding("layout conversion <NCDHW->NDHWC> moves every activation twice");
    }
  }
  out.push_back(kernels);
  out.push_back(metrics);
  if (findings.findings().findings_size() > 0) out.push_back(findings);
  layer("trace", true, "");
  layer("sampling", false, "no counter permission");
  layer("metrics", true, "");
  out.push_back(summary);
  return out;
}

class ReportTest : public DomainTest {
 protected:
  void StartServer() {
    rpc::GrpcServerOptions o;
    o.listen = "127.0.0.1:0";
    auto server = rpc::GrpcServer::Create(o);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(server).value();
    ASSERT_TRUE(server_->Start(domain_.get()).ok());
  }
  void TearDown() override {
    if (server_) {
      server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
      server_->Wait();
    }
  }

  // Runs every queued job matching the agent to success with the fixture records.
  void RunAll(const std::string& agent_id, bool gpu, const std::string& gpu_name = "NVIDIA H200", double slowdown = 1.0) {
    while (std::optional<Assignment> a = Acquire(agent_id)) {
      std::vector<std::pair<uint64_t, v1::WorkerMessage>> msgs;
      uint64_t seq = 0;
      for (v1::WorkerMessage& m : RunRecords(a->config.preset(), gpu, gpu_name, slowdown)) {
        msgs.emplace_back(++seq, std::move(m));
      }
      auto up = Upload(agent_id, a->run_id, std::move(msgs));
      ASSERT_TRUE(up.ok()) << up.status();
      auto done = Finish(agent_id, a->run_id, RunState::kSucceeded, seq);
      ASSERT_TRUE(done.ok()) << done.status();
    }
  }

  std::unique_ptr<client::MedprofClient> Client() {
    client::ConnectionOptions c;
    c.server = server_->address();
    return client::MedprofClient::ForChannel(grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()),
                                             c);
  }

  // `medprof --server ADDR report STUDY -o FILE` through the CLI's own code path.
  void WriteReport(const std::string& study_id, const std::string& path, std::vector<std::string> extra = {}) {
    std::istringstream in;
    std::ostringstream out, err;
    client::CliIo io{&in, &out, &err};
    std::vector<std::string> argv = {"medprof", "--server", server_->address(), "report", study_id, "-o", path};
    argv.insert(argv.end(), extra.begin(), extra.end());
    const int code = client::RunCli(argv, [](const std::string&) { return std::nullopt; }, io);
    ASSERT_EQ(code, client::kExitOk) << err.str();
    EXPECT_THAT(out.str(), HasSubstr("report " + path + ":"));
  }

  std::unique_ptr<rpc::GrpcServer> server_;
};

// What the test asks the rendered page.
constexpr char kProbe[] = R"js((() => {
  const charts = {};
  document.querySelectorAll('[data-chart]').forEach(el => {
    const name = el.getAttribute('data-chart');
    if (el instanceof SVGSVGElement) {
      const marks = Array.from(el.querySelectorAll('.mark')).map(m => {
        const b = m.getBBox();
        return {tag: m.tagName.toLowerCase(), series: m.getAttribute('data-series'), point: m.getAttribute('data-point'),
                value: parseFloat(m.getAttribute('data-value')), x: b.x, y: b.y, w: b.width, h: b.height,
                title: m.querySelector('title') ? m.querySelector('title').textContent : ''};
      });
      const fig = el.closest('figure');
      // Everything that must not overlap: legend swatches and texts, group labels, n labels, ticks.
      const boxes = Array.from(el.querySelectorAll('rect.swatch, text.legend, text.group-label, text.bar-n, text.tick'))
          .map(t => { const b = t.getBBox();
                      return {cls: t.getAttribute('class'), text: t.textContent, x: b.x, y: b.y, w: b.width, h: b.height}; });
      const fills = {};
      el.querySelectorAll('.mark').forEach(m => { fills[m.getAttribute('data-series')] = m.getAttribute('fill'); });
      const vb = el.viewBox.baseVal;
      const ceilings = Array.from(el.querySelectorAll('text.ceiling-label')).map(t =>
          t.getAttribute('data-ceiling') + ':' + t.getAttribute('data-kind') + ':' + t.textContent);
      charts[name] = {kind: 'svg', declared: parseInt(el.getAttribute('data-points'), 10), marks: marks,
                      xScale: el.getAttribute('data-x-scale'), yScale: el.getAttribute('data-y-scale'),
                      ceilings: ceilings, phases: el.querySelectorAll('.phase-mark').length,
                      width: el.getBoundingClientRect().width, notes: fig ? fig.innerText : '', boxes: boxes,
                      fills: fills, vbw: vb.width, vbh: vb.height};
    } else {
      charts[name] = {kind: 'panel', tag: el.tagName.toLowerCase(), text: el.innerText,
                      height: el.getBoundingClientRect().height};
    }
  });
  const q = s => document.querySelector(s);
  return {ready: document.documentElement.getAttribute('data-report-ready'), charts: charts,
          envRows: document.querySelectorAll('#environment-table tr.env-row').length,
          kernelRows: document.querySelectorAll('#priority-table tr.kernel-row').length,
          envText: q('#environment-table') ? q('#environment-table').innerText : '',
          priorityText: q('#priorities') ? q('#priorities').innerText : '',
          compareRows: document.querySelectorAll('#compare-table tbody tr').length,
          title: document.title};
})())js";

std::string CellLabel(const v1::CompareCell& c) {
  return c.preset() + " \xC2\xB7 " + c.gpu();  // single-phase studies: "<preset> · <gpu>"
}

// Loads the report, fails on console errors and non-local requests, keeps the screenshot.
json LoadChecked(const std::string& html, const std::string& name) {
  const std::string dir = OutputDir();
  auto page = medprof::testing::LoadInHeadlessChromium(html, kProbe, dir + "/chromium-" + name);
  EXPECT_TRUE(page.ok()) << page.status();
  if (!page.ok()) return json();
  EXPECT_THAT(page->errors, IsEmpty()) << "console: " << ::testing::PrintToString(page->console);
  EXPECT_FALSE(page->requests.empty());
  for (const std::string& url : page->requests) {
    EXPECT_TRUE(url.rfind("file://", 0) == 0 || url.rfind("data:", 0) == 0) << "network request: " << url;
  }
  EXPECT_GT(page->screenshot_png.size(), 10000u);
  EXPECT_EQ(page->screenshot_png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  std::ofstream(dir + "/" + name + ".png", std::ios::binary) << page->screenshot_png;
  return page->value;
}

// Marks of a chart by (series, point) -> value; fails when the chart is not an SVG.
std::map<std::pair<std::string, std::string>, double> Marks(const json& page, const std::string& chart) {
  std::map<std::pair<std::string, std::string>, double> out;
  const json& c = page["charts"][chart];
  EXPECT_EQ(c.value("kind", ""), "svg") << chart << ": " << c.dump();
  if (c.value("kind", "") != "svg") return out;
  EXPECT_EQ(c["declared"].get<int>(), static_cast<int>(c["marks"].size())) << chart;
  EXPECT_GT(c["width"].get<double>(), 300) << chart;
  for (const json& m : c["marks"]) {
    EXPECT_EQ(m["tag"], "rect") << chart;
    EXPECT_GT(m["w"].get<double>(), 0.5) << chart;
    const bool fresh = out.emplace(std::make_pair(m["series"].get<std::string>(), m["point"].get<std::string>()),
                                   m["value"].get<double>()).second;
    EXPECT_TRUE(fresh) << chart << ": two marks for " << m.dump();
  }
  return out;
}

// No two labels, swatches or ticks of a chart overlap, all lie inside the SVG, and no two series
// of a chart share a colour.
void ExpectReadableCharts(const json& page) {
  int svgs = 0;
  for (const auto& [name, c] : page["charts"].items()) {
    if (c.value("kind", "") != "svg") continue;
    ++svgs;
    const json& boxes = c["boxes"];
    for (size_t i = 0; i < boxes.size(); ++i) {
      const json& a = boxes[i];
      const double ax = a["x"], ay = a["y"], aw = a["w"], ah = a["h"];
      EXPECT_GE(ax, -0.5) << name << ": " << a.dump();
      EXPECT_LE(ax + aw, c["vbw"].get<double>() + 0.5) << name << ": " << a.dump();
      EXPECT_LE(ay + ah, c["vbh"].get<double>() + 0.5) << name << ": " << a.dump();
      for (size_t j = i + 1; j < boxes.size(); ++j) {
        const json& b = boxes[j];
        const double bx = b["x"], by = b["y"], bw = b["w"], bh = b["h"];
        const bool overlap = ax + 0.5 < bx + bw && bx + 0.5 < ax + aw && ay + 0.5 < by + bh && by + 0.5 < ay + ah;
        EXPECT_FALSE(overlap) << name << ": " << a.dump() << " overlaps " << b.dump();
      }
    }
    std::set<std::string> colors;
    for (const auto& [series, fill] : c["fills"].items()) colors.insert(fill.get<std::string>());
    EXPECT_EQ(colors.size(), c["fills"].size()) << name << ": series share a colour: " << c["fills"].dump();
  }
  EXPECT_GT(svgs, 0);
}

TEST_F(ReportTest, GpuAndCpuStudyRendersEveryChartInHeadlessChromium) {
  ASSERT_TRUE(medprof::testing::FindChromium().ok()) << medprof::testing::FindChromium().status();
  StartServer();
  const std::string gpu_agent = Register("h200-node", {Gpu(0)});
  const std::string cpu_agent = Register("laptop", {Cpu()});
  SubmitStudyResult study = Submit({"baseline", "opt1", "opt2", "opt12"}, {"device=cuda", "device=cpu"});
  ASSERT_EQ(study.jobs.size(), 8u);
  RunAll(gpu_agent, true);
  RunAll(cpu_agent, false);

  const std::string html = OutputDir() + "/gpu_cpu_report.html";
  WriteReport(study.study_id, html);

  // The numbers the page must show, straight from the server.
  auto client = Client();
  v1::CompareRequest cr;
  cr.set_study_id(study.study_id);
  cr.set_top_categories(12);
  auto compare = client->Compare(cr);
  ASSERT_TRUE(compare.ok()) << compare.status();
  ASSERT_EQ(compare->cells_size(), 8);

  json page = LoadChecked(html, "gpu_cpu_report");
  ASSERT_TRUE(page.is_object());
  ExpectReadableCharts(page);
  EXPECT_EQ(page["title"], "medprof report: test study");

  // step-time: one mark per cell, at the cell's median; grouped by GPU, series = preset.
  auto step = Marks(page, "step-time");
  EXPECT_EQ(step.size(), 8u);
  for (const v1::CompareCell& c : compare->cells()) {
    auto it = step.find({c.preset(), c.gpu()});
    ASSERT_NE(it, step.end()) << c.preset() << " on " << c.gpu();
    EXPECT_NEAR(it->second, c.step_ms_median(), 1e-3 * c.step_ms_median());
  }
  // speedup: every cell has its GPU's baseline; opt1 on the H200 is 410/150.
  auto speed = Marks(page, "speedup");
  EXPECT_EQ(speed.size(), 8u);
  EXPECT_NEAR((speed[{"opt1", "NVIDIA H200"}]), 410.0 / 150.0, 0.01);
  EXPECT_NEAR((speed[{"baseline", "cpu"}]), 1.0, 1e-9);

  // kernel-mix: one segment per (cell, category) the server listed.
  size_t categories = 0;
  for (const v1::CompareCell& c : compare->cells()) {
    categories += c.categories_size();
    for (const v1::CategoryShare& s : c.categories()) {
      auto mix = Marks(page, "kernel-mix");
      auto it = mix.find({s.category(), CellLabel(c)});
      ASSERT_NE(it, mix.end()) << s.category() << " in " << CellLabel(c);
      EXPECT_NEAR(it->second, s.share(), 1e-6);
    }
  }
  EXPECT_EQ(Marks(page, "kernel-mix").size(), categories);
  EXPECT_GE(categories, 8u * 3);

  // Metric charts: GPU cells only; the CPU cells are listed as not collected (no GPU).
  size_t tensor_fma = 0, memory = 0, ratios = 0, stalls = 0;
  for (const v1::CompareCell& c : compare->cells()) {
    const v1::CellMetrics& m = c.metrics();
    if (m.collected()) {
      tensor_fma += m.has_tensor_pipe_pct() + m.has_fma_pipe_pct();
      memory += m.has_l1_hit_pct() + m.has_l2_hit_pct() + m.has_dram_throughput_pct();
      ratios += m.has_sm_cycles_ratio() + m.has_warp_instructions_ratio();
    }
    if (c.stalls().collected()) stalls += c.stalls().shares_size();
  }
  EXPECT_EQ(tensor_fma, 8u);  // 4 GPU cells x (tensor, fma)
  EXPECT_EQ(memory, 12u);
  EXPECT_EQ(ratios, 8u);
  EXPECT_EQ(stalls, 4u * 3);  // long_scoreboard, math_pipe_throttle, wait
  EXPECT_EQ(Marks(page, "tensor-fma").size(), tensor_fma);
  EXPECT_EQ(Marks(page, "memory").size(), memory);
  EXPECT_EQ(Marks(page, "counter-ratios").size(), ratios);
  EXPECT_EQ(Marks(page, "stalls").size(), stalls);
  auto tf = Marks(page, "tensor-fma");
  EXPECT_NEAR((tf[{"tensor_pipe_pct", "baseline \xC2\xB7 NVIDIA H200"}]), 0.0, 1e-9);
  EXPECT_GT((tf[{"tensor_pipe_pct", "opt1 \xC2\xB7 NVIDIA H200"}]), 30.0);
  EXPECT_THAT(page["charts"]["tensor-fma"]["notes"].get<std::string>(),
              AllOf(HasSubstr("baseline \xC2\xB7 cpu: not collected: no GPU"), HasSubstr("opt12 \xC2\xB7 cpu")));
  EXPECT_FALSE(page["charts"].contains("gpu-speedup"));  // no baseline GPU requested

  // Priority table: the findings; environment: every run with its software stack.
  EXPECT_GE(page["kernelRows"].get<int>(), 4);
  EXPECT_THAT(page["priorityText"].get<std::string>(),
              AllOf(HasSubstr("Tensor Cores idle"), HasSubstr("tensor_cores_idle"), HasSubstr("memory_bound")));
  EXPECT_EQ(page["envRows"].get<int>(), 8);
  EXPECT_THAT(page["envText"].get<std::string>(),
              AllOf(HasSubstr("580.95.05"), HasSubstr("9.19.0"), HasSubstr("2.11.0"), HasSubstr("medprof-cuda13.sif"),
                    HasSubstr("gpu-node-7"), HasSubstr("123456 (gh)"), HasSubstr("laptop-3"), HasSubstr("1.13.1")));
  EXPECT_EQ(page["compareRows"].get<int>(), 8);
  EXPECT_EQ(page["ready"], "7");  // the inline script ran over the 7 SVG charts

  // Rooflines: one per GPU cell (the CPU cells have none), log-log, one circle per kernel with FLOPs
  // and DRAM bytes (convolution, GroupNorm, SiLU; the layout copy has no FLOPs and is counted in the
  // notes), every ceiling labelled twice (measured, datasheet), the kernel and its bound on hover.
  int rooflines = 0;
  for (const auto& [name, c] : page["charts"].items()) {
    if (name.rfind("roofline-", 0) != 0) continue;
    ++rooflines;
    ASSERT_EQ(c.value("kind", ""), "svg") << name << ": " << c.dump();
    EXPECT_EQ(c["xScale"], "log");
    EXPECT_EQ(c["yScale"], "log");
    EXPECT_EQ(c["declared"].get<int>(), 3) << name;
    ASSERT_EQ(c["marks"].size(), 3u) << name;
    std::set<std::string> kernels;
    for (const json& m : c["marks"]) {
      EXPECT_EQ(m["tag"], "circle");
      EXPECT_GE(m["x"].get<double>(), 0) << m.dump();
      EXPECT_LE(m["x"].get<double>() + m["w"].get<double>(), c["vbw"].get<double>()) << m.dump();
      kernels.insert(m["point"].get<std::string>());
      EXPECT_THAT(m["title"].get<std::string>(), HasSubstr(m["point"].get<std::string>()));
      EXPECT_THAT(m["title"].get<std::string>(), HasSubstr("-bound at "));
    }
    EXPECT_TRUE(kernels.count(kNorm) && kernels.count(kSilu)) << name;
    EXPECT_EQ(c["phases"].get<int>(), 0);  // the fixture stores no phase ranges
    std::vector<std::string> labels = c["ceilings"];
    EXPECT_EQ(labels.size(), 6u) << c["ceilings"].dump();
    EXPECT_THAT(c["ceilings"].dump(), AllOf(HasSubstr("dram:measured:DRAM 4.10 TB/s"),
                                            HasSubstr("dram:datasheet:DRAM 4.80 TB/s (datasheet)"),
                                            HasSubstr("tensor_tf32:measured:TF32 Tensor Core 420 TFLOP/s"),
                                            HasSubstr("fp32:datasheet:FP32 67 TFLOP/s (datasheet)")));
  }
  EXPECT_EQ(rooflines, 4);
  // The SiLU kernel sits under the DRAM roof: memory-bound at 85 % of it (its hover title says so).
  bool silu_seen = false;
  for (const json& m : page["charts"]["roofline-1"]["marks"]) {
    if (m["point"] != kSilu) continue;
    silu_seen = true;
    EXPECT_THAT(m["title"].get<std::string>(), HasSubstr("memory-bound at 85 % of DRAM roof"));
  }
  EXPECT_TRUE(silu_seen);

  // `medprof roofline --study` through the CLI against the same server: every succeeded run, each
  // GPU run's kernels placed on its own ceilings (the layout copy too: bytes only, memory-bound),
  // the CPU runs without rows.
  std::istringstream cli_in;
  std::ostringstream cli_out, cli_err;
  client::CliIo io{&cli_in, &cli_out, &cli_err};
  ASSERT_EQ(client::RunCli({"medprof", "--server", server_->address(), "roofline", "--study", study.study_id,
                            "--signatures", "--format", "json"},
                           [](const std::string&) { return std::nullopt; }, io),
            client::kExitOk)
      << cli_err.str();
  const json roof = json::parse(cli_out.str());
  ASSERT_EQ(roof["runs"].size(), 8u);
  int gpu_runs = 0;
  for (const json& r : roof["runs"]) {
    if (r["gpu"] != "NVIDIA H200") {
      EXPECT_TRUE(r["rows"].empty()) << r.dump();
      continue;
    }
    ++gpu_runs;
    const bool nhwc = r["preset"] == "opt2" || r["preset"] == "opt12";
    ASSERT_EQ(r["rows"].size(), nhwc ? 4u : 3u) << r.dump();
    EXPECT_EQ(r["ceilings"].size(), 3u);
    for (const json& row : r["rows"]) {
      EXPECT_EQ(row["scope"], "kernel");
      const std::string want = row["category"] == "conv" ? "compute-bound" : "memory-bound";
      EXPECT_EQ(row["bound"], want) << row.dump();
    }
  }
  EXPECT_EQ(gpu_runs, 4);
  EXPECT_THAT(page["charts"]["roofline-4"]["notes"].get<std::string>(), HasSubstr("1 kernels with no FLOPs"));
}

TEST_F(ReportTest, CpuOnlyStudyShowsNotCollectedPanelsNotZeros) {
  ASSERT_TRUE(medprof::testing::FindChromium().ok()) << medprof::testing::FindChromium().status();
  StartServer();
  const std::string cpu_agent = Register("laptop", {Cpu()});
  SubmitStudyResult study = Submit({"baseline", "opt1", "opt2", "opt12"});
  RunAll(cpu_agent, false);
  const std::string html = OutputDir() + "/cpu_report.html";
  WriteReport(study.study_id, html);

  json page = LoadChecked(html, "cpu_report");
  ASSERT_TRUE(page.is_object());
  ExpectReadableCharts(page);
  EXPECT_EQ(Marks(page, "step-time").size(), 4u);
  EXPECT_EQ(Marks(page, "speedup").size(), 4u);
  EXPECT_EQ(Marks(page, "kernel-mix").size(), 4u * 4);  // conv, norm, elementwise, optimizer per cell
  for (const char* chart : {"stalls", "tensor-fma", "counter-ratios", "memory"}) {
    const json& c = page["charts"][chart];
    EXPECT_EQ(c.value("kind", ""), "panel") << chart;
    // The server's reason, whatever layer it names ("no GPU" or "sampling: no GPU; metrics: no GPU").
    EXPECT_THAT(c.value("text", ""), AllOf(::testing::StartsWith("not collected: "), HasSubstr("no GPU"))) << chart;
    EXPECT_GT(c.value("height", 0.0), 20.0) << chart;
  }
  EXPECT_EQ(page["kernelRows"].get<int>(), 0);
  EXPECT_THAT(page["priorityText"].get<std::string>(),
              AllOf(HasSubstr("no GPU kernels"), HasSubstr("opt12 \xC2\xB7 cpu train: findings not collected: no GPU")));
  EXPECT_EQ(page["ready"], "3");
}

TEST_F(ReportTest, CrossGpuSpeedupChartAgainstTheBaselineGpu) {
  ASSERT_TRUE(medprof::testing::FindChromium().ok()) << medprof::testing::FindChromium().status();
  StartServer();
  const std::string h200 = Register("h200-node", {Gpu(0)});
  const std::string a100 = Register("a100-node", {Gpu(0, "NVIDIA A100-SXM4-80GB", "8.0")});
  SubmitStudyResult study = Submit({"baseline", "opt1"}, {"gpu=h200", "gpu=a100"});
  ASSERT_EQ(study.jobs.size(), 4u);
  RunAll(h200, true);
  RunAll(a100, true, "NVIDIA A100-SXM4-80GB", 1.8);
  const std::string html = OutputDir() + "/cross_gpu_report.html";
  WriteReport(study.study_id, html, {"--baseline-gpu", "a100"});

  json page = LoadChecked(html, "cross_gpu_report");
  ASSERT_TRUE(page.is_object());
  // Groups are "<preset> · <phase>", series the GPUs; the A100 bars are the 1.0 reference.
  auto g = Marks(page, "gpu-speedup");
  ASSERT_EQ(g.size(), 4u);
  EXPECT_NEAR((g[{"NVIDIA H200", "baseline \xC2\xB7 train"}]), 1.8, 0.02);
  EXPECT_NEAR((g[{"NVIDIA H200", "opt1 \xC2\xB7 train"}]), 1.8, 0.05);
  EXPECT_NEAR((g[{"NVIDIA A100-SXM4-80GB", "opt1 \xC2\xB7 train"}]), 1.0, 1e-9);
  EXPECT_EQ(Marks(page, "step-time").size(), 4u);
  EXPECT_EQ(page["ready"], "8");  // every chart is an SVG here, the cross-GPU one included
}

// The checker itself: a page with a console error, an uncaught exception and a remote image is
// caught on all three counts (so a clean report above is clean, not unobserved).
// A CompareResponse from `medprof compare --format json` output (the committed H200 studies in
// bench/results were saved that way; docs/queries.md has the keys).
v1::CompareResponse CompareFromCliJson(const json& j) {
  v1::CompareResponse r;
  r.set_study_id(j.value("study_id", ""));
  r.set_baseline_preset(j.value("baseline", "baseline"));
  for (const json& c : j.at("cells")) {
    v1::CompareCell* p = r.add_cells();
    p->set_gpu(c.at("gpu"));
    p->set_preset(c.at("preset"));
    p->set_phase(*config::ParsePhase(c.at("phase").get<std::string>()));
    p->set_n(c.at("n"));
    p->set_steps(c.at("steps"));
    p->set_step_ms_median(c.at("step_ms_median"));
    p->set_step_ms_p10(c.at("step_ms_p10"));
    p->set_step_ms_p90(c.at("step_ms_p90"));
    p->set_has_baseline(!c.at("speedup_vs_baseline").is_null());
    if (p->has_baseline()) p->set_speedup_vs_baseline(c.at("speedup_vs_baseline"));
    p->set_time_source(c.value("time_source", ""));
    for (const json& cat : c.at("categories")) {
      v1::CategoryShare* s = p->add_categories();
      s->set_category(cat.at("category"));
      s->set_share(cat.at("share"));
    }
    const json& m = c.at("metrics");
    p->mutable_metrics()->set_collected(m.at("collected"));
    p->mutable_metrics()->set_not_collected(m.value("note", ""));
    for (const char* f : {"tensor_pipe_pct", "fma_pipe_pct", "sm_cycles_ratio", "warp_instructions_ratio", "l1_hit_pct",
                          "l2_hit_pct", "dram_throughput_pct"}) {
      if (!m.contains(f) || m.at(f).is_null()) continue;
      const google::protobuf::FieldDescriptor* fd = v1::CellMetrics::descriptor()->FindFieldByName(f);
      p->mutable_metrics()->GetReflection()->SetDouble(p->mutable_metrics(), fd, m.at(f).get<double>());
    }
    const json& st = c.at("stalls");
    p->mutable_stalls()->set_collected(st.at("collected"));
    p->mutable_stalls()->set_not_collected(st.value("note", ""));
    p->mutable_stalls()->set_source(st.value("source", ""));
    for (const json& sh : st.value("shares", json::array())) {
      v1::NamedShare* s = p->mutable_stalls()->add_shares();
      s->set_name(sh.at("reason"));
      s->set_share(sh.at("share"));
    }
    for (const json& k : c.at("top_kernels")) {
      v1::TopKernel* t = p->add_top_kernels();
      t->set_name(k.at("name"));
      t->set_op(k.value("op", ""));
      t->set_category(k.value("category", ""));
      t->set_total_ns(k.value("total_ns", int64_t{0}));
      t->set_share(k.value("share", 0.0));
      t->set_priority(k.value("priority", 0.0));
      t->set_speedup(k.value("speedup", 0.0));
      for (const json& f : k.value("findings", json::array())) {
        v1::KernelFinding* kf = t->add_findings();
        kf->set_rule(f.value("rule", ""));
        kf->set_finding(f.value("finding", ""));
        kf->set_speedup(f.value("speedup", 0.0));
      }
    }
    if (c.contains("findings_note") && !c.at("findings_note").is_null()) p->set_findings_note(c.at("findings_note"));
    for (const json& n : c.value("notes", json::array())) p->add_notes(n.get<std::string>());
  }
  return r;
}

// The committed H200 studies as the report draws them: the warp-stall chart with 16 to 18
// reasons per bar (where colours repeated and legend rows overlapped), the kernel mix, and, for
// the metrics run, every metrics chart. No overlap, no shared colour, nothing under 1 % of the
// kernel time in the priorities, the terms defined. The screenshots are kept in the output dir.
TEST(ReportH200Test, CommittedH200ReportsAreReadable) {
  ASSERT_TRUE(medprof::testing::FindChromium().ok()) << medprof::testing::FindChromium().status();
  for (const char* rel : {"h200-gpu-node-2026-12-02", "h200-profiler-2026-12-03-b/node"}) {
    std::ifstream in(std::string(MEDPROF_SOURCE_DIR) + "/bench/results/" + rel + "/compare.json");
    ASSERT_TRUE(in.good()) << rel;
    client::report::ReportInput input;
    input.compare = CompareFromCliJson(json::parse(in));
    input.study.set_study_id(input.compare.study_id());
    input.study.set_name(std::string("committed H200 study ") + rel);
    input.server = "bench/results";
    std::string name = std::string("h200_") + rel;
    std::replace(name.begin(), name.end(), '/', '_');
    const std::string html_path = OutputDir() + "/" + name + ".html";
    const std::string html = client::report::RenderHtmlReport(input);
    std::ofstream(html_path) << html;
    json page = LoadChecked(html_path, name);
    ASSERT_TRUE(page.is_object()) << rel;
    ExpectReadableCharts(page);
    EXPECT_EQ(page["charts"]["stalls"].value("kind", ""), "svg") << rel;
    EXPECT_GE(page["charts"]["stalls"]["fills"].size(), 16u) << rel;
    EXPECT_THAT(page["priorityText"].get<std::string>(),
                AllOf(HasSubstr("at least 1% of their cell's GPU kernel time"), HasSubstr("est. speedup: the largest"),
                      HasSubstr("priority: share")));
    EXPECT_THAT(page["priorityText"].get<std::string>(), ::testing::Not(HasSubstr("\t0.0%\t")));
  }
}

TEST(HeadlessChromiumTest, SeesConsoleErrorsExceptionsAndRemoteRequests) {
  ASSERT_TRUE(medprof::testing::FindChromium().ok()) << medprof::testing::FindChromium().status();
  const std::string dir = OutputDir();
  const std::string html = dir + "/bad_page.html";
  std::ofstream(html) << "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><link rel=\"icon\" href=\"data:,\">"
                         "<title>bad</title></head><body><p id=\"p\">x</p><img src=\"http://127.0.0.1:9/chart.png\">"
                         "<script>console.error('boom ' + 6 * 7); noSuchFunction();</script></body></html>";
  auto page = medprof::testing::LoadInHeadlessChromium(html, "document.getElementById('p').textContent",
                                                       dir + "/chromium-bad_page", std::chrono::seconds(60));
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->value, "x");
  EXPECT_THAT(page->errors, ::testing::Contains(HasSubstr("console.error: boom 42")));
  EXPECT_THAT(page->errors, ::testing::Contains(HasSubstr("noSuchFunction")));
  EXPECT_THAT(page->requests, ::testing::Contains("http://127.0.0.1:9/chart.png"));
}

TEST_F(ReportTest, UnknownStudyIsAServerErrorAndWritesNothing) {
  StartServer();
  const std::string path = OutputDir() + "/missing_report.html";
  std::filesystem::remove(path);
  std::istringstream in;
  std::ostringstream out, err;
  client::CliIo io{&in, &out, &err};
  const int code = client::RunCli({"medprof", "--server", server_->address(), "report", "st-nope", "-o", path},
                                  [](const std::string&) { return std::nullopt; }, io);
  EXPECT_EQ(code, client::kExitServer);
  EXPECT_THAT(err.str(), AllOf(HasSubstr("NOT_FOUND"), HasSubstr("st-nope")));
  EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace medprof::server::testing
