#include "agent/agent/outcome.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>

#include "absl/strings/str_cat.h"

namespace medprof::agent {

std::string WorkerExit::Describe() const {
  if (signaled) return absl::StrCat("signal ", signal, " (", SignalName(signal), ")");
  return absl::StrCat("exit code ", code);
}

std::string SignalName(int sig) {
  switch (sig) {
    case SIGHUP:
      return "SIGHUP";
    case SIGINT:
      return "SIGINT";
    case SIGQUIT:
      return "SIGQUIT";
    case SIGILL:
      return "SIGILL";
    case SIGTRAP:
      return "SIGTRAP";
    case SIGABRT:
      return "SIGABRT";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGKILL:
      return "SIGKILL";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGSEGV:
      return "SIGSEGV";
    case SIGUSR2:
      return "SIGUSR2";
    case SIGPIPE:
      return "SIGPIPE";
    case SIGALRM:
      return "SIGALRM";
    case SIGTERM:
      return "SIGTERM";
    case SIGXCPU:
      return "SIGXCPU";
    case SIGXFSZ:
      return "SIGXFSZ";
    case SIGSYS:
      return "SIGSYS";
    default:
      return absl::StrCat("signal ", sig);
  }
}

Verdict Classify(const WorkerExit& exit, const StreamFacts& stream, StopReason stop,
                 const std::string& stop_detail) {
  auto failed = [&](std::string cause) {
    if (!stream.problem.empty()) absl::StrAppend(&cause, "; ", stream.problem);
    return Verdict{v1::RUN_FAILED, std::move(cause)};
  };
  if (stop == StopReason::kSpoolError) return failed(absl::StrCat("spool write failed: ", stop_detail));
  const bool clean_exit = !exit.signaled && exit.code == 0;
  if (clean_exit && stream.saw_summary && !stream.error.has_value()) return {v1::RUN_SUCCEEDED, ""};
  switch (stop) {
    case StopReason::kTimeout:
      return {v1::RUN_FAILED, absl::StrCat("timeout after ", stop_detail, " s")};
    case StopReason::kCancelled:
      return {v1::RUN_CANCELLED, "cancelled by the server"};
    case StopReason::kInterrupted:
      return {v1::RUN_INTERRUPTED, "agent received SIGTERM"};
    case StopReason::kAbandoned:
      return {v1::RUN_CANCELLED, "the server no longer considers the run active"};
    case StopReason::kNone:
    case StopReason::kSpoolError:
      break;
  }
  if (stream.error.has_value()) {
    const std::string cause = absl::StrCat(stream.error->kind(), ": ", stream.error->message());
    if (stream.error->kind() == "interrupted") return {v1::RUN_INTERRUPTED, cause};
    return failed(cause);
  }
  if (exit.signaled) return failed(absl::StrCat("worker crashed: ", exit.Describe()));
  if (exit.code != 0) return failed(absl::StrCat("worker exited with code ", exit.code));
  return failed("worker exited with code 0 without a RunSummary");
}

std::string ToValidUtf8(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    int len = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      len = 1;
      cp = c;
    } else if ((c & 0xe0) == 0xc0) {
      len = 2;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4;
      cp = c & 0x07;
    }
    bool ok = len > 0 && i + len <= text.size();
    for (int k = 1; ok && k < len; ++k) {
      const auto cc = static_cast<unsigned char>(text[i + k]);
      if ((cc & 0xc0) != 0x80) ok = false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    // Overlong forms, surrogates and values past U+10FFFF are invalid too.
    if (ok && ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
               (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)) {
      ok = false;
    }
    if (ok) {
      out.append(text, i, len);
      i += len;
    } else {
      out.push_back('?');
      ++i;
    }
  }
  return out;
}

std::string StderrTail(const std::string& path, size_t max_bytes, int max_lines) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  struct stat st;
  std::string data;
  if (::fstat(fd, &st) == 0 && st.st_size > 0) {
    const auto size = static_cast<size_t>(st.st_size);
    const size_t start = size > max_bytes ? size - max_bytes : 0;
    data.resize(size - start);
    size_t got = 0;
    while (got < data.size()) {
      const ssize_t r = ::pread(fd, data.data() + got, data.size() - got, static_cast<off_t>(start + got));
      if (r <= 0) break;
      got += static_cast<size_t>(r);
    }
    data.resize(got);
    if (start > 0) {
      // Drop the partial first line the byte limit cut into.
      const size_t nl = data.find('\n');
      if (nl != std::string::npos && nl + 1 < data.size()) data.erase(0, nl + 1);
    }
  }
  ::close(fd);
  // Keep the last max_lines lines (a trailing newline does not start another line).
  size_t end = data.size();
  if (end > 0 && data[end - 1] == '\n') --end;
  int lines = 0;
  size_t cut = 0;
  for (size_t i = end; i > 0; --i) {
    if (data[i - 1] == '\n' && ++lines == max_lines) {
      cut = i;
      break;
    }
  }
  return ToValidUtf8(data.substr(cut));
}

}  // namespace medprof::agent
