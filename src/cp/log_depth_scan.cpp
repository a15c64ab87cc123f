#include "cp/log_depth_scan.h"

#include <algorithm>
#include <vector>

#include "gdn/pairs/pair_algebra.h"

namespace gdn {

// Pairs below are (A, B) with the map x -> A x + B in the *forward* orientation; the
// reverse scan transposes A once on entry so the same composition serves both.
template <typename T>
void log_depth_scan(Host, Communicator& comm, const T* A_in, const T* B_in, const PairDims& d,
                    bool reverse, const std::string& site, T* out) {
  const int P = comm.size(), r = comm.rank(), K = d.K, V = d.V;
  const std::int64_t na = d.a_elems(), nb = d.b_elems();
  // own: this rank's map; excl: composition of the maps before it (identity at first);
  // incl = own after excl, the block a rank sends on.
  std::vector<T> own(d.pair_elems()), excl(d.pair_elems(), T(0)), incl, recv(d.pair_elems());
  for (int bh = 0; bh < d.BH; ++bh) {
    const T* a = A_in + std::size_t(bh) * K * K;
    if (reverse)
      pairs::transpose(a, K, own.data() + std::size_t(bh) * K * K);
    else
      std::copy_n(a, K * K, own.begin() + std::size_t(bh) * K * K);
    for (int i = 0; i < K; ++i) excl[std::size_t(bh) * K * K + i * K + i] = 1;
  }
  std::copy_n(B_in, nb, own.begin() + na);
  incl = own;
  // compose(outer, inner) = outer after inner, per (batch, head), written into dst (which
  // may be outer or inner: the result goes through tmp).
  std::vector<T> tmp(d.pair_elems());
  auto compose = [&](const T* outer, const T* inner, T* dst) {
    for (int bh = 0; bh < d.BH; ++bh) {
      const std::size_t a = std::size_t(bh) * K * K, b = na + std::size_t(bh) * K * V;
      pairs::compose(outer + a, outer + b, inner + a, inner + b, K, V, tmp.data() + a,
                     tmp.data() + b);
    }
    std::copy(tmp.begin(), tmp.end(), dst);
  };
  // Position in scan order: rank order forward, reverse rank order backward.
  const int pos = reverse ? P - 1 - r : r;
  auto rank_at = [&](int q) { return reverse ? P - 1 - q : q; };
  const std::size_t bytes = sizeof(T) * d.pair_elems();
  for (int dist = 1; dist < P; dist *= 2) {
    const int to = pos + dist < P ? rank_at(pos + dist) : -1;
    const int from = pos - dist >= 0 ? rank_at(pos - dist) : -1;
    comm.send_recv(incl.data(), to >= 0 ? bytes : 0, to, recv.data(), from >= 0 ? bytes : 0, from,
                   /*tag=*/dist, site);
    if (from < 0) continue;
    compose(excl.data(), recv.data(), excl.data());  // excl <- excl after received
    if (2 * dist < P) compose(own.data(), excl.data(), incl.data());
  }
  // The scan starts from a zero state: the result is the composed offset.
  std::copy_n(excl.begin() + na, nb, out);
}

template void log_depth_scan(Host, Communicator&, const float*, const float*, const PairDims&, bool,
                             const std::string&, float*);
template void log_depth_scan(Host, Communicator&, const double*, const double*, const PairDims&,
                             bool, const std::string&, double*);

}  // namespace gdn
