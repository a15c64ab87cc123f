#include "comm/communicator.h"

#include <cstdlib>

#include "core/error.h"
#include "core/profile.h"

namespace gdn {

const CommCounter& Communicator::counter(const std::string& site) const {
  // A site that never communicated moved zero bytes; a shared zero avoids inserting into
  // the map from a const method and keeps lookups of typos harmless.
  static const CommCounter kZero{};
  auto it = counters_.find(site);
  return it == counters_.end() ? kZero : it->second;
}

void Communicator::count(const std::string& site, std::size_t sent, std::size_t received) {
  auto& c = counters_[site];
  c.calls += 1;
  c.bytes_sent += static_cast<std::int64_t>(sent);
  c.bytes_received += static_cast<std::int64_t>(received);
}

void Communicator::all_gather(const void* send, void* recv, std::size_t bytes,
                              const std::string& site) {
  const profile::Scope scope("comm.", site);
  do_all_gather(send, recv, bytes, site);
  count(site, bytes, bytes * static_cast<std::size_t>(size()));
}

void Communicator::all_gather_v(const void* send, std::size_t send_bytes, void* recv,
                                const std::vector<std::size_t>& recv_bytes,
                                const std::vector<std::size_t>& recv_offsets,
                                const std::string& site) {
  const profile::Scope scope("comm.", site);
  check_all_gather_v(send_bytes, recv_bytes, recv_offsets, site);
  do_all_gather_v(send, send_bytes, recv, recv_bytes, recv_offsets, site);
  std::size_t received = 0;  // the whole output, this rank's own block included
  for (std::size_t b : recv_bytes) received += b;
  count(site, send_bytes, received);
}

void Communicator::all_reduce_sum(void* buf, std::size_t count_, DType t, const std::string& site) {
  all_reduce(buf, count_, t, ReduceOp::sum, site);
}

void Communicator::all_reduce_max(void* buf, std::size_t count_, DType t, const std::string& site) {
  all_reduce(buf, count_, t, ReduceOp::max, site);
}

void Communicator::all_reduce(void* buf, std::size_t count_, DType t, ReduceOp op,
                              const std::string& site) {
  const profile::Scope scope("comm.", site);
  do_all_reduce(buf, count_, t, op, site);
  count(site, count_ * dtype_size(t), count_ * dtype_size(t));
}

void Communicator::reduce_scatter_sum(const void* send, void* recv, std::size_t count_, DType t,
                                      const std::string& site) {
  const profile::Scope scope("comm.", site);
  do_reduce_scatter_sum(send, recv, count_, t, site);
  const std::size_t block = count_ * dtype_size(t);
  count(site, block * static_cast<std::size_t>(size()), block);
}

void Communicator::all_to_all(const void* send, const std::vector<std::size_t>& send_bytes,
                              const std::vector<std::size_t>& send_offsets, void* recv,
                              const std::vector<std::size_t>& recv_bytes,
                              const std::vector<std::size_t>& recv_offsets,
                              const std::string& site) {
  const profile::Scope scope("comm.", site);
  check_all_to_all(send_bytes, send_offsets, recv_bytes, recv_offsets, site);
  do_all_to_all(send, send_bytes, send_offsets, recv, recv_bytes, recv_offsets, site);
  std::size_t sent = 0, received = 0;
  for (int q = 0, r = rank(), n = size(); q < n; ++q)
    if (q != r) {
      sent += send_bytes[q];
      received += recv_bytes[q];
    }
  count(site, sent, received);
}

void Communicator::send(const void* buf, std::size_t bytes, int dest, int tag,
                        const std::string& site) {
  const profile::Scope scope("comm.", site);
  do_send(buf, bytes, dest, tag, site);
  count(site, bytes, 0);
}

void Communicator::recv(void* buf, std::size_t bytes, int src, int tag, const std::string& site) {
  const profile::Scope scope("comm.", site);
  do_recv(buf, bytes, src, tag, site);
  count(site, 0, bytes);
}

void Communicator::send_recv(const void* send_buf, std::size_t send_bytes, int dest, void* recv_buf,
                             std::size_t recv_bytes, int src, int tag, const std::string& site) {
  const profile::Scope scope("comm.", site);
  // A side with no peer moves nothing: backends never see its size (nor touch its buffer).
  const std::size_t sb = dest == -1 ? 0 : send_bytes;
  const std::size_t rb = src == -1 ? 0 : recv_bytes;
  do_send_recv(send_buf, sb, dest, recv_buf, rb, src, tag, site);
  count(site, sb, rb);
}

void Communicator::abort(int code) {
  do_abort(code);
  std::_Exit(code);  // do_abort does not return; the compiler cannot see that through virtual
}

void Communicator::check_one_per_rank(const char* call, std::initializer_list<PerRank> args,
                                      const std::string& site) const {
  const std::size_t n = static_cast<std::size_t>(size());
  for (const auto& [v, name] : args)
    if (v->size() != n)
      throw_error(backend_name(), "::", call, " at site '", site, "' on rank ", rank(), ": ", name,
                  " has ", v->size(), " entries, expected size() = ", n, " (one per rank)");
}

void Communicator::check_all_to_all(const std::vector<std::size_t>& send_bytes,
                                    const std::vector<std::size_t>& send_offsets,
                                    const std::vector<std::size_t>& recv_bytes,
                                    const std::vector<std::size_t>& recv_offsets,
                                    const std::string& site) const {
  check_one_per_rank("all_to_all",
                     {{&send_bytes, "send_bytes"},
                      {&send_offsets, "send_offsets"},
                      {&recv_bytes, "recv_bytes"},
                      {&recv_offsets, "recv_offsets"}},
                     site);
  // Both sides of the block to self are known here, so a disagreement is checkable on
  // every backend (unlike a peer's, which only MPI sees arrive).
  const int r = rank();
  if (send_bytes[r] != recv_bytes[r])
    throw_error(backend_name(), "::all_to_all at site '", site, "' on rank ", r,
                ": the block to self (peer ", r, ") has send_bytes = ", send_bytes[r],
                " but recv_bytes = ", recv_bytes[r], "; expected equal sizes");
}

void Communicator::check_all_gather_v(std::size_t send_bytes,
                                      const std::vector<std::size_t>& recv_bytes,
                                      const std::vector<std::size_t>& recv_offsets,
                                      const std::string& site) const {
  check_one_per_rank("all_gather_v", {{&recv_bytes, "recv_bytes"}, {&recv_offsets, "recv_offsets"}},
                     site);
  const int r = rank();
  if (send_bytes != recv_bytes[r])
    throw_error(backend_name(), "::all_gather_v at site '", site, "' on rank ", r,
                ": send_bytes = ", send_bytes, " but recv_bytes[", r, "] = ", recv_bytes[r],
                "; expected equal sizes (send is this rank's own block)");
}

}  // namespace gdn
