#include "train/step_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace gdn {

namespace {

// Whether a log line is the record of a step before `step`.
bool before(const std::string& line, std::int64_t step) {
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) return false;
  return j["step"].get<std::int64_t>() < step;
}

// Writes `text` to path.tmp, fsyncs it and renames it over path.
void replace_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  GDN_CHECK(fd >= 0, "cannot rewrite the log file '", path, "': ", tmp, ": ", std::strerror(errno));
  std::size_t done = 0;
  bool ok = true;
  while (ok && done < text.size()) {
    const ssize_t w = ::write(fd, text.data() + done, text.size() - done);
    if (w < 0 && errno == EINTR) continue;
    ok = w > 0;
    if (ok) done += std::size_t(w);
  }
  ok = ok && ::fsync(fd) == 0;
  const std::string err = std::strerror(errno);
  ok = ::close(fd) == 0 && ok;
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = ok ? std::strerror(errno) : err;
    ::unlink(tmp.c_str());
    throw_error("cannot rewrite the log file '", path, "': ", why);
  }
}

}  // namespace

std::int64_t truncate_step_log(const std::string& path, std::int64_t step) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) return 0;
  // Through a symbolic link, the file it names is rewritten (the link stays).
  const fs::path real = fs::canonical(path, ec);
  if (ec || !fs::is_regular_file(real, ec)) return 0;
  std::ifstream in(real);
  GDN_CHECK(in.good(), "cannot read the log file '", path, "': ", std::strerror(errno));
  std::string kept, line;
  std::int64_t dropped = 0;
  while (std::getline(in, line)) {
    if (before(line, step))
      kept += line + '\n';
    else
      ++dropped;
  }
  GDN_CHECK(!in.bad(), "cannot read the log file '", path, "': ", std::strerror(errno));
  if (dropped > 0) replace_file(real.string(), kept);
  return dropped;
}

}  // namespace gdn
