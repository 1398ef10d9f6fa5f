// Logging for medprof: named loggers per component, writing to stderr.
//
// Wraps spdlog so that no header depends on it. Call logging::Init once from main() (before
// threads start); Logger objects are cheap to create and safe to use from any thread.
//
//   static const medprof::Logger kLog("server");
//   kLog.Info("listening on {}", addr);
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include <fmt/format.h>

namespace medprof {

enum class LogLevel { kDebug, kInfo, kWarn, kError, kOff };

namespace logging {
// Sets the global level and pattern. `component` names the process in every line.
void Init(std::string_view component, LogLevel level);
// Parses "debug|info|warn|error|off" (case-insensitive); returns false on anything else.
bool ParseLevel(std::string_view text, LogLevel* out);
void Write(std::string_view logger, LogLevel level, std::string_view message);
bool Enabled(LogLevel level);
}  // namespace logging

class Logger {
 public:
  explicit Logger(std::string name) : name_(std::move(name)) {}

  template <typename... Args>
  void Debug(fmt::format_string<Args...> f, Args&&... args) const {
    Log(LogLevel::kDebug, f, std::forward<Args>(args)...);
  }
  template <typename... Args>
  void Info(fmt::format_string<Args...> f, Args&&... args) const {
    Log(LogLevel::kInfo, f, std::forward<Args>(args)...);
  }
  template <typename... Args>
  void Warn(fmt::format_string<Args...> f, Args&&... args) const {
    Log(LogLevel::kWarn, f, std::forward<Args>(args)...);
  }
  template <typename... Args>
  void Error(fmt::format_string<Args...> f, Args&&... args) const {
    Log(LogLevel::kError, f, std::forward<Args>(args)...);
  }

 private:
  template <typename... Args>
  void Log(LogLevel level, fmt::format_string<Args...> f, Args&&... args) const {
    if (!logging::Enabled(level)) return;
    logging::Write(name_, level, fmt::format(f, std::forward<Args>(args)...));
  }
  std::string name_;
};

}  // namespace medprof
