// One chunk's WY factors as the bf16 register kernels keep them (PassArgs::bf16_factors):
// w, k~, q_g (C x K) and P (C x C) in bf16, the form every reader takes them in (mma
// operands only: a float copy would be rounded at each load); u (C x V) in bf16 too, which
// the bf16 mode rounds wherever it is made (ChunkKernel::wy on a bf16 GEMM, as fla keeps
// it), so the epilogues v_new = u - w h read the same values from either form; gamma in
// fp32; and T = (I + L)^{-1} (C x C) in bf16, which only backward part 2 reads (as an mma
// operand, so rounded it keeps the bits), instead of inverting again. At C = 64,
// K = V = 128 a block is 56% of ChunkFactors<float>'s bytes; the passes
// that read the factors (the walks re-read them once per column tile) move that much less.
// Every section starts 16-byte aligned in a 16-byte-aligned block, so the cp.async stages
// copy them as they lie.
#pragma once

#include <cstddef>
#include <type_traits>

#include "core/bf16.h"
#include "core/hd.h"

namespace gdn {

struct Bf16Factors {
  int C, K, V;
  // A block's size in floats (the unit of PassArgs::fsize), a multiple of 4.
  GDN_HD std::size_t floats() const { return (bf16_floats() + 1 + 3) / 4 * 4; }
  // F is float* or const float*; the bf16 sections keep its constness.
  template <typename F>
  GDN_HD auto w(F f) const {
    return reinterpret_cast<BfOf<F>>(f);
  }
  template <typename F>
  GDN_HD auto kt(F f) const {
    return w(f) + std::size_t(C) * K;
  }
  template <typename F>
  GDN_HD auto qg(F f) const {
    return w(f) + 2 * std::size_t(C) * K;
  }
  template <typename F>
  GDN_HD auto P(F f) const {
    return w(f) + 3 * std::size_t(C) * K;
  }
  template <typename F>
  GDN_HD auto u(F f) const {
    return w(f) + 3 * std::size_t(C) * K + std::size_t(C) * C;
  }
  template <typename F>
  GDN_HD auto Tinv(F f) const {
    return u(f) + std::size_t(C) * V;
  }
  template <typename F>
  GDN_HD F gamma_at(F f) const {
    return f + bf16_floats();
  }
  GDN_HD float gamma(const float* f) const { return *gamma_at(f); }

 private:
  template <typename F>
  using BfOf = std::conditional_t<std::is_const_v<std::remove_pointer_t<F>>, const Bf16*, Bf16*>;
  // The bf16 sections in floats: 3 C K + 2 C^2 + C V halves (even: C is).
  GDN_HD std::size_t bf16_floats() const {
    return (3 * std::size_t(C) * K + 2 * std::size_t(C) * C + std::size_t(C) * V) / 2;
  }
};

}  // namespace gdn
