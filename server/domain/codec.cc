#include "server/domain/codec.h"

#include <mutex>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/util/json_util.h"

namespace medprof::server {

std::string ToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string out;
  // Printing a well-formed message cannot fail (no Any fields in medprof's messages).
  (void)google::protobuf::util::MessageToJsonString(message, &out, options);
  return out;
}

absl::Status FromJson(const std::string& json, google::protobuf::Message* out, std::string_view what) {
  out->Clear();
  if (json.empty()) return absl::OkStatus();
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  const auto s = google::protobuf::util::JsonStringToMessage(json, out, options);
  if (!s.ok()) {
    return absl::DataLossError(absl::StrCat("stored ", absl::string_view(what.data(), what.size()),
                                            " is not readable JSON: ", s.ToString()));
  }
  return absl::OkStatus();
}

std::string NewId(std::string_view prefix) {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  uint64_t v;
  {
    std::lock_guard<std::mutex> lock(mu);
    v = rng();
  }
  return absl::StrFormat("%s-%012x", absl::string_view(prefix.data(), prefix.size()), v & 0xffffffffffffULL);
}

}  // namespace medprof::server
