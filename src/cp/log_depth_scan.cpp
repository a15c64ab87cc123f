#include "cp/log_depth_scan.h"

#include "gdn/pass/pass_buffer.h"
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
  PassBuffer<Dev, T> own, prefix, sent, received, tmp;
  for (PassBuffer<Dev, T>* b : {&own, &prefix, &sent, &received, &tmp}) b->resize(n);
  start_scan(Dev{}, A_in, B_in, d, reverse, own.data(), prefix.data());
  Dev::copy(sent.data(), own.data(), n);
  // Position in scan order: rank order forward, reverse rank order backward.
  const int pos = reverse ? P - 1 - r : r;
  auto rank_at = [&](int q) { return reverse ? P - 1 - q : q; };
  const std::size_t bytes = sizeof(T) * std::size_t(n);
  for (int dist = 1; dist < P; dist *= 2) {
    const int to = pos + dist < P ? rank_at(pos + dist) : -1;
    const int from = pos - dist >= 0 ? rank_at(pos - dist) : -1;
    comm.send_recv(sent.data(), to >= 0 ? bytes : 0, to, received.data(), from >= 0 ? bytes : 0,
                   from, /*tag=*/dist, site);
    if (from < 0) continue;
    // The next round's block is needed if there is a rank to send it to; the prefix's map
    // if that block or a later received one is composed with it. Else only its offset.
    const bool send_on = pos + 2 * dist < P;
    const bool map_read = send_on || (2 * dist < P && pos - 2 * dist >= 0);
    // The received block covers the dist maps just before this rank's prefix: it runs first.
    compose_pairs(Dev{}, prefix.data(), received.data(), d, !map_read, prefix.data(), tmp.data());
    if (send_on) compose_pairs(Dev{}, own.data(), prefix.data(), d, false, sent.data(), tmp.data());
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
