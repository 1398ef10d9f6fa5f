// RunWorker: one job from start to end — the heart of medprof-worker.
//
// Sequence (records on the channel, in order):
//   probe the GPU, choose device + profiler backend (agent/profiler/backend.h), create the
//   job's workload (workload_factory.h) (setup)        — a failure here writes only WorkerError
//   RunStarted  effective config, environment (host, versions, flags READ BACK from the
//               workload, device, CPU, CUDA_VISIBLE_DEVICES, libcupti path), parameters,
//               backend, start time
//   Progress    setup 1/1
//   per step:   warm-up -> Progress warmup i/n; measured -> StepTiming, then Progress measure i/n
//               (each written as soon as the step ends)
//   OpAggregates, KernelAggregates (GPU backend only), Progress done, RunSummary (last)
// On failure, WorkerError{kind: oom|cuda|invalid_config|internal|interrupted} is the last
// record (ResultChannel enforces it) and the exit code says what happened (exit_codes.h).
//
// Stopping: the workload API has no cancel hook, so when `stop_count` becomes non-zero the
// observer lets the current step finish and write its records, then writes
// WorkerError{interrupted} and calls `terminate(143)` — which ends the process (std::_Exit)
// unless a test injects something else. Also checked once after setup.
//
// Runs on the calling thread, which becomes the workload's thread.
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "agent/worker/result_channel.h"
#include "medprof/v1/workload.pb.h"

namespace medprof::worker {

struct RunContext {
  v1::WorkloadConfig effective;               // after ApplyDefaults + Validate
  ResultChannel* channel = nullptr;           // required
  const std::atomic<int>* stop_count = nullptr;  // SIGTERM/SIGINT seen so far (null = never)
  int64_t process_start_ns = 0;               // MonotonicNs() at main() entry, for wall_ms
  std::function<void(int exit_code)> terminate;  // default: flush logs, std::_Exit(code)
};

// Returns the process exit code (0, 2, 3 or 143).
int RunWorker(const RunContext& context);

// How a Status from the workload or the worker maps to WorkerError.kind and the exit code:
// RESOURCE_EXHAUSTED -> oom/3; INVALID_ARGUMENT -> invalid_config/2; a message naming CUDA,
// cuDNN or cuBLAS (or a "device: cuda" precondition) -> cuda/3; else internal/3.
struct Failure {
  std::string kind;
  int exit_code = 3;
};
Failure ClassifyFailure(const absl::Status& status);

}  // namespace medprof::worker
