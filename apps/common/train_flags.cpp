#include "common/train_flags.h"

#include <algorithm>
#include <variant>

namespace gdn::app {

namespace {

bool wanted(const TrainField& f, const std::vector<std::string>& keys) {
  return *f.flag && (keys.empty() || std::find(keys.begin(), keys.end(), f.key) != keys.end());
}

}  // namespace

void add_train_flags(cxxopts::Options& o, const std::vector<std::string>& keys,
                     const std::map<std::string, std::string>& note) {
  for (const TrainField& f : train_fields())
    if (wanted(f, keys)) {
      auto value = cxxopts::value<std::string>();
      // A switch: the bare flag means true.
      if (std::holds_alternative<bool TrainConfig::*>(f.member)) value->implicit_value("true");
      const auto n = note.find(f.key);
      o.add_options()(
          f.flag,
          std::string(f.help) + (n == note.end() ? "" : " " + n->second) + " [train." + f.key + "]",
          value);
    }
}

void apply_train_flags(const cxxopts::ParseResult& r, TrainConfig& t,
                       const std::vector<std::string>& keys) {
  for (const TrainField& f : train_fields())
    if (wanted(f, keys) && r.count(f.flag)) set_train_field_text(t, f, r[f.flag].as<std::string>());
}

}  // namespace gdn::app
