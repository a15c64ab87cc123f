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

  int device() const { return device_; }

 protected:
  int do_rank() const override { return mpi_.rank(); }
  int do_size() const override { return mpi_.size(); }
  const char* backend_name() const override { return "NcclCommunicator"; }

  GDN_COMMUNICATOR_OPERATIONS;

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
