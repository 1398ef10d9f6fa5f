// Every limit and default a medprof request is checked against, defined once: the server's
// validation, the CLI's early checks, the worker's config rules and the docs (a unit test,
// tests/unit/common/request_limits_test.cc, holds the README and proto comments to these
// numbers) all read them from here.
//
// Bounds are inclusive. A refusal names the field, the value and the range, e.g.
// "volume: 4096 is out of range (allowed 8..512, ...)". Operational limits of the server alone
// (message sizes, upload windows, rates, cache lifetimes) are in server/domain/limits.h.
//
// Header-only constants; thread-safe.
#pragma once

#include <cstddef>

namespace medprof::limits {

// ---- the workload (medprof.v1.WorkloadConfig): defaults (the published 128^3 Med-DDPM
// model, spec/meddpm.md) and ranges, checked by common/workload_config.h's Validate.
inline constexpr int kDefaultVolume = 128;
inline constexpr int kDefaultSteps = 10;
inline constexpr int kDefaultWarmup = 2;
inline constexpr int kDefaultBaseChannels = 64;
inline constexpr int kDefaultGroups = 32;
inline constexpr int kDefaultGradAccum = 2;
inline constexpr double kDefaultLearningRate = 1e-5;
inline constexpr int kDiffusionSteps = 250;  // T; also the most --sample-steps
inline constexpr int kDefaultMetricsTopK = 20;
inline constexpr int kDefaultMetricsLaunches = 3, kMaxMetricsLaunches = 9;
inline constexpr int kDefaultMetricsCoveragePct = 98, kMinMetricsCoveragePct = 50;
inline constexpr int kDefaultMetricsMaxSignatures = 32, kMaxMetricsMaxSignatures = 64;
inline constexpr int kDefaultOverheadPairs = 3, kMaxOverheadPairs = 50;
inline constexpr int kMinVolume = 8, kMaxVolume = 512;
inline constexpr int kMaxSteps = 100000, kMaxWarmup = 1000, kMaxBatch = 64;
inline constexpr int kMinBaseChannels = 4, kMaxBaseChannels = 512;
inline constexpr int kMaxLevels = 8, kMaxMult = 16, kMaxResBlocks = 4;
inline constexpr int kMaxInOutChannels = 16, kMaxGroups = 64, kMaxGradAccum = 64;
inline constexpr int kMaxCpuThreads = 1024, kMaxMetricsTopK = 200;

// ---- a submission (SubmitStudyRequest)
inline constexpr int kMaxPresets = 16;
inline constexpr int kMaxTargets = 64;
inline constexpr int kMaxRepeats = 100;
inline constexpr int kMaxAttempts = 10;
inline constexpr int kMaxJobsPerStudy = 1000;  // presets x targets x repeats
inline constexpr int kDefaultRunTimeoutS = 3600;
inline constexpr int kMaxRunTimeoutS = 7 * 24 * 3600;

// ---- strings (characters)
inline constexpr size_t kMaxStudyNameChars = 200;
inline constexpr size_t kMaxCancelReasonChars = 1000;
inline constexpr size_t kMaxAgentNameChars = 128;
inline constexpr size_t kMaxGpuNameChars = 128;  // an imported run's GPU
inline constexpr size_t kMaxIdChars = 64;        // study_id, job_id, run_id, agent_id

// ---- listings and queries
inline constexpr int kMaxStudiesLimit = 1000;  // ListStudies.limit
inline constexpr int kMaxRunsLimit = 10000;    // ListRuns.limit
inline constexpr int kMaxTopRows = 10000;      // ListKernels.top, DiffRuns.top
inline constexpr int kMaxRunFilter = 1000;     // CompareRequest.run_ids
inline constexpr int kMaxRunsCompared = 10000; // runs one compare reads
inline constexpr int kMaxComparedStudies = 8;  // CompareRequest: the study and more_study_ids
inline constexpr int kMaxTopKernels = 50, kDefaultTopKernels = 5;       // per compare cell
inline constexpr int kMaxTopCategories = 12, kDefaultTopCategories = 3; // per compare cell

}  // namespace medprof::limits
