#include "core/writable_dir.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include "core/error.h"

namespace gdn {

void require_writable_dir(const std::string& dir, const std::string& what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw_error(what, " '", dir, "' exists and is not a directory: ", std::strerror(ENOTDIR));
  fs::create_directories(dir, ec);
  GDN_CHECK(!ec, "cannot create ", what, " '", dir, "': ", ec.message());
  // One probe per process: the ranks of a job check the same directory at once.
  const std::string probe =
      (fs::path(dir) / (".gdn_write_probe." + std::to_string(::getpid()))).string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  GDN_CHECK(fd >= 0, what, " '", dir, "' is not writable: ", std::strerror(errno));
  const bool wrote = ::write(fd, "ok", 2) == 2;
  const std::string err = std::strerror(errno);
  ::close(fd);
  ::unlink(probe.c_str());
  GDN_CHECK(wrote, what, " '", dir, "' is not writable: ", err);
}

}  // namespace gdn
