#include "client/progress.h"

#include <sstream>
#include <string>
#include <vector>

#include "client/text_table.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace medprof::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

google::protobuf::RepeatedPtrField<v1::Job> TwoJobs() {
  google::protobuf::RepeatedPtrField<v1::Job> jobs;
  v1::Job* a = jobs.Add();
  a->set_job_id("j-1");
  a->set_preset("baseline");
  a->set_state(v1::JOB_QUEUED);
  v1::Job* b = jobs.Add();
  b->set_job_id("j-2");
  b->set_preset("opt1");
  b->set_target("gpu=h200");
  b->set_state(v1::JOB_QUEUED);
  return jobs;
}

// Events carry unix_ms = 1000 * id + 500 * id * id: the gaps grow (1.5 s, 2.5 s, 3.5 s, ...).
int64_t At(int64_t id) { return 1000 * id + 500 * id * id; }

v1::StudyEvent State(int64_t id, const char* job, v1::JobState state, const char* run = "", const char* msg = "") {
  v1::StudyEvent e;
  e.set_event_id(id);
  e.set_unix_ms(At(id));
  e.set_study_id("st-1");
  e.set_job_id(job);
  e.set_run_id(run);
  e.set_job_state(state);
  e.set_message(msg);
  return e;
}

v1::StudyEvent Prog(int64_t id, const char* job, const char* run, const char* stage, int step, int total) {
  v1::StudyEvent e = State(id, job, v1::JOB_RUNNING, run);
  e.mutable_progress()->set_stage(stage);
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

// The story every test replays: j-1 runs to success; j-2 is requeued once, then fails.
std::vector<v1::StudyEvent> Story() {
  return {
      State(1, "j-1", v1::JOB_RUNNING, "r-1", "attempt 1 of 3 on agent node-a (device 0: cpu)"),
      Prog(2, "j-1", "r-1", "warmup", 1, 2),
      Prog(3, "j-1", "r-1", "measure", 1, 10),
      Prog(4, "j-1", "r-1", "measure", 2, 10),
      Prog(5, "j-1", "r-1", "measure", 2, 10),  // nothing new to print
      State(6, "j-2", v1::JOB_RUNNING, "r-2", "attempt 1 of 3 on agent node-b (device 0: NVIDIA H200)"),
      State(7, "j-2", v1::JOB_QUEUED, "r-2", "requeued: lease expired"),
      State(8, "j-1", v1::JOB_SUCCEEDED, "r-1"),
      Prog(9, "j-2", "r-3", "measure", 5, 10),
      State(10, "j-2", v1::JOB_FAILED, "r-3", "oom: CUDA out of memory"),
      Finished(11),
  };
}

TEST(ProgressTracker, KeepsJobOrderAndPerJobState) {
  ProgressTracker t;
  t.AddJobs(TwoJobs());
  for (const auto& e : Story()) EXPECT_TRUE(t.Apply(e)) << e.event_id();
  ASSERT_EQ(t.jobs().size(), 2u);
  const JobProgress& a = t.jobs()[0];
  const JobProgress& b = t.jobs()[1];
  EXPECT_EQ(a.job_id, "j-1");
  EXPECT_EQ(a.state, v1::JOB_SUCCEEDED);
  EXPECT_EQ(a.run_id, "r-1");
  EXPECT_EQ(a.stage, "measure");
  EXPECT_EQ(a.step, 2);
  EXPECT_EQ(b.job_id, "j-2");
  EXPECT_EQ(b.state, v1::JOB_FAILED);
  EXPECT_EQ(b.run_id, "r-3");
  EXPECT_EQ(b.step, 5);
  EXPECT_EQ(b.message, "oom: CUDA out of memory");
  EXPECT_TRUE(t.finished());
  EXPECT_EQ(t.last_event_id(), 11);
  EXPECT_EQ(t.Count(v1::JOB_SUCCEEDED), 1);
  EXPECT_EQ(t.Count(v1::JOB_FAILED), 1);
}

TEST(ProgressTracker, ReplayedEventsAreIgnored) {
  ProgressTracker t;
  t.AddJobs(TwoJobs());
  const auto story = Story();
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(t.Apply(story[i]));
  // The server replays from the start after a reconnect: events 1..4 again change nothing.
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(t.Apply(story[i])) << i;
  EXPECT_EQ(t.jobs()[0].step, 2);
  EXPECT_TRUE(t.Apply(story[4]));
  EXPECT_EQ(t.last_event_id(), 5);
}

TEST(ProgressTracker, RequeueAndNewRunResetProgress) {
  ProgressTracker t;
  t.AddJobs(TwoJobs());
  t.Apply(Prog(1, "j-2", "r-2", "measure", 7, 10));
  EXPECT_EQ(t.jobs()[1].state, v1::JOB_RUNNING);
  t.Apply(State(2, "j-2", v1::JOB_QUEUED, "r-2", "requeued: agent lost"));
  EXPECT_EQ(t.jobs()[1].state, v1::JOB_QUEUED);
  EXPECT_EQ(t.jobs()[1].stage, "");
  EXPECT_EQ(t.jobs()[1].total, 0);
  EXPECT_EQ(t.jobs()[1].message, "requeued: agent lost");
  // A progress report without a state still means the job runs.
  v1::StudyEvent p = Prog(3, "j-2", "r-3", "setup", 0, 0);
  p.set_job_state(v1::JOB_STATE_UNSPECIFIED);
  t.Apply(p);
  EXPECT_EQ(t.jobs()[1].state, v1::JOB_RUNNING);
  EXPECT_EQ(t.jobs()[1].run_id, "r-3");
  EXPECT_EQ(t.jobs()[1].message, "");
}

TEST(ProgressTracker, UnknownJobIsAppended) {
  ProgressTracker t;
  t.AddJobs(TwoJobs());
  t.Apply(State(1, "j-9", v1::JOB_RUNNING, "r-9"));
  ASSERT_EQ(t.jobs().size(), 3u);
  EXPECT_EQ(t.jobs()[2].job_id, "j-9");
  EXPECT_EQ(t.jobs()[2].preset, "?");
}

TEST(RenderBar, FillsInProportion) {
  EXPECT_EQ(RenderBar(0, 10, 10, false), "[----------]");
  EXPECT_EQ(RenderBar(3, 10, 10, false), "[###-------]");
  EXPECT_EQ(RenderBar(10, 10, 10, false), "[##########]");
  EXPECT_EQ(RenderBar(12, 10, 4, false), "[####]");
  EXPECT_EQ(RenderBar(0, 0, 4, false), "[----]");
  EXPECT_EQ(RenderBar(0, 0, 4, true), "[####]");
}

TEST(RenderProgressLines, FixedColumnsWithTimesAndAgent) {
  ProgressTracker t;
  t.AddJobs(TwoJobs());
  const auto story = Story();
  for (int i = 0; i < 7; ++i) t.Apply(story[i]);
  // now = At(7) + 1000 = 32500. j-1: started At(1) = 1500, measure 1/10 at At(3) = 7500, 2/10
  // at At(4) = 12000: last step 4.5 s, ETA 8 x 4.5 s = 36 s, elapsed 32500 - 1500 = 31 s.
  const int64_t now = At(7) + 1000;
  const std::string header =
      "PRESET   TARGET     STATE     PHASE      STEP   LAST ELAPSED    ETA                             AGENT";
  EXPECT_THAT(RenderProgressLines("st-1", t, 0, 0, now),
              ElementsAre("study st-1: 1 running, 1 queued", header,
                          "baseline any        running   measure    2/10   4.5s   31.0s  36.0s [####----------------] 20%  node-a",
                          "opt1     gpu=h200   requeued                       -       -      -                             node-b: requeued: lease expired"));
  for (int i = 7; i < 11; ++i) t.Apply(story[i]);
  // j-1 ended at At(8) = 40000: 38.5 s after its start. j-2's run r-3 began with its first
  // report at At(9) = 49500 and failed at At(10) = 60000: 10.5 s, no step time, no lease seen.
  EXPECT_THAT(RenderProgressLines("st-1", t, 0, 0, now),
              ElementsAre("study st-1: 1 succeeded, 1 failed", header,
                          "baseline any        succeeded done              4.5s   38.5s      -                             node-a",
                          "opt1     gpu=h200   failed                         -   10.5s      -                             oom: CUDA out of memory"));
}

TEST(RenderProgressLines, FitsEightyColumnsWithoutABarAndKeepsItsColumns) {
  ProgressTracker t;
  t.AddJobs(TwoJobs());
  std::vector<std::vector<std::string>> frames;
  for (const auto& e : Story()) {
    t.Apply(e);
    frames.push_back(RenderProgressLines("st-1", t, 79, 0, At(12)));
  }
  for (const auto& frame : frames) {
    for (const std::string& line : frame) {
      EXPECT_LE(DisplayWidth(line), 79u) << line;
      EXPECT_EQ(line.find('['), std::string::npos) << line;  // no bar at 80 columns
    }
    // Stable widths: the state column starts at the same place in every frame and row.
    for (size_t i = 2; i < frame.size(); ++i) EXPECT_EQ(frame[i].find_first_not_of(' ', 20), 20u) << frame[i];
  }
}

TEST(RenderProgressLines, NoBarOrStepBeforeMeasuring) {
  ProgressTracker t;
  t.AddJobs(TwoJobs());
  t.Apply(State(1, "j-1", v1::JOB_RUNNING, "r-1"));
  t.Apply(Prog(2, "j-1", "r-1", "setup", 1, 1));
  const std::string setup = RenderProgressLines("st-1", t, 0, 0, At(3))[2];
  EXPECT_THAT(setup, HasSubstr("setup"));
  EXPECT_EQ(setup.find('['), std::string::npos) << setup;
  EXPECT_EQ(setup.find("1/1"), std::string::npos) << setup;
  t.Apply(Prog(3, "j-1", "r-1", "measure", 0, 10));
  EXPECT_THAT(RenderProgressLines("st-1", t, 0, 0, At(4))[2], HasSubstr("[----------------"));
}

TEST(ProgressTracker, ReplayAfterASnapshotNeverMovesAJobBack) {
  // The watch starts from GetStudy (j-1 already running run r-1) and the server replays the
  // study's events from the first: j-1's submission said "queued".
  google::protobuf::RepeatedPtrField<v1::Job> jobs = TwoJobs();
  jobs[0].set_state(v1::JOB_RUNNING);
  jobs[0].set_current_run_id("r-1");
  ProgressTracker t;
  t.AddJobs(jobs);
  t.Apply(State(1, "j-1", v1::JOB_QUEUED, "", "submitted"));
  EXPECT_EQ(t.jobs()[0].state, v1::JOB_RUNNING);
  t.Apply(State(2, "j-1", v1::JOB_RUNNING, "r-1", "attempt 1 of 3 on agent node-a (device 0: cpu)"));
  t.Apply(State(3, "j-1", v1::JOB_SUCCEEDED, "r-1"));
  t.Apply(State(4, "j-1", v1::JOB_RUNNING, "r-1"));  // out of order: an end is final
  EXPECT_EQ(t.jobs()[0].state, v1::JOB_SUCCEEDED);
  EXPECT_EQ(t.jobs()[0].agent, "node-a");
}

TEST(ProgressHelpers, DurationsAndAgents) {
  EXPECT_EQ(ShortDuration(-1), "-");
  EXPECT_EQ(ShortDuration(812), "812ms");
  EXPECT_EQ(ShortDuration(12'340), "12.3s");
  EXPECT_EQ(ShortDuration(65'000), "1m05s");
  EXPECT_EQ(ShortDuration(725'000), "12m05s");
  EXPECT_EQ(ShortDuration(7'380'000), "2h03m");
  EXPECT_EQ(AgentFromLeaseMessage("attempt 2 of 3 on agent gpu-7 (device 1: NVIDIA H200)"), "gpu-7");
  EXPECT_EQ(AgentFromLeaseMessage("requeued: lease expired"), "");
}

TEST(RenderProgressLines, ManyJobsShowActiveOnesFirstWithinTheLimit) {
  google::protobuf::RepeatedPtrField<v1::Job> jobs;
  const v1::JobState states[] = {v1::JOB_SUCCEEDED, v1::JOB_SUCCEEDED, v1::JOB_RUNNING,
                                 v1::JOB_QUEUED,    v1::JOB_FAILED,    v1::JOB_SUCCEEDED};
  for (int i = 0; i < 6; ++i) {
    v1::Job* j = jobs.Add();
    j->set_job_id("j-" + std::to_string(i));
    j->set_preset("p" + std::to_string(i));
    j->set_state(states[i]);
  }
  ProgressTracker t;
  t.AddJobs(jobs);
  // 5 lines under the summary: the header, 3 jobs (running, failed, queued — in study order) and
  // the count of the rest.
  const std::vector<std::string> lines = RenderProgressLines("st-1", t, 79, 5);
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_EQ(lines[0], "study st-1: 1 running, 1 queued, 3 succeeded, 1 failed");
  EXPECT_THAT(lines[1], ::testing::StartsWith("PRESET   TARGET     STATE"));
  EXPECT_THAT(lines[2], ::testing::StartsWith("p2       any        running"));
  EXPECT_THAT(lines[3], ::testing::StartsWith("p3       any        queued"));
  EXPECT_THAT(lines[4], ::testing::StartsWith("p4       any        failed"));
  EXPECT_EQ(lines[5], "\u2026 3 more jobs not shown");
  EXPECT_EQ(RenderProgressLines("st-1", t, 0, 7).size(), 8u);  // all fit: no count line
}

TEST(RenderPlainLine, StateStageAndMessage) {
  JobProgress j;
  j.job_id = "j-1";
  j.preset = "opt12";
  j.target = "arch=9.0";
  j.repeat = 2;
  j.state = v1::JOB_RUNNING;
  j.stage = "measure";
  j.step = 3;
  j.total = 20;
  EXPECT_EQ(RenderPlainLine(j), "job j-1 opt12 arch=9.0 r2: running measure 3/20");
  j.state = v1::JOB_FAILED;
  j.message = "cuda: illegal address";
  EXPECT_EQ(RenderPlainLine(j), "job j-1 opt12 arch=9.0 r2: failed: cuda: illegal address");
}

TEST(ProgressView, PlainLinesInEventOrder) {
  std::ostringstream out;
  ProgressView view(&out, /*tty=*/false, 0);
  view.Start("st-1", TwoJobs());
  for (const auto& e : Story()) view.OnEvent(e);
  EXPECT_FALSE(view.OnEvent(Story()[2]));  // a replayed event prints nothing
  view.Finish();
  EXPECT_EQ(out.str(),
            "study st-1: watching 2 jobs\n"
            "job j-1 baseline any: running on node-a\n"
            "job j-1 baseline any: running warmup 1/2 on node-a\n"
            "job j-1 baseline any: running measure 1/10 on node-a\n"
            "job j-1 baseline any: running measure 2/10 on node-a\n"
            "job j-2 opt1 gpu=h200: running on node-b\n"
            "job j-2 opt1 gpu=h200: requeued: requeued: lease expired\n"
            "job j-1 baseline any: succeeded\n"
            "job j-2 opt1 gpu=h200: running measure 5/10\n"
            "job j-2 opt1 gpu=h200: failed: oom: CUDA out of memory\n");
}

TEST(ProgressView, PlainLinesThrottleToTenths) {
  std::ostringstream out;
  ProgressView view(&out, false, 0);
  view.Start("st-1", TwoJobs());
  for (int step = 1; step <= 100; ++step) view.OnEvent(Prog(step, "j-1", "r-1", "measure", step, 100));
  // One line per tenth (10, 20, ..., 100), plus the first report of the stage.
  std::string text = out.str();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1 + 1 + 10);
  EXPECT_THAT(text, HasSubstr("measure 1/100\n"));
  EXPECT_THAT(text, HasSubstr("measure 50/100\n"));
  EXPECT_THAT(text, HasSubstr("measure 100/100\n"));
}

TEST(ProgressView, TerminalRedrawsTheBlockInPlace) {
  std::ostringstream out;
  ProgressView view(&out, /*tty=*/true, 79, 0, [] { return int64_t{10'000}; });
  view.Start("st-1", TwoJobs());
  const std::string first = out.str();
  const std::string header = "\x1b[2KPRESET   TARGET     STATE     PHASE      STEP   LAST ELAPSED    ETA AGENT\n";
  EXPECT_EQ(first,
            "\x1b[2Kstudy st-1: 2 queued\n" + header +
            "\x1b[2Kbaseline any        queued                         -       -      -\n"
            "\x1b[2Kopt1     gpu=h200   queued                         -       -      -\n");
  view.OnEvent(Prog(1, "j-1", "r-1", "measure", 5, 10));
  const std::string second = out.str().substr(first.size());
  EXPECT_EQ(second,
            "\x1b[4F"  // back to the first line of the block
            "\x1b[2Kstudy st-1: 1 running, 1 queued\n" + header +
            "\x1b[2Kbaseline any        running   measure    5/10      -    8.5s      -\n"
            "\x1b[2Kopt1     gpu=h200   queued                         -       -      -\n");
  // A note clears the block, prints, and draws the block again below it.
  view.Note("medprof: reconnecting");
  const std::string third = out.str().substr(first.size() + second.size());
  EXPECT_EQ(third.substr(0, 11), "\x1b[4F\x1b[J" "medp");
  EXPECT_THAT(third, HasSubstr("medprof: reconnecting\n\x1b[2Kstudy st-1: 1 running, 1 queued\n"));
}

}  // namespace
}  // namespace medprof::client
