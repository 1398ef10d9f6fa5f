// The limits the docs promise are the limits the code checks: every statement of a limit in
// the proto comments and the manuals (docs/server.md, docs/cli.md) is written here from common/request_limits.h (and the
// server's own server/domain/limits.h) and must appear, word for word, in its file. Changing
// a limit without its docs fails here, naming the file and the sentence to write.
#include "common/request_limits.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace medprof::limits {
namespace {

struct Statement {
  std::string file;  // relative to the source tree
  std::string text;  // must appear in it
};

std::string Read(const std::string& relative) {
  std::ifstream in(std::string(MEDPROF_SOURCE_DIR) + "/" + relative, std::ios::binary);
  EXPECT_TRUE(in.good()) << relative;
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

std::vector<Statement> ProtoStatements() {
  const std::string service = "proto/medprof/v1/service.proto", workload = "proto/medprof/v1/workload.proto";
  return {
      {service, absl::StrCat("<= ", kMaxStudyNameChars, " characters")},
      {service, absl::StrCat("1..", kMaxPresets, " presets")},
      {service, absl::StrCat("int32 repeats = 5;                  // 1..", kMaxRepeats, ", default 1")},
      {service, absl::StrCat("attempts per job before it fails, 1..", kMaxAttempts)},
      {service, absl::StrCat("enforced by the agent, 1..", kMaxRunTimeoutS, ", default ", kDefaultRunTimeoutS)},
      {service, absl::StrCat("int32 limit = 1;        // 1..", kMaxStudiesLimit, ", default 50")},
      {service, absl::StrCat("int32 limit = 3;          // 1..", kMaxRunsLimit, ", default 100")},
      {service, absl::StrCat("categories listed per cell, 1..", kMaxTopCategories, ", default ", kDefaultTopCategories)},
      {service, absl::StrCat("(succeeded ones; 1..", kMaxRunFilter, ")")},
      {service, absl::StrCat("by priority, 1..", kMaxTopKernels, ", default ", kDefaultTopKernels)},
      {service, absl::StrCat("further studies (0..", kMaxComparedStudies - 1, ", not with run_ids)")},
      {service, absl::StrCat("int32 top = 2;                  // 1..", kMaxTopRows, "; 0 = all")},
      {service, absl::StrCat("int32 top = 3;                  // rows, 1..", kMaxTopRows, "; 0 = all")},
      {service, absl::StrCat("required (1..", kMaxGpuNameChars, "): the GPU name")},
      {service, absl::StrCat("steps the export covers (1..", kMaxSteps, ", unset = 1)")},
      {service, absl::StrCat("1..", kMaxAgentNameChars, " chars; same name = same agent")},
      {workload, absl::StrCat("Cubic volume edge in voxels, ", kMinVolume, "..", kMaxVolume)},
      {workload, absl::StrCat("Measured steps (1..", kMaxSteps, ") and unmeasured warm-up steps before them (0..",
                              kMaxWarmup, ")")},
      {workload, absl::StrCat("Batch size, 1..", kMaxBatch, " (default 1)")},
      {workload, absl::StrCat("base_channels default ", kDefaultBaseChannels, ", ", kMinBaseChannels, "..",
                              kMaxBaseChannels)},
      {workload, absl::StrCat("GroupNorm groups, default ", kDefaultGroups)},
      {workload, absl::StrCat("gradient accumulation (default ", kDefaultGradAccum)},
      {workload, absl::StrCat("(default ", kDefaultMetricsTopK, ")")},
      {workload, absl::StrCat("the duration spread (default ", kDefaultMetricsLaunches, ", 1..", kMaxMetricsLaunches,
                              ")")},
      {workload, absl::StrCat("(percent, default ", kDefaultMetricsCoveragePct, ", ", kMinMetricsCoveragePct,
                              "..100)")},
      {workload, absl::StrCat("metrics_max_signatures (default ", kDefaultMetricsMaxSignatures, ", 1..",
                              kMaxMetricsMaxSignatures, ")")},
      {workload, absl::StrCat("(default ", kDefaultOverheadPairs, "; 0 = skip)")},
  };
}

std::vector<Statement> ReadmeStatements() {
  const std::string server = "docs/server.md", client = "docs/cli.md", queries = "docs/queries.md";
  return {
      {server, absl::StrCat("| study name / cancel reason / agent name / ids | ", kMaxStudyNameChars, " / ",
                            kMaxCancelReasonChars, " / ", kMaxAgentNameChars, " / ", kMaxIdChars, " characters |")},
      {server, absl::StrCat("| presets / targets / repeats / attempts per study | ", kMaxPresets, " / ", kMaxTargets,
                            " / ", kMaxRepeats, " / ", kMaxAttempts, " |")},
      {server, absl::StrCat("| jobs per study (presets × targets × repeats) | ", kMaxJobsPerStudy, " |")},
      {server, absl::StrCat("| volume | ", kMinVolume, "..", kMaxVolume, " voxels per side |")},
      {server, absl::StrCat("`limit` 1..", kMaxStudiesLimit, " (50)")},
      {server, absl::StrCat("`limit` 1..", kMaxRunsLimit, " (100)")},
      {client, absl::StrCat("(1..", kMaxPresets, " known presets, no duplicates)")},
      {client, absl::StrCat("`--repeats 1..", kMaxRepeats, "`, `--max-attempts 1..", kMaxAttempts,
                            "`, `--run-timeout-s 1..", kMaxRunTimeoutS, "`")},
      {client, absl::StrCat("`--name` at most ", kMaxStudyNameChars, " characters")},
      {client, absl::StrCat("`studies [--limit 1..", kMaxStudiesLimit, "]`")},
      {client, absl::StrCat("[--limit 1..", kMaxRunsLimit, "]`")},
      {client, absl::StrCat("[--top-categories 1..", kMaxTopCategories, "] [--top 1..", kMaxTopKernels, "]")},
      {client, absl::StrCat("(allowed ", kMinVolume, "..", kMaxVolume)},
      {queries, absl::StrCat("[--top-categories 1..", kMaxTopCategories, "] [--top 1..", kMaxTopKernels, "]")},
      {queries, absl::StrCat("(at most ", kMaxRunFilter, ";")},
      {queries, absl::StrCat("STUDY_B …`, at most ", kMaxComparedStudies, ";")},
      {queries, absl::StrCat("up to `--top` (", kDefaultTopKernels, ")")},
  };
}

TEST(RequestLimitsTest, ProtoCommentsStateTheCheckedLimits) {
  for (const Statement& s : ProtoStatements()) {
    EXPECT_THAT(Read(s.file), ::testing::HasSubstr(s.text)) << s.file << " should say: " << s.text;
  }
}

TEST(RequestLimitsTest, ReadmesStateTheCheckedLimits) {
  for (const Statement& s : ReadmeStatements()) {
    EXPECT_THAT(Read(s.file), ::testing::HasSubstr(s.text)) << s.file << " should say: " << s.text;
  }
}

}  // namespace
}  // namespace medprof::limits
