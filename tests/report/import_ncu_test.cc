// `medprof import-ncu` round trip: the real H200 export (tests/testdata/ncu/h200_opt1_forward_raw.csv)
// and the hand-made one go through the real CLI path (RunCli), the real gRPC server and domain
// into the fixture store (SqliteStore on :memory:), and come back through GetRun and Compare
// like runs made by agents. Expected values were recomputed from the CSV with Python's csv module.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "client/client.h"
#include "client/commands.h"
#include "server/rpc/grpc_server.h"
#include "tests/testing/json_face.h"
#include "tests/unit/server/domain_fixture.h"

namespace medprof::server::testing {
namespace {

using ::medprof::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

std::string TestData(const std::string& name) {
  const char* src = std::getenv("MEDPROF_SOURCE_DIR");
  return std::string(src == nullptr ? "." : src) + "/tests/testdata/ncu/" + name;
}

class ImportNcuTest : public DomainTest {
 protected:
  void SetUp() override {
    DomainTest::SetUp();
    rpc::GrpcServerOptions o;
    o.listen = "127.0.0.1:0";
    auto server = rpc::GrpcServer::Create(o);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(server).value();
    ASSERT_TRUE(server_->Start(domain_.get()).ok());
    client::ConnectionOptions c;
    c.server = server_->address();
    client_ = client::MedprofClient::ForChannel(
        grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()), c);
  }
  void TearDown() override {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    server_->Wait();
  }

  struct Cli {
    int code;
    std::string out, err;
  };
  Cli Run(std::vector<std::string> args) {
    std::vector<std::string> argv = {"medprof", "--server", server_->address()};
    argv.insert(argv.end(), args.begin(), args.end());
    std::istringstream in;
    std::ostringstream out, err;
    client::CliIo io{&in, &out, &err};
    const int code = client::RunCli(argv, [](const std::string&) { return std::nullopt; }, io);
    return {code, out.str(), err.str()};
  }

  std::unique_ptr<rpc::GrpcServer> server_;
  std::unique_ptr<client::MedprofClient> client_;
};

TEST_F(ImportNcuTest, RealH200ExportRoundTripsAsARun) {
  Cli r = Run({"import-ncu", TestData("h200_opt1_forward_raw.csv"), "--gpu", "NVIDIA H200", "--preset", "opt1",
               "--phase", "forward"});
  ASSERT_EQ(r.code, client::kExitOk) << r.err;
  ASSERT_EQ(r.out.back(), '\n');
  const std::string run_id = r.out.substr(0, r.out.size() - 1);
  EXPECT_EQ(run_id.rfind("run-", 0), 0u) << r.out;
  EXPECT_THAT(r.err, HasSubstr("imported 60 launches of 14 kernels"));

  auto run = client_->GetRun(run_id);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->state(), v1::RUN_SUCCEEDED);
  EXPECT_EQ(run->gpu(), "NVIDIA H200");
  EXPECT_EQ(run->preset(), "opt1");
  EXPECT_EQ(run->environment().gpu_name(), "NVIDIA H200");
  EXPECT_EQ(run->environment().compute_capability(), "9.0");
  EXPECT_EQ(run->environment().extra().at("source"), "ncu");
  EXPECT_EQ(run->environment().extra().at("ncu.file"), "h200_opt1_forward_raw.csv");
  // No measurement on the node: the H200's datasheet roofs, and the run says so.
  EXPECT_EQ(run->environment().ceilings().note(), "imported: datasheet ceilings, not measured on the node");
  ASSERT_GT(run->environment().ceilings().ceilings_size(), 0);
  for (const v1::Ceiling& c : run->environment().ceilings().ceilings()) {
    EXPECT_EQ(c.measured(), 0) << c.name();
    if (c.name() == "dram") EXPECT_DOUBLE_EQ(c.datasheet(), 4.8e12);
  }
  ASSERT_EQ(run->kernels_size(), 14);
  int64_t launches = 0, total = 0;
  for (const v1::KernelStat& k : run->kernels()) {
    launches += k.count();
    total += k.total_ns();
    EXPECT_EQ(k.phase(), "fwd");
  }
  EXPECT_EQ(launches, 60);
  EXPECT_EQ(total, 18957120);
  const v1::KernelStat* norm = nullptr;
  const v1::KernelStat* conv = nullptr;
  for (const v1::KernelStat& k : run->kernels()) {
    if (k.name().rfind("void at::<unnamed>::RowwiseMomentsCUDAKernel<float>", 0) == 0) norm = &k;
    if (k.name().rfind("sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nchw", 0) == 0) conv = &k;
  }
  ASSERT_NE(norm, nullptr);
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(norm->category(), "norm");
  EXPECT_EQ(norm->count(), 6);
  EXPECT_EQ(norm->total_ns(), 7791136);
  EXPECT_EQ(conv->category(), "conv");
  EXPECT_EQ(conv->total_ns(), 6286912);
  EXPECT_EQ(conv->registers(), 168);
  std::map<std::pair<std::string, std::string>, double> metric;
  for (const v1::MetricValue& m : run->metrics()) metric[{m.scope(), m.name()}] = m.value();
  EXPECT_NEAR((metric[{"kernel:" + conv->name(), "tensor_pipe_pct"}]), 55.910627, 1e-5);
  EXPECT_NEAR((metric[{"kernel:" + conv->name(), "l2_hit_pct"}]), 93.027944, 1e-5);
  EXPECT_NEAR((metric[{"run", "sm_cycles"}]), 36227154.38, 1e-3);
  EXPECT_NEAR((metric[{"run", "tensor_pipe_pct.avg"}]), 18.773583, 1e-5);
  // Two levels: the kernel's aggregate over its launches and one signature per grid and block.
  EXPECT_NEAR((metric[{"kernel:" + conv->name(), "duration_ns"}]), 6286912.0, 1e-6);
  EXPECT_DOUBLE_EQ((metric[{"kernel:" + conv->name(), "coverage_pct"}]), 100);
  v1::ListKernelsRequest kr;
  kr.set_run_id(run_id);
  kr.set_signatures(true);
  auto listed = client_->ListKernels(kr);
  ASSERT_TRUE(listed.ok()) << listed.status();
  int64_t norm_launches = 0;
  for (const v1::SignatureShare& s : listed->signatures()) {
    EXPECT_TRUE(s.measured()) << s.id();
    EXPECT_EQ(s.phase(), "fwd");
    if (s.kernel() == norm->name()) norm_launches += static_cast<int64_t>(s.launches_per_step());
    EXPECT_NEAR((metric[{"signature:" + s.id(), "duration_ns"}]), static_cast<double>(s.mean_ns()), 1.0) << s.id();
  }
  EXPECT_EQ(norm_launches, 6);
  EXPECT_THAT(r.err, HasSubstr("grouped by kernel + grid + block"));
  ASSERT_EQ(run->steps_size(), 1);
  EXPECT_EQ(run->steps(0).phase(), v1::PHASE_FORWARD);
  EXPECT_EQ(run->steps(0).wall_ns(), 18957120);
  EXPECT_EQ(run->summary().measured_steps(), 1);
  EXPECT_NEAR(run->summary().step_ms_median(), 18.95712, 1e-9);
}

TEST_F(ImportNcuTest, ImportedRunsJoinCompareOfTheirStudy) {
  // The real opt1 export first (new study), then the hand-made one as the baseline of the same
  // study, covering 2 steps: baseline step = 2.6 ms / 2.
  Cli a = Run({"import-ncu", TestData("h200_opt1_forward_raw.csv"), "--gpu", "NVIDIA H200", "--preset", "opt1",
               "--phase", "forward", "--name", "h200 by hand", "--format", "json"});
  ASSERT_EQ(a.code, client::kExitOk) << a.err;
  const nlohmann::json ja = nlohmann::json::parse(a.out);
  medprof::testing::ExpectTableSpellings(a.out, "import-ncu");  // one JSON face (issue 19)
  EXPECT_EQ(ja["launches"], 60);
  EXPECT_EQ(ja["kernels"], 14);
  EXPECT_EQ(ja["gpu_time_ns"], 18957120);
  const std::string study = ja["study_id"].get<std::string>();
  Cli b = Run({"import-ncu", TestData("tiny_raw.csv"), "--gpu", "NVIDIA H200", "--preset", "baseline", "--phase",
               "forward", "--steps", "2", "--study", study});
  ASSERT_EQ(b.code, client::kExitOk) << b.err;

  auto s = client_->GetStudy(study);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->name(), "h200 by hand");
  EXPECT_EQ(s->jobs_size(), 2);
  EXPECT_EQ(s->state(), v1::STUDY_DONE);

  v1::CompareRequest cr;
  cr.set_study_id(study);
  auto cmp = client_->Compare(cr);
  ASSERT_TRUE(cmp.ok()) << cmp.status();
  ASSERT_EQ(cmp->cells_size(), 2);
  const v1::CompareCell& base = cmp->cells(0);
  const v1::CompareCell& opt1 = cmp->cells(1);
  EXPECT_EQ(base.preset(), "baseline");
  EXPECT_EQ(opt1.preset(), "opt1");
  EXPECT_EQ(opt1.gpu(), "NVIDIA H200");
  EXPECT_EQ(opt1.phase(), v1::PHASE_FORWARD);
  EXPECT_EQ(base.steps(), 2);
  EXPECT_NEAR(base.step_ms_median(), 1.3, 1e-9);
  EXPECT_NEAR(opt1.step_ms_median(), 18.95712, 1e-9);
  ASSERT_TRUE(opt1.has_baseline());
  EXPECT_NEAR(opt1.speedup_vs_baseline(), 1.3 / 18.95712, 1e-9);
  EXPECT_EQ(opt1.time_source(), "kernels");
  // The cell's utilization comes from the imported kernel metrics (weighted by kernel time).
  ASSERT_TRUE(opt1.metrics().collected()) << opt1.metrics().not_collected();
  EXPECT_NEAR(opt1.metrics().tensor_pipe_pct(), 18.773583, 1e-3);

  // The report of the imported study: both runs in the environment table, marked as ncu imports,
  // and a Tensor Core mark for each cell (the hand-made export has tensor pipe values too).
  Cli rep = Run({"report", study, "-o", "-"});
  ASSERT_EQ(rep.code, client::kExitOk) << rep.err;
  EXPECT_THAT(rep.out, AllOf(HasSubstr("<title>medprof report: h200 by hand</title>"), HasSubstr("<small>ncu</small>"),
                             HasSubstr("data-series=\"tensor_pipe_pct\" data-point=\"opt1 \xC2\xB7 NVIDIA H200\""),
                             HasSubstr("data-series=\"tensor_pipe_pct\" data-point=\"baseline \xC2\xB7 NVIDIA H200\"")));
  EXPECT_GT(std::count(rep.out.begin(), rep.out.end(), '\n'), 100);
}

TEST_F(ImportNcuTest, RefusesWhatItCannotStore) {
  const std::string dir = ::testing::TempDir();
  const std::string details = dir + "/details.csv";
  std::ofstream(details) << "\"ID\",\"Kernel Name\",\"Section Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n"
                            "\"0\",\"k\",\"SOL\",\"gpu__time_duration.sum\",\"ns\",\"5\"\n";
  Cli r = Run({"import-ncu", details, "--gpu", "NVIDIA H200", "--preset", "opt1"});
  EXPECT_EQ(r.code, client::kExitUsage);
  EXPECT_THAT(r.err, AllOf(HasSubstr("details page"), HasSubstr("--page raw")));

  r = Run({"import-ncu", dir + "/no-such.csv", "--gpu", "NVIDIA H200", "--preset", "opt1"});
  EXPECT_EQ(r.code, client::kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("cannot read"));

  r = Run({"import-ncu", TestData("tiny_raw.csv"), "--gpu", "NVIDIA H200", "--preset", "opt7"});
  EXPECT_EQ(r.code, client::kExitUsage);
  EXPECT_THAT(r.err, HasSubstr("--preset: unknown preset 'opt7'"));

  r = Run({"import-ncu", TestData("tiny_raw.csv"), "--gpu", "NVIDIA H200", "--preset", "opt1", "--study", "st-nope"});
  EXPECT_EQ(r.code, client::kExitServer);
  EXPECT_THAT(r.err, AllOf(HasSubstr("NOT_FOUND"), HasSubstr("st-nope")));

  // The server checks what it is sent, whatever the client did.
  v1::ImportRunRequest req;
  req.set_preset("opt1");
  req.set_gpu("NVIDIA H200");
  req.set_source("ncu");
  EXPECT_THAT(client_->ImportRun(req).status(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("kernels: 0 rows")));
  v1::KernelStat* k = req.add_kernels();
  k->set_name("k");
  k->set_count(1);
  k->set_total_ns(10);
  k->set_max_ns(10);
  req.set_gpu("");
  EXPECT_THAT(client_->ImportRun(req).status(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("gpu: required")));
  req.set_gpu("NVIDIA H200");
  k->set_category("fft");
  EXPECT_THAT(client_->ImportRun(req).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("kernels[0].category: unknown category 'fft'")));
  k->clear_category();
  v1::MetricValue* m = req.add_metrics();
  m->set_scope("everywhere");
  m->set_name("x");
  EXPECT_THAT(client_->ImportRun(req).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("metrics[0].scope: 'everywhere'")));
  EXPECT_EQ(Count("runs"), 0);  // nothing refused was stored
  m->set_scope("run");
  auto ok = client_->ImportRun(req);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(Count("runs"), 1);
  EXPECT_EQ(Count("run_kernels"), 1);
}

}  // namespace
}  // namespace medprof::server::testing
