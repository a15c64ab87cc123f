// An activation kept from the forward for the backward (docs/design.md §6b). In
// Precision::bf16 (core/precision.h) a float activation is kept in bf16: half the memory. The
// forward writes and reads float values as before (open, values); when it is done with them, seal()
// rounds them into bf16 (to nearest, ties to even) and frees the float buffer. The backward reads
// them as floats (view), decoded into a float buffer that lives until clear(). So the forward's
// numerics are the float-storage bf16 mode's, and the backward sees the kept values rounded to
// bf16, as torch.autocast's backward sees the bf16 outputs of its matmuls. (Rounding them in the
// forward too was tried: on the Hugging Face MoE fixture it took one expert's gradient to 1.2x the
// bound of hf_bf16, against 0.5x.) Outside the bf16 mode, and for double, the kept buffer is the
// one the forward wrote: no copy, no conversion.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/bf16.h"
#include "core/device.h"
#include "core/precision.h"
#include "ops/convert/convert.h"

namespace gdn {

// The bf16 mode's float copies on the host: the forward's values until seal() and the
// backward's decoded ones, each made and freed once per layer and step. From the heap (which
// gdn_train keeps as a cache: freed blocks up to 32 MiB stay, apps/common/app_common.cpp)
// they left holes among the long-lived bf16 buffers that later buffers of other sizes did not
// fill: at cp 4 on bench-step.json (4096-token shards, 4-16 MiB buffers) the bf16 step's peak
// RSS was ~260 MiB above what it held (docs/benchmarks.md). So a large one is its own
// mapping, whose pages go back to the kernel when it is freed; small ones stay on the heap.
// Zero-filled, as Buffer's new elements are.
template <typename T>
class FreshPages {
 public:
  static constexpr std::size_t kMapBytes = std::size_t(1) << 20;
  FreshPages() = default;
  FreshPages(const FreshPages&) = delete;
  FreshPages& operator=(const FreshPages&) = delete;
  FreshPages(FreshPages&& o) noexcept { swap(o); }
  FreshPages& operator=(FreshPages&& o) noexcept {
    FreshPages(std::move(o)).swap(*this);
    return *this;
  }
  ~FreshPages() { unmap(); }
  // n zero elements; what was held goes first (the contents are not kept).
  void resize(std::size_t n) {
    if (n == size()) return;
    unmap();
    small_ = std::vector<T>();
    if (n * sizeof(T) < kMapBytes) {
      small_.resize(n);
      return;
    }
    void* p =
        ::mmap(nullptr, n * sizeof(T), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    mapped_ = static_cast<T*>(p);
    n_ = n;
  }
  T* data() { return mapped_ ? mapped_ : small_.data(); }
  std::size_t size() const { return mapped_ ? n_ : small_.size(); }

 private:
  void unmap() {
    if (mapped_) ::munmap(mapped_, n_ * sizeof(T));
    mapped_ = nullptr;
    n_ = 0;
  }
  void swap(FreshPages& o) noexcept {
    std::swap(mapped_, o.mapped_);
    std::swap(n_, o.n_);
    small_.swap(o.small_);
  }
  T* mapped_ = nullptr;
  std::size_t n_ = 0;
  std::vector<T> small_;
};

template <typename T, typename Dev>
class Kept {
 public:
  // n values for the forward to write (Dev memory). Decides the storage: bf16 when p is
  // Precision::bf16 and T is float.
  T* open(std::int64_t n, Precision p) {
    bf16_ = std::is_same_v<T, float> && p == Precision::bf16;
    bits_ = Buffer<Dev, Bf16>();
    n_ = n;
    if (bf16_) {
      values_ = Buffer<Dev, T>();
      floats_.resize(std::size_t(n));
      return floats_.data();
    }
    floats_ = Floats();
    values_.resize(std::size_t(n));
    return values_.data();
  }
  // The forward's values, until seal().
  T* values() { return bf16_ ? floats_.data() : values_.data(); }
  // The forward is done with the values: in the bf16 mode they move to bf16 (rounded to
  // nearest) and the float buffer is freed.
  void seal() {
    if constexpr (std::is_same_v<T, float>) {
      if (!bf16_ || bits_.size() == std::size_t(n_)) return;
      bits_.resize(std::size_t(n_));
      ops::to_bf16(Dev{}, floats_.data(), n_, bits_.data());
      floats_ = Floats();
    }
  }
  // The values as T for the backward: the kept buffer, or its bf16 decoded (kept until
  // clear()).
  const T* view() {
    if (!bf16_) return values_.data();
    if constexpr (std::is_same_v<T, float>) {
      if (bits_only()) {
        floats_.resize(std::size_t(n_));
        ops::to_float(Dev{}, bits_.data(), n_, floats_.data());
      }
    }
    return floats_.data();
  }
  // f(values, first, count) over consecutive blocks of at most `block` values (block > 0),
  // in order: in the bf16 mode each decoded into scratch of one block, so a backward that
  // reads the values a block at a time (row by row) holds no whole decoded copy; else the
  // whole kept buffer in one call.
  template <typename F>
  void for_blocks(std::int64_t block, F&& f) {
    if (!bits_only()) {
      f(static_cast<const T*>(values()), std::int64_t(0), n_);
      return;
    }
    if constexpr (std::is_same_v<T, float>) {
      Floats scratch;
      scratch.resize(std::size_t(std::min(block, n_)));
      for (std::int64_t i = 0; i < n_; i += block) {
        const std::int64_t m = std::min(block, n_ - i);
        ops::to_float(Dev{}, bits_.data() + i, m, scratch.data());
        f(static_cast<const T*>(scratch.data()), i, m);
      }
    }
  }
  // Frees the decoded copy view() made in the bf16 mode; the kept values stay, for another
  // view(). (Otherwise nothing: the kept buffer is the one view() gives.)
  void release_view() {
    if (bf16_ && bits_.size() == std::size_t(n_)) floats_ = Floats();
  }
  void clear() {
    values_ = Buffer<Dev, T>();
    floats_ = Floats();
    bits_ = Buffer<Dev, Bf16>();
    n_ = 0;
  }
  std::int64_t size() const { return n_; }
  // Bytes held now: the float buffers and the bf16 one.
  std::int64_t bytes() const {
    return std::int64_t((values_.size() + floats_.size()) * sizeof(T) +
                        bits_.size() * sizeof(Bf16));
  }
  bool bf16() const { return bf16_; }

 private:
  // The bf16 mode's float copies: fresh pages on the host (FreshPages), Dev's buffers
  // elsewhere.
  using Floats = std::conditional_t<std::is_same_v<Dev, Host>, FreshPages<T>, Buffer<Dev, T>>;

  // The bf16 mode after seal(), with no decoded copy: the values are the bf16 ones alone.
  bool bits_only() const {
    return bf16_ && bits_.size() == std::size_t(n_) && floats_.size() != std::size_t(n_);
  }

  Buffer<Dev, T> values_;  // outside the bf16 mode: the forward's buffer, kept as it is
  Floats floats_;          // the bf16 mode: the forward's values, or the backward's decoded copy
  Buffer<Dev, Bf16> bits_;
  std::int64_t n_ = 0;
  bool bf16_ = false;
};

}  // namespace gdn
