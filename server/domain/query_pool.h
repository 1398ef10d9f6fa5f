// QueryPool: the threads that run read-only queries (compare, studies, runs, kernels, diff,
// timeline) at a lower CPU priority — a higher nice value — than the threads that write.
//
// Why: a query costs CPU and nothing else, so 20 clients asking at once keep every core busy,
// and a writer on a thread of equal priority then gets 1/21 of the CPU: an agent's upload waited
// tens of ms for a core (medprof-query-bench: ingest under 20 readers p99 47 ms with 1 ms of its
// own CPU time). Queries on nice-10 threads leave the writer the CPU it needs when it needs it
// (p99 1.7 ms) and still take every idle cycle; they lose only to work that is waiting for a core.
//
// Run() hands the function to an idle pool thread (starting one, up to max_threads, when none
// is idle; else it waits its turn) and returns when the function has returned. A Run() from a
// pool thread runs inline. With nice 0 there are no threads: Run() calls the function on the
// caller's thread. A thread that cannot lower its priority (setpriority refused) logs a warning
// once and runs the queries as they are.
//
// Owns its threads (joined by the destructor; no Run() may be in progress then). Thread-safe.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"

namespace medprof::server {

class QueryPool {
 public:
  // nice: 0..19 (0 = run on the caller's thread); max_threads >= 1.
  QueryPool(int nice, int max_threads);
  ~QueryPool();
  QueryPool(const QueryPool&) = delete;
  QueryPool& operator=(const QueryPool&) = delete;

  void Run(absl::FunctionRef<void()> fn);

  // Runs `fn` (returning a value) through Run() and returns its value.
  template <typename Fn>
  auto Call(Fn&& fn) -> decltype(fn()) {
    std::optional<decltype(fn())> out;
    Run([&] { out.emplace(fn()); });
    return *std::move(out);
  }

  int threads_started() const;

 private:
  struct Task {
    absl::FunctionRef<void()> fn;
    bool done = false;
    std::condition_variable cv;
  };
  void Loop();

  const int nice_;
  const int max_threads_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_;
  std::deque<Task*> queue_;  // guarded by mu_
  int idle_ = 0;             // guarded by mu_
  bool stop_ = false;        // guarded by mu_
  std::vector<std::thread> threads_;  // guarded by mu_
};

}  // namespace medprof::server
