// Output formats of the query commands: compare (declared in format.h), kernels, diff, export.
//
// JSON documents keep a fixed key order (schemas in docs/queries.md); CSV is a header row plus
// one row per item (RFC 4180 quoting); tables are for people. A measurement that was not
// collected never prints as a number: JSON has null or the not-collected reason, tables "-"
// and the reason below.
//
// Pure functions; thread-safe.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "client/cli.h"
#include "medprof/v1/service.pb.h"

namespace medprof::client {

// Share of the run's time under which `kernels` leaves a row out of its table (unless --all).
inline constexpr double kKernelRowShare = 0.005;

// `kernels RUN`: json {"run_id", "time_source", "total_ns", "total_rows", "kernels": [{"name",
// "category", "op", "phase", "count", "total_ns", "share", "coverage_pct"}...], "signatures": [...]}
// (with --signatures). The table leaves out rows under kKernelRowShare unless `all`; JSON and CSV
// hold every row the server sent.
std::string FormatKernels(const v1::ListKernelsResponse& response, OutputFormat format, bool all = false);

// `diff RUN_A RUN_B`: json {"run_a", "run_b", "time_source", "a_steps", "b_steps", "a_total_ns",
// "b_total_ns", "rows": [{"op", "category", "a_ns", "b_ns", "delta_ns", "ratio", "a_share",
// "b_share", "a_kernels", "b_kernels", "a_count", "b_count"}...]} (ns per measured step).
std::string FormatDiff(const v1::DiffRunsResponse& response, OutputFormat format);

// `export RUN --format chrome-trace`: Trace Event Format JSON (Chrome's about:tracing, Perfetto).
// Device events ("kernel", "memcpy", "memset") are complete ("X") events of process 1 "GPU",
// one thread per CUDA stream; host events ("op", "phase") of process 0 "host" (phases on
// thread 0, ops on thread 1); utilization samples become counter ("C") events of process 2.
// Timestamps are µs since the timeline's origin.
std::string FormatChromeTrace(const v1::GetTimelineResponse& response);

// `export RUN --format json|csv`: json = the run with its steps, ops, kernels and metrics (the
// JSON face of common/proto_json.h, as `run --format json`); csv = one long table
// "table,name,scope,op,phase,category,step,count,total_ns,self_ns,value,unit" with a row per step,
// op, kernel and metric value.
std::string FormatRunExport(const v1::Run& run, OutputFormat format);

}  // namespace medprof::client
