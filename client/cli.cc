#include "client/cli.h"

#include <cstdlib>
#include <limits>
#include <memory>
#include <set>

#include <CLI/CLI.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/request_limits.h"
#include "common/status.h"
#include "common/token_text.h"
#include "common/version.h"
#include "common/workload_config.h"
#include "common/workload_flags.h"

namespace medprof::client {
namespace {

constexpr char kCommandList[] =
    "submit|watch|studies|runs|run|agents|cancel|compare|kernels|diff|export|report|import-ncu|upload";

absl::Status Usage(absl::string_view message) { return absl::InvalidArgumentError(message); }

absl::StatusOr<int64_t> ParseInt(absl::string_view flag, const std::string& text, int64_t lo,
                                 int64_t hi) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(text, &v)) {
    return Usage(absl::StrCat(flag, ": '", text, "' is not an integer (allowed ", lo, "..", hi, ")"));
  }
  if (v < lo || v > hi) {
    return Usage(absl::StrCat(flag, ": ", v, " is out of range (allowed ", lo, "..", hi, ")"));
  }
  return v;
}

absl::StatusOr<OutputFormat> ParseFormat(const std::string& text,
                                         const std::vector<OutputFormat>& allowed,
                                         absl::string_view command) {
  std::vector<std::string> names;
  for (OutputFormat f : allowed) names.push_back(OutputFormatName(f));
  for (OutputFormat f : allowed) {
    if (text == OutputFormatName(f)) return f;
  }
  return Usage(absl::StrCat("--format: '", text, "' is not a format of '", command,
                            "' (allowed: ", absl::StrJoin(names, "|"), ")"));
}

// Rewrites "field: message" from common/workload_config.h into "--field: message".
absl::Status ToFlagMessage(const absl::Status& s) {
  std::string msg(s.message());
  const size_t end = msg.find_first_of(" :");
  if (end == std::string::npos) return Usage(msg);
  const std::string field = msg.substr(0, end);
  std::string flag = field == "preset" ? "presets" : absl::StrReplaceAll(field, {{"_", "-"}});
  return Usage(absl::StrCat("--", flag, msg.substr(end)));
}

const std::vector<OutputFormat> kAllFormats = {OutputFormat::kTable, OutputFormat::kJson,
                                               OutputFormat::kCsv};

// The submit flags: the study's own as raw strings (converted and checked after CLI11 has
// parsed), the workload's in the shared table of common/workload_flags.h.
struct SubmitFlags {
  std::vector<std::string> presets;
  std::vector<std::string> targets;
  std::string name, format = "table", repeats, max_attempts, run_timeout_s;
  bool wait = false, no_compare = false;
  config::WorkloadFlags workload;
};

absl::StatusOr<SubmitCommand> BuildSubmit(const SubmitFlags& f, CLI::App* sub) {
  SubmitCommand cmd;
  v1::SubmitStudyRequest& req = cmd.request;
  MEDPROF_ASSIGN_OR_RETURN(cmd.format, ParseFormat(f.format, kAllFormats, "submit"));
  cmd.wait = f.wait;
  cmd.compare = !f.no_compare;

  // Presets: 1..16 known names, no duplicates.
  std::set<std::string> seen;
  std::vector<std::string> items;
  for (const std::string& arg : f.presets) {
    for (absl::string_view item : absl::StrSplit(arg, ',')) items.emplace_back(item);
  }
  for (const std::string& raw : items) {
    const std::string p(absl::StripAsciiWhitespace(raw));
    if (p.empty()) return Usage(absl::StrCat("--presets: empty preset name in the list (allowed: ", config::PresetList(), ")"));
    if (!config::PresetFor(p).ok()) {
      return Usage(absl::StrCat("--presets: unknown preset '", p, "' (allowed: ", config::PresetList(), ")"));
    }
    if (!seen.insert(p).second) return Usage(absl::StrCat("--presets: '", p, "' is listed twice"));
    req.add_presets(p);
  }
  if (req.presets_size() < 1 || req.presets_size() > limits::kMaxPresets) {
    return Usage(absl::StrCat("--presets: ", req.presets_size(), " presets given (allowed 1..", limits::kMaxPresets, ")"));
  }
  for (const std::string& t : f.targets) req.add_targets(t);
  if (sub->get_option("--name")->count() > 0) {
    if (f.name.size() > limits::kMaxStudyNameChars) {
      return Usage(absl::StrCat("--name: ", f.name.size(), " characters (allowed at most ", limits::kMaxStudyNameChars, ")"));
    }
    req.set_name(f.name);
  }
  if (sub->get_option("--repeats")->count() > 0) {
    MEDPROF_ASSIGN_OR_RETURN(int64_t v, ParseInt("--repeats", f.repeats, 1, limits::kMaxRepeats));
    req.set_repeats(static_cast<int32_t>(v));
  }
  if (sub->get_option("--max-attempts")->count() > 0) {
    MEDPROF_ASSIGN_OR_RETURN(int64_t v, ParseInt("--max-attempts", f.max_attempts, 1, limits::kMaxAttempts));
    req.set_max_attempts(static_cast<int32_t>(v));
  }
  if (sub->get_option("--run-timeout-s")->count() > 0) {
    MEDPROF_ASSIGN_OR_RETURN(int64_t v, ParseInt("--run-timeout-s", f.run_timeout_s, 1, limits::kMaxRunTimeoutS));
    req.set_timeout_s(static_cast<int32_t>(v));
  }

  // The workload configuration: only what was typed.
  v1::WorkloadConfig* c = req.mutable_config();
  MEDPROF_RETURN_IF_ERROR(f.workload.Apply(c));

  // The server's own rules, on a copy with defaults filled, so a refusal names the flag here.
  for (const std::string& p : req.presets()) {
    v1::WorkloadConfig check = *c;
    check.set_preset(p);
    config::ApplyDefaults(&check);
    if (absl::Status s = config::Validate(check); !s.ok()) return ToFlagMessage(s);
  }
  return cmd;
}

std::string EndWithNewline(std::string text) {
  if (text.empty() || text.back() != '\n') text += '\n';
  return text;
}

CLI::Option* AddFormat(CLI::App* app, std::string* target, const std::string& allowed) {
  return app->add_option("--format", *target, "output format: " + allowed + " (default table)")->type_name("FORMAT");
}

}  // namespace

std::string OutputFormatName(OutputFormat format) {
  switch (format) {
    case OutputFormat::kTable: return "table";
    case OutputFormat::kJson: return "json";
    case OutputFormat::kCsv: return "csv";
  }
  return "table";
}

absl::Status ValidateServerAddress(absl::string_view address, absl::string_view source) {
  const std::string shown(address);
  if (absl::StartsWith(address, "unix:")) {
    if (address.size() == 5) return Usage(absl::StrCat(source, ": '", shown, "' has no socket path (expected unix:PATH)"));
    return absl::OkStatus();
  }
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos || colon == 0) {
    return Usage(absl::StrCat(source, ": '", shown, "' is not HOST:PORT (e.g. 127.0.0.1:7000, [::1]:7000, server.example.org:443)"));
  }
  absl::string_view host = address.substr(0, colon);
  if (absl::StartsWith(host, "[") != absl::EndsWith(host, "]") ||
      (host.find(':') != absl::string_view::npos && !absl::StartsWith(host, "["))) {
    return Usage(absl::StrCat(source, ": '", shown, "' is not HOST:PORT (write IPv6 addresses as [addr]:port)"));
  }
  int port = 0;
  if (!absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 1 || port > 65535) {
    return Usage(absl::StrCat(source, ": '", shown, "' has no valid port (allowed 1..65535)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Command> ParseCommandLine(const std::vector<std::string>& argv, const EnvLookup& env) {
  // Before CLI11, whose "not expected" message would print the secret.
  MEDPROF_RETURN_IF_ERROR(token::RefuseTokenOnCommandLine(argv, "MEDPROF_TOKEN_FILE=FILE (or MEDPROF_TOKEN)"));
  Command out;
  CLI::App app{"medprof: submit Med-DDPM profiling studies to a medprof server and read the results", "medprof"};
  app.fallthrough();  // global flags are accepted after the command too
  app.require_subcommand(0, 1);
  app.set_version_flag("--version", std::string("medprof ") + kVersionLine);
  app.footer(
      "Environment: MEDPROF_SERVER (address, --server wins), MEDPROF_TOKEN or MEDPROF_TOKEN_FILE "
      "(bearer token), MEDPROF_TLS_CA, MEDPROF_TLS_CERT and MEDPROF_TLS_KEY (TLS files; flags win).\nExit codes: 0 ok, 1 usage or field error (also when the server refuses a field), 2 server or connection error, 3 a job failed.");

  std::string server, tls_ca, tls_cert, tls_key, timeout;
  CLI::Option* server_opt = app.add_option("--server", server, std::string("server address HOST:PORT (default ") + kDefaultServer + ", or MEDPROF_SERVER)")->type_name("HOST:PORT");
  app.add_option("--tls-ca", tls_ca, "PEM file of the CA of the server certificate (TLS; system roots otherwise; or MEDPROF_TLS_CA)")->type_name("FILE");
  app.add_option("--tls-cert", tls_cert, "PEM client certificate chain, for servers requiring client certificates (or MEDPROF_TLS_CERT)")->type_name("FILE");
  app.add_option("--tls-key", tls_key, "PEM private key of --tls-cert (or MEDPROF_TLS_KEY)")->type_name("FILE");
  CLI::Option* timeout_opt = app.add_option("--timeout-s", timeout, "deadline of each call in seconds, 1..3600 (default 30)")->type_name("N");

  // submit
  SubmitFlags sf;
  CLI::App* submit = app.add_subcommand("submit", "submit a study: presets x targets x repeats jobs");
  submit->add_option("--presets", sf.presets, "comma-separated presets: " + config::PresetList())
      ->type_name("P,P..")
      ->required()->allow_extra_args(false);  // split below, so an empty item is refused
  submit->add_option("--target", sf.targets, "target selector, e.g. gpu=h100 or arch=9.0,site=tacc (repeatable; none = any agent)")
      ->type_name("SELECTOR")
      ->allow_extra_args(false);
  submit->add_option("--name", sf.name, absl::StrCat("study label (at most ", limits::kMaxStudyNameChars, " characters)"))->type_name("TEXT");
  submit->add_option("--repeats", sf.repeats,
                     absl::StrCat("jobs per preset and target (1..", limits::kMaxRepeats, ", default 1); 3 or more let compare's intervals include "
                     "run-to-run variation (fewer: a note says the interval misses it)"))->type_name("N");
  sf.workload.Register(submit);
  submit->add_option("--max-attempts", sf.max_attempts, absl::StrCat("attempts per job (1..", limits::kMaxAttempts, ")"))->type_name("N");
  submit->add_option("--run-timeout-s,--timeout-s", sf.run_timeout_s,
                     absl::StrCat("per-run wall-clock limit in seconds (1..", limits::kMaxRunTimeoutS,
                                  "); --timeout-s is the old spelling, accepted for one release (before the "
                                  "command, --timeout-s is the deadline of each call)"))
      ->type_name("N");
  submit->add_flag("--wait", sf.wait,
                   "follow the study until it ends, then print the comparison (table format); exit 3 if a job failed");
  submit->add_flag("--no-compare", sf.no_compare, "with --wait: end with the study's jobs only, no comparison");
  AddFormat(submit, &sf.format, "table|json|csv");

  // watch
  std::string watch_study, watch_format = "table";
  CLI::App* watch = app.add_subcommand("watch", "follow a study live until it ends; exit 3 if a job failed");
  watch->add_option("STUDY", watch_study, "study id")->required();
  AddFormat(watch, &watch_format, "table|json|csv");

  // studies
  std::string studies_limit, studies_format = "table";
  CLI::App* studies = app.add_subcommand("studies", "list studies, newest first");
  studies->add_option("--limit", studies_limit, absl::StrCat("at most this many (1..", limits::kMaxStudiesLimit, ", default 50)"))->type_name("N");
  AddFormat(studies, &studies_format, "table|json|csv");

  // runs
  std::string runs_study, runs_job, runs_limit, runs_format = "table";
  CLI::App* runs = app.add_subcommand("runs", "list runs");
  runs->add_option("--study", runs_study, "only runs of this study")->type_name("STUDY");
  runs->add_option("--job", runs_job, "only runs of this job")->type_name("JOB");
  runs->add_option("--limit", runs_limit, absl::StrCat("at most this many (1..", limits::kMaxRunsLimit, ", default 100)"))->type_name("N");
  AddFormat(runs, &runs_format, "table|json|csv");

  // run
  std::string run_id, run_format = "table";
  CLI::App* run = app.add_subcommand("run", "one run in detail: environment, summary, step times, top ops");
  run->add_option("RUN_ID", run_id, "run id")->required();
  AddFormat(run, &run_format, "table|json");

  // agents
  std::string agents_format = "table";
  CLI::App* agents = app.add_subcommand("agents", "list registered agents and their devices");
  AddFormat(agents, &agents_format, "table|json|csv");

  // cancel
  std::string cancel_study, cancel_reason;
  CLI::App* cancel = app.add_subcommand("cancel", "cancel every queued or running job of a study");
  cancel->add_option("STUDY", cancel_study, "study id")->required();
  cancel->add_option("--reason", cancel_reason, "why (stored with the cancelled jobs)")->type_name("TEXT");

  // compare
  std::string cmp_baseline, cmp_phase, cmp_top, cmp_format = "table";
  std::vector<std::string> cmp_studies;
  CLI::App* compare = app.add_subcommand("compare", "step time and kernel mix per GPU x preset, speedup vs a baseline preset");
  std::string cmp_runs, cmp_baseline_gpu, cmp_top_kernels;
  compare->add_option("STUDY", cmp_studies,
                      absl::StrCat("study id (or --runs, or both); several studies (at most ", limits::kMaxComparedStudies,
                                   "): each preset's cells side by side, with a speedup vs the first study"));
  compare->add_option("--runs", cmp_runs, absl::StrCat("compare exactly these succeeded runs (comma-separated, at most ", limits::kMaxRunFilter, ")"))
      ->type_name("RUN,RUN..");
  compare->add_option("--baseline-gpu", cmp_baseline_gpu,
                      "cross-GPU speedup at each preset vs this GPU (full name or a unique part, e.g. a100)")
      ->type_name("GPU");
  compare->add_option("--top,--top-kernels", cmp_top_kernels,
                      absl::StrCat("kernels listed per cell by priority (1..", limits::kMaxTopKernels, ", default ",
                                   limits::kDefaultTopKernels, "); --top-kernels is the old spelling, accepted for one release"))
      ->type_name("N");
  compare->add_option("--baseline", cmp_baseline, "baseline preset (default baseline)")->type_name("PRESET");
  compare->add_option("--phase", cmp_phase, "train|forward|sample (default: every phase present)")->type_name("PHASE");
  compare->add_option("--top-categories", cmp_top, absl::StrCat("kernel categories listed per cell (1..", limits::kMaxTopCategories, ", default ",
                                   limits::kDefaultTopCategories, ")"))->type_name("N");
  AddFormat(compare, &cmp_format, "table|json|csv");

  // upload
  std::string up_file, up_study, up_format = "table";
  CLI::App* upload = app.add_subcommand(
      "upload", "store a run made by hand (medprof-worker --out FILE) in a study; prints its run id");
  upload->add_option("FILE", up_file, "the worker's --out file")->required();
  upload->add_option("--study", up_study, "the study the run joins (compare groups it by its preset and GPU)")
      ->type_name("STUDY")
      ->required();
  AddFormat(upload, &up_format, "table|json");

  // import-ncu
  std::string imp_file, imp_gpu, imp_preset, imp_phase, imp_steps, imp_study, imp_name, imp_format = "table";
  CLI::App* import_ncu = app.add_subcommand(
      "import-ncu", "store an Nsight Compute export (ncu --csv --page raw) as a run; prints its run id");
  import_ncu->add_option("FILE", imp_file, "the CSV file ('-' = stdin)")->required();
  import_ncu->add_option("--gpu", imp_gpu, "GPU name the run is compared under, e.g. \"NVIDIA H200\"")->type_name("NAME")->required();
  import_ncu->add_option("--preset", imp_preset, "preset the profiled program ran: " + config::PresetList())->type_name("PRESET")->required();
  import_ncu->add_option("--phase", imp_phase, "forward|train|sample (default train)")->type_name("PHASE");
  import_ncu->add_option("--steps", imp_steps, absl::StrCat("measured steps the export covers (1..", limits::kMaxSteps, ", default 1)"))->type_name("N");
  import_ncu->add_option("--study", imp_study, "add the run to this study (default: a new study)")->type_name("STUDY");
  import_ncu->add_option("--name", imp_name, absl::StrCat("name of the new study (at most ", limits::kMaxStudyNameChars, " characters)"))->type_name("TEXT");
  AddFormat(import_ncu, &imp_format, "table|json");

  // report
  std::string rep_study, rep_output, rep_baseline, rep_baseline_gpu, rep_phase, rep_top;
  CLI::App* report = app.add_subcommand("report", "write a study's self-contained HTML report (charts, priorities, environment)");
  report->add_option("STUDY", rep_study, "study id")->required();
  report->add_option("-o,--output", rep_output, "HTML file to write ('-' = stdout)")->type_name("FILE")->required();
  report->add_option("--baseline", rep_baseline, "baseline preset (default baseline)")->type_name("PRESET");
  report->add_option("--baseline-gpu", rep_baseline_gpu, "add a cross-GPU speedup chart against this GPU (name or unique substring)")->type_name("GPU");
  report->add_option("--phase", rep_phase, "train|forward|sample (default: every phase present)")->type_name("PHASE");
  report->add_option("--top,--top-kernels", rep_top,
                     absl::StrCat("kernels per cell in the priority table (1..", limits::kMaxTopKernels,
                                  ", default 10); --top-kernels is the old spelling, accepted for one release"))->type_name("N");

  // kernels RUN | kernels classify
  std::vector<std::string> classify_names;
  std::string kernels_run, kernels_top, kernels_format = "table";
  CLI::App* kernels = app.add_subcommand(
      "kernels", "a run's kernels by total GPU time (kernels RUN), or the offline taxonomy tool (kernels classify)");
  kernels->require_subcommand(0, 1);
  kernels->add_option("RUN", kernels_run, "run id");
  kernels->add_option("--top", kernels_top, absl::StrCat("only the N largest (1..", limits::kMaxTopRows, "; default all)"))->type_name("N");
  bool kernels_signatures = false, kernels_all = false;
  kernels->add_flag("--all", kernels_all, "table: also the rows under 0.5 % of the time (JSON and CSV hold every row)");
  kernels->add_flag("--signatures", kernels_signatures,
                    "also each listed kernel's launch signatures (grid, block, op, input shapes), its share of "
                    "the kernel's time, and which the metrics layer measured");
  AddFormat(kernels, &kernels_format, "table|json|csv");
  CLI::App* classify = kernels->add_subcommand(
      "classify", "print category<TAB>line for each kernel name (arguments, else one per stdin line; "
                  "a line may be NAME<TAB>OP to use the LibTorch op rule)");
  classify->add_option("NAME", classify_names, "kernel names (default: read stdin)");

  // diff
  std::string diff_a, diff_b, diff_top, diff_format = "table";
  CLI::App* diff = app.add_subcommand("diff", "kernel time of two runs side by side, aligned by op and category");
  diff->add_option("RUN_A", diff_a, "run id (A)")->required();
  diff->add_option("RUN_B", diff_b, "run id (B)")->required();
  diff->add_option("--top", diff_top, absl::StrCat("only the N rows that changed most (1..", limits::kMaxTopRows, "; default all)"))->type_name("N");
  AddFormat(diff, &diff_format, "table|json|csv");

  // export
  std::string export_run, export_format = "json", export_output;
  CLI::App* export_app = app.add_subcommand("export", "a run's raw data: chrome-trace (Perfetto), csv or json");
  export_app->add_option("RUN", export_run, "run id")->required();
  export_app->add_option("--format", export_format, "chrome-trace|csv|json (default json)")->type_name("FORMAT");
  export_app->add_option("-o,--output", export_output, "file to write (default stdout)")->type_name("FILE");

  std::vector<const char*> cargv;
  cargv.reserve(argv.size());
  for (const std::string& a : argv) cargv.push_back(a.c_str());
  if (cargv.empty()) cargv.push_back("medprof");
  try {
    app.parse(static_cast<int>(cargv.size()), cargv.data());
  } catch (const CLI::CallForHelp&) {
    out.body = PrintCommand{EndWithNewline(app.help())};
    return out;
  } catch (const CLI::CallForAllHelp&) {
    out.body = PrintCommand{EndWithNewline(app.help("", CLI::AppFormatMode::All))};
    return out;
  } catch (const CLI::CallForVersion& v) {
    out.body = PrintCommand{std::string(v.what()) + "\n"};
    return out;
  } catch (const CLI::ParseError& e) {
    std::string what = e.what();
    if (e.get_name() == "RequiredError" && absl::StrContains(what, "subcommand")) {
      return Usage(absl::StrCat("missing command under 'kernels' (allowed: RUN, classify)"));
    }
    return Usage(what);
  }
  if (app.get_subcommands().empty()) {
    return Usage(absl::StrCat("missing command (allowed: ", kCommandList, ")"));
  }

  // Connection settings.
  ConnectionOptions& conn = out.connection;
  if (server_opt->count() > 0) {
    MEDPROF_RETURN_IF_ERROR(ValidateServerAddress(server, "--server"));
    conn.server = server;
  } else if (std::optional<std::string> env_server = env("MEDPROF_SERVER");
             env_server && !env_server->empty()) {
    MEDPROF_RETURN_IF_ERROR(ValidateServerAddress(*env_server, "MEDPROF_SERVER"));
    conn.server = *env_server;
  }
  // A flag wins over its environment variable.
  const auto flag_or_env = [&](const std::string& flag_value, const char* var) {
    if (!flag_value.empty()) return flag_value;
    std::optional<std::string> v = env(var);
    return v.value_or(std::string());
  };
  conn.tls_ca_file = flag_or_env(tls_ca, "MEDPROF_TLS_CA");
  conn.tls_cert_file = flag_or_env(tls_cert, "MEDPROF_TLS_CERT");
  conn.tls_key_file = flag_or_env(tls_key, "MEDPROF_TLS_KEY");
  if (conn.tls_cert_file.empty() != conn.tls_key_file.empty()) {
    return Usage("--tls-cert and --tls-key (or MEDPROF_TLS_CERT and MEDPROF_TLS_KEY) go together: give both or neither");
  }
  if (timeout_opt->count() > 0) {
    MEDPROF_ASSIGN_OR_RETURN(int64_t t, ParseInt("--timeout-s", timeout, 1, kMaxTimeoutS));
    conn.timeout_s = static_cast<int>(t);
  }
  if (auto token = env("MEDPROF_TOKEN"); token && !token->empty()) {
    MEDPROF_RETURN_IF_ERROR(token::CheckShape(*token, "MEDPROF_TOKEN"));
    conn.token = *token;
  } else if (auto file = env("MEDPROF_TOKEN_FILE"); file && !file->empty()) {
    conn.token_file = *file;
  }

  // The command.
  if (submit->parsed()) {
    MEDPROF_ASSIGN_OR_RETURN(SubmitCommand cmd, BuildSubmit(sf, submit));
    out.body = std::move(cmd);
  } else if (watch->parsed()) {
    WatchCommand cmd;
    cmd.study_id = watch_study;
    MEDPROF_ASSIGN_OR_RETURN(cmd.format, ParseFormat(watch_format, kAllFormats, "watch"));
    out.body = std::move(cmd);
  } else if (studies->parsed()) {
    StudiesCommand cmd;
    MEDPROF_ASSIGN_OR_RETURN(cmd.format, ParseFormat(studies_format, kAllFormats, "studies"));
    if (studies->get_option("--limit")->count() > 0) {
      MEDPROF_ASSIGN_OR_RETURN(int64_t v, ParseInt("--limit", studies_limit, 1, limits::kMaxStudiesLimit));
      cmd.request.set_limit(static_cast<int32_t>(v));
    }
    out.body = std::move(cmd);
  } else if (runs->parsed()) {
    RunsCommand cmd;
    MEDPROF_ASSIGN_OR_RETURN(cmd.format, ParseFormat(runs_format, kAllFormats, "runs"));
    cmd.request.set_study_id(runs_study);
    cmd.request.set_job_id(runs_job);
    if (runs->get_option("--limit")->count() > 0) {
      MEDPROF_ASSIGN_OR_RETURN(int64_t v, ParseInt("--limit", runs_limit, 1, limits::kMaxRunsLimit));
      cmd.request.set_limit(static_cast<int32_t>(v));
    }
    out.body = std::move(cmd);
  } else if (run->parsed()) {
    RunCommand cmd;
    cmd.run_id = run_id;
    MEDPROF_ASSIGN_OR_RETURN(cmd.format, ParseFormat(run_format, {OutputFormat::kTable, OutputFormat::kJson}, "run"));
    out.body = std::move(cmd);
  } else if (agents->parsed()) {
    AgentsCommand cmd;
    MEDPROF_ASSIGN_OR_RETURN(cmd.format, ParseFormat(agents_format, kAllFormats, "agents"));
    out.body = std::move(cmd);
  } else if (cancel->parsed()) {
    CancelCommand cmd;
    cmd.request.set_study_id(cancel_study);
    if (cancel_reason.size() > limits::kMaxCancelReasonChars) {
      return Usage(absl::StrCat("--reason: ", cancel_reason.size(), " characters (allowed at most ", limits::kMaxCancelReasonChars, ")"));
    }
    cmd.request.set_reason(cancel_reason);
    out.body = std::move(cmd);
  } else if (compare->parsed()) {
    CompareCommand cmd;
    MEDPROF_ASSIGN_OR_RETURN(cmd.format, ParseFormat(cmp_format, kAllFormats, "compare"));
    const std::string cmp_study = cmp_studies.empty() ? std::string() : cmp_studies[0];
    cmd.request.set_study_id(cmp_study);
    if (cmp_studies.size() > static_cast<size_t>(limits::kMaxComparedStudies)) {
      return Usage(absl::StrCat("compare: ", cmp_studies.size(), " studies (allowed at most ", limits::kMaxComparedStudies, ")"));
    }
    for (size_t i = 1; i < cmp_studies.size(); ++i) cmd.request.add_more_study_ids(cmp_studies[i]);
    if (cmp_studies.size() > 1 && compare->get_option("--runs")->count() > 0) {
      return Usage("compare: several STUDY ids or --runs, not both");
    }
    if (compare->get_option("--runs")->count() > 0) {
      for (absl::string_view id : absl::StrSplit(cmp_runs, ',')) {
        const std::string run(absl::StripAsciiWhitespace(id));
        if (run.empty()) return Usage("--runs: an empty run id (expected RUN,RUN..)");
        cmd.request.add_run_ids(run);
      }
      if (cmd.request.run_ids_size() > limits::kMaxRunFilter) {
        return Usage(absl::StrCat("--runs: ", cmd.request.run_ids_size(), " runs (allowed at most ", limits::kMaxRunFilter, ")"));
      }
    }
    if (cmp_study.empty() && cmd.request.run_ids_size() == 0) {
      return Usage("compare: give a STUDY, --runs RUN,RUN.., or both");
    }
    if (compare->get_option("--baseline-gpu")->count() > 0) {
      if (cmp_baseline_gpu.empty()) return Usage("--baseline-gpu: must not be empty");
      cmd.request.set_baseline_gpu(cmp_baseline_gpu);
    }
    if (compare->get_option("--top")->count() > 0) {
      MEDPROF_ASSIGN_OR_RETURN(int64_t v, ParseInt("--top", cmp_top_kernels, 1, limits::kMaxTopKernels));
      cmd.request.set_top_kernels(static_cast<int32_t>(v));
    }
    if (compare->get_option("--baseline")->count() > 0) {
      if (!config::PresetFor(cmp_baseline).ok()) {
        return Usage(absl::StrCat("--baseline: unknown preset '", cmp_baseline, "' (allowed: ", config::PresetList(), ")"));
      }
      cmd.request.set_baseline_preset(cmp_baseline);
    }
    if (compare->get_option("--phase")->count() > 0) {
      auto phase = config::ParsePhase(cmp_phase);
      if (!phase.ok()) return ToFlagMessage(phase.status());
      cmd.request.set_phase(*phase);
    }
    if (compare->get_option("--top-categories")->count() > 0) {
      MEDPROF_ASSIGN_OR_RETURN(int64_t v, ParseInt("--top-categories", cmp_top, 1, limits::kMaxTopCategories));
      cmd.request.set_top_categories(static_cast<int32_t>(v));
    }
    out.body = std::move(cmd);
  } else if (classify->parsed()) {
    out.body = ClassifyCommand{classify_names};
  } else if (kernels->parsed()) {
    if (kernels_run.empty()) return Usage("kernels: give a RUN id (medprof kernels RUN) or a command (allowed: classify)");
    KernelsCommand cmd;
    cmd.request.set_run_id(kernels_run);
    cmd.request.set_signatures(kernels_signatures);
    cmd.all = kernels_all;
    MEDPROF_ASSIGN_OR_RETURN(cmd.format, ParseFormat(kernels_format, kAllFormats, "kernels"));
    if (kernels->get_option("--top")->count() > 0) {
      MEDPROF_ASSIGN_OR_RETURN(int64_t v, ParseInt("--top", kernels_top, 1, limits::kMaxTopRows));
      cmd.request.set_top(static_cast<int32_t>(v));
    }
    out.body = std::move(cmd);
  } else if (diff->parsed()) {
    if (diff_a.empty() || diff_b.empty()) return Usage("diff: RUN_A and RUN_B must not be empty");
    DiffCommand cmd;
    cmd.request.set_run_a(diff_a);
    cmd.request.set_run_b(diff_b);
    MEDPROF_ASSIGN_OR_RETURN(cmd.format, ParseFormat(diff_format, kAllFormats, "diff"));
    if (diff->get_option("--top")->count() > 0) {
      MEDPROF_ASSIGN_OR_RETURN(int64_t v, ParseInt("--top", diff_top, 1, limits::kMaxTopRows));
      cmd.request.set_top(static_cast<int32_t>(v));
    }
    out.body = std::move(cmd);
  } else if (export_app->parsed()) {
    if (export_run.empty()) return Usage("export: RUN must not be empty");
    ExportCommand cmd;
    cmd.run_id = export_run;
    cmd.output = export_output;
    if (export_format == "chrome-trace") {
      cmd.export_format = ExportFormat::kChromeTrace;
    } else if (export_format == "csv") {
      cmd.export_format = ExportFormat::kCsv;
    } else if (export_format == "json") {
      cmd.export_format = ExportFormat::kJson;
    } else {
      return Usage(absl::StrCat("--format: '", export_format,
                                "' is not a format of 'export' (allowed: chrome-trace|csv|json)"));
    }
    out.body = std::move(cmd);
  } else if (upload->parsed()) {
    UploadCommand cmd;
    MEDPROF_ASSIGN_OR_RETURN(cmd.format, ParseFormat(up_format, {OutputFormat::kTable, OutputFormat::kJson}, "upload"));
    if (up_file.empty()) return Usage("upload: FILE must not be empty");
    if (up_study.empty()) return Usage("--study: must not be empty");
    cmd.file = up_file;
    cmd.study_id = up_study;
    out.body = std::move(cmd);
  } else if (import_ncu->parsed()) {
    ImportNcuCommand cmd;
    MEDPROF_ASSIGN_OR_RETURN(cmd.format, ParseFormat(imp_format, {OutputFormat::kTable, OutputFormat::kJson}, "import-ncu"));
    if (imp_file.empty()) return Usage("import-ncu: FILE must not be empty");
    cmd.file = imp_file;
    const std::string gpu(absl::StripAsciiWhitespace(imp_gpu));
    if (gpu.empty() || gpu.size() > limits::kMaxGpuNameChars) {
      return Usage(absl::StrCat("--gpu: 1..", limits::kMaxGpuNameChars, " characters (e.g. \"NVIDIA H200\")"));
    }
    cmd.gpu = gpu;
    if (!config::PresetFor(imp_preset).ok()) {
      return Usage(absl::StrCat("--preset: unknown preset '", imp_preset, "' (allowed: ", config::PresetList(), ")"));
    }
    cmd.preset = imp_preset;
    if (import_ncu->get_option("--phase")->count() > 0) {
      auto phase = config::ParsePhase(imp_phase);
      if (!phase.ok()) return ToFlagMessage(phase.status());
      cmd.phase = *phase;
    }
    if (import_ncu->get_option("--steps")->count() > 0) {
      MEDPROF_ASSIGN_OR_RETURN(int64_t v, ParseInt("--steps", imp_steps, 1, limits::kMaxSteps));
      cmd.steps = static_cast<int>(v);
    }
    if (!imp_study.empty() && !imp_name.empty()) {
      return Usage("--name: names a new study; it cannot be combined with --study");
    }
    if (imp_name.size() > limits::kMaxStudyNameChars) {
      return Usage(absl::StrCat("--name: ", imp_name.size(), " characters (allowed at most ", limits::kMaxStudyNameChars, ")"));
    }
    cmd.study_id = imp_study;
    cmd.study_name = imp_name;
    out.body = std::move(cmd);
  } else if (report->parsed()) {
    ReportCommand cmd;
    cmd.study_id = rep_study;
    cmd.output = rep_output;
    if (rep_study.empty()) return Usage("report: STUDY must not be empty");
    if (rep_output.empty()) return Usage("--output: must name a file (or '-' for stdout)");
    if (report->get_option("--baseline")->count() > 0) {
      if (!config::PresetFor(rep_baseline).ok()) {
        return Usage(absl::StrCat("--baseline: unknown preset '", rep_baseline, "' (allowed: ", config::PresetList(), ")"));
      }
      cmd.baseline_preset = rep_baseline;
    }
    if (report->get_option("--baseline-gpu")->count() > 0) {
      if (rep_baseline_gpu.empty()) return Usage("--baseline-gpu: must not be empty");
      cmd.baseline_gpu = rep_baseline_gpu;
    }
    if (report->get_option("--phase")->count() > 0) {
      auto phase = config::ParsePhase(rep_phase);
      if (!phase.ok()) return ToFlagMessage(phase.status());
      cmd.phase = *phase;
    }
    if (report->get_option("--top")->count() > 0) {
      MEDPROF_ASSIGN_OR_RETURN(int64_t v, ParseInt("--top", rep_top, 1, limits::kMaxTopKernels));
      cmd.top_kernels = static_cast<int>(v);
    }
    out.body = std::move(cmd);
  }
  // Positional ids must not be empty strings.
  if (auto* w = std::get_if<WatchCommand>(&out.body); w && w->study_id.empty()) return Usage("watch: STUDY must not be empty");
  if (auto* r = std::get_if<RunCommand>(&out.body); r && r->run_id.empty()) return Usage("run: RUN_ID must not be empty");
  if (auto* c = std::get_if<CancelCommand>(&out.body); c && c->request.study_id().empty()) return Usage("cancel: STUDY must not be empty");
  return out;
}

}  // namespace medprof::client
