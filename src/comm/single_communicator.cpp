#include "comm/single_communicator.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace gdn {

// Copies send into recv (the only block) unless in place.
void SingleCommunicator::do_all_gather(const void* send, void* recv, std::size_t bytes,
                                       const std::string&) {
  // memmove: callers may gather in place (send pointing into recv).
  if (bytes > 0 && send != recv) std::memmove(recv, send, bytes);
}

// Copies send to recv + recv_offsets[0] (the only block) unless in place.
void SingleCommunicator::do_all_gather_v(const void* send, std::size_t send_bytes, void* recv,
                                         const std::vector<std::size_t>&,
                                         const std::vector<std::size_t>& recv_offsets,
                                         const std::string&) {
  // The pointer is formed only for a non-empty block: an empty one may come with a null buffer.
  if (send_bytes > 0) {
    char* to = static_cast<char*>(recv) + recv_offsets[0];
    if (send != to) std::memmove(to, send, send_bytes);
  }
}

// A no-op on the data (one rank's sum or max is itself).
void SingleCommunicator::do_all_reduce(void*, std::size_t, DType, ReduceOp, const std::string&) {}

// Copies block 0 (the only one) into recv unless in place.
void SingleCommunicator::do_reduce_scatter_sum(const void* send, void* recv, std::size_t count,
                                               DType t, const std::string&) {
  const std::size_t bytes = count * dtype_size(t);
  if (bytes > 0 && send != recv) std::memmove(recv, send, bytes);
}

// The one block is the block to self: a copy.
void SingleCommunicator::do_all_to_all(const void* send, const std::vector<std::size_t>& send_bytes,
                                       const std::vector<std::size_t>& send_offsets, void* recv,
                                       const std::vector<std::size_t>&,
                                       const std::vector<std::size_t>& recv_offsets,
                                       const std::string&) {
  // Pointers are formed only for a non-empty block: an empty one may come with a null buffer.
  if (send_bytes[0] > 0) {
    const char* from = static_cast<const char*>(send) + send_offsets[0];
    char* to = static_cast<char*>(recv) + recv_offsets[0];
    if (from != to) std::memmove(to, from, send_bytes[0]);
  }
}

// There is no other rank to talk to, so any send/recv is a logic error: always throws.
void SingleCommunicator::do_send(const void*, std::size_t bytes, int dest, int tag,
                                 const std::string& site) {
  throw_error("SingleCommunicator::send at site '", site, "': dest = ", dest, ", tag = ", tag, ", ",
              bytes, " bytes, but there is only one rank (p2p needs size() > 1)");
}

void SingleCommunicator::do_recv(void*, std::size_t bytes, int src, int tag,
                                 const std::string& site) {
  throw_error("SingleCommunicator::recv at site '", site, "': src = ", src, ", tag = ", tag, ", ",
              bytes, " bytes, but there is only one rank (p2p needs size() > 1)");
}

// dest = src = -1: no-op. dest = src = 0 with equal sizes: a copy, as MPI_Sendrecv to
// self would do. Anything else throws.
void SingleCommunicator::do_send_recv(const void* send_buf, std::size_t send_bytes, int dest,
                                      void* recv_buf, std::size_t recv_bytes, int src, int tag,
                                      const std::string& site) {
  if (dest == -1 && src == -1) return;
  // A ring shift over one rank sends to itself; that is well defined if sizes agree.
  GDN_CHECK(dest == 0 && src == 0, "SingleCommunicator::send_recv at site '", site,
            "': dest = ", dest, ", src = ", src, ", tag = ", tag,
            "; with one rank expected both -1 (no exchange) or both 0 (self exchange)");
  GDN_CHECK(send_bytes == recv_bytes, "SingleCommunicator::send_recv at site '", site,
            "': self exchange of ", send_bytes, " bytes into a ", recv_bytes,
            "-byte buffer; expected equal sizes");
  if (send_bytes > 0 && send_buf != recv_buf) std::memmove(recv_buf, send_buf, send_bytes);
}

std::unique_ptr<Communicator> SingleCommunicator::do_split(int, int) {
  return std::make_unique<SingleCommunicator>();
}

// Flushes stdio and exits with code without unwinding, like MPI_Abort.
void SingleCommunicator::do_abort(int code) {
  std::fflush(nullptr);
  std::_Exit(code);
}

void SingleCommunicator::do_barrier() {}

}  // namespace gdn
