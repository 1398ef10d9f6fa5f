// The whole CLI (RunCli: parse, connect, call, format, exit code) against a scripted
// MedprofService served in-process on 127.0.0.1 over real gRPC. The real server is exercised
// by the integration tests; here the responses are fixed so every output can be checked exactly.
#include "client/commands.h"

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "client/format.h"
#include "common/sha256.h"
#include "common/version.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace medprof::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// One WatchStudy call: these events, then either a normal end or a broken stream.
struct Stream {
  std::vector<v1::StudyEvent> events;
  bool breaks = false;
};

class ScriptedService final : public v1::MedprofService::Service {
 public:
  // Script (set before the call).
  grpc::Status submit_status = grpc::Status::OK;
  v1::SubmitStudyResponse submit_response;
  std::vector<v1::Study> studies;  // GetStudy answers in order; the last one repeats
  std::vector<Stream> streams;     // WatchStudy calls in order; the last one repeats
  v1::ListStudiesResponse list_studies;
  v1::ListRunsResponse list_runs;
  v1::CompareResponse compare;
  v1::ListAgentsResponse agents;

  // Record (read after the call).
  std::mutex mu;
  v1::SubmitStudyRequest last_submit;
  v1::CompareRequest last_compare;
  v1::CancelStudyRequest last_cancel;
  std::string last_authorization;
  int watch_calls = 0;
  int get_study_calls = 0;

  grpc::Status SubmitStudy(grpc::ServerContext* ctx, const v1::SubmitStudyRequest* req,
                           v1::SubmitStudyResponse* resp) override {
    std::lock_guard lock(mu);
    Record(ctx);
    last_submit = *req;
    if (!submit_status.ok()) return submit_status;
    *resp = submit_response;
    return grpc::Status::OK;
  }
  grpc::Status GetStudy(grpc::ServerContext* ctx, const v1::GetStudyRequest* req, v1::Study* resp) override {
    std::lock_guard lock(mu);
    Record(ctx);
    if (studies.empty() || req->study_id() != studies[0].study_id()) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "study " + req->study_id() + " not found");
    }
    *resp = studies[std::min<size_t>(get_study_calls++, studies.size() - 1)];
    return grpc::Status::OK;
  }
  grpc::Status ListStudies(grpc::ServerContext* ctx, const v1::ListStudiesRequest*,
                           v1::ListStudiesResponse* resp) override {
    std::lock_guard lock(mu);
    Record(ctx);
    *resp = list_studies;
    return grpc::Status::OK;
  }
  grpc::Status WatchStudy(grpc::ServerContext* ctx, const v1::WatchStudyRequest*,
                          grpc::ServerWriter<v1::StudyEvent>* writer) override {
    Stream s;
    {
      std::lock_guard lock(mu);
      Record(ctx);
      s = streams.at(std::min<size_t>(watch_calls++, streams.size() - 1));
    }
    for (const auto& e : s.events) writer->Write(e);
    if (s.breaks) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "server shutting down");
    return grpc::Status::OK;
  }
  grpc::Status CancelStudy(grpc::ServerContext* ctx, const v1::CancelStudyRequest* req,
                           v1::CancelStudyResponse* resp) override {
    std::lock_guard lock(mu);
    Record(ctx);
    last_cancel = *req;
    resp->set_jobs_cancelled(2);
    return grpc::Status::OK;
  }
  grpc::Status ListRuns(grpc::ServerContext* ctx, const v1::ListRunsRequest*, v1::ListRunsResponse* resp) override {
    std::lock_guard lock(mu);
    Record(ctx);
    *resp = list_runs;
    return grpc::Status::OK;
  }
  grpc::Status GetRun(grpc::ServerContext* ctx, const v1::GetRunRequest* req, v1::Run* resp) override {
    std::lock_guard lock(mu);
    Record(ctx);
    for (const auto& r : list_runs.runs()) {
      if (r.run_id() == req->run_id()) {
        *resp = r;
        return grpc::Status::OK;
      }
    }
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "run " + req->run_id() + " not found");
  }
  grpc::Status Compare(grpc::ServerContext* ctx, const v1::CompareRequest* req, v1::CompareResponse* resp) override {
    std::lock_guard lock(mu);
    Record(ctx);
    last_compare = *req;
    *resp = compare;
    return grpc::Status::OK;
  }
  grpc::Status ListAgents(grpc::ServerContext* ctx, const v1::ListAgentsRequest*,
                          v1::ListAgentsResponse* resp) override {
    std::lock_guard lock(mu);
    Record(ctx);
    *resp = agents;
    return grpc::Status::OK;
  }

 private:
  void Record(grpc::ServerContext* ctx) {
    auto it = ctx->client_metadata().find("authorization");
    last_authorization = it == ctx->client_metadata().end() ? "" : std::string(it->second.data(), it->second.size());
  }
};

v1::Job MakeJob(const char* id, const char* preset, const char* target, v1::JobState state,
                const char* run = "", const char* error = "") {
  v1::Job j;
  j.set_job_id(id);
  j.set_study_id("st-1");
  j.set_preset(preset);
  j.set_target(target);
  j.set_state(state);
  j.set_attempts(state == v1::JOB_QUEUED ? 0 : 1);
  j.set_max_attempts(3);
  j.set_current_run_id(run);
  j.set_error(error);
  return j;
}

v1::StudyEvent Event(int64_t id, const char* job, v1::JobState state, const char* run, const char* msg = "") {
  v1::StudyEvent e;
  e.set_event_id(id);
  e.set_study_id("st-1");
  e.set_job_id(job);
  e.set_run_id(run);
  e.set_job_state(state);
  e.set_message(msg);
  return e;
}

v1::StudyEvent Progress(int64_t id, const char* job, const char* run, int step, int total) {
  v1::StudyEvent e = Event(id, job, v1::JOB_RUNNING, run);
  e.mutable_progress()->set_stage("measure");
  e.mutable_progress()->set_step(step);
  e.mutable_progress()->set_total(total);
  return e;
}

v1::StudyEvent Finished(int64_t id) {
  v1::StudyEvent e;
  e.set_event_id(id);
  e.set_study_id("st-1");
  e.set_study_finished(true);
  return e;
}

// A ModelService holding files in memory by hash, with an interrupted upload to resume.
class ScriptedModels final : public v1::ModelService::Service {
 public:
  std::mutex mu;
  std::map<std::string, std::string> files;    // complete, by sha256
  std::map<std::string, std::string> partial;  // received so far, by sha256
  int uploads = 0;

  grpc::Status HasModel(grpc::ServerContext*, const v1::HasModelRequest* req, v1::HasModelResponse* resp) override {
    std::lock_guard lock(mu);
    resp->set_present(files.contains(req->sha256()));
    if (!resp->present() && partial.contains(req->sha256())) resp->set_resume_offset(partial[req->sha256()].size());
    return grpc::Status::OK;
  }
  grpc::Status UploadModel(grpc::ServerContext*, grpc::ServerReader<v1::UploadModelChunk>* reader,
                           v1::UploadModelResponse* resp) override {
    std::lock_guard lock(mu);
    ++uploads;
    v1::UploadModelChunk chunk;
    while (reader->Read(&chunk)) {
      std::string& got = partial[chunk.sha256()];
      if (chunk.offset() != got.size()) return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "offset");
      got += chunk.data();
      resp->set_bytes_received(resp->bytes_received() + chunk.data().size());
      resp->mutable_model()->set_sha256(chunk.sha256());
    }
    files[resp->model().sha256()] = partial[resp->model().sha256()];
    return grpc::Status::OK;
  }
  grpc::Status ListModels(grpc::ServerContext*, const v1::ListModelsRequest*, v1::ListModelsResponse* resp) override {
    std::lock_guard lock(mu);
    for (const auto& [sha, bytes] : files) {
      v1::ModelInfo* m = resp->add_models();
      m->set_sha256(sha);
      m->set_file_name("denoiser.pt");
      m->set_size_bytes(bytes.size());
      m->set_project("lab-a");
      m->set_created_unix_ms(1764892800000);  // 2025-12-05 00:00:00 UTC
    }
    return grpc::Status::OK;
  }
};

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    builder.RegisterService(&models_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port_, 0);
    address_ = "127.0.0.1:" + std::to_string(port_);

    // A two-job study: j-1 (baseline, any) and j-2 (opt1, gpu=h200).
    service_.submit_response.set_study_id("st-1");
    *service_.submit_response.add_jobs() = MakeJob("j-1", "baseline", "", v1::JOB_QUEUED);
    *service_.submit_response.add_jobs() = MakeJob("j-2", "opt1", "gpu=h200", v1::JOB_QUEUED);
    service_.submit_response.add_warnings("no registered GPU matches gpu=h200");
    v1::Study active;
    active.set_study_id("st-1");
    active.set_state(v1::STUDY_ACTIVE);
    active.set_jobs_total(2);
    *active.add_jobs() = MakeJob("j-1", "baseline", "", v1::JOB_QUEUED);
    *active.add_jobs() = MakeJob("j-2", "opt1", "gpu=h200", v1::JOB_QUEUED);
    service_.studies.push_back(active);
  }
  void TearDown() override { server_->Shutdown(); }

  // The study's final state: j-1 succeeded, j-2 in `j2_state`.
  void FinishStudy(v1::JobState j2_state, const char* j2_error = "") {
    v1::Study done;
    done.set_study_id("st-1");
    done.set_state(v1::STUDY_DONE);
    done.set_jobs_total(2);
    done.set_jobs_done(2);
    *done.add_jobs() = MakeJob("j-1", "baseline", "", v1::JOB_SUCCEEDED, "r-1");
    *done.add_jobs() = MakeJob("j-2", "opt1", "gpu=h200", j2_state, "r-2", j2_error);
    service_.studies.push_back(done);
  }

  std::vector<v1::StudyEvent> Story(v1::JobState j2_end, const char* j2_msg = "") {
    return {Event(1, "j-1", v1::JOB_RUNNING, "r-1"), Progress(2, "j-1", "r-1", 1, 2),
            Progress(3, "j-1", "r-1", 2, 2),        Event(4, "j-1", v1::JOB_SUCCEEDED, "r-1"),
            Event(5, "j-2", v1::JOB_RUNNING, "r-2"), Event(6, "j-2", j2_end, "r-2", j2_msg),
            Finished(7)};
  }

  int Run(std::vector<std::string> args, std::map<std::string, std::string> env = {},
          const std::string& stdin_text = "") {
    args.insert(args.begin(), "medprof");
    out_.str("");
    err_.str("");
    std::istringstream in(stdin_text);
    CliIo io{&in, &out_, &err_, false, 0};
    WatchPolicy policy;
    policy.max_reconnects = 2;
    policy.first_backoff = absl::Milliseconds(1);
    policy.max_backoff = absl::Milliseconds(2);
    EnvLookup lookup = [env](const std::string& n) -> std::optional<std::string> {
      auto it = env.find(n);
      if (it == env.end()) return std::nullopt;
      return it->second;
    };
    return RunCli(args, lookup, io, policy);
  }

  ScriptedService service_;
  ScriptedModels models_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::string address_;
  std::ostringstream out_, err_;
};

TEST_F(CliTest, SubmitSendsOnlyTypedFieldsAndPrintsTheStudy) {
  EXPECT_EQ(Run({"--server", address_, "submit", "--presets", "baseline,opt1", "--volume", "16",
                 "--target", "gpu=h200"}),
            kExitOk);
  EXPECT_EQ(out_.str(), "study st-1: 2 jobs queued\n");
  EXPECT_EQ(err_.str(), "medprof: warning: no registered GPU matches gpu=h200\n");
  const v1::SubmitStudyRequest& r = service_.last_submit;
  ASSERT_EQ(r.presets_size(), 2);
  EXPECT_EQ(r.presets(1), "opt1");
  ASSERT_EQ(r.targets_size(), 1);
  EXPECT_EQ(r.targets(0), "gpu=h200");
  EXPECT_TRUE(r.config().has_volume());
  EXPECT_EQ(r.config().volume(), 16);
  EXPECT_FALSE(r.config().has_steps());
  EXPECT_FALSE(r.config().has_tf32());
  EXPECT_EQ(service_.last_authorization, "");
}

// submit --model asks the server first, uploads only a missing file (resuming an interrupted
// upload), and submits the hash and name without this machine's path.
TEST_F(CliTest, SubmitUploadsAModelOncePerContentAndSendsNoLocalPath) {
  const std::string path = ::testing::TempDir() + "/cli_model.pt";
  const std::string bytes(3u << 20, 'm');  // three chunks
  std::ofstream(path, std::ios::binary) << bytes;
  const std::string sha = Sha256Hex(bytes);
  models_.partial[sha] = bytes.substr(0, 1000);  // an interrupted upload
  EXPECT_EQ(Run({"--server", address_, "submit", "--presets", "baseline", "--model", path}), kExitOk);
  EXPECT_THAT(err_.str(), HasSubstr("uploaded " + std::to_string(bytes.size() - 1000) + " bytes (resumed at byte 1000)"));
  EXPECT_EQ(models_.files[sha], bytes);
  const v1::ModelRef& sent = service_.last_submit.config().model();
  EXPECT_EQ(sent.sha256(), sha);
  EXPECT_EQ(sent.file_name(), "cli_model.pt");
  EXPECT_EQ(sent.size_bytes(), bytes.size());
  EXPECT_EQ(sent.local_path(), "");

  err_.str("");
  EXPECT_EQ(Run({"--server", address_, "submit", "--presets", "opt2", "--model", path}), kExitOk);
  EXPECT_THAT(err_.str(), HasSubstr("is already on the server: nothing uploaded"));
  EXPECT_EQ(models_.uploads, 1);
  EXPECT_EQ(service_.last_submit.config().model().sha256(), sha);
}

TEST_F(CliTest, ModelsListsInEveryFormatAndDeleteChecksTheHash) {
  models_.files[std::string(64, 'a')] = "12345";
  EXPECT_EQ(Run({"--server", address_, "models"}), kExitOk);
  EXPECT_EQ(out_.str(), "SHA256" + std::string(60, ' ') + "FILE         BYTES  PROJECT  UPLOADER  CREATED (UTC)\n" +
                            std::string(64, 'a') + "  denoiser.pt      5  lab-a    -         2025-12-05 00:00:00\n");
  out_.str("");
  EXPECT_EQ(Run({"--server", address_, "models", "--format", "csv"}), kExitOk);
  EXPECT_EQ(out_.str(), "sha256,file_name,size_bytes,project,uploader,created_unix_ms\n" + std::string(64, 'a') +
                            ",denoiser.pt,5,lab-a,,1764892800000\n");
  EXPECT_EQ(Run({"--server", address_, "models", "delete", "XYZ"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("models delete: 'XYZ' is not a SHA-256"));
}

TEST_F(CliTest, SubmitJsonKeepsWarningsInTheDocument) {
  EXPECT_EQ(Run({"--server", address_, "submit", "--presets", "baseline", "--format", "json"}), kExitOk);
  auto j = nlohmann::json::parse(out_.str());
  EXPECT_EQ(j["study_id"], "st-1");
  EXPECT_EQ(j["jobs"].size(), 2u);
  EXPECT_EQ(j["warnings"][0], "no registered GPU matches gpu=h200");
  EXPECT_EQ(err_.str(), "");
}

TEST_F(CliTest, SubmitWaitJsonExits3AndNamesTheFailedJob) {
  FinishStudy(v1::JOB_FAILED, "oom: CUDA out of memory");
  service_.streams.push_back({Story(v1::JOB_FAILED, "oom: CUDA out of memory"), false});
  EXPECT_EQ(Run({"--server", address_, "submit", "--presets", "baseline,opt1", "--wait", "--format", "json"}),
            kExitJobFailed);
  // stdout is one JSON document with study_id at the top level.
  auto j = nlohmann::json::parse(out_.str());
  EXPECT_EQ(j["study_id"], "st-1");
  EXPECT_EQ(j["state"], "done");
  ASSERT_EQ(j["jobs"].size(), 2u);
  EXPECT_EQ(j["jobs"][0]["state"], "succeeded");
  EXPECT_EQ(j["jobs"][1]["state"], "failed");
  EXPECT_EQ(j["jobs"][1]["error"], "oom: CUDA out of memory");
  EXPECT_EQ(j["warnings"][0], "no registered GPU matches gpu=h200");
  // stderr (not a terminal): plain progress lines in event order, then the failure.
  EXPECT_EQ(err_.str(),
            "study st-1: watching 2 jobs\n"
            "job j-1 baseline any: running\n"
            "job j-1 baseline any: running measure 1/2\n"
            "job j-1 baseline any: running measure 2/2\n"
            "job j-1 baseline any: succeeded\n"
            "job j-2 opt1 gpu=h200: running\n"
            "job j-2 opt1 gpu=h200: failed: oom: CUDA out of memory\n"
            "medprof: job j-2 (opt1, gpu=h200) failed: oom: CUDA out of memory\n");
}

TEST_F(CliTest, SubmitWaitTableSucceeds) {
  FinishStudy(v1::JOB_SUCCEEDED);
  service_.streams.push_back({Story(v1::JOB_SUCCEEDED), false});
  EXPECT_EQ(Run({"--server", address_, "submit", "--presets", "baseline,opt1", "--wait"}), kExitOk);
  EXPECT_EQ(out_.str(),
            "study st-1: 2 jobs queued\n"
            "study st-1 done: 2 succeeded\n"
            "JOB  PRESET    TARGET    REPEAT  STATE      ATTEMPTS  RUN\n"
            "j-1  baseline  any            0  succeeded       1/3  r-1\n"
            "j-2  opt1      gpu=h200       0  succeeded       1/3  r-2\n");
  EXPECT_THAT(err_.str(), Not(HasSubstr("failed")));
}

TEST_F(CliTest, WatchCsvFinalState) {
  FinishStudy(v1::JOB_CANCELLED, "cancelled: wrong volume");
  service_.streams.push_back({Story(v1::JOB_CANCELLED, "cancelled: wrong volume"), false});
  // A cancelled job is not a failed one: exit 0.
  EXPECT_EQ(Run({"--server", address_, "watch", "st-1", "--format", "csv"}), kExitOk);
  EXPECT_EQ(out_.str(),
            "job_id,preset,target,repeat,state,attempts,max_attempts,run_id,error\n"
            "j-1,baseline,,0,succeeded,1,3,r-1,\n"
            "j-2,opt1,gpu=h200,0,cancelled,1,3,r-2,cancelled: wrong volume\n");
}

TEST_F(CliTest, WatchReconnectsAndSkipsReplayedEvents) {
  FinishStudy(v1::JOB_SUCCEEDED);
  auto story = Story(v1::JOB_SUCCEEDED);
  service_.streams.push_back({{story[0], story[1], story[2]}, /*breaks=*/true});
  service_.streams.push_back({story, false});  // the server replays from the start
  EXPECT_EQ(Run({"--server", address_, "watch", "st-1"}), kExitOk);
  EXPECT_EQ(service_.watch_calls, 2);
  const std::string err = err_.str();
  EXPECT_THAT(err, HasSubstr("medprof: server " + address_ +
                             " unreachable (UNAVAILABLE): server shutting down; reconnecting in 1ms (1/2)\n"));
  // Each change printed once, although events 1-3 arrived twice.
  auto count = [&](const std::string& s) {
    size_t n = 0;
    for (size_t p = err.find(s); p != std::string::npos; p = err.find(s, p + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("job j-1 baseline any: running\n"), 1u);
  EXPECT_EQ(count("job j-1 baseline any: running measure 2/2\n"), 1u);
  EXPECT_EQ(count("job j-1 baseline any: succeeded\n"), 1u);
  EXPECT_THAT(out_.str(), StartsWith("study st-1 done: 2 succeeded\n"));
}

TEST_F(CliTest, WatchGivesUpAfterRepeatedFailures) {
  service_.streams.push_back({{}, /*breaks=*/true});
  EXPECT_EQ(Run({"--server", address_, "watch", "st-1"}), kExitServer);
  EXPECT_EQ(service_.watch_calls, 3);  // first try + 2 reconnects
  EXPECT_THAT(err_.str(), HasSubstr("reconnecting in 2ms (2/2)\nmedprof: server " + address_ +
                                    " unreachable (UNAVAILABLE): server shutting down\n"));
  EXPECT_EQ(out_.str(), "");
}

TEST_F(CliTest, WatchUnknownStudyIsAServerError) {
  EXPECT_EQ(Run({"--server", address_, "watch", "st-404"}), kExitServer);
  EXPECT_EQ(err_.str(), "medprof: server " + address_ + ": GetStudy failed (NOT_FOUND): study st-404 not found\n");
}

// Issue 22 item 10: a field the server refuses (a target selector) exits 1 like every field
// error the CLI finds itself; other server refusals exit 2.
TEST_F(CliTest, ServerFieldRefusalExits1AndOtherRefusalsExit2) {
  service_.submit_status = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "targets: 'gpu=' has an empty value");
  EXPECT_EQ(Run({"--server", address_, "submit", "--presets", "baseline", "--target", "gpu="}), kExitUsage);
  EXPECT_EQ(err_.str(), "medprof: server " + address_ +
                            ": SubmitStudy failed (INVALID_ARGUMENT): targets: 'gpu=' has an empty value\n");
  EXPECT_EQ(out_.str(), "");
  service_.submit_status = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "limit submissions_per_token_per_minute");
  EXPECT_EQ(Run({"--server", address_, "submit", "--presets", "baseline"}), kExitServer);
}

TEST_F(CliTest, UnreachableServerExits2) {
  EXPECT_EQ(Run({"--server", "127.0.0.1:1", "--timeout-s", "5", "studies"}), kExitServer);
  EXPECT_THAT(err_.str(), StartsWith("medprof: server 127.0.0.1:1 unreachable (UNAVAILABLE): "));
}

TEST_F(CliTest, ServerComesFromTheEnvironmentAndTheFlagWins) {
  EXPECT_EQ(Run({"studies"}, {{"MEDPROF_SERVER", address_}}), kExitOk);
  EXPECT_EQ(out_.str(), "STUDY  NAME  STATE  JOBS  CREATED  PROJECT\n");
  EXPECT_EQ(Run({"--server", "127.0.0.1:1", "studies"}, {{"MEDPROF_SERVER", address_}}), kExitServer);
}

TEST_F(CliTest, TokenTravelsAsBearerMetadata) {
  const std::string env_token = "mpt_0123456789ab_cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";
  const std::string file_token = "mpt_ba9876543210_dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd";
  EXPECT_EQ(Run({"--server", address_, "agents"}, {{"MEDPROF_TOKEN", env_token}}), kExitOk);
  EXPECT_EQ(service_.last_authorization, "Bearer " + env_token);
  const std::string path = ::testing::TempDir() + "/medprof_token";
  std::ofstream(path) << file_token << "\n";
  ::chmod(path.c_str(), 0600);
  EXPECT_EQ(Run({"--server", address_, "agents"}, {{"MEDPROF_TOKEN_FILE", path}}), kExitOk);
  EXPECT_EQ(service_.last_authorization, "Bearer " + file_token);
  EXPECT_EQ(err_.str().find("readable by"), std::string::npos) << err_.str();
}

// Issue 22 cases 5 and 8 and the token-file part of 10: a malformed token is refused before any
// call (no abort), refusals never show the secret, a token file others may read is named.
TEST_F(CliTest, TokensAreCheckedAndNeverShown) {
  const std::string secret = "mpt_0123456789ab_cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc";
  EXPECT_EQ(Run({"--server", address_, "agents"}, {{"MEDPROF_TOKEN", "mpt_x\x01"}}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("MEDPROF_TOKEN: byte 6 is a control character (expected mpt_<12 hex>_<64 hex>)"));
  EXPECT_EQ(Run({"--server", address_, "agents"}, {{"MEDPROF_TOKEN", "mpt_\xc3\xa9"}}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("MEDPROF_TOKEN: byte 5 is not ASCII"));
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--server", address_, "--token", secret, "agents"},
        std::vector<std::string>{"--server", address_, "--token=" + secret, "agents"},
        std::vector<std::string>{"--server", address_, "agents", "--token", secret}}) {
    err_.str("");
    EXPECT_EQ(Run(args, {}), kExitUsage);
    EXPECT_THAT(err_.str(), HasSubstr("--token: tokens are not taken on the command line"));
    EXPECT_EQ(err_.str().find(secret), std::string::npos) << err_.str();
    EXPECT_EQ(err_.str().find("ccccc"), std::string::npos) << err_.str();
  }
  const std::string path = ::testing::TempDir() + "/medprof_token_shared";
  std::ofstream(path) << secret << "\n";
  ::chmod(path.c_str(), 0644);
  err_.str("");
  EXPECT_EQ(Run({"--server", address_, "agents"}, {{"MEDPROF_TOKEN_FILE", path}}), kExitOk);
  EXPECT_THAT(err_.str(), HasSubstr("warning: token file " + path + " is readable by every user (mode 644); run: chmod 600"));
  EXPECT_EQ(err_.str().find(secret), std::string::npos);
}

TEST_F(CliTest, ListingCommandsPrintTheServersAnswer) {
  v1::Study* s = service_.list_studies.add_studies();
  s->set_study_id("st-1");
  s->set_state(v1::STUDY_DONE);
  v1::Run* r = service_.list_runs.add_runs();
  r->set_run_id("r-1");
  r->set_study_id("st-1");
  r->set_state(v1::RUN_SUCCEEDED);
  service_.compare.set_study_id("st-1");
  service_.compare.set_baseline_preset("opt1");
  v1::CompareCell* c = service_.compare.add_cells();
  c->set_gpu("cpu");
  c->set_preset("baseline");
  c->set_phase(v1::PHASE_TRAIN);
  c->set_n(1);
  v1::Agent* a = service_.agents.add_agents();
  a->set_agent_id("ag-1");

  EXPECT_EQ(Run({"--server", address_, "studies", "--format", "csv"}), kExitOk);
  EXPECT_EQ(out_.str(), FormatStudies(service_.list_studies, OutputFormat::kCsv));
  EXPECT_EQ(Run({"--server", address_, "runs", "--study", "st-1", "--format", "json"}), kExitOk);
  EXPECT_EQ(out_.str(), FormatRuns(service_.list_runs, OutputFormat::kJson));
  EXPECT_EQ(Run({"--server", address_, "run", "r-1"}), kExitOk);
  EXPECT_THAT(out_.str(), StartsWith("run       r-1\n"));
  EXPECT_EQ(Run({"--server", address_, "run", "r-2"}), kExitServer);
  EXPECT_EQ(err_.str(), "medprof: server " + address_ + ": GetRun failed (NOT_FOUND): run r-2 not found\n");
  EXPECT_EQ(Run({"--server", address_, "agents", "--format", "json"}), kExitOk);
  EXPECT_EQ(nlohmann::json::parse(out_.str())["agents"][0]["agent_id"], "ag-1");

  EXPECT_EQ(Run({"--server", address_, "compare", "st-1", "--baseline", "opt1", "--phase", "train", "--format", "json"}),
            kExitOk);
  EXPECT_EQ(service_.last_compare.baseline_preset(), "opt1");
  EXPECT_EQ(service_.last_compare.phase(), v1::PHASE_TRAIN);
  auto j = nlohmann::json::parse(out_.str());
  EXPECT_EQ(j["study_id"], "st-1");
  EXPECT_EQ(j["baseline"], "opt1");
  EXPECT_EQ(j["cells"][0]["speedup_vs_baseline"], nullptr);

  EXPECT_EQ(Run({"--server", address_, "cancel", "st-1", "--reason", "wrong volume"}), kExitOk);
  EXPECT_EQ(out_.str(), "study st-1: 2 jobs cancelled\n");
  EXPECT_EQ(service_.last_cancel.reason(), "wrong volume");
}

TEST_F(CliTest, UsageErrorsExit1BeforeAnyCall) {
  EXPECT_EQ(Run({"--server", address_, "studies", "--format", "xml"}), kExitUsage);
  EXPECT_EQ(err_.str(),
            "medprof: --format: 'xml' is not a format of 'studies' (allowed: table|json|csv)\n"
            "Run 'medprof --help' (or 'medprof <command> --help') for usage.\n");
  EXPECT_EQ(Run({"--server", address_, "--tls-ca", "/nonexistent/ca.pem", "studies"}), kExitUsage);
  EXPECT_THAT(err_.str(), HasSubstr("medprof: --tls-ca /nonexistent/ca.pem: cannot open (No such file"));
  EXPECT_EQ(service_.last_authorization, "");
}

TEST_F(CliTest, VersionAndClassifyNeedNoServer) {
  EXPECT_EQ(Run({"--server", "127.0.0.1:1", "--version"}), kExitOk);
  EXPECT_EQ(out_.str(), std::string("medprof ") + kVersionLine + "\n");

  // Unreachable server: classify never dials it. Every input line gives one output line.
  EXPECT_EQ(Run({"--server", "127.0.0.1:1", "kernels", "classify"}, {},
                "void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true>(...)\n"
                "\n"
                "void at::native::(anonymous namespace)::RowwiseMomentsCUDAKernel<float>\tnative_group_norm\r\n"
                "sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc\n"),
            kExitOk);
  EXPECT_EQ(out_.str(),
            "layout\tvoid cudnn::ops::nchwToNhwcKernel<float, float, float, false, true>(...)\n"
            "other\t\n"
            "norm\tvoid at::native::(anonymous namespace)::RowwiseMomentsCUDAKernel<float>\tnative_group_norm\n"
            "conv\tsm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc\n");
  EXPECT_EQ(Run({"kernels", "classify", "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>"}),
            kExitOk);
  EXPECT_EQ(out_.str(), "elementwise\tvoid at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>\n");
}

}  // namespace
}  // namespace medprof::client
