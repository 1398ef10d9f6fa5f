// The `medprof` program behind main(): parse, connect, run one command, choose the exit code.
//
// RunCli is the whole CLI with its inputs made explicit (argv, environment, streams,
// whether stderr is a terminal), so tests run it against an in-process server without a
// subprocess. Output: results on `out`; progress, warnings and errors on `err`, errors as
// "medprof: <message>". Exit codes:
//   0 ok; 1 usage error (bad flags or values, unreadable --tls-ca / token file);
//   2 server or connection error (the message carries the gRPC code and the server's text);
//   3 a job failed (`submit --wait`, `watch`: any job ended FAILED; each failure is printed).
//
// Not thread-safe: one call at a time per set of streams.
#pragma once

#include <istream>
#include <ostream>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "client/cli.h"
#include "client/client.h"

namespace medprof::client {

inline constexpr int kExitOk = 0;
inline constexpr int kExitUsage = 1;
inline constexpr int kExitServer = 2;
inline constexpr int kExitJobFailed = 3;

struct CliIo {
  std::istream* in = nullptr;   // stdin (kernels classify)
  std::ostream* out = nullptr;  // results
  std::ostream* err = nullptr;  // progress, warnings, errors
  bool err_is_tty = false;      // live progress block instead of plain lines
  int width = 0;                // terminal width for the live block (0 = no clipping)
  int height = 0;               // terminal rows for the live block (0 = no limit)
};

// How a watch survives a server restart or network loss: the stream is reopened after
// UNAVAILABLE (the server replays the study's events, duplicates are skipped), with
// exponential backoff from `first_backoff` up to `max_backoff`, at most `max_reconnects`
// times in a row without a new event.
struct WatchPolicy {
  int max_reconnects = 8;
  absl::Duration first_backoff = absl::Seconds(1);
  absl::Duration max_backoff = absl::Seconds(15);
};

// Runs one parsed command. `client` may be null only for commands that need no server
// (PrintCommand, ClassifyCommand).
int Execute(const Command& command, MedprofClient* client, const CliIo& io,
            const WatchPolicy& policy = {});

// Parse + connect + Execute.
int RunCli(const std::vector<std::string>& argv, const EnvLookup& env, const CliIo& io,
           const WatchPolicy& policy = {});

// `kernels classify` on a stream: one output line `category<TAB>line` per input line, in
// order; a line "NAME<TAB>OP" is classified with the op rule; an empty line gives "other\t".
void ClassifyLines(std::istream& in, std::ostream& out);

}  // namespace medprof::client
