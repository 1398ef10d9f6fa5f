// The `medprof` command line, parsed into a typed Command without touching the network.
//
// ParseCommandLine turns argv (and the environment, through an injected lookup) into one
// Command: the connection settings plus one command body (submit, watch, studies, runs, run,
// agents, models, cancel, compare, kernels classify) or a text to print (--help, --version). Every
// refusal is INVALID_ARGUMENT with a message naming the flag and its allowed values, e.g.
// "--format: 'xml' is not a format (allowed: table|json|csv)"; the caller exits 1 with it.
// Workload flags are checked with the same rules the server applies (common/workload_config.h),
// so a bad --volume is a usage error here, not a server refusal. Target selectors are passed
// through unparsed: the server owns their grammar.
//
// Pure functions apart from reading nothing but the injected environment; thread-safe.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/env.h"
#include "medprof/v1/service.pb.h"

namespace medprof::client {

// Address used when neither --server nor MEDPROF_SERVER is given.
inline constexpr char kDefaultServer[] = "127.0.0.1:7000";
// Deadline of unary calls when --timeout-s is not given (seconds).
inline constexpr int kDefaultTimeoutS = 30;
inline constexpr int kMaxTimeoutS = 3600;

enum class OutputFormat { kTable, kJson, kCsv };

// "table" | "json" | "csv".
std::string OutputFormatName(OutputFormat format);

// How to reach the server. Filled by ParseCommandLine.
struct ConnectionOptions {
  // HOST:PORT (IPv6 as [addr]:port), or unix:PATH. --server, else MEDPROF_SERVER, else
  // kDefaultServer.
  std::string server = kDefaultServer;
  // PEM file of the CA that signed the server certificate (--tls-ca, else MEDPROF_TLS_CA). Empty = system roots
  // when TLS is used. TLS is used for every non-loopback address, and for loopback when set.
  std::string tls_ca_file;
  // PEM client certificate chain and its private key, for servers that require client
  // certificates (mutual TLS): --tls-cert / --tls-key, else MEDPROF_TLS_CERT / MEDPROF_TLS_KEY.
  // Both or neither; they need TLS (--tls-ca on a loopback address). Default: none.
  std::string tls_cert_file;
  std::string tls_key_file;
  // Deadline of each unary call, seconds (--timeout-s, 1..3600, default 30). Streams
  // (watch) have no deadline.
  int timeout_s = kDefaultTimeoutS;
  // Bearer token sent as `authorization: Bearer <token>`: MEDPROF_TOKEN, else the first line
  // of the file named by MEDPROF_TOKEN_FILE (read when connecting). Never a flag: secrets do
  // not belong on command lines.
  std::string token;
  std::string token_file;
};

// `medprof submit`: the request exactly as typed (unset flags stay unset), plus --wait.
struct SubmitCommand {
  v1::SubmitStudyRequest request;
  bool wait = false;
  bool compare = true;  // --wait in table format ends with compare's table (--no-compare: not)
  OutputFormat format = OutputFormat::kTable;
};

// `medprof watch STUDY`.
struct WatchCommand {
  std::string study_id;
  OutputFormat format = OutputFormat::kTable;
};

// `medprof studies [--limit N]`.
struct StudiesCommand {
  v1::ListStudiesRequest request;
  OutputFormat format = OutputFormat::kTable;
};

// `medprof runs [--study S] [--job J] [--limit N]`.
struct RunsCommand {
  v1::ListRunsRequest request;
  OutputFormat format = OutputFormat::kTable;
};

// `medprof run RUN_ID` (table or json).
struct RunCommand {
  std::string run_id;
  OutputFormat format = OutputFormat::kTable;
};

// `medprof agents`.
struct AgentsCommand {
  OutputFormat format = OutputFormat::kTable;
};

// `medprof models [--format F]`: the user models of the caller's project.
struct ModelsCommand {
  OutputFormat format = OutputFormat::kTable;
};
// `medprof models delete SHA256` (admin tokens): the model leaves the caller's project.
struct DeleteModelCommand {
  std::string sha256;
};
// `medprof cancel STUDY [--reason TEXT]`.
struct CancelCommand {
  v1::CancelStudyRequest request;
};

// `medprof compare [STUDY] [--runs R,R..] [--baseline P] [--baseline-gpu G] [--phase P]
// [--top-categories N] [--top N]`: STUDY or --runs (or both) required.
struct CompareCommand {
  v1::CompareRequest request;
  OutputFormat format = OutputFormat::kTable;
};

// `medprof report STUDY -o FILE [--baseline P] [--baseline-gpu G] [--phase P] [--top N]`: the study's
// self-contained HTML report (client/report/report.h). FILE "-" = stdout.
struct ReportCommand {
  std::string study_id;
  std::string output;
  std::string baseline_preset;              // "" = server default
  std::string baseline_gpu;                 // --baseline-gpu: cross-GPU speedup chart; "" = none
  v1::Phase phase = v1::PHASE_UNSPECIFIED;  // unset = every phase
  int top_kernels = 10;                     // 1..50
};

// `medprof kernels RUN [--top N]`: the run's kernels by total GPU time, largest first.
struct KernelsCommand {
  v1::ListKernelsRequest request;
  OutputFormat format = OutputFormat::kTable;
  bool all = false;  // table: also the rows under kKernelRowShare of the time
};

// `medprof diff RUN_A RUN_B [--top N]`: kernel time aligned by op and category.
struct DiffCommand {
  v1::DiffRunsRequest request;
  OutputFormat format = OutputFormat::kTable;
};

// `medprof export RUN --format chrome-trace|csv|json [-o FILE]`.
enum class ExportFormat { kChromeTrace, kCsv, kJson };
struct ExportCommand {
  std::string run_id;
  ExportFormat export_format = ExportFormat::kJson;  // not `format`: that name is the OutputFormat of the others
  std::string output;  // "" or "-" = stdout
};

// `medprof import-ncu FILE.csv --gpu NAME --preset P [--phase forward|train|sample] [--steps N]
// [--study S | --name TEXT]`: an `ncu --csv --page raw` export stored as one run (prints its id).
struct ImportNcuCommand {
  std::string file;
  std::string gpu;                          // the GPU name the run is compared under
  std::string preset;
  v1::Phase phase = v1::PHASE_TRAIN;
  int steps = 1;                            // steps the export covers (1..100000)
  std::string study_id;                     // "" = a new study
  std::string study_name;                   // name of the new study
  OutputFormat format = OutputFormat::kTable;
};

// `medprof upload FILE --study S`: a run made by hand (`medprof-worker --out FILE`) stored in
// study S through the agent's ingest path (prints its run id).
struct UploadCommand {
  std::string file;
  std::string study_id;
  OutputFormat format = OutputFormat::kTable;
};

// `medprof roofline RUN|--study STUDY [--phase P] [--level dram|l2|l1] [--signatures]`: where each
// kernel (signature, phase) stands against its run's ceilings (client/roofline_view.h).
struct RooflineCommand {
  std::string run_id;     // one of run_id and study_id
  std::string study_id;   // every succeeded run of the study
  std::string phase;      // "" = all; fwd|bwd|optim|sample_step
  std::string level = "dram";
  bool signatures = false;
  OutputFormat format = OutputFormat::kTable;
};

// `medprof kernels classify [NAME...]`: names from the arguments, else stdin. Offline.
struct ClassifyCommand {
  std::vector<std::string> names;  // empty = read stdin
};

// --help / --version: print `text` to stdout and exit 0. No server is contacted.
struct PrintCommand {
  std::string text;
};

using CommandBody = std::variant<SubmitCommand, WatchCommand, StudiesCommand, RunsCommand,
                                 RunCommand, AgentsCommand, CancelCommand, CompareCommand,
                                 ClassifyCommand, PrintCommand, ReportCommand, ImportNcuCommand, KernelsCommand,
                                 DiffCommand, ExportCommand, UploadCommand, RooflineCommand, ModelsCommand,
                                 DeleteModelCommand>;

struct Command {
  ConnectionOptions connection;
  CommandBody body;
};

// Parses argv (argv[0] is the program name). INVALID_ARGUMENT = usage error (exit 1).
absl::StatusOr<Command> ParseCommandLine(const std::vector<std::string>& argv,
                                         const EnvLookup& env);

// Checks a HOST:PORT / [v6]:PORT / unix:PATH address; `source` names where it came from
// ("--server" or "MEDPROF_SERVER") in the message.
absl::Status ValidateServerAddress(absl::string_view address, absl::string_view source);

}  // namespace medprof::client
