// User models on the CLI side (issue 21): `medprof submit --model FILE` delivers the file to the
// server once per content hash before the study names it; `medprof models` lists them.
//
// Pure functions over a MedprofClient; thread-safe as the client is.
#pragma once

#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "client/cli.h"
#include "client/client.h"
#include "medprof/v1/models.pb.h"
#include "medprof/v1/workload.pb.h"

namespace medprof::client {

// Makes sure the server holds `local` (filled by --model: sha256, file_name, size_bytes,
// local_path) for the caller's project: asks first and uploads only when it is missing,
// resuming an interrupted upload at the offset the server holds. Says on `err` which it was
// ("already on the server: nothing uploaded" or the bytes sent). Returns the reference a
// submission carries: the same without local_path.
absl::StatusOr<v1::ModelRef> DeliverModel(MedprofClient& client, const v1::ModelRef& local, std::ostream& err);

// `medprof models`: hash, file name, size, project, uploader, created (table, json, csv).
std::string FormatModels(const v1::ListModelsResponse& r, OutputFormat format);

}  // namespace medprof::client
