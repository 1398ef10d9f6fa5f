// Nsight Compute CSV import: the parser of `ncu --csv --page raw` exports and the mapping of
// their Perfworks metrics to medprof's metric names (docs/metrics.md, "Nsight Compute import").
//
// The raw page is one CSV table: a header row of column names ("ID", "Process ID",
// "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size", "Grid Size",
// "Device", "CC", then one Perfworks metric per column, e.g. "gpu__time_duration.sum"), a units
// row (empty for the identification columns: "", ..., "nsecond", "%", "Kbyte"), then one row per
// profiled kernel launch. Every field may be quoted (RFC 4180: "" inside quotes is a quote);
// numbers may carry thousands separators ("1,234,567.5") and "n/a" marks a metric the chip
// could not collect. Lines ncu writes around the table when stdout is captured ("==PROF== ...",
// "==WARNING== ...") are skipped wherever they appear between records.
//
// ParseNcuCsv only splits and checks the table (every row as wide as the header, a header that
// holds "ID" and "Kernel Name"); SummarizeNcu turns it into what medprof stores for one run:
// kernels aggregated by name (launch count, total/min/max duration, first launch's grid and
// block, registers, shared memory, theoretical occupancy; category from common/kernel_taxonomy.h)
// and metric values:
//   scope "signature:<id>": per launch signature (kernel + grid + block + dynamic shared memory):
//     every numeric metric column of its launches (not the device properties device__attribute_*,
//     c2clink__*, nvlink__*, numa__*, nor NVTX range columns), converted to medprof units
//     (NormalizeUnit) and named by MapNcuMetric (unknown columns keep their Perfworks name as
//     "ncu.<name>"); counters (time, cycles, instructions, bytes, ...) are the mean over the
//     signature's launches, rates and percentages the duration-weighted mean;
//   scope "kernel:<name>": the aggregate over all the kernel's launches per step, built from its
//     signatures by common/kernel_aggregate.h (counters summed and divided by `steps`, rates
//     duration-weighted, coverage_pct 100, launches_per_step, signatures.profiled);
//   scope "run": gpu_time_ns (sum of durations), share.<category> (0..1 of gpu_time_ns),
//     metrics.kernels_profiled, each mapped counter summed over all launches under its medprof
//     name (sm_cycles, warp_instructions, dram_bytes, ...) and each mapped rate or percentage as
//     "<name>.avg", the duration-weighted mean over all launches.
//
// No dependency beyond Abseil and the kernel taxonomy (no gRPC, SQLite or protobuf), so a fuzzer
// can drive ParseNcuCsv + SummarizeNcu on arbitrary bytes: they never crash, and refuse bad
// input with INVALID_ARGUMENT naming the line (1-based) and column. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <istream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace medprof::ncu {

// Upper bounds that keep a hostile input from exhausting memory.
inline constexpr size_t kMaxColumns = 20000;
inline constexpr size_t kMaxRows = 1000000;
inline constexpr size_t kMaxFieldBytes = 64 * 1024;

// The table of one `ncu --csv --page raw` export, fields unquoted, otherwise as written.
struct NcuTable {
  std::vector<std::string> columns;            // header row
  std::vector<std::string> units;              // units row; all "" when the export has none
  std::vector<std::vector<std::string>> rows;  // one per kernel launch, each columns.size() wide
  std::vector<int> row_lines;                  // 1-based line where each row starts (messages)

  // Index of the column with exactly this name; -1 when absent.
  int ColumnIndex(std::string_view name) const;
};

// Splits and checks an export. INVALID_ARGUMENT when there is no header row with "ID" and
// "Kernel Name" (with a hint when it is the details page: export with --page raw), a row is
// narrower or wider than the header, a quote is not closed, or a limit above is exceeded.
absl::StatusOr<NcuTable> ParseNcuCsv(std::string_view text);

// A number as ncu prints it: optional quotes already removed, thousands separators (",")
// allowed, exponent allowed ("4.0e-05"). nullopt for "", "n/a" and anything not a finite number.
std::optional<double> ParseNcuNumber(std::string_view text);

// A value in medprof's units: time becomes ns ("usecond" x1e3 -> "ns"), SI prefixes are removed
// from bytes, cycles, instructions, hertz and the like ("Kbyte" x1e3 -> "byte", "Gbyte/second"
// x1e9 -> "byte/second"), "%" and "" stay. Units it does not know are kept as they are.
struct UnitValue {
  double value = 0;
  std::string unit;
};
UnitValue NormalizeUnit(double value, std::string_view unit);

// How one Perfworks metric is stored.
struct MetricMapping {
  std::string name;   // medprof name ("duration_ns", "stall.wait", ...) or "ncu.<perfworks name>"
  std::string unit;   // medprof unit of the name ("ns", "%", "cycles", ...); the normalized ncu unit for ncu.*
  bool known = false; // false for ncu.*
  int priority = 0;   // several Perfworks metrics may feed one name: the lowest priority present wins
};
// The medprof name of a Perfworks metric per docs/metrics.md; `normalized_unit` is what
// NormalizeUnit gave for its column (used as the unit of unknown metrics).
MetricMapping MapNcuMetric(std::string_view perfworks_name, std::string_view normalized_unit);

struct NcuMetric {
  std::string scope;  // "run" | "kernel:<name>"
  std::string name;
  double value = 0;
  std::string unit;
};

struct NcuKernel {
  std::string name;      // "Kernel Name" as exported
  std::string category;  // taxonomy category name (by kernel name: ncu knows no LibTorch op)
  int64_t count = 0;     // launches
  int64_t total_ns = 0;  // sum of gpu__time_duration
  int64_t min_ns = 0;
  int64_t max_ns = 0;
  std::vector<int> grid;   // x, y, z of the first launch ("Grid Size"); empty when unreadable
  std::vector<int> block;  // x, y, z of the first launch ("Block Size")
  int registers = 0;       // launch__registers_per_thread of the first launch
  int shared_bytes = 0;    // static + dynamic shared memory per block of the first launch
  double theoretical_occupancy = 0;  // 0..1, sm__maximum_warps_per_active_cycle_pct / 100
};

// Launches of one kernel with one grid, block and dynamic shared memory: the finest grouping an
// export allows (it has no LibTorch op or input shapes).
struct NcuSignature {
  std::string id;  // common/kernel_aggregate.h SignatureId(kernel, "", "", "", grid, block, dynamic smem)
  std::string kernel;
  std::vector<int> grid;
  std::vector<int> block;
  int dynamic_shared_bytes = 0;
  int64_t count = 0;
  int64_t total_ns = 0;
  int64_t min_ns = 0;
  int64_t max_ns = 0;
};

struct NcuRun {
  std::vector<NcuKernel> kernels;  // largest total_ns first, then by name
  std::vector<NcuSignature> signatures;  // per kernel in the order above, largest first
  std::vector<NcuMetric> metrics;  // run scope first, then per kernel in the order above
  int64_t launches = 0;
  int64_t gpu_time_ns = 0;
  // From the first launch (empty when the export lacks them).
  std::string host;                 // "Host Name"
  std::string process;              // "Process Name"
  std::string compute_capability;   // "CC", e.g. "9.0"
  std::string device_name;          // device__attribute_display_name when exported
  std::vector<std::string> warnings;  // e.g. metric columns that were n/a on every launch
};

// Aggregates a parsed table as described in the header comment. INVALID_ARGUMENT when it has no
// launch rows, no gpu__time_duration.sum column (kernel times are what compare needs), or a
// launch whose duration is not a number.
// `steps`: the workload steps the export covers (>= 1): kernel-scope counters are per step.
absl::StatusOr<NcuRun> SummarizeNcu(const NcuTable& table, int steps = 1);

// ParseNcuCsv + SummarizeNcu over a stream, without holding the table: one record is held at a
// time, so memory grows with the kernels and metric values aggregated, not with the launches.
// It stops — INVALID_ARGUMENT naming the line — once more than `max_stream_bytes` have been
// read, or once the aggregate's mapped part would need more than `max_request_bytes` in an
// import request; past `max_request_bytes` in all it first drops the unmapped ncu.* values
// (with a warning). Otherwise the same result and refusals as the two functions above.
absl::StatusOr<NcuRun> SummarizeNcuStream(std::istream& in, size_t max_stream_bytes, size_t max_request_bytes,
                                          int steps = 1);

}  // namespace medprof::ncu
