// The MPI backend. Apps create an MpiRuntime first, then an MpiCommunicator over
// MPI_COMM_WORLD (or a sub-communicator).
#pragma once

#include <mpi.h>

#include <cstddef>

#include "comm/communicator.h"

namespace gdn {

// RAII for MPI_Init_thread / MPI_Finalize. Initializes only if nobody has yet (tests init
// in their own main) and finalizes only what it initialized.
struct MpiRuntime {
  MpiRuntime() : MpiRuntime(nullptr, nullptr) {}
  MpiRuntime(int* argc, char*** argv);
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  bool initialized_here = false;
};

// Collective over comm: how many of its ranks run on this node (they share its memory).
int ranks_on_this_node(MPI_Comm comm);

// Wraps a duplicate of the given communicator. The duplicate (a) keeps our tags apart
// from any other traffic on the same ranks and (b) carries MPI_ERRORS_RETURN, so failed
// calls become gdn::Error (naming call, site and rank) instead of an immediate abort,
// without changing the error handler of the caller's communicator.
// Construction and destruction are collective over `comm`: every rank must do both.
class MpiCommunicator : public Communicator {
 public:
  explicit MpiCommunicator(MPI_Comm comm = MPI_COMM_WORLD);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  MPI_Comm comm() const { return comm_; }

  // MPI counts are int: larger messages go out in pieces of at most this many bytes.
  // Defaults to INT_MAX; tests lower it to exercise the chunked paths. All ranks must
  // use the same value.
  void set_max_message_bytes(std::size_t b);
  std::size_t max_message_bytes() const { return max_bytes_; }

 protected:
  int do_rank() const override { return rank_; }
  int do_size() const override { return size_; }
  const char* backend_name() const override { return "MpiCommunicator"; }

  // MPI_Allgather, in pieces when a block is over max_message_bytes(). In place is allowed.
  void do_all_gather(const void* send, void* recv, std::size_t bytes,
                     const std::string& site) override;
  // MPI_Allgatherv when the whole output fits in one int count (at most
  // max_message_bytes()), with MPI_IN_PLACE when in place. Displacements are ints too: a
  // rank whose layout puts a block past max_message_bytes() receives into a packed scratch
  // and copies the blocks out, the same collective as the other ranks make. A larger
  // output goes point-to-point as all_to_all does (in pieces, every received size
  // checked). Every rank must pass the same recv_bytes, as it decides the path.
  void do_all_gather_v(const void* send, std::size_t send_bytes, void* recv,
                       const std::vector<std::size_t>& recv_bytes,
                       const std::vector<std::size_t>& recv_offsets,
                       const std::string& site) override;
  // In place, in pieces of at most max_message_bytes().
  void do_all_reduce(void* buf, std::size_t count, DType t, ReduceOp op,
                     const std::string& site) override;
  // MPI_Reduce_scatter_block, in pieces when a block is over max_message_bytes(). In place
  // is allowed.
  void do_reduce_scatter_sum(const void* send, void* recv, std::size_t count, DType t,
                             const std::string& site) override;
  // Nonblocking MPI_BYTE messages per peer (not MPI_Alltoallv, whose int displacements
  // overflow past 2 GiB), at least one each way per pair, so a zero-byte side still pairs
  // up. Every received size is checked: a message shorter or longer than recv_bytes is an
  // error naming site, rank and peer. The block to self is a memmove.
  void do_all_to_all(const void* send, const std::vector<std::size_t>& send_bytes,
                     const std::vector<std::size_t>& send_offsets, void* recv,
                     const std::vector<std::size_t>& recv_bytes,
                     const std::vector<std::size_t>& recv_offsets,
                     const std::string& site) override;
  // dest in [0, size()).
  void do_send(const void* buf, std::size_t bytes, int dest, int tag,
               const std::string& site) override;
  // The matching send must carry exactly `bytes` bytes.
  void do_recv(void* buf, std::size_t bytes, int src, int tag, const std::string& site) override;
  // dest/src may be -1 (MPI_PROC_NULL).
  void do_send_recv(const void* send_buf, std::size_t send_bytes, int dest, void* recv_buf,
                    std::size_t recv_bytes, int src, int tag, const std::string& site) override;
  void do_barrier() override;
  std::unique_ptr<Communicator> do_split(int color, int key) override;
  [[noreturn]] void do_abort(int code) override;

 private:
  void check(int rc, const char* call, const std::string& site) const;
  // do_all_to_all's exchange, for all_to_all and the large all_gather_v; `call` names it
  // in error messages.
  void exchange(const void* send, const std::vector<std::size_t>& send_bytes,
                const std::vector<std::size_t>& send_offsets, void* recv,
                const std::vector<std::size_t>& recv_bytes,
                const std::vector<std::size_t>& recv_offsets, const std::string& site,
                const char* call);
  void check_peer(int peer, bool allow_none, const char* what, const char* call,
                  const std::string& site) const;

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  int tag_ub_ = 32767;  // the MPI standard's guaranteed minimum; replaced by MPI_TAG_UB
  std::size_t max_bytes_;
};

}  // namespace gdn
