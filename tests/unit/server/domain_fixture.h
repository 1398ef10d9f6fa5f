// Test fixture for the server's domain layer: the real SqliteStore on ":memory:", a FakeClock,
// and helpers that drive agents through register -> acquire -> upload -> finish.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/domain/domain.h"
#include "server/store/sqlite_store.h"
#include "tests/testing/status_matchers.h"

namespace medprof::server::testing {

inline DeviceRecord Gpu(int index, const std::string& name = "NVIDIA H200", const std::string& cc = "9.0") {
  DeviceRecord d;
  d.index = index;
  d.kind = "cuda";
  d.name = name;
  d.compute_capability = cc;
  d.memory_bytes = 150ULL << 30;
  return d;
}

inline DeviceRecord Cpu() {
  DeviceRecord d;
  d.index = -1;
  d.kind = "cpu";
  d.name = "cpu";
  return d;
}

// A tiny Med-DDPM configuration that passes validation.
inline v1::WorkloadConfig TinyConfig() {
  v1::WorkloadConfig c;
  c.set_volume(16);
  c.set_base_channels(8);
  c.add_channel_mult(1);
  c.add_channel_mult(2);
  c.set_steps(3);
  c.set_warmup(1);
  return c;
}

class DomainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SqliteStoreOptions so;
    so.path = ":memory:";
    auto store = SqliteStore::Open(so);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(store).value();
    auto domain = Domain::Create(store_.get(), &clock_, options_);
    ASSERT_TRUE(domain.ok()) << domain.status();
    domain_ = std::move(domain).value();
  }

  std::string Register(const std::string& name, std::vector<DeviceRecord> devices,
                       std::map<std::string, std::string> labels = {}, int max_concurrent = 0) {
    RegisterAgentRequest r;
    r.protocol_version = 1;
    r.agent_name = name;
    r.host = name + ".example.org";
    r.version = "0.1.0";
    r.devices = std::move(devices);
    r.labels = std::move(labels);
    r.max_concurrent_jobs = max_concurrent;
    auto out = domain_->agents().Register(ctx_, r);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? out->agent_id : std::string();
  }

  SubmitStudyResult Submit(std::vector<std::string> presets, std::vector<std::string> targets = {}, int repeats = 1,
                           int max_attempts = 0) {
    SubmitStudyRequest r;
    r.name = "test study";
    r.presets = std::move(presets);
    r.config = TinyConfig();
    r.targets = std::move(targets);
    r.repeats = repeats;
    r.max_attempts = max_attempts;
    auto out = domain_->studies().SubmitStudy(ctx_, r);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? *std::move(out) : SubmitStudyResult{};
  }

  std::optional<Assignment> Acquire(const std::string& agent_id, int wait_ms = 0) {
    AcquireJobRequest r;
    r.agent_id = agent_id;
    r.wait_ms = wait_ms;
    auto out = domain_->scheduler().AcquireJob(ctx_, r);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? *out : std::nullopt;
  }

  absl::StatusOr<CommittedThrough> Upload(const std::string& agent_id, const std::string& run_id,
                                          std::vector<std::pair<uint64_t, v1::WorkerMessage>> messages) {
    std::vector<ResultChunk> chunks;
    for (auto& [seq, m] : messages) chunks.push_back(ResultChunk{run_id, agent_id, seq, std::move(m)});
    return domain_->ingestor().Ingest(ctx_, chunks);
  }

  absl::StatusOr<JobState> Finish(const std::string& agent_id, const std::string& run_id, RunState state,
                                  uint64_t last_seq, const std::string& error = "",
                                  const std::string& stderr_tail = "") {
    FinishRunRequest r;
    r.agent_id = agent_id;
    r.run_id = run_id;
    r.state = state;
    r.last_seq = last_seq;
    r.error = error;
    r.stderr_tail = stderr_tail;
    return domain_->scheduler().FinishRun(ctx_, r);
  }

  JobRecord GetJob(const std::string& job_id) {
    JobRecord out;
    EXPECT_TRUE(store_->Read([&](StoreTx& tx) -> absl::Status {
      MEDPROF_ASSIGN_OR_RETURN(auto job, tx.GetJob(job_id));
      if (!job.has_value()) return absl::NotFoundError(job_id);
      out = *job;
      return absl::OkStatus();
    }).ok());
    return out;
  }

  RunRecord GetRun(const std::string& run_id) {
    RunRecord out;
    EXPECT_TRUE(store_->Read([&](StoreTx& tx) -> absl::Status {
      MEDPROF_ASSIGN_OR_RETURN(auto run, tx.GetRun(run_id));
      if (!run.has_value()) return absl::NotFoundError(run_id);
      out = *run;
      return absl::OkStatus();
    }).ok());
    return out;
  }

  int64_t Count(std::string_view table) {
    int64_t n = -1;
    EXPECT_TRUE(store_->Read([&](StoreTx& tx) -> absl::Status {
      MEDPROF_ASSIGN_OR_RETURN(n, tx.CountRows(table));
      return absl::OkStatus();
    }).ok());
    return n;
  }

  std::vector<EventRecord> Events(const std::string& study_id) {
    std::vector<EventRecord> out;
    EXPECT_TRUE(store_->Read([&](StoreTx& tx) -> absl::Status {
      MEDPROF_ASSIGN_OR_RETURN(out, tx.ListEvents(study_id, 0, 100000));
      return absl::OkStatus();
    }).ok());
    return out;
  }

  static v1::WorkerMessage Step(int step, int64_t wall_ns, v1::Phase phase = v1::PHASE_TRAIN) {
    v1::WorkerMessage m;
    m.mutable_step()->set_phase(phase);
    m.mutable_step()->set_step(step);
    m.mutable_step()->set_wall_ns(wall_ns);
    return m;
  }

  static v1::WorkerMessage Started(const std::string& gpu_name, const std::string& backend) {
    v1::WorkerMessage m;
    m.mutable_started()->mutable_environment()->set_gpu_name(gpu_name);
    m.mutable_started()->set_backend(backend);
    m.mutable_started()->set_parameters(40226433);
    m.mutable_started()->mutable_effective()->set_preset("opt1");
    return m;
  }

  DomainOptions options_;
  FakeClock clock_;
  CallContext ctx_ = CallContext::Background();
  std::unique_ptr<SqliteStore> store_;
  std::unique_ptr<Domain> domain_;
};

}  // namespace medprof::server::testing
