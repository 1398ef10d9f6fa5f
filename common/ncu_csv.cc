#include "common/ncu_csv.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <istream>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/kernel_aggregate.h"
#include "common/kernel_taxonomy.h"
#include "common/metric_names.h"
#include "common/roofline.h"
#include "common/status.h"

namespace medprof::ncu {
namespace {

// Debian 12's Abseil has its own string_view type: the public API takes std::string_view and
// everything inside works on absl::string_view.
absl::string_view A(std::string_view s) { return absl::string_view(s.data(), s.size()); }

absl::Status Bad(int line, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("ncu csv line ", line, ": ", what));
}

// Reads CSV records one at a time, skipping ncu's "==PROF==" style lines between records.
class RecordReader {
 public:
  explicit RecordReader(absl::string_view text, int first_line = 1) : text_(text), line_(first_line) {}

  // Fills `fields` with the next record; false at the end. `line` = where it starts.
  absl::StatusOr<bool> Next(std::vector<std::string>* fields, int* line) {
    fields->clear();
    // Skip blank lines and ncu's own log lines (they never start inside a quoted field).
    while (pos_ < text_.size()) {
      const size_t eol = text_.find('\n', pos_);
      const absl::string_view l = text_.substr(pos_, eol == absl::string_view::npos ? absl::string_view::npos : eol - pos_);
      const absl::string_view stripped = absl::StripAsciiWhitespace(l);
      if (stripped.empty() || absl::StartsWith(stripped, "==")) {
        pos_ = eol == absl::string_view::npos ? text_.size() : eol + 1;
        ++line_;
        continue;
      }
      break;
    }
    if (pos_ >= text_.size()) return false;
    *line = line_;
    std::string field;
    bool quoted = false;     // inside quotes
    bool was_quoted = false; // the current field started with a quote
    while (true) {
      if (pos_ >= text_.size()) {
        if (quoted) return Bad(*line, "a quoted field is not closed before the end of the file");
        fields->push_back(std::move(field));
        break;
      }
      const char c = text_[pos_++];
      if (quoted) {
        if (c == '"') {
          if (pos_ < text_.size() && text_[pos_] == '"') {
            field += '"';
            ++pos_;
          } else {
            quoted = false;
          }
        } else {
          if (c == '\n') ++line_;
          field += c;
        }
      } else if (c == '"') {
        if (!field.empty() && !was_quoted) {
          // A quote in the middle of an unquoted field: keep it as text (lenient, like ncu's readers).
          field += c;
        } else {
          quoted = true;
          was_quoted = true;
        }
      } else if (c == ',') {
        fields->push_back(std::move(field));
        field.clear();
        was_quoted = false;
      } else if (c == '\n') {
        ++line_;
        fields->push_back(std::move(field));
        break;
      } else if (c == '\r') {
        // CRLF line ends: the \n that follows ends the record.
      } else {
        field += c;
      }
      if (field.size() > kMaxFieldBytes) {
        return Bad(*line, absl::StrCat("a field is longer than ", kMaxFieldBytes, " bytes"));
      }
      if (fields->size() > kMaxColumns) {
        return Bad(*line, absl::StrCat("more than ", kMaxColumns, " fields"));
      }
    }
    return true;
  }

 private:
  absl::string_view text_;
  size_t pos_ = 0;
  int line_ = 1;
};

// Records from a stream, holding one record at a time: whole lines are gathered until their
// quotes balance (a record may span lines inside quotes), then split by RecordReader.
class StreamRecords {
 public:
  StreamRecords(std::istream& in, size_t max_bytes) : in_(in), max_bytes_(max_bytes) {}

  absl::StatusOr<bool> Next(std::vector<std::string>* fields, int* line) {
    while (true) {
      if (reader_.has_value()) {
        absl::StatusOr<bool> more = reader_->Next(fields, line);
        if (!more.ok() || *more) return more;
        reader_.reset();
      }
      pending_.clear();
      int lines = 0;
      size_t quotes = 0;
      std::string l;
      while (std::getline(in_, l)) {
        if (first_ && absl::StartsWith(l, "\xEF\xBB\xBF")) l.erase(0, 3);
        first_ = false;
        bytes_ += l.size() + 1;
        if (bytes_ > max_bytes_) {
          return Bad(next_line_ + lines, absl::StrCat("the export is longer than ", max_bytes_, " bytes; stopped here"));
        }
        quotes += static_cast<size_t>(std::count(l.begin(), l.end(), '"'));
        pending_ += l;
        pending_ += '\n';
        ++lines;
        if (quotes % 2 == 0) break;
      }
      if (lines == 0) return false;
      reader_.emplace(pending_, next_line_);
      next_line_ += lines;
    }
  }

 private:
  std::istream& in_;
  const size_t max_bytes_;
  size_t bytes_ = 0;
  bool first_ = true;
  int next_line_ = 1;
  std::string pending_;
  std::optional<RecordReader> reader_;
};

// The raw page's structure, one record at a time: the header (the first record whose first
// field is "ID"), the units row right after it (an empty ID), then launch rows as wide as the
// header, each handed to `on_row`.
class TableParser {
 public:
  using RowFn = std::function<absl::Status(std::vector<std::string>& row, int line)>;

  absl::Status Feed(std::vector<std::string>& fields, int line, const RowFn& on_row) {
    if (columns_.empty()) {
      if (fields.empty() || fields[0] != "ID") return absl::OkStatus();
      return Header(fields, line);
    }
    if (fields.size() != columns_.size()) {
      return Bad(line, absl::StrCat(fields.size(), " fields, but the header (line ", header_line_, ") has ",
                                    columns_.size()));
    }
    if (first_ && fields[0].empty()) {
      units_ = fields;
      first_ = false;
      return absl::OkStatus();
    }
    first_ = false;
    if (rows_ >= kMaxRows) return Bad(line, absl::StrCat("more than ", kMaxRows, " kernel launches"));
    ++rows_;
    return on_row(fields, line);
  }
  // After the last record: the header must have been seen.
  absl::Status Finish() const {
    if (!columns_.empty()) return absl::OkStatus();
    return absl::InvalidArgumentError(
        "ncu csv: no header row starting with \"ID\" (expected the output of `ncu --csv --page raw`, "
        "or `ncu --import FILE.ncu-rep --csv --page raw`)");
  }
  const std::vector<std::string>& columns() const { return columns_; }
  const std::vector<std::string>& units() const { return units_; }

 private:
  absl::Status Header(const std::vector<std::string>& fields, int line) {
    NcuTable t;
    t.columns = fields;
    if (t.ColumnIndex("Metric Name") >= 0 && t.ColumnIndex("Metric Value") >= 0) {
      return Bad(line,
                 "this is the details page (one row per metric: \"Metric Name\", \"Metric Value\"); export "
                 "with `ncu --csv --page raw` (one row per kernel launch)");
    }
    if (t.ColumnIndex("Kernel Name") < 0) {
      return Bad(line, "the header has no \"Kernel Name\" column (expected `ncu --csv --page raw` output)");
    }
    std::set<std::string> seen;
    for (size_t i = 0; i < fields.size(); ++i) {
      if (fields[i].empty()) return Bad(line, absl::StrCat("column ", i + 1, " has an empty name"));
      if (!seen.insert(fields[i]).second) {
        return Bad(line, absl::StrCat("column ", i + 1, " '", fields[i], "' appears twice"));
      }
    }
    columns_ = fields;
    units_.assign(columns_.size(), "");
    header_line_ = line;
    return absl::OkStatus();
  }

  std::vector<std::string> columns_, units_;
  int header_line_ = 0;
  bool first_ = true;
  size_t rows_ = 0;
};

// --------------------------------------------------------------------------- units

struct Prefix {
  char c;
  double scale;
};
constexpr Prefix kBigPrefixes[] = {{'K', 1e3}, {'k', 1e3}, {'M', 1e6}, {'G', 1e9}, {'T', 1e12}, {'P', 1e15}};
constexpr Prefix kSmallPrefixes[] = {{'n', 1e-9}, {'u', 1e-6}, {'m', 1e-3}};

const std::set<std::string, std::less<>>& BaseUnits() {
  static const auto* units = new std::set<std::string, std::less<>>{
      "byte", "cycle", "inst", "hz", "sector", "request", "warp", "thread", "block", "register",
      "transaction", "wavefront", "sample", "pass", "instruction", "flop", "op"};
  return *units;
}

// One unit without '/': returns scale to the SI base and the base name; false when unknown.
bool SplitPrefix(absl::string_view part, double* scale, std::string* base) {
  if (part.empty()) return false;
  // Short forms some ncu versions print ("ns", "us", "KB").
  static const auto* kShort = new std::map<std::string, std::pair<double, std::string>>{
      {"ns", {1e-9, "second"}}, {"us", {1e-6, "second"}}, {"ms", {1e-3, "second"}}, {"s", {1, "second"}},
      {"B", {1, "byte"}},       {"KB", {1e3, "byte"}},    {"MB", {1e6, "byte"}},    {"GB", {1e9, "byte"}},
      {"TB", {1e12, "byte"}},   {"Hz", {1, "hz"}},        {"KHz", {1e3, "hz"}},     {"MHz", {1e6, "hz"}},
      {"GHz", {1e9, "hz"}}};
  if (auto it = kShort->find(std::string(part)); it != kShort->end()) {
    *scale = it->second.first;
    *base = it->second.second;
    return true;
  }
  if (part == "second") {
    *scale = 1;
    *base = "second";
    return true;
  }
  if (BaseUnits().contains(std::string(part))) {
    *scale = 1;
    *base = std::string(part);
    return true;
  }
  const absl::string_view rest = part.substr(1);
  if (rest == "second") {
    for (const Prefix& p : kSmallPrefixes) {
      if (part[0] == p.c) {
        *scale = p.scale;
        *base = "second";
        return true;
      }
    }
  }
  if (BaseUnits().contains(std::string(rest)) || rest == "second") {
    for (const Prefix& p : kBigPrefixes) {
      if (part[0] == p.c) {
        *scale = p.scale;
        *base = std::string(rest);
        return true;
      }
    }
  }
  return false;
}

// --------------------------------------------------------------------------- metric names

// Columns an export may carry that the metric catalog (common/metric_names.h) has no entry for:
// the worker derives these from their parts instead of counting them.
struct ExportOnly {
  const char* perfworks;
  const char* name;
  const char* unit;
};
constexpr ExportOnly kExportOnly[] = {
    {"dram__bytes.sum", "dram_bytes", "bytes"},
};

// Families: prefix + <x> + suffix -> name_prefix + <x>.
struct Family {
  const char* prefix;
  const char* suffix;
  const char* name_prefix;
  const char* unit;
};
constexpr Family kFamilies[] = {
    {"smsp__average_warps_issue_stalled_", "_per_issue_active.ratio", "stall.", "cycles/issue"},
    {"sm__inst_executed_pipe_", ".sum", "inst_pipe.", "inst"},
    {"smsp__sass_thread_inst_executed_op_", "_pred_on.sum", "sass.", "thread inst"},
};


// "(256, 1, 1)" -> {256, 1, 1}; empty when unreadable.
std::vector<int> ParseDim3(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  if (!absl::ConsumePrefix(&text, "(") || !absl::ConsumeSuffix(&text, ")")) return {};
  std::vector<int> out;
  // Components are separated by ", "; a component may carry thousands separators ("2,048").
  for (absl::string_view part : absl::StrSplit(text, ", ")) {
    const std::optional<double> v = ParseNcuNumber(std::string_view(part.data(), part.size()));
    if (!v.has_value() || *v < 0 || *v > 2147483647.0 || *v != std::floor(*v)) return {};
    out.push_back(static_cast<int>(*v));
  }
  if (out.size() != 3) return {};
  return out;
}

int64_t ClampToInt64(double v) {
  if (!(v > 0)) return 0;
  if (v >= 9.2e18) return INT64_MAX / 2;
  return static_cast<int64_t>(std::llround(v));
}

// a + b, saturating at INT64_MAX (both are >= 0 here): a hostile export cannot overflow.
int64_t SaturatingAdd(int64_t a, int64_t b) { return a > INT64_MAX - b ? INT64_MAX : a + b; }

int ClampToInt(double v) {
  if (!(v > 0)) return 0;
  if (v >= 2e9) return 2000000000;
  return static_cast<int>(std::lround(v));
}

// What one metric column becomes.
struct ColumnPlan {
  int index = -1;
  std::string perfworks;
  double scale = 1;       // ncu unit -> normalized unit
  MetricMapping mapping;
  bool counter = false;
};

struct Acc {
  double weighted = 0;  // sum of value (counters) or value * duration (rates)
  double weight = 0;    // launches (counters) or duration (rates)
  int source_priority = 1 << 30;
  std::string unit;
  bool counter = false;
};

}  // namespace

int NcuTable::ColumnIndex(std::string_view name) const {
  for (size_t i = 0; i < columns.size(); ++i) {
    if (columns[i] == name) return static_cast<int>(i);
  }
  return -1;
}

absl::StatusOr<NcuTable> ParseNcuCsv(std::string_view input) {
  absl::string_view text = A(input);
  // A UTF-8 byte order mark is not part of the first column name.
  if (absl::StartsWith(text, "\xEF\xBB\xBF")) text.remove_prefix(3);
  RecordReader reader(text);
  TableParser parser;
  NcuTable t;
  std::vector<std::string> fields;
  int line = 0;
  const TableParser::RowFn keep = [&](std::vector<std::string>& row, int row_line) {
    t.rows.push_back(std::move(row));
    t.row_lines.push_back(row_line);
    return absl::OkStatus();
  };
  while (true) {
    absl::StatusOr<bool> more = reader.Next(&fields, &line);
    if (!more.ok()) return more.status();
    if (!*more) break;
    MEDPROF_RETURN_IF_ERROR(parser.Feed(fields, line, keep));
  }
  MEDPROF_RETURN_IF_ERROR(parser.Finish());
  t.columns = parser.columns();
  t.units = parser.units();
  return t;
}

std::optional<double> ParseNcuNumber(std::string_view input) {
  const absl::string_view text = absl::StripAsciiWhitespace(A(input));
  if (text.empty() || text.size() > 64) return std::nullopt;
  std::string digits;
  digits.reserve(text.size());
  for (char c : text) {
    if (c != ',') digits += c;
  }
  double v = 0;
  if (!absl::SimpleAtod(digits, &v) || !std::isfinite(v)) return std::nullopt;
  return v;
}

UnitValue NormalizeUnit(double value, std::string_view unit_text) {
  const absl::string_view unit = absl::StripAsciiWhitespace(A(unit_text));
  if (unit.empty() || unit == "%") return {value, std::string(unit)};
  const std::vector<absl::string_view> parts = absl::StrSplit(unit, '/');
  if (parts.size() > 2) return {value, std::string(unit)};
  double num_scale = 1, den_scale = 1;
  std::string num, den;
  if (!SplitPrefix(parts[0], &num_scale, &num)) return {value, std::string(unit)};
  if (parts.size() == 2 && !SplitPrefix(parts[1], &den_scale, &den)) return {value, std::string(unit)};
  if (parts.size() == 1 && num == "second") return {value * num_scale * 1e9, "ns"};
  if (parts.size() == 1) return {value * num_scale, num};
  return {value * num_scale / den_scale, absl::StrCat(num, "/", den)};
}

MetricMapping MapNcuMetric(std::string_view perfworks_name, std::string_view normalized_unit) {
  const absl::string_view perfworks = A(perfworks_name);
  // The catalog's candidates in order of preference: where several columns feed one name, the
  // earlier candidate wins (priority = its place among the entry's candidates).
  for (const metrics::MetricEntry& e : metrics::MetricCatalog()) {
    for (size_t i = 0; i < e.candidates.size(); ++i) {
      if (perfworks == e.candidates[i]) return {e.name, e.unit, true, static_cast<int>(i)};
    }
  }
  for (const ExportOnly& k : kExportOnly) {
    if (perfworks == k.perfworks) return {k.name, k.unit, true, 0};
  }
  for (const Family& f : kFamilies) {
    absl::string_view rest = perfworks;
    if (absl::ConsumePrefix(&rest, f.prefix) && absl::ConsumeSuffix(&rest, f.suffix) && !rest.empty() &&
        rest.find('.') == absl::string_view::npos) {
      return {absl::StrCat(f.name_prefix, rest), f.unit, true, 0};
    }
  }
  return {absl::StrCat("ncu.", perfworks), std::string(A(normalized_unit)), false, 0};
}

namespace {

// One launch signature of an export: its launches and per-metric accumulators.
struct SignatureAcc {
  NcuSignature sig;
  std::map<std::string, Acc> metrics;
};

std::array<int32_t, 3> Dim3Of(const std::vector<int>& v) {
  std::array<int32_t, 3> out = {0, 0, 0};
  for (size_t i = 0; i < v.size() && i < 3; ++i) out[i] = v[i];
  return out;
}

SignatureAcc& CountSignature(std::map<std::string, SignatureAcc>& all, const std::string& kernel,
                             const std::vector<int>& grid, const std::vector<int>& block, int dynamic_shared_bytes,
                             int64_t ns) {
  const std::array<int32_t, 3> g = Dim3Of(grid), b = Dim3Of(block);
  const int32_t ga[3] = {g[0], g[1], g[2]}, ba[3] = {b[0], b[1], b[2]};
  const std::string id = aggregate::SignatureId(kernel, "", "", "", ga, ba, dynamic_shared_bytes);
  auto [it, fresh] = all.try_emplace(id);
  NcuSignature& s = it->second.sig;
  if (fresh) {
    s = NcuSignature{id, kernel, grid, block, dynamic_shared_bytes, 0, 0, ns, ns};
  }
  ++s.count;
  s.total_ns = SaturatingAdd(s.total_ns, ns);
  s.min_ns = std::min(s.min_ns, ns);
  s.max_ns = std::max(s.max_ns, ns);
  return it->second;
}

// The per-launch value of an accumulator (counters: mean over launches; rates: duration-weighted);
// NaN for rates of zero-duration launches and values too large for a double.
double PerLaunch(const Acc& a) { return a.weight > 0 ? a.weighted / a.weight : std::nan(""); }

// The signature scopes (per-launch values) and the kernel scopes (the aggregate over every launch
// per step, common/kernel_aggregate.h: every launch measured, so coverage is 100 %).
void AddSignatureLevels(const std::map<std::string, SignatureAcc>& signatures, int steps, NcuRun* run) {
  std::map<std::string, std::vector<const SignatureAcc*>> by_kernel;
  for (const auto& [id, sa] : signatures) by_kernel[sa.sig.kernel].push_back(&sa);
  for (const NcuKernel& k : run->kernels) {
    std::vector<aggregate::SignatureSample> samples;
    std::map<std::string, const Acc*> kinds;  // name -> an accumulator (unit, counter)
    std::vector<const SignatureAcc*>& mine = by_kernel[k.name];
    std::sort(mine.begin(), mine.end(), [](const SignatureAcc* a, const SignatureAcc* b) {
      return a->sig.total_ns != b->sig.total_ns ? a->sig.total_ns > b->sig.total_ns : a->sig.id < b->sig.id;
    });
    for (const SignatureAcc* sa : mine) {
      run->signatures.push_back(sa->sig);
      aggregate::SignatureSample& s = samples.emplace_back();
      s.launches_per_step = static_cast<double>(sa->sig.count) / steps;
      s.trace_ns_per_step = static_cast<double>(sa->sig.total_ns) / steps;
      for (const auto& [name, a] : sa->metrics) {
        const double v = PerLaunch(a);
        if (!std::isfinite(v)) continue;
        s.values[name] = v;
        kinds.emplace(name, &a);
        run->metrics.push_back({absl::StrCat("signature:", sa->sig.id), name, v, a.unit});
      }
    }
    const auto is_counter = [&kinds](const std::string& name) {
      auto it = kinds.find(name);
      return it != kinds.end() && it->second->counter;
    };
    const std::string scope = absl::StrCat("kernel:", k.name);
    for (const auto& [name, v] : aggregate::AggregateKernel(samples, static_cast<double>(k.total_ns) / steps, is_counter)) {
      if (!std::isfinite(v)) continue;
      auto it = kinds.find(name);
      run->metrics.push_back({scope, name, v, it != kinds.end() ? it->second->unit : name == "coverage_pct" ? "%" : ""});
    }
  }
}

// SummarizeNcu one launch row at a time (see the header comment), so that a stream need not be
// held: memory grows with the kernels and metric values aggregated, not with the launches.
// `t` supplies the header and units (its rows are not read) and must outlive the summarizer.
class Summarizer {
 public:
  static absl::StatusOr<Summarizer> Create(const NcuTable& t, int steps) {
    Summarizer z(t);
    z.steps_ = std::max(1, steps);
    if (z.name_col_ < 0) return absl::InvalidArgumentError("ncu csv: no \"Kernel Name\" column");
    if (z.dur_col_ < 0) {
      return absl::InvalidArgumentError(
          "ncu csv: no gpu__time_duration.sum column: kernel times are what medprof compares; profile with "
          "`--metrics gpu__time_duration.sum,...` or a section set that includes it (e.g. --set basic)");
    }
    z.Plan();
    return z;
  }
  absl::Status Add(const std::vector<std::string>& row, int line);
  absl::StatusOr<NcuRun> Finish();
  // Bytes the known (mapped) part of the result would take in a request, roughly.
  size_t known_bytes() const { return known_bytes_; }
  // Stops keeping unmapped (ncu.*) metric values, with a warning; they are the first thing left
  // out of a request that would be too large.
  void DropUnknown();
  size_t unknown_bytes() const { return unknown_bytes_; }

 private:
  explicit Summarizer(const NcuTable& t)
      : t_(&t), name_col_(t.ColumnIndex("Kernel Name")), dur_col_(t.ColumnIndex("gpu__time_duration.sum")) {}
  void Plan();
  // The run's host, process, compute capability and device, from its first row.
  void NoteRunIdentity(const std::vector<std::string>& row);
  // A kernel's record from its first launch (`ns` long): category, launch shape, resources.
  NcuKernel NewKernel(const std::string& name, const std::vector<std::string>& row, int64_t ns) const;
  // Counts one launch of `name` in its kernel record.
  void AddLaunch(const std::string& name, const std::vector<std::string>& row, int64_t ns);
  // Adds the row's metric values to its launch signature and to the run's metrics.
  void AddMetrics(const std::string& name, const std::vector<std::string>& row, double ns, int64_t ins);
  void AddRooflineParts(std::map<std::string, Acc>& km, const std::string& name,
                        const std::map<std::string, std::pair<int, double>>& launch, double ns);
  void AddValue(std::map<std::string, Acc>& metrics, const std::string& scope_prefix, const MetricMapping& m,
                double value, double ns, bool counter);

  const NcuTable* t_;
  int name_col_, dur_col_;
  int block_col_ = -1, grid_col_ = -1, regs_col_ = -1, smem_static_col_ = -1, smem_dyn_col_ = -1, occ_col_ = -1,
      display_col_ = -1;
  bool has_dram_sum_ = false;
  double dur_scale_ = 1;
  std::vector<ColumnPlan> plans_;
  NcuRun run_;
  std::map<std::string, size_t> kernel_index_;
  std::map<std::string, SignatureAcc> signatures_;  // id -> launches and metrics
  int steps_ = 1;
  std::map<std::string, Acc> run_metrics_;
  std::map<int, int> numeric_seen_;  // column -> launches with a number
  size_t known_bytes_ = 0, unknown_bytes_ = 0;
  bool drop_unknown_ = false;
};

void AddToAcc(Acc& a, double v, double duration, bool counter, int priority, const std::string& unit) {
  if (priority > a.source_priority) return;
  if (priority < a.source_priority) a = Acc{0, 0, priority, unit, counter};
  if (counter) {
    a.weighted += v;
    a.weight += 1;
  } else {
    a.weighted += v * duration;
    a.weight += duration;
  }
}

void Summarizer::Plan() {
  static const std::set<std::string> kIdentity = {
      "ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Kernel Time", "Context", "Stream",
      "Block Size", "Grid Size", "Device", "CC", "Section Name", "Function Name", "Demangled Name",
      "Mangled Name", "Estimated Speedup", "Estimated Speedup Type"};
  // Device properties and NVTX range columns describe the machine or the range, not a kernel.
  auto not_metric = [](const std::string& c) {
    return absl::StartsWith(c, "device__attribute_") || absl::StartsWith(c, "c2clink__") ||
           absl::StartsWith(c, "nvlink__") || absl::StartsWith(c, "numa__") || absl::StrContains(c, ':') ||
           absl::StrContains(c, ' ');
  };
  const NcuTable& t = *t_;
  for (size_t i = 0; i < t.columns.size(); ++i) {
    if (kIdentity.contains(t.columns[i]) || not_metric(t.columns[i])) continue;
    ColumnPlan p;
    p.index = static_cast<int>(i);
    p.perfworks = t.columns[i];
    const UnitValue one = NormalizeUnit(1.0, t.units[i]);
    p.scale = one.value;
    p.mapping = MapNcuMetric(p.perfworks, one.unit);
    p.counter = aggregate::IsCounterUnit(p.mapping.known ? p.mapping.unit : one.unit, p.perfworks);
    plans_.push_back(std::move(p));
  }
  dur_scale_ = NormalizeUnit(1.0, t.units[dur_col_]).value;
  block_col_ = t.ColumnIndex("Block Size");
  grid_col_ = t.ColumnIndex("Grid Size");
  regs_col_ = t.ColumnIndex("launch__registers_per_thread");
  smem_static_col_ = t.ColumnIndex("launch__shared_mem_per_block_static");
  smem_dyn_col_ = t.ColumnIndex("launch__shared_mem_per_block_dynamic");
  occ_col_ = t.ColumnIndex("sm__maximum_warps_per_active_cycle_pct");
  display_col_ = t.ColumnIndex("device__attribute_display_name");
  has_dram_sum_ = t.ColumnIndex("dram__bytes.sum") >= 0;
}

// Adds to a kernel's metric, counting what a new entry costs in a request.
void Summarizer::AddValue(std::map<std::string, Acc>& metrics, const std::string& kernel, const MetricMapping& m,
                          double value, double ns, bool counter) {
  if (!m.known && drop_unknown_) return;
  auto [it, inserted] = metrics.try_emplace(m.name);
  if (inserted) (m.known ? known_bytes_ : unknown_bytes_) += 24 + kernel.size() + m.name.size() + m.unit.size();
  AddToAcc(it->second, value, ns, counter, m.priority, m.unit);
}

void Summarizer::DropUnknown() {
  if (drop_unknown_) return;
  drop_unknown_ = true;
  for (auto& [id, sa] : signatures_) {
    std::erase_if(sa.metrics, [](const auto& entry) { return absl::StartsWith(entry.first, "ncu."); });
  }
  unknown_bytes_ = 0;
  run_.warnings.push_back("the export is too large to send whole: its ncu.* (unmapped) metrics were left out");
}

// A row's cell at `col` (empty when the export has no such column), and its number, if any.
absl::string_view Cell(const std::vector<std::string>& row, int col) {
  return col < 0 ? absl::string_view() : absl::string_view(row[col]);
}
std::optional<double> Number(const std::vector<std::string>& row, int col) {
  return col < 0 ? std::nullopt : ParseNcuNumber(row[col]);
}

void Summarizer::NoteRunIdentity(const std::vector<std::string>& row) {
  run_.host = std::string(Cell(row, t_->ColumnIndex("Host Name")));
  run_.process = std::string(Cell(row, t_->ColumnIndex("Process Name")));
  run_.compute_capability = std::string(Cell(row, t_->ColumnIndex("CC")));
  run_.device_name = std::string(Cell(row, display_col_));
}

NcuKernel Summarizer::NewKernel(const std::string& name, const std::vector<std::string>& row, int64_t ns) const {
  NcuKernel k;
  k.name = name;
  k.category = std::string(taxonomy::CategoryName(taxonomy::ClassifyKernel(name)));
  k.min_ns = ns;
  k.max_ns = ns;
  k.grid = ParseDim3(Cell(row, grid_col_));
  k.block = ParseDim3(Cell(row, block_col_));
  if (auto v = Number(row, regs_col_)) k.registers = ClampToInt(*v);
  double smem = 0;
  for (int col : {smem_static_col_, smem_dyn_col_}) {
    if (col < 0) continue;
    if (auto v = Number(row, col)) smem += NormalizeUnit(*v, t_->units[col]).value;
  }
  k.shared_bytes = ClampToInt(smem);
  if (auto v = Number(row, occ_col_)) k.theoretical_occupancy = std::clamp(*v / 100.0, 0.0, 1.0);
  return k;
}

void Summarizer::AddLaunch(const std::string& name, const std::vector<std::string>& row, int64_t ns) {
  auto [it, inserted] = kernel_index_.emplace(name, run_.kernels.size());
  if (inserted) {
    known_bytes_ += 96 + name.size();
    run_.kernels.push_back(NewKernel(name, row, ns));
  }
  NcuKernel& k = run_.kernels[it->second];
  ++k.count;
  k.total_ns = SaturatingAdd(k.total_ns, ns);
  k.min_ns = std::min(k.min_ns, ns);
  k.max_ns = std::max(k.max_ns, ns);
}

// The roofline's work and traffic of one launch, made from its parts (roofline::DeriveWorkAndTraffic)
// where the export has no column of that name itself.
void Summarizer::AddRooflineParts(std::map<std::string, Acc>& km, const std::string& name,
                                  const std::map<std::string, std::pair<int, double>>& launch, double ns) {
  std::map<std::string, double> values;
  for (const auto& [metric, pv] : launch) values[metric] = pv.second;
  roofline::DeriveWorkAndTraffic(&values);
  for (const auto& [derived, unit] : roofline::DerivedWorkUnits()) {
    auto v = values.find(derived);
    if (v == values.end() || launch.count(derived)) continue;
    AddValue(km, name, MetricMapping{derived, unit, true, 0}, v->second, ns, true);
    AddToAcc(run_metrics_[derived], v->second, ns, true, 0, unit);
  }
}

void Summarizer::AddMetrics(const std::string& name, const std::vector<std::string>& row, double ns, int64_t ins) {
  const int dynamic_smem = smem_dyn_col_ < 0 ? 0
                                             : ClampToInt(NormalizeUnit(Number(row, smem_dyn_col_).value_or(0),
                                                                        t_->units[smem_dyn_col_]).value);
  SignatureAcc& sa = CountSignature(signatures_, name, ParseDim3(Cell(row, grid_col_)),
                                    ParseDim3(Cell(row, block_col_)), dynamic_smem, ins);
  std::map<std::string, Acc>& km = sa.metrics;
  std::optional<double> dram_read, dram_write;
  std::map<std::string, std::pair<int, double>> launch;  // known name -> (priority, value) of this launch
  for (const ColumnPlan& p : plans_) {
    std::optional<double> v = Number(row, p.index);
    if (!v.has_value()) continue;
    ++numeric_seen_[p.index];
    double value = *v * p.scale;
    if (p.mapping.unit == "%") value = std::clamp(value, 0.0, 100.0);
    AddValue(km, name, p.mapping, value, ns, p.counter);
    if (p.mapping.known) AddToAcc(run_metrics_[p.mapping.name], value, ns, p.counter, p.mapping.priority, p.mapping.unit);
    if (p.mapping.name == "dram_bytes_read") dram_read = value;
    if (p.mapping.name == "dram_bytes_write") dram_write = value;
    if (p.mapping.known) {
      auto [it, fresh] = launch.try_emplace(p.mapping.name, p.mapping.priority, value);
      if (!fresh && p.mapping.priority < it->second.first) it->second = {p.mapping.priority, value};
    }
  }
  AddRooflineParts(km, name, launch, ns);
  // dram_bytes = read + write when the export has no dram__bytes.sum of its own.
  if (dram_read && dram_write && !has_dram_sum_) {
    AddValue(km, name, MetricMapping{"dram_bytes", "bytes", true, 0}, *dram_read + *dram_write, ns, true);
    AddToAcc(run_metrics_["dram_bytes"], *dram_read + *dram_write, ns, true, 0, "bytes");
  }
}

absl::Status Summarizer::Add(const std::vector<std::string>& row, int line) {
  if (run_.launches == 0) NoteRunIdentity(row);
  const std::string name(Cell(row, name_col_));
  if (name.empty()) return Bad(line, "\"Kernel Name\" is empty");
  const std::optional<double> dur = Number(row, dur_col_);
  if (!dur.has_value() || *dur < 0) {
    return Bad(line, absl::StrCat("gpu__time_duration.sum '", Cell(row, dur_col_).substr(0, 64), "' is not a duration"));
  }
  const double ns = *dur * dur_scale_;
  const int64_t ins = ClampToInt64(ns);
  ++run_.launches;
  run_.gpu_time_ns = SaturatingAdd(run_.gpu_time_ns, ins);
  AddLaunch(name, row, ins);
  AddMetrics(name, row, ns, ins);
  return absl::OkStatus();
}

absl::StatusOr<NcuRun> Summarizer::Finish() {
  if (run_.launches == 0) {
    return absl::InvalidArgumentError("ncu csv: no kernel launches after the header (was anything profiled?)");
  }
  NcuRun& run = run_;
  for (const ColumnPlan& p : plans_) {
    if (numeric_seen_[p.index] == 0 && !t_->columns[p.index].empty() && p.index != display_col_) {
      // String-valued columns (device attributes, cache configs) are not metrics; say nothing
      // unless the column is a known metric that was n/a everywhere.
      if (p.mapping.known) {
        run.warnings.push_back(absl::StrCat(p.perfworks, ": no numeric value on any launch (n/a on this chip?)"));
      }
    }
  }
  std::stable_sort(run.kernels.begin(), run.kernels.end(), [](const NcuKernel& a, const NcuKernel& b) {
    return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.name < b.name;
  });

  // Run scope.
  run.metrics.push_back({"run", "gpu_time_ns", static_cast<double>(run.gpu_time_ns), "ns"});
  std::map<std::string, int64_t> by_category;
  for (const NcuKernel& k : run.kernels) by_category[k.category] = SaturatingAdd(by_category[k.category], k.total_ns);
  for (const auto& [category, ns] : by_category) {
    const double share = run.gpu_time_ns > 0 ? static_cast<double>(ns) / static_cast<double>(run.gpu_time_ns) : 0;
    run.metrics.push_back({"run", absl::StrCat("share.", category), share, ""});
  }
  run.metrics.push_back({"run", "metrics.kernels_profiled", static_cast<double>(run.kernels.size()), ""});
  for (const auto& [name, a] : run_metrics_) {
    if (a.weight <= 0 && a.counter) continue;
    if (!std::isfinite(a.weighted) || !std::isfinite(a.weight)) {
      run.warnings.push_back(absl::StrCat(name, ": the run total is not a finite number; left out"));
      continue;
    }
    if (a.counter) {
      run.metrics.push_back({"run", name, a.weighted, a.unit});
    } else if (a.weight > 0) {
      run.metrics.push_back({"run", absl::StrCat(name, ".avg"), a.weighted / a.weight, a.unit});
    }
  }
  AddSignatureLevels(signatures_, steps_, &run);
  run.warnings.push_back(absl::StrCat(
      "launch signatures: grouped by kernel + grid + block", smem_dyn_col_ >= 0 ? " + dynamic shared memory" : "",
      " (an ncu export has no LibTorch op or input shapes)",
      smem_dyn_col_ >= 0 ? "" : "; no launch__shared_mem_per_block_dynamic column"));
  return std::move(run_);
}

}  // namespace


absl::StatusOr<NcuRun> SummarizeNcu(const NcuTable& t, int steps) {
  if (t.rows.empty()) {
    return absl::InvalidArgumentError("ncu csv: no kernel launches after the header (was anything profiled?)");
  }
  MEDPROF_ASSIGN_OR_RETURN(Summarizer z, Summarizer::Create(t, steps));
  for (size_t r = 0; r < t.rows.size(); ++r) MEDPROF_RETURN_IF_ERROR(z.Add(t.rows[r], t.row_lines[r]));
  return z.Finish();
}

absl::StatusOr<NcuRun> SummarizeNcuStream(std::istream& in, size_t max_stream_bytes, size_t max_request_bytes,
                                          int steps) {
  StreamRecords records(in, max_stream_bytes);
  TableParser parser;
  NcuTable header;  // columns and units only: the rows are summarized as they come
  std::optional<Summarizer> z;
  const TableParser::RowFn summarize = [&](std::vector<std::string>& row, int line) -> absl::Status {
    if (!z.has_value()) {
      header.columns = parser.columns();
      header.units = parser.units();
      MEDPROF_ASSIGN_OR_RETURN(z, Summarizer::Create(header, steps));
    }
    MEDPROF_RETURN_IF_ERROR(z->Add(row, line));
    if (z->known_bytes() + z->unknown_bytes() > max_request_bytes) z->DropUnknown();
    if (z->known_bytes() > max_request_bytes) {
      return Bad(line, absl::StrCat("stopped here: the kernels and mapped metrics so far already need about ",
                                    z->known_bytes(), " bytes, more than one import carries (", max_request_bytes,
                                    "); export fewer metrics or kernels"));
    }
    return absl::OkStatus();
  };
  std::vector<std::string> fields;
  int line = 0;
  while (true) {
    absl::StatusOr<bool> more = records.Next(&fields, &line);
    if (!more.ok()) return more.status();
    if (!*more) break;
    MEDPROF_RETURN_IF_ERROR(parser.Feed(fields, line, summarize));
  }
  MEDPROF_RETURN_IF_ERROR(parser.Finish());
  if (!z.has_value()) {
    return absl::InvalidArgumentError("ncu csv: no kernel launches after the header (was anything profiled?)");
  }
  return z->Finish();
}

}  // namespace medprof::ncu
