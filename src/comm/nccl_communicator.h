// The NCCL backend: collectives and point-to-point over DEVICE buffers, one GPU per rank.
// Bootstrapped through MPI (rank 0 makes the unique id, MPI broadcasts it). Part of the
// CUDA build only. NCCL refuses two ranks on one GPU: see make_device_communicator for
// the choice between this and StagingCommunicator.
#pragma once

#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <cstddef>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/mpi_communicator.h"

namespace gdn {

// Every call enqueues on the communicator's own stream and synchronizes it before
// returning, so results are ready and buffers reusable when a call returns, exactly as
// with MpiCommunicator. Simple and safe for now; overlapping communication with compute
// (taking the caller's stream, returning before completion) is a later optimization.
//
// Buffers must be ready when a call is made: the stream is a blocking one, so work on the
// legacy default stream is ordered before it, but work on other streams must have been
// synchronized by the caller.
//
// Differences from MpiCommunicator: NCCL has no tags (messages between two ranks match in
// issue order; tags are validated and otherwise ignored) and cannot detect a size mismatch
// between a send and its receive, so both sides must agree on the byte count.
//
// Construction and destruction are collective over `comm`.
class NcclCommunicator : public Communicator {
 public:
  // device: the CUDA device this rank drives (from choose_gpu); made current here.
  NcclCommunicator(MPI_Comm comm, int device);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int device() const { return device_; }

 protected:
  int do_rank() const override { return mpi_.rank(); }
  int do_size() const override { return mpi_.size(); }
  const char* backend_name() const override { return "NcclCommunicator"; }

  // NCCL handles in place itself (send == recv + rank * bytes).
  void do_all_gather(const void* send, void* recv, std::size_t bytes,
                     const std::string& site) override;
  // NCCL has no all-gather of uneven blocks: one group of ncclSend (this rank's block to
  // every peer) and ncclRecv (every peer's non-empty block), as do_all_to_all; the block to
  // self is a cudaMemcpyAsync on the stream unless in place.
  void do_all_gather_v(const void* send, std::size_t send_bytes, void* recv,
                       const std::vector<std::size_t>& recv_bytes,
                       const std::vector<std::size_t>& recv_offsets,
                       const std::string& site) override;
  void do_all_reduce(void* buf, std::size_t count, DType t, ReduceOp op,
                     const std::string& site) override;
  // ncclReduceScatter, which handles in place (recv == send + rank * count) itself.
  void do_reduce_scatter_sum(const void* send, void* recv, std::size_t count, DType t,
                             const std::string& site) override;
  // One group of ncclSend/ncclRecv, one pair per peer with a non-empty block (a zero on one
  // side must be a zero on the other: NCCL cannot see a mismatch); the block to self is a
  // cudaMemcpyAsync on the stream.
  void do_all_to_all(const void* send, const std::vector<std::size_t>& send_bytes,
                     const std::vector<std::size_t>& send_offsets, void* recv,
                     const std::vector<std::size_t>& recv_bytes,
                     const std::vector<std::size_t>& recv_offsets,
                     const std::string& site) override;
  void do_send(const void* buf, std::size_t bytes, int dest, int tag,
               const std::string& site) override;
  void do_recv(void* buf, std::size_t bytes, int src, int tag, const std::string& site) override;
  void do_send_recv(const void* send_buf, std::size_t send_bytes, int dest, void* recv_buf,
                    std::size_t recv_bytes, int src, int tag, const std::string& site) override;
  void do_barrier() override;
  // MPI_Comm_split of the MPI communicator, then a fresh NCCL bootstrap on the same device.
  std::unique_ptr<Communicator> do_split(int color, int key) override;
  // ncclCommAbort (so peers' kernels do not wait forever on this rank), then MPI_Abort.
  [[noreturn]] void do_abort(int code) override;

 private:
  // Waits for the stream; throws if CUDA or NCCL (a dead peer, a network error) failed.
  void wait(const std::string& site);
  // Frees the stream and scratch buffer (not the NCCL comm); safe to call twice.
  void release();
  void check_peer(int peer, bool allow_none, const char* what, const std::string& site) const;
  void check_tag(int tag, const std::string& site) const;
  // do_send (sending: send to peer) and do_recv (recv from peer): one ncclSend or ncclRecv
  // of bytes, none when zero, then the wait.
  void point_to_point(bool sending, const void* send, void* recv, std::size_t bytes, int peer,
                      int tag, const std::string& site);
  using Sizes = std::vector<std::size_t>;  // one entry per rank
  // One group of ncclSend / ncclRecv with every peer (not self), nearest first: block q of
  // send to peer q, peer q's block into recv at recv_offsets[q]; a zero-byte block is
  // skipped (both sides must agree: NCCL cannot see a mismatch). Posts on the stream and
  // does not wait; false when no peer block was non-empty (nothing posted).
  bool exchange_with_peers(const char* send, const Sizes& send_bytes, const Sizes& send_offsets,
                           char* recv, const Sizes& recv_bytes, const Sizes& recv_offsets,
                           const std::string& site);

  MpiCommunicator mpi_;  // a duplicate with MPI_ERRORS_RETURN: bootstrap, split, abort
  int device_ = -1;
  cudaStream_t stream_ = nullptr;
  ncclComm_t comm_ = nullptr;
  int* scratch_ = nullptr;  // one device int for barrier()
};

}  // namespace gdn
