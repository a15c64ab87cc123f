// Each rank's sign of life, for the watchdog (core/watchdog.h): a rank that times out
// waiting in a collective must tell which peers stopped, without their help. Rank r's
// watchdog thread rewrites DIR/rank-<r> about once a second with a counter, its step and
// its phase; a stopped, dead or hung process's counter no longer moves, while a peer that
// only waits (in the same collective) keeps counting. Plain files in a directory the
// ranks of a node share, no MPI: the watchdog thread must never wait on the library whose
// collective is stuck, and reading a file needs nothing from the process that wrote it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace gdn {

struct Heartbeat {
  std::uint64_t beat = 0;  // counts up while the rank's process runs
  std::int64_t step = -1;  // the step it last reported (-1: set-up)
  std::string phase;       // and the phase
};

class HeartbeatBoard {
 public:
  // dir "" makes an inactive board (writes and reads nothing). A file that cannot be
  // created leaves this rank's heartbeat missing for the others, nothing worse.
  HeartbeatBoard(std::string dir, int rank, int world_size);
  // Removes this rank's file, and the directory when it was the last one.
  ~HeartbeatBoard();
  void remove();  // the same, now (before _Exit)
  HeartbeatBoard(const HeartbeatBoard&) = delete;
  HeartbeatBoard& operator=(const HeartbeatBoard&) = delete;

  bool active() const { return fd_ >= 0; }
  const std::string& dir() const { return dir_; }
  int world_size() const { return world_size_; }
  void write(const Heartbeat& h);
  // Rank r's last heartbeat; nullopt when it has none here (no file: another node, or
  // it never started).
  std::optional<Heartbeat> read(int r) const;

 private:
  std::string path(int r) const;

  std::string dir_;
  int rank_, world_size_;
  int fd_ = -1;
};

}  // namespace gdn
