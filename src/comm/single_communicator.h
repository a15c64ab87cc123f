// The one-rank backend: rank 0 of 1. Lets serial tools and tests drive CP code without MPI;
// its byte counts (the front's, comm/communicator.h) are what MpiCommunicator counts with
// one rank, so payload assertions written against it carry over.
#pragma once

#include "comm/communicator.h"

namespace gdn {

class SingleCommunicator : public Communicator {
 protected:
  int do_rank() const override { return 0; }
  int do_size() const override { return 1; }
  const char* backend_name() const override { return "SingleCommunicator"; }

  // Copies send into recv (the only block) unless in place.
  void do_all_gather(const void* send, void* recv, std::size_t bytes,
                     const std::string& site) override;
  // Copies send to recv + recv_offsets[0] (the only block) unless in place.
  void do_all_gather_v(const void* send, std::size_t send_bytes, void* recv,
                       const std::vector<std::size_t>& recv_bytes,
                       const std::vector<std::size_t>& recv_offsets,
                       const std::string& site) override;
  // A no-op on the data (one rank's sum or max is itself).
  void do_all_reduce(void* buf, std::size_t count, DType t, ReduceOp op,
                     const std::string& site) override;
  // Copies block 0 (the only one) into recv unless in place.
  void do_reduce_scatter_sum(const void* send, void* recv, std::size_t count, DType t,
                             const std::string& site) override;
  // The one block is the block to self: a copy.
  void do_all_to_all(const void* send, const std::vector<std::size_t>& send_bytes,
                     const std::vector<std::size_t>& send_offsets, void* recv,
                     const std::vector<std::size_t>& recv_bytes,
                     const std::vector<std::size_t>& recv_offsets,
                     const std::string& site) override;
  // There is no other rank to talk to, so any send/recv is a logic error: always throws.
  void do_send(const void* buf, std::size_t bytes, int dest, int tag,
               const std::string& site) override;
  void do_recv(void* buf, std::size_t bytes, int src, int tag, const std::string& site) override;
  // dest = src = -1: no-op. dest = src = 0 with equal sizes: a copy, as MPI_Sendrecv to
  // self would do. Anything else throws.
  void do_send_recv(const void* send_buf, std::size_t send_bytes, int dest, void* recv_buf,
                    std::size_t recv_bytes, int src, int tag, const std::string& site) override;
  void do_barrier() override {}
  std::unique_ptr<Communicator> do_split(int color, int key) override;
  // Flushes stdio and exits with code without unwinding, like MPI_Abort.
  [[noreturn]] void do_abort(int code) override;
};

}  // namespace gdn
