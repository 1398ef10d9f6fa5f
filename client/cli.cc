#include "client/cli.h"

#include <cstdlib>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <set>

#include <CLI/CLI.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "client/roofline_view.h"
#include "common/request_limits.h"
#include "common/sha256.h"
#include "common/status.h"
#include "common/token_text.h"
#include "common/version.h"
#include "common/workload_config.h"
#include "common/workload_flags.h"

namespace medprof::client {
namespace {

constexpr char kCommandList[] =
    "submit|watch|studies|runs|run|agents|models|cancel|compare|kernels|diff|export|report|import-ncu|upload|roofline";

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

namespace {

// One subcommand: its CLI11 app, whose flags are bound to storage that `build` owns, and the
// step that turns those parsed flags into a command body. Made and used on one thread.
struct Subcommand {
  CLI::App* app;
  std::function<absl::StatusOr<CommandBody>()> build;
};

bool Given(CLI::App* sub, const std::string& flag) { return sub->get_option(flag)->count() > 0; }

// Checks a --baseline value: a known preset.
absl::Status CheckBaselinePreset(const std::string& preset) {
  if (config::PresetFor(preset).ok()) return absl::OkStatus();
  return Usage(absl::StrCat("--baseline: unknown preset '", preset, "' (allowed: ", config::PresetList(), ")"));
}

Subcommand AddSubmit(CLI::App* app) {
  auto f = std::make_shared<SubmitFlags>();
  CLI::App* submit = app->add_subcommand("submit", "submit a study: presets x targets x repeats jobs");
  submit->add_option("--presets", f->presets, "comma-separated presets: " + config::PresetList())
      ->type_name("P,P..")
      ->required()->allow_extra_args(false);  // split below, so an empty item is refused
  submit->add_option("--target", f->targets, "target selector, e.g. gpu=h100 or arch=9.0,site=tacc (repeatable; none = any agent)")
      ->type_name("SELECTOR")
      ->allow_extra_args(false);
  submit->add_option("--name", f->name, absl::StrCat("study label (at most ", limits::kMaxStudyNameChars, " characters)"))->type_name("TEXT");
  submit->add_option("--repeats", f->repeats,
                     absl::StrCat("jobs per preset and target (1..", limits::kMaxRepeats, ", default 1); 3 or more let compare's intervals include "
                     "run-to-run variation (fewer: a note says the interval misses it)"))->type_name("N");
  f->workload.Register(submit);
  submit->add_option("--max-attempts", f->max_attempts, absl::StrCat("attempts per job (1..", limits::kMaxAttempts, ")"))->type_name("N");
  submit->add_option("--run-timeout-s,--timeout-s", f->run_timeout_s,
                     absl::StrCat("per-run wall-clock limit in seconds (1..", limits::kMaxRunTimeoutS,
                                  "); --timeout-s is the old spelling, accepted for one release (before the "
                                  "command, --timeout-s is the deadline of each call)"))
      ->type_name("N");
  submit->add_flag("--wait", f->wait,
                   "follow the study until it ends, then print the comparison (table format); exit 3 if a job failed");
  submit->add_flag("--no-compare", f->no_compare, "with --wait: end with the study's jobs only, no comparison");
  AddFormat(submit, &f->format, "table|json|csv");
  return {submit, [f, submit]() -> absl::StatusOr<CommandBody> {
            MEDPROF_ASSIGN_OR_RETURN(SubmitCommand cmd, BuildSubmit(*f, submit));
            return CommandBody(std::move(cmd));
          }};
}

Subcommand AddWatch(CLI::App* app) {
  struct Flags { std::string study, format = "table"; };
  auto f = std::make_shared<Flags>();
  CLI::App* watch = app->add_subcommand("watch", "follow a study live until it ends; exit 3 if a job failed");
  watch->add_option("STUDY", f->study, "study id")->required();
  AddFormat(watch, &f->format, "table|json|csv");
  return {watch, [f]() -> absl::StatusOr<CommandBody> {
            WatchCommand cmd;
            cmd.study_id = f->study;
            MEDPROF_ASSIGN_OR_RETURN(cmd.format, ParseFormat(f->format, kAllFormats, "watch"));
            if (cmd.study_id.empty()) return Usage("watch: STUDY must not be empty");
            return CommandBody(std::move(cmd));
          }};
}

Subcommand AddStudies(CLI::App* app) {
  struct Flags { std::string limit, format = "table"; };
  auto f = std::make_shared<Flags>();
  CLI::App* studies = app->add_subcommand("studies", "list studies, newest first");
  studies->add_option("--limit", f->limit, absl::StrCat("at most this many (1..", limits::kMaxStudiesLimit, ", default 50)"))->type_name("N");
  AddFormat(studies, &f->format, "table|json|csv");
  return {studies, [f, studies]() -> absl::StatusOr<CommandBody> {
            StudiesCommand cmd;
            MEDPROF_ASSIGN_OR_RETURN(cmd.format, ParseFormat(f->format, kAllFormats, "studies"));
            if (Given(studies, "--limit")) {
              MEDPROF_ASSIGN_OR_RETURN(int64_t v, ParseInt("--limit", f->limit, 1, limits::kMaxStudiesLimit));
              cmd.request.set_limit(static_cast<int32_t>(v));
            }
            return CommandBody(std::move(cmd));
          }};
}

Subcommand AddRuns(CLI::App* app) {
  struct Flags { std::string study, job, limit, format = "table"; };
  auto f = std::make_shared<Flags>();
  CLI::App* runs = app->add_subcommand("runs", "list runs");
  runs->add_option("--study", f->study, "only runs of this study")->type_name("STUDY");
  runs->add_option("--job", f->job, "only runs of this job")->type_name("JOB");
  runs->add_option("--limit", f->limit, absl::StrCat("at most this many (1..", limits::kMaxRunsLimit, ", default 100)"))->type_name("N");
  AddFormat(runs, &f->format, "table|json|csv");
  return {runs, [f, runs]() -> absl::StatusOr<CommandBody> {
            RunsCommand cmd;
            MEDPROF_ASSIGN_OR_RETURN(cmd.format, ParseFormat(f->format, kAllFormats, "runs"));
            cmd.request.set_study_id(f->study);
            cmd.request.set_job_id(f->job);
            if (Given(runs, "--limit")) {
              MEDPROF_ASSIGN_OR_RETURN(int64_t v, ParseInt("--limit", f->limit, 1, limits::kMaxRunsLimit));
              cmd.request.set_limit(static_cast<int32_t>(v));
            }
            return CommandBody(std::move(cmd));
          }};
}

Subcommand AddRun(CLI::App* app) {
  struct Flags { std::string run_id, format = "table"; };
  auto f = std::make_shared<Flags>();
  CLI::App* run = app->add_subcommand("run", "one run in detail: environment, summary, step times, top ops");
  run->add_option("RUN_ID", f->run_id, "run id")->required();
  AddFormat(run, &f->format, "table|json");
  return {run, [f]() -> absl::StatusOr<CommandBody> {
            RunCommand cmd;
            cmd.run_id = f->run_id;
            MEDPROF_ASSIGN_OR_RETURN(cmd.format, ParseFormat(f->format, {OutputFormat::kTable, OutputFormat::kJson}, "run"));
            if (cmd.run_id.empty()) return Usage("run: RUN_ID must not be empty");
            return CommandBody(std::move(cmd));
          }};
}

Subcommand AddAgents(CLI::App* app) {
  auto format = std::make_shared<std::string>("table");
  CLI::App* agents = app->add_subcommand("agents", "list registered agents and their devices");
  AddFormat(agents, format.get(), "table|json|csv");
  return {agents, [format]() -> absl::StatusOr<CommandBody> {
            AgentsCommand cmd;
            MEDPROF_ASSIGN_OR_RETURN(cmd.format, ParseFormat(*format, kAllFormats, "agents"));
            return CommandBody(std::move(cmd));
          }};
}

Subcommand AddModels(CLI::App* app) {
  struct Flags { std::string format = "table", sha256; };
  auto f = std::make_shared<Flags>();
  CLI::App* models = app->add_subcommand("models", "list the user models of your project (models delete SHA256: admin)");
  models->require_subcommand(0, 1);
  AddFormat(models, &f->format, "table|json|csv");
  CLI::App* del = models->add_subcommand("delete", "remove a model from your project (admin tokens)");
  del->add_option("SHA256", f->sha256, "the model's hash as `medprof models` shows it")->required();
  return {models, [f, del]() -> absl::StatusOr<CommandBody> {
            if (del->parsed()) {
              if (!IsSha256Hex(f->sha256)) {
                return Usage(absl::StrCat("models delete: '", f->sha256,
                                          "' is not a SHA-256 (allowed: 64 lowercase hex digits)"));
              }
              return CommandBody(DeleteModelCommand{f->sha256});
            }
            ModelsCommand cmd;
            MEDPROF_ASSIGN_OR_RETURN(cmd.format, ParseFormat(f->format, kAllFormats, "models"));
            return CommandBody(std::move(cmd));
          }};
}

Subcommand AddCancel(CLI::App* app) {
  struct Flags { std::string study, reason; };
  auto f = std::make_shared<Flags>();
  CLI::App* cancel = app->add_subcommand("cancel", "cancel every queued or running job of a study");
  cancel->add_option("STUDY", f->study, "study id")->required();
  cancel->add_option("--reason", f->reason, "why (stored with the cancelled jobs)")->type_name("TEXT");
  return {cancel, [f]() -> absl::StatusOr<CommandBody> {
            CancelCommand cmd;
            cmd.request.set_study_id(f->study);
            if (f->reason.size() > limits::kMaxCancelReasonChars) {
              return Usage(absl::StrCat("--reason: ", f->reason.size(), " characters (allowed at most ", limits::kMaxCancelReasonChars, ")"));
            }
            cmd.request.set_reason(f->reason);
            if (f->study.empty()) return Usage("cancel: STUDY must not be empty");
            return CommandBody(std::move(cmd));
          }};
}

// The compare flags as typed; converted and checked by BuildCompare.
struct CompareFlags {
  std::string baseline, phase, top_categories, format = "table";
  std::vector<std::string> studies;
  std::string runs, baseline_gpu, top_kernels;
};

// The studies and runs a compare names: STUDY..., --runs, or a study and runs together.
absl::Status SetCompareSubjects(const CompareFlags& f, bool runs_given, v1::CompareRequest* req) {
  const std::string first = f.studies.empty() ? std::string() : f.studies[0];
  req->set_study_id(first);
  if (f.studies.size() > static_cast<size_t>(limits::kMaxComparedStudies)) {
    return Usage(absl::StrCat("compare: ", f.studies.size(), " studies (allowed at most ", limits::kMaxComparedStudies, ")"));
  }
  for (size_t i = 1; i < f.studies.size(); ++i) req->add_more_study_ids(f.studies[i]);
  if (f.studies.size() > 1 && runs_given) return Usage("compare: several STUDY ids or --runs, not both");
  if (runs_given) {
    for (absl::string_view id : absl::StrSplit(f.runs, ',')) {
      const std::string run(absl::StripAsciiWhitespace(id));
      if (run.empty()) return Usage("--runs: an empty run id (expected RUN,RUN..)");
      req->add_run_ids(run);
    }
    if (req->run_ids_size() > limits::kMaxRunFilter) {
      return Usage(absl::StrCat("--runs: ", req->run_ids_size(), " runs (allowed at most ", limits::kMaxRunFilter, ")"));
    }
  }
  if (first.empty() && req->run_ids_size() == 0) return Usage("compare: give a STUDY, --runs RUN,RUN.., or both");
  return absl::OkStatus();
}

absl::StatusOr<CompareCommand> BuildCompare(const CompareFlags& f, CLI::App* compare) {
  CompareCommand cmd;
  v1::CompareRequest& req = cmd.request;
  MEDPROF_ASSIGN_OR_RETURN(cmd.format, ParseFormat(f.format, kAllFormats, "compare"));
  MEDPROF_RETURN_IF_ERROR(SetCompareSubjects(f, Given(compare, "--runs"), &req));
  if (Given(compare, "--baseline-gpu")) {
    if (f.baseline_gpu.empty()) return Usage("--baseline-gpu: must not be empty");
    req.set_baseline_gpu(f.baseline_gpu);
  }
  if (Given(compare, "--top")) {
    MEDPROF_ASSIGN_OR_RETURN(int64_t v, ParseInt("--top", f.top_kernels, 1, limits::kMaxTopKernels));
    req.set_top_kernels(static_cast<int32_t>(v));
  }
  if (Given(compare, "--baseline")) {
    MEDPROF_RETURN_IF_ERROR(CheckBaselinePreset(f.baseline));
    req.set_baseline_preset(f.baseline);
  }
  if (Given(compare, "--phase")) {
    auto phase = config::ParsePhase(f.phase);
    if (!phase.ok()) return ToFlagMessage(phase.status());
    req.set_phase(*phase);
  }
  if (Given(compare, "--top-categories")) {
    MEDPROF_ASSIGN_OR_RETURN(int64_t v, ParseInt("--top-categories", f.top_categories, 1, limits::kMaxTopCategories));
    req.set_top_categories(static_cast<int32_t>(v));
  }
  return cmd;
}

Subcommand AddCompare(CLI::App* app) {
  auto f = std::make_shared<CompareFlags>();
  CLI::App* compare = app->add_subcommand("compare", "step time and kernel mix per GPU x preset, speedup vs a baseline preset");
  compare->add_option("STUDY", f->studies,
                      absl::StrCat("study id (or --runs, or both); several studies (at most ", limits::kMaxComparedStudies,
                                   "): each preset's cells side by side, with a speedup vs the first study"));
  compare->add_option("--runs", f->runs, absl::StrCat("compare exactly these succeeded runs (comma-separated, at most ", limits::kMaxRunFilter, ")"))
      ->type_name("RUN,RUN..");
  compare->add_option("--baseline-gpu", f->baseline_gpu,
                      "cross-GPU speedup at each preset vs this GPU (full name or a unique part, e.g. a100)")
      ->type_name("GPU");
  compare->add_option("--top,--top-kernels", f->top_kernels,
                      absl::StrCat("kernels listed per cell by priority (1..", limits::kMaxTopKernels, ", default ",
                                   limits::kDefaultTopKernels, "); --top-kernels is the old spelling, accepted for one release"))
      ->type_name("N");
  compare->add_option("--baseline", f->baseline, "baseline preset (default baseline)")->type_name("PRESET");
  compare->add_option("--phase", f->phase, "train|forward|sample (default: every phase present)")->type_name("PHASE");
  compare->add_option("--top-categories", f->top_categories, absl::StrCat("kernel categories listed per cell (1..", limits::kMaxTopCategories, ", default ",
                                   limits::kDefaultTopCategories, ")"))->type_name("N");
  AddFormat(compare, &f->format, "table|json|csv");
  return {compare, [f, compare]() -> absl::StatusOr<CommandBody> {
            MEDPROF_ASSIGN_OR_RETURN(CompareCommand cmd, BuildCompare(*f, compare));
            return CommandBody(std::move(cmd));
          }};
}

Subcommand AddUpload(CLI::App* app) {
  struct Flags { std::string file, study, format = "table"; };
  auto f = std::make_shared<Flags>();
  CLI::App* upload = app->add_subcommand(
      "upload", "store a run made by hand (medprof-worker --out FILE) in a study; prints its run id");
  upload->add_option("FILE", f->file, "the worker's --out file")->required();
  upload->add_option("--study", f->study, "the study the run joins (compare groups it by its preset and GPU)")
      ->type_name("STUDY")
      ->required();
  AddFormat(upload, &f->format, "table|json");
  return {upload, [f]() -> absl::StatusOr<CommandBody> {
            UploadCommand cmd;
            MEDPROF_ASSIGN_OR_RETURN(cmd.format, ParseFormat(f->format, {OutputFormat::kTable, OutputFormat::kJson}, "upload"));
            if (f->file.empty()) return Usage("upload: FILE must not be empty");
            if (f->study.empty()) return Usage("--study: must not be empty");
            cmd.file = f->file;
            cmd.study_id = f->study;
            return CommandBody(std::move(cmd));
          }};
}

// The import-ncu flags as typed; converted and checked by BuildImportNcu.
struct ImportNcuFlags {
  std::string file, gpu, preset, phase, steps, study, name, format = "table";
};

absl::StatusOr<ImportNcuCommand> BuildImportNcu(const ImportNcuFlags& f, CLI::App* import_ncu) {
  ImportNcuCommand cmd;
  MEDPROF_ASSIGN_OR_RETURN(cmd.format, ParseFormat(f.format, {OutputFormat::kTable, OutputFormat::kJson}, "import-ncu"));
  if (f.file.empty()) return Usage("import-ncu: FILE must not be empty");
  cmd.file = f.file;
  const std::string gpu(absl::StripAsciiWhitespace(f.gpu));
  if (gpu.empty() || gpu.size() > limits::kMaxGpuNameChars) {
    return Usage(absl::StrCat("--gpu: 1..", limits::kMaxGpuNameChars, " characters (e.g. \"NVIDIA H200\")"));
  }
  cmd.gpu = gpu;
  if (!config::PresetFor(f.preset).ok()) {
    return Usage(absl::StrCat("--preset: unknown preset '", f.preset, "' (allowed: ", config::PresetList(), ")"));
  }
  cmd.preset = f.preset;
  if (Given(import_ncu, "--phase")) {
    auto phase = config::ParsePhase(f.phase);
    if (!phase.ok()) return ToFlagMessage(phase.status());
    cmd.phase = *phase;
  }
  if (Given(import_ncu, "--steps")) {
    MEDPROF_ASSIGN_OR_RETURN(int64_t v, ParseInt("--steps", f.steps, 1, limits::kMaxSteps));
    cmd.steps = static_cast<int>(v);
  }
  if (!f.study.empty() && !f.name.empty()) return Usage("--name: names a new study; it cannot be combined with --study");
  if (f.name.size() > limits::kMaxStudyNameChars) {
    return Usage(absl::StrCat("--name: ", f.name.size(), " characters (allowed at most ", limits::kMaxStudyNameChars, ")"));
  }
  cmd.study_id = f.study;
  cmd.study_name = f.name;
  return cmd;
}

Subcommand AddImportNcu(CLI::App* app) {
  auto f = std::make_shared<ImportNcuFlags>();
  CLI::App* import_ncu = app->add_subcommand(
      "import-ncu", "store an Nsight Compute export (ncu --csv --page raw) as a run; prints its run id");
  import_ncu->add_option("FILE", f->file, "the CSV file ('-' = stdin)")->required();
  import_ncu->add_option("--gpu", f->gpu, "GPU name the run is compared under, e.g. \"NVIDIA H200\"")->type_name("NAME")->required();
  import_ncu->add_option("--preset", f->preset, "preset the profiled program ran: " + config::PresetList())->type_name("PRESET")->required();
  import_ncu->add_option("--phase", f->phase, "forward|train|sample (default train)")->type_name("PHASE");
  import_ncu->add_option("--steps", f->steps, absl::StrCat("measured steps the export covers (1..", limits::kMaxSteps, ", default 1)"))->type_name("N");
  import_ncu->add_option("--study", f->study, "add the run to this study (default: a new study)")->type_name("STUDY");
  import_ncu->add_option("--name", f->name, absl::StrCat("name of the new study (at most ", limits::kMaxStudyNameChars, " characters)"))->type_name("TEXT");
  AddFormat(import_ncu, &f->format, "table|json");
  return {import_ncu, [f, import_ncu]() -> absl::StatusOr<CommandBody> {
            MEDPROF_ASSIGN_OR_RETURN(ImportNcuCommand cmd, BuildImportNcu(*f, import_ncu));
            return CommandBody(std::move(cmd));
          }};
}

// The report flags as typed; converted and checked by BuildReport.
struct ReportFlags {
  std::string study, output, baseline, baseline_gpu, phase, top;
};

absl::StatusOr<ReportCommand> BuildReport(const ReportFlags& f, CLI::App* report) {
  ReportCommand cmd;
  cmd.study_id = f.study;
  cmd.output = f.output;
  if (f.study.empty()) return Usage("report: STUDY must not be empty");
  if (f.output.empty()) return Usage("--output: must name a file (or '-' for stdout)");
  if (Given(report, "--baseline")) {
    MEDPROF_RETURN_IF_ERROR(CheckBaselinePreset(f.baseline));
    cmd.baseline_preset = f.baseline;
  }
  if (Given(report, "--baseline-gpu")) {
    if (f.baseline_gpu.empty()) return Usage("--baseline-gpu: must not be empty");
    cmd.baseline_gpu = f.baseline_gpu;
  }
  if (Given(report, "--phase")) {
    auto phase = config::ParsePhase(f.phase);
    if (!phase.ok()) return ToFlagMessage(phase.status());
    cmd.phase = *phase;
  }
  if (Given(report, "--top")) {
    MEDPROF_ASSIGN_OR_RETURN(int64_t v, ParseInt("--top", f.top, 1, limits::kMaxTopKernels));
    cmd.top_kernels = static_cast<int>(v);
  }
  return cmd;
}

Subcommand AddReport(CLI::App* app) {
  auto f = std::make_shared<ReportFlags>();
  CLI::App* report = app->add_subcommand("report", "write a study's self-contained HTML report (charts, priorities, environment)");
  report->add_option("STUDY", f->study, "study id")->required();
  report->add_option("-o,--output", f->output, "HTML file to write ('-' = stdout)")->type_name("FILE")->required();
  report->add_option("--baseline", f->baseline, "baseline preset (default baseline)")->type_name("PRESET");
  report->add_option("--baseline-gpu", f->baseline_gpu, "add a cross-GPU speedup chart against this GPU (name or unique substring)")->type_name("GPU");
  report->add_option("--phase", f->phase, "train|forward|sample (default: every phase present)")->type_name("PHASE");
  report->add_option("--top,--top-kernels", f->top,
                     absl::StrCat("kernels per cell in the priority table (1..", limits::kMaxTopKernels,
                                  ", default 10); --top-kernels is the old spelling, accepted for one release"))->type_name("N");
  return {report, [f, report]() -> absl::StatusOr<CommandBody> {
            MEDPROF_ASSIGN_OR_RETURN(ReportCommand cmd, BuildReport(*f, report));
            return CommandBody(std::move(cmd));
          }};
}

// `kernels RUN` and its offline sub-command `kernels classify`.
Subcommand AddKernels(CLI::App* app) {
  struct Flags {
    std::vector<std::string> classify_names;
    std::string run, top, format = "table";
    bool signatures = false, all = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* kernels = app->add_subcommand(
      "kernels", "a run's kernels by total GPU time (kernels RUN), or the offline taxonomy tool (kernels classify)");
  kernels->require_subcommand(0, 1);
  kernels->add_option("RUN", f->run, "run id");
  kernels->add_option("--top", f->top, absl::StrCat("only the N largest (1..", limits::kMaxTopRows, "; default all)"))->type_name("N");
  kernels->add_flag("--all", f->all, "table: also the rows under 0.5 % of the time (JSON and CSV hold every row)");
  kernels->add_flag("--signatures", f->signatures,
                    "also each listed kernel's launch signatures (grid, block, op, input shapes), its share of "
                    "the kernel's time, and which the metrics layer measured");
  AddFormat(kernels, &f->format, "table|json|csv");
  CLI::App* classify = kernels->add_subcommand(
      "classify", "print category<TAB>line for each kernel name (arguments, else one per stdin line; "
                  "a line may be NAME<TAB>OP to use the LibTorch op rule)");
  classify->add_option("NAME", f->classify_names, "kernel names (default: read stdin)");
  return {kernels, [f, kernels, classify]() -> absl::StatusOr<CommandBody> {
            if (classify->parsed()) return CommandBody(ClassifyCommand{f->classify_names});
            if (f->run.empty()) return Usage("kernels: give a RUN id (medprof kernels RUN) or a command (allowed: classify)");
            KernelsCommand cmd;
            cmd.request.set_run_id(f->run);
            cmd.request.set_signatures(f->signatures);
            cmd.all = f->all;
            MEDPROF_ASSIGN_OR_RETURN(cmd.format, ParseFormat(f->format, kAllFormats, "kernels"));
            if (Given(kernels, "--top")) {
              MEDPROF_ASSIGN_OR_RETURN(int64_t v, ParseInt("--top", f->top, 1, limits::kMaxTopRows));
              cmd.request.set_top(static_cast<int32_t>(v));
            }
            return CommandBody(std::move(cmd));
          }};
}

// `roofline RUN|--study STUDY`: the values are checked here, the roofline computed after the reads.
Subcommand AddRoofline(CLI::App* app) {
  struct Flags {
    std::string run, study, phase, level = "dram", format = "table";
    bool signatures = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* roof = app->add_subcommand(
      "roofline", "each kernel of a run (or of every succeeded run of a study) against its run's ceilings: FLOPs, "
                  "bytes, intensity, achieved rates, the binding roof, % of roof, memory/compute/latency-bound");
  roof->add_option("RUN", f->run, "run id");
  roof->add_option("--study", f->study, "every succeeded run of this study instead of one RUN");
  roof->add_option("--phase", f->phase, "only this phase range and the kernels that ran in it (fwd|bwd|optim|sample_step)");
  roof->add_option("--level", f->level, "memory level of the bytes, intensity and bandwidth shown (dram|l2|l1; default dram)");
  roof->add_flag("--signatures", f->signatures, "also each kernel's measured launch signatures");
  AddFormat(roof, &f->format, "table|json|csv");
  return {roof, [f]() -> absl::StatusOr<CommandBody> {
            if (f->run.empty() == f->study.empty()) {
              return Usage("roofline: give one RUN id or --study STUDY (not both)");
            }
            RooflineCommand cmd{f->run, f->study, f->phase, f->level, f->signatures};
            MEDPROF_ASSIGN_OR_RETURN(cmd.format, ParseFormat(f->format, kAllFormats, "roofline"));
            MEDPROF_RETURN_IF_ERROR(ValidateRooflineOptions({cmd.phase, cmd.level, cmd.signatures}));
            return CommandBody(std::move(cmd));
          }};
}

Subcommand AddDiff(CLI::App* app) {
  struct Flags { std::string a, b, top, format = "table"; };
  auto f = std::make_shared<Flags>();
  CLI::App* diff = app->add_subcommand("diff", "kernel time of two runs side by side, aligned by op and category");
  diff->add_option("RUN_A", f->a, "run id (A)")->required();
  diff->add_option("RUN_B", f->b, "run id (B)")->required();
  diff->add_option("--top", f->top, absl::StrCat("only the N rows that changed most (1..", limits::kMaxTopRows, "; default all)"))->type_name("N");
  AddFormat(diff, &f->format, "table|json|csv");
  return {diff, [f, diff]() -> absl::StatusOr<CommandBody> {
            if (f->a.empty() || f->b.empty()) return Usage("diff: RUN_A and RUN_B must not be empty");
            DiffCommand cmd;
            cmd.request.set_run_a(f->a);
            cmd.request.set_run_b(f->b);
            MEDPROF_ASSIGN_OR_RETURN(cmd.format, ParseFormat(f->format, kAllFormats, "diff"));
            if (Given(diff, "--top")) {
              MEDPROF_ASSIGN_OR_RETURN(int64_t v, ParseInt("--top", f->top, 1, limits::kMaxTopRows));
              cmd.request.set_top(static_cast<int32_t>(v));
            }
            return CommandBody(std::move(cmd));
          }};
}

absl::StatusOr<ExportFormat> ParseExportFormat(const std::string& text) {
  if (text == "chrome-trace") return ExportFormat::kChromeTrace;
  if (text == "csv") return ExportFormat::kCsv;
  if (text == "json") return ExportFormat::kJson;
  return Usage(absl::StrCat("--format: '", text, "' is not a format of 'export' (allowed: chrome-trace|csv|json)"));
}

Subcommand AddExport(CLI::App* app) {
  struct Flags { std::string run, format = "json", output; };
  auto f = std::make_shared<Flags>();
  CLI::App* export_app = app->add_subcommand("export", "a run's raw data: chrome-trace (Perfetto), csv or json");
  export_app->add_option("RUN", f->run, "run id")->required();
  export_app->add_option("--format", f->format, "chrome-trace|csv|json (default json)")->type_name("FORMAT");
  export_app->add_option("-o,--output", f->output, "file to write (default stdout)")->type_name("FILE");
  return {export_app, [f]() -> absl::StatusOr<CommandBody> {
            if (f->run.empty()) return Usage("export: RUN must not be empty");
            ExportCommand cmd;
            cmd.run_id = f->run;
            cmd.output = f->output;
            MEDPROF_ASSIGN_OR_RETURN(cmd.export_format, ParseExportFormat(f->format));
            return CommandBody(std::move(cmd));
          }};
}

// The flags before (or, by fallthrough, after) the command: where and how to connect.
struct GlobalFlags {
  std::string server, tls_ca, tls_cert, tls_key, timeout;
  CLI::Option* server_opt = nullptr;
  CLI::Option* timeout_opt = nullptr;
};

void AddGlobalFlags(CLI::App* app, GlobalFlags* g) {
  app->fallthrough();  // global flags are accepted after the command too
  app->require_subcommand(0, 1);
  app->set_version_flag("--version", std::string("medprof ") + kVersionLine);
  app->footer(
      "Environment: MEDPROF_SERVER (address, --server wins), MEDPROF_TOKEN or MEDPROF_TOKEN_FILE "
      "(bearer token), MEDPROF_TLS_CA, MEDPROF_TLS_CERT and MEDPROF_TLS_KEY (TLS files; flags win).\nExit codes: 0 ok, 1 usage or field error (also when the server refuses a field), 2 server or connection error, 3 a job failed.");
  g->server_opt = app->add_option("--server", g->server, std::string("server address HOST:PORT (default ") + kDefaultServer + ", or MEDPROF_SERVER)")->type_name("HOST:PORT");
  app->add_option("--tls-ca", g->tls_ca, "PEM file of the CA of the server certificate (TLS; system roots otherwise; or MEDPROF_TLS_CA)")->type_name("FILE");
  app->add_option("--tls-cert", g->tls_cert, "PEM client certificate chain, for servers requiring client certificates (or MEDPROF_TLS_CERT)")->type_name("FILE");
  app->add_option("--tls-key", g->tls_key, "PEM private key of --tls-cert (or MEDPROF_TLS_KEY)")->type_name("FILE");
  g->timeout_opt = app->add_option("--timeout-s", g->timeout, "deadline of each call in seconds, 1..3600 (default 30)")->type_name("N");
}

// The connection settings from the global flags and, where a flag is absent, the environment.
absl::StatusOr<ConnectionOptions> BuildConnection(const GlobalFlags& g, const EnvLookup& env) {
  ConnectionOptions conn;
  if (g.server_opt->count() > 0) {
    MEDPROF_RETURN_IF_ERROR(ValidateServerAddress(g.server, "--server"));
    conn.server = g.server;
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
  conn.tls_ca_file = flag_or_env(g.tls_ca, "MEDPROF_TLS_CA");
  conn.tls_cert_file = flag_or_env(g.tls_cert, "MEDPROF_TLS_CERT");
  conn.tls_key_file = flag_or_env(g.tls_key, "MEDPROF_TLS_KEY");
  if (conn.tls_cert_file.empty() != conn.tls_key_file.empty()) {
    return Usage("--tls-cert and --tls-key (or MEDPROF_TLS_CERT and MEDPROF_TLS_KEY) go together: give both or neither");
  }
  if (g.timeout_opt->count() > 0) {
    MEDPROF_ASSIGN_OR_RETURN(int64_t t, ParseInt("--timeout-s", g.timeout, 1, kMaxTimeoutS));
    conn.timeout_s = static_cast<int>(t);
  }
  if (auto token = env("MEDPROF_TOKEN"); token && !token->empty()) {
    MEDPROF_RETURN_IF_ERROR(token::CheckShape(*token, "MEDPROF_TOKEN"));
    conn.token = *token;
  } else if (auto file = env("MEDPROF_TOKEN_FILE"); file && !file->empty()) {
    conn.token_file = *file;
  }
  return conn;
}

// Runs CLI11 over argv. Returns the text to print when argv asked for help or the version,
// nullopt when it parsed a command, and INVALID_ARGUMENT with CLI11's reason otherwise.
absl::StatusOr<std::optional<std::string>> RunParser(CLI::App& app, const std::vector<std::string>& argv) {
  std::vector<const char*> cargv;
  cargv.reserve(argv.size());
  for (const std::string& a : argv) cargv.push_back(a.c_str());
  if (cargv.empty()) cargv.push_back("medprof");
  try {
    app.parse(static_cast<int>(cargv.size()), cargv.data());
  } catch (const CLI::CallForHelp&) {
    return EndWithNewline(app.help());
  } catch (const CLI::CallForAllHelp&) {
    return EndWithNewline(app.help("", CLI::AppFormatMode::All));
  } catch (const CLI::CallForVersion& v) {
    return std::string(v.what()) + "\n";
  } catch (const CLI::ParseError& e) {
    std::string what = e.what();
    if (e.get_name() == "RequiredError" && absl::StrContains(what, "subcommand")) {
      return Usage(absl::StrCat("missing command under 'kernels' (allowed: RUN, classify)"));
    }
    return Usage(what);
  }
  return std::optional<std::string>();
}

}  // namespace

absl::StatusOr<Command> ParseCommandLine(const std::vector<std::string>& argv, const EnvLookup& env) {
  // Before CLI11, whose "not expected" message would print the secret.
  MEDPROF_RETURN_IF_ERROR(token::RefuseTokenOnCommandLine(argv, "MEDPROF_TOKEN_FILE=FILE (or MEDPROF_TOKEN)"));
  CLI::App app{"medprof: submit Med-DDPM profiling studies to a medprof server and read the results", "medprof"};
  GlobalFlags global;
  AddGlobalFlags(&app, &global);
  // In the order `--help` lists them.
  const std::vector<Subcommand> commands = {
      AddSubmit(&app), AddWatch(&app),   AddStudies(&app),   AddRuns(&app),   AddRun(&app),
      AddAgents(&app), AddModels(&app),  AddCancel(&app),   AddCompare(&app), AddUpload(&app), AddImportNcu(&app),
      AddReport(&app), AddKernels(&app), AddRoofline(&app), AddDiff(&app),    AddExport(&app)};

  Command out;
  MEDPROF_ASSIGN_OR_RETURN(std::optional<std::string> print, RunParser(app, argv));
  if (print.has_value()) {
    out.body = PrintCommand{*std::move(print)};
    return out;
  }
  if (app.get_subcommands().empty()) {
    return Usage(absl::StrCat("missing command (allowed: ", kCommandList, ")"));
  }
  MEDPROF_ASSIGN_OR_RETURN(out.connection, BuildConnection(global, env));
  for (const Subcommand& command : commands) {
    if (!command.app->parsed()) continue;
    MEDPROF_ASSIGN_OR_RETURN(out.body, command.build());
    break;
  }
  return out;
}

}  // namespace medprof::client
