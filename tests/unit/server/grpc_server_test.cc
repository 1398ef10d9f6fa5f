// The gRPC endpoint in-process on 127.0.0.1: both services over the wire, status mapping,
// the message size limit, long-poll deadlines, TLS and mutual TLS, and shutdown.
#include "server/rpc/grpc_server.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include "medprof/v1/service.grpc.pb.h"
#include "tests/unit/server/domain_fixture.h"

namespace medprof::server::rpc {
namespace {

using ::medprof::server::testing::TinyConfig;
using ::medprof::testing::IsOk;
using ::medprof::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

std::string TestData(const std::string& name) {
  std::ifstream in(std::string(MEDPROF_SERVER_TESTDATA) + "/" + name);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

class GrpcServerTest : public ::medprof::server::testing::DomainTest {
 protected:
  void StartServer(GrpcServerOptions o = {}) {
    if (o.listen.empty()) o.listen = "127.0.0.1:0";
    auto server = GrpcServer::Create(o);
    ASSERT_THAT(server, IsOk());
    server_ = std::move(server).value();
    ASSERT_THAT(server_->Start(domain_.get()), IsOk());
    ASSERT_GT(server_->port(), 0);
  }
  void TearDown() override {
    if (server_) {
      server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
      server_->Wait();
    }
  }
  std::shared_ptr<grpc::Channel> Plain() {
    return grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
  }
  static std::unique_ptr<grpc::ClientContext> Ctx(int timeout_ms = 5000) {
    auto c = std::make_unique<grpc::ClientContext>();
    c->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
    return c;
  }

  std::unique_ptr<GrpcServer> server_;
};

TEST_F(GrpcServerTest, AStudyEndToEndOverTheWire) {
  StartServer();
  auto channel = Plain();
  auto agents = v1::AgentService::NewStub(channel);
  auto people = v1::MedprofService::NewStub(channel);

  v1::RegisterRequest reg;
  reg.set_protocol_version(v1::PROTOCOL_VERSION_1);
  reg.set_agent_name("node-cpu");
  reg.set_host("localhost");
  auto* cpu = reg.add_devices();
  cpu->set_index(-1);
  cpu->set_kind("cpu");
  cpu->set_name("cpu");
  v1::RegisterResponse registered;
  ASSERT_TRUE(agents->Register(Ctx().get(), reg, &registered).ok());
  EXPECT_EQ(registered.heartbeat_interval_ms(), 5000);
  EXPECT_EQ(registered.lease_ttl_ms(), 30000);
  EXPECT_THAT(registered.server_version(), HasSubstr("medprof-server 0.1.0"));
  const std::string agent_id = registered.agent_id();

  v1::SubmitStudyRequest submit;
  submit.add_presets("baseline");
  submit.add_presets("opt1");
  *submit.mutable_config() = TinyConfig();
  v1::SubmitStudyResponse study;
  ASSERT_TRUE(people->SubmitStudy(Ctx().get(), submit, &study).ok());
  ASSERT_EQ(study.jobs_size(), 2);
  EXPECT_EQ(study.jobs(0).state(), v1::JOB_QUEUED);
  EXPECT_EQ(study.jobs(0).config().volume(), 16);

  v1::AcquireJobRequest acquire;
  acquire.set_agent_id(agent_id);
  v1::AcquireJobResponse got;
  ASSERT_TRUE(agents->AcquireJob(Ctx().get(), acquire, &got).ok());
  ASSERT_TRUE(got.has_assignment());
  const std::string run_id = got.assignment().run_id();
  EXPECT_EQ(got.assignment().device_index(), -1);
  EXPECT_EQ(got.assignment().config().preset(), "baseline");

  {
    auto ctx = Ctx();
    v1::UploadAck ack;
    auto writer = agents->UploadResults(ctx.get(), &ack);
    auto chunk = [&](uint64_t seq, v1::WorkerMessage m) {
      v1::ResultChunk c;
      c.set_run_id(run_id);
      c.set_agent_id(agent_id);
      c.set_seq(seq);
      *c.mutable_message() = std::move(m);
      return c;
    };
    v1::WorkerMessage started;
    started.mutable_started()->mutable_environment()->set_gpu_name("cpu");
    started.mutable_started()->set_backend("cpu");
    v1::WorkerMessage step;
    step.mutable_step()->set_phase(v1::PHASE_TRAIN);
    step.mutable_step()->set_wall_ns(4'000'000);
    v1::WorkerMessage summary;
    summary.mutable_summary()->set_measured_steps(1);
    ASSERT_TRUE(writer->Write(chunk(1, started)));
    ASSERT_TRUE(writer->Write(chunk(2, step)));
    ASSERT_TRUE(writer->Write(chunk(2, step)));  // a resend: acknowledged, stored once
    ASSERT_TRUE(writer->Write(chunk(3, summary)));
    ASSERT_TRUE(writer->WritesDone());
    ASSERT_TRUE(writer->Finish().ok());
    EXPECT_THAT(ack.committed_through_seq(), UnorderedElementsAre(Pair(run_id, 3u)));
  }
  EXPECT_EQ(Count("run_steps"), 1);

  v1::FinishRunRequest finish;
  finish.set_agent_id(agent_id);
  finish.set_run_id(run_id);
  finish.set_state(v1::RUN_SUCCEEDED);
  finish.set_last_seq(3);
  v1::FinishRunResponse finished;
  ASSERT_TRUE(agents->FinishRun(Ctx().get(), finish, &finished).ok());
  EXPECT_EQ(finished.job_state(), v1::JOB_SUCCEEDED);

  ASSERT_TRUE(agents->AcquireJob(Ctx().get(), acquire, &got).ok());
  ASSERT_TRUE(got.has_assignment());
  finish.set_run_id(got.assignment().run_id());
  finish.set_state(v1::RUN_FAILED);
  finish.set_last_seq(0);
  finish.set_error("invalid_config: groups");
  ASSERT_TRUE(agents->FinishRun(Ctx().get(), finish, &finished).ok());
  EXPECT_EQ(finished.job_state(), v1::JOB_FAILED);

  v1::WatchStudyRequest watch;
  watch.set_study_id(study.study_id());
  auto wctx = Ctx();
  auto reader = people->WatchStudy(wctx.get(), watch);
  std::vector<v1::StudyEvent> events;
  v1::StudyEvent e;
  while (reader->Read(&e)) events.push_back(e);
  ASSERT_TRUE(reader->Finish().ok());
  ASSERT_EQ(events.size(), 7u);  // 2 queued, running, succeeded, running, failed, finished
  EXPECT_TRUE(events.back().study_finished());
  EXPECT_EQ(events[3].job_state(), v1::JOB_SUCCEEDED);

  v1::GetStudyRequest get;
  get.set_study_id(study.study_id());
  v1::Study s;
  ASSERT_TRUE(people->GetStudy(Ctx().get(), get, &s).ok());
  EXPECT_EQ(s.state(), v1::STUDY_DONE);
  EXPECT_EQ(s.jobs_total(), 2);
  EXPECT_EQ(s.jobs_done(), 2);
  EXPECT_EQ(s.jobs(1).error(), "failed on attempt 1 of 3: invalid_config: groups");

  v1::CompareRequest cmp;
  cmp.set_study_id(study.study_id());
  v1::CompareResponse table;
  ASSERT_TRUE(people->Compare(Ctx().get(), cmp, &table).ok());
  ASSERT_EQ(table.cells_size(), 1);
  EXPECT_EQ(table.cells(0).gpu(), "cpu");
  EXPECT_EQ(table.cells(0).preset(), "baseline");
  EXPECT_DOUBLE_EQ(table.cells(0).step_ms_median(), 4.0);

  v1::GetRunRequest get_run;
  get_run.set_run_id(run_id);
  v1::Run run;
  ASSERT_TRUE(people->GetRun(Ctx().get(), get_run, &run).ok());
  EXPECT_EQ(run.steps_size(), 1);
  EXPECT_EQ(run.state(), v1::RUN_SUCCEEDED);

  v1::ListAgentsResponse listed;
  ASSERT_TRUE(people->ListAgents(Ctx().get(), v1::ListAgentsRequest(), &listed).ok());
  ASSERT_EQ(listed.agents_size(), 1);
  EXPECT_TRUE(listed.agents(0).online());
  EXPECT_EQ(listed.agents(0).devices(0).kind(), "cpu");
}

TEST_F(GrpcServerTest, RefusalsKeepTheirCodeAndMessage) {
  StartServer();
  auto channel = Plain();
  auto agents = v1::AgentService::NewStub(channel);
  auto people = v1::MedprofService::NewStub(channel);

  v1::SubmitStudyRequest submit;
  submit.add_presets("baseline");
  *submit.mutable_config() = TinyConfig();
  submit.mutable_config()->set_volume(0);
  v1::SubmitStudyResponse study;
  grpc::Status s = people->SubmitStudy(Ctx().get(), submit, &study);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("config.volume: 0 is out of range"));
  EXPECT_EQ(Count("jobs"), 0);

  v1::RegisterRequest reg;
  reg.set_protocol_version(static_cast<v1::ProtocolVersion>(2));
  reg.set_agent_name("node");
  reg.add_devices()->set_kind("cpu");
  v1::RegisterResponse registered;
  s = agents->Register(Ctx().get(), reg, &registered);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("speaks protocol 1"));

  v1::GetRunRequest get_run;
  get_run.set_run_id("run-000000000000");
  v1::Run run;
  s = people->GetRun(Ctx().get(), get_run, &run);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(s.error_message(), "run_id: no run 'run-000000000000'");

  // Larger than the 16 MiB request limit.
  submit.set_name(std::string(17 << 20, 'x'));
  s = people->SubmitStudy(Ctx().get(), submit, &study);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
}

TEST_F(GrpcServerTest, UploadForAnotherAgentsRunIsDenied) {
  StartServer();
  const std::string owner = Register("node-a", {::medprof::server::testing::Cpu()});
  const std::string intruder = Register("node-b", {::medprof::server::testing::Cpu()});
  Submit({"baseline"});
  std::optional<Assignment> a = Acquire(owner);
  ASSERT_TRUE(a.has_value());
  auto agents = v1::AgentService::NewStub(Plain());
  auto ctx = Ctx();
  v1::UploadAck ack;
  auto writer = agents->UploadResults(ctx.get(), &ack);
  v1::ResultChunk c;
  c.set_run_id(a->run_id);
  c.set_agent_id(intruder);
  c.set_seq(1);
  c.mutable_message()->mutable_step()->set_wall_ns(1);
  writer->Write(c);
  writer->WritesDone();
  const grpc::Status s = writer->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Count("run_chunks"), 0);
}

TEST_F(GrpcServerTest, LongPollEndsBeforeTheCallersDeadline) {
  StartServer();
  const std::string agent = Register("node-a", {::medprof::server::testing::Cpu()});
  auto agents = v1::AgentService::NewStub(Plain());
  v1::AcquireJobRequest acquire;
  acquire.set_agent_id(agent);
  acquire.set_wait_ms(20000);
  v1::AcquireJobResponse got;
  const auto start = std::chrono::steady_clock::now();
  const grpc::Status s = agents->AcquireJob(Ctx(600).get(), acquire, &got);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_FALSE(got.has_assignment());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(600));
}

TEST_F(GrpcServerTest, ShutdownEndsOpenWatches) {
  StartServer();
  const SubmitStudyResult study = Submit({"baseline"});
  auto people = v1::MedprofService::NewStub(Plain());
  auto ctx = Ctx(10000);
  v1::WatchStudyRequest watch;
  watch.set_study_id(study.study_id);
  auto reader = people->WatchStudy(ctx.get(), watch);
  v1::StudyEvent e;
  ASSERT_TRUE(reader->Read(&e));  // the queued event
  const auto start = std::chrono::steady_clock::now();
  std::thread stopper([&] {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  });
  while (reader->Read(&e)) {
  }
  const grpc::Status s = reader->Finish();
  stopper.join();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(s.error_message(), HasSubstr("shutting down"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
}

TEST(GrpcServerOptions, PlaintextOnlyOnLoopback) {
  GrpcServerOptions o;
  for (const char* ok : {"127.0.0.1:0", "127.8.9.10:7070", "localhost:7070", "[::1]:7070"}) {
    o.listen = ok;
    EXPECT_THAT(GrpcServer::CheckOptions(o), IsOk()) << ok;
  }
  o.listen = "0.0.0.0:7443";
  EXPECT_THAT(GrpcServer::CheckOptions(o),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("refusing to listen on 0.0.0.0:7443 without TLS: pass --tls-cert FILE --tls-key FILE")));
  o.listen = "[::]:7443";
  EXPECT_THAT(GrpcServer::CheckOptions(o), StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("[::]:7443")));
  o.listen = "server.example.org:7443";
  EXPECT_THAT(GrpcServer::CheckOptions(o), StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("--tls-cert")));
  o.tls_cert_file = "server.crt";
  EXPECT_THAT(GrpcServer::CheckOptions(o),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--tls-cert and --tls-key go together")));
  o.tls_key_file = "server.key";
  EXPECT_THAT(GrpcServer::CheckOptions(o), IsOk());
  o = GrpcServerOptions();
  o.listen = "127.0.0.1:0";
  o.tls_client_ca_file = "ca.crt";
  EXPECT_THAT(GrpcServer::CheckOptions(o), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--tls-client-ca")));
}

TEST(GrpcServerOptions, ListenAddresses) {
  auto a = ParseListenAddress("[::1]:7070");
  ASSERT_THAT(a, IsOk());
  EXPECT_EQ(a->host, "::1");
  EXPECT_EQ(a->port, 7070);
  EXPECT_EQ(a->ToString(), "[::1]:7070");
  EXPECT_THAT(ParseListenAddress("127.0.0.1"), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no port")));
  EXPECT_THAT(ParseListenAddress(":7070"), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no host")));
  EXPECT_THAT(ParseListenAddress("::1:7070"), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("brackets")));
  EXPECT_THAT(ParseListenAddress("127.0.0.1:70000"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("0..65535")));
  EXPECT_TRUE(IsLoopback("127.0.0.1"));
  EXPECT_TRUE(IsLoopback("LOCALHOST"));
  EXPECT_TRUE(IsLoopback("::1"));
  EXPECT_FALSE(IsLoopback("128.0.0.1"));
  EXPECT_FALSE(IsLoopback("0.0.0.0"));
  EXPECT_FALSE(IsLoopback("::"));
  EXPECT_FALSE(IsLoopback("example.org"));
}

TEST(GrpcServerOptions, UnreadableCertificatesAreNamed) {
  GrpcServerOptions o;
  o.listen = "127.0.0.1:0";
  o.tls_cert_file = "/nonexistent/server.crt";
  o.tls_key_file = "/nonexistent/server.key";
  EXPECT_THAT(GrpcServer::Create(o), StatusIs(absl::StatusCode::kFailedPrecondition,
                                              HasSubstr("--tls-cert /nonexistent/server.crt: cannot open")));
}

TEST_F(GrpcServerTest, ServesTlsAndRefusesPlaintextClients) {
  GrpcServerOptions o;
  o.listen = "127.0.0.1:0";
  o.tls_cert_file = std::string(MEDPROF_SERVER_TESTDATA) + "/server.crt";
  o.tls_key_file = std::string(MEDPROF_SERVER_TESTDATA) + "/server.key";
  StartServer(o);
  EXPECT_TRUE(server_->tls());
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = TestData("ca.crt");
  auto secure = v1::MedprofService::NewStub(
      grpc::CreateChannel(absl::StrCat("localhost:", server_->port()), grpc::SslCredentials(ssl)));
  v1::ListAgentsResponse out;
  grpc::Status s = secure->ListAgents(Ctx().get(), v1::ListAgentsRequest(), &out);
  EXPECT_TRUE(s.ok()) << s.error_message();
  auto plain = v1::MedprofService::NewStub(Plain());
  s = plain->ListAgents(Ctx(2000).get(), v1::ListAgentsRequest(), &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(GrpcServerTest, MutualTlsRequiresAClientCertificate) {
  GrpcServerOptions o;
  o.listen = "127.0.0.1:0";
  o.tls_cert_file = std::string(MEDPROF_SERVER_TESTDATA) + "/server.crt";
  o.tls_key_file = std::string(MEDPROF_SERVER_TESTDATA) + "/server.key";
  o.tls_client_ca_file = std::string(MEDPROF_SERVER_TESTDATA) + "/ca.crt";
  StartServer(o);
  EXPECT_TRUE(server_->mutual_tls());
  const std::string target = absl::StrCat("localhost:", server_->port());
  grpc::SslCredentialsOptions with_cert;
  with_cert.pem_root_certs = TestData("ca.crt");
  with_cert.pem_cert_chain = TestData("client.crt");
  with_cert.pem_private_key = TestData("client.key");
  v1::ListAgentsResponse out;
  grpc::Status s = v1::MedprofService::NewStub(grpc::CreateChannel(target, grpc::SslCredentials(with_cert)))
                       ->ListAgents(Ctx().get(), v1::ListAgentsRequest(), &out);
  EXPECT_TRUE(s.ok()) << s.error_message();
  grpc::SslCredentialsOptions without_cert;
  without_cert.pem_root_certs = TestData("ca.crt");
  s = v1::MedprofService::NewStub(grpc::CreateChannel(target, grpc::SslCredentials(without_cert)))
          ->ListAgents(Ctx(2000).get(), v1::ListAgentsRequest(), &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
}

}  // namespace
}  // namespace medprof::server::rpc
