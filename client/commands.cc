#include "client/commands.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "client/format.h"
#include "client/models.h"
#include "client/import_ncu.h"
#include "client/progress.h"
#include "client/query_format.h"
#include "client/roofline_view.h"
#include "client/report/report.h"
#include "common/file_util.h"
#include "common/kernel_taxonomy.h"
#include "common/ncu_csv.h"
#include "common/result_stream.h"
#include "common/token_text.h"

namespace medprof::client {
namespace {

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

// A field the user typed that the server refused (INVALID_ARGUMENT: a target selector, a name)
// is a usage error like the fields the CLI checks itself: exit 1. Anything else: exit 2.
int ServerError(const CliIo& io, const absl::Status& s) {
  *io.err << "medprof: " << s.message() << "\n";
  return s.code() == absl::StatusCode::kInvalidArgument ? kExitUsage : kExitServer;
}

// A query command's whole output: the server's answer through `format`, or the error.
template <typename Response, typename Format>
int PrintOr(const CliIo& io, const absl::StatusOr<Response>& r, Format format) {
  if (!r.ok()) return ServerError(io, r.status());
  *io.out << format(*r);
  return kExitOk;
}

// The end of `submit --wait`: the study's comparison table, or why there is none.
void PrintComparison(MedprofClient& client, const std::string& study_id, const CliIo& io) {
  v1::CompareRequest request;
  request.set_study_id(study_id);
  absl::StatusOr<v1::CompareResponse> r = client.Compare(request);
  if (!r.ok()) {
    *io.err << "medprof: no comparison: " << r.status().message() << "\n";
    return;
  }
  if (r->cells().empty()) {
    *io.err << "medprof: no comparison: no job of study " << study_id << " succeeded with measured steps\n";
    return;
  }
  *io.out << "\n" << FormatCompare(*r, OutputFormat::kTable);
}

// Follows a study to its end, prints its final state (and with `compare`, the comparison) and
// reports failed jobs.
int WatchToEnd(MedprofClient& client, const std::string& study_id, OutputFormat format,
               const std::vector<std::string>& warnings, const CliIo& io, const WatchPolicy& policy,
               bool compare = false) {
  absl::StatusOr<v1::Study> study = client.GetStudy(study_id);
  if (!study.ok()) return ServerError(io, study.status());

  // The block keeps a row free for the summary line and one for the cursor.
  ProgressView view(io.err, io.err_is_tty, io.width, io.height > 0 ? std::max(3, io.height - 2) : 0);
  view.Start(study_id, study->jobs());
  if (study->state() != v1::STUDY_ACTIVE && study->state() != v1::STUDY_STATE_UNSPECIFIED) {
    // Already over: no events to wait for.
  } else {
    int failures_in_a_row = 0;
    absl::Duration backoff = policy.first_backoff;
    while (true) {
      absl::Status s = client.WatchStudy(study_id, [&](const v1::StudyEvent& e) {
        if (view.OnEvent(e)) {
          failures_in_a_row = 0;
          backoff = policy.first_backoff;
        }
      });
      if (s.ok()) break;
      if (s.code() != absl::StatusCode::kUnavailable || failures_in_a_row >= policy.max_reconnects) {
        view.Finish();
        return ServerError(io, s);
      }
      ++failures_in_a_row;
      view.Note(absl::StrCat("medprof: ", s.message(), "; reconnecting in ", absl::FormatDuration(backoff),
                             " (", failures_in_a_row, "/", policy.max_reconnects, ")"));
      absl::SleepFor(backoff);
      backoff = std::min(backoff * 2, policy.max_backoff);
    }
  }
  view.Finish();

  absl::StatusOr<v1::Study> final_state = client.GetStudy(study_id);
  if (!final_state.ok()) return ServerError(io, final_state.status());
  *io.out << FormatStudy(*final_state, format, warnings);
  if (compare && format == OutputFormat::kTable) PrintComparison(client, study_id, io);
  io.out->flush();
  int failed = 0;
  for (const v1::Job& j : final_state->jobs()) {
    if (j.state() != v1::JOB_FAILED) continue;
    ++failed;
    *io.err << "medprof: job " << j.job_id() << " (" << j.preset() << ", " << TargetLabel(j.target())
            << ") failed: " << (j.error().empty() ? "(no cause reported)" : j.error()) << "\n";
  }
  return failed > 0 ? kExitJobFailed : kExitOk;
}

int DoSubmit(const SubmitCommand& cmd, MedprofClient& client, const CliIo& io, const WatchPolicy& policy) {
  v1::SubmitStudyRequest request = cmd.request;
  if (request.config().has_model()) {
    // The job carries the model's hash, never this machine's path: agents fetch it by hash.
    absl::StatusOr<v1::ModelRef> model = DeliverModel(client, request.config().model(), *io.err);
    if (!model.ok()) return ServerError(io, model.status());
    *request.mutable_config()->mutable_model() = *std::move(model);
  }
  absl::StatusOr<v1::SubmitStudyResponse> r = client.SubmitStudy(request);
  if (!r.ok()) return ServerError(io, r.status());
  // JSON keeps warnings in its document; table and CSV print them to stderr.
  if (cmd.format != OutputFormat::kJson) {
    for (const std::string& w : r->warnings()) *io.err << "medprof: warning: " << w << "\n";
  }
  // With --wait, JSON and CSV print one document at the end; the table also says what was queued,
  // unless the live block on the terminal says it (a printed "N jobs queued" went stale above it).
  if (!cmd.wait || (cmd.format == OutputFormat::kTable && !io.err_is_tty)) {
    *io.out << FormatSubmit(*r, cmd.format);
    io.out->flush();
  }
  if (!cmd.wait) return kExitOk;
  return WatchToEnd(client, r->study_id(), cmd.format, {r->warnings().begin(), r->warnings().end()}, io,
                    policy, cmd.compare);
}

// Writes the HTML report to the file (common/file_util.h's durable write: a temporary beside it,
// renamed when complete, so a failed run never leaves half a report) or to stdout for "-".
int DoReport(const ReportCommand& c, MedprofClient& client, const CliIo& io) {
  report::ReportOptions options;
  options.baseline_preset = c.baseline_preset;
  options.baseline_gpu = c.baseline_gpu;
  options.phase = c.phase;
  options.top_kernels = c.top_kernels;
  absl::StatusOr<report::ReportInput> input =
      report::CollectReport(client, c.study_id, options, absl::ToUnixMillis(absl::Now()));
  if (!input.ok()) return ServerError(io, input.status());
  if (!input->compare_error.empty()) *io.err << "medprof: warning: " << input->compare_error << "\n";
  const std::string html = report::RenderHtmlReport(*input);
  if (c.output == "-") {
    *io.out << html;
    return kExitOk;
  }
  if (absl::Status w = WriteFileDurably(c.output, html, 0644); !w.ok()) {
    *io.err << "medprof: --output: " << w.message() << "\n";
    return kExitUsage;
  }
  *io.out << "report " << c.output << ": " << input->compare.cells_size() << " cells, " << input->runs.size()
          << " runs, " << html.size() << " bytes\n";
  return kExitOk;
}

// `export RUN`: the run's timeline as a Chrome trace, or its tables as CSV / JSON, to stdout or
// a file (written whole, then renamed into place).
int DoExport(const ExportCommand& c, MedprofClient& client, const CliIo& io) {
  std::string text;
  if (c.export_format == ExportFormat::kChromeTrace) {
    absl::StatusOr<v1::GetTimelineResponse> t = client.GetTimeline(c.run_id);
    if (!t.ok()) return ServerError(io, t.status());
    text = FormatChromeTrace(*t);
  } else {
    absl::StatusOr<v1::Run> run = client.GetRun(c.run_id);
    if (!run.ok()) return ServerError(io, run.status());
    text = FormatRunExport(*run,
                           c.export_format == ExportFormat::kCsv ? OutputFormat::kCsv : OutputFormat::kJson);
  }
  if (c.output.empty() || c.output == "-") {
    *io.out << text;
    return kExitOk;
  }
  if (absl::Status w = WriteFileDurably(c.output, text, 0644); !w.ok()) {
    *io.err << "medprof: --output: " << w.message() << "\n";
    return kExitUsage;
  }
  *io.err << "medprof: wrote " << c.output << " (" << text.size() << " bytes)\n";
  return kExitOk;
}

// `roofline`: the runs (one, or the study's succeeded ones) with their signatures when asked, then
// the roofline of each computed here (client/roofline_view.h).
int DoRoofline(const RooflineCommand& c, MedprofClient& client, const CliIo& io) {
  const RooflineOptions o{c.phase, c.level, c.signatures};
  std::vector<std::string> ids;
  if (!c.run_id.empty()) {
    ids.push_back(c.run_id);
  } else {
    v1::ListRunsRequest req;
    req.set_study_id(c.study_id);
    req.set_limit(10000);
    absl::StatusOr<v1::ListRunsResponse> listed = client.ListRuns(req);
    if (!listed.ok()) return ServerError(io, listed.status());
    for (const v1::Run& r : listed->runs()) {
      if (r.state() == v1::RUN_SUCCEEDED) ids.push_back(r.run_id());
    }
  }
  std::vector<v1::Run> runs;
  std::vector<RooflineRow> rows;
  for (const std::string& id : ids) {
    absl::StatusOr<v1::Run> run = client.GetRun(id);
    if (!run.ok()) return ServerError(io, run.status());
    std::vector<v1::SignatureShare> signatures;
    if (c.signatures) {
      v1::ListKernelsRequest req;
      req.set_run_id(id);
      req.set_signatures(true);
      absl::StatusOr<v1::ListKernelsResponse> k = client.ListKernels(req);
      if (!k.ok()) return ServerError(io, k.status());
      signatures.assign(k->signatures().begin(), k->signatures().end());
    }
    std::vector<RooflineRow> mine = RooflineRows(*run, signatures, o);
    rows.insert(rows.end(), std::make_move_iterator(mine.begin()), std::make_move_iterator(mine.end()));
    runs.push_back(*std::move(run));
  }
  *io.out << FormatRoofline(runs, rows, o, c.format);
  return kExitOk;
}

// Largest export read (the raw page of a few thousand launches with every section is ~50 MB).
constexpr size_t kMaxImportFileBytes = size_t{1} << 30;

// One request carries the whole file: the server's default receive limit.
constexpr size_t kMaxUploadBytes = size_t{16} << 20;

// The ids of a run the server stored from an upload or an import, as the JSON output starts.
template <typename Response>
nlohmann::ordered_json StoredRunIds(const Response& r) {
  nlohmann::ordered_json j;
  j["run_id"] = r.run_id();
  j["study_id"] = r.study_id();
  j["job_id"] = r.job_id();
  return j;
}

int DoUpload(const UploadCommand& c, MedprofClient& client, const CliIo& io) {
  absl::StatusOr<std::unique_ptr<ResultReader>> reader = ResultReader::OpenFile(c.file);
  if (!reader.ok()) {
    *io.err << "medprof: upload: " << reader.status().message() << "\n";
    return kExitUsage;
  }
  v1::UploadRunRequest request;
  request.set_study_id(c.study_id);
  for (;;) {
    v1::WorkerMessage m;
    absl::StatusOr<bool> more = (*reader)->Next(&m);
    if (!more.ok()) {
      *io.err << "medprof: upload: " << c.file << ": record " << request.messages_size() << ": "
              << more.status().message() << "\n";
      return kExitUsage;
    }
    if (!*more) break;
    *request.add_messages() = std::move(m);
  }
  if (request.ByteSizeLong() > kMaxUploadBytes) {
    *io.err << "medprof: upload: " << c.file << " holds " << request.ByteSizeLong()
            << " bytes of records (allowed at most " << kMaxUploadBytes << " in one upload)\n";
    return kExitUsage;
  }
  absl::StatusOr<v1::UploadRunResponse> r = client.UploadRun(request);
  if (!r.ok()) return ServerError(io, r.status());
  if (c.format == OutputFormat::kJson) {
    nlohmann::ordered_json j = StoredRunIds(*r);
    j["preset"] = r->preset();
    j["gpu"] = r->gpu();
    j["steps"] = r->steps();
    *io.out << j.dump(2) << "\n";
  } else {
    *io.out << "run " << r->run_id() << " (" << r->preset() << " on " << r->gpu() << ", " << r->steps()
            << " steps) stored in study " << r->study_id() << "\n";
  }
  return kExitOk;
}

int DoImportNcu(const ImportNcuCommand& c, MedprofClient& client, const CliIo& io) {
  // Streamed: one record in memory at a time, the aggregate bounded by the request size, and a
  // stop at the line where the export can no longer fit one request.
  std::ifstream file;
  if (c.file != "-") {
    file.open(c.file, std::ios::binary);
    if (!file) {
      *io.err << "medprof: import-ncu: cannot read '" << c.file << "': " << std::strerror(errno) << "\n";
      return kExitUsage;
    }
  }
  std::istream& in = c.file == "-" ? *io.in : file;
  absl::StatusOr<ncu::NcuRun> run =
      ncu::SummarizeNcuStream(in, kMaxImportFileBytes, kMaxImportRequestBytes, c.steps);
  if (!run.ok()) {
    *io.err << "medprof: import-ncu: " << c.file << ": " << run.status().message() << "\n";
    return kExitUsage;
  }
  const std::string base = c.file == "-" ? "stdin" : c.file.substr(c.file.find_last_of('/') + 1);
  absl::StatusOr<ImportPlan> plan = BuildImportRequest(*run, c, base);
  if (!plan.ok()) {
    *io.err << "medprof: import-ncu: " << plan.status().message() << "\n";
    return kExitUsage;
  }
  if (c.format == OutputFormat::kTable) {
    for (const std::string& w : plan->warnings) *io.err << "medprof: warning: " << w << "\n";
  }
  absl::StatusOr<v1::ImportRunResponse> r = client.ImportRun(plan->request);
  if (!r.ok()) return ServerError(io, r.status());
  if (c.format == OutputFormat::kJson) {
    nlohmann::ordered_json j = StoredRunIds(*r);
    j["launches"] = run->launches;
    j["kernels"] = r->kernels();
    j["metrics"] = r->metrics();
    j["gpu_time_ns"] = run->gpu_time_ns;
    j["step_ms"] = r->step_ms();
    j["warnings"] = plan->warnings;
    *io.out << j.dump(2) << "\n";
  } else {
    *io.out << r->run_id() << "\n";
    *io.err << "medprof: imported " << run->launches << " launches of " << r->kernels() << " kernels ("
            << r->metrics() << " metric values, " << absl::StrFormat("%.3f", r->step_ms())
            << " ms per step) as run " << r->run_id() << " of study " << r->study_id() << "\n";
  }
  return kExitOk;
}

}  // namespace

void ClassifyLines(std::istream& in, std::ostream& out) {
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t tab = line.find('\t');
    const std::string name(absl::StripAsciiWhitespace(line.substr(0, tab)));
    std::string op;
    if (tab != std::string::npos) {
      const std::string rest = line.substr(tab + 1);
      op = std::string(absl::StripAsciiWhitespace(rest.substr(0, rest.find('\t'))));
    }
    const taxonomy::Category c =
        name.empty() ? taxonomy::Category::kOther : taxonomy::ClassifyKernel(name, op);
    out << taxonomy::CategoryName(c) << '\t' << line << '\n';
  }
  out.flush();
}

int Execute(const Command& command, MedprofClient* client, const CliIo& io, const WatchPolicy& policy) {
  return std::visit(
      Overloaded{
          [&](const PrintCommand& c) {
            *io.out << c.text;
            return kExitOk;
          },
          [&](const ClassifyCommand& c) {
            if (c.names.empty()) {
              ClassifyLines(*io.in, *io.out);
            } else {
              for (const std::string& n : c.names) {
                *io.out << taxonomy::CategoryName(taxonomy::ClassifyKernel(n)) << '\t' << n << '\n';
              }
            }
            return kExitOk;
          },
          [&](const SubmitCommand& c) { return DoSubmit(c, *client, io, policy); },
          [&](const WatchCommand& c) { return WatchToEnd(*client, c.study_id, c.format, {}, io, policy); },
          [&](const StudiesCommand& c) {
            return PrintOr(io, client->ListStudies(c.request),
                           [&](const auto& r) { return FormatStudies(r, c.format); });
          },
          [&](const RunsCommand& c) {
            return PrintOr(io, client->ListRuns(c.request),
                           [&](const auto& r) { return FormatRuns(r, c.format); });
          },
          [&](const RunCommand& c) {
            return PrintOr(io, client->GetRun(c.run_id),
                           [&](const auto& r) { return FormatRun(r, c.format); });
          },
          [&](const AgentsCommand& c) {
            return PrintOr(io, client->ListAgents(), [&](const auto& r) {
              return FormatAgents(r, c.format, absl::ToUnixMillis(absl::Now()));
            });
          },
          [&](const ModelsCommand& c) {
            return PrintOr(io, client->ListModels(), [&](const auto& r) { return FormatModels(r, c.format); });
          },
          [&](const DeleteModelCommand& c) {
            auto r = client->DeleteModel(c.sha256);
            if (!r.ok()) return ServerError(io, r.status());
            *io.out << "model " << c.sha256 << " removed from the project"
                    << (r->file_removed() ? " (no project names it: the file is gone)" : "") << "\n";
            return kExitOk;
          },
          [&](const CancelCommand& c) {
            auto r = client->CancelStudy(c.request);
            if (!r.ok()) return ServerError(io, r.status());
            *io.out << "study " << c.request.study_id() << ": " << r->jobs_cancelled()
                    << (r->jobs_cancelled() == 1 ? " job" : " jobs") << " cancelled\n";
            return kExitOk;
          },
          [&](const CompareCommand& c) {
            return PrintOr(io, client->Compare(c.request),
                           [&](const auto& r) { return FormatCompare(r, c.format); });
          },
          [&](const ReportCommand& c) { return DoReport(c, *client, io); },
          [&](const ImportNcuCommand& c) { return DoImportNcu(c, *client, io); },
          [&](const UploadCommand& c) { return DoUpload(c, *client, io); },
          [&](const KernelsCommand& c) {
            return PrintOr(io, client->ListKernels(c.request),
                           [&](const auto& r) { return FormatKernels(r, c.format, c.all); });
          },
          [&](const DiffCommand& c) {
            return PrintOr(io, client->DiffRuns(c.request),
                           [&](const auto& r) { return FormatDiff(r, c.format); });
          },
          [&](const ExportCommand& c) { return DoExport(c, *client, io); },
          [&](const RooflineCommand& c) { return DoRoofline(c, *client, io); },
      },
      command.body);
}

int RunCli(const std::vector<std::string>& argv, const EnvLookup& env, const CliIo& io,
           const WatchPolicy& policy) {
  absl::StatusOr<Command> command = ParseCommandLine(argv, env);
  if (!command.ok()) {
    *io.err << "medprof: " << command.status().message() << "\n"
            << "Run 'medprof --help' (or 'medprof <command> --help') for usage.\n";
    return kExitUsage;
  }
  if (std::holds_alternative<PrintCommand>(command->body) ||
      std::holds_alternative<ClassifyCommand>(command->body)) {
    return Execute(*command, nullptr, io, policy);
  }
  if (!command->connection.token_file.empty()) {
    if (std::string w = token::TokenFileWarning(command->connection.token_file); !w.empty())
      *io.err << "medprof: " << w << "\n";
  }
  absl::StatusOr<std::unique_ptr<MedprofClient>> client = MedprofClient::Connect(command->connection);
  if (!client.ok()) {
    *io.err << "medprof: " << client.status().message() << "\n";
    return kExitUsage;
  }
  const int code = Execute(*command, client->get(), io, policy);
  io.out->flush();
  return code;
}

}  // namespace medprof::client
