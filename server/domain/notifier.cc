#include "server/domain/notifier.h"

namespace medprof::server {

uint64_t Notifier::generation() const {
  std::lock_guard<std::mutex> lock(mu_);
  return generation_;
}

void Notifier::Notify() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++generation_;
  }
  cv_.notify_all();
}

bool Notifier::WaitFor(uint64_t seen, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return shut_down_ || generation_ != seen; });
  return !shut_down_;
}

void Notifier::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    shut_down_ = true;
  }
  cv_.notify_all();
}

bool Notifier::shut_down() const {
  std::lock_guard<std::mutex> lock(mu_);
  return shut_down_;
}

}  // namespace medprof::server
