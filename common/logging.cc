#include "common/logging.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <memory>
#include <string>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace medprof::logging {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};

spdlog::level::level_enum ToSpd(LogLevel l) {
  switch (l) {
    case LogLevel::kDebug: return spdlog::level::debug;
    case LogLevel::kInfo: return spdlog::level::info;
    case LogLevel::kWarn: return spdlog::level::warn;
    case LogLevel::kError: return spdlog::level::err;
    case LogLevel::kOff: return spdlog::level::off;
  }
  return spdlog::level::info;
}

std::shared_ptr<spdlog::logger>& Root() {
  static std::shared_ptr<spdlog::logger> root = [] {
    auto l = std::make_shared<spdlog::logger>(
        "medprof", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
    l->set_level(spdlog::level::trace);
    return l;
  }();
  return root;
}

}  // namespace

void Init(std::string_view component, LogLevel level) {
  g_level = static_cast<int>(level);
  auto& root = Root();
  root->set_pattern(fmt::format("%Y-%m-%dT%H:%M:%S.%e %^%L%$ {}[%P] %v", component));
  root->flush_on(spdlog::level::warn);
}

bool ParseLevel(std::string_view text, LogLevel* out) {
  std::string t(text);
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  if (t == "debug") *out = LogLevel::kDebug;
  else if (t == "info") *out = LogLevel::kInfo;
  else if (t == "warn" || t == "warning") *out = LogLevel::kWarn;
  else if (t == "error") *out = LogLevel::kError;
  else if (t == "off") *out = LogLevel::kOff;
  else return false;
  return true;
}

bool Enabled(LogLevel level) { return static_cast<int>(level) >= g_level.load(std::memory_order_relaxed); }

void Write(std::string_view logger, LogLevel level, std::string_view message) {
  Root()->log(ToSpd(level), "{}: {}", logger, message);
}

}  // namespace medprof::logging
