#include "comm/nccl_communicator.h"

#include <cstdio>
#include <exception>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/error.h"
#include "runtime/cuda_check.h"

namespace gdn {

namespace {

ncclDataType_t nccl_type(DType t) {
  return per_dtype(t, ncclFloat32, ncclFloat64, ncclInt32, ncclInt64, ncclBfloat16);
}

void check_mpi(int rc, const char* call, int rank) {
  if (rc == MPI_SUCCESS) return;
  char buf[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, buf, &len);
  throw_error(call, " failed in NcclCommunicator on rank ", rank, ": ", std::string(buf, len),
              " (error code ", rc, ")");
}

}  // namespace

NcclCommunicator::NcclCommunicator(MPI_Comm comm, int device) : mpi_(comm), device_(device) {
  // Local setup, then agree on success before the broadcast and ncclCommInitRank: a rank
  // that threw here alone would leave the others waiting in those forever.
  std::exception_ptr err;
  ncclUniqueId id{};
  try {
    GDN_CHECK(device >= 0, "NcclCommunicator: device = ", device, ", expected >= 0");
    GDN_CUDA_CHECK(cudaSetDevice(device_));
    GDN_CUDA_CHECK(cudaStreamCreate(&stream_));
    GDN_CUDA_CHECK(cudaMalloc(&scratch_, sizeof(int)));
    if (rank() == 0) GDN_NCCL_CHECK(ncclGetUniqueId(&id));
  } catch (...) {
    err = std::current_exception();
  }
  int failed = err ? 1 : 0, any_failed = 0;
  check_mpi(MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, mpi_.comm()), "MPI_Allreduce",
            rank());
  if (any_failed) {
    release();
    if (err) std::rethrow_exception(err);
    throw_error("NcclCommunicator: setup failed on another rank (rank ", rank(), " is fine)");
  }
  try {
    check_mpi(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, mpi_.comm()), "MPI_Bcast", rank());
    GDN_NCCL_CHECK(ncclCommInitRank(&comm_, size(), id, rank()));
  } catch (...) {
    release();
    throw;
  }
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_ != nullptr) {
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm_, &async);
    // A clean finalize waits for the peers; after an error, or while an exception unwinds
    // the stack, they may never come, so abort (local, never blocks) instead.
    if (async != ncclSuccess || std::uncaught_exceptions() > 0) {
      ncclCommAbort(comm_);
    } else {
      ncclCommFinalize(comm_);
      ncclCommDestroy(comm_);
    }
    comm_ = nullptr;
  }
  release();
}

void NcclCommunicator::release() {
  // Errors are ignored: this runs in destructors and on failure paths.
  if (scratch_ != nullptr) cudaFree(scratch_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
  scratch_ = nullptr;
  stream_ = nullptr;
}

void NcclCommunicator::wait(const std::string& site) {
  // Poll instead of cudaStreamSynchronize: if a peer dies, NCCL kernels never finish and
  // a plain synchronize would hang; the async error check turns that into an exception.
  for (;;) {
    const cudaError_t e = cudaStreamQuery(stream_);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady)
      detail::throw_gpu_error("cudaStreamQuery(stream_)", detail::cuda_error_text(e), __FILE__,
                              __LINE__, site);
    ncclResult_t async = ncclSuccess;
    GDN_NCCL_CHECK_AT(ncclCommGetAsyncError(comm_, &async), site);
    if (async != ncclSuccess)
      detail::throw_gpu_error("NCCL operation (asynchronous error)", detail::nccl_error_text(async),
                              __FILE__, __LINE__, site);
    std::this_thread::yield();
  }
}

void NcclCommunicator::check_peer(int peer, bool allow_none, const char* what,
                                  const std::string& site) const {
  if (allow_none && peer == -1) return;
  if (peer < 0 || peer >= size())
    throw_error("NcclCommunicator at site '", site, "' on rank ", rank(), ": ", what, " = ", peer,
                ", expected 0 .. ", size() - 1, allow_none ? " or -1 (none)" : "");
}

void NcclCommunicator::check_tag(int tag, const std::string& site) const {
  GDN_CHECK(tag >= 0, "NcclCommunicator at site '", site, "' on rank ", rank(), ": tag = ", tag,
            ", expected >= 0");
}

// NCCL handles in place itself (send == recv + rank * bytes).
void NcclCommunicator::do_all_gather(const void* send, void* recv, std::size_t bytes,
                                     const std::string& site) {
  // NCCL handles the in-place case (send == recv + rank * bytes) itself. Zero bytes is
  // skipped on every rank alike (all ranks pass the same size).
  if (bytes > 0) {
    GDN_NCCL_CHECK_AT(ncclAllGather(send, recv, bytes, ncclUint8, comm_, stream_), site);
    wait(site);
  }
}

// NCCL has no all-gather of uneven blocks: one group of ncclSend (this rank's block to
// every peer) and ncclRecv (every peer's non-empty block), as do_all_to_all; the block to
// self is a cudaMemcpyAsync on the stream unless in place.
void NcclCommunicator::do_all_gather_v(const void* send, std::size_t send_bytes, void* recv,
                                       const std::vector<std::size_t>& recv_bytes,
                                       const std::vector<std::size_t>& recv_offsets,
                                       const std::string& site) {
  const int r = rank(), n = size();
  char* rp = static_cast<char*>(recv);
  // The block to self, ordered before the group on the stream; in place it is already there.
  const bool self = send_bytes > 0 && send != rp + recv_offsets[r];
  if (self)
    GDN_CUDA_CHECK_AT(
        cudaMemcpyAsync(rp + recv_offsets[r], send, send_bytes, cudaMemcpyDeviceToDevice, stream_),
        site);
  // This rank's one block goes to every peer. Every rank passes the same recv_bytes, so a
  // send of it pairs with each peer's receive, and a zero-byte block is skipped on both
  // sides alike.
  const Sizes to_each(n, send_bytes), at_start(n, 0);
  const bool peers = exchange_with_peers(static_cast<const char*>(send), to_each, at_start, rp,
                                         recv_bytes, recv_offsets, site);
  if (self || peers) wait(site);
}

void NcclCommunicator::do_all_reduce(void* buf, std::size_t n, DType t, ReduceOp reduce,
                                     const std::string& site) {
  const ncclRedOp_t op = reduce == ReduceOp::sum ? ncclSum : ncclMax;
  if (n > 0) {
    GDN_NCCL_CHECK_AT(ncclAllReduce(buf, buf, n, nccl_type(t), op, comm_, stream_), site);
    wait(site);
  }
}

// ncclReduceScatter, which handles in place (recv == send + rank * count) itself.
void NcclCommunicator::do_reduce_scatter_sum(const void* send, void* recv, std::size_t n, DType t,
                                             const std::string& site) {
  // Zero elements is skipped on every rank alike (all ranks pass the same count).
  if (n > 0) {
    GDN_NCCL_CHECK_AT(ncclReduceScatter(send, recv, n, nccl_type(t), ncclSum, comm_, stream_),
                      site);
    wait(site);
  }
}

// One group of ncclSend/ncclRecv, one pair per peer with a non-empty block (a zero on one
// side must be a zero on the other: NCCL cannot see a mismatch); the block to self is a
// cudaMemcpyAsync on the stream.
void NcclCommunicator::do_all_to_all(const void* send, const std::vector<std::size_t>& send_bytes,
                                     const std::vector<std::size_t>& send_offsets, void* recv,
                                     const std::vector<std::size_t>& recv_bytes,
                                     const std::vector<std::size_t>& recv_offsets,
                                     const std::string& site) {
  const int r = rank();
  const char* sp = static_cast<const char*>(send);
  char* rp = static_cast<char*>(recv);
  const bool self = send_bytes[r] > 0;
  if (self)  // the block to self, ordered before the group on the stream
    GDN_CUDA_CHECK_AT(cudaMemcpyAsync(rp + recv_offsets[r], sp + send_offsets[r], send_bytes[r],
                                      cudaMemcpyDeviceToDevice, stream_),
                      site);
  const bool peers =
      exchange_with_peers(sp, send_bytes, send_offsets, rp, recv_bytes, recv_offsets, site);
  if (self || peers) wait(site);
}

bool NcclCommunicator::exchange_with_peers(const char* send, const Sizes& send_bytes,
                                           const Sizes& send_offsets, char* recv,
                                           const Sizes& recv_bytes, const Sizes& recv_offsets,
                                           const std::string& site) {
  const int r = rank(), n = size();
  bool peers = false;
  for (int q = 0; q < n; ++q)
    if (q != r) peers = peers || send_bytes[q] > 0 || recv_bytes[q] > 0;
  if (!peers) return false;
  // One group: NCCL posts every send and receive together, so no order can deadlock.
  GDN_NCCL_CHECK_AT(ncclGroupStart(), site);
  ncclResult_t res = ncclSuccess;
  const char* call = "";
  int bad = -1;
  for (int d = 1; d < n && res == ncclSuccess; ++d) {
    const int to = (r + d) % n, from = (r + n - d) % n;
    if (send_bytes[to] > 0) {
      res = ncclSend(send + send_offsets[to], send_bytes[to], ncclUint8, to, comm_, stream_);
      call = "ncclSend";
      bad = to;
    }
    if (res == ncclSuccess && recv_bytes[from] > 0) {
      res = ncclRecv(recv + recv_offsets[from], recv_bytes[from], ncclUint8, from, comm_, stream_);
      call = "ncclRecv";
      bad = from;
    }
  }
  // Close the group even when a call failed, or NCCL stays in group mode for good.
  const ncclResult_t re = ncclGroupEnd();
  if (res != ncclSuccess)
    detail::throw_gpu_error(
        call, detail::nccl_error_text(res) + " (peer rank " + std::to_string(bad) + ")", __FILE__,
        __LINE__, site);
  if (re != ncclSuccess)
    detail::throw_gpu_error("ncclGroupEnd", detail::nccl_error_text(re), __FILE__, __LINE__, site);
  return true;
}

void NcclCommunicator::do_send(const void* buf, std::size_t bytes, int dest, int tag,
                               const std::string& site) {
  point_to_point(true, buf, nullptr, bytes, dest, tag, site);
}

void NcclCommunicator::do_recv(void* buf, std::size_t bytes, int src, int tag,
                               const std::string& site) {
  point_to_point(false, nullptr, buf, bytes, src, tag, site);
}

void NcclCommunicator::point_to_point(bool sending, const void* send, void* recv, std::size_t bytes,
                                      int peer, int tag, const std::string& site) {
  check_peer(peer, false, sending ? "dest" : "src", site);
  check_tag(tag, site);
  if (bytes == 0) return;
  if (sending) {
    GDN_NCCL_CHECK_AT(ncclSend(send, bytes, ncclUint8, peer, comm_, stream_), site);
  } else {
    GDN_NCCL_CHECK_AT(ncclRecv(recv, bytes, ncclUint8, peer, comm_, stream_), site);
  }
  wait(site);
}

void NcclCommunicator::do_send_recv(const void* send_buf, std::size_t send_bytes, int dest,
                                    void* recv_buf, std::size_t recv_bytes, int src, int tag,
                                    const std::string& site) {
  check_peer(dest, true, "dest", site);
  check_peer(src, true, "src", site);
  check_tag(tag, site);
  // The front passes 0 bytes for a side with peer -1.
  const std::size_t sb = send_bytes, rb = recv_bytes;
  if (sb > 0 || rb > 0) {
    // One group: NCCL posts both sides together, so a ring shift cannot deadlock.
    GDN_NCCL_CHECK_AT(ncclGroupStart(), site);
    ncclResult_t rs = ncclSuccess, rr = ncclSuccess;
    if (sb > 0) rs = ncclSend(send_buf, sb, ncclUint8, dest, comm_, stream_);
    if (rb > 0 && rs == ncclSuccess) rr = ncclRecv(recv_buf, rb, ncclUint8, src, comm_, stream_);
    // Close the group even when a call failed, or NCCL stays in group mode for good.
    const ncclResult_t re = ncclGroupEnd();
    for (const auto& [res, call] :
         {std::pair{rs, "ncclSend"}, std::pair{rr, "ncclRecv"}, std::pair{re, "ncclGroupEnd"}})
      if (res != ncclSuccess)
        detail::throw_gpu_error(call, detail::nccl_error_text(res), __FILE__, __LINE__, site);
    wait(site);
  }
}

void NcclCommunicator::do_barrier() {
  // A one-int all-reduce completes only when every rank has joined: a barrier on the GPU
  // side too, unlike MPI_Barrier, which would not order the device streams. Not counted.
  GDN_NCCL_CHECK_AT(ncclAllReduce(scratch_, scratch_, 1, ncclInt32, ncclMax, comm_, stream_),
                    "barrier");
  wait("barrier");
}

// MPI_Comm_split of the MPI communicator, then a fresh NCCL bootstrap on the same device.
std::unique_ptr<Communicator> NcclCommunicator::do_split(int color, int key) {
  MPI_Comm part = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split(mpi_.comm(), color, key, &part), "MPI_Comm_split", rank());
  // The new communicator duplicates `part` (see MpiCommunicator), so free ours either way.
  std::unique_ptr<Communicator> out;
  try {
    out = std::make_unique<NcclCommunicator>(part, device_);
  } catch (...) {
    if (part != MPI_COMM_NULL) MPI_Comm_free(&part);
    throw;
  }
  MPI_Comm_free(&part);
  return out;
}

// ncclCommAbort (so peers' kernels do not wait forever on this rank), then MPI_Abort.
void NcclCommunicator::do_abort(int code) {
  if (comm_ != nullptr) ncclCommAbort(comm_);
  comm_ = nullptr;
  mpi_.abort(code);
}

}  // namespace gdn
