// A file opened read-only for positional reads (pread): a reader takes the parts it needs
// (a rank's shard of a .npy array, one window of a token file), so neither the file nor
// what was already read stays in memory. Used by core/npy (read_npy_rows) and by the
// training data sources.
#pragma once

#include <cstdint>
#include <string>

namespace gdn {

class PositionalFile {
 public:
  // Opens `path`, which must be a regular file. Messages start with `context` (e.g.
  // "read_npy: ", or empty) and name the kind of file (`what`, e.g. "file", "token
  // file") and the path; a file that cannot be opened is followed by (open_note), one that
  // is a directory or a FIFO by ": expected " + expected. O_NONBLOCK: opening a FIFO
  // would otherwise wait for a writer.
  PositionalFile(const std::string& path, const std::string& context, const std::string& what,
                 const std::string& open_note, const std::string& expected);
  ~PositionalFile();
  PositionalFile(const PositionalFile&) = delete;
  PositionalFile& operator=(const PositionalFile&) = delete;

  const std::string& path() const { return path_; }
  // The size at opening, in bytes.
  std::int64_t size() const { return size_; }

  // Exactly n bytes at byte `offset` into dst (pread may return less than asked: it
  // loops). A file that ends first is an error: "... ends at byte X ...: " + short_note,
  // which says why that is wrong (the header promised more, the file changed).
  void read(void* dst, std::int64_t n, std::int64_t offset, const std::string& short_note) const;

  // Calls f(bytes, n) on consecutive blocks of whole elements of esize bytes, from byte
  // `begin` to the end of the file: one streaming pass, a block (1 MiB) at a time.
  template <typename F>
  void stream(std::int64_t begin, std::int64_t esize, const std::string& short_note, F&& f) const;

 private:
  void advise_sequential(std::int64_t begin, bool on) const;

  std::string path_, context_, what_;
  int fd_ = -1;
  std::int64_t size_ = 0;
};

}  // namespace gdn

#include <algorithm>
#include <vector>

namespace gdn {

template <typename F>
void PositionalFile::stream(std::int64_t begin, std::int64_t esize, const std::string& short_note,
                            F&& f) const {
  advise_sequential(begin, true);  // only a hint
  const std::int64_t block = (std::int64_t(1) << 20) / esize * esize;
  std::vector<unsigned char> buf(
      std::size_t(std::min(block, std::max<std::int64_t>(size_ - begin, 0))));
  for (std::int64_t at = begin; at < size_; at += block) {
    const std::int64_t n = std::min(block, size_ - at);
    read(buf.data(), n, at, short_note);
    f(buf.data(), n);
  }
  advise_sequential(begin, false);
}

}  // namespace gdn
