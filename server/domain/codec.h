// JSON text <-> protobuf messages for the documents the store keeps as text (a job's
// WorkloadConfig, a run's Environment and RunSummary, progress reports), and small helpers to
// make ids.
//
// JSON uses protobuf's canonical mapping with the .proto field names, so the DB can be read
// with SQLite's json_extract(). Unknown fields are ignored on read (a newer server's rows stay
// readable). Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "google/protobuf/message.h"

namespace medprof::server {

// The message as JSON ("{}" for an empty message).
std::string ToJson(const google::protobuf::Message& message);
// Parses `json` into `out` ("" leaves `out` empty). DATA_LOSS naming `what` when unreadable.
absl::Status FromJson(const std::string& json, google::protobuf::Message* out, std::string_view what);

// A fresh random id: prefix + "-" + 12 lowercase hex digits ("st-3fa9c02b71de").
std::string NewId(std::string_view prefix);

}  // namespace medprof::server
