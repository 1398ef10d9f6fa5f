#include "client/models.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/text_table.h"

namespace medprof::client {
namespace {

std::string Created(int64_t unix_ms) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%S", absl::FromUnixMillis(unix_ms), absl::UTCTimeZone());
}

}  // namespace

absl::StatusOr<v1::ModelRef> DeliverModel(MedprofClient& client, const v1::ModelRef& local, std::ostream& err) {
  v1::ModelRef ref = local;
  ref.clear_local_path();
  absl::StatusOr<v1::HasModelResponse> has = client.HasModel(local.sha256());
  if (!has.ok()) return has.status();
  const std::string name = absl::StrCat("model ", local.file_name(), " (", local.sha256().substr(0, 12), ")");
  if (has->present()) {
    err << "medprof: " << name << " is already on the server: nothing uploaded\n";
    return ref;
  }
  absl::StatusOr<v1::UploadModelResponse> up = client.UploadModel(local.local_path(), local, has->resume_offset());
  if (!up.ok()) return up.status();
  err << "medprof: " << name << ": uploaded " << up->bytes_received() << " bytes";
  if (has->resume_offset() > 0) err << " (resumed at byte " << has->resume_offset() << ")";
  err << "\n";
  return ref;
}

std::string FormatModels(const v1::ListModelsResponse& r, OutputFormat format) {
  switch (format) {
    case OutputFormat::kJson: {
      nlohmann::ordered_json o;
      o["models"] = nlohmann::ordered_json::array();
      for (const v1::ModelInfo& m : r.models()) {
        o["models"].push_back({{"sha256", m.sha256()},
                               {"file_name", m.file_name()},
                               {"size_bytes", m.size_bytes()},
                               {"project", m.project()},
                               {"uploader", m.uploader()},
                               {"created_unix_ms", m.created_unix_ms()}});
      }
      return o.dump(2) + "\n";
    }
    case OutputFormat::kCsv: {
      std::string out = CsvLine({"sha256", "file_name", "size_bytes", "project", "uploader", "created_unix_ms"});
      for (const v1::ModelInfo& m : r.models()) {
        out += CsvLine({m.sha256(), m.file_name(), absl::StrCat(m.size_bytes()), m.project(), m.uploader(),
                        absl::StrCat(m.created_unix_ms())});
      }
      return out;
    }
    case OutputFormat::kTable:
      break;
  }
  if (r.models().empty()) return "no models (medprof submit --model FILE uploads one)\n";
  TextTable t({"SHA256", "FILE", "BYTES", "PROJECT", "UPLOADER", "CREATED (UTC)"},
              {Align::kLeft, Align::kLeft, Align::kRight});
  for (const v1::ModelInfo& m : r.models()) {
    t.AddRow({m.sha256(), m.file_name(), absl::StrCat(m.size_bytes()), m.project(),
              m.uploader().empty() ? "-" : m.uploader(), Created(m.created_unix_ms())});
  }
  return t.Render();
}

}  // namespace medprof::client
