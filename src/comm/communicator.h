// The Communicator interface: the only way CP code talks to other ranks.
// Backends (single rank, MPI, and in CUDA builds NCCL and MPI with host staging) know
// nothing about GDN. Every call names its call site (comm/call_sites.h) and is counted,
// so tests can assert payloads.
//
// The public calls are one non-virtual front: it checks what every backend needs checked,
// calls the backend's protected do_* operation, and counts a call that returned (failed
// calls are not counted), so the counting rules below hold for every backend alike. A new
// collective is one front function here and one do_* operation per backend.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"

namespace gdn {

// Bytes one call site moved on this rank. For all_gather, bytes_received is the whole
// output buffer (this rank's own block included), bytes_sent the block it contributed;
// all_gather_v alike: bytes_sent is send_bytes, bytes_received the sum of recv_bytes.
// reduce_scatter_sum is its mirror image: bytes_sent is the whole input (size() blocks,
// own block included), bytes_received the one block this rank gets. all_reduce_* counts
// its buffer both ways. all_to_all counts only what crosses to other ranks: bytes_sent
// sums send_bytes, bytes_received sums recv_bytes, both without the block to self (a local
// copy). send counts its bytes sent, recv its bytes received, send_recv both, where a side
// with peer -1 counts 0. barrier, split and abort are not counted.
// The elementwise operation of an all-reduce.
enum class ReduceOp { sum, max };

struct CommCounter {
  std::int64_t calls = 0;
  std::int64_t bytes_sent = 0;
  std::int64_t bytes_received = 0;
};

class Communicator {
 public:
  Communicator() = default;
  virtual ~Communicator() = default;
  // A communicator is one group of ranks' handle: never copied (split() makes new ones).
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return do_rank(); }
  int size() const { return do_size(); }

  // recv holds size() blocks of `bytes` each, in rank order; send is this rank's block.
  void all_gather(const void* send, void* recv, std::size_t bytes, const std::string& site);
  // All-gather of uneven blocks; both vectors have size() entries, in rank order. Rank q's
  // block, recv_bytes[q] bytes (zero allowed), lands at recv + recv_offsets[q]; blocks may
  // come in any order with gaps between them, which are left untouched. send is this
  // rank's block: send_bytes == recv_bytes[rank()] (the front checks it and the vector
  // lengths, check_all_gather_v). Every rank passes the same recv_bytes; offsets are its
  // own. In place is allowed: send == recv + recv_offsets[rank()]. Blocks must not overlap.
  void all_gather_v(const void* send, std::size_t send_bytes, void* recv,
                    const std::vector<std::size_t>& recv_bytes,
                    const std::vector<std::size_t>& recv_offsets, const std::string& site);
  // In-place elementwise sum over all ranks of count elements of type t (f32/f64/i32/i64).
  void all_reduce_sum(void* buf, std::size_t count, DType t, const std::string& site);
  // In-place elementwise max (used for error flags and agreement checks).
  void all_reduce_max(void* buf, std::size_t count, DType t, const std::string& site);
  // Either of the two, by op.
  void all_reduce(void* buf, std::size_t count, DType t, ReduceOp op, const std::string& site);
  // send holds size() blocks of count elements of type t (f32/f64/i32/i64), in rank order;
  // recv (count elements) gets the elementwise sum over all ranks of block rank(). Every
  // backend allows in place: recv == send + rank() * count * dtype_size(t).
  void reduce_scatter_sum(const void* send, void* recv, std::size_t count, DType t,
                          const std::string& site);
  // Personalized exchange; each vector has size() entries, indexed by peer rank. Rank q gets
  // send_bytes[q] bytes from send + send_offsets[q]; recv_bytes[q] bytes from rank q land at
  // recv + recv_offsets[q]. Sizes may differ per peer and be zero. The caller guarantees that
  // send_bytes[q] on rank p equals recv_bytes[p] on rank q; the front checks the vector
  // lengths and the block to self (check_all_to_all), backends what more they can (MPI every
  // received size). The block to self is a local copy. Send and receive blocks must not
  // overlap.
  void all_to_all(const void* send, const std::vector<std::size_t>& send_bytes,
                  const std::vector<std::size_t>& send_offsets, void* recv,
                  const std::vector<std::size_t>& recv_bytes,
                  const std::vector<std::size_t>& recv_offsets, const std::string& site);
  // Blocking point-to-point. Tags keep concurrent exchanges apart.
  void send(const void* buf, std::size_t bytes, int dest, int tag, const std::string& site);
  void recv(void* buf, std::size_t bytes, int src, int tag, const std::string& site);
  // Simultaneous send to dest and receive from src (either may be -1 for none): the safe
  // way to shift data along the ranks without deadlock.
  void send_recv(const void* send_buf, std::size_t send_bytes, int dest, void* recv_buf,
                 std::size_t recv_bytes, int src, int tag, const std::string& site);
  void barrier() { do_barrier(); }
  // Collective: a new communicator over the ranks with the same color, ordered by key
  // (MPI_Comm_split semantics). Used to build the dp x cp mesh.
  std::unique_ptr<Communicator> split(int color, int key) { return do_split(color, key); }
  // Ends every rank of the job now (used when one rank fails mid-collective).
  [[noreturn]] void abort(int code);

  const std::map<std::string, CommCounter>& counters() const { return counters_; }
  const CommCounter& counter(const std::string& site) const;
  void reset_counters() { counters_.clear(); }

  // Typed conveniences.
  template <typename T>
  void all_reduce_sum(T* buf, std::size_t count, const std::string& site) {
    all_reduce_sum(buf, count, dtype_of<T>(), site);
  }
  template <typename T>
  void all_reduce_max(T* buf, std::size_t count, const std::string& site) {
    all_reduce_max(buf, count, dtype_of<T>(), site);
  }
  template <typename T>
  void reduce_scatter_sum(const T* send, T* recv, std::size_t count, const std::string& site) {
    reduce_scatter_sum(send, recv, count, dtype_of<T>(), site);
  }

 protected:
  // The backend operations behind the front, with the same arguments and semantics, except:
  // do_all_gather_v and do_all_to_all get vectors the front has checked, and do_send_recv
  // gets 0 bytes for a side whose peer is -1. They validate what is theirs (peers, tags,
  // message sizes) and throw gdn::Error naming call, site and rank. None of them counts.
  virtual int do_rank() const = 0;
  virtual int do_size() const = 0;
  // For error messages: "MpiCommunicator", ...
  virtual const char* backend_name() const = 0;
  virtual void do_all_gather(const void* send, void* recv, std::size_t bytes,
                             const std::string& site) = 0;
  virtual void do_all_gather_v(const void* send, std::size_t send_bytes, void* recv,
                               const std::vector<std::size_t>& recv_bytes,
                               const std::vector<std::size_t>& recv_offsets,
                               const std::string& site) = 0;
  virtual void do_all_reduce(void* buf, std::size_t count, DType t, ReduceOp op,
                             const std::string& site) = 0;
  virtual void do_reduce_scatter_sum(const void* send, void* recv, std::size_t count, DType t,
                                     const std::string& site) = 0;
  virtual void do_all_to_all(const void* send, const std::vector<std::size_t>& send_bytes,
                             const std::vector<std::size_t>& send_offsets, void* recv,
                             const std::vector<std::size_t>& recv_bytes,
                             const std::vector<std::size_t>& recv_offsets,
                             const std::string& site) = 0;
  virtual void do_send(const void* buf, std::size_t bytes, int dest, int tag,
                       const std::string& site) = 0;
  virtual void do_recv(void* buf, std::size_t bytes, int src, int tag, const std::string& site) = 0;
  virtual void do_send_recv(const void* send_buf, std::size_t send_bytes, int dest, void* recv_buf,
                            std::size_t recv_bytes, int src, int tag, const std::string& site) = 0;
  virtual void do_barrier() = 0;
  virtual std::unique_ptr<Communicator> do_split(int color, int key) = 0;
  [[noreturn]] virtual void do_abort(int code) = 0;

 private:
  // One vector of per-rank sizes and its name in messages.
  using PerRank = std::pair<const std::vector<std::size_t>*, const char*>;
  // Throws gdn::Error (naming backend, call, site, rank and the vector) unless every vector
  // of args has size() entries, one per rank.
  void check_one_per_rank(const char* call, std::initializer_list<PerRank> args,
                          const std::string& site) const;
  // Throws gdn::Error (naming backend, site, rank and the bad value) unless all four
  // vectors have size() entries and the block to self has the same size both ways.
  void check_all_to_all(const std::vector<std::size_t>& send_bytes,
                        const std::vector<std::size_t>& send_offsets,
                        const std::vector<std::size_t>& recv_bytes,
                        const std::vector<std::size_t>& recv_offsets,
                        const std::string& site) const;
  // Throws gdn::Error (naming backend, site, rank and the bad value) unless both vectors
  // have size() entries and send_bytes == recv_bytes[rank()].
  void check_all_gather_v(std::size_t send_bytes, const std::vector<std::size_t>& recv_bytes,
                          const std::vector<std::size_t>& recv_offsets,
                          const std::string& site) const;
  void count(const std::string& site, std::size_t sent, std::size_t received);

  std::map<std::string, CommCounter> counters_;
};

}  // namespace gdn

// The backend operations above, declared as overrides: a backend's class says
// GDN_COMMUNICATOR_OPERATIONS under `protected:` (beside its do_rank, do_size and
// backend_name), so the list is written once, here; what a backend's operation does beyond
// the contract above is said at its definition, in the backend's .cpp.
#define GDN_COMMUNICATOR_OPERATIONS                                                               \
  void do_all_gather(const void* send, void* recv, std::size_t bytes, const std::string& site)    \
      override;                                                                                   \
  void do_all_gather_v(const void* send, std::size_t send_bytes, void* recv,                      \
                       const std::vector<std::size_t>& recv_bytes,                                \
                       const std::vector<std::size_t>& recv_offsets, const std::string& site)     \
      override;                                                                                   \
  void do_all_reduce(void* buf, std::size_t count, DType t, ReduceOp op, const std::string& site) \
      override;                                                                                   \
  void do_reduce_scatter_sum(const void* send, void* recv, std::size_t count, DType t,            \
                             const std::string& site) override;                                   \
  void do_all_to_all(const void* send, const std::vector<std::size_t>& send_bytes,                \
                     const std::vector<std::size_t>& send_offsets, void* recv,                    \
                     const std::vector<std::size_t>& recv_bytes,                                  \
                     const std::vector<std::size_t>& recv_offsets, const std::string& site)       \
      override;                                                                                   \
  void do_send(const void* buf, std::size_t bytes, int dest, int tag, const std::string& site)    \
      override;                                                                                   \
  void do_recv(void* buf, std::size_t bytes, int src, int tag, const std::string& site) override; \
  void do_send_recv(const void* send_buf, std::size_t send_bytes, int dest, void* recv_buf,       \
                    std::size_t recv_bytes, int src, int tag, const std::string& site) override;  \
  void do_barrier() override;                                                                     \
  std::unique_ptr<Communicator> do_split(int color, int key) override;                            \
  [[noreturn]] void do_abort(int code) override
