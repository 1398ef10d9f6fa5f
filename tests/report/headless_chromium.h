// Loads a local HTML file in real headless Chromium (Debian's `chromium` package) and reports
// what a reader's browser would: console errors, uncaught exceptions, network requests, the
// value of a JavaScript expression evaluated on the rendered DOM, and a full-page screenshot.
//
// Chromium is driven over the DevTools protocol on a pipe (--remote-debugging-pipe: commands on
// fd 3, answers and events on fd 4, NUL-separated JSON), so nothing listens on a port and no
// Node/Playwright is needed; it works offline. Runs with --no-sandbox (CI runs tests as root)
// and a throw-away profile directory. The binary is $MEDPROF_CHROMIUM, else the first of
// chromium, chromium-browser, google-chrome on PATH.
//
// Test-only code; one call at a time per process (it forks a browser and waits for it).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace medprof::testing {

struct PageLoad {
  // console.error / console.assert calls, uncaught exceptions and browser log entries of level
  // "error" (CSP violations, failed loads), each as "<source>: <text>".
  std::vector<std::string> errors;
  // Every console message of any level, for failure output.
  std::vector<std::string> console;
  // URLs the page requested (the document itself included).
  std::vector<std::string> requests;
  // returnByValue result of the expression, evaluated after the load event.
  nlohmann::json value;
  // PNG bytes of the whole page.
  std::string screenshot_png;
};

// The Chromium binary, or NOT_FOUND saying how to install it.
absl::StatusOr<std::string> FindChromium();

// Opens file://<html_path> (absolute; a "#fragment" may follow), waits for its load event,
// evaluates `expression` (a Promise is awaited) and takes a screenshot. `work_dir` holds the browser profile and its stderr log. DEADLINE_EXCEEDED
// after `timeout`; INTERNAL when the browser dies (the log tail is in the message).
absl::StatusOr<PageLoad> LoadInHeadlessChromium(const std::string& html_path, const std::string& expression,
                                                const std::string& work_dir,
                                                std::chrono::seconds timeout = std::chrono::seconds(60));

}  // namespace medprof::testing
