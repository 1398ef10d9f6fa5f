// proto <-> domain conversion of ImportRun (`medprof import-ncu`), kept beside convert.h so the
// import's messages stay in one place. Field by field, no validation (RunImporter checks and
// names the field). Pure functions; thread-safe.
#pragma once

#include "medprof/v1/service.pb.h"
#include "server/domain/run_import.h"

namespace medprof::server::rpc {

ImportRunRequest FromProto(const v1::ImportRunRequest& r);
v1::ImportRunResponse ToProto(const ImportRunResult& r);

}  // namespace medprof::server::rpc
