// The query commands end to end on real parts: a study of the four study presets on the CPU
// (tiny model), then `compare`, `kernels`, `diff` and `export` through the real CLI, with the
// compare speedups recomputed from the raw steps in the server's SQLite file, and the server's
// Prometheus endpoint scraped over HTTP.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>
#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"
#include "tests/testing/json_face.h"

namespace medprof::itest {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

std::string HttpGet(const std::string& host_port, const std::string& path) {
  const size_t colon = host_port.rfind(':');
  int port = 0;
  if (!absl::SimpleAtoi(host_port.substr(colon + 1), &port)) return "";
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, host_port.substr(0, colon).c_str(), &sa.sin_addr);
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0) {
    const std::string req = "GET " + path + " HTTP/1.0\r\nHost: x\r\n\r\n";
    (void)::send(fd, req.data(), req.size(), 0);
    char buf[4096];
    ssize_t n;
    while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

TEST(QueryFlowTest, FourPresetsOnTheCpuComparedKernelsDiffedExported) {
  const std::string dir = MakeTempDir("query");
  auto server = ServerFixture::Start(dir + "/medprof.db", {"--metrics-listen", "127.0.0.1:0"});
  ASSERT_TRUE(server.ok()) << server.status();
  std::optional<std::string> metrics_line =
      (*server)->process().WaitForLine("Prometheus metrics on http://", std::chrono::seconds(10));
  ASSERT_TRUE(metrics_line.has_value()) << (*server)->process().AllOutput();
  const size_t at = metrics_line->find("http://") + 7;
  const std::string metrics_addr = metrics_line->substr(at, metrics_line->find("/metrics", at) - at);

  auto agent = StartAgent((*server)->address(), dir + "/agent", "agent-q");
  ASSERT_TRUE(agent.ok()) << agent.status();

  std::vector<std::string> args = {"submit", "--presets", "baseline,opt1,opt2,opt12", "--steps", "3", "--warmup",
                                   "1", "--grad-accum", "1", "--wait", "--format", "json"};
  for (const auto& f : TinyModelFlags()) args.push_back(f);
  CommandResult submit = Cli((*server)->address(), args);
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  const json study = json::parse(submit.out);
  const std::string study_id = study.at("study_id").get<std::string>();
  ASSERT_EQ(study.at("jobs").size(), 4u);

  // compare: one cell per preset, speedups recomputed from the stored steps.
  CommandResult cmp = Cli((*server)->address(), {"compare", study_id, "--format", "json"});
  ASSERT_EQ(cmp.exit_code, 0) << cmp.err;
  const json c = json::parse(cmp.out);
  ASSERT_EQ(c.at("cells").size(), 4u) << cmp.out;
  EXPECT_EQ(c.at("runs_compared"), 4);
  auto probe = DbProbe::Open((*server)->db_path());
  ASSERT_TRUE(probe.ok()) << probe.status();
  std::map<std::string, double> medians;
  for (const char* preset : {"baseline", "opt1", "opt2", "opt12"}) {
    auto rows = (*probe)->Rows(absl::StrCat(
        "SELECT s.wall_ns FROM run_steps s JOIN runs r ON r.run_id = s.run_id JOIN jobs j ON j.job_id = r.job_id "
        "WHERE r.study_id = '", study_id, "' AND r.state = 'succeeded' AND j.preset = '", preset, "'"));
    ASSERT_TRUE(rows.ok()) << rows.status();
    ASSERT_EQ(rows->size(), 3u) << preset;
    std::vector<double> ms;
    for (const auto& row : *rows) ms.push_back(std::stod(row[0]) / 1e6);
    medians[preset] = Median(ms);
  }
  std::set<std::string> presets;
  for (const json& cell : c.at("cells")) {
    const std::string preset = cell.at("preset").get<std::string>();
    presets.insert(preset);
    EXPECT_EQ(cell.at("gpu"), "cpu");
    EXPECT_EQ(cell.at("n"), 1);
    EXPECT_EQ(cell.at("steps"), 3);
    EXPECT_NEAR(cell.at("step_ms_median").get<double>(), medians[preset], 1e-6) << preset;
    EXPECT_NEAR(cell.at("speedup_vs_baseline").get<double>(), medians["baseline"] / medians[preset], 1e-9) << preset;
    // The CPU backend measures no counters: the cell says why instead of printing zeros.
    EXPECT_EQ(cell.at("metrics").at("collected"), false);
    EXPECT_THAT(cell.at("metrics").at("note").get<std::string>(), HasSubstr("metrics not collected: "));
    EXPECT_FALSE(cell.at("metrics").contains("sm_cycles_ratio"));
  }
  EXPECT_EQ(presets, (std::set<std::string>{"baseline", "opt1", "opt2", "opt12"}));

  // The same comparison through a run filter of two runs.
  std::map<std::string, std::string> run_of;  // preset -> run id
  for (const json& j : study.at("jobs")) run_of[j.at("preset").get<std::string>()] = j.at("run_id").get<std::string>();
  CommandResult filtered = Cli((*server)->address(), {"compare", "--runs", run_of["baseline"] + "," + run_of["opt12"],
                                                      "--format", "json"});
  ASSERT_EQ(filtered.exit_code, 0) << filtered.err;
  const json f = json::parse(filtered.out);
  ASSERT_EQ(f.at("cells").size(), 2u);
  EXPECT_NEAR(f.at("cells")[1].at("speedup_vs_baseline").get<double>(), medians["baseline"] / medians["opt12"], 1e-9);

  // kernels: the CPU run has op rows only; sorted by time, shares summing to 1.
  CommandResult k = Cli((*server)->address(), {"kernels", run_of["opt1"], "--format", "json"});
  ASSERT_EQ(k.exit_code, 0) << k.err;
  const json kj = json::parse(k.out);
  ASSERT_FALSE(kj.at("kernels").empty());
  auto stored = (*probe)->Int(absl::StrCat("SELECT COUNT(*) FROM run_kernels WHERE run_id = '", run_of["opt1"], "'"));
  ASSERT_TRUE(stored.ok());
  auto stored_ops = (*probe)->Int(absl::StrCat("SELECT COUNT(*) FROM run_ops WHERE run_id = '", run_of["opt1"], "'"));
  ASSERT_TRUE(stored_ops.ok());
  EXPECT_EQ(kj.at("time_source"), *stored > 0 ? "kernels" : "ops");
  EXPECT_EQ(kj.at("total_rows"), *stored > 0 ? *stored : *stored_ops);
  double share = 0;
  int64_t prev = INT64_MAX;
  for (const json& row : kj.at("kernels")) {
    share += row.at("share").get<double>();
    EXPECT_LE(row.at("total_ns").get<int64_t>(), prev);
    prev = row.at("total_ns").get<int64_t>();
  }
  EXPECT_NEAR(share, 1.0, 1e-9);

  // diff: aligned rows with per-step times.
  CommandResult d = Cli((*server)->address(), {"diff", run_of["baseline"], run_of["opt2"], "--format", "json"});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  const json dj = json::parse(d.out);
  EXPECT_EQ(dj.at("a_steps"), 3);
  ASSERT_FALSE(dj.at("rows").empty());
  int64_t a_total = 0;
  for (const json& row : dj.at("rows")) {
    a_total += row.at("a_ns").get<int64_t>();
    EXPECT_EQ(row.at("delta_ns").get<int64_t>(), row.at("b_ns").get<int64_t>() - row.at("a_ns").get<int64_t>());
  }
  EXPECT_EQ(dj.at("a_total_ns"), a_total);

  // export: CPU runs store their host timeline (the op tracer's records), so chrome-trace works on
  // every run; event names are the op or phase name alone, the step an argument.
  auto parts = (*probe)->Int(absl::StrCat("SELECT COUNT(*) FROM run_timelines WHERE run_id = '", run_of["opt1"],
                                          "' AND kind = 'timeline'"));
  ASSERT_TRUE(parts.ok());
  EXPECT_GT(*parts, 0);
  CommandResult trace = Cli((*server)->address(), {"export", run_of["opt1"], "--format", "chrome-trace"});
  ASSERT_EQ(trace.exit_code, 0) << trace.err;
  int op_events = 0;
  const json tj = json::parse(trace.out);  // named: a range-for over a temporary's member would dangle
  for (const json& e : tj.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    EXPECT_THAT(e.at("name").get<std::string>(), Not(HasSubstr("step ")));
    EXPECT_TRUE(e.at("args").contains("step"));
    if (e.at("cat") == "op") ++op_events;
  }
  EXPECT_GT(op_events, 0);
  CommandResult csv = Cli((*server)->address(), {"export", run_of["opt1"], "--format", "csv"});
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  EXPECT_THAT(csv.out, HasSubstr("table,name,scope,op,phase,category,step,count,total_ns,self_ns,value,unit\nstep,"));

  // upload: a run made by hand (medprof-worker --out) joins the study and compare.
  std::vector<std::string> worker = {BinPath("medprof-worker"), "--preset", "bf16", "--steps", "3", "--warmup", "1",
                                     "--grad-accum", "1", "--out", dir + "/byhand.pb"};
  for (const auto& f : TinyModelFlags()) worker.push_back(f);
  CommandResult made = RunCommand(worker, {}, std::chrono::seconds(120));
  ASSERT_EQ(made.exit_code, 0) << made.err;
  CommandResult up = Cli((*server)->address(), {"upload", dir + "/byhand.pb", "--study", study_id, "--format", "json"});
  ASSERT_EQ(up.exit_code, 0) << up.err;
  EXPECT_EQ(json::parse(up.out).at("preset"), "bf16");
  medprof::testing::ExpectTableSpellings(up.out, "upload");  // one JSON face (issue 19)
  CommandResult cmp2 = Cli((*server)->address(), {"compare", study_id, "--format", "json"});
  ASSERT_EQ(cmp2.exit_code, 0) << cmp2.err;
  const json c2 = json::parse(cmp2.out);
  ASSERT_EQ(c2.at("cells").size(), 5u);
  EXPECT_EQ(c2.at("cells")[4].at("preset"), "bf16");
  EXPECT_EQ(c2.at("cells")[4].at("steps"), 3);
  // A file that is not a worker's record stream is refused, naming the cause.
  CommandResult bad = Cli((*server)->address(), {"upload", dir + "/medprof.db", "--study", study_id});
  EXPECT_EQ(bad.exit_code, 1) << bad.err;
  EXPECT_THAT(bad.err, HasSubstr("medprof: upload: "));

  // Prometheus: every job succeeded, the agent is online, rows were ingested, compare was timed.
  const std::string scrape = HttpGet(metrics_addr, "/metrics");
  EXPECT_THAT(scrape, HasSubstr("medprof_jobs{state=\"succeeded\"} 5"));  // 4 by the agent, 1 uploaded
  EXPECT_THAT(scrape, HasSubstr("medprof_agents{status=\"online\"} 1"));
  EXPECT_THAT(scrape, HasSubstr("medprof_query_duration_seconds_count{query=\"compare\"} 3"));
  EXPECT_THAT(scrape, HasSubstr("medprof_ingested_rows_total"));

  // One JSON face (issue 19), after the scrape that counts queries: every listing command's
  // JSON, on real runs, in the tables' words.
  const std::string up_run = json::parse(up.out).at("run_id").get<std::string>();
  for (const std::vector<std::string>& listing : std::vector<std::vector<std::string>>{
           {"studies"}, {"runs", "--study", study_id}, {"run", up_run}, {"agents"}, {"compare", study_id},
           {"kernels", up_run}, {"diff", up_run, up_run}, {"watch", study_id}}) {
    std::vector<std::string> args = listing;
    args.insert(args.end(), {"--format", "json"});
    CommandResult r = Cli((*server)->address(), args);
    ASSERT_EQ(r.exit_code, 0) << listing[0] << ": " << r.err;
    medprof::testing::ExpectTableSpellings(r.out, listing[0]);
  }
  CommandResult exported = Cli((*server)->address(), {"export", up_run, "--format", "json"});
  ASSERT_EQ(exported.exit_code, 0) << exported.err;
  medprof::testing::ExpectTableSpellings(exported.out, "export");
  EXPECT_THAT(exported.out, ::testing::ContainsRegex("\"state\": *\"succeeded\""));
}

}  // namespace
}  // namespace medprof::itest
