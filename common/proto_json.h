// The one JSON face of medprof's messages, for people and scripts: what `medprof run
// --format json`, `medprof export`, `medprof-agent --print-inventory` and `medprof-worker
// --describe/--decode` print.
//
// Field names are the proto's (snake_case, never the camelCase of the default proto JSON
// mapping), and enum values are spelled as the tables spell them (EnumSpelling): "train",
// "succeeded", "cpu" — never "PHASE_TRAIN" or "RUN_SUCCEEDED". Hand-built JSON documents of
// the CLI use EnumSpelling (through the client's *Name functions) for the same words.
//
// Pure functions; thread-safe.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"

namespace medprof {

// The table's word for an enum value: its name without the prefix every value of its enum
// shares, in lower case (JOB_SUCCEEDED -> "succeeded", PHASE_TRAIN -> "train",
// DEVICE_KIND_CPU -> "cpu"); *_UNSPECIFIED -> "unspecified", except DEVICE_KIND_UNSPECIFIED,
// which the command line calls "auto". nullptr (a number the enum does not know) -> "unknown".
std::string EnumSpelling(const google::protobuf::EnumValueDescriptor* value);

// EnumSpelling of `number` in `type`.
std::string EnumSpelling(const google::protobuf::EnumDescriptor* type, int number);

struct JsonStyle {
  bool pretty = true;           // two-space indentation; else one line
  bool print_defaults = false;  // also fields at their default (0, "", false, the 0 enum value)
};

// `message` as JSON text ending in "\n". INTERNAL only if protobuf cannot print it.
absl::StatusOr<std::string> MessageToJson(const google::protobuf::Message& message, JsonStyle style = {});

}  // namespace medprof
