#include "core/watchdog.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace gdn {

namespace {
std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

Watchdog::Watchdog(double timeout_s, int rank) : timeout_s_(timeout_s), rank_(rank) {
  last_ns_ = now_ns();
  if (timeout_s_ > 0) thread_ = std::thread([this] { watch(); });
}

Watchdog::~Watchdog() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(m_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Watchdog::progress(std::int64_t step, const char* phase) {
  step_ = step;
  phase_ = phase;
  last_ns_ = now_ns();
}

void Watchdog::watch() {
  std::unique_lock<std::mutex> lock(m_);
  while (!cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_; })) {
    const double idle = double(now_ns() - last_ns_.load()) * 1e-9;
    if (idle < timeout_s_) continue;
    const std::int64_t step = step_.load();
    // stderr is unbuffered; one fprintf is one line even with other ranks writing.
    std::fprintf(stderr,
                 "[watchdog] [error] rank %d made no progress for %.0f s (--watchdog-s %g) at "
                 "%s%lld, in %s: a rank is stopped, dead or deadlocked; ending the job\n",
                 rank_, idle, timeout_s_, step >= 0 ? "step " : "set-up",
                 step >= 0 ? (long long)(step + 1) : 0LL, phase_.load());
    std::fflush(nullptr);
    std::_Exit(1);
  }
}

}  // namespace gdn
