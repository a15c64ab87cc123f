#include "comm/communicator.h"

#include <utility>

#include "core/error.h"

namespace gdn {

const CommCounter& Communicator::counter(const std::string& site) const {
  // A site that never communicated moved zero bytes; a shared zero avoids inserting into
  // the map from a const method and keeps lookups of typos harmless.
  static const CommCounter kZero{};
  auto it = counters_.find(site);
  return it == counters_.end() ? kZero : it->second;
}

void Communicator::check_all_to_all(const char* call, const std::vector<std::size_t>& send_bytes,
                                    const std::vector<std::size_t>& send_offsets,
                                    const std::vector<std::size_t>& recv_bytes,
                                    const std::vector<std::size_t>& recv_offsets,
                                    const std::string& site) const {
  const int r = rank(), n = size();
  const std::pair<const std::vector<std::size_t>*, const char*> args[] = {
      {&send_bytes, "send_bytes"},
      {&send_offsets, "send_offsets"},
      {&recv_bytes, "recv_bytes"},
      {&recv_offsets, "recv_offsets"}};
  for (const auto& [v, name] : args)
    if (v->size() != static_cast<std::size_t>(n))
      throw_error(call, " at site '", site, "' on rank ", r, ": ", name, " has ", v->size(),
                  " entries, expected size() = ", n, " (one per rank)");
  // Both sides of the block to self are known here, so a disagreement is checkable on
  // every backend (unlike a peer's, which only MPI sees arrive).
  if (send_bytes[r] != recv_bytes[r])
    throw_error(call, " at site '", site, "' on rank ", r, ": the block to self (peer ", r,
                ") has send_bytes = ", send_bytes[r], " but recv_bytes = ", recv_bytes[r],
                "; expected equal sizes");
}

}  // namespace gdn
