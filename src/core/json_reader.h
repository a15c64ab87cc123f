// Typed reads from one JSON object of a config file ("model", "train"), with messages that
// name the file, the key, the value and what was expected; and JSON file parsing whose
// errors name the file and, for a number that overflows, the key that holds it.
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace gdn {

class JsonSection {
 public:
  // j: the object; name: its name in messages ("model"); source: the file.
  JsonSection(const nlohmann::json& j, std::string name, std::string source)
      : j_(j), name_(std::move(name)), source_(std::move(source)) {}

  bool has(const std::string& key) const { return j_.contains(key); }
  const nlohmann::json& at(const std::string& key) const { return j_.at(key); }
  // "model.rms_norm_eps in configs/tiny.json": where a key's value came from.
  std::string where(const std::string& key) const { return name_ + "." + key + " in " + source_; }

  [[noreturn]] void fail(const std::string& key, const std::string& expected) const;

  std::int64_t integer(const std::string& key, std::int64_t lo,
                       std::int64_t hi = std::numeric_limits<std::int64_t>::max()) const;
  int int32(const std::string& key, int lo, int hi = std::numeric_limits<int>::max()) const {
    return int(integer(key, lo, hi));
  }
  std::uint64_t uint64(const std::string& key) const;
  // A finite number >= lo (> lo when lo_open).
  double real(const std::string& key, double lo, bool lo_open) const;
  bool boolean(const std::string& key) const;
  std::string string(const std::string& key) const;

 private:
  const nlohmann::json& j_;
  std::string name_, source_;
};

// "an integer >= 1", "an integer >= 0 and <= 7", "a number > 0" (for messages).
std::string integer_range_text(std::int64_t lo, std::int64_t hi);
std::string real_range_text(double lo, bool lo_open);

// A number written in decimal ("3e-4", "-2.5", "10"): nullopt for anything else, hex
// ("0x10"), "inf" and "nan" among them, and for a magnitude past the largest double. One
// below the smallest reads as what it rounds to (1e-400 as 0), for the range to judge.
std::optional<double> parse_decimal(const std::string& text);

// x as an integer when it is a whole number (2.0, as Python's json may write one) that a
// double holds exactly (|x| < 2^53); else nullopt.
std::optional<std::int64_t> whole_number(double x);

// Parses the JSON file at path. Errors name the file: a missing or unreadable file, a
// syntax error (with the byte position), a number too large for a double (with the key).
nlohmann::json read_json_file(const std::string& path);

// Levenshtein distance, for the did-you-mean of an unknown key; and the closest of
// `known` to `key` when it is close enough to suggest ("" otherwise).
std::size_t edit_distance(const std::string& a, const std::string& b);
std::string closest_key(const std::string& key, const std::vector<std::string>& known);

}  // namespace gdn
