#include "train/step_log.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"

namespace gdn {

namespace {

// Whether a log line is the record of a step before `step`.
bool before(const std::string& line, std::int64_t step) {
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) return false;
  return j["step"].get<std::int64_t>() < step;
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
  if (dropped > 0) write_file_atomically(real.string(), kept, "rewriting the log file");
  return dropped;
}

}  // namespace gdn
