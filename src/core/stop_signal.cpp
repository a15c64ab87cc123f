#include "core/stop_signal.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cctype>
#include <csignal>
#include <utility>

#include "core/error.h"

namespace gdn::stop_signal {

namespace {

constexpr std::array<std::pair<const char*, int>, 7> kSignals{{{"TERM", SIGTERM},
                                                               {"INT", SIGINT},
                                                               {"HUP", SIGHUP},
                                                               {"USR1", SIGUSR1},
                                                               {"USR2", SIGUSR2},
                                                               {"QUIT", SIGQUIT},
                                                               {"XCPU", SIGXCPU}}};

// Lock-free, so the handler may store to it.
std::atomic<int> g_received{0};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void record(int sig) {
  int none = 0;
  g_received.compare_exchange_strong(none, sig);  // the first one wins
}

}  // namespace

std::vector<int> parse(const std::string& list, const std::string& what) {
  std::vector<int> out;
  std::string lower = list;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  if (lower == "none") return out;
  std::string known;
  for (const auto& [n, s] : kSignals) known += (known.empty() ? "" : ", ") + std::string(n);
  std::size_t pos = 0;
  while (pos <= list.size()) {
    std::size_t end = std::min(list.find(',', pos), list.size());
    std::string item = list.substr(pos, end - pos);
    std::transform(item.begin(), item.end(), item.begin(),
                   [](unsigned char c) { return char(std::toupper(c)); });
    if (item.rfind("SIG", 0) == 0) item = item.substr(3);
    const auto* hit = std::find_if(kSignals.begin(), kSignals.end(),
                                   [&](const auto& p) { return item == p.first; });
    GDN_CHECK(hit != kSignals.end(), what, " '", list, "': '", list.substr(pos, end - pos),
              "' is not one of the signals a job is stopped by (", known,
              "); expected a comma-separated list of them, or none");
    if (std::find(out.begin(), out.end(), hit->second) == out.end()) out.push_back(hit->second);
    pos = end + 1;
  }
  return out;
}

void install(const std::vector<int>& signals) {
  struct sigaction sa {};
  sa.sa_handler = record;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (int s : signals) sigaction(s, &sa, nullptr);
}

void restore_defaults(const std::vector<int>& signals) {
  for (int s : signals) std::signal(s, SIG_DFL);
}

int received() {
  return g_received.load();
}

std::string name(int sig) {
  for (const auto& [n, s] : kSignals)
    if (s == sig) return std::string("SIG") + n;
  return "signal " + std::to_string(sig);
}

}  // namespace gdn::stop_signal
