#include "core/heartbeat.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace gdn {

namespace {

// One fixed-size record at offset 0, rewritten in place. The counter is stored at both
// ends, so a read that overlaps a write is seen (the two differ) and retried.
struct Record {
  std::uint64_t beat = 0;
  std::int64_t step = -1;
  char phase[48] = {};
  std::uint64_t beat_again = 0;
};

}  // namespace

HeartbeatBoard::HeartbeatBoard(std::string dir, int rank, int world_size)
    : dir_(std::move(dir)), rank_(rank), world_size_(world_size) {
  if (dir_.empty()) return;
  fd_ = ::open(path(rank_).c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
}

HeartbeatBoard::~HeartbeatBoard() {
  remove();
}

void HeartbeatBoard::remove() {
  if (fd_ < 0) return;
  ::close(fd_);
  fd_ = -1;
  ::unlink(path(rank_).c_str());
  ::rmdir(dir_.c_str());  // fails while other ranks' files are there
}

std::string HeartbeatBoard::path(int r) const {
  return dir_ + "/rank-" + std::to_string(r);
}

void HeartbeatBoard::write(const Heartbeat& h) {
  if (fd_ < 0) return;
  Record rec;
  rec.beat = rec.beat_again = h.beat;
  rec.step = h.step;
  std::strncpy(rec.phase, h.phase.c_str(), sizeof rec.phase - 1);
  // A failed write only makes this rank look silent to a peer that times out.
  [[maybe_unused]] const ssize_t n = ::pwrite(fd_, &rec, sizeof rec, 0);
}

std::optional<Heartbeat> HeartbeatBoard::read(int r) const {
  if (dir_.empty()) return std::nullopt;
  const int fd = ::open(path(r).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::optional<Heartbeat> out;
  for (int attempt = 0; attempt < 5 && !out; ++attempt) {
    Record rec;
    if (::pread(fd, &rec, sizeof rec, 0) != ssize_t(sizeof rec)) {
      // Created but not yet written: a rank that has not started beating.
      if (attempt == 4) out = Heartbeat{};
      continue;
    }
    if (rec.beat != rec.beat_again) continue;
    rec.phase[sizeof rec.phase - 1] = '\0';
    out = Heartbeat{rec.beat, rec.step, rec.phase};
  }
  ::close(fd);
  return out;
}

}  // namespace gdn
