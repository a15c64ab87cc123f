#include "comm/mpi_communicator.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "core/error.h"

namespace gdn {

namespace {

std::string mpi_error_string(int rc) {
  char buf[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS) return "unknown MPI error";
  return std::string(buf, len);
}

MPI_Datatype mpi_type(DType t) {
  // bf16 has no MPI datatype: bf16 runs exchange f32 values.
  const MPI_Datatype m =
      per_dtype(t, MPI_FLOAT, MPI_DOUBLE, MPI_INT32_T, MPI_INT64_T, MPI_DATATYPE_NULL);
  if (m == MPI_DATATYPE_NULL) throw_error("mpi_type: no MPI datatype for DType ", dtype_name(t));
  return m;
}

// Number of messages a buffer of n bytes is split into: at least one, so a zero-byte
// exchange still pairs one send with one receive on both sides.
std::size_t num_chunks(std::size_t n, std::size_t c) {
  return n == 0 ? 1 : (n + c - 1) / c;
}

// The most scratch a chunked reduce_scatter_sum packs at once (all ranks' pieces together):
// pieces shrink below max_bytes_ with many ranks rather than the scratch growing with them.
constexpr std::size_t kMaxPackBytes = std::size_t{64} << 20;

// base + off, or base itself for an empty block, whose buffer may be null.
template <typename P>
P* block_at(P* base, std::size_t off, std::size_t bytes) {
  return bytes == 0 ? base : base + off;
}

}  // namespace

MpiRuntime::MpiRuntime(int* argc, char*** argv) {
  int init = 0;
  MPI_Initialized(&init);
  if (init) return;
  // FUNNELED: OpenMP threads compute, only the main thread talks to MPI.
  int provided = MPI_THREAD_SINGLE;
  const int rc = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  if (rc != MPI_SUCCESS)
    throw_error("MPI_Init_thread failed: ", mpi_error_string(rc), " (error code ", rc, ")");
  initialized_here = true;
}

MpiRuntime::~MpiRuntime() {
  if (!initialized_here) return;
  int fin = 0;
  MPI_Finalized(&fin);
  if (!fin) MPI_Finalize();
}

int ranks_on_this_node(MPI_Comm comm) {
  int rank = 0, n = 1;
  MPI_Comm node = MPI_COMM_NULL;
  const int rc = MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  if (rc != MPI_SUCCESS)
    throw_error("MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) failed: ", mpi_error_string(rc));
  MPI_Comm_rank(node, &rank);
  MPI_Comm_size(node, &n);
  MPI_Comm_free(&node);
  return n;
}

MpiCommunicator::MpiCommunicator(MPI_Comm comm) : max_bytes_(INT_MAX) {
  int init = 0;
  MPI_Initialized(&init);
  GDN_CHECK(init, "MpiCommunicator: MPI is not initialized; create an MpiRuntime first");
  GDN_CHECK(comm != MPI_COMM_NULL, "MpiCommunicator: got MPI_COMM_NULL, expected a valid comm");
  check(MPI_Comm_dup(comm, &comm_), "MPI_Comm_dup", "MpiCommunicator()");
  check(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler",
        "MpiCommunicator()");
  check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank", "MpiCommunicator()");
  check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size", "MpiCommunicator()");
  int* ub = nullptr;
  int flag = 0;
  if (MPI_Comm_get_attr(comm_, MPI_TAG_UB, &ub, &flag) == MPI_SUCCESS && flag && ub) tag_ub_ = *ub;
}

MpiCommunicator::~MpiCommunicator() {
  // After MPI_Finalize every handle is dead; freeing then would itself be an error.
  int fin = 0;
  MPI_Finalized(&fin);
  if (!fin && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void MpiCommunicator::set_max_message_bytes(std::size_t b) {
  GDN_CHECK(b >= 1 && b <= static_cast<std::size_t>(INT_MAX), "set_max_message_bytes(", b,
            "): expected 1 .. ", INT_MAX);
  max_bytes_ = b;
}

void MpiCommunicator::check(int rc, const char* call, const std::string& site) const {
  if (rc == MPI_SUCCESS) return;
  throw_error(call, " failed at site '", site, "' on rank ", rank_, " of ", size_, ": ",
              mpi_error_string(rc), " (error code ", rc, ")");
}

void MpiCommunicator::check_peer(int peer, bool allow_none, const char* what, const char* call,
                                 const std::string& site) const {
  if (allow_none && peer == -1) return;
  if (peer < 0 || peer >= size_)
    throw_error(call, " at site '", site, "' on rank ", rank_, ": ", what, " = ", peer,
                ", expected 0 .. ", size_ - 1, allow_none ? " or -1 (none)" : "");
}

// MPI_Allgather, in pieces when a block is over max_message_bytes(). In place is allowed.
void MpiCommunicator::do_all_gather(const void* send, void* recv, std::size_t bytes,
                                    const std::string& site) {
  char* out = static_cast<char*>(recv);
  // MPI forbids aliased buffers; gathering from our own block of recv must say IN_PLACE.
  const bool in_place = send == out + static_cast<std::size_t>(rank_) * bytes;
  if (bytes <= max_bytes_) {
    check(MPI_Allgather(in_place ? MPI_IN_PLACE : send, static_cast<int>(bytes), MPI_BYTE, out,
                        static_cast<int>(bytes), MPI_BYTE, comm_),
          "MPI_Allgather", site);
  } else {
    // Piece k of every rank's block: a receive type of `len` bytes whose extent is the
    // whole block, so rank r's piece lands at out + off + r * bytes.
    for (std::size_t off = 0; off < bytes; off += max_bytes_) {
      const int len = static_cast<int>(std::min(max_bytes_, bytes - off));
      MPI_Datatype piece = MPI_DATATYPE_NULL, block = MPI_DATATYPE_NULL;
      check(MPI_Type_contiguous(len, MPI_BYTE, &piece), "MPI_Type_contiguous", site);
      int rc = MPI_Type_create_resized(piece, 0, static_cast<MPI_Aint>(bytes), &block);
      MPI_Type_free(&piece);
      check(rc, "MPI_Type_create_resized", site);
      rc = MPI_Type_commit(&block);
      if (rc == MPI_SUCCESS)
        rc = MPI_Allgather(in_place ? MPI_IN_PLACE : static_cast<const char*>(send) + off, len,
                           MPI_BYTE, out + off, 1, block, comm_);
      MPI_Type_free(&block);
      check(rc, "MPI_Allgather", site);
    }
  }
}

// In place, in pieces of at most max_message_bytes().
void MpiCommunicator::do_all_reduce(void* buf, std::size_t count_, DType t, ReduceOp reduce,
                                    const std::string& site) {
  const MPI_Op op = reduce == ReduceOp::sum ? MPI_SUM : MPI_MAX;
  const char* name = reduce == ReduceOp::sum ? "MPI_Allreduce(SUM)" : "MPI_Allreduce(MAX)";
  const std::size_t es = dtype_size(t);
  const std::size_t per = std::max<std::size_t>(1, max_bytes_ / es);
  char* p = static_cast<char*>(buf);
  std::size_t off = 0;
  do {
    const std::size_t n = std::min(per, count_ - off);
    check(MPI_Allreduce(MPI_IN_PLACE, p + off * es, static_cast<int>(n), mpi_type(t), op, comm_),
          name, site);
    off += n;
  } while (off < count_);
}

// MPI_Reduce_scatter_block, in pieces when a block is over max_message_bytes(). In place
// is allowed.
void MpiCommunicator::do_reduce_scatter_sum(const void* send, void* recv, std::size_t count_,
                                            DType t, const std::string& site) {
  const std::size_t es = dtype_size(t);
  const std::size_t block = count_ * es;  // bytes of one rank's block
  const MPI_Datatype type = mpi_type(t);
  const char* in = static_cast<const char*>(send);
  char* out = static_cast<char*>(recv);
  // MPI forbids aliased buffers, and its MPI_IN_PLACE would leave the result in block 0,
  // not in this rank's block: in place needs a detour (a scratch block or packed pieces).
  const bool in_place = block > 0 && out == in + static_cast<std::size_t>(rank_) * block;
  if (block <= max_bytes_) {
    std::unique_ptr<char[]> tmp(in_place ? new char[block] : nullptr);
    check(MPI_Reduce_scatter_block(send, in_place ? tmp.get() : recv, static_cast<int>(count_),
                                   type, MPI_SUM, comm_),
          "MPI_Reduce_scatter_block", site);
    if (in_place) std::memcpy(out, tmp.get(), block);
  } else {
    // Too big for one int count: piece k of every rank's block is packed into a contiguous
    // scratch, then reduced and scattered into piece k of recv. (A strided derived type, as
    // in all_gather, would avoid the copy, but MPI defines its predefined reduction ops on
    // predefined types only.) Every rank cuts the same pieces, as the counts must match.
    // The scratch never aliases recv, so in place needs nothing more: piece k of this
    // rank's block is packed before it is overwritten, and later pieces lie beyond it.
    const std::size_t piece_bytes =
        std::min(max_bytes_, std::max<std::size_t>(1, kMaxPackBytes / size_));
    const std::size_t per = std::max<std::size_t>(1, piece_bytes / es);
    const std::size_t n_ranks = static_cast<std::size_t>(size_);
    std::unique_ptr<char[]> pack(new char[std::min(per, count_) * es * n_ranks]);
    for (std::size_t off = 0; off < count_; off += per) {
      const std::size_t n = std::min(per, count_ - off);
      for (std::size_t q = 0; q < n_ranks; ++q)
        std::memcpy(pack.get() + q * n * es, in + q * block + off * es, n * es);
      check(MPI_Reduce_scatter_block(pack.get(), out + off * es, static_cast<int>(n), type, MPI_SUM,
                                     comm_),
            "MPI_Reduce_scatter_block", site);
    }
  }
}

// MPI_Allgatherv when the whole output fits in one int count (at most
// max_message_bytes()), with MPI_IN_PLACE when in place. Displacements are ints too: a
// rank whose layout puts a block past max_message_bytes() receives into a packed scratch
// and copies the blocks out, the same collective as the other ranks make. A larger
// output goes point-to-point as all_to_all does (in pieces, every received size
// checked). Every rank must pass the same recv_bytes, as it decides the path.
void MpiCommunicator::do_all_gather_v(const void* send, std::size_t send_bytes, void* recv,
                                      const std::vector<std::size_t>& recv_bytes,
                                      const std::vector<std::size_t>& recv_offsets,
                                      const std::string& site) {
  const std::size_t n = static_cast<std::size_t>(size_);
  std::size_t total = 0;
  for (std::size_t b : recv_bytes) total += b;
  if (total > max_bytes_) {
    // Some count would not fit in an int (nor, packed, some displacement): every rank
    // sends its block to every peer in pieces, as all_to_all does. The path depends on
    // recv_bytes only, which every rank passes alike, so all ranks take the same one.
    const std::vector<std::size_t> sb(n, send_bytes), so(n, 0);
    exchange(send, sb, so, recv, recv_bytes, recv_offsets, site, "all_gather_v");
    return;
  }
  char* out = static_cast<char*>(recv);
  // Every count fits in an int; a displacement is this rank's own layout, so if one does
  // not fit, this rank alone receives into a packed scratch (displacements below total).
  bool direct = true;
  for (std::size_t q = 0; q < n; ++q)
    if (recv_bytes[q] > 0 && recv_offsets[q] > max_bytes_) direct = false;
  std::vector<int> counts(n), displs(n);
  std::size_t packed = 0;
  for (std::size_t q = 0; q < n; ++q) {
    counts[q] = static_cast<int>(recv_bytes[q]);
    displs[q] = static_cast<int>(direct ? (recv_bytes[q] > 0 ? recv_offsets[q] : 0) : packed);
    packed += recv_bytes[q];
  }
  // MPI forbids aliased buffers; gathering from our own block of recv must say IN_PLACE.
  // (The scratch never aliases send.)
  const bool in_place = direct && out != nullptr && send == out + recv_offsets[rank_];
  std::unique_ptr<char[]> scratch(direct ? nullptr : new char[total]);
  check(MPI_Allgatherv(in_place ? MPI_IN_PLACE : send, static_cast<int>(send_bytes), MPI_BYTE,
                       direct ? out : scratch.get(), counts.data(), displs.data(), MPI_BYTE, comm_),
        "MPI_Allgatherv", site);
  if (!direct)
    for (std::size_t q = 0; q < n; ++q)
      if (recv_bytes[q] > 0)
        std::memcpy(out + recv_offsets[q], scratch.get() + displs[q], recv_bytes[q]);
}

// Nonblocking MPI_BYTE messages per peer (not MPI_Alltoallv, whose int displacements
// overflow past 2 GiB), at least one each way per pair, so a zero-byte side still pairs
// up. Every received size is checked: a message shorter or longer than recv_bytes is an
// error naming site, rank and peer. The block to self is a memmove.
void MpiCommunicator::do_all_to_all(const void* send, const std::vector<std::size_t>& send_bytes,
                                    const std::vector<std::size_t>& send_offsets, void* recv,
                                    const std::vector<std::size_t>& recv_bytes,
                                    const std::vector<std::size_t>& recv_offsets,
                                    const std::string& site) {
  exchange(send, send_bytes, send_offsets, recv, recv_bytes, recv_offsets, site, "all_to_all");
}

void MpiCommunicator::exchange(const void* send, const std::vector<std::size_t>& send_bytes,
                               const std::vector<std::size_t>& send_offsets, void* recv,
                               const std::vector<std::size_t>& recv_bytes,
                               const std::vector<std::size_t>& recv_offsets,
                               const std::string& site, const char* call) {
  const char* sp = static_cast<const char*>(send);
  char* rp = static_cast<char*>(recv);
  // The largest tag: out of the way of the small tags p2p callers use on this communicator.
  const int tag = tag_ub_;

  // Every receive first, then every send, then one wait: no ordering can deadlock. Each
  // side cuts a message by its own size only, so pieces pair up when the sizes agree. Peers
  // go in ring order from this rank, so the ranks do not all start on rank 0.
  std::vector<MPI_Request> reqs;
  std::vector<int> peer;  // the rank each request talks to
  // One direction's messages, in pieces of at most max_bytes_: the receives from peers
  // rank - 1, rank - 2, ..., or the sends to rank + 1, rank + 2, ...
  const auto post = [&](bool sending) {
    const std::vector<std::size_t>& bytes = sending ? send_bytes : recv_bytes;
    for (int d = 1; d < size_; ++d) {
      const int q = sending ? (rank_ + d) % size_ : (rank_ + size_ - d) % size_;
      const std::size_t b = bytes[q];
      for (std::size_t k = 0, n = num_chunks(b, max_bytes_); k < n; ++k) {
        const std::size_t off = k * max_bytes_;
        const int len = static_cast<int>(std::min(max_bytes_, b - off));
        reqs.emplace_back();
        peer.push_back(q);
        if (sending)
          check(MPI_Isend(block_at(sp, send_offsets[q] + off, b), len, MPI_BYTE, q, tag, comm_,
                          &reqs.back()),
                "MPI_Isend", site);
        else
          check(MPI_Irecv(block_at(rp, recv_offsets[q] + off, b), len, MPI_BYTE, q, tag, comm_,
                          &reqs.back()),
                "MPI_Irecv", site);
      }
    }
  };
  post(/*sending=*/false);
  const std::size_t nrecv = reqs.size();
  post(/*sending=*/true);
  // The block to self while the messages travel (the front made its sizes equal). In an
  // in-place all_gather_v it is already there.
  const std::size_t self = send_bytes[rank_];
  if (self > 0) {
    const char* from = sp + send_offsets[rank_];
    char* to = rp + recv_offsets[rank_];
    if (from != to) std::memmove(to, from, self);
  }

  std::vector<MPI_Status> st(reqs.size());
  const int rc = MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), st.data());
  if (rc == MPI_ERR_IN_STATUS) {
    // Name the first message that failed (a longer message than expected is truncated).
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      const int e = st[i].MPI_ERROR;
      if (e == MPI_SUCCESS || e == MPI_ERR_PENDING) continue;
      const bool in = i < nrecv;
      throw_error(in ? "MPI_Irecv" : "MPI_Isend", " failed at site '", site, "' on rank ", rank_,
                  in ? ", expecting " : ", sending ",
                  in ? recv_bytes[peer[i]] : send_bytes[peer[i]],
                  in ? " bytes from rank " : " bytes to rank ", peer[i], ": ", mpi_error_string(e),
                  " (error code ", e, ")");
    }
  }
  check(rc, "MPI_Waitall", site);
  // A shorter message than expected means sender and receiver disagree on the size.
  std::vector<std::size_t> got(static_cast<std::size_t>(size_), 0);
  for (std::size_t i = 0; i < nrecv; ++i) {
    int g = 0;
    MPI_Get_count(&st[i], MPI_BYTE, &g);
    got[peer[i]] += static_cast<std::size_t>(g);
  }
  for (int q = 0; q < size_; ++q)
    if (q != rank_ && got[q] != recv_bytes[q])
      throw_error("MpiCommunicator::", call, " at site '", site, "' on rank ", rank_, ": expected ",
                  recv_bytes[q], " bytes from rank ", q, ", got ", got[q]);
}

// dest in [0, size()).
void MpiCommunicator::do_send(const void* buf, std::size_t bytes, int dest, int tag,
                              const std::string& site) {
  check_peer(dest, false, "dest", "MPI_Send", site);
  GDN_CHECK(tag >= 0 && tag <= tag_ub_, "MPI_Send at site '", site, "': tag = ", tag,
            ", expected 0 .. ", tag_ub_);
  const char* p = static_cast<const char*>(buf);
  for (std::size_t k = 0, n = num_chunks(bytes, max_bytes_); k < n; ++k) {
    const std::size_t off = k * max_bytes_;
    const int len = static_cast<int>(std::min(max_bytes_, bytes - off));
    check(MPI_Send(p + off, len, MPI_BYTE, dest, tag, comm_), "MPI_Send", site);
  }
}

// The matching send must carry exactly `bytes` bytes.
void MpiCommunicator::do_recv(void* buf, std::size_t bytes, int src, int tag,
                              const std::string& site) {
  check_peer(src, false, "src", "MPI_Recv", site);
  GDN_CHECK(tag >= 0 && tag <= tag_ub_, "MPI_Recv at site '", site, "': tag = ", tag,
            ", expected 0 .. ", tag_ub_);
  char* p = static_cast<char*>(buf);
  for (std::size_t k = 0, n = num_chunks(bytes, max_bytes_); k < n; ++k) {
    const std::size_t off = k * max_bytes_;
    const int len = static_cast<int>(std::min(max_bytes_, bytes - off));
    MPI_Status st;
    check(MPI_Recv(p + off, len, MPI_BYTE, src, tag, comm_, &st), "MPI_Recv", site);
    int got = 0;
    MPI_Get_count(&st, MPI_BYTE, &got);
    // A shorter message than expected means sender and receiver disagree on the size.
    if (got != len)
      throw_error("MPI_Recv at site '", site, "' on rank ", rank_, ": expected ", len,
                  " bytes from rank ", src, " (tag ", tag, "), got ", got);
  }
}

// dest/src may be -1 (MPI_PROC_NULL).
void MpiCommunicator::do_send_recv(const void* send_buf, std::size_t send_bytes, int dest,
                                   void* recv_buf, std::size_t recv_bytes, int src, int tag,
                                   const std::string& site) {
  check_peer(dest, true, "dest", "MPI_Sendrecv", site);
  check_peer(src, true, "src", "MPI_Sendrecv", site);
  GDN_CHECK(tag >= 0 && tag <= tag_ub_, "MPI_Sendrecv at site '", site, "': tag = ", tag,
            ", expected 0 .. ", tag_ub_);
  // The front passes 0 bytes for a side with peer -1.
  const std::size_t sb = send_bytes, rb = recv_bytes;
  const int d = dest == -1 ? MPI_PROC_NULL : dest;
  const int s = src == -1 ? MPI_PROC_NULL : src;
  auto check_got = [&](const MPI_Status& st, int want) {
    int got = 0;
    MPI_Get_count(&st, MPI_BYTE, &got);
    if (got != want)
      throw_error("MPI_Sendrecv at site '", site, "' on rank ", rank_, ": expected ", want,
                  " bytes from rank ", src, " (tag ", tag, "), got ", got);
  };

  if (sb <= max_bytes_ && rb <= max_bytes_) {
    MPI_Status st;
    check(MPI_Sendrecv(send_buf, static_cast<int>(sb), MPI_BYTE, d, tag, recv_buf,
                       static_cast<int>(rb), MPI_BYTE, s, tag, comm_, &st),
          "MPI_Sendrecv", site);
    if (src != -1) check_got(st, static_cast<int>(rb));
  } else {
    // Too big for one int count: post every piece nonblocking, then wait for all. Each
    // side splits a message by its own size only, so pieces pair up with the partner's
    // (which may take the MPI_Sendrecv path for a message that fits).
    std::vector<MPI_Request> reqs;
    std::vector<int> want;
    const char* sp = static_cast<const char*>(send_buf);
    char* rp = static_cast<char*>(recv_buf);
    if (src != -1) {
      for (std::size_t k = 0, n = num_chunks(rb, max_bytes_); k < n; ++k) {
        const std::size_t off = k * max_bytes_;
        const int len = static_cast<int>(std::min(max_bytes_, rb - off));
        reqs.emplace_back();
        want.push_back(len);
        check(MPI_Irecv(rp + off, len, MPI_BYTE, s, tag, comm_, &reqs.back()), "MPI_Irecv", site);
      }
    }
    const std::size_t nrecv = reqs.size();
    if (dest != -1) {
      for (std::size_t k = 0, n = num_chunks(sb, max_bytes_); k < n; ++k) {
        const std::size_t off = k * max_bytes_;
        const int len = static_cast<int>(std::min(max_bytes_, sb - off));
        reqs.emplace_back();
        check(MPI_Isend(sp + off, len, MPI_BYTE, d, tag, comm_, &reqs.back()), "MPI_Isend", site);
      }
    }
    std::vector<MPI_Status> st(reqs.size());
    check(MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), st.data()), "MPI_Waitall", site);
    for (std::size_t i = 0; i < nrecv; ++i) check_got(st[i], want[i]);
  }
}

void MpiCommunicator::do_barrier() {
  check(MPI_Barrier(comm_), "MPI_Barrier", "barrier");
}

std::unique_ptr<Communicator> MpiCommunicator::do_split(int color, int key) {
  MPI_Comm part = MPI_COMM_NULL;
  check(MPI_Comm_split(comm_, color, key, &part), "MPI_Comm_split", "split");
  // The new communicator duplicates `part` (and sets its error handler), so free ours.
  auto out = std::make_unique<MpiCommunicator>(part);
  MPI_Comm_free(&part);
  return out;
}

void MpiCommunicator::do_abort(int code) {
  std::fflush(nullptr);
  MPI_Abort(comm_, code);
  std::_Exit(code);  // MPI_Abort should not return; make sure we never do either
}

}  // namespace gdn
