#include "server/domain/query_pool.h"

#include <pthread.h>
#include <sys/resource.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "common/logging.h"

namespace medprof::server {
namespace {

const Logger kLog("domain");
thread_local bool in_pool = false;

// Lowers the calling thread's priority (Linux: PRIO_PROCESS with who 0 is the calling thread).
void LowerPriority(int nice) {
  static std::atomic<bool> warned{false};
  errno = 0;
  if (setpriority(PRIO_PROCESS, 0, nice) != 0 && !warned.exchange(true)) {
    kLog.Warn("query threads: setpriority(nice {}) failed: {}; queries run at the writers' priority", nice,
              std::strerror(errno));
  }
}

}  // namespace

QueryPool::QueryPool(int nice, int max_threads) : nice_(nice), max_threads_(max_threads < 1 ? 1 : max_threads) {}

QueryPool::~QueryPool() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    threads.swap(threads_);
  }
  work_cv_.notify_all();
  for (std::thread& t : threads) t.join();
}

void QueryPool::Run(absl::FunctionRef<void()> fn) {
  if (nice_ == 0 || in_pool) {
    fn();
    return;
  }
  Task task{fn};
  std::unique_lock<std::mutex> lock(mu_);
  queue_.push_back(&task);
  if (static_cast<int>(queue_.size()) > idle_ && static_cast<int>(threads_.size()) < max_threads_) {
    threads_.emplace_back([this] { Loop(); });
  } else {
    work_cv_.notify_one();
  }
  task.cv.wait(lock, [&] { return task.done; });
}

void QueryPool::Loop() {
  in_pool = true;
  pthread_setname_np(pthread_self(), "medprof-query");
  LowerPriority(nice_);
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    ++idle_;
    work_cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    --idle_;
    if (queue_.empty()) return;  // stopping
    Task* task = queue_.front();
    queue_.pop_front();
    lock.unlock();
    task->fn();
    lock.lock();
    task->done = true;
    task->cv.notify_one();  // under the lock: the caller cannot return (and free the task) before
  }
}

int QueryPool::threads_started() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(threads_.size());
}

}  // namespace medprof::server
