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

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/bf16.h"
#include "core/device.h"
#include "core/precision.h"
#include "ops/convert/convert.h"

namespace gdn {

template <typename T, typename Dev>
class Kept {
 public:
  // n values for the forward to write (Dev memory). Decides the storage: bf16 when p is
  // Precision::bf16 and T is float.
  T* open(std::int64_t n, Precision p) {
    bf16_ = std::is_same_v<T, float> && p == Precision::bf16;
    bits_ = Buffer<Dev, Bf16>();
    values_.resize(std::size_t(n));
    n_ = n;
    return values_.data();
  }
  // The forward's values, until seal().
  T* values() { return values_.data(); }
  // The forward is done with the values: in the bf16 mode they move to bf16 (rounded to
  // nearest) and the float buffer is freed.
  void seal() {
    if constexpr (std::is_same_v<T, float>) {
      if (!bf16_ || bits_.size() == std::size_t(n_)) return;
      bits_.resize(std::size_t(n_));
      ops::to_bf16(Dev{}, values_.data(), n_, bits_.data());
      values_ = Buffer<Dev, T>();
    }
  }
  // The values as T for the backward: the kept buffer, or its bf16 decoded (kept until
  // clear()).
  const T* view() {
    if constexpr (std::is_same_v<T, float>) {
      if (bits_only()) {
        values_.resize(std::size_t(n_));
        ops::to_float(Dev{}, bits_.data(), n_, values_.data());
      }
    }
    return values_.data();
  }
  // f(values, first, count) over consecutive blocks of at most `block` values (block > 0),
  // in order: in the bf16 mode each decoded into scratch of one block, so a backward that
  // reads the values a block at a time (row by row) holds no whole decoded copy; else the
  // whole kept buffer in one call.
  template <typename F>
  void for_blocks(std::int64_t block, F&& f) {
    if (!bits_only()) {
      f(static_cast<const T*>(values_.data()), std::int64_t(0), n_);
      return;
    }
    if constexpr (std::is_same_v<T, float>) {
      Buffer<Dev, T> scratch(std::size_t(std::min(block, n_)));
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
    if (bf16_ && bits_.size() == std::size_t(n_)) values_ = Buffer<Dev, T>();
  }
  void clear() {
    values_ = Buffer<Dev, T>();
    bits_ = Buffer<Dev, Bf16>();
    n_ = 0;
  }
  std::int64_t size() const { return n_; }
  // Bytes held now: the float buffer and the bf16 one.
  std::int64_t bytes() const {
    return std::int64_t(values_.size() * sizeof(T) + bits_.size() * sizeof(Bf16));
  }
  bool bf16() const { return bf16_; }

 private:
  // The bf16 mode after seal(), with no decoded copy: the values are the bf16 ones alone.
  bool bits_only() const {
    return bf16_ && bits_.size() == std::size_t(n_) && values_.size() != std::size_t(n_);
  }

  Buffer<Dev, T> values_;  // float values: the forward's, or the backward's decoded copy
  Buffer<Dev, Bf16> bits_;
  std::int64_t n_ = 0;
  bool bf16_ = false;
};

}  // namespace gdn
