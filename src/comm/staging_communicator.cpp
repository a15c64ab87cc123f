#include "comm/staging_communicator.h"

#include <cuda_runtime.h>

#include <vector>

#include "core/error.h"
#include "runtime/cuda_check.h"

namespace gdn {

namespace {

void to_host(void* host, const void* dev, std::size_t bytes, const std::string& site) {
  if (bytes > 0) GDN_CUDA_CHECK_AT(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost), site);
}

void to_device(void* dev, const void* host, std::size_t bytes, const std::string& site) {
  if (bytes > 0) GDN_CUDA_CHECK_AT(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice), site);
}

}  // namespace

char* StagingCommunicator::Pinned::get(std::size_t bytes, const std::string& site) {
  if (bytes > cap) {
    if (p != nullptr) cudaFreeHost(p);
    p = nullptr;
    cap = 0;
    GDN_CUDA_CHECK_AT(cudaMallocHost(&p, bytes), site);
    cap = bytes;
  }
  return static_cast<char*>(p);
}

StagingCommunicator::Pinned::~Pinned() {
  if (p != nullptr) cudaFreeHost(p);  // errors ignored: destructor
}

StagingCommunicator::StagingCommunicator(MPI_Comm comm) : mpi_(comm) {}

StagingCommunicator::~StagingCommunicator() = default;

void StagingCommunicator::do_all_gather(const void* send, void* recv, std::size_t bytes,
                                        const std::string& site) {
  const std::size_t total = bytes * static_cast<std::size_t>(size());
  char* hs = send_host_.get(bytes, site);
  char* hr = recv_host_.get(total, site);
  // Staging copies `send` out first, so the in-place case (send inside recv) needs nothing.
  to_host(hs, send, bytes, site);
  mpi_.all_gather(hs, hr, bytes, site);
  to_device(recv, hr, total, site);
}

// The blocks arrive packed in the pinned buffer and are copied out one by one (gaps on
// the device are left untouched); in place needs nothing, as send is staged first.
void StagingCommunicator::do_all_gather_v(const void* send, std::size_t send_bytes, void* recv,
                                          const std::vector<std::size_t>& recv_bytes,
                                          const std::vector<std::size_t>& recv_offsets,
                                          const std::string& site) {
  const std::size_t n = static_cast<std::size_t>(size());
  // Packed host layout: block q at the sum of the sizes before it, so the host receive
  // is dense and only the blocks themselves are written back to the device.
  std::vector<std::size_t> hr_off(n);
  std::size_t total = 0;
  for (std::size_t q = 0; q < n; ++q) {
    hr_off[q] = total;
    total += recv_bytes[q];
  }
  char* hs = send_host_.get(send_bytes, site);
  char* hr = recv_host_.get(total, site);
  // Staging copies `send` out first, so the in-place case (send inside recv) needs nothing.
  to_host(hs, send, send_bytes, site);
  mpi_.all_gather_v(hs, send_bytes, hr, recv_bytes, hr_off, site);
  for (std::size_t q = 0; q < n; ++q)
    if (recv_bytes[q] > 0)
      to_device(static_cast<char*>(recv) + recv_offsets[q], hr + hr_off[q], recv_bytes[q], site);
}

void StagingCommunicator::do_all_reduce(void* buf, std::size_t n, DType t, ReduceOp op,
                                        const std::string& site) {
  const std::size_t bytes = n * dtype_size(t);
  char* h = send_host_.get(bytes, site);
  to_host(h, buf, bytes, site);
  mpi_.all_reduce(h, n, t, op, site);
  to_device(buf, h, bytes, site);
}

// In place is allowed: the input is staged to the host before anything is written.
void StagingCommunicator::do_reduce_scatter_sum(const void* send, void* recv, std::size_t n,
                                                DType t, const std::string& site) {
  const std::size_t bytes = n * dtype_size(t);
  const std::size_t total = bytes * static_cast<std::size_t>(size());
  char* hs = send_host_.get(total, site);
  char* hr = recv_host_.get(bytes, site);
  // The whole input reaches the host before recv is written, so in place needs nothing.
  to_host(hs, send, total, site);
  mpi_.reduce_scatter_sum(hs, hr, n, t, site);
  to_device(recv, hr, bytes, site);
}

// The blocks are packed into the pinned buffers (one copy per non-empty block each way),
// so gaps between the receive blocks on the device are left untouched.
void StagingCommunicator::do_all_to_all(const void* send,
                                        const std::vector<std::size_t>& send_bytes,
                                        const std::vector<std::size_t>& send_offsets, void* recv,
                                        const std::vector<std::size_t>& recv_bytes,
                                        const std::vector<std::size_t>& recv_offsets,
                                        const std::string& site) {
  const std::size_t n = static_cast<std::size_t>(size());
  // Packed host layout: block q at the sum of the sizes before it. Copying whole device
  // ranges instead would write host garbage over whatever lies between the receive blocks.
  std::vector<std::size_t> hs_off(n), hr_off(n);
  std::size_t st = 0, rt = 0;
  for (std::size_t q = 0; q < n; ++q) {
    hs_off[q] = st;
    hr_off[q] = rt;
    st += send_bytes[q];
    rt += recv_bytes[q];
  }
  char* hs = send_host_.get(st, site);
  char* hr = recv_host_.get(rt, site);
  for (std::size_t q = 0; q < n; ++q)
    if (send_bytes[q] > 0)
      to_host(hs + hs_off[q], static_cast<const char*>(send) + send_offsets[q], send_bytes[q],
              site);
  mpi_.all_to_all(hs, send_bytes, hs_off, hr, recv_bytes, hr_off, site);
  for (std::size_t q = 0; q < n; ++q)
    if (recv_bytes[q] > 0)
      to_device(static_cast<char*>(recv) + recv_offsets[q], hr + hr_off[q], recv_bytes[q], site);
}

void StagingCommunicator::do_send(const void* buf, std::size_t bytes, int dest, int tag,
                                  const std::string& site) {
  char* h = send_host_.get(bytes, site);
  to_host(h, buf, bytes, site);
  mpi_.send(h, bytes, dest, tag, site);
}

void StagingCommunicator::do_recv(void* buf, std::size_t bytes, int src, int tag,
                                  const std::string& site) {
  char* h = recv_host_.get(bytes, site);
  mpi_.recv(h, bytes, src, tag, site);
  to_device(buf, h, bytes, site);
}

void StagingCommunicator::do_send_recv(const void* send_buf, std::size_t send_bytes, int dest,
                                       void* recv_buf, std::size_t recv_bytes, int src, int tag,
                                       const std::string& site) {
  // The front passes 0 bytes for a side with peer -1: no (possibly null) pointer is touched.
  char* hs = send_host_.get(send_bytes, site);
  char* hr = recv_host_.get(recv_bytes, site);
  to_host(hs, send_buf, send_bytes, site);
  mpi_.send_recv(hs, send_bytes, dest, hr, recv_bytes, src, tag, site);
  to_device(recv_buf, hr, recv_bytes, site);
}

std::unique_ptr<Communicator> StagingCommunicator::do_split(int color, int key) {
  // Split the inner MPI communicator and wrap the result; MpiCommunicator::split already
  // checks errors and handles the communicator's lifetime.
  auto part = mpi_.split(color, key);
  auto* m = dynamic_cast<MpiCommunicator*>(part.get());
  GDN_CHECK(m != nullptr, "StagingCommunicator::split: inner split did not return MPI");
  return std::make_unique<StagingCommunicator>(m->comm());
}

void StagingCommunicator::do_barrier() {
  mpi_.barrier();
}

void StagingCommunicator::do_abort(int code) {
  mpi_.abort(code);
}

}  // namespace gdn
