#include "core/positional_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace gdn {

PositionalFile::PositionalFile(const std::string& path, const std::string& context,
                               const std::string& what, const std::string& open_note,
                               const std::string& expected)
    : path_(path), context_(context), what_(what) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd_ < 0) {
    const int err = errno;
    throw_error(context, "cannot open ", what, " '", path, "': ", std::strerror(err), " (",
                open_note, ")");
  }
  struct stat st {};
  const int rc = ::fstat(fd_, &st);
  const int err = errno;
  if (rc != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    GDN_CHECK(rc == 0, context, "cannot stat ", what, " '", path, "': ", std::strerror(err));
    throw_error(context, what, " '", path, "' is ",
                S_ISDIR(st.st_mode) ? "a directory" : "not a regular file", ": expected ",
                expected);
  }
  size_ = std::int64_t(st.st_size);
}

PositionalFile::~PositionalFile() {
  ::close(fd_);
}

void PositionalFile::read(void* dst, std::int64_t n, std::int64_t offset,
                          const std::string& short_note) const {
  char* out = static_cast<char*>(dst);
  std::int64_t done = 0;
  while (done < n) {
    const ssize_t got = ::pread(fd_, out + done, std::size_t(n - done), off_t(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      const int err = errno;
      throw_error(context_, "error reading ", what_, " '", path_, "' at byte ", offset + done, ": ",
                  std::strerror(err));
    }
    if (got == 0)
      throw_error(context_, what_, " '", path_, "' ends at byte ", offset + done, " (", n,
                  " bytes asked at byte ", offset, "; it had ", size_,
                  " bytes when opened): ", short_note);
    done += got;
  }
}

void PositionalFile::advise_sequential(std::int64_t begin, bool on) const {
  ::posix_fadvise(fd_, off_t(begin), 0, on ? POSIX_FADV_SEQUENTIAL : POSIX_FADV_NORMAL);
}

}  // namespace gdn
