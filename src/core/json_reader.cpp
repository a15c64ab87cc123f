#include "core/json_reader.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>

#include "core/error.h"

namespace gdn {

using nlohmann::json;

void JsonSection::fail(const std::string& key, const std::string& expected) const {
  throw_error(name_, ".", key, " = ", j_.at(key).dump(), " in ", source_, ": expected ", expected);
}

std::string integer_range_text(std::int64_t lo, std::int64_t hi) {
  std::ostringstream os;
  os << "an integer >= " << lo;
  if (hi != std::numeric_limits<std::int64_t>::max() && hi != std::numeric_limits<int>::max())
    os << " and <= " << hi;
  return os.str();
}

std::string real_range_text(double lo, bool lo_open) {
  std::ostringstream os;
  os << "a number " << (lo_open ? "> " : ">= ") << lo;
  return os.str();
}

std::optional<double> parse_decimal(const std::string& text) {
  static const std::regex decimal(R"([+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)");
  if (!std::regex_match(text, decimal)) return std::nullopt;
  errno = 0;
  const double v = std::strtod(text.c_str(), nullptr);
  if (errno == ERANGE && std::fabs(v) > 1) return std::nullopt;  // overflow, not underflow
  return v;
}

std::optional<std::int64_t> whole_number(double x) {
  if (!(std::fabs(x) < 9007199254740992.0) || std::floor(x) != x) return std::nullopt;
  return std::int64_t(x);
}

std::int64_t JsonSection::integer(const std::string& key, std::int64_t lo, std::int64_t hi) const {
  const json& v = j_.at(key);
  if (const std::optional<std::int64_t> w =
          v.is_number_float() ? whole_number(v.get<double>()) : std::nullopt) {
    if (*w < lo || *w > hi) fail(key, integer_range_text(lo, hi));
    return *w;
  }
  // Unsigned values above int64 max cannot be in any of our ranges.
  if (!v.is_number_integer() ||
      (v.is_number_unsigned() &&
       v.get<std::uint64_t>() > std::uint64_t(std::numeric_limits<std::int64_t>::max())))
    fail(key, integer_range_text(lo, hi));
  const auto x = v.get<std::int64_t>();
  if (x < lo || x > hi) fail(key, integer_range_text(lo, hi));
  return x;
}

std::uint64_t JsonSection::uint64(const std::string& key) const {
  const json& v = j_.at(key);
  if (v.is_number_unsigned()) return v.get<std::uint64_t>();
  fail(key, "a non-negative integer");
}

double JsonSection::real(const std::string& key, double lo, bool lo_open) const {
  const json& v = j_.at(key);
  if (!v.is_number()) fail(key, real_range_text(lo, lo_open));
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || (lo_open && x == lo)) fail(key, real_range_text(lo, lo_open));
  return x;
}

bool JsonSection::boolean(const std::string& key) const {
  const json& v = j_.at(key);
  if (!v.is_boolean()) fail(key, "true or false");
  return v.get<bool>();
}

std::string JsonSection::string(const std::string& key) const {
  const json& v = j_.at(key);
  if (!v.is_string()) fail(key, "a string");
  return v.get<std::string>();
}

namespace {

// How long a config that is a FIFO or a device may stay silent before set-up gives up.
constexpr int kSilentS = 10;

// The bytes of a config file. Opened without blocking and, when it is not a regular file
// (a FIFO, `<(...)`), read with a bound: a FIFO nobody writes to fails, not hangs.
std::string read_config_text(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  GDN_CHECK(fd >= 0, "cannot open config file '", path, "': it does not exist or is not readable (",
            std::strerror(errno), ")");
  struct Close {
    int fd;
    ~Close() { ::close(fd); }
  } close{fd};
  struct stat st {};
  GDN_CHECK(::fstat(fd, &st) == 0, "cannot read config file '", path, "': ", std::strerror(errno));
  GDN_CHECK(!S_ISDIR(st.st_mode), "config file '", path, "' is a directory: expected a JSON file");
  const bool regular = S_ISREG(st.st_mode);
  std::string out;
  char buf[1 << 16];
  for (;;) {
    if (!regular) {
      pollfd p{fd, POLLIN, 0};
      const int r = ::poll(&p, 1, kSilentS * 1000);
      if (r < 0 && errno == EINTR) continue;
      GDN_CHECK(r != 0, "config file '", path, "' is ",
                S_ISFIFO(st.st_mode) ? "a FIFO" : "no regular file",
                " and nothing was written to it for ", kSilentS,
                " s: pass a regular file, or start what writes it first");
    }
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      out.append(buf, std::size_t(n));
    } else if (n == 0) {
      return out;
    } else if (errno != EINTR && errno != EAGAIN) {
      throw_error("cannot read config file '", path, "': ", std::strerror(errno));
    }
  }
}

}  // namespace

json read_json_file(const std::string& path) {
  const std::string in = read_config_text(path);
  // The parser's callback sees every key before its value, so when a number overflows
  // (nlohmann throws out_of_range 406 without a position) the last key names it.
  std::vector<std::string> path_keys;
  std::string last_key;
  const json::parser_callback_t track = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key) {
      path_keys.resize(std::size_t(depth > 0 ? depth - 1 : 0));
      last_key = parsed.get<std::string>();
      path_keys.push_back(last_key);
    }
    return true;
  };
  try {
    return json::parse(in, track);
  } catch (const json::parse_error& e) {
    // e.what() carries the byte position and what the parser expected.
    throw_error("config file '", path, "' is not valid JSON: ", e.what());
  } catch (const json::out_of_range& e) {
    std::string key;
    for (const std::string& k : path_keys) key += (key.empty() ? "" : ".") + k;
    throw_error("config file '", path, "': the value of '", key.empty() ? "?" : key,
                "' is out of range: ", e.what());
  }
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string closest_key(const std::string& key, const std::vector<std::string>& known) {
  std::string best;
  std::size_t best_d = std::string::npos;
  for (const auto& k : known) {
    const std::size_t d = edit_distance(key, k);
    if (d < best_d) best_d = d, best = k;
  }
  return best_d <= std::max<std::size_t>(2, key.size() / 3) ? best : std::string();
}

}  // namespace gdn
