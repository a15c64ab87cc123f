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

  GDN_COMMUNICATOR_OPERATIONS;

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
