// A file replaced atomically: its bytes go to a temporary in the target's directory (so
// the rename cannot cross file systems), which is synced, closed and renamed over the
// target, and then the directory is synced. A crash leaves the old file (or none) or the
// whole new one, never a torn one. Every failure up to the rename throws gdn::Error
// naming the file and the OS's reason (strerror) and removes the temporary; the target
// is untouched then. Used by every writer of a result file (checkpoints, safetensors,
// .npy, config.json, gdn_kernel's stats.json).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace gdn {

class AtomicFile {
 public:
  // Creates (or truncates) the temporary, `tmp_path` or else path + ".tmp". Messages
  // start with `context` + ": " when it is not empty ("write_npy", "save_checkpoint").
  explicit AtomicFile(std::string path, std::string context = "", std::string tmp_path = "");
  // Without a successful commit(), closes and removes the temporary.
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  const std::string& path() const { return path_; }
  const std::string& tmp_path() const { return tmp_; }

  // Appends all n bytes to the temporary, however many write calls that takes.
  void write(const void* data, std::size_t n);
  // fsync, close, rename over path(), fsync of the directory. The file is in place once
  // the rename is done, so a directory that cannot be synced (a file system without
  // directory fsync, say) is not an error: the reason is returned instead (empty when
  // the sync worked) for the caller to warn about or ignore.
  std::string commit();

 private:
  std::string error_prefix() const;
  void discard() noexcept;

  std::string path_, context_, tmp_;
  int fd_ = -1;
  bool committed_ = false;
};

// Writes `bytes` as the whole content of path through an AtomicFile; returns commit()'s
// directory-sync reason (usually ignored).
std::string write_file_atomically(const std::string& path, std::string_view bytes,
                                  const std::string& context = "");

}  // namespace gdn
