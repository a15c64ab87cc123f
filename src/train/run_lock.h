// One run per checkpoint directory (docs/usage.md, "Checkpoints"). Two runs writing one
// directory interleave their checkpoints, and a later --resume continues whichever wrote
// last. Rank 0 of a run holds DIR/gdn-run.lock for the whole run; a second run is refused
// at start-up, naming the holder.
//
// The lock works on a shared file system across nodes, where flock may not: it is taken
// by link(2) of a file of our own onto the lock's name, which is atomic on NFS too (the
// link count is checked when link's reply was lost). The holder touches the lock every
// few seconds (a heartbeat); its age is read against a file we write ourselves, so both
// times come from the file server's clock, not from two nodes' clocks. A lock is taken
// over, with a warning, when its holder is gone: a process of this host that no longer
// exists (pid and start time), an earlier run of the same Slurm job (a requeue keeps the
// job id and starts only after the old one ended), or a heartbeat older than stale_s.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace gdn {

// Who holds a lock: what its file records.
struct LockHolder {
  std::string host;
  std::int64_t pid = 0;
  std::int64_t start_ticks = 0;  // the process's start time (/proc/PID/stat), against pid reuse
  std::string job;               // SLURM_JOB_ID, or ""
  std::string since;             // UTC, ISO 8601
  std::string token;             // random: tells two holders apart
  // "host H, pid P, Slurm job J, since S".
  std::string describe() const;
};

class RunLock {
 public:
  // Takes dir/gdn-run.lock (creating dir) or throws gdn::Error naming the holder and how
  // old its heartbeat is. stale_s > 0.
  RunLock(const std::string& dir, double stale_s);
  // Stops the heartbeat and removes the lock if it is still ours.
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

  const std::string& path() const { return path_; }
  // The seconds between heartbeats for a given stale age.
  static double heartbeat_s(double stale_s);

 private:
  void beat_loop();

  std::string dir_, path_, text_;  // text_: the lock's content, ours
  double stale_s_;
  std::mutex m_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace gdn
