// libFuzzer target: the Nsight Compute CSV importer (common/ncu_csv.h) on arbitrary text.
// ParseNcuCsv must refuse bad input with INVALID_ARGUMENT and never crash; a table it accepts
// must hold its own invariants, and SummarizeNcu must either refuse it (INVALID_ARGUMENT) or
// produce shares within 0..1 and non-negative times.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/ncu_csv.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<medprof::ncu::NcuTable> table = medprof::ncu::ParseNcuCsv(text);
  if (!table.ok()) {
    if (table.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
    return 0;
  }
  for (const auto& row : table->rows) {
    if (row.size() != table->columns.size()) std::abort();
  }
  if (table->row_lines.size() != table->rows.size()) std::abort();
  absl::StatusOr<medprof::ncu::NcuRun> run = medprof::ncu::SummarizeNcu(*table);
  if (!run.ok()) {
    if (run.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
    return 0;
  }
  if (run->gpu_time_ns < 0 || run->launches <= 0) std::abort();
  for (const auto& m : run->metrics) {
    if (m.name.rfind("share.", 0) == 0 && !(m.value >= -1e-9 && m.value <= 1 + 1e-9)) std::abort();
  }
  for (std::string_view word : {std::string_view("1,234.5"), text.substr(0, 64)}) {
    std::optional<double> v = medprof::ncu::ParseNcuNumber(word);
    if (v.has_value() && !std::isfinite(*v)) std::abort();
  }
  return 0;
}
