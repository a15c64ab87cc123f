#include "core/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "core/error.h"

namespace gdn {

namespace {

std::string sys_error() {
  return std::strerror(errno);
}

// The directory that holds path ("." for a bare file name).
std::string dir_of(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return dir.empty() ? "." : dir;
}

}  // namespace

AtomicFile::AtomicFile(std::string path, std::string context, std::string tmp_path)
    : path_(std::move(path)), context_(std::move(context)), tmp_(std::move(tmp_path)) {
  if (tmp_.empty()) tmp_ = path_ + ".tmp";
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  GDN_CHECK(fd_ >= 0, error_prefix(), "cannot create '", tmp_, "' (to write '", path_,
            "'): ", sys_error());
}

AtomicFile::~AtomicFile() {
  if (!committed_) discard();
}

std::string AtomicFile::error_prefix() const {
  return context_.empty() ? std::string() : context_ + ": ";
}

void AtomicFile::discard() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(tmp_.c_str());
}

void AtomicFile::write(const void* data, std::size_t n) {
  GDN_CHECK(fd_ >= 0 && !committed_, error_prefix(), "'", tmp_,
            "' is closed: a write after commit() or after a failed write");
  const char* c = static_cast<const char*>(data);
  while (n > 0) {
    // Linux writes at most ~2 GiB a call; asking for less keeps every call whole.
    const ssize_t w = ::write(fd_, c, std::min<std::size_t>(n, std::size_t(1) << 30));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const std::string why = w < 0 ? sys_error() : "no progress";
      discard();
      throw_error(error_prefix(), "cannot write '", tmp_, "': ", why);
    }
    c += w;
    n -= std::size_t(w);
  }
}

std::string AtomicFile::commit() {
  GDN_CHECK(fd_ >= 0 && !committed_, error_prefix(), "'", tmp_,
            "' is closed: commit() twice or after a failed write");
  // The data must be on disk before the rename makes the file visible.
  if (::fsync(fd_) != 0) {
    const std::string why = sys_error();
    discard();
    throw_error(error_prefix(), "cannot fsync '", tmp_, "': ", why);
  }
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) {
    const std::string why = sys_error();
    discard();
    throw_error(error_prefix(), "cannot close '", tmp_, "': ", why);
  }
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const std::string why = sys_error();
    discard();
    throw_error(error_prefix(), "cannot rename '", tmp_, "' to '", path_, "': ", why);
  }
  committed_ = true;
  // Makes the rename durable.
  const std::string dir = dir_of(path_);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return "cannot open directory '" + dir + "': " + sys_error();
  std::string why;
  if (::fsync(dfd) != 0) why = "cannot fsync directory '" + dir + "': " + sys_error();
  ::close(dfd);
  return why;
}

std::string write_file_atomically(const std::string& path, std::string_view bytes,
                                  const std::string& context) {
  AtomicFile f(path, context);
  f.write(bytes.data(), bytes.size());
  return f.commit();
}

}  // namespace gdn
