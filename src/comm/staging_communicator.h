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
  StagingCommunicator(const StagingCommunicator&) = delete;
  StagingCommunicator& operator=(const StagingCommunicator&) = delete;

 protected:
  int do_rank() const override { return mpi_.rank(); }
  int do_size() const override { return mpi_.size(); }
  const char* backend_name() const override { return "StagingCommunicator"; }

  void do_all_gather(const void* send, void* recv, std::size_t bytes,
                     const std::string& site) override;
  // The blocks arrive packed in the pinned buffer and are copied out one by one (gaps on
  // the device are left untouched); in place needs nothing, as send is staged first.
  void do_all_gather_v(const void* send, std::size_t send_bytes, void* recv,
                       const std::vector<std::size_t>& recv_bytes,
                       const std::vector<std::size_t>& recv_offsets,
                       const std::string& site) override;
  void do_all_reduce(void* buf, std::size_t count, DType t, ReduceOp op,
                     const std::string& site) override;
  // In place is allowed: the input is staged to the host before anything is written.
  void do_reduce_scatter_sum(const void* send, void* recv, std::size_t count, DType t,
                             const std::string& site) override;
  // The blocks are packed into the pinned buffers (one copy per non-empty block each way),
  // so gaps between the receive blocks on the device are left untouched.
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
  void do_barrier() override { mpi_.barrier(); }
  std::unique_ptr<Communicator> do_split(int color, int key) override;
  [[noreturn]] void do_abort(int code) override { mpi_.abort(code); }

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
