// The deployment files as code (STYLE.md rule 15), checked without Apptainer or Slurm: every
// shell script passes `bash -n` and shellcheck; the Apptainer definitions use the shared
// install script and build what the sites need; the systemd units pass `systemd-analyze
// verify` and keep their hardening; the example configuration files are accepted by the
// programs themselves (the server starts with server.env's flags, the agent validates
// agent.env's and slurm-agent.env's with --print-inventory).
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/harness.h"
#include "tests/testing/json_face.h"

namespace medprof::deploy {
namespace {

namespace fs = std::filesystem;
using ::medprof::itest::BinPath;
using ::medprof::itest::CommandResult;
using ::medprof::itest::MakeTempDir;

// itest::RunCommand execs argv[0] as a path; /usr/bin/env finds programs on PATH (and exits
// 127 when one is missing).
CommandResult RunCommand(std::vector<std::string> argv, const std::map<std::string, std::string>& env = {},
                         std::chrono::seconds timeout = std::chrono::seconds(300)) {
  if (!argv.empty() && argv[0].find('/') == std::string::npos) argv.insert(argv.begin(), "/usr/bin/env");
  return itest::RunCommand(argv, env, timeout);
}
using ::testing::HasSubstr;
using ::testing::Not;

std::string SourceDir() {
  const char* d = std::getenv("MEDPROF_SOURCE_DIR");
  return d == nullptr ? std::string(MEDPROF_SOURCE_DIR_DEFAULT) : std::string(d);
}

std::string ReadText(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteText(const fs::path& p, const std::string& text, mode_t mode = 0644) {
  std::ofstream(p) << text;
  ::chmod(p.c_str(), mode);
}

std::string TlsDir() { return SourceDir() + "/tests/unit/agent/testdata/tls"; }

// Directories that hold no project sources (build trees, carried packages, VCS data).
bool SkippedDir(const std::string& name) {
  return name == ".git" || absl::StartsWith(name, "build") || name == ".carry" || name == ".gl" ||
         name == ".whl" || name == "out" || name == "demo-out" || name == "bench-out" ||
         name == "node_modules";
}

// Every shell script of the tree: *.sh, *.sbatch, and files whose first line is a bash/sh shebang.
std::vector<std::string> ShellScripts() {
  std::vector<std::string> out;
  const fs::path root = SourceDir();
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    if (it->is_directory()) {
      if (SkippedDir(it->path().filename().string())) it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file()) continue;
    const std::string name = it->path().filename().string();
    bool shell = absl::EndsWith(name, ".sh") || absl::EndsWith(name, ".sbatch");
    if (!shell && it->path().extension().empty()) {
      std::ifstream in(it->path());
      std::string first;
      std::getline(in, first);
      shell = absl::StartsWith(first, "#!") && (absl::StrContains(first, "bash") ||
                                                absl::EndsWith(first, "/sh") || absl::EndsWith(first, " sh"));
    }
    if (shell) out.push_back(fs::relative(it->path(), root).string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(DeployShellTest, EveryShellScriptPassesBashN) {
  const std::vector<std::string> scripts = ShellScripts();
  // The ones this suite is about must be among them (the walk itself is under test too).
  for (const char* must : {"scripts/install-deps.sh", "scripts/bundle.sh", "scripts/gpu-node-run.sh",
                           "deploy/slurm/stampede3-h100.sbatch", "deploy/slurm/expanse-gpu-shared.sbatch",
                           "tests/deploy/testdata/apptainer"}) {
    EXPECT_THAT(scripts, ::testing::Contains(std::string(must)));
  }
  for (const std::string& s : scripts) {
    CommandResult r = RunCommand({"bash", "-n", SourceDir() + "/" + s});
    EXPECT_EQ(r.exit_code, 0) << s << ":\n" << r.err;
  }
}

TEST(DeployShellTest, EveryShellScriptPassesShellcheck) {
  const std::vector<std::string> scripts = ShellScripts();
  ASSERT_GE(scripts.size(), 10u);
  // Warnings and errors fail; info and style notes (e.g. SC2317 on trap handlers, SC1091 on
  // /etc/os-release) do not. shellcheck comes with scripts/install-deps.sh.
  // Run from the source root so that the messages name repository paths.
  std::vector<std::string> argv = {"bash",
                                   "-c",
                                   "cd \"$1\" && shift && exec \"$@\"",
                                   "in-root",
                                   SourceDir(),
                                   "shellcheck",
                                   "--severity=warning",
                                   "--format=gcc"};
  for (const std::string& s : scripts) argv.push_back(s);
  CommandResult r = RunCommand(argv, {}, std::chrono::seconds(120));
  ASSERT_NE(r.exit_code, 127) << "shellcheck is not installed (scripts/install-deps.sh installs it)";
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

// ---------------------------------------------------------------- Apptainer definitions

// Sections of an Apptainer definition: "header" and "%post", "%test", ...
std::map<std::string, std::string> DefSections(const std::string& text) {
  std::map<std::string, std::string> out;
  std::string current = "header";
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(line, "%")) {
      current = std::string(line.substr(0, line.find_first_of(" \t")));
      out[current];
      continue;
    }
    absl::StrAppend(&out[current], line, "\n");
  }
  return out;
}

TEST(DeployApptainerTest, DefinitionsBuildFromUbuntu2404WithTheSharedInstallScript) {
  const std::map<std::string, std::string> arch = {{"medprof-cuda12.def", "70;80;90"},
                                                   {"medprof-cuda13.def", "75;80;90"}};
  for (const auto& [file, archs] : arch) {
    SCOPED_TRACE(file);
    const std::string text = ReadText(SourceDir() + "/deploy/apptainer/" + file);
    ASSERT_FALSE(text.empty());
    auto s = DefSections(text);
    EXPECT_THAT(s["header"], HasSubstr("Bootstrap: docker\n"));
    EXPECT_THAT(s["header"], ::testing::ContainsRegex("From: nvidia/cuda:[0-9.]+-devel-ubuntu24\\.04\n"));
    // The same install script as README and CI, and the build with the site architectures.
    EXPECT_THAT(s["%post"], HasSubstr("bash scripts/install-deps.sh --no-libtorch"));
    EXPECT_THAT(s["%post"], HasSubstr(absl::StrCat("CUDA_ARCHITECTURES=\"", archs, "\"")));
    EXPECT_THAT(s["%post"], HasSubstr("-DMEDPROF_WITH_CUDA=ON"));
    EXPECT_THAT(s["%post"], HasSubstr("ctest -L unit"));
    EXPECT_THAT(s["%runscript"], HasSubstr("exec /opt/medprof/bin/medprof-agent \"$@\""));
    EXPECT_THAT(s["%test"], HasSubstr("deploy/apptainer/run_unit_tests.py /opt/medprof/unit-tests.json"));
    EXPECT_THAT(s["%files"], HasSubstr("medprof-src.tar /opt/medprof/medprof-src.tar"));
    // CUDA 13 dropped Volta: only the CUDA 12 image may name sm_70, and it must use cu126 wheels.
    if (file == "medprof-cuda13.def") {
      EXPECT_THAT(s["header"], HasSubstr("nvidia/cuda:13."));
      EXPECT_THAT(s["%post"], HasSubstr("whl/cu130"));
    } else {
      EXPECT_THAT(s["header"], HasSubstr("nvidia/cuda:12."));
      EXPECT_THAT(s["%post"], HasSubstr("whl/cu126"));
    }
  }
  // The install script the definitions call knows Ubuntu 24.04 and the flag they pass.
  const std::string install = ReadText(SourceDir() + "/scripts/install-deps.sh");
  EXPECT_THAT(install, HasSubstr("ubuntu:24.04"));
  EXPECT_THAT(install, HasSubstr("--no-libtorch)"));
}

TEST(DeployApptainerTest, ScriptSectionsPassShellcheckAsPosixSh) {
  // Apptainer runs %post, %test and %runscript with /bin/sh (dash on Ubuntu).
  const std::string dir = MakeTempDir("def-sections");
  for (const char* file : {"medprof-cuda12.def", "medprof-cuda13.def"}) {
    auto s = DefSections(ReadText(SourceDir() + "/deploy/apptainer/" + file));
    for (const char* section : {"%post", "%test", "%runscript", "%environment"}) {
      SCOPED_TRACE(absl::StrCat(file, " ", section));
      ASSERT_FALSE(s[section].empty());
      const std::string path = absl::StrCat(dir, "/", file, section + 1, ".sh");
      WriteText(path, "#!/bin/sh\n" + s[section]);
      CommandResult r = RunCommand({"shellcheck", "--shell=sh", "--severity=warning", "--format=gcc", path});
      EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    }
  }
}

TEST(DeployApptainerTest, UnitTestRunnerRunsTheListedTestsAndReportsFailures) {
  const std::string dir = MakeTempDir("runner");
  // Two "tests" in ctest's json-v1 shape: one passes and sees its ENVIRONMENT, one fails.
  const std::string ok_script = dir + "/ok.sh", bad_script = dir + "/bad.sh";
  WriteText(ok_script, "#!/bin/sh\n[ \"$MEDPROF_X\" = 42 ] && [ \"$(pwd)\" != / ]\n", 0755);
  WriteText(bad_script, "#!/bin/sh\necho broken-on-purpose\nexit 3\n", 0755);
  const std::string json = dir + "/tests.json";
  WriteText(
      json,
      absl::StrCat(
          R"({"kind":"ctestInfo","tests":[)", R"({"name":"ok_test","command":[")", ok_script,
          R"("],"properties":[{"name":"ENVIRONMENT","value":["MEDPROF_X=42"]},{"name":"TIMEOUT","value":20}]},)",
          R"({"name":"bad_test","command":[")", bad_script, R"("],"properties":[]}]})"));
  const std::string runner = SourceDir() + "/deploy/apptainer/run_unit_tests.py";
  CommandResult r = RunCommand({"python3", runner, json});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr("ok   ok_test"));
  EXPECT_THAT(r.out, HasSubstr("FAIL bad_test"));
  EXPECT_THAT(r.out, HasSubstr("broken-on-purpose"));
  EXPECT_THAT(r.out, HasSubstr("1/2 unit tests passed"));
}

// ---------------------------------------------------------------- systemd units

// The unit with its ExecStart program replaced by the built one (verify checks that it exists).
std::string UnitForVerify(const std::string& file, const std::string& program) {
  std::string text = ReadText(SourceDir() + "/deploy/systemd/" + file);
  for (const char* installed : {"/usr/local/bin/", "/opt/medprof/bin/"}) {
    const std::string from = absl::StrCat("ExecStart=", installed, program, " ");
    const size_t at = text.find(from);
    if (at != std::string::npos) {
      text.replace(at, from.size(), absl::StrCat("ExecStart=", fs::absolute(BinPath(program)).string(), " "));
    }
  }
  return text;
}

TEST(DeploySystemdTest, UnitsPassSystemdAnalyzeVerify) {
  const std::string dir = MakeTempDir("units");
  std::vector<std::string> argv = {"systemd-analyze", "verify"};
  for (const auto& [file, program] : std::vector<std::pair<std::string, std::string>>{
           {"medprof-server.service", "medprof-server"}, {"medprof-agent.service", "medprof-agent"}}) {
    const std::string text = UnitForVerify(file, program);
    ASSERT_THAT(text, HasSubstr(fs::absolute(BinPath(program)).string()))
        << file << ": ExecStart does not start " << program;
    WriteText(dir + "/" + file, text);
    argv.push_back(dir + "/" + file);
  }
  CommandResult r = RunCommand(argv);
  ASSERT_NE(r.exit_code, 127) << "systemd-analyze is missing (scripts/install-deps.sh installs systemd)";
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out + r.err, "") << "systemd-analyze verify printed warnings";
}

double ExposureLevel(const std::string& unit_path) {
  CommandResult r = RunCommand({"systemd-analyze", "security", "--offline=yes", "--no-pager", unit_path});
  std::smatch m;
  static const std::regex re("Overall exposure level for [^:]+: ([0-9.]+)");
  const std::string text = r.out + r.err;
  if (!std::regex_search(text, m, re)) {
    ADD_FAILURE() << "no exposure level in:\n" << text;
    return 99;
  }
  return std::stod(m[1]);
}

TEST(DeploySystemdTest, UnitsAreHardened) {
  const std::string dir = MakeTempDir("security");
  const std::string server = UnitForVerify("medprof-server.service", "medprof-server");
  const std::string agent = UnitForVerify("medprof-agent.service", "medprof-agent");
  for (const std::string* unit : {&server, &agent}) {
    for (const char* line :
         {"\nNoNewPrivileges=yes\n", "\nCapabilityBoundingSet=\n", "\nProtectSystem=strict\n",
          "\nProtectHome=yes\n", "\nUMask=0077\n", "\nSystemCallFilter=@system-service\n"}) {
      EXPECT_THAT(*unit, HasSubstr(line));
    }
  }
  // The server: its own user, state in StateDirectory, keys through LoadCredential, no devices.
  EXPECT_THAT(server, HasSubstr("\nUser=medprof\n"));
  EXPECT_THAT(server, HasSubstr("\nStateDirectory=medprof\n"));
  EXPECT_THAT(server, HasSubstr("\nLoadCredential=server.key:/etc/medprof/tls/server.key\n"));
  EXPECT_THAT(server, HasSubstr("--tls-key %d/server.key"));
  EXPECT_THAT(server, HasSubstr("\nPrivateDevices=yes\n"));
  EXPECT_THAT(server, HasSubstr("\nMemoryDenyWriteExecute=yes\n"));
  // The agent: the GPU stays reachable, the token comes as a credential, one writable dir.
  EXPECT_THAT(agent, Not(HasSubstr("\nPrivateDevices=yes")));
  EXPECT_THAT(agent, HasSubstr("\nDevicePolicy=closed\n"));
  EXPECT_THAT(agent, HasSubstr("\nDeviceAllow=char-nvidia-frontend rw\n"));
  EXPECT_THAT(agent, HasSubstr("\nDeviceAllow=/dev/nvidiactl rw\n"));
  EXPECT_THAT(agent, HasSubstr("\nLoadCredential=agent.token:/etc/medprof/agent.token\n"));
  EXPECT_THAT(agent, HasSubstr("--token-file %d/agent.token"));
  EXPECT_THAT(agent, HasSubstr("\nStateDirectory=medprof-agent\n"));
  EXPECT_THAT(agent, HasSubstr("\nReadOnlyPaths=/opt/medprof\n"));
  EXPECT_THAT(agent, HasSubstr("\nDynamicUser=yes\n"));

  WriteText(dir + "/medprof-server.service", server);
  WriteText(dir + "/medprof-agent.service", agent);
  // systemd-analyze security: 0 = locked down .. 10 = unprotected; "OK" is below 4.5.
  EXPECT_LE(ExposureLevel(dir + "/medprof-server.service"), 2.0);
  EXPECT_LE(ExposureLevel(dir + "/medprof-agent.service"), 3.0);
}

// ---------------------------------------------------------------- example configuration files

// A systemd EnvironmentFile: KEY="value" or KEY=value lines, # comments, blank lines.
std::map<std::string, std::string> ParseEnvFile(const std::string& path) {
  std::map<std::string, std::string> out;
  std::ifstream in(path);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty() || line[0] == '#') continue;
    static const std::regex re(R"re(^([A-Z_][A-Z0-9_]*)=(?:"([^"]*)"|([^"\s]*))$)re");
    std::smatch m;
    if (!std::regex_match(line, m, re)) {
      ADD_FAILURE() << path << ":" << n << ": not a KEY=\"value\" line: " << line;
      continue;
    }
    out[m[1]] = m[2].matched ? m[2].str() : m[3].str();
  }
  return out;
}

std::vector<std::string> Words(const std::string& s) { return absl::StrSplit(s, ' ', absl::SkipEmpty()); }

TEST(DeployConfigTest, ServerEnvFlagsStartTheServer) {
  auto env = ParseEnvFile(SourceDir() + "/deploy/config/server.env");
  ASSERT_EQ(env.count("MEDPROF_LISTEN"), 1u);
  ASSERT_EQ(env.count("MEDPROF_SERVER_FLAGS"), 1u);
  EXPECT_THAT(env["MEDPROF_LISTEN"], ::testing::MatchesRegex("[0-9.]+:[0-9]+"));
  // Exactly the unit's command line, with a test certificate, a temp DB and a free port.
  const std::string dir = MakeTempDir("server-env");
  std::vector<std::string> args = {"--tls-cert", TlsDir() + "/server.crt", "--tls-key",
                                   TlsDir() + "/server.key"};
  for (const std::string& w : Words(env["MEDPROF_SERVER_FLAGS"])) args.push_back(w);
  auto server = itest::ServerFixture::Start(dir + "/medprof.db", args);
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_THAT((*server)->process().AllOutput(), HasSubstr("TLS"));
  (*server)->process().Signal(SIGTERM);
  EXPECT_EQ((*server)->process().Wait(std::chrono::seconds(30)), std::optional<int>(0));
}

// Runs medprof-agent --print-inventory with the unit's (or batch script's) flags and `flags`.
CommandResult AgentPrintInventory(const std::string& server, const std::vector<std::string>& flags) {
  const std::string dir = MakeTempDir("agent-env");
  const std::string token = dir + "/agent.token";
  WriteText(token, "test-agent-token-0123456789\n", 0600);
  std::vector<std::string> argv = {
      BinPath("medprof-agent"), "--server", server,       "--tls-ca",   TlsDir() + "/ca.crt",
      "--token-file",           token,      "--work-dir", dir + "/work"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.push_back("--print-inventory");
  return RunCommand(argv);
}

TEST(DeployConfigTest, AgentEnvFlagsPassTheAgentsValidation) {
  auto env = ParseEnvFile(SourceDir() + "/deploy/config/agent.env");
  ASSERT_EQ(env.count("MEDPROF_SERVER"), 1u);
  CommandResult r = AgentPrintInventory(env["MEDPROF_SERVER"], Words(env["MEDPROF_AGENT_FLAGS"]));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::ContainsRegex("\"site\": *\"jetstream2\""));
  EXPECT_THAT(r.out, ::testing::ContainsRegex("\"flavor\": *\"g3.xl\""));
}

// One JSON face (issue 19): --print-inventory prints proto names (agent_name, not agentName).
TEST(DeployConfigTest, PrintInventoryUsesTheTablesSpellings) {
  CommandResult r = AgentPrintInventory("127.0.0.1:7000", {});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string json = r.out.substr(0, r.out.rfind('}') + 1);  // a "no GPU: ..." line may follow
  medprof::testing::ExpectTableSpellings(json, "--print-inventory");
  EXPECT_THAT(json, ::testing::HasSubstr("\"agent_name\""));
  EXPECT_THAT(json, ::testing::ContainsRegex("\"protocol_version\": *\"1\""));
}

TEST(DeployConfigTest, SlurmAgentEnvSourcesInBashAndPassesTheAgentsValidation) {
  // The batch scripts source it with bash (set -u): print what it defines.
  const std::string path = SourceDir() + "/deploy/config/slurm-agent.env";
  CommandResult vars = RunCommand(
      {"bash", "-c",
       "set -eu; . \"$1\"; printf '%s\\n' \"$MEDPROF_SERVER\" \"$MEDPROF_TLS_CA\" \"$MEDPROF_TOKEN_FILE\" "
       "\"$MEDPROF_AGENT_FLAGS\"",
       "env-check", path},
      {{"HOME", "/home/u"}});
  ASSERT_EQ(vars.exit_code, 0) << vars.err;
  std::vector<std::string> lines = absl::StrSplit(vars.out, '\n');
  ASSERT_GE(lines.size(), 4u);
  EXPECT_EQ(lines[1], "/home/u/.medprof/ca.crt");
  EXPECT_EQ(lines[2], "/home/u/.medprof/agent.token");
  std::vector<std::string> flags = Words(lines[3]);
  flags.insert(flags.end(), {"--site", "stampede3"});  // what the batch script adds
  CommandResult r = AgentPrintInventory(lines[0], flags);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::ContainsRegex("\"site\": *\"stampede3\""));
}

}  // namespace
}  // namespace medprof::deploy
