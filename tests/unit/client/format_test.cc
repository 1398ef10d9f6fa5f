#include "client/format.h"

#include <string>

#include <nlohmann/json.hpp>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace medprof::client {
namespace {

using Json = nlohmann::ordered_json;
using ::testing::HasSubstr;
using ::testing::Not;

// Compares JSON text with an expected document, keys in order.
void ExpectJson(const std::string& actual, const std::string& expected) {
  Json a = Json::parse(actual);
  Json e = Json::parse(expected);
  EXPECT_EQ(a.dump(2), e.dump(2));
}

v1::CompareResponse SampleCompare() {
  v1::CompareResponse r;
  r.set_study_id("st-1");
  r.set_baseline_preset("baseline");
  auto cell = [&](const char* gpu, const char* preset, v1::Phase phase, int n, int steps, double med, double p10,
                  double p90, bool has_base, double speedup, const char* source) {
    v1::CompareCell* c = r.add_cells();
    c->set_gpu(gpu);
    c->set_preset(preset);
    c->set_phase(phase);
    c->set_n(n);
    c->set_steps(steps);
    c->set_step_ms_median(med);
    c->set_step_ms_p10(p10);
    c->set_step_ms_p90(p90);
    c->set_has_baseline(has_base);
    c->set_speedup_vs_baseline(speedup);
    c->set_time_source(source);
    return c;
  };
  auto add_cat = [](v1::CompareCell* c, const char* name, double share) {
    v1::CategoryShare* s = c->add_categories();
    s->set_category(name);
    s->set_share(share);
  };
  auto add_ci = [](v1::CompareCell* c, double lo, double hi, const char* method) {
    c->set_step_ms_ci_lo(lo);
    c->set_step_ms_ci_hi(hi);
    c->set_interval_method(method);
  };
  v1::CompareCell* a = cell("NVIDIA H200", "baseline", v1::PHASE_TRAIN, 2, 4, 100.0, 95.5, 110.25, true, 1.0, "kernels");
  add_cat(a, "conv", 0.61);
  add_cat(a, "norm", 0.2);
  add_ci(a, 96.0, 108.5, "runs, then steps");
  v1::CompareCell* b = cell("NVIDIA H200", "opt1", v1::PHASE_TRAIN, 2, 4, 40.0, 38.0, 45.0, true, 2.5, "kernels");
  add_cat(b, "conv", 0.4);
  add_cat(b, "elementwise", 0.3);
  b->add_notes("metrics not collected: no counter permission");
  add_ci(b, 38.5, 43.25, "runs, then steps");
  b->mutable_speedup_ci()->set_lo(2.2);
  b->mutable_speedup_ci()->set_hi(2.8);
  b->mutable_speedup_ci()->set_significant(true);
  // A noisy cell: the speedup's interval holds 1.0.
  v1::CompareCell* d = cell("NVIDIA H200", "opt12", v1::PHASE_TRAIN, 1, 5, 79.59498500000001, 70.0, 200.0, true, 1.2563604, "kernels");
  add_ci(d, 75.0, 203.9, "steps of 1 run");
  d->mutable_speedup_ci()->set_lo(0.49);
  d->mutable_speedup_ci()->set_hi(1.45);
  v1::CompareCell* c = cell("cpu", "opt1", v1::PHASE_FORWARD, 1, 2, 12.3, 12.0, 12.6, false, 0.0, "ops");
  add_cat(c, "conv", 0.7);
  c->add_notes("no baseline cell for \"cpu\", forward");
  return r;
}

// The first version's keys keep their order; the query keys (docs/queries.md) follow their
// neighbours. Cells without metrics carry no number for them (metrics/stalls "collected": false).
TEST(FormatCompare, JsonSchemaExact) {
  ExpectJson(FormatCompare(SampleCompare(), OutputFormat::kJson), R"({
    "study_id": "st-1",
    "baseline": "baseline",
    "baseline_gpu": null,
    "runs_compared": 0,
    "cells": [
      {"gpu": "NVIDIA H200", "preset": "baseline", "phase": "train", "n": 2, "steps": 4,
       "step_ms_median": 100.0, "step_ms_p10": 95.5, "step_ms_p90": 110.25, "step_ms_ci95": [96.0, 108.5],
       "interval_method": "runs, then steps", "speedup_vs_baseline": 1.0, "speedup_ci95": null,
       "speedup_vs_baseline_gpu": null, "speedup_gpu_ci95": null, "time_source": "kernels",
       "categories": [{"category": "conv", "share": 0.61}, {"category": "norm", "share": 0.2}],
       "metrics": {"collected": false, "note": ""}, "stalls": {"collected": false, "note": ""},
       "top_kernels": [], "findings_note": null,
       "notes": []},
      {"gpu": "NVIDIA H200", "preset": "opt1", "phase": "train", "n": 2, "steps": 4,
       "step_ms_median": 40.0, "step_ms_p10": 38.0, "step_ms_p90": 45.0, "step_ms_ci95": [38.5, 43.25],
       "interval_method": "runs, then steps", "speedup_vs_baseline": 2.5,
       "speedup_ci95": {"lo": 2.2, "hi": 2.8, "significant": true},
       "speedup_vs_baseline_gpu": null, "speedup_gpu_ci95": null, "time_source": "kernels",
       "categories": [{"category": "conv", "share": 0.4}, {"category": "elementwise", "share": 0.3}],
       "metrics": {"collected": false, "note": ""}, "stalls": {"collected": false, "note": ""},
       "top_kernels": [], "findings_note": null,
       "notes": ["metrics not collected: no counter permission"]},
      {"gpu": "NVIDIA H200", "preset": "opt12", "phase": "train", "n": 1, "steps": 5,
       "step_ms_median": 79.59498500000001, "step_ms_p10": 70.0, "step_ms_p90": 200.0, "step_ms_ci95": [75.0, 203.9],
       "interval_method": "steps of 1 run", "speedup_vs_baseline": 1.2563604,
       "speedup_ci95": {"lo": 0.49, "hi": 1.45, "significant": false},
       "speedup_vs_baseline_gpu": null, "speedup_gpu_ci95": null, "time_source": "kernels",
       "categories": [],
       "metrics": {"collected": false, "note": ""}, "stalls": {"collected": false, "note": ""},
       "top_kernels": [], "findings_note": null,
       "notes": []},
      {"gpu": "cpu", "preset": "opt1", "phase": "forward", "n": 1, "steps": 2,
       "step_ms_median": 12.3, "step_ms_p10": 12.0, "step_ms_p90": 12.6, "step_ms_ci95": null,
       "interval_method": null, "speedup_vs_baseline": null, "speedup_ci95": null,
       "speedup_vs_baseline_gpu": null, "speedup_gpu_ci95": null, "time_source": "ops",
       "categories": [{"category": "conv", "share": 0.7}],
       "metrics": {"collected": false, "note": ""}, "stalls": {"collected": false, "note": ""},
       "top_kernels": [], "findings_note": null,
       "notes": ["no baseline cell for \"cpu\", forward"]}
    ]})");
}

TEST(FormatCompare, EmptyBaselineFieldMeansBaseline) {
  v1::CompareResponse r;
  r.set_study_id("st-2");
  EXPECT_EQ(FormatCompare(r, OutputFormat::kJson),
            "{\n  \"study_id\": \"st-2\",\n  \"baseline\": \"baseline\",\n  \"baseline_gpu\": null,\n"
            "  \"runs_compared\": 0,\n  \"cells\": []\n}\n");
}

// Long form: one row per cell x measure (x category, ...), six significant digits.
TEST(FormatCompare, CsvLongFormWithIntervals) {
  EXPECT_EQ(FormatCompare(SampleCompare(), OutputFormat::kCsv),
            "study_id,gpu,preset,phase,n,steps,measure,item,value,ci_lo,ci_hi,significant,text\n"
            "st-1,NVIDIA H200,baseline,train,2,4,step_ms_median,,100,96,108.5,,\n"
            "st-1,NVIDIA H200,baseline,train,2,4,interval_method,,,,,,\"runs, then steps\"\n"
            "st-1,NVIDIA H200,baseline,train,2,4,step_ms_p10,,95.5,,,,\n"
            "st-1,NVIDIA H200,baseline,train,2,4,step_ms_p90,,110.25,,,,\n"
            "st-1,NVIDIA H200,baseline,train,2,4,speedup_vs_baseline,,1,,,,\n"
            "st-1,NVIDIA H200,baseline,train,2,4,share_kernels,conv,0.61,,,,\n"
            "st-1,NVIDIA H200,baseline,train,2,4,share_kernels,norm,0.2,,,,\n"
            "st-1,NVIDIA H200,baseline,train,2,4,metrics,,,,,,\n"
            "st-1,NVIDIA H200,baseline,train,2,4,stalls,,,,,,\n"
            "st-1,NVIDIA H200,opt1,train,2,4,step_ms_median,,40,38.5,43.25,,\n"
            "st-1,NVIDIA H200,opt1,train,2,4,interval_method,,,,,,\"runs, then steps\"\n"
            "st-1,NVIDIA H200,opt1,train,2,4,step_ms_p10,,38,,,,\n"
            "st-1,NVIDIA H200,opt1,train,2,4,step_ms_p90,,45,,,,\n"
            "st-1,NVIDIA H200,opt1,train,2,4,speedup_vs_baseline,,2.5,2.2,2.8,yes,\n"
            "st-1,NVIDIA H200,opt1,train,2,4,share_kernels,conv,0.4,,,,\n"
            "st-1,NVIDIA H200,opt1,train,2,4,share_kernels,elementwise,0.3,,,,\n"
            "st-1,NVIDIA H200,opt1,train,2,4,metrics,,,,,,\n"
            "st-1,NVIDIA H200,opt1,train,2,4,stalls,,,,,,\n"
            "st-1,NVIDIA H200,opt1,train,2,4,note,,,,,,metrics not collected: no counter permission\n"
            "st-1,NVIDIA H200,opt12,train,1,5,step_ms_median,,79.595,75,203.9,,\n"
            "st-1,NVIDIA H200,opt12,train,1,5,interval_method,,,,,,steps of 1 run\n"
            "st-1,NVIDIA H200,opt12,train,1,5,step_ms_p10,,70,,,,\n"
            "st-1,NVIDIA H200,opt12,train,1,5,step_ms_p90,,200,,,,\n"
            "st-1,NVIDIA H200,opt12,train,1,5,speedup_vs_baseline,,1.25636,0.49,1.45,no,\n"
            "st-1,NVIDIA H200,opt12,train,1,5,metrics,,,,,,\n"
            "st-1,NVIDIA H200,opt12,train,1,5,stalls,,,,,,\n"
            "st-1,cpu,opt1,forward,1,2,step_ms_median,,12.3,,,,\n"
            "st-1,cpu,opt1,forward,1,2,step_ms_p10,,12,,,,\n"
            "st-1,cpu,opt1,forward,1,2,step_ms_p90,,12.6,,,,\n"
            "st-1,cpu,opt1,forward,1,2,share_ops,conv,0.7,,,,\n"
            "st-1,cpu,opt1,forward,1,2,metrics,,,,,,\n"
            "st-1,cpu,opt1,forward,1,2,stalls,,,,,,\n"
            "st-1,cpu,opt1,forward,1,2,note,,,,,,\"no baseline cell for \"\"cpu\"\", forward\"\n");
}

TEST(FormatCompare, TableAligned) {
  EXPECT_EQ(FormatCompare(SampleCompare(), OutputFormat::kTable),
            "study st-1, speedup vs baseline on the same GPU and phase\n"
            "GPU          PRESET    PHASE    N  STEPS     MEDIAN MS (95% CI)                   SPEEDUP (95% CI)  SOURCE   TOP CATEGORIES\n"
            "NVIDIA H200  baseline  train    2      4  100.00 (96.00-108.50)                  1.00x (reference)  kernels  conv 61%, norm 20%\n"
            "NVIDIA H200  opt1      train    2      4    40.00 (38.50-43.25)                  2.50x (2.20-2.80)  kernels  conv 40%, elementwise 30%\n"
            "NVIDIA H200  opt12     train    1      5   79.59 (75.00-203.90)  1.26x (0.49-1.45) not significant  kernels  -\n"
            "cpu          opt1      forward  1      2                  12.30                                  -  ops      conv 70%\n"
            "95% CI: bootstrap interval (runs resampled first, then their steps); a speedup whose interval holds 1.00 is "
            "not significant\n"
            "notes:\n"
            "  NVIDIA H200 / opt1 / train: metrics not collected: no counter permission\n"
            "  cpu / opt1 / forward: no baseline cell for \"cpu\", forward\n");
}

// A cell with the roofline's summary: % of roof and the memory/compute/latency shares in every format.
TEST(FormatCompare, RooflineColumnsInEveryFormat) {
  v1::CompareResponse r = SampleCompare();
  v1::CellMetrics* m = r.mutable_cells(1)->mutable_metrics();
  m->set_collected(true);
  m->set_source("kernels");
  m->set_roof_pct(71.25);
  m->set_memory_bound_share(0.62);
  m->set_compute_bound_share(0.3);
  m->set_latency_bound_share(0.08);
  const std::string table = FormatCompare(r, OutputFormat::kTable);
  EXPECT_THAT(table, HasSubstr("ROOF %  MEM/COMP/LAT %"));
  EXPECT_THAT(table, HasSubstr("71.2         62/30/8"));
  const std::string csv = FormatCompare(r, OutputFormat::kCsv);
  EXPECT_THAT(csv, HasSubstr("st-1,NVIDIA H200,opt1,train,2,4,roof_pct,,71.25,,,,\n"));
  EXPECT_THAT(csv, HasSubstr("st-1,NVIDIA H200,opt1,train,2,4,memory_bound_share,,0.62,,,,\n"));
  EXPECT_THAT(csv, HasSubstr("st-1,NVIDIA H200,opt1,train,2,4,latency_bound_share,,0.08,,,,\n"));
  const Json j = Json::parse(FormatCompare(r, OutputFormat::kJson));
  EXPECT_EQ(j["cells"][1]["metrics"]["roof_pct"], 71.25);
  EXPECT_EQ(j["cells"][1]["metrics"]["compute_bound_share"], 0.3);
}

TEST(FormatCompare, NotesAreGroupedByLayerAndByCell) {
  // The CPU demo: three layers not collected for the same reason in every cell -> one line.
  v1::CompareResponse r;
  r.set_study_id("st-3");
  for (const char* preset : {"baseline", "opt1"}) {
    v1::CompareCell* c = r.add_cells();
    c->set_gpu("cpu");
    c->set_preset(preset);
    c->set_phase(v1::PHASE_TRAIN);
    c->set_n(1);
    for (const char* layer : {"trace", "sampling", "metrics"}) c->add_notes(absl::StrCat(layer, " not collected: no GPU"));
  }
  r.mutable_cells(1)->add_notes("no baseline cell for \"cpu\", train");
  const std::string table = FormatCompare(r, OutputFormat::kTable);
  EXPECT_THAT(table, HasSubstr("notes:\n"
                               "  every cell: trace, sampling, metrics not collected: no GPU\n"
                               "  cpu / opt1 / train: no baseline cell for \"cpu\", train\n"));
  // JSON keeps every note of every cell as it came.
  EXPECT_THAT(FormatCompare(r, OutputFormat::kJson), HasSubstr("\"sampling not collected: no GPU\""));
}

v1::Job MakeJob(const char* id, const char* preset, const char* target, int repeat, v1::JobState state,
                const char* run, const char* error = "") {
  v1::Job j;
  j.set_job_id(id);
  j.set_study_id("st-1");
  j.set_preset(preset);
  j.set_target(target);
  j.set_repeat(repeat);
  j.set_state(state);
  j.set_attempts(1);
  j.set_max_attempts(3);
  j.set_current_run_id(run);
  j.set_error(error);
  return j;
}

TEST(FormatSubmit, TableJsonCsv) {
  v1::SubmitStudyResponse r;
  r.set_study_id("st-1");
  *r.add_jobs() = MakeJob("j-1", "baseline", "", 0, v1::JOB_QUEUED, "");
  *r.add_jobs() = MakeJob("j-2", "opt1", "gpu=h200", 0, v1::JOB_QUEUED, "");
  r.add_warnings("no registered GPU can hold the estimated 18.7 GiB");
  EXPECT_EQ(FormatSubmit(r, OutputFormat::kTable), "study st-1: 2 jobs queued\n");
  ExpectJson(FormatSubmit(r, OutputFormat::kJson), R"({
    "study_id": "st-1",
    "jobs": [
      {"job_id": "j-1", "preset": "baseline", "target": "", "repeat": 0, "state": "queued", "attempts": 1,
       "max_attempts": 3, "run_id": "", "error": ""},
      {"job_id": "j-2", "preset": "opt1", "target": "gpu=h200", "repeat": 0, "state": "queued", "attempts": 1,
       "max_attempts": 3, "run_id": "", "error": ""}],
    "warnings": ["no registered GPU can hold the estimated 18.7 GiB"]})");
  EXPECT_EQ(FormatSubmit(r, OutputFormat::kCsv),
            "job_id,preset,target,repeat,state,attempts,max_attempts,run_id,error\n"
            "j-1,baseline,,0,queued,1,3,,\n"
            "j-2,opt1,gpu=h200,0,queued,1,3,,\n");
  r.mutable_jobs()->RemoveLast();
  EXPECT_EQ(FormatSubmit(r, OutputFormat::kTable), "study st-1: 1 job queued\n");
}

v1::Study FinishedStudy() {
  v1::Study s;
  s.set_study_id("st-1");
  s.set_name("tf32");
  s.set_state(v1::STUDY_DONE);
  s.set_jobs_total(2);
  s.set_jobs_done(2);
  *s.add_jobs() = MakeJob("j-1", "baseline", "", 0, v1::JOB_SUCCEEDED, "r-1");
  *s.add_jobs() = MakeJob("j-2", "opt1", "arch=9.0,site=tacc", 1, v1::JOB_FAILED, "r-2", "oom: CUDA out of memory");
  return s;
}

TEST(FormatStudy, FinalStateTable) {
  EXPECT_EQ(FormatStudy(FinishedStudy(), OutputFormat::kTable),
            "study st-1 done: 1 succeeded, 1 failed\n"
            "JOB  PRESET    TARGET              REPEAT  STATE      ATTEMPTS  RUN\n"
            "j-1  baseline  any                      0  succeeded       1/3  r-1\n"
            "j-2  opt1      arch=9.0,site=tacc       1  failed          1/3  r-2\n");
}

TEST(FormatStudy, FinalStateJsonHasStudyIdStateJobs) {
  ExpectJson(FormatStudy(FinishedStudy(), OutputFormat::kJson, {"w1"}), R"({
    "study_id": "st-1", "name": "tf32", "state": "done", "jobs_total": 2, "jobs_done": 2,
    "jobs": [
      {"job_id": "j-1", "preset": "baseline", "target": "", "repeat": 0, "state": "succeeded", "attempts": 1,
       "max_attempts": 3, "run_id": "r-1", "error": ""},
      {"job_id": "j-2", "preset": "opt1", "target": "arch=9.0,site=tacc", "repeat": 1, "state": "failed",
       "attempts": 1, "max_attempts": 3, "run_id": "r-2", "error": "oom: CUDA out of memory"}],
    "warnings": ["w1"]})");
}

TEST(FormatStudy, CsvQuotesSelectorsWithCommas) {
  EXPECT_EQ(FormatStudy(FinishedStudy(), OutputFormat::kCsv),
            "job_id,preset,target,repeat,state,attempts,max_attempts,run_id,error\n"
            "j-1,baseline,,0,succeeded,1,3,r-1,\n"
            "j-2,opt1,\"arch=9.0,site=tacc\",1,failed,1,3,r-2,oom: CUDA out of memory\n");
}

TEST(FormatStudies, AllFormats) {
  v1::ListStudiesResponse r;
  v1::Study* s = r.add_studies();
  s->set_study_id("st-2");
  s->set_name("layout, tf32");
  s->set_state(v1::STUDY_ACTIVE);
  s->set_project("lab");
  s->set_jobs_total(4);
  s->set_jobs_done(1);
  s->set_created_unix_ms(1700000000000);
  v1::Study* t = r.add_studies();
  t->set_study_id("st-1");
  t->set_state(v1::STUDY_CANCELLED);
  EXPECT_EQ(FormatStudies(r, OutputFormat::kTable),
            "STUDY  NAME          STATE      JOBS  CREATED               PROJECT\n"
            "st-2   layout, tf32  active      1/4  2023-11-14 22:13:20Z  lab\n"
            "st-1   -             cancelled   0/0  -                     -\n");
  EXPECT_EQ(FormatStudies(r, OutputFormat::kCsv),
            "study_id,name,state,project,jobs_total,jobs_done,created_unix_ms\n"
            "st-2,\"layout, tf32\",active,lab,4,1,1700000000000\n"
            "st-1,,cancelled,,0,0,0\n");
  ExpectJson(FormatStudies(r, OutputFormat::kJson), R"({"studies": [
    {"study_id": "st-2", "name": "layout, tf32", "state": "active", "project": "lab", "jobs_total": 4,
     "jobs_done": 1, "created_unix_ms": 1700000000000},
    {"study_id": "st-1", "name": "", "state": "cancelled", "project": "", "jobs_total": 0, "jobs_done": 0,
     "created_unix_ms": 0}], "next_page_token": ""})");
  r.set_next_page_token("x");
  EXPECT_THAT(FormatStudies(r, OutputFormat::kTable), HasSubstr("(more studies: raise --limit)\n"));
}

v1::Run SampleRun() {
  v1::Run run;
  run.set_run_id("r-1");
  run.set_job_id("j-1");
  run.set_study_id("st-1");
  run.set_agent_id("a-1");
  run.set_attempt(1);
  run.set_state(v1::RUN_SUCCEEDED);
  run.set_preset("opt1");
  run.set_gpu("NVIDIA H200");
  run.set_started_unix_ms(1700000000000);
  run.set_finished_unix_ms(1700000005000);
  run.mutable_summary()->set_measured_steps(2);
  run.mutable_summary()->set_step_ms_median(12.345);
  return run;
}

TEST(FormatRuns, AllFormats) {
  v1::ListRunsResponse r;
  *r.add_runs() = SampleRun();
  v1::Run* failed = r.add_runs();
  failed->set_run_id("r-2");
  failed->set_job_id("j-2");
  failed->set_study_id("st-1");
  failed->set_attempt(2);
  failed->set_state(v1::RUN_LOST);
  failed->set_preset("baseline");
  failed->set_error("lease expired");
  EXPECT_EQ(FormatRuns(r, OutputFormat::kTable),
            "RUN  STUDY  JOB  ATTEMPT  STATE      PRESET    GPU          STEPS  MEDIAN MS  STARTED\n"
            "r-1  st-1   j-1        1  succeeded  opt1      NVIDIA H200      2      12.35  2023-11-14 22:13:20Z\n"
            "r-2  st-1   j-2        2  lost       baseline  -                -          -  -\n");
  EXPECT_EQ(FormatRuns(r, OutputFormat::kCsv),
            "run_id,study_id,job_id,agent_id,attempt,state,preset,gpu,measured_steps,step_ms_median,"
            "started_unix_ms,finished_unix_ms,error\n"
            "r-1,st-1,j-1,a-1,1,succeeded,opt1,NVIDIA H200,2,12.345,1700000000000,1700000005000,\n"
            "r-2,st-1,j-2,,2,lost,baseline,,0,0.0,0,0,lease expired\n");
  Json j = Json::parse(FormatRuns(r, OutputFormat::kJson));
  ASSERT_EQ(j["runs"].size(), 2u);
  EXPECT_EQ(j["runs"][0]["run_id"], "r-1");
  EXPECT_EQ(j["runs"][0]["state"], "succeeded");
  EXPECT_EQ(j["runs"][0]["step_ms_median"], 12.345);
  EXPECT_EQ(j["runs"][1]["error"], "lease expired");
}

// The NVIDIA driver (NVML) and the CUDA version it supports are two things; a run shows what it has.
TEST(DriverLabel, DriverAndCudaVersionEitherAloneOrNeither) {
  v1::Environment env;
  EXPECT_EQ(DriverLabel(env), "");
  env.set_cuda_driver_version("13.0");
  EXPECT_EQ(DriverLabel(env), "CUDA 13.0");
  env.set_driver_version("580.95.05");
  EXPECT_EQ(DriverLabel(env), "580.95.05 (CUDA 13.0)");
  env.clear_cuda_driver_version();
  EXPECT_EQ(DriverLabel(env), "580.95.05");
}

TEST(FormatRun, TableShowsSectionsJsonKeepsProtoNames) {
  v1::Run run = SampleRun();
  run.set_error("");
  v1::WorkloadConfig* c = run.mutable_effective();
  c->set_preset("opt1");
  c->set_phase(v1::PHASE_TRAIN);
  c->set_volume(16);
  c->set_batch(1);
  c->set_steps(2);
  c->set_warmup(1);
  c->set_base_channels(8);
  c->add_channel_mult(1);
  c->add_channel_mult(2);
  c->set_res_blocks(1);
  c->set_groups(8);
  c->set_grad_accum(1);
  run.mutable_environment()->set_host("node1");
  run.mutable_environment()->set_device("cpu");
  run.mutable_environment()->set_torch_version("1.13.1");
  auto* layer = run.mutable_summary()->add_layers();
  layer->set_layer("trace");
  layer->set_ran(false);
  layer->set_reason("no GPU");
  for (int i = 0; i < 2; ++i) {
    v1::StepTiming* s = run.add_steps();
    s->set_phase(v1::PHASE_TRAIN);
    s->set_step(i);
    s->set_wall_ns(12'000'000 + i * 1'000'000);
    s->set_loss(0.5);
  }
  for (int i = 0; i < 12; ++i) {
    v1::OpStat* o = run.add_ops();
    o->set_name("aten::op" + std::to_string(i));
    o->set_phase("fwd");
    o->set_category("conv");
    o->set_count(2);
    o->set_total_ns((i + 1) * 1'000'000);
    o->set_self_ns((i + 1) * 500'000);
  }
  const std::string table = FormatRun(run, OutputFormat::kTable);
  EXPECT_THAT(table, HasSubstr("run       r-1\n"));
  EXPECT_THAT(table, HasSubstr("job       j-1 (attempt 1)\n"));
  EXPECT_THAT(table, HasSubstr("  volume      16x16x16\n"));
  EXPECT_THAT(table, HasSubstr("  flags       tf32 on, channels_last off, bf16 off, fused off\n"));
  EXPECT_THAT(table, HasSubstr("  torch            1.13.1\n"));
  EXPECT_THAT(table, HasSubstr("  layers          trace: not run (no GPU)\n"));
  EXPECT_THAT(table, HasSubstr("step times\n  STEP  PHASE  WALL MS  DEVICE MS  LOSS\n     0  train   12.000          -   0.5\n"));
  // Top ops: the 10 largest by total time, largest first.
  EXPECT_THAT(table, HasSubstr("top ops by total time (10 of 12)\n  OP          PHASE  CATEGORY  COUNT  TOTAL MS  SELF MS\n"
                               "  aten::op11  fwd    conv          2    12.000    6.000\n"));
  EXPECT_THAT(table, Not(HasSubstr("aten::op1 ")));  // 11th and 12th largest are left out
  EXPECT_THAT(table, Not(HasSubstr("error")));
  EXPECT_THAT(table, HasSubstr("  model       Med-DDPM: base_channels 8,"));

  // A user's model is named by file, hash and size, not by Med-DDPM's shape defaults.
  v1::Run user = run;
  v1::ModelRef* m = user.mutable_effective()->mutable_model();
  m->set_sha256(std::string(64, 'a'));
  m->set_file_name("tiny_unet.pt");
  m->set_size_bytes(2048);
  EXPECT_THAT(FormatRun(user, OutputFormat::kTable),
              HasSubstr("  model       tiny_unet.pt (TorchScript, sha256 aaaaaaaaaaaa, 2048 bytes)\n"));

  Json j = Json::parse(FormatRun(run, OutputFormat::kJson));
  EXPECT_EQ(j["run_id"], "r-1");
  EXPECT_EQ(j["state"], "succeeded");  // the table's word (issue 19: one JSON face)
  EXPECT_EQ(j["effective"]["base_channels"], 8);
  EXPECT_EQ(j["ops"].size(), 12u);
}

TEST(FormatAgents, AllFormats) {
  v1::ListAgentsResponse r;
  v1::Agent* a = r.add_agents();
  a->set_agent_id("ag-1");
  a->set_name("h200-node");
  a->set_host("gpu01");
  a->set_version("0.1.0");
  a->set_online(true);
  a->set_running_jobs(1);
  a->set_last_seen_unix_ms(1700000000000);
  (*a->mutable_labels())["site"] = "lab";
  (*a->mutable_labels())["partition"] = "gpu";
  for (int i = 0; i < 2; ++i) {
    v1::Device* d = a->add_devices();
    d->set_index(i);
    d->set_kind("cuda");
    d->set_name("NVIDIA H200");
    d->set_compute_capability("9.0");
    d->set_memory_bytes(150'000'000'000ull);
  }
  v1::Device* cpu = a->add_devices();
  cpu->set_index(-1);
  cpu->set_kind("cpu");
  cpu->set_name("cpu");
  const int64_t now = 1700000100000;  // 100 s later
  EXPECT_EQ(FormatAgents(r, OutputFormat::kTable, now),
            "AGENT  NAME       HOST   ONLINE  RUNNING  DEVICES              LABELS                  VERSION  LAST SEEN\n"
            "ag-1   h200-node  gpu01  yes           1  NVIDIA H200 x2, cpu  partition=gpu,site=lab  0.1.0    100s ago\n");
  EXPECT_EQ(FormatAgents(r, OutputFormat::kCsv, now),
            "agent_id,name,host,version,online,running_jobs,last_seen_unix_ms,devices,labels\n"
            "ag-1,h200-node,gpu01,0.1.0,true,1,1700000000000,NVIDIA H200;NVIDIA H200;cpu,partition=gpu;site=lab\n");
  Json j = Json::parse(FormatAgents(r, OutputFormat::kJson, now));
  EXPECT_EQ(j["agents"][0]["labels"].dump(), R"({"partition":"gpu","site":"lab"})");
  EXPECT_EQ(j["agents"][0]["devices"].size(), 3u);
  EXPECT_EQ(j["agents"][0]["devices"][1]["memory_bytes"], 150000000000ull);
  EXPECT_EQ(j["agents"][0]["online"], true);
}

TEST(FormatNames, StatesAndTimes) {
  EXPECT_EQ(JobStateName(v1::JOB_CANCELLED), "cancelled");
  EXPECT_EQ(RunStateName(v1::RUN_INTERRUPTED), "interrupted");
  EXPECT_EQ(StudyStateName(v1::STUDY_ACTIVE), "active");
  EXPECT_EQ(FormatUnixMs(0), "-");
  EXPECT_EQ(FormatUnixMs(1700000000999), "2023-11-14 22:13:20Z");
  EXPECT_EQ(TargetLabel(""), "any");
  EXPECT_EQ(TargetLabel("gpu=a100"), "gpu=a100");
}

}  // namespace
}  // namespace medprof::client
