// The command-line flags of a WorkloadConfig, defined once for `medprof submit` and
// `medprof-worker`: one name per field (the proto field name with dashes), one help text with
// its default and allowed range, one conversion from the typed text to the field.
//
//   WorkloadFlags flags;                 // must outlive the parse and Apply
//   flags.Register(&app);                // adds every flag, in the group kWorkloadFlagGroup
//   app.parse(argc, argv);
//   MEDPROF_RETURN_IF_ERROR(flags.Apply(&config));   // only the flags typed are written
//
// Every field but `preset` has a flag (submit takes a list of presets, the worker one); a test
// holds that to the proto. Old spellings (`--lr`, `--threads`) stay accepted as aliases and
// say so in --help. Apply refuses text that is not of the field's type (INVALID_ARGUMENT
// naming the flag and the allowed values); the ranges themselves are config::Validate's.
//
// Not thread-safe while CLI11 parses into it; Apply is const.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "medprof/v1/workload.pb.h"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace medprof::config {

// The help-section title the workload flags are listed under, on submit and on the worker.
inline constexpr char kWorkloadFlagGroup[] = "Workload flags (the same on medprof submit and medprof-worker)";

class WorkloadFlags {
 public:
  WorkloadFlags() = default;
  WorkloadFlags(const WorkloadFlags&) = delete;  // CLI11 keeps pointers into this object
  WorkloadFlags& operator=(const WorkloadFlags&) = delete;

  // Adds every workload flag to `app`. Call once per object.
  void Register(CLI::App* app);

  // Writes the fields whose flags were typed into *config; leaves the others alone.
  absl::Status Apply(v1::WorkloadConfig* config) const;

 private:
  std::vector<std::string> text_;      // one per flag of the table, in its order
  std::vector<CLI::Option*> options_;  // the registered options, same order
};

}  // namespace medprof::config
