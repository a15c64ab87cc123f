// The fallback when ranks share a GPU: the MPI backend over DEVICE buffers, staged
// through pinned host memory. NCCL refuses two ranks on one device, so this is what lets
// CP be checked on a one-GPU machine (cp = 2 on one H200). Slower than NCCL: every call
// copies device -> host -> MPI -> host -> device. Part of the CUDA build only.
#pragma once

#include <mpi.h>

#include <cstddef>

#include "comm/communicator.h"
#include "comm/mpi_communicator.h"

namespace gdn {

// Same calls, semantics and byte counters as MpiCommunicator (the front counts both
// alike); only the buffers live on the GPU.
// Copies use cudaMemcpy (legacy default stream), so device work on the default stream is
// ordered before them; work on other streams must be synchronized by the caller. Results
// are on the device when a call returns. Construction and destruction are collective.
class StagingCommunicator : public Communicator {
 public:
  explicit StagingCommunicator(MPI_Comm comm = MPI_COMM_WORLD);
  ~StagingCommunicator() override;

 protected:
  int do_rank() const override { return mpi_.rank(); }
  int do_size() const override { return mpi_.size(); }
  const char* backend_name() const override { return "StagingCommunicator"; }

  GDN_COMMUNICATOR_OPERATIONS;

 private:
  // A pinned host buffer that only grows (pinned allocation is slow; reuse it).
  struct Pinned {
    void* p = nullptr;
    std::size_t cap = 0;
    char* get(std::size_t bytes, const std::string& site);
    ~Pinned();
  };

  // The host-side calls go through its front, so it counts them too (unread).
  MpiCommunicator mpi_;
  Pinned send_host_, recv_host_;
};

}  // namespace gdn
