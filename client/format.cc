#include "client/format.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "client/text_table.h"
#include "common/proto_json.h"
#include "common/workload_config.h"

namespace medprof::client {
namespace {

using Json = nlohmann::ordered_json;


std::string Bytes(uint64_t b) {
  if (b == 0) return "-";
  const double gib = static_cast<double>(b) / (1024.0 * 1024.0 * 1024.0);
  if (gib >= 1.0) return absl::StrFormat("%.1f GiB", gib);
  return absl::StrFormat("%.1f MiB", static_cast<double>(b) / (1024.0 * 1024.0));
}

std::string Age(int64_t then_ms, int64_t now_ms) {
  if (then_ms <= 0) return "never";
  const int64_t s = std::max<int64_t>(0, (now_ms - then_ms) / 1000);
  if (s < 120) return absl::StrCat(s, "s ago");
  if (s < 2 * 3600) return absl::StrCat(s / 60, "m ago");
  if (s < 2 * 86400) return absl::StrCat(s / 3600, "h ago");
  return absl::StrCat(s / 86400, "d ago");
}

std::string OnOff(bool v) { return v ? "on" : "off"; }

// Jobs share one schema in every JSON and CSV output.
Json JobJson(const v1::Job& j) {
  Json o;
  o["job_id"] = j.job_id();
  o["preset"] = j.preset();
  o["target"] = j.target();
  o["repeat"] = j.repeat();
  o["state"] = JobStateName(j.state());
  o["attempts"] = j.attempts();
  o["max_attempts"] = j.max_attempts();
  o["run_id"] = j.current_run_id();
  o["error"] = j.error();
  return o;
}

const std::vector<std::string> kJobCsvHeader = {"job_id", "preset", "target", "repeat", "state",
                                                "attempts", "max_attempts", "run_id", "error"};
std::vector<std::string> JobCsvRow(const v1::Job& j) {
  return {j.job_id(), j.preset(), j.target(), absl::StrCat(j.repeat()), JobStateName(j.state()),
          absl::StrCat(j.attempts()), absl::StrCat(j.max_attempts()), j.current_run_id(), j.error()};
}

std::string JobsCsv(const google::protobuf::RepeatedPtrField<v1::Job>& jobs) {
  std::string out = CsvLine(kJobCsvHeader);
  for (const v1::Job& j : jobs) out += CsvLine(JobCsvRow(j));
  return out;
}

Json StringArray(const std::vector<std::string>& items) {
  Json a = Json::array();
  for (const auto& s : items) a.push_back(s);
  return a;
}

// Lines "key  value" with keys padded to one width, each indented by `indent`; pairs with an
// empty value are left out.
std::string KeyValues(const std::vector<std::pair<std::string, std::string>>& kv,
                      const std::string& indent) {
  size_t width = 0;
  for (const auto& [k, v] : kv) {
    if (!v.empty()) width = std::max(width, k.size());
  }
  std::string out;
  for (const auto& [k, v] : kv) {
    if (v.empty()) continue;
    out += indent + k + std::string(width - k.size() + 2, ' ') + v + "\n";
  }
  return out;
}

std::string Indent(const std::string& block, const std::string& indent) {
  std::string out;
  size_t start = 0;
  while (start < block.size()) {
    size_t end = block.find('\n', start);
    if (end == std::string::npos) end = block.size();
    out += indent + block.substr(start, end - start) + "\n";
    start = end + 1;
  }
  return out;
}

std::string DevicesText(const v1::Agent& a) {
  // "NVIDIA H200 x2, cpu" — devices grouped by name, in first-seen order.
  std::vector<std::pair<std::string, int>> groups;
  for (const auto& d : a.devices()) {
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == d.name(); });
    if (it == groups.end()) {
      groups.emplace_back(d.name(), 1);
    } else {
      ++it->second;
    }
  }
  std::vector<std::string> parts;
  for (const auto& [name, n] : groups) parts.push_back(n > 1 ? absl::StrCat(name, " x", n) : name);
  return absl::StrJoin(parts, ", ");
}

std::string LabelsText(const v1::Agent& a, const char* sep) {
  // std::map: labels sorted by key, so output does not depend on protobuf map order.
  std::map<std::string, std::string> sorted(a.labels().begin(), a.labels().end());
  std::vector<std::string> parts;
  for (const auto& [k, v] : sorted) parts.push_back(absl::StrCat(k, "=", v));
  return absl::StrJoin(parts, sep);
}

}  // namespace

// The table's words are common/proto_json.h's EnumSpelling, as in every JSON document.
std::string JobStateName(v1::JobState state) { return EnumSpelling(v1::JobState_descriptor(), state); }
std::string RunStateName(v1::RunState state) { return EnumSpelling(v1::RunState_descriptor(), state); }
std::string StudyStateName(v1::StudyState state) { return EnumSpelling(v1::StudyState_descriptor(), state); }

std::string FormatUnixMs(int64_t unix_ms) {
  if (unix_ms <= 0) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%SZ", absl::FromUnixMillis(unix_ms), absl::UTCTimeZone());
}

std::string DriverLabel(const v1::Environment& env) {
  const std::string& cuda = env.cuda_driver_version();
  if (env.driver_version().empty()) return cuda.empty() ? "" : absl::StrCat("CUDA ", cuda);
  return cuda.empty() ? env.driver_version() : absl::StrCat(env.driver_version(), " (CUDA ", cuda, ")");
}

std::string TargetLabel(const std::string& target) { return target.empty() ? "any" : target; }

std::string FormatSubmit(const v1::SubmitStudyResponse& r, OutputFormat format) {
  switch (format) {
    case OutputFormat::kJson: {
      Json o;
      o["study_id"] = r.study_id();
      o["jobs"] = Json::array();
      for (const auto& j : r.jobs()) o["jobs"].push_back(JobJson(j));
      o["warnings"] = StringArray({r.warnings().begin(), r.warnings().end()});
      return o.dump(2) + "\n";
    }
    case OutputFormat::kCsv:
      return JobsCsv(r.jobs());
    case OutputFormat::kTable:
      break;
  }
  return absl::StrCat("study ", r.study_id(), ": ", r.jobs_size(), r.jobs_size() == 1 ? " job" : " jobs",
                      " queued\n");
}

std::string FormatStudy(const v1::Study& s, OutputFormat format,
                        const std::vector<std::string>& warnings) {
  switch (format) {
    case OutputFormat::kJson: {
      Json o;
      o["study_id"] = s.study_id();
      o["name"] = s.name();
      o["state"] = StudyStateName(s.state());
      o["jobs_total"] = s.jobs_total();
      o["jobs_done"] = s.jobs_done();
      o["jobs"] = Json::array();
      for (const auto& j : s.jobs()) o["jobs"].push_back(JobJson(j));
      o["warnings"] = StringArray(warnings);
      return o.dump(2) + "\n";
    }
    case OutputFormat::kCsv:
      return JobsCsv(s.jobs());
    case OutputFormat::kTable:
      break;
  }
  std::map<v1::JobState, int> counts;
  for (const auto& j : s.jobs()) ++counts[j.state()];
  std::vector<std::string> parts;
  for (v1::JobState st : {v1::JOB_SUCCEEDED, v1::JOB_FAILED, v1::JOB_CANCELLED, v1::JOB_RUNNING, v1::JOB_QUEUED}) {
    if (counts[st] > 0) parts.push_back(absl::StrCat(counts[st], " ", JobStateName(st)));
  }
  std::string out = absl::StrCat("study ", s.study_id(), " ", StudyStateName(s.state()), ": ",
                                 parts.empty() ? "no jobs" : absl::StrJoin(parts, ", "), "\n");
  TextTable t({"JOB", "PRESET", "TARGET", "REPEAT", "STATE", "ATTEMPTS", "RUN"},
              {Align::kLeft, Align::kLeft, Align::kLeft, Align::kRight, Align::kLeft, Align::kRight, Align::kLeft});
  for (const auto& j : s.jobs()) {
    t.AddRow({j.job_id(), j.preset(), TargetLabel(j.target()), absl::StrCat(j.repeat()),
              JobStateName(j.state()), absl::StrCat(j.attempts(), "/", j.max_attempts()),
              j.current_run_id().empty() ? "-" : j.current_run_id()});
  }
  return out + t.Render();
}

std::string FormatStudies(const v1::ListStudiesResponse& r, OutputFormat format) {
  switch (format) {
    case OutputFormat::kJson: {
      Json o;
      o["studies"] = Json::array();
      for (const auto& s : r.studies()) {
        Json e;
        e["study_id"] = s.study_id();
        e["name"] = s.name();
        e["state"] = StudyStateName(s.state());
        e["project"] = s.project();
        e["jobs_total"] = s.jobs_total();
        e["jobs_done"] = s.jobs_done();
        e["created_unix_ms"] = s.created_unix_ms();
        o["studies"].push_back(std::move(e));
      }
      o["next_page_token"] = r.next_page_token();
      return o.dump(2) + "\n";
    }
    case OutputFormat::kCsv: {
      std::string out = CsvLine({"study_id", "name", "state", "project", "jobs_total", "jobs_done", "created_unix_ms"});
      for (const auto& s : r.studies()) {
        out += CsvLine({s.study_id(), s.name(), StudyStateName(s.state()), s.project(),
                        absl::StrCat(s.jobs_total()), absl::StrCat(s.jobs_done()), absl::StrCat(s.created_unix_ms())});
      }
      return out;
    }
    case OutputFormat::kTable:
      break;
  }
  TextTable t({"STUDY", "NAME", "STATE", "JOBS", "CREATED", "PROJECT"},
              {Align::kLeft, Align::kLeft, Align::kLeft, Align::kRight, Align::kLeft, Align::kLeft});
  for (const auto& s : r.studies()) {
    t.AddRow({s.study_id(), s.name().empty() ? "-" : s.name(), StudyStateName(s.state()),
              absl::StrCat(s.jobs_done(), "/", s.jobs_total()), FormatUnixMs(s.created_unix_ms()),
              s.project().empty() ? "-" : s.project()});
  }
  std::string out = t.Render();
  if (!r.next_page_token().empty()) out += "(more studies: raise --limit)\n";
  return out;
}

std::string FormatRuns(const v1::ListRunsResponse& r, OutputFormat format) {
  switch (format) {
    case OutputFormat::kJson: {
      Json o;
      o["runs"] = Json::array();
      for (const auto& run : r.runs()) {
        Json e;
        e["run_id"] = run.run_id();
        e["study_id"] = run.study_id();
        e["job_id"] = run.job_id();
        e["agent_id"] = run.agent_id();
        e["attempt"] = run.attempt();
        e["state"] = RunStateName(run.state());
        e["preset"] = run.preset();
        e["gpu"] = run.gpu();
        e["measured_steps"] = run.summary().measured_steps();
        e["step_ms_median"] = run.summary().step_ms_median();
        e["started_unix_ms"] = run.started_unix_ms();
        e["finished_unix_ms"] = run.finished_unix_ms();
        e["error"] = run.error();
        o["runs"].push_back(std::move(e));
      }
      return o.dump(2) + "\n";
    }
    case OutputFormat::kCsv: {
      std::string out = CsvLine({"run_id", "study_id", "job_id", "agent_id", "attempt", "state", "preset", "gpu",
                                 "measured_steps", "step_ms_median", "started_unix_ms", "finished_unix_ms", "error"});
      for (const auto& run : r.runs()) {
        out += CsvLine({run.run_id(), run.study_id(), run.job_id(), run.agent_id(), absl::StrCat(run.attempt()),
                        RunStateName(run.state()), run.preset(), run.gpu(),
                        absl::StrCat(run.summary().measured_steps()), CsvNumber(run.summary().step_ms_median()),
                        absl::StrCat(run.started_unix_ms()), absl::StrCat(run.finished_unix_ms()), run.error()});
      }
      return out;
    }
    case OutputFormat::kTable:
      break;
  }
  TextTable t({"RUN", "STUDY", "JOB", "ATTEMPT", "STATE", "PRESET", "GPU", "STEPS", "MEDIAN MS", "STARTED"},
              {Align::kLeft, Align::kLeft, Align::kLeft, Align::kRight, Align::kLeft, Align::kLeft, Align::kLeft,
               Align::kRight, Align::kRight, Align::kLeft});
  for (const auto& run : r.runs()) {
    const bool has_summary = run.summary().measured_steps() > 0;
    t.AddRow({run.run_id(), run.study_id(), run.job_id(), absl::StrCat(run.attempt()), RunStateName(run.state()),
              run.preset(), run.gpu().empty() ? "-" : run.gpu(),
              has_summary ? absl::StrCat(run.summary().measured_steps()) : "-",
              has_summary ? Fixed(run.summary().step_ms_median(), 2) : "-", FormatUnixMs(run.started_unix_ms())});
  }
  return t.Render();
}

namespace {

// What the run's network is: a user's TorchScript model by name, hash and size, or Med-DDPM's shape.
std::string ModelText(const v1::WorkloadConfig& c) {
  if (!c.model().sha256().empty()) {
    const uint64_t size = c.model().size_bytes();
    return absl::StrCat(c.model().file_name(), " (TorchScript, sha256 ", c.model().sha256().substr(0, 12), ", ",
                        size < (1u << 20) ? absl::StrCat(size, " bytes") : Bytes(size), ")");
  }
  return absl::StrCat("Med-DDPM: base_channels ", c.base_channels(), ", channel_mult ", absl::StrJoin(c.channel_mult(), ","),
                      ", res_blocks ", c.res_blocks(), ", groups ", c.groups());
}

// The run's effective configuration, as "configuration" key-values.
std::string RunConfigSection(const v1::Run& run) {
  std::string out;
  const v1::WorkloadConfig& c = run.effective();
  const config::Dims d = config::VolumeDims(c);
  const config::PresetFlags f = config::EffectiveFlags(c);
  out += "\nconfiguration\n";
  out += KeyValues(
      {
          {"phase", config::PhaseName(c.phase())},
          {"volume", absl::StrCat(d.d, "x", d.h, "x", d.w)},
          {"batch", absl::StrCat(c.batch())},
          {"steps", absl::StrCat(c.steps(), " measured, ", c.warmup(), " warm-up")},
          {"model", ModelText(c)},
          {"grad_accum", absl::StrCat(c.grad_accum())},
          {"flags", absl::StrCat("tf32 ", OnOff(f.tf32), ", channels_last ", OnOff(f.channels_last),
                                 ", bf16 ", OnOff(f.bf16), ", fused ", OnOff(f.fused))},
      },
      "  ");
  return out;
}

// Where the run ran, as "environment" key-values.
std::string RunEnvironmentSection(const v1::Run& run) {
  std::string out;
  const v1::Environment& e = run.environment();
  std::string clocks;
  if (e.sm_clock_mhz() > 0 || e.mem_clock_mhz() > 0) {
    clocks = absl::StrCat("sm ", e.sm_clock_mhz(), " MHz, mem ", e.mem_clock_mhz(), " MHz");
    if (e.power_limit_w() > 0) absl::StrAppend(&clocks, ", power cap ", e.power_limit_w(), " W");
    if (!e.throttle_reasons().empty()) absl::StrAppend(&clocks, ", throttle: ", e.throttle_reasons());
  }
  std::string slurm;
  if (!e.slurm_job_id().empty()) slurm = absl::StrCat("job ", e.slurm_job_id(), " partition ", e.slurm_partition());
  out += "\nenvironment\n";
  out += KeyValues(
      {
          {"host", e.host()},
          {"site", e.site()},
          {"device", e.device()},
          {"gpu", e.gpu_name().empty() ? "" : absl::StrCat(e.gpu_name(), e.compute_capability().empty() ? "" : absl::StrCat(" (cc ", e.compute_capability(), ")"))},
          {"gpu uuid", e.gpu_uuid()},
          {"driver", DriverLabel(e)},
          {"cuda runtime", e.cuda_runtime_version()},
          {"cudnn", e.cudnn_version()},
          {"torch", e.torch_version()},
          {"cupti", e.cupti_version()},
          {"cpu", e.cpu_model().empty() ? "" : absl::StrCat(e.cpu_model(), e.cpu_threads() > 0 ? absl::StrCat(", ", e.cpu_threads(), " threads") : "")},
          {"clocks", clocks},
          {"mig / ecc", absl::StrCat(OnOff(e.mig_enabled()), " / ", OnOff(e.ecc_enabled()))},
          {"counters", e.counters_admin_only() ? "admin only" : "user"},
          {"slurm", slurm},
          {"container", e.container_image()},
          {"worker", e.worker_version()},
          {"agent", e.agent_version()},
          {"flags read back", absl::StrCat("tf32_cudnn ", OnOff(e.tf32_cudnn()), ", tf32_matmul ", OnOff(e.tf32_matmul()),
                                           ", channels_last ", OnOff(e.channels_last()), ", bf16 ", OnOff(e.bf16()),
                                           ", fused ", OnOff(e.fused()), ", cudnn_benchmark ", OnOff(e.cudnn_benchmark()))},
      },
      "  ");
  return out;
}

// The run's summary: step times, memory, loss, the profiler layers.
std::string RunSummarySection(const v1::Run& run) {
  std::string out;
  const v1::RunSummary& s = run.summary();
  std::vector<std::string> layers;
  for (const auto& l : s.layers()) {
    layers.push_back(l.ran() ? absl::StrCat(l.layer(), ": ran") : absl::StrCat(l.layer(), ": not run (", l.reason(), ")"));
  }
  out += "\nsummary\n";
  out += KeyValues(
      {
          {"measured steps", absl::StrCat(s.measured_steps())},
          {"step ms", absl::StrCat("median ", Fixed(s.step_ms_median(), 2), ", mean ", Fixed(s.step_ms_mean(), 2),
                                   ", min ", Fixed(s.step_ms_min(), 2), ", max ", Fixed(s.step_ms_max(), 2))},
          {"peak memory", Bytes(s.peak_memory_bytes())},
          {"final loss", absl::StrFormat("%.6g", s.final_loss())},
          {"wall", absl::StrFormat("%.1f s", s.wall_ms() / 1000.0)},
          {"trace overhead", s.trace_overhead_pct() > 0 ? absl::StrFormat("%.2f%%", s.trace_overhead_pct()) : ""},
          {"layers", absl::StrJoin(layers, "; ")},
      },
      "  ");
  return out;
}

// The run's step times and its top ops and kernels by total time, as tables.
std::string RunTables(const v1::Run& run) {
  std::string out;
  if (run.steps_size() > 0) {
    TextTable t({"STEP", "PHASE", "WALL MS", "DEVICE MS", "LOSS"},
                {Align::kRight, Align::kLeft, Align::kRight, Align::kRight, Align::kRight});
    for (const auto& st : run.steps()) {
      t.AddRow({absl::StrCat(st.step()), config::PhaseName(st.phase()), Fixed(st.wall_ns() / 1e6, 3),
                st.device_ns() > 0 ? Fixed(st.device_ns() / 1e6, 3) : "-", absl::StrFormat("%.6g", st.loss())});
    }
    out += "\nstep times\n" + Indent(t.Render(), "  ");
  }
  constexpr int kTop = 10;
  if (run.ops_size() > 0) {
    std::vector<const v1::OpStat*> ops;
    for (const auto& o : run.ops()) ops.push_back(&o);
    std::stable_sort(ops.begin(), ops.end(), [](const auto* a, const auto* b) { return a->total_ns() > b->total_ns(); });
    TextTable t({"OP", "PHASE", "CATEGORY", "COUNT", "TOTAL MS", "SELF MS"},
                {Align::kLeft, Align::kLeft, Align::kLeft, Align::kRight, Align::kRight, Align::kRight});
    for (size_t i = 0; i < ops.size() && i < kTop; ++i) {
      const auto* o = ops[i];
      t.AddRow({o->name(), o->phase().empty() ? "-" : o->phase(), o->category(), absl::StrCat(o->count()),
                Fixed(o->total_ns() / 1e6, 3), Fixed(o->self_ns() / 1e6, 3)});
    }
    out += absl::StrCat("\ntop ops by total time (", std::min<int>(kTop, ops.size()), " of ", ops.size(), ")\n");
    out += Indent(t.Render(), "  ");
  }
  if (run.kernels_size() > 0) {
    std::vector<const v1::KernelStat*> ks;
    for (const auto& k : run.kernels()) ks.push_back(&k);
    std::stable_sort(ks.begin(), ks.end(), [](const auto* a, const auto* b) { return a->total_ns() > b->total_ns(); });
    TextTable t({"KERNEL", "CATEGORY", "OP", "COUNT", "TOTAL MS", "AVG US"},
                {Align::kLeft, Align::kLeft, Align::kLeft, Align::kRight, Align::kRight, Align::kRight});
    for (size_t i = 0; i < ks.size() && i < kTop; ++i) {
      const auto* k = ks[i];
      t.AddRow({ClipToWidth(k->name(), 60), k->category(), k->op().empty() ? "-" : k->op(), absl::StrCat(k->count()),
                Fixed(k->total_ns() / 1e6, 3),
                k->count() > 0 ? Fixed(k->total_ns() / 1e3 / static_cast<double>(k->count()), 1) : "-"});
    }
    out += absl::StrCat("\ntop kernels by total time (", std::min<int>(kTop, ks.size()), " of ", ks.size(), ")\n");
    out += Indent(t.Render(), "  ");
  }
  return out;
}

}  // namespace

std::string FormatRun(const v1::Run& run, OutputFormat format) {
  if (format == OutputFormat::kJson) {
    return MessageToJson(run).value_or("{}\n");
  }
  std::string out = KeyValues(
      {
          {"run", run.run_id()},
          {"study", run.study_id()},
          {"job", absl::StrCat(run.job_id(), " (attempt ", run.attempt(), ")")},
          {"state", RunStateName(run.state())},
          {"preset", run.preset()},
          {"gpu", run.gpu()},
          {"agent", run.agent_id()},
          {"started", FormatUnixMs(run.started_unix_ms())},
          {"finished", FormatUnixMs(run.finished_unix_ms())},
          {"parameters", run.parameters() > 0 ? absl::StrCat(run.parameters()) : ""},
          {"error", run.error()},
      },
      "");
  if (!run.stderr_tail().empty()) out += "stderr (last lines):\n" + Indent(run.stderr_tail(), "  ");

  if (run.has_effective()) out += RunConfigSection(run);
  if (run.has_environment()) out += RunEnvironmentSection(run);
  if (run.has_summary()) out += RunSummarySection(run);
  out += RunTables(run);
  return out;
}

std::string FormatAgents(const v1::ListAgentsResponse& r, OutputFormat format, int64_t now_unix_ms) {
  switch (format) {
    case OutputFormat::kJson: {
      Json o;
      o["agents"] = Json::array();
      for (const auto& a : r.agents()) {
        Json e;
        e["agent_id"] = a.agent_id();
        e["name"] = a.name();
        e["host"] = a.host();
        e["version"] = a.version();
        e["online"] = a.online();
        e["running_jobs"] = a.running_jobs();
        e["last_seen_unix_ms"] = a.last_seen_unix_ms();
        Json labels = Json::object();
        std::map<std::string, std::string> sorted(a.labels().begin(), a.labels().end());
        for (const auto& [k, v] : sorted) labels[k] = v;
        e["labels"] = std::move(labels);
        e["devices"] = Json::array();
        for (const auto& d : a.devices()) {
          Json dj;
          dj["index"] = d.index();
          dj["kind"] = d.kind();
          dj["name"] = d.name();
          dj["uuid"] = d.uuid();
          dj["compute_capability"] = d.compute_capability();
          dj["memory_bytes"] = d.memory_bytes();
          dj["mig_enabled"] = d.mig_enabled();
          dj["counters_admin_only"] = d.counters_admin_only();
          e["devices"].push_back(std::move(dj));
        }
        o["agents"].push_back(std::move(e));
      }
      return o.dump(2) + "\n";
    }
    case OutputFormat::kCsv: {
      std::string out = CsvLine({"agent_id", "name", "host", "version", "online", "running_jobs", "last_seen_unix_ms", "devices", "labels"});
      for (const auto& a : r.agents()) {
        std::vector<std::string> names;
        for (const auto& d : a.devices()) names.push_back(d.name());
        out += CsvLine({a.agent_id(), a.name(), a.host(), a.version(), a.online() ? "true" : "false",
                        absl::StrCat(a.running_jobs()), absl::StrCat(a.last_seen_unix_ms()), absl::StrJoin(names, ";"),
                        LabelsText(a, ";")});
      }
      return out;
    }
    case OutputFormat::kTable:
      break;
  }
  TextTable t({"AGENT", "NAME", "HOST", "ONLINE", "RUNNING", "DEVICES", "LABELS", "VERSION", "LAST SEEN"},
              {Align::kLeft, Align::kLeft, Align::kLeft, Align::kLeft, Align::kRight, Align::kLeft, Align::kLeft,
               Align::kLeft, Align::kLeft});
  for (const auto& a : r.agents()) {
    const std::string labels = LabelsText(a, ",");
    t.AddRow({a.agent_id(), a.name(), a.host(), a.online() ? "yes" : "no", absl::StrCat(a.running_jobs()),
              DevicesText(a), labels.empty() ? "-" : labels, a.version(), Age(a.last_seen_unix_ms(), now_unix_ms)});
  }
  return t.Render();
}

}  // namespace medprof::client
