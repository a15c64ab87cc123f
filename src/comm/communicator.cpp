#include "comm/communicator.h"

namespace gdn {

const CommCounter& Communicator::counter(const std::string& site) const {
  // A site that never communicated moved zero bytes; a shared zero avoids inserting into
  // the map from a const method and keeps lookups of typos harmless.
  static const CommCounter kZero{};
  auto it = counters_.find(site);
  return it == counters_.end() ? kZero : it->second;
}

}  // namespace gdn
