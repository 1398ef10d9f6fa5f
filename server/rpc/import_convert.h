// proto <-> domain conversion of ImportRun (`medprof import-ncu`) and UploadRun (`medprof
// upload`), kept beside convert.h so the runs-from-outside messages stay in one place. Field by field, no validation (RunImporter checks and
// names the field). Pure functions; thread-safe.
#pragma once

#include "medprof/v1/service.pb.h"
#include "server/domain/run_import.h"
#include "server/domain/run_upload.h"

namespace medprof::server::rpc {

ImportRunRequest FromProto(const v1::ImportRunRequest& r);
v1::ImportRunResponse ToProto(const ImportRunResult& r);
UploadRunRequest FromProto(const v1::UploadRunRequest& r);
v1::UploadRunResponse ToProto(const UploadRunResult& r);

}  // namespace medprof::server::rpc
