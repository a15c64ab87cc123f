#include "train/state_gather.h"

#include <algorithm>

#include "core/error.h"

namespace gdn {

template <typename T>
std::vector<std::vector<T>> gather_runs(Communicator& comm, const std::vector<GlobalRun>& runs,
                                        const std::vector<const T*>& sources, std::int64_t total,
                                        const char* site) {
  constexpr int kTag = 31;
  std::vector<std::vector<T>> out(sources.size());
  if (comm.rank() != 0) {
    // The runs' table, then each source's runs packed in that order.
    std::int64_t count = std::int64_t(runs.size()), n = 0;
    comm.send(&count, sizeof count, 0, kTag, site);
    comm.send(runs.data(), runs.size() * sizeof(GlobalRun), 0, kTag, site);
    for (const GlobalRun& r : runs) n += r.n;
    std::vector<T> packed(static_cast<std::size_t>(n));
    for (const T* src : sources) {
      std::int64_t at = 0;
      for (const GlobalRun& r : runs) std::copy_n(src + r.at, r.n, packed.begin() + at), at += r.n;
      comm.send(packed.data(), packed.size() * sizeof(T), 0, kTag, site);
    }
    return out;
  }
  for (std::size_t k = 0; k < sources.size(); ++k) {
    out[k].assign(static_cast<std::size_t>(total), T(0));
    for (const GlobalRun& r : runs) std::copy_n(sources[k] + r.at, r.n, out[k].begin() + r.global);
  }
  for (int w = 1; w < comm.size(); ++w) {
    std::int64_t count = 0, n = 0;
    comm.recv(&count, sizeof count, w, kTag, site);
    std::vector<GlobalRun> theirs(static_cast<std::size_t>(count));
    comm.recv(theirs.data(), theirs.size() * sizeof(GlobalRun), w, kTag, site);
    for (const GlobalRun& r : theirs) {
      GDN_CHECK(r.n >= 0 && r.global >= 0 && r.global + r.n <= total, "rank ", w, " sent the run [",
                r.global, ", ", r.global + r.n, ") of a state of ", total, " elements");
      n += r.n;
    }
    std::vector<T> packed(static_cast<std::size_t>(n));
    for (std::size_t k = 0; k < sources.size(); ++k) {
      comm.recv(packed.data(), packed.size() * sizeof(T), w, kTag, site);
      std::int64_t at = 0;
      for (const GlobalRun& r : theirs)
        std::copy_n(packed.begin() + at, r.n, out[k].begin() + r.global), at += r.n;
    }
  }
  return out;
}

template std::vector<std::vector<float>> gather_runs(Communicator&, const std::vector<GlobalRun>&,
                                                     const std::vector<const float*>&, std::int64_t,
                                                     const char*);
template std::vector<std::vector<double>> gather_runs(Communicator&, const std::vector<GlobalRun>&,
                                                      const std::vector<const double*>&,
                                                      std::int64_t, const char*);

}  // namespace gdn
