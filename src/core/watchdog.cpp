#include "core/watchdog.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace gdn {

namespace {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// How long a peer's heartbeat must stand still to call it silent. Beats come once a
// second; three seconds leave room for a loaded machine.
constexpr auto kPeerWindow = std::chrono::milliseconds(3000);
constexpr auto kBeatEvery = std::chrono::milliseconds(500);
constexpr std::size_t kNamed = 8;  // ranks named in the line, at most
// A wait that overran by this much means the process was not running (stopped).
constexpr std::int64_t kSuspended = 1'500'000'000;

// "step 5" (1-based, as the step lines count) or "set-up".
std::string where(std::int64_t step) {
  return step >= 0 ? "step " + std::to_string(step + 1) : std::string("set-up");
}

// "rank 3" or "ranks 0, 2, 5" (the first kNamed, then "... (N in all)").
std::string rank_list(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size() && i < kNamed; ++i)
    s += (i ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > kNamed) s += ", ... (" + std::to_string(ranks.size()) + " in all)";
  return s;
}

// "rank 0 at step 5, in forward and backward; rank 2 at ..." for the first kNamed.
std::string last_seen(const std::vector<int>& ranks, const std::vector<Heartbeat>& beats) {
  std::string s;
  for (std::size_t i = 0; i < ranks.size() && i < kNamed; ++i) {
    const Heartbeat& h = beats[std::size_t(ranks[i])];
    s += (i ? "; " : "") + ("rank " + std::to_string(ranks[i])) + " at " + where(h.step) + ", in " +
         h.phase;
  }
  return s;
}

}  // namespace

Watchdog::Watchdog(double timeout_s, int rank, int world_size, const std::string& heartbeat_dir)
    : timeout_s_(timeout_s), rank_(rank) {
  last_ns_ = now_ns();
  if (timeout_s_ <= 0) return;
  if (!heartbeat_dir.empty())
    board_ = std::make_unique<HeartbeatBoard>(heartbeat_dir, rank, world_size);
  beat();
  thread_ = std::thread([this] { watch(); });
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
  // The heartbeat then holds exactly where a rank stopped (one small pwrite).
  beat();
}

void Watchdog::beat() {
  if (board_) board_->write(Heartbeat{++beats_, step_.load(), phase_.load()});
}

bool Watchdog::describe_peers(std::unique_lock<std::mutex>& lock, std::string& out) {
  out.clear();
  if (!board_ || !board_->active()) return true;
  const int P = board_->world_size();
  const std::size_t n = static_cast<std::size_t>(P);
  std::vector<std::optional<Heartbeat>> before(n), after(n);
  for (int r = 0; r < P; ++r)
    if (r != rank_) before[std::size_t(r)] = board_->read(r);
  // Keeps beating while it watches: a peer that timed out too is watching this rank.
  const auto until = std::chrono::steady_clock::now() + kPeerWindow;
  while (std::chrono::steady_clock::now() < until) {
    const std::int64_t t0 = now_ns();
    if (cv_.wait_for(lock, kBeatEvery, [this] { return stop_; })) return false;
    if (now_ns() - t0 > kSuspended) return false;  // this process was stopped meanwhile
    beat();
  }
  std::vector<int> silent, missing;
  std::vector<Heartbeat> seen(n);
  for (int r = 0; r < P; ++r) {
    if (r == rank_) continue;
    after[std::size_t(r)] = board_->read(r);
    const auto& a = after[std::size_t(r)];
    const auto& b = before[std::size_t(r)];
    if (!a) {
      missing.push_back(r);
      continue;
    }
    seen[std::size_t(r)] = *a;
    if (b && a->beat == b->beat) silent.push_back(r);  // no file before: it just started
  }
  const double window = std::chrono::duration<double>(kPeerWindow).count();
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.0f s", window);
  if (!silent.empty()) {
    out = rank_list(silent) + (silent.size() == 1 ? " is" : " are") +
          " silent (stopped, dead or hung: no heartbeat for " + secs +
          "; last seen: " + last_seen(silent, seen) + "); ";
  } else {
    // Everyone is alive: a deadlock, or a step slower than the timeout. The ranks at the
    // lowest step are the likely holders-up.
    std::vector<int> alive;
    for (int r = 0; r < P; ++r)
      if (r != rank_ && after[std::size_t(r)]) alive.push_back(r);
    std::int64_t lowest = step_.load();
    for (int r : alive) lowest = std::min(lowest, seen[std::size_t(r)].step);
    std::vector<int> behind;
    for (int r : alive)
      if (seen[std::size_t(r)].step == lowest && lowest < step_.load()) behind.push_back(r);
    out =
        "no rank is silent (every heartbeat moves: a deadlock, or a step slower than "
        "--watchdog-s)";
    if (!behind.empty()) out += "; furthest behind: " + last_seen(behind, seen);
    out += "; ";
  }
  if (!missing.empty())
    out += "no heartbeat of " + rank_list(missing) + " in " + board_->dir() + " (another node?); ";
  return true;
}

void Watchdog::watch() {
  std::unique_lock<std::mutex> lock(m_);
  // Idle time counts from here: when this process itself was stopped (SIGSTOP, then
  // SIGCONT, as mpirun sends before SIGTERM), its wait says nothing about its peers.
  std::int64_t since = last_ns_.load(), woke = now_ns();
  while (!cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_; })) {
    beat();
    const std::int64_t now = now_ns();
    if (now - woke > kSuspended + 1'000'000'000) since = now;
    woke = now;
    const std::int64_t stuck_since = last_ns_.load();
    const double idle = double(now - std::max(stuck_since, since)) * 1e-9;
    if (idle < timeout_s_) continue;
    std::string peers;
    if (!describe_peers(lock, peers)) {
      if (stop_) return;
      since = woke = now_ns();  // stopped while watching the peers: start over
      continue;
    }
    if (last_ns_.load() != stuck_since) continue;  // progress came back meanwhile
    const std::int64_t step = step_.load();
    char mine[512];
    std::snprintf(mine, sizeof mine,
                  "rank %d made no progress for %.0f s (--watchdog-s %g) at %s, in %s%s; "
                  "ending the job\n",
                  rank_, idle, timeout_s_, where(step).c_str(), phase_.load(),
                  peers.empty() ? ": a rank is stopped, dead or deadlocked" : "");
    // One write() is one line even with other ranks writing to the same stream.
    const std::string line = "[watchdog] [error] " + peers + mine;
    [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, line.data(), line.size());
    std::fflush(nullptr);
    if (board_) board_->remove();
    std::_Exit(1);
  }
}

}  // namespace gdn
