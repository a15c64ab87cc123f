#include "cp/log_depth_scan.h"

#include "gdn/chunk/pass_buffer.h"
#include "gdn/pairs/scan_cost.h"
#include "runtime/devices.h"

namespace gdn {

// Pairs below are (A, B) with the map x -> A x + B in the *forward* orientation; the
// reverse scan transposes A once on entry so the same composition serves both.
template <typename T, typename Dev>
void log_depth_scan(Dev, Communicator& comm, const T* A_in, const T* B_in, const PairDims& d,
                    bool reverse, const std::string& site, T* out) {
  const int P = comm.size(), r = comm.rank();
  const std::int64_t n = d.pair_elems();
  // own: this rank's map; prefix: the composition of the maps before it (identity at
  // first); sent = own after prefix, the block a rank sends on.
  // Every element is written before it is read: no zero fill on the host (pass_buffer.h).
  PassBuffer<Dev, T> own(n), prefix(n), sent(n), received(n), tmp(n);
  start_scan(Dev{}, A_in, B_in, d, reverse, own.data(), prefix.data());
  Dev::copy(sent.data(), own.data(), n);
  // Position in scan order: rank order forward, reverse rank order backward.
  const int pos = reverse ? P - 1 - r : r;
  auto rank_at = [&](int q) { return reverse ? P - 1 - q : q; };
  const std::size_t bytes = sizeof(T) * std::size_t(n);
  for (int dist = 1; dist < P; dist *= 2) {
    const ScanStep s = scan_step(P, pos, dist);
    const int to = s.sends ? rank_at(pos + dist) : -1;
    const int from = s.receives ? rank_at(pos - dist) : -1;
    comm.send_recv(sent.data(), bytes, to, received.data(), bytes, from, /*tag=*/dist, site);
    if (!s.receives) continue;
    // The received block covers the dist maps just before this rank's prefix: it runs
    // first. Only the offset when the prefix's map is not read again.
    compose_pairs(Dev{}, prefix.data(), received.data(), d, !s.map_read, prefix.data(), tmp.data());
    if (s.sends_on)
      compose_pairs(Dev{}, own.data(), prefix.data(), d, false, sent.data(), tmp.data());
  }
  // The scan starts from a zero state: the result is the composed offset.
  Dev::copy(out, prefix.data() + d.a_elems(), std::size_t(d.b_elems()));
}

#define GDN_INSTANTIATE(T, Dev)                                                               \
  template void log_depth_scan(Dev, Communicator&, const T*, const T*, const PairDims&, bool, \
                               const std::string&, T*);
GDN_FOR_EACH_DEVICE(GDN_INSTANTIATE)
#undef GDN_INSTANTIATE

}  // namespace gdn
