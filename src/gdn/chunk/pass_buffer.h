// The buffers LocalPass keeps between its passes (factors, chunk entry states, dq / dk
// scratch), and the pair scans' scratch (cp/): every element is written before anything
// reads it, so on the host they need no zero fill. std::vector's resize zeroes every new
// element in one thread before the parallel pass starts, and that serial fill (and the page
// faults it takes) was a few percent of the single-rank forward; here the pages are first
// touched by the threads that write them. On a GPU it is the device's Buffer.
#pragma once

#include <cstddef>
#include <memory>
#include <type_traits>

#include "core/device.h"

namespace gdn {

// Host storage left uninitialised on resize; resize keeps nothing (callers refill).
template <typename T>
class HostPassBuffer {
 public:
  HostPassBuffer() = default;
  explicit HostPassBuffer(std::size_t n) { resize(n); }
  std::size_t size() const { return n_; }
  T* data() { return p_.get(); }
  const T* data() const { return p_.get(); }
  void resize(std::size_t n) {
    if (n == n_) return;
    p_.reset();                        // free first: the peak stays one buffer
    p_.reset(n ? new T[n] : nullptr);  // new T[n]: default-initialised, no fill
    n_ = n;
  }

 private:
  std::unique_ptr<T[]> p_;
  std::size_t n_ = 0;
};

template <typename Dev, typename T>
using PassBuffer = std::conditional_t<std::is_same_v<Dev, Host>, HostPassBuffer<T>, Buffer<Dev, T>>;

}  // namespace gdn
