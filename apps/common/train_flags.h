// The flags of the train table's fields (train/train_config.h), declared and read in one
// place for every tool that takes them: gdn_train all of them, gdn_eval the layout's and
// the precision's. Each flag carries the field's help, "[train.KEY]", and its checks.
#pragma once

#include <cxxopts.hpp>
#include <map>
#include <string>
#include <vector>

#include "train/train_config.h"

namespace gdn::app {

// Declares the flags of `keys` (empty: every field that has a flag), each help followed by
// note[key] when there is one (a tool's own default).
void add_train_flags(cxxopts::Options& o, const std::vector<std::string>& keys = {},
                     const std::map<std::string, std::string>& note = {});
// Sets the fields of the flags given on the command line, with the table's checks.
void apply_train_flags(const cxxopts::ParseResult& r, TrainConfig& t,
                       const std::vector<std::string>& keys = {});

}  // namespace gdn::app
