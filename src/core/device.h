// Where code runs (docs/design.md §7). A device policy is a type with
// the memory of one kind of processor: Host (here, always built) is the CPU; Cuda
// (runtime/cuda_device.h, CUDA builds only) is this process's GPU. Code that runs on
// either is a template on the policy `Dev`: it keeps buffers as Buffer<Dev, T>, moves
// memory with Dev's static functions, and calls the ops of src/ops with a Dev{} tag as
// the first argument, which selects the host or the CUDA overload of the op.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace gdn {

struct Host {
  static constexpr const char* kName = "cpu";
  template <typename T>
  using Vector = std::vector<T>;

  // Host memory <-> this device's memory (plain copies on the host).
  template <typename T>
  static void upload(T* dst, const T* host, std::size_t n) {
    copy(dst, host, n);
  }
  template <typename T>
  static void download(T* host, const T* src, std::size_t n) {
    copy(host, src, n);
  }
  // Within this device's memory.
  template <typename T>
  static void copy(T* dst, const T* src, std::size_t n) {
    if (dst != src) std::copy_n(src, n, dst);
  }
  template <typename T>
  static void fill(T* dst, std::size_t n, T value) {
    std::fill_n(dst, n, value);
  }
  // `rows` rows of `len` elements, from rows src_stride apart to rows dst_stride apart.
  template <typename T>
  static void copy_rows(T* dst, std::int64_t dst_stride, const T* src, std::int64_t src_stride,
                        std::int64_t len, std::int64_t rows) {
#if defined(_OPENMP)  // a header: files built without OpenMP get the serial loop
#pragma omp parallel for schedule(static) if (rows * len > (std::int64_t(1) << 16))
#endif
    for (std::int64_t i = 0; i < rows; ++i)
      std::copy_n(src + i * src_stride, len, dst + i * dst_stride);
  }
  // Waits for this device's queued work (nothing to wait for on the host).
  static void synchronize() {}
  // The most bytes of this device's buffers held at once: on the host they are part of
  // the process's peak RSS, which the trainer reports for every device; 0 here.
  static std::int64_t peak_bytes() {
    return 0;
  }
};

struct Cuda;  // runtime/cuda_device.h

// The functions of an op exist once per device: an op header declares each as a template on
// T for Host and for Cuda, and each device's source file instantiates its own for float and
// double (docs/design.md §7).

// A growable array in Dev's memory: std::vector on the host, DeviceBuffer on a GPU. New
// elements are zero on both.
template <typename Dev, typename T>
using Buffer = typename Dev::template Vector<T>;

// n host elements copied into a new buffer on Dev, and a whole buffer back to the host.
template <typename Dev, typename T>
Buffer<Dev, T> to_device(const T* host, std::size_t n) {
  Buffer<Dev, T> b(n);
  Dev::upload(b.data(), host, n);
  return b;
}
template <typename Dev, typename T>
std::vector<T> to_host(const Buffer<Dev, T>& b) {
  std::vector<T> h(b.size());
  Dev::download(h.data(), b.data(), b.size());
  return h;
}

}  // namespace gdn
