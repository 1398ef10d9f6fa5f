// Output formats of the `medprof` CLI: every server response as a table, JSON or CSV.
//
// Each function turns one response message into the full text written to stdout (ending in
// "\n"). JSON is one document with keys in a fixed order (schemas in docs/cli.md);
// CSV is a header row plus one row per item (RFC 4180 quoting, see text_table.h); tables
// are aligned columns for people. States print as lower-case words ("queued", "succeeded").
// Times print in UTC ("2025-01-02 03:04:05Z"). No function reads the clock: callers pass
// `now_unix_ms` where an age is shown.
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "client/cli.h"
#include "medprof/v1/service.pb.h"

namespace medprof::client {

std::string JobStateName(v1::JobState state);      // queued|running|succeeded|failed|cancelled
std::string RunStateName(v1::RunState state);      // running|succeeded|failed|interrupted|lost|cancelled
std::string StudyStateName(v1::StudyState state);  // active|done|cancelled
// "2025-01-02 03:04:05Z"; "-" for 0.
std::string FormatUnixMs(int64_t unix_ms);
// The driver as shown: "580.95.05 (CUDA 13.0)", either half alone when the other is unknown, "".
std::string DriverLabel(const v1::Environment& env);
// The selector as shown in tables: "" -> "any".
std::string TargetLabel(const std::string& target);

// `submit` without --wait. table: "study <id>: N jobs queued" (warnings go to stderr, see
// commands.h); json: {"study_id", "jobs": [job...], "warnings": [...]}; csv: one row per job.
std::string FormatSubmit(const v1::SubmitStudyResponse& response, OutputFormat format);

// A study's final state (`watch`, `submit --wait`). table: a summary line and a job table;
// json: {"study_id", "name", "state", "jobs_total", "jobs_done", "jobs": [job...],
// "warnings": [...]}; csv: one row per job.
std::string FormatStudy(const v1::Study& study, OutputFormat format,
                        const std::vector<std::string>& warnings = {});

std::string FormatStudies(const v1::ListStudiesResponse& response, OutputFormat format);
std::string FormatRuns(const v1::ListRunsResponse& response, OutputFormat format);
// `run RUN_ID`: table = a human report (run, environment, summary, step times, top ops and
// kernels); json = the Run message as common/proto_json.h prints it (proto field names,
// enum values as the tables spell them: "succeeded", "train").
std::string FormatRun(const v1::Run& run, OutputFormat format);
std::string FormatAgents(const v1::ListAgentsResponse& response, OutputFormat format,
                         int64_t now_unix_ms);
// `compare`: defined in query_format.cc (schemas in docs/queries.md).
std::string FormatCompare(const v1::CompareResponse& response, OutputFormat format);

}  // namespace medprof::client
