#include "tests/report/headless_chromium.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace medprof::testing {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

bool Executable(const std::string& path) { return access(path.c_str(), X_OK) == 0; }

std::string Tail(const std::string& path, size_t bytes) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  std::string text = s.str();
  return text.size() > bytes ? text.substr(text.size() - bytes) : text;
}

// The browser process and both ends of its DevTools pipe.
class Browser {
 public:
  ~Browser() {
    if (to_ >= 0) close(to_);
    if (from_ >= 0) close(from_);
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  absl::Status Start(const std::string& binary, const std::string& work_dir) {
    log_path_ = work_dir + "/chromium.log";
    int to_child[2], from_child[2];
    if (pipe2(to_child, O_CLOEXEC) != 0 || pipe2(from_child, O_CLOEXEC) != 0) {
      return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
    }
    const std::vector<std::string> args = {
        binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
        "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--hide-scrollbars", "--mute-audio",
        "--remote-debugging-pipe", absl::StrCat("--user-data-dir=", work_dir, "/profile"), "about:blank"};
    pid_ = fork();
    if (pid_ < 0) return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
    if (pid_ == 0) {
      // Move the pipe ends above 4 first so the dup2 calls below cannot clobber one another.
      const int in = fcntl(to_child[0], F_DUPFD, 10);
      const int out = fcntl(from_child[1], F_DUPFD, 10);
      dup2(in, 3);
      dup2(out, 4);
      const int log = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (log >= 0) {
        dup2(log, 1);
        dup2(log, 2);
      }
      setpgid(0, 0);
      std::vector<char*> argv;
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(binary.c_str(), argv.data());
      _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    to_ = to_child[1];
    from_ = from_child[0];
    return absl::OkStatus();
  }

  // Sends a command; returns its id.
  absl::StatusOr<int> Send(const std::string& method, json params, const std::string& session = "") {
    json msg = {{"id", ++next_id_}, {"method", method}, {"params", std::move(params)}};
    if (!session.empty()) msg["sessionId"] = session;
    std::string text = msg.dump();
    text.push_back('\0');
    size_t off = 0;
    while (off < text.size()) {
      const ssize_t n = write(to_, text.data() + off, text.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return Died(absl::StrCat("writing ", method));
      off += static_cast<size_t>(n);
    }
    return next_id_;
  }

  // Next message (event or answer), or an error at the deadline.
  absl::StatusOr<json> Next(Clock::time_point deadline) {
    while (true) {
      const size_t nul = buffer_.find('\0');
      if (nul != std::string::npos) {
        const std::string text = buffer_.substr(0, nul);
        buffer_.erase(0, nul + 1);
        json msg = json::parse(text, nullptr, /*allow_exceptions=*/false);
        if (msg.is_discarded()) return absl::InternalError(absl::StrCat("unparseable DevTools message: ", text.substr(0, 200)));
        return msg;
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return absl::DeadlineExceededError("headless chromium did not answer in time");
      pollfd p{from_, POLLIN, 0};
      const int r = poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) continue;
      char buf[65536];
      const ssize_t n = read(from_, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return Died("reading");
      buffer_.append(buf, static_cast<size_t>(n));
    }
  }

  absl::Status Died(const std::string& doing) {
    return absl::InternalError(absl::StrCat("headless chromium closed its DevTools pipe while ", doing,
                                            "; its log ends with:\n", Tail(log_path_, 3000)));
  }

  void Close() {
    (void)Send("Browser.close", json::object());
    const auto until = Clock::now() + std::chrono::seconds(10);
    while (Clock::now() < until) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return;
      }
      usleep(50 * 1000);
    }
  }

 private:
  pid_t pid_ = -1;
  int to_ = -1;
  int from_ = -1;
  int next_id_ = 0;
  std::string buffer_;
  std::string log_path_;
};

std::string ArgsText(const json& args) {
  std::string out;
  for (const json& a : args) {
    if (!out.empty()) out += ' ';
    if (a.contains("value")) {
      out += a["value"].is_string() ? a["value"].get<std::string>() : a["value"].dump();
    } else if (a.contains("description")) {
      out += a["description"].get<std::string>();
    } else {
      out += a.value("type", "?");
    }
  }
  return out;
}

// Records what an event says about the page.
void Observe(const json& msg, PageLoad* out) {
  const std::string method = msg.value("method", "");
  const json& p = msg.contains("params") ? msg["params"] : json::object();
  if (method == "Runtime.consoleAPICalled") {
    const std::string type = p.value("type", "");
    const std::string text = ArgsText(p.value("args", json::array()));
    out->console.push_back(absl::StrCat(type, ": ", text));
    if (type == "error" || type == "assert") out->errors.push_back(absl::StrCat("console.", type, ": ", text));
  } else if (method == "Runtime.exceptionThrown") {
    const json& d = p.value("exceptionDetails", json::object());
    std::string text = d.value("text", "exception");
    if (d.contains("exception") && d["exception"].contains("description")) {
      text = d["exception"]["description"].get<std::string>();
    }
    out->errors.push_back(absl::StrCat("uncaught: ", text));
  } else if (method == "Log.entryAdded") {
    const json& e = p.value("entry", json::object());
    const std::string line = absl::StrCat(e.value("source", "?"), ": ", e.value("text", ""), " ",
                                          e.value("url", ""));
    out->console.push_back(absl::StrCat("log ", e.value("level", "?"), ": ", line));
    if (e.value("level", "") == "error") out->errors.push_back(line);
  } else if (method == "Network.requestWillBeSent") {
    out->requests.push_back(p.value("request", json::object()).value("url", ""));
  }
}

}  // namespace

absl::StatusOr<std::string> FindChromium() {
  if (const char* env = std::getenv("MEDPROF_CHROMIUM"); env != nullptr && *env != '\0') {
    if (Executable(env)) return std::string(env);
    return absl::NotFoundError(absl::StrCat("MEDPROF_CHROMIUM='", env, "' is not an executable"));
  }
  const char* path = std::getenv("PATH");
  for (const char* name : {"chromium", "chromium-browser", "google-chrome"}) {
    for (absl::string_view dir : absl::StrSplit(path == nullptr ? "/usr/bin" : path, ':')) {
      const std::string candidate = absl::StrCat(dir, "/", name);
      if (Executable(candidate)) return candidate;
    }
  }
  return absl::NotFoundError(
      "no chromium on PATH: install Debian's `chromium` package (scripts/install-deps.sh does) or set MEDPROF_CHROMIUM");
}

absl::StatusOr<PageLoad> LoadInHeadlessChromium(const std::string& html_path, const std::string& expression,
                                                const std::string& work_dir, std::chrono::seconds timeout) {
  absl::StatusOr<std::string> binary = FindChromium();
  if (!binary.ok()) return binary.status();
  mkdir(work_dir.c_str(), 0755);
  Browser b;
  if (absl::Status s = b.Start(*binary, work_dir); !s.ok()) return s;
  const auto deadline = Clock::now() + timeout;
  PageLoad out;

  // Waits for the answer to command `id`, observing events on the way.
  auto await = [&](absl::StatusOr<int> id) -> absl::StatusOr<json> {
    if (!id.ok()) return id.status();
    while (true) {
      absl::StatusOr<json> msg = b.Next(deadline);
      if (!msg.ok()) return msg.status();
      if (msg->contains("id") && (*msg)["id"] == *id) {
        if (msg->contains("error")) return absl::InternalError(absl::StrCat("DevTools error: ", (*msg)["error"].dump()));
        return (*msg)["result"];
      }
      Observe(*msg, &out);
    }
  };

  absl::StatusOr<json> target = await(b.Send("Target.createTarget", {{"url", "about:blank"}}));
  if (!target.ok()) return target.status();
  absl::StatusOr<json> attached =
      await(b.Send("Target.attachToTarget", {{"targetId", (*target)["targetId"]}, {"flatten", true}}));
  if (!attached.ok()) return attached.status();
  const std::string session = (*attached)["sessionId"].get<std::string>();
  for (const char* domain : {"Runtime.enable", "Log.enable", "Network.enable", "Page.enable"}) {
    if (auto r = await(b.Send(domain, json::object(), session)); !r.ok()) return r.status();
  }
  if (auto r = await(b.Send("Emulation.setDeviceMetricsOverride",
                            {{"width", 1280}, {"height", 900}, {"deviceScaleFactor", 1}, {"mobile", false}}, session));
      !r.ok()) {
    return r.status();
  }
  absl::StatusOr<int> nav = b.Send("Page.navigate", {{"url", absl::StrCat("file://", html_path)}}, session);
  if (absl::StatusOr<json> r = await(nav); !r.ok()) {
    return r.status();
  } else if (r->contains("errorText")) {
    return absl::InternalError(absl::StrCat("navigation failed: ", (*r)["errorText"].dump()));
  }
  // The load event (its scripts have run by then).
  while (true) {
    absl::StatusOr<json> msg = b.Next(deadline);
    if (!msg.ok()) return msg.status();
    Observe(*msg, &out);
    if (msg->value("method", "") == "Page.loadEventFired") break;
  }
  absl::StatusOr<json> value =
      await(b.Send("Runtime.evaluate", {{"expression", expression}, {"returnByValue", true}, {"awaitPromise", true}},
                   session));
  if (!value.ok()) return value.status();
  if (value->contains("exceptionDetails")) {
    return absl::InternalError(absl::StrCat("the test expression threw: ", (*value)["exceptionDetails"].dump()));
  }
  out.value = (*value)["result"].value("value", json());

  // Full-page screenshot: grow the viewport to the content height first.
  absl::StatusOr<json> metrics = await(b.Send("Page.getLayoutMetrics", json::object(), session));
  if (!metrics.ok()) return metrics.status();
  double height = 900;
  if (metrics->contains("cssContentSize")) height = (*metrics)["cssContentSize"].value("height", 900.0);
  height = std::clamp(height, 300.0, 12000.0);
  if (auto r = await(b.Send("Emulation.setDeviceMetricsOverride",
                            {{"width", 1280}, {"height", static_cast<int>(height)}, {"deviceScaleFactor", 1}, {"mobile", false}},
                            session));
      !r.ok()) {
    return r.status();
  }
  absl::StatusOr<json> shot = await(b.Send("Page.captureScreenshot", {{"format", "png"}}, session));
  if (!shot.ok()) return shot.status();
  if (!absl::Base64Unescape((*shot)["data"].get<std::string>(), &out.screenshot_png)) {
    return absl::InternalError("screenshot: data is not base64");
  }
  b.Close();
  return out;
}

}  // namespace medprof::testing
