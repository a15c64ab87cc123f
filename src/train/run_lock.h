// What one run writes is that run's alone (docs/usage.md, "Checkpoints"). Two runs writing
// one checkpoint directory interleave their checkpoints, and a later --resume continues
// whichever wrote last; two runs appending to one --log interleave their steps. Rank 0 of
// a run holds a lock file for each path it writes: DIR/gdn-run.lock for the checkpoint
// directory, PARENT/.NAME.gdn-lock for an output file or folder NAME (the log, the
// export, the exchange record). A second run is refused at start-up, naming the holder.
//
// The lock works on a shared file system across nodes, where flock may not: it is taken
// by link(2) of a file of our own onto the lock's name, which is atomic on NFS too (the
// link count is checked when link's reply was lost). The holder touches its locks every
// few seconds (a heartbeat) and records in them how often it beats and after how long
// without a beat it may be judged gone (its --lock-stale-s). A heartbeat's age is read
// against a file we write ourselves, so both times come from the file server's clock.
//
// A lock is taken over, with a warning, only when its holder is gone:
//   - its host is this host: by its pid and start time, and nothing else (a live process
//     keeps its lock whatever its Slurm job);
//   - its host is another: it ran in an earlier start of this Slurm job (same job id, a
//     lower SLURM_RESTART_COUNT: a requeued job starts only after the old one ended), or
//     its heartbeat is older than the larger of the holder's stale bound and ours.
// A holder whose lock was taken over anyway (its node stalled past the bound) finds out at
// its next heartbeat or check (lost()) and must stop writing at once.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace gdn {

// Who holds a lock: what its file records.
struct LockHolder {
  std::string host;
  std::int64_t pid = 0;
  std::int64_t start_ticks = 0;  // the process's start time (/proc/PID/stat), against pid reuse
  std::string job;               // SLURM_JOB_ID, or ""
  std::int64_t restart = 0;      // SLURM_RESTART_COUNT: which start of the job
  std::string since;             // UTC, ISO 8601
  std::string token;             // random: tells two holders apart
  double stale_s = 0;            // the holder's --lock-stale-s (0: not recorded)
  double heartbeat_s = 0;        // how often it touches the lock (0: not recorded)
  // "host H, pid P, Slurm job J, since S".
  std::string describe() const;
};

class RunLock {
 public:
  // The locks of one run; stale_s (> 0) is its --lock-stale-s.
  explicit RunLock(double stale_s);
  // Stops the heartbeat and removes every lock that is still ours.
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

  // Takes the lock file `lock` of `what` ("checkpoint directory 'D'", "--log 'F'") or
  // throws gdn::Error naming the holder, how old its heartbeat is, and `remedy` (what
  // the user can do). The lock's directory must exist.
  void take(const std::string& lock, const std::string& what, const std::string& remedy);
  // Takes dir's lock (creating dir, checked writable).
  void take_checkpoint_dir(const std::string& dir);
  // Takes the lock of an output file or folder (beside it), named `flag` in messages.
  void take_output(const std::string& path, const std::string& flag);

  // "" while every lock taken is still ours; else which one another run took over, and
  // by whom. Reads the lock files (a few hundred bytes each).
  std::string lost();

  // The seconds between heartbeats for a given stale age.
  static double heartbeat_s(double stale_s);
  // DIR/gdn-run.lock.
  static std::string checkpoint_dir_lock(const std::string& dir);
  // PARENT/.NAME.gdn-lock for an output PARENT/NAME (a trailing slash ignored).
  static std::string output_lock(const std::string& path);
  // The holder of a live lock at `lock` judged by a run with `stale_s`: its description,
  // or "" when there is none, or it is stale, or its process is gone.
  static std::string live_holder(const std::string& lock, double stale_s);

 private:
  struct Held {
    std::string path, what, text;  // text: the lock's content, ours
  };
  void beat_loop();
  // Whether every lock taken is still ours; when not, lost_ says which and whose it is.
  // Called with m_ held.
  bool still_held();

  double stale_s_;
  LockHolder me_;
  std::mutex m_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::vector<Held> held_;
  std::string lost_;  // set by still_held, from the heartbeat or lost()
  std::thread thread_;
};

}  // namespace gdn
