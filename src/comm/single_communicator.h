// The one-rank backend: rank 0 of 1. Lets serial tools and tests drive CP code without MPI;
// it counts bytes exactly as MpiCommunicator would with one rank, so payload assertions
// written against it carry over.
#pragma once

#include "comm/communicator.h"

namespace gdn {

class SingleCommunicator : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }

  // Copies send into recv (the only block). Counts sent = bytes, received = bytes.
  void all_gather(const void* send, void* recv, std::size_t bytes,
                  const std::string& site) override;
  // No-ops on the data (one rank's sum/max is itself); counts count * dtype_size both ways.
  void all_reduce_sum(void* buf, std::size_t count, DType t, const std::string& site) override;
  void all_reduce_max(void* buf, std::size_t count, DType t, const std::string& site) override;
  // Copies block 0 (the only one) into recv unless in place; counts count * dtype_size both
  // ways, as MpiCommunicator does with one rank.
  void reduce_scatter_sum(const void* send, void* recv, std::size_t count, DType t,
                          const std::string& site) override;
  // The one block is the block to self: a copy (sizes checked equal), counted as 0 bytes
  // both ways, as MpiCommunicator counts the block to self.
  void all_to_all(const void* send, const std::vector<std::size_t>& send_bytes,
                  const std::vector<std::size_t>& send_offsets, void* recv,
                  const std::vector<std::size_t>& recv_bytes,
                  const std::vector<std::size_t>& recv_offsets, const std::string& site) override;
  // There is no other rank to talk to, so any send/recv is a logic error: always throws.
  void send(const void* buf, std::size_t bytes, int dest, int tag,
            const std::string& site) override;
  void recv(void* buf, std::size_t bytes, int src, int tag, const std::string& site) override;
  // dest = src = -1: no-op (counted as a call with 0 bytes). dest = src = 0 with equal sizes:
  // a copy, as MPI_Sendrecv to self would do. Anything else throws.
  void send_recv(const void* send_buf, std::size_t send_bytes, int dest, void* recv_buf,
                 std::size_t recv_bytes, int src, int tag, const std::string& site) override;
  void barrier() override {}
  std::unique_ptr<Communicator> split(int color, int key) override;
  // Flushes stdio and exits with code without unwinding, like MPI_Abort.
  [[noreturn]] void abort(int code) override;

  using Communicator::all_reduce_max;
  using Communicator::all_reduce_sum;
  using Communicator::reduce_scatter_sum;
};

}  // namespace gdn
