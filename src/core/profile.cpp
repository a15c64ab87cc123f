#include "core/profile.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace gdn::profile {

namespace {

using Clock = std::chrono::steady_clock;

// The recording thread's id; a default id (no thread) when off.
std::atomic<std::thread::id> g_owner{};
// set_wait's function.
std::atomic<void (*)()> g_wait{nullptr};

// The time now, once the device's queued work is done.
Clock::time_point now() {
  if (void (*wait)() = g_wait.load(std::memory_order_relaxed)) wait();
  return Clock::now();
}

struct Frame {
  std::string key;     // where this frame's own time goes
  const char* region;  // the layer kind in force inside it (nullptr: none)
};

// The recording thread's state: the open frames and when the top one's clock last started.
struct State {
  std::vector<Frame> stack;
  Clock::time_point mark;
  std::map<std::string, Entry> totals;
  void charge_top(Clock::time_point now) {
    if (!stack.empty())
      totals[stack.back().key].seconds += std::chrono::duration<double>(now - mark).count();
    mark = now;
  }
};

State& state() {
  thread_local State s;
  return s;
}

}  // namespace

void enable(bool on) {
  g_owner = on ? std::this_thread::get_id() : std::thread::id();
}
bool enabled() {
  return g_owner.load(std::memory_order_relaxed) == std::this_thread::get_id();
}
void set_wait(void (*wait)()) {
  g_wait = wait;
}

std::map<std::string, Entry> take() {
  State& s = state();
  s.charge_top(now());
  std::map<std::string, Entry> out;
  out.swap(s.totals);
  return out;
}

namespace detail {

void push(std::string_view prefix, std::string_view what, Charge charge) {
  State& s = state();
  s.charge_top(now());
  Frame f{std::string(prefix), s.stack.empty() ? nullptr : s.stack.back().region};
  if (charge == Charge::region) {
    f.key = "elementwise.";
    f.region = what.data();  // a literal (Region)
  }
  f.key += what;
  if (charge == Charge::by_region && f.region) f.key += std::string(".") + f.region;
  ++s.totals[f.key].calls;
  s.stack.push_back(std::move(f));
}

void pop() {
  State& s = state();
  s.charge_top(now());
  if (!s.stack.empty()) s.stack.pop_back();
}

}  // namespace detail

}  // namespace gdn::profile
