// Enforced layering: every #include of product code (common, proto, server, agent, client,
// workloads — not tests, bench or fuzz) is checked against one table of which folder may
// include which, and which folders may include the heavy or edge libraries (gRPC, SQLite,
// CUPTI, LibTorch, spdlog). The table is DESIGN.md's "Folders" table and its rules: RPC handlers
// never touch SQL; domain code never sees gRPC types; the agent daemon links neither LibTorch
// nor CUDA; headers never include spdlog; only main.cc files wire everything together.
// A violation names the file, the line, the include and what its folder may include.
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace medprof {
namespace {

namespace fs = std::filesystem;

// A layer: a top-level folder, or for server/, agent/ and workloads/ one of their subfolders.
// "server" alone is server/main.cc and its siblings; "workloads" alone is the Workload interface
// (workloads/workload.h), which the profiler sees instead of any implementation.
const std::map<std::string, std::set<std::string>>& MayInclude() {
  static const std::map<std::string, std::set<std::string>> table = {
      {"proto", {"proto"}},
      {"common", {"common", "proto"}},
      {"workloads", {"workloads"}},
      {"workloads/ddpm", {"workloads/ddpm", "workloads", "common"}},
      {"workloads/meddpm", {"workloads/meddpm", "workloads/ddpm", "workloads", "common"}},
      {"workloads/torchscript", {"workloads/torchscript", "workloads/ddpm", "workloads", "common"}},
      {"agent/profiler", {"agent/profiler", "workloads", "common", "proto"}},
      {"agent/nvml", {"agent/nvml"}},
      {"agent/worker", {"agent/worker", "agent/profiler", "agent/nvml", "workloads", "workloads/ddpm", "workloads/meddpm", "workloads/torchscript", "common", "proto"}},
      {"agent/agent", {"agent/agent", "agent/nvml", "common", "proto"}},
      {"client", {"client", "common", "proto"}},
      {"server/store", {"server/store", "common", "proto"}},
      {"server/domain", {"server/domain", "server/store", "common", "proto"}},
      {"server/monitor", {"server/monitor", "server/domain", "common"}},
      {"server/rpc", {"server/rpc", "server/domain", "common", "proto"}},
      {"server", {"server", "server/rpc", "server/domain", "server/store", "server/monitor", "common", "proto"}},
  };
  return table;
}

// Libraries only some layers may include, by the first part of the include's path.
struct Library {
  std::regex include;
  std::set<std::string> layers;
};
const std::vector<Library>& Libraries() {
  static const std::vector<Library> libs = {
      {std::regex(R"(^(grpcpp|grpc)/|\.grpc\.pb\.h$)"),
       {"server/rpc", "server", "client", "agent/agent"}},
      {std::regex(R"(^sqlite3\.h$)"), {"server/store"}},
      {std::regex(R"(^(cupti|nvperf)[a-z_]*\.h$)"), {"agent/profiler"}},
      {std::regex(R"(^(torch|ATen|c10)/)"),
       {"workloads/ddpm", "workloads/meddpm", "workloads/torchscript", "agent/worker", "agent/profiler"}},
      {std::regex(R"(^spdlog/)"), {"common"}},
  };
  return libs;
}

// Single includes that cross the table, each with the reason it may.
const std::map<std::pair<std::string, std::string>, std::string>& Exceptions() {
  static const std::map<std::pair<std::string, std::string>, std::string> allowed = {
      // The one gRPC <-> absl conversion, header-only for the targets that link gRPC.
      {{"common/grpc_status.h", "grpcpp/support/status.h"}, "common's gRPC status conversion"},
  };
  return allowed;
}

std::string LayerOf(const std::string& path) {
  const size_t slash = path.find('/');
  const std::string top = path.substr(0, slash);
  if (top != "server" && top != "agent" && top != "workloads") return top;
  const size_t second = path.find('/', slash + 1);
  if (second == std::string::npos) return top;  // server/main.cc, workloads/workload.h
  return path.substr(0, second);
}

struct Include {
  std::string file;
  int line;
  std::string target;  // as written between the quotes or brackets
  bool quoted;
};

std::vector<Include> ProductIncludes(const fs::path& root) {
  static const std::regex include_line(R"(^\s*#\s*include\s*([<"])([^">]+)[">])");
  static const std::regex source(R"(\.(h|cc|cu|cuh)$)");
  std::vector<Include> out;
  for (const char* top : {"common", "proto", "server", "agent", "client", "workloads"}) {
    if (!fs::exists(root / top)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(root / top)) {
      const std::string rel = fs::relative(entry.path(), root).generic_string();
      if (!entry.is_regular_file() || !std::regex_search(rel, source)) continue;
      std::ifstream in(entry.path());
      std::string text;
      for (int n = 1; std::getline(in, text); ++n) {
        std::smatch m;
        if (std::regex_search(text, m, include_line)) out.push_back({rel, n, m[2].str(), m[1].str() == "\""});
      }
    }
  }
  return out;
}

// The layer an include of our own code points at; "" for a library.
std::string TargetLayer(const Include& inc) {
  if (inc.target.rfind("medprof/v1/", 0) == 0) return "proto";
  const std::string top = inc.target.substr(0, inc.target.find('/'));
  for (const char* ours : {"common", "proto", "server", "agent", "client", "workloads"}) {
    if (top == ours && inc.target.find('/') != std::string::npos) return LayerOf(inc.target);
  }
  return "";
}

// Every violation of the table in the tree at `root`, one line each.
std::vector<std::string> Violations(const fs::path& root) {
  std::vector<std::string> out;
  for (const Include& inc : ProductIncludes(root)) {
    if (Exceptions().count({inc.file, inc.target}) > 0) continue;
    const std::string layer = LayerOf(inc.file);
    const auto rules = MayInclude().find(layer);
    if (rules == MayInclude().end()) {
      out.push_back(inc.file + ": the layer '" + layer + "' is not in the layering table");
      continue;
    }
    const std::string target = TargetLayer(inc);
    if (!target.empty() && rules->second.count(target) == 0) {
      std::string allowed;
      for (const std::string& a : rules->second) allowed += (allowed.empty() ? "" : ", ") + a;
      out.push_back(inc.file + ":" + std::to_string(inc.line) + " includes " + inc.target + " (" + layer +
                    " may include: " + allowed + ")");
    }
    for (const Library& lib : Libraries()) {
      if (target.empty() && std::regex_search(inc.target, lib.include) && lib.layers.count(layer) == 0) {
        out.push_back(inc.file + ":" + std::to_string(inc.line) + " includes the library header " + inc.target +
                      ", which " + layer + " may not");
      }
    }
  }
  return out;
}

TEST(LayeringTest, EveryProductIncludeFollowsTheTable) {
  const fs::path root = MEDPROF_SOURCE_DIR;
  const std::vector<Include> all = ProductIncludes(root);
  ASSERT_GT(all.size(), 500u) << "too few includes found under " << root << ": wrong source dir?";
  const std::vector<std::string> bad = Violations(root);
  std::string listed;
  for (const std::string& v : bad) listed += v + "\n";
  EXPECT_TRUE(bad.empty()) << bad.size() << " include(s) break the layering:\n" << listed;
}

// The Workload seam: the profiler sees the interface, never an implementation; only the worker
// (which picks the implementation per job) sees Med-DDPM.
TEST(LayeringTest, OnlyTheWorkerSeesAWorkloadImplementation) {
  EXPECT_EQ(LayerOf("workloads/workload.h"), "workloads");
  EXPECT_EQ(LayerOf("workloads/meddpm/workload.h"), "workloads/meddpm");
  EXPECT_EQ(MayInclude().at("agent/profiler").count("workloads/meddpm"), 0u);
  EXPECT_EQ(MayInclude().at("agent/profiler").count("workloads"), 1u);
  EXPECT_EQ(MayInclude().at("agent/worker").count("workloads/meddpm"), 1u);
  const Include bad{"agent/profiler/profiler.h", 1, "workloads/meddpm/workload.h", true};
  EXPECT_EQ(TargetLayer(bad), "workloads/meddpm");
}

TEST(LayeringTest, HeadersNeverIncludeSpdlog) {
  for (const Include& inc : ProductIncludes(MEDPROF_SOURCE_DIR)) {
    const bool header = inc.file.size() > 2 && inc.file.compare(inc.file.size() - 2, 2, ".h") == 0;
    EXPECT_FALSE(header && inc.target.rfind("spdlog/", 0) == 0) << inc.file << ":" << inc.line;
  }
}

TEST(LayeringTest, EveryExceptionIsStillNeeded) {
  std::set<std::pair<std::string, std::string>> seen;
  for (const Include& inc : ProductIncludes(MEDPROF_SOURCE_DIR)) seen.insert({inc.file, inc.target});
  for (const auto& [key, why] : Exceptions()) {
    EXPECT_EQ(seen.count(key), 1u) << key.first << " no longer includes " << key.second << " (" << why
                                   << "): remove the exception";
  }
}

}  // namespace
}  // namespace medprof
