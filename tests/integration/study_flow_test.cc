// End to end on real parts: CLI -> server -> SQLite -> agent -> worker -> workload -> back.
#include <grpcpp/grpcpp.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/result_stream.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "medprof/v1/service.grpc.pb.h"
#include "tests/integration/harness.h"

namespace medprof::itest {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using json = nlohmann::json;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

std::unique_ptr<v1::MedprofService::Stub> ClientStub(const std::string& address) {
  return v1::MedprofService::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
}

std::vector<std::string> SubmitArgs(const std::vector<std::string>& presets_and_more) {
  std::vector<std::string> args = {"submit"};
  args.insert(args.end(), presets_and_more.begin(), presets_and_more.end());
  for (const auto& f : TinyModelFlags()) args.push_back(f);
  return args;
}

TEST(StudyFlowTest, SubmitRunStoreCompareOnRealParts) {
  const std::string dir = MakeTempDir("flow");
  auto server = ServerFixture::Start(dir + "/medprof.db");
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string tap = WriteTapWorker(dir);
  auto agent = StartAgent((*server)->address(), dir + "/agent", "agent-a", {"--worker", tap});
  ASSERT_TRUE(agent.ok()) << agent.status();

  // Submit without --wait and watch the study live over gRPC while it runs.
  CommandResult submit = Cli((*server)->address(),
                             SubmitArgs({"--presets", "baseline,opt1", "--steps", "3", "--warmup", "1",
                                         "--grad-accum", "1", "--format", "json"}));
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  const std::string study_id = json::parse(submit.out).at("study_id").get<std::string>();
  ASSERT_FALSE(study_id.empty());

  auto stub = ClientStub((*server)->address());
  grpc::ClientContext watch_ctx;
  watch_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(5));
  v1::WatchStudyRequest wreq;
  wreq.set_study_id(study_id);
  auto reader = stub->WatchStudy(&watch_ctx, wreq);
  std::vector<v1::StudyEvent> events;
  v1::StudyEvent ev;
  while (reader->Read(&ev)) {
    events.push_back(ev);
    if (ev.study_finished()) break;
  }
  ASSERT_TRUE(reader->Finish().ok());
  ASSERT_FALSE(events.empty());
  EXPECT_TRUE(events.back().study_finished());

  // Events arrive in event_id order; each job's progress never goes backwards.
  std::map<std::string, std::pair<int, int>> last_progress;  // job -> (stage rank, step)
  const std::map<std::string, int> stage_rank = {{"setup", 0}, {"warmup", 1}, {"measure", 2}, {"metrics", 3},
                                                 {"done", 4}};
  int progress_events = 0;
  for (size_t i = 0; i < events.size(); ++i) {
    if (i > 0) EXPECT_GT(events[i].event_id(), events[i - 1].event_id());
    if (!events[i].has_progress()) continue;
    ++progress_events;
    const auto& p = events[i].progress();
    ASSERT_TRUE(stage_rank.count(p.stage())) << p.stage();
    std::pair<int, int> now = {stage_rank.at(p.stage()), p.step()};
    auto it = last_progress.find(events[i].job_id());
    if (it != last_progress.end()) EXPECT_GE(now, it->second) << "job " << events[i].job_id();
    last_progress[events[i].job_id()] = now;
  }
  EXPECT_EQ(last_progress.size(), 2u) << "progress from both jobs";
  EXPECT_GE(progress_events, 2 * 3);

  // Stored steps are exactly the ones each worker emitted.
  auto db = DbProbe::Open((*server)->db_path());
  ASSERT_TRUE(db.ok());
  auto runs = (*db)->Rows(absl::StrCat("SELECT r.run_id, j.preset, r.state FROM runs r JOIN jobs j ON r.job_id = j.job_id "
                                       "WHERE r.study_id = '", study_id, "' ORDER BY j.preset"));
  ASSERT_TRUE(runs.ok()) << runs.status();
  ASSERT_EQ(runs->size(), 2u);
  std::map<std::string, std::vector<double>> stored_ms_by_preset;
  for (const auto& row : *runs) {
    const std::string& run_id = row[0];
    EXPECT_EQ(row[2], "succeeded");
    std::vector<int64_t> emitted;
    int ops_records = 0;
    for (const auto& m : ReadTap(dir + "/tap/" + run_id + ".pb")) {
      if (m.has_step()) emitted.push_back(m.step().wall_ns());
      if (m.has_ops()) ops_records += m.ops().ops_size();
    }
    ASSERT_EQ(emitted.size(), 3u) << "worker emitted 3 measured steps for " << run_id;
    auto stored = (*db)->Rows(absl::StrCat("SELECT wall_ns FROM run_steps WHERE run_id = '", run_id, "' ORDER BY step"));
    ASSERT_TRUE(stored.ok());
    ASSERT_EQ(stored->size(), emitted.size());
    for (size_t i = 0; i < emitted.size(); ++i) {
      EXPECT_EQ(std::stoll((*stored)[i][0]), emitted[i]) << "step " << i;
      EXPECT_GT(emitted[i], 0);
      stored_ms_by_preset[row[1]].push_back(emitted[i] / 1e6);
    }
    EXPECT_GT(ops_records, 0);
    EXPECT_EQ((*db)->Int(absl::StrCat("SELECT COUNT(*) FROM run_ops WHERE run_id = '", run_id, "'")).value_or(-1),
              ops_records);
  }

  // compare: one cell per preset; the median is the median of the stored steps; speedup recomputed.
  CommandResult cmp = Cli((*server)->address(), {"compare", study_id, "--format", "json"});
  ASSERT_EQ(cmp.exit_code, 0) << cmp.err;
  json cj = json::parse(cmp.out);
  ASSERT_EQ(cj.at("cells").size(), 2u) << cmp.out;
  std::map<std::string, json> cells;
  for (const auto& c : cj.at("cells")) cells[c.at("preset").get<std::string>()] = c;
  ASSERT_EQ(cells.count("baseline"), 1u);
  ASSERT_EQ(cells.count("opt1"), 1u);
  for (const auto& [preset, c] : cells) {
    EXPECT_EQ(c.at("gpu").get<std::string>(), "cpu");
    EXPECT_EQ(c.at("n").get<int>(), 1);
    EXPECT_NEAR(c.at("step_ms_median").get<double>(), Median(stored_ms_by_preset[preset]), 1e-9);
    EXPECT_FALSE(c.at("categories").empty());
  }
  const double expected_speedup = Median(stored_ms_by_preset["baseline"]) / Median(stored_ms_by_preset["opt1"]);
  EXPECT_NEAR(cells["opt1"].at("speedup_vs_baseline").get<double>(), expected_speedup, 1e-9);
  EXPECT_NEAR(cells["baseline"].at("speedup_vs_baseline").get<double>(), 1.0, 1e-12);

  // The table form names both presets too.
  CommandResult table = Cli((*server)->address(), {"compare", study_id});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("baseline"));
  EXPECT_THAT(table.out, HasSubstr("opt1"));
}

TEST(StudyFlowTest, MalformedSubmissionsAreRefusedAndChangeNothing) {
  const std::string dir = MakeTempDir("bad");
  auto server = ServerFixture::Start(dir + "/medprof.db");
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = ClientStub((*server)->address());

  auto counts = [&] {
    auto db = DbProbe::Open((*server)->db_path());
    EXPECT_TRUE(db.ok());
    return std::vector<int64_t>{(*db)->Int("SELECT COUNT(*) FROM studies").value_or(-1),
                                (*db)->Int("SELECT COUNT(*) FROM jobs").value_or(-1),
                                (*db)->Int("SELECT COUNT(*) FROM events").value_or(-1)};
  };
  const auto before = counts();

  struct Case {
    std::string what;
    std::function<void(v1::SubmitStudyRequest*)> mutate;
    std::vector<std::string> expect_in_message;
  };
  const std::vector<Case> cases = {
      {"volume 0", [](auto* r) { r->mutable_config()->set_volume(0); }, {"volume", "8..512"}},
      {"volume 4096", [](auto* r) { r->mutable_config()->set_volume(4096); }, {"volume", "4096", "8..512"}},
      {"unknown preset", [](auto* r) { r->set_presets(0, "opt7"); }, {"preset", "opt7", "baseline"}},
      {"steps -1", [](auto* r) { r->mutable_config()->set_steps(-1); }, {"steps", "-1", "1..100000"}},
      {"bad selector", [](auto* r) { r->add_targets("gpu="); }, {"targets[0]", "gpu="}},
  };
  for (const auto& c : cases) {
    v1::SubmitStudyRequest req;
    req.add_presets("baseline");
    req.mutable_config()->set_volume(16);
    req.mutable_config()->set_base_channels(8);
    req.mutable_config()->add_channel_mult(1);
    req.mutable_config()->add_channel_mult(2);
    c.mutate(&req);
    grpc::ClientContext ctx;
    v1::SubmitStudyResponse resp;
    grpc::Status s = stub->SubmitStudy(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.what << ": " << s.error_message();
    for (const auto& needle : c.expect_in_message) {
      EXPECT_THAT(s.error_message(), HasSubstr(needle)) << c.what;
    }
  }
  EXPECT_EQ(counts(), before);

  // The CLI refuses it too (it checks with the same rules before sending), naming the field.
  CommandResult cli = Cli((*server)->address(), {"submit", "--presets", "baseline", "--volume", "4096"});
  EXPECT_NE(cli.exit_code, 0);
  EXPECT_THAT(cli.err, HasSubstr("volume"));
  EXPECT_EQ(counts(), before);
}

}  // namespace
}  // namespace medprof::itest
