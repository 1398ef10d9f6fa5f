// Tokens and roles over the wire: every RPC of both services called with every role (allowed
// or PERMISSION_DENIED), no/bad/revoked tokens (UNAUTHENTICATED), a lab seeing only its own
// studies, an agent token acting only as its own agent, the per-token submission limit, and a
// malformed request of each kind refused with an error naming the field.
#include "server/rpc/auth.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/security/credentials.h>

#include <functional>
#include <future>
#include <map>
#include <set>

#include "medprof/v1/models.grpc.pb.h"
#include "medprof/v1/service.grpc.pb.h"
#include "server/domain/limits.h"
#include "server/rpc/grpc_server.h"
#include "tests/unit/server/domain_fixture.h"

namespace medprof::server::rpc {
namespace {

using ::medprof::server::testing::TinyConfig;
using ::medprof::testing::IsOk;
using ::medprof::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

absl::Status ToAbsl(const grpc::Status& g) {
  return absl::Status(static_cast<absl::StatusCode>(g.error_code()), g.error_message());
}

// Both services of service.proto.
std::vector<const google::protobuf::ServiceDescriptor*> Services() {
  const google::protobuf::FileDescriptor* file = v1::SubmitStudyRequest::descriptor()->file();
  return {file->FindServiceByName("MedprofService"), file->FindServiceByName("AgentService")};
}

// ---------------------------------------------------------------- tokens in the store

class TokenServiceTest : public ::medprof::server::testing::DomainTest {};

TEST_F(TokenServiceTest, OnlyASaltedHashIsStoredAndTheTokenVerifies) {
  TokenGrant g;
  g.role = Role::kSubmit;
  g.project = "lab-a";
  MEDPROF_ASSERT_OK_AND_ASSIGN(CreatedToken t, domain_->tokens().Create(g));
  EXPECT_THAT(t.token, ::testing::MatchesRegex("mpt_[0-9a-f]{12}_[0-9a-f]{64}"));
  EXPECT_EQ(t.record.token_id, "tok-" + t.token.substr(4, 12));
  EXPECT_EQ(t.record.salt.size(), 32u);
  EXPECT_EQ(t.record.hash.size(), 64u);
  EXPECT_EQ(t.token.find(t.record.hash), std::string::npos);

  MEDPROF_ASSERT_OK_AND_ASSIGN(std::vector<TokenRecord> list, domain_->tokens().List());
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].token_id, t.record.token_id);
  EXPECT_EQ(list[0].hash, t.record.hash);
  EXPECT_EQ(list[0].role, "submit");
  EXPECT_EQ(list[0].project, "lab-a");

  MEDPROF_ASSERT_OK_AND_ASSIGN(Principal p, domain_->tokens().Verify(t.token));
  EXPECT_EQ(p.role, Role::kSubmit);
  EXPECT_EQ(p.project, "lab-a");
  EXPECT_EQ(p.token_id, t.record.token_id);

  std::string wrong = t.token;
  wrong.back() = wrong.back() == '0' ? '1' : '0';
  EXPECT_THAT(domain_->tokens().Verify(wrong), StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("wrong secret")));
  EXPECT_THAT(domain_->tokens().Verify("mpt_000000000000_" + std::string(64, 'a')),
              StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("unknown token id tok-000000000000")));
  EXPECT_THAT(domain_->tokens().Verify("hunter2"),
              StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("no mpt_ prefix")));

  ASSERT_THAT(domain_->tokens().Revoke(t.record.token_id), IsOk());
  EXPECT_THAT(domain_->tokens().Verify(t.token), StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("revoked")));
  EXPECT_THAT(domain_->tokens().Revoke("tok-ffffffffffff"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("token_id: no token 'tok-ffffffffffff'")));
}

TEST_F(TokenServiceTest, GrantsAreValidatedFieldByField) {
  TokenGrant g;
  g.role = Role::kRead;
  g.project = "*";
  EXPECT_THAT(domain_->tokens().Create(g), StatusIs(absl::StatusCode::kInvalidArgument,
                                                    HasSubstr("project: '*' (every project) is for admin tokens only")));
  g.project = "Lab A";
  EXPECT_THAT(domain_->tokens().Create(g),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("project: 'Lab A' is not a project name")));
  g.project = "lab-a";
  g.role = Role::kAgent;
  EXPECT_THAT(domain_->tokens().Create(g),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("agent_name: an agent token needs")));
  g.role = Role::kRead;
  g.agent_name = "node-1";
  EXPECT_THAT(domain_->tokens().Create(g),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("agent_name: only agent tokens name an agent")));
  g.agent_name.clear();
  g.note = std::string(limits::kMaxTokenNote + 1, 'x');
  EXPECT_THAT(domain_->tokens().Create(g),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("note: 201 characters (allowed at most 200)")));
  EXPECT_THAT(ParseRole("root"), StatusIs(absl::StatusCode::kInvalidArgument,
                                          HasSubstr("role: 'root' is not a role (allowed admin|submit|read|agent)")));
  MEDPROF_ASSERT_OK_AND_ASSIGN(int64_t rows, [&]() -> absl::StatusOr<int64_t> {
    int64_t n = 0;
    MEDPROF_RETURN_IF_ERROR(store_->Read([&](StoreTx& tx) -> absl::Status {
      MEDPROF_ASSIGN_OR_RETURN(n, tx.CountRows("tokens"));
      return absl::OkStatus();
    }));
    return n;
  }());
  EXPECT_EQ(rows, 0);
}

TEST(AuthTable, EveryRpcOfBothServicesIsListed) {
  std::set<std::string> listed;
  for (const std::string& m : AuthorizedMethods()) listed.insert(m);
  for (const google::protobuf::ServiceDescriptor* service : Services()) {
    for (int i = 0; i < service->method_count(); ++i) {
      const std::string name = service->method(i)->name();
      EXPECT_TRUE(listed.contains(name)) << service->name() << "." << name << " has no row in auth.cc's table";
      EXPECT_FALSE(MethodRoles(name).empty()) << name;
    }
  }
  EXPECT_TRUE(MethodRoles("DropDatabase").empty());
}

// Models as studies: a read token lists but cannot upload, only admins delete, only agents fetch.
TEST(AuthTable, ModelServiceRolesAreThoseOfStudies) {
  const google::protobuf::ServiceDescriptor* service =
      v1::HasModelRequest::descriptor()->file()->FindServiceByName("ModelService");
  ASSERT_NE(service, nullptr);
  const std::map<std::string, std::vector<Role>> expected = {
      {"HasModel", {Role::kAdmin, Role::kSubmit}},
      {"UploadModel", {Role::kAdmin, Role::kSubmit}},
      {"ListModels", {Role::kAdmin, Role::kSubmit, Role::kRead}},
      {"DeleteModel", {Role::kAdmin}},
      {"FetchModel", {Role::kAgent}},
  };
  ASSERT_EQ(service->method_count(), static_cast<int>(expected.size()));
  for (int i = 0; i < service->method_count(); ++i) {
    const std::string name = service->method(i)->name();
    ASSERT_TRUE(expected.contains(name)) << name;
    EXPECT_EQ(MethodRoles(name), expected.at(name)) << name;
  }
}

TEST(AuthHeader, MissingOrMalformedHeadersAreUnauthenticated) {
  Authenticator auth(AuthMode::kTokens, nullptr);
  EXPECT_THAT(auth.AuthenticateHeader("", "GetStudy"),
              StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("GetStudy: no bearer token")));
  EXPECT_THAT(auth.AuthenticateHeader("Basic dXNlcjpwYXNz", "GetStudy"),
              StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("expected 'Bearer <token>'")));
  Authenticator off(AuthMode::kOff, nullptr);
  MEDPROF_ASSERT_OK_AND_ASSIGN(CallContext ctx, off.AuthenticateHeader("", "SubmitStudy"));
  EXPECT_TRUE(ctx.all_projects);
  EXPECT_EQ(ctx.agent_name, "");
}

// ---------------------------------------------------------------- over the wire

class AuthWireTest : public ::medprof::server::testing::DomainTest {
 protected:
  void StartServer(AuthMode mode) {
    GrpcServerOptions o;
    o.listen = "127.0.0.1:0";
    o.auth = mode;
    auto server = GrpcServer::Create(o);
    ASSERT_THAT(server, IsOk());
    server_ = std::move(server).value();
    ASSERT_THAT(server_->Start(domain_.get()), IsOk());
    channel_ = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
    people_ = v1::MedprofService::NewStub(channel_);
    agents_ = v1::AgentService::NewStub(channel_);
  }
  void TearDown() override {
    if (server_) {
      server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
      server_->Wait();
    }
  }
  std::string Token(Role role, const std::string& project, const std::string& agent = "") {
    TokenGrant g;
    g.role = role;
    g.project = project;
    g.agent_name = agent;
    auto t = domain_->tokens().Create(g);
    EXPECT_THAT(t, IsOk());
    return t.ok() ? t->token : "";
  }
  static std::unique_ptr<grpc::ClientContext> Ctx(const std::string& token, int timeout_ms = 5000) {
    auto c = std::make_unique<grpc::ClientContext>();
    c->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
    if (!token.empty()) c->AddMetadata("authorization", "Bearer " + token);
    return c;
  }
  static v1::RegisterRequest Registration(const std::string& name) {
    v1::RegisterRequest reg;
    reg.set_protocol_version(v1::PROTOCOL_VERSION_1);
    reg.set_agent_name(name);
    reg.set_host("localhost");
    auto* cpu = reg.add_devices();
    cpu->set_index(-1);
    cpu->set_kind("cpu");
    cpu->set_name("cpu");
    return reg;
  }
  absl::StatusOr<std::string> Submit(const std::string& token) {
    v1::SubmitStudyRequest submit;
    submit.add_presets("baseline");
    *submit.mutable_config() = TinyConfig();
    v1::SubmitStudyResponse out;
    grpc::Status s = people_->SubmitStudy(Ctx(token).get(), submit, &out);
    if (!s.ok()) return ToAbsl(s);
    return out.study_id();
  }

  std::unique_ptr<GrpcServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::MedprofService::Stub> people_;
  std::unique_ptr<v1::AgentService::Stub> agents_;
};

TEST_F(AuthWireTest, EveryRpcWithEveryRole) {
  StartServer(AuthMode::kTokens);
  const std::map<std::string, std::string> tokens = {
      {"admin", Token(Role::kAdmin, "lab-a")},
      {"submit", Token(Role::kSubmit, "lab-a")},
      {"read", Token(Role::kRead, "lab-a")},
      {"agent", Token(Role::kAgent, "lab-a", "node-a")},
  };
  // Fixtures made with the right roles: an agent, a study of lab-a, a run of it.
  v1::RegisterResponse registered;
  ASSERT_TRUE(agents_->Register(Ctx(tokens.at("agent")).get(), Registration("node-a"), &registered).ok());
  const std::string agent_id = registered.agent_id();
  MEDPROF_ASSERT_OK_AND_ASSIGN(std::string study_id, Submit(tokens.at("submit")));
  v1::AcquireJobRequest acquire;
  acquire.set_agent_id(agent_id);
  v1::AcquireJobResponse got;
  ASSERT_TRUE(agents_->AcquireJob(Ctx(tokens.at("agent")).get(), acquire, &got).ok());
  ASSERT_TRUE(got.has_assignment());
  const std::string run_id = got.assignment().run_id();

  // One call per RPC; the result's status.
  using Call = std::function<grpc::Status(const std::string& token)>;
  std::map<std::string, Call> calls;
  calls["SubmitStudy"] = [&](const std::string& t) {
    v1::SubmitStudyRequest r;
    r.add_presets("opt1");
    *r.mutable_config() = TinyConfig();
    v1::SubmitStudyResponse out;
    return people_->SubmitStudy(Ctx(t).get(), r, &out);
  };
  calls["ImportRun"] = [&](const std::string& t) {
    v1::ImportRunRequest r;
    r.set_preset("opt1");
    r.set_gpu("NVIDIA H200");
    r.set_source("ncu");
    v1::KernelStat* k = r.add_kernels();
    k->set_name("k");
    k->set_count(1);
    k->set_total_ns(1000);
    k->set_min_ns(1000);
    k->set_max_ns(1000);
    v1::ImportRunResponse out;
    return people_->ImportRun(Ctx(t).get(), r, &out);
  };
  calls["UploadRun"] = [&](const std::string& t) {
    v1::UploadRunRequest r;
    // A study of its own: CancelStudy (called first, in name order) cancels the fixture's.
    absl::StatusOr<std::string> fresh = Submit(tokens.at("submit"));
    r.set_study_id(fresh.ok() ? *fresh : study_id);
    r.add_messages()->mutable_started()->mutable_effective()->set_preset("opt1");
    r.add_messages()->mutable_step()->set_wall_ns(1000);
    r.add_messages()->mutable_summary()->set_measured_steps(1);
    v1::UploadRunResponse out;
    return people_->UploadRun(Ctx(t).get(), r, &out);
  };
  calls["GetStudy"] = [&](const std::string& t) {
    v1::GetStudyRequest r;
    r.set_study_id(study_id);
    v1::Study out;
    return people_->GetStudy(Ctx(t).get(), r, &out);
  };
  calls["ListStudies"] = [&](const std::string& t) {
    v1::ListStudiesResponse out;
    return people_->ListStudies(Ctx(t).get(), v1::ListStudiesRequest(), &out);
  };
  calls["WatchStudy"] = [&](const std::string& t) {
    v1::WatchStudyRequest r;
    r.set_study_id(study_id);
    auto ctx = Ctx(t, 300);
    auto reader = people_->WatchStudy(ctx.get(), r);
    v1::StudyEvent e;
    if (!reader->Read(&e)) return reader->Finish();
    ctx->TryCancel();
    (void)reader->Finish();
    return grpc::Status::OK;
  };
  calls["CancelStudy"] = [&](const std::string& t) {
    v1::CancelStudyRequest r;
    r.set_study_id(study_id);
    v1::CancelStudyResponse out;
    return people_->CancelStudy(Ctx(t).get(), r, &out);
  };
  calls["ListRuns"] = [&](const std::string& t) {
    v1::ListRunsRequest r;
    r.set_study_id(study_id);
    v1::ListRunsResponse out;
    return people_->ListRuns(Ctx(t).get(), r, &out);
  };
  calls["GetRun"] = [&](const std::string& t) {
    v1::GetRunRequest r;
    r.set_run_id(run_id);
    v1::Run out;
    return people_->GetRun(Ctx(t).get(), r, &out);
  };
  calls["Compare"] = [&](const std::string& t) {
    v1::CompareRequest r;
    r.set_study_id(study_id);
    v1::CompareResponse out;
    return people_->Compare(Ctx(t).get(), r, &out);
  };
  calls["ListAgents"] = [&](const std::string& t) {
    v1::ListAgentsResponse out;
    return people_->ListAgents(Ctx(t).get(), v1::ListAgentsRequest(), &out);
  };
  calls["ListKernels"] = [&](const std::string& t) {
    v1::ListKernelsRequest r;
    r.set_run_id(run_id);
    v1::ListKernelsResponse out;
    return people_->ListKernels(Ctx(t).get(), r, &out);
  };
  calls["DiffRuns"] = [&](const std::string& t) {
    v1::DiffRunsRequest r;
    r.set_run_a(run_id);
    r.set_run_b(run_id);
    v1::DiffRunsResponse out;
    return people_->DiffRuns(Ctx(t).get(), r, &out);
  };
  calls["GetTimeline"] = [&](const std::string& t) {
    v1::GetTimelineRequest r;
    r.set_run_id(run_id);
    v1::GetTimelineResponse out;
    return people_->GetTimeline(Ctx(t).get(), r, &out);
  };
  calls["Register"] = [&](const std::string& t) {
    v1::RegisterResponse out;
    return agents_->Register(Ctx(t).get(), Registration("node-a"), &out);
  };
  calls["Heartbeat"] = [&](const std::string& t) {
    v1::HeartbeatRequest r;
    r.set_agent_id(agent_id);
    r.add_running_run_ids(run_id);
    v1::HeartbeatResponse out;
    return agents_->Heartbeat(Ctx(t).get(), r, &out);
  };
  calls["AcquireJob"] = [&](const std::string& t) {
    v1::AcquireJobRequest r;
    r.set_agent_id(agent_id);
    r.add_free_device_indexes(-1);
    v1::AcquireJobResponse out;
    return agents_->AcquireJob(Ctx(t).get(), r, &out);
  };
  calls["UploadResults"] = [&](const std::string& t) {
    auto ctx = Ctx(t);
    v1::UploadAck ack;
    auto writer = agents_->UploadResults(ctx.get(), &ack);
    v1::ResultChunk c;
    c.set_run_id(run_id);
    c.set_agent_id(agent_id);
    c.set_seq(1);
    c.mutable_message()->mutable_started()->set_backend("cpu");
    writer->Write(c);
    writer->WritesDone();
    return writer->Finish();
  };
  calls["FinishRun"] = [&](const std::string& t) {
    v1::FinishRunRequest r;
    r.set_agent_id(agent_id);
    r.set_run_id("run-000000000000");
    r.set_state(v1::RUN_SUCCEEDED);
    v1::FinishRunResponse out;
    return agents_->FinishRun(Ctx(t).get(), r, &out);
  };

  // An RPC without a typed call above (a newer one) is called generically with an empty
  // request; the table in auth.cc says who may call it. Streaming RPCs need a typed call.
  std::set<std::string> generic;
  grpc::GenericStub generic_stub(channel_);
  for (const google::protobuf::ServiceDescriptor* service : Services()) {
    for (int i = 0; i < service->method_count(); ++i) {
      const google::protobuf::MethodDescriptor* m = service->method(i);
      if (calls.contains(m->name())) continue;
      ASSERT_FALSE(m->client_streaming() || m->server_streaming()) << m->name() << " needs a typed call here";
      generic.insert(m->name());
      const std::string path = "/" + service->full_name() + "/" + m->name();
      calls[m->name()] = [&generic_stub, path](const std::string& t) {
        auto ctx = Ctx(t);
        grpc::ByteBuffer request, response;
        std::promise<grpc::Status> done;
        generic_stub.UnaryCall(ctx.get(), path, grpc::StubOptions(), &request, &response,
                               [&done](grpc::Status s) { done.set_value(std::move(s)); });
        return done.get_future().get();
      };
    }
  }

  // What each role may call: people's reads; submit/admin also write; agents only AgentService.
  const std::set<std::string> reads = {"GetStudy", "ListStudies", "WatchStudy", "ListRuns",    "GetRun",
                                       "Compare",  "ListAgents",  "ListKernels", "DiffRuns", "GetTimeline"};
  const std::set<std::string> writes = {"SubmitStudy", "CancelStudy", "ImportRun", "UploadRun"};
  const std::set<std::string> agent_calls = {"Register", "Heartbeat", "AcquireJob", "UploadResults", "FinishRun"};
  int allowed = 0, refused = 0;
  for (const char* role : {"read", "submit", "admin", "agent"}) {
    for (const auto& [method, call] : calls) {
      bool may = std::string(role) == "agent"
                     ? agent_calls.contains(method)
                     : reads.contains(method) || (std::string(role) != "read" && writes.contains(method));
      if (generic.contains(method)) {
        const std::vector<Role> roles = MethodRoles(method);
        may = std::any_of(roles.begin(), roles.end(), [&](Role r) { return RoleName(r) == role; });
      }
      const absl::Status s = ToAbsl(call(tokens.at(role)));
      SCOPED_TRACE(std::string(role) + " " + method);
      if (may) {
        allowed += !generic.contains(method);
        // Allowed calls pass authentication; what the domain then answers is its business
        // (FinishRun of an unknown run is NOT_FOUND, a timeline of a CPU run may be missing).
        EXPECT_NE(s.code(), absl::StatusCode::kPermissionDenied) << s;
        EXPECT_NE(s.code(), absl::StatusCode::kUnauthenticated) << s;
        if (method != "FinishRun" && method != "GetTimeline" && method != "DiffRuns" && method != "ListKernels") {
          EXPECT_THAT(s, IsOk());
        }
      } else {
        refused += !generic.contains(method);
        EXPECT_THAT(s, StatusIs(absl::StatusCode::kPermissionDenied,
                                AllOf(HasSubstr(method), HasSubstr(std::string("a ") + role + " token"))));
      }
    }
  }
  // Over the 19 RPCs with typed calls: read 10, submit 14, admin 14, agent 5.
  EXPECT_EQ(allowed, 10 + 14 + 14 + 5);
  EXPECT_EQ(refused, 4 * 19 - allowed);

  // Without a token, or with a made-up one: UNAUTHENTICATED for every RPC.
  for (const auto& [method, call] : calls) {
    SCOPED_TRACE(method);
    EXPECT_THAT(ToAbsl(call("")), StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("no bearer token")));
    EXPECT_THAT(ToAbsl(call("mpt_0123456789ab_" + std::string(64, 'f'))),
                StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("unknown token id tok-0123456789ab")));
  }
}

TEST_F(AuthWireTest, ALabSeesOnlyItsOwnStudies) {
  StartServer(AuthMode::kTokens);
  const std::string a_submit = Token(Role::kSubmit, "lab-a");
  const std::string b_read = Token(Role::kRead, "lab-b");
  const std::string b_submit = Token(Role::kSubmit, "lab-b");
  const std::string root = Token(Role::kAdmin, "*");
  MEDPROF_ASSERT_OK_AND_ASSIGN(std::string study_a, Submit(a_submit));
  MEDPROF_ASSERT_OK_AND_ASSIGN(std::string study_b, Submit(b_submit));

  v1::GetStudyRequest get;
  get.set_study_id(study_a);
  v1::Study study;
  EXPECT_THAT(ToAbsl(people_->GetStudy(Ctx(b_read).get(), get, &study)),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("study_id: no study '" + study_a + "'")));
  ASSERT_TRUE(people_->GetStudy(Ctx(a_submit).get(), get, &study).ok());
  EXPECT_EQ(study.project(), "lab-a");
  ASSERT_TRUE(people_->GetStudy(Ctx(root).get(), get, &study).ok());

  v1::CancelStudyRequest cancel;
  cancel.set_study_id(study_a);
  v1::CancelStudyResponse cancelled;
  EXPECT_THAT(ToAbsl(people_->CancelStudy(Ctx(b_submit).get(), cancel, &cancelled)),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("study_id: no study")));

  auto ids = [&](const std::string& token) {
    v1::ListStudiesResponse out;
    EXPECT_TRUE(people_->ListStudies(Ctx(token).get(), v1::ListStudiesRequest(), &out).ok());
    std::vector<std::string> v;
    for (const auto& s : out.studies()) v.push_back(s.study_id());
    return v;
  };
  EXPECT_THAT(ids(b_read), ::testing::ElementsAre(study_b));
  EXPECT_THAT(ids(a_submit), ::testing::ElementsAre(study_a));
  EXPECT_THAT(ids(root), ::testing::ElementsAre(study_b, study_a));

  v1::ListRunsRequest runs;
  runs.set_study_id(study_a);
  v1::ListRunsResponse listed;
  EXPECT_THAT(ToAbsl(people_->ListRuns(Ctx(b_read).get(), runs, &listed)),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("study_id: no study")));
}

TEST_F(AuthWireTest, AnAgentTokenActsOnlyAsItsOwnAgent) {
  StartServer(AuthMode::kTokens);
  const std::string a = Token(Role::kAgent, "lab-a", "node-a");
  const std::string b = Token(Role::kAgent, "lab-a", "node-b");
  v1::RegisterResponse reg_a, reg_b;
  ASSERT_TRUE(agents_->Register(Ctx(a).get(), Registration("node-a"), &reg_a).ok());
  ASSERT_TRUE(agents_->Register(Ctx(b).get(), Registration("node-b"), &reg_b).ok());
  EXPECT_THAT(ToAbsl(agents_->Register(Ctx(b).get(), Registration("node-a"), &reg_b)),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("agent_name: this token acts only as agent 'node-b', not 'node-a'")));
  MEDPROF_ASSERT_OK_AND_ASSIGN(std::string study, Submit(Token(Role::kSubmit, "lab-a")));

  v1::AcquireJobRequest acquire;
  acquire.set_agent_id(reg_a.agent_id());
  v1::AcquireJobResponse got;
  EXPECT_THAT(ToAbsl(agents_->AcquireJob(Ctx(b).get(), acquire, &got)),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("is agent 'node-a'")));
  ASSERT_TRUE(agents_->AcquireJob(Ctx(a).get(), acquire, &got).ok());
  ASSERT_TRUE(got.has_assignment());
  const std::string run_id = got.assignment().run_id();

  v1::HeartbeatRequest hb;
  hb.set_agent_id(reg_a.agent_id());
  v1::HeartbeatResponse hb_out;
  EXPECT_THAT(ToAbsl(agents_->Heartbeat(Ctx(b).get(), hb, &hb_out)),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("this token acts only as agent 'node-b'")));

  // Uploading for node-a's run: with node-a's id the token is refused; with its own id the
  // domain refuses (the run is leased to node-a).
  for (const std::string& as : {reg_a.agent_id(), reg_b.agent_id()}) {
    auto ctx = Ctx(b);
    v1::UploadAck ack;
    auto writer = agents_->UploadResults(ctx.get(), &ack);
    v1::ResultChunk c;
    c.set_run_id(run_id);
    c.set_agent_id(as);
    c.set_seq(1);
    c.mutable_message()->mutable_started()->set_backend("cpu");
    writer->Write(c);
    writer->WritesDone();
    EXPECT_THAT(ToAbsl(writer->Finish()), StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr("agent")));
  }
  v1::FinishRunRequest finish;
  finish.set_agent_id(reg_b.agent_id());
  finish.set_run_id(run_id);
  finish.set_state(v1::RUN_SUCCEEDED);
  v1::FinishRunResponse finished;
  EXPECT_THAT(ToAbsl(agents_->FinishRun(Ctx(b).get(), finish, &finished)),
              StatusIs(absl::StatusCode::kPermissionDenied, HasSubstr(reg_a.agent_id())));
  EXPECT_EQ(Count("run_chunks"), 0);
}

TEST_F(AuthWireTest, ARevokedTokenIsRefused) {
  StartServer(AuthMode::kTokens);
  TokenGrant g;
  g.role = Role::kRead;
  g.project = "lab-a";
  MEDPROF_ASSERT_OK_AND_ASSIGN(CreatedToken t, domain_->tokens().Create(g));
  v1::ListStudiesResponse out;
  ASSERT_TRUE(people_->ListStudies(Ctx(t.token).get(), v1::ListStudiesRequest(), &out).ok());
  ASSERT_THAT(domain_->tokens().Revoke(t.record.token_id), IsOk());
  // The server trusts a verified token for limits::kTokenCacheTtl (5 s); wait that out.
  std::this_thread::sleep_for(limits::kTokenCacheTtl + std::chrono::milliseconds(100));
  EXPECT_THAT(ToAbsl(people_->ListStudies(Ctx(t.token).get(), v1::ListStudiesRequest(), &out)),
              StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr(t.record.token_id + " was revoked")));
}

TEST_F(AuthWireTest, SubmissionsPerTokenPerMinuteAreLimited) {
  StartServer(AuthMode::kTokens);
  const std::string t = Token(Role::kSubmit, "lab-a");
  for (int i = 0; i < limits::kSubmissionsPerTokenPerMinute; ++i) ASSERT_THAT(Submit(t), IsOk()) << i;
  EXPECT_THAT(Submit(t), StatusIs(absl::StatusCode::kResourceExhausted,
                                  AllOf(HasSubstr("limit submissions_per_token_per_minute"),
                                        HasSubstr("31 submissions"), HasSubstr("(allowed 30)"))));
  EXPECT_THAT(Submit(Token(Role::kSubmit, "lab-a")), IsOk());  // another token has its own budget
}

TEST_F(AuthWireTest, AMalformedRequestOfEachKindNamesTheField) {
  StartServer(AuthMode::kOff);
  auto none = [] { return Ctx(""); };
  std::map<std::string, absl::Status> got;
  {
    v1::SubmitStudyRequest r;
    *r.mutable_config() = TinyConfig();
    v1::SubmitStudyResponse out;
    got["presets"] = ToAbsl(people_->SubmitStudy(none().get(), r, &out));
  }
  {
    v1::GetStudyRequest r;
    v1::Study out;
    got["study_id"] = ToAbsl(people_->GetStudy(none().get(), r, &out));
  }
  {
    v1::ListStudiesRequest r;
    r.set_limit(5000);
    v1::ListStudiesResponse out;
    got["limit"] = ToAbsl(people_->ListStudies(none().get(), r, &out));
  }
  {
    v1::CancelStudyRequest r;
    r.set_study_id("st-000000000000");
    r.set_reason(std::string(limits::kMaxCancelReasonChars + 1, 'x'));
    v1::CancelStudyResponse out;
    got["reason"] = ToAbsl(people_->CancelStudy(none().get(), r, &out));
  }
  {
    v1::GetRunRequest r;
    v1::Run out;
    got["run_id"] = ToAbsl(people_->GetRun(none().get(), r, &out));
  }
  {
    v1::RegisterRequest r = Registration("");
    v1::RegisterResponse out;
    got["agent_name"] = ToAbsl(agents_->Register(none().get(), r, &out));
  }
  {
    v1::AcquireJobRequest r;
    r.set_agent_id("agent-000000000000");
    r.set_wait_ms(60000);
    v1::AcquireJobResponse out;
    got["wait_ms"] = ToAbsl(agents_->AcquireJob(none().get(), r, &out));
  }
  {
    v1::FinishRunRequest r;
    r.set_agent_id("agent-000000000000");
    r.set_run_id("run-000000000000");
    v1::FinishRunResponse out;
    got["state"] = ToAbsl(agents_->FinishRun(none().get(), r, &out));
  }
  {
    v1::WatchStudyRequest r;
    auto ctx = none();
    auto reader = people_->WatchStudy(ctx.get(), r);
    v1::StudyEvent e;
    while (reader->Read(&e)) {
    }
    got["study_id (watch)"] = ToAbsl(reader->Finish());
  }
  {
    v1::ListRunsRequest r;
    r.set_limit(20000);
    v1::ListRunsResponse out;
    got["limit (runs)"] = ToAbsl(people_->ListRuns(none().get(), r, &out));
  }
  {
    v1::HeartbeatRequest r;
    v1::HeartbeatResponse out;
    got["agent_id"] = ToAbsl(agents_->Heartbeat(none().get(), r, &out));
  }
  {
    auto ctx = none();
    v1::UploadAck ack;
    auto writer = agents_->UploadResults(ctx.get(), &ack);
    v1::ResultChunk c;
    c.set_run_id("run-000000000000");
    c.set_agent_id("agent-000000000000");
    c.set_seq(0);
    writer->Write(c);
    writer->WritesDone();
    got["seq"] = ToAbsl(writer->Finish());
  }
  {
    v1::ListKernelsRequest r;
    v1::ListKernelsResponse out;
    got["run_id (kernels)"] = ToAbsl(people_->ListKernels(none().get(), r, &out));
  }
  {
    v1::DiffRunsRequest r;
    v1::DiffRunsResponse out;
    got["run_a"] = ToAbsl(people_->DiffRuns(none().get(), r, &out));
  }
  {
    v1::GetTimelineRequest r;
    v1::GetTimelineResponse out;
    got["run_id (timeline)"] = ToAbsl(people_->GetTimeline(none().get(), r, &out));
  }
  for (const auto& [key, status] : got) {
    const std::string field = key.substr(0, key.find(' '));
    SCOPED_TRACE(key);
    EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(field)));
  }
}

TEST(AuthOptions, AuthOffOnlyOnLoopback) {
  GrpcServerOptions o;
  o.listen = "0.0.0.0:7443";
  o.tls_cert_file = "server.crt";
  o.tls_key_file = "server.key";
  o.auth = AuthMode::kOff;
  EXPECT_THAT(GrpcServer::CheckOptions(o),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("refusing --auth off on 0.0.0.0:7443")));
  o.auth = AuthMode::kTokens;
  EXPECT_THAT(GrpcServer::CheckOptions(o), IsOk());
  EXPECT_THAT(ParseAuthMode("maybe"), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--auth 'maybe'")));
}

}  // namespace
}  // namespace medprof::server::rpc
