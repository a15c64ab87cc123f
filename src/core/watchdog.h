// Ends the process when it stops making progress (docs/design.md §8):
// a rank stuck in a collective whose peer was stopped or deadlocked would otherwise wait
// forever. The owner calls progress() at every step and phase; a background thread checks
// once a second, and after `timeout_s` without progress it writes one line to stderr and
// _Exit()s with code 1. mpirun (or srun) then ends the other ranks, as it does when a rank
// dies. Works the same over MPI and NCCL: it watches the rank's own progress, not the
// library.
//
// The rank that times out is usually not the culprit but one waiting for it. With a
// heartbeat directory (core/heartbeat.h) the thread also beats once a second, and on a
// timeout it watches its peers' heartbeats for a few seconds: the line then names the
// silent ranks (stopped, dead or hung: their heartbeat stood still) with the step and
// phase they were last in, before this rank's own wait. When every peer is alive it says
// so, and names the ranks furthest behind.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "core/heartbeat.h"

namespace gdn {

class Watchdog {
 public:
  // timeout_s <= 0 disables the watchdog (no thread is started, no heartbeat written).
  // heartbeat_dir: shared by the ranks of a node, the same name on every rank; "" for
  // none (the line then names only this rank).
  Watchdog(double timeout_s, int rank, int world_size = 1, const std::string& heartbeat_dir = "");
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Marks progress: the rank is now at `step` (-1: set-up), in `phase` (a string literal).
  void progress(std::int64_t step, const char* phase);

 private:
  void watch();
  void beat();
  // Watches the peers' heartbeats for a few seconds (beating meanwhile) and describes
  // the silent ones, or the ones furthest behind; "" without a heartbeat directory.
  // false when stop was asked meanwhile.
  bool describe_peers(std::unique_lock<std::mutex>& lock, std::string& out);

  double timeout_s_;
  int rank_;
  std::atomic<std::int64_t> last_ns_{0};
  std::atomic<std::int64_t> step_{-1};
  std::atomic<const char*> phase_{"set-up"};
  std::unique_ptr<HeartbeatBoard> board_;
  std::atomic<std::uint64_t> beats_{0};  // written by the thread and by progress()
  std::mutex m_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace gdn
