// Submitting, validating, listing, cancelling and watching studies.
#include <future>
#include <thread>

#include "tests/unit/server/domain_fixture.h"

namespace medprof::server::testing {
namespace {

using ::medprof::testing::IsOk;
using ::medprof::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

using StudyTest = DomainTest;

TEST_F(StudyTest, SubmitMakesPresetsTimesTargetsTimesRepeatsJobs) {
  Register("node-a", {Gpu(0)});
  const SubmitStudyResult s = Submit({"baseline", "opt1"}, {"gpu=h200", "gpu=a100"}, 2, 4);
  ASSERT_EQ(s.jobs.size(), 8u);
  EXPECT_EQ(Count("jobs"), 8);
  EXPECT_EQ(Count("studies"), 1);
  EXPECT_EQ(Count("events"), 8);
  std::vector<std::string> order;
  for (const JobView& j : s.jobs) {
    order.push_back(absl::StrCat(j.record.repeat, ":", j.record.target, ":", j.record.preset));
    EXPECT_EQ(j.record.max_attempts, 4);
    EXPECT_EQ(j.config.volume(), 16);
    EXPECT_EQ(j.config.grad_accum(), 2);  // defaults applied
    EXPECT_EQ(j.config.preset(), j.record.preset);
  }
  EXPECT_THAT(order, ElementsAre("1:gpu=h200:baseline", "1:gpu=h200:opt1", "1:gpu=a100:baseline",
                                 "1:gpu=a100:opt1", "2:gpu=h200:baseline", "2:gpu=h200:opt1",
                                 "2:gpu=a100:baseline", "2:gpu=a100:opt1"));
  EXPECT_THAT(s.warnings,
              ElementsAre("targets[1] ('gpu=a100'): no registered agent matches yet; its jobs wait in the queue "
                          "until one does"));
  auto study = domain_->studies().GetStudy(ctx_, s.study_id);
  ASSERT_THAT(study, IsOk());
  EXPECT_EQ(study->state, StudyState::kActive);
  EXPECT_EQ(study->counts.total, 8);
  EXPECT_EQ(study->counts.queued, 8);
  EXPECT_EQ(study->jobs.size(), 8u);
  EXPECT_EQ(study->record.name, "test study");
  EXPECT_EQ(study->record.project, "default");
}

struct BadSubmission {
  const char* what;
  std::function<void(SubmitStudyRequest&)> change;
  const char* message;  // exact, or a substring when `exact` is false
  bool exact;
};

class SubmitValidationTest : public DomainTest, public ::testing::WithParamInterface<BadSubmission> {};

TEST_P(SubmitValidationTest, IsRefusedAndLeavesNothingBehind) {
  SubmitStudyRequest r;
  r.presets = {"baseline", "opt1"};
  r.config = TinyConfig();
  GetParam().change(r);
  auto out = domain_->studies().SubmitStudy(ctx_, r);
  if (GetParam().exact) {
    EXPECT_THAT(out, StatusIs(absl::StatusCode::kInvalidArgument, GetParam().message));
  } else {
    EXPECT_THAT(out, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(GetParam().message)));
  }
  EXPECT_EQ(Count("studies"), 0);
  EXPECT_EQ(Count("jobs"), 0);
  EXPECT_EQ(Count("events"), 0);
}

INSTANTIATE_TEST_SUITE_P(
    Submissions, SubmitValidationTest,
    ::testing::Values(
        BadSubmission{"volume0", [](SubmitStudyRequest& r) { r.config.set_volume(0); },
                      "config.volume: 0 is out of range (allowed 8..512", false},
        BadSubmission{"volume4096", [](SubmitStudyRequest& r) { r.config.set_volume(4096); },
                      "config.volume: 4096 is out of range (allowed 8..512", false},
        BadSubmission{"unknown_preset", [](SubmitStudyRequest& r) { r.presets = {"baseline", "fp8"}; },
                      "presets[1]: unknown preset 'fp8' (allowed: baseline|opt1|opt2|opt12|bf16|opt3)", true},
        BadSubmission{"no_presets", [](SubmitStudyRequest& r) { r.presets = {}; },
                      "presets: 0 presets (allowed 1..16 of baseline|opt1|opt2|opt12|bf16|opt3)", true},
        BadSubmission{"twice", [](SubmitStudyRequest& r) { r.presets = {"opt1", "opt1"}; },
                      "presets[1]: 'opt1' is listed twice", true},
        BadSubmission{"steps", [](SubmitStudyRequest& r) { r.config.set_steps(-1); },
                      "config.steps: -1 is out of range (allowed 1..100000)", false},
        BadSubmission{"selector", [](SubmitStudyRequest& r) { r.targets = {"gpu="}; },
                      "targets[0]: cannot parse 'gpu=' (expected key=value pairs separated by commas; keys gpu, "
                      "arch, site, partition, host, agent, device, label.<name>)",
                      true},
        BadSubmission{"selector_vs_config",
                      [](SubmitStudyRequest& r) {
                        r.targets = {"", "device=cuda"};
                        r.config.set_device(v1::DEVICE_KIND_CPU);
                      },
                      "targets[1]: device=cuda contradicts config.device cpu", false},
        BadSubmission{"repeats_high", [](SubmitStudyRequest& r) { r.repeats = 101; },
                      "repeats: 101 is out of range (allowed 1..100; unset = 1)", true},
        BadSubmission{"repeats_negative", [](SubmitStudyRequest& r) { r.repeats = -1; },
                      "repeats: -1 is out of range (allowed 1..100; unset = 1)", true},
        BadSubmission{"max_attempts", [](SubmitStudyRequest& r) { r.max_attempts = 11; },
                      "max_attempts: 11 is out of range (allowed 1..10", false},
        BadSubmission{"timeout", [](SubmitStudyRequest& r) { r.timeout_s = -5; },
                      "timeout_s: -5 is out of range", false},
        BadSubmission{"name", [](SubmitStudyRequest& r) { r.name = std::string(201, 'x'); },
                      "name: 201 characters (allowed at most 200)", true},
        BadSubmission{"too_many_jobs",
                      [](SubmitStudyRequest& r) {
                        r.presets = {"baseline", "opt1", "opt2", "opt12", "bf16", "opt3"};
                        r.targets = {"gpu=h100", "gpu=a100"};
                        r.repeats = 100;
                      },
                      "presets x targets x repeats: 6 x 2 x 100 = 1200 jobs (allowed at most 1000 per study; "
                      "split it into several studies)",
                      true}),
    [](const ::testing::TestParamInfo<BadSubmission>& info) { return std::string(info.param.what); });

TEST_F(StudyTest, ListStudiesPagesNewestFirst) {
  const std::string a = Submit({"baseline"}).study_id;
  const std::string b = Submit({"baseline"}).study_id;
  const std::string c = Submit({"baseline"}).study_id;
  ListStudiesRequest r;
  r.limit = 2;
  auto page = domain_->studies().ListStudies(ctx_, r);
  ASSERT_THAT(page, IsOk());
  ASSERT_EQ(page->studies.size(), 2u);
  EXPECT_EQ(page->studies[0].record.study_id, c);
  EXPECT_EQ(page->studies[1].record.study_id, b);
  EXPECT_EQ(page->studies[0].counts.total, 1);
  ASSERT_FALSE(page->next_page_token.empty());
  r.page_token = page->next_page_token;
  page = domain_->studies().ListStudies(ctx_, r);
  ASSERT_THAT(page, IsOk());
  ASSERT_EQ(page->studies.size(), 1u);
  EXPECT_EQ(page->studies[0].record.study_id, a);
  EXPECT_TRUE(page->next_page_token.empty());
  r.page_token = "abc";
  EXPECT_THAT(domain_->studies().ListStudies(ctx_, r),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("page_token: 'abc'")));
  r.page_token = "";
  r.limit = 1001;
  EXPECT_THAT(domain_->studies().ListStudies(ctx_, r),
              StatusIs(absl::StatusCode::kInvalidArgument, "limit: 1001 is out of range (allowed 1..1000; unset = 50)"));
}

TEST_F(StudyTest, GetStudyOfUnknownIdIsNotFound) {
  EXPECT_THAT(domain_->studies().GetStudy(ctx_, "st-nope"),
              StatusIs(absl::StatusCode::kNotFound, "study_id: no study 'st-nope'"));
  EXPECT_THAT(domain_->studies().GetStudy(ctx_, ""), StatusIs(absl::StatusCode::kInvalidArgument, "study_id: required"));
}

TEST_F(StudyTest, CancelStopsQueuedAndRunningJobs) {
  const std::string agent = Register("node-a", {Gpu(0)});
  const SubmitStudyResult s = Submit({"baseline", "opt1", "opt2"});
  std::optional<Assignment> a = Acquire(agent);
  ASSERT_TRUE(a.has_value());
  ASSERT_THAT(Finish(agent, a->run_id, RunState::kSucceeded, 0), IsOk());
  std::optional<Assignment> b = Acquire(agent);
  ASSERT_TRUE(b.has_value());

  auto cancelled = domain_->studies().CancelStudy(ctx_, s.study_id, "wrong volume");
  ASSERT_THAT(cancelled, IsOk());
  EXPECT_EQ(*cancelled, 2);  // opt1 running, opt2 queued; baseline had succeeded
  EXPECT_EQ(GetJob(s.jobs[0].record.job_id).state, JobState::kSucceeded);
  EXPECT_EQ(GetJob(s.jobs[1].record.job_id).state, JobState::kCancelled);
  EXPECT_EQ(GetJob(s.jobs[2].record.job_id).error, "cancelled: wrong volume");
  EXPECT_FALSE(Acquire(agent).has_value());

  HeartbeatRequest hb;
  hb.agent_id = agent;
  hb.running_run_ids = {b->run_id};
  auto result = domain_->scheduler().Heartbeat(ctx_, hb);
  ASSERT_THAT(result, IsOk());
  EXPECT_THAT(result->cancel_run_ids, ElementsAre(b->run_id));
  EXPECT_THAT(result->unknown_run_ids, IsEmpty());
  auto state = Finish(agent, b->run_id, RunState::kCancelled, 0);
  ASSERT_THAT(state, IsOk());
  EXPECT_EQ(*state, JobState::kCancelled);
  EXPECT_EQ(GetRun(b->run_id).state, RunState::kCancelled);

  auto study = domain_->studies().GetStudy(ctx_, s.study_id);
  ASSERT_THAT(study, IsOk());
  EXPECT_EQ(study->state, StudyState::kCancelled);
  EXPECT_EQ(study->counts.done(), 3);
  // The study's last job ended with the cancel: its final event is there, exactly once.
  int finished = 0;
  for (const EventRecord& e : Events(s.study_id)) finished += e.study_finished ? 1 : 0;
  EXPECT_EQ(finished, 1);
  // Cancelling again cancels nothing more.
  cancelled = domain_->studies().CancelStudy(ctx_, s.study_id, "");
  ASSERT_THAT(cancelled, IsOk());
  EXPECT_EQ(*cancelled, 0);
}

TEST_F(StudyTest, WatchSendsHistoryThenLiveEventsAndEnds) {
  const std::string agent = Register("node-a", {Gpu(0)});
  const SubmitStudyResult s = Submit({"baseline", "opt1"});
  std::optional<Assignment> a = Acquire(agent);
  ASSERT_TRUE(a.has_value());

  std::promise<void> seen_history;
  std::vector<StudyEvent> got;
  auto watcher = std::async(std::launch::async, [&] {
    bool signalled = false;
    return domain_->studies().WatchStudy(ctx_, s.study_id, [&](const StudyEvent& e) {
      got.push_back(e);
      if (got.size() == 3 && !signalled) {  // queued, queued, running
        signalled = true;
        seen_history.set_value();
      }
      return true;
    });
  });
  ASSERT_EQ(seen_history.get_future().wait_for(std::chrono::seconds(5)), std::future_status::ready);
  ASSERT_THAT(Finish(agent, a->run_id, RunState::kSucceeded, 0), IsOk());
  std::optional<Assignment> b = Acquire(agent);
  ASSERT_TRUE(b.has_value());
  ASSERT_THAT(Finish(agent, b->run_id, RunState::kFailed, 0, "invalid_config: boom"), IsOk());
  ASSERT_EQ(watcher.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_THAT(watcher.get(), IsOk());

  std::vector<std::string> lines;
  for (size_t i = 0; i < got.size(); ++i) {
    if (i > 0) {
      EXPECT_GT(got[i].record.event_id, got[i - 1].record.event_id);
    }
    lines.push_back(absl::StrCat(JobStateName(got[i].record.job_state), got[i].record.study_finished ? "!" : ""));
  }
  EXPECT_THAT(lines, ElementsAre("queued", "queued", "running", "succeeded", "running", "failed", "unspecified!"));
  EXPECT_EQ(got[0].record.message, "preset baseline, target any, repeat 1");
  EXPECT_EQ(got[2].record.message, "attempt 1 of 3 on agent node-a (device 0: NVIDIA H200)");
  EXPECT_EQ(got[3].record.message, "on attempt 1 of 3");
  EXPECT_EQ(got[5].record.message, "invalid_config: boom (attempt 1 of 3)");
  EXPECT_EQ(got.back().record.message, "study finished: 1 succeeded, 1 failed, 0 cancelled");
}

TEST_F(StudyTest, WatchOfAFinishedStudyReplaysAndEnds) {
  const std::string agent = Register("node-a", {Gpu(0)});
  const SubmitStudyResult s = Submit({"baseline"});
  std::optional<Assignment> a = Acquire(agent);
  ASSERT_TRUE(a.has_value());
  ASSERT_THAT(Finish(agent, a->run_id, RunState::kSucceeded, 0), IsOk());
  int n = 0;
  EXPECT_THAT(domain_->studies().WatchStudy(ctx_, s.study_id, [&](const StudyEvent&) { return ++n > 0; }), IsOk());
  EXPECT_EQ(n, 4);
  EXPECT_THAT(domain_->studies().WatchStudy(ctx_, "st-nope", [](const StudyEvent&) { return true; }),
              StatusIs(absl::StatusCode::kNotFound, "study_id: no study 'st-nope'"));
}

TEST_F(StudyTest, WatchEndsWhenTheWatcherLeavesOrTheServerStops) {
  const SubmitStudyResult s = Submit({"baseline"});
  EXPECT_THAT(domain_->studies().WatchStudy(ctx_, s.study_id, [](const StudyEvent&) { return false; }),
              StatusIs(absl::StatusCode::kCancelled, HasSubstr("went away")));
  auto watcher = std::async(std::launch::async, [&] {
    return domain_->studies().WatchStudy(ctx_, s.study_id, [](const StudyEvent&) { return true; });
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  domain_->Shutdown();
  ASSERT_EQ(watcher.wait_for(std::chrono::seconds(3)), std::future_status::ready);
  EXPECT_THAT(watcher.get(), StatusIs(absl::StatusCode::kUnavailable, HasSubstr("shutting down")));
}

TEST_F(StudyTest, ListRunsFiltersAndGetRunHasRows) {
  const std::string agent = Register("node-a", {Gpu(0)});
  const SubmitStudyResult s = Submit({"baseline", "opt1"});
  const SubmitStudyResult other = Submit({"opt2"});
  std::optional<Assignment> a = Acquire(agent);
  ASSERT_THAT(Upload(agent, a->run_id, {{1, Started("NVIDIA H200", "cupti")}, {2, Step(0, 5)}}), IsOk());
  ASSERT_THAT(Finish(agent, a->run_id, RunState::kSucceeded, 2), IsOk());
  std::optional<Assignment> b = Acquire(agent);
  ASSERT_THAT(Finish(agent, b->run_id, RunState::kSucceeded, 0), IsOk());
  std::optional<Assignment> c = Acquire(agent);
  ASSERT_EQ(c->study_id, other.study_id);

  ListRunsRequest r;
  r.study_id = s.study_id;
  auto runs = domain_->studies().ListRuns(ctx_, r);
  ASSERT_THAT(runs, IsOk());
  ASSERT_EQ(runs->size(), 2u);
  EXPECT_EQ((*runs)[0].record.run_id, b->run_id);  // newest first
  EXPECT_EQ((*runs)[0].preset, "opt1");
  EXPECT_EQ((*runs)[0].effective.preset(), "opt1");  // the job's config until the worker reports
  EXPECT_EQ((*runs)[1].record.gpu_name, "NVIDIA H200");
  EXPECT_TRUE((*runs)[1].steps.empty());  // rows only with GetRun
  r = ListRunsRequest();
  r.job_id = c->job_id;
  runs = domain_->studies().ListRuns(ctx_, r);
  ASSERT_THAT(runs, IsOk());
  ASSERT_EQ(runs->size(), 1u);
  EXPECT_EQ((*runs)[0].record.state, RunState::kRunning);
  r = ListRunsRequest();
  r.limit = 10001;
  EXPECT_THAT(domain_->studies().ListRuns(ctx_, r),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("limit: 10001 is out of range")));

  auto run = domain_->studies().GetRun(ctx_, a->run_id);
  ASSERT_THAT(run, IsOk());
  EXPECT_EQ(run->steps.size(), 1u);
  EXPECT_EQ(run->record.attempt, 1);
  EXPECT_THAT(domain_->studies().GetRun(ctx_, "run-nope"),
              StatusIs(absl::StatusCode::kNotFound, "run_id: no run 'run-nope'"));
}

}  // namespace
}  // namespace medprof::server::testing
