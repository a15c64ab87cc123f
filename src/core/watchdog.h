// Ends the process when it stops making progress (docs/design.md §8):
// a rank stuck in a collective whose peer was stopped or deadlocked would otherwise wait
// forever. The owner calls progress() at every step and phase; a background thread checks
// once a second, and after `timeout_s` without progress it writes one line naming this
// rank, the step and the phase it is stuck in to stderr and _Exit()s with code 1. mpirun
// (or srun) then ends the other ranks, as it does when a rank dies. Works the same over
// MPI and NCCL: it watches the rank's own progress, not the library.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace gdn {

class Watchdog {
 public:
  // timeout_s <= 0 disables the watchdog (no thread is started).
  Watchdog(double timeout_s, int rank);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Marks progress: the rank is now at `step` (-1: set-up), in `phase` (a string literal).
  void progress(std::int64_t step, const char* phase);

 private:
  void watch();

  double timeout_s_;
  int rank_;
  std::atomic<std::int64_t> last_ns_{0};
  std::atomic<std::int64_t> step_{-1};
  std::atomic<const char*> phase_{"set-up"};
  std::mutex m_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace gdn
