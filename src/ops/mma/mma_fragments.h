// Where each lane of a warp holds its elements of the tensor-core tile
// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 (PTX ISA, "Matrix fragments for
// mma.m16n8k16 with floating point type"): D (16 x 8, fp32) = A (16 x 16, bf16) B (16 x 8,
// bf16) + C. With g = lane / 4 (the group) and t = lane % 4 (the thread in the group):
//   A, 8 elements in 4 registers of two bf16: rows g (registers 0, 2) and g + 8 (1, 3),
//      columns 2t, 2t + 1 (registers 0, 1) and 2t + 8, 2t + 9 (registers 2, 3);
//   B, 4 elements in 2 registers: rows 2t, 2t + 1 (register 0) and 2t + 8, 2t + 9
//      (register 1), column g;
//   C and D, 4 floats: rows g (0, 1) and g + 8 (2, 3), columns 2t, 2t + 1.
// One source for the device kernels that load and store fragments (mma_bf16.cuh) and for
// the CPU tests that emulate a warp lane by lane (tests/unit/test_mma_emulation.cpp), so
// the index math the GPU runs is checked here. docs/design.md §2f.
#pragma once

#include <cstdint>

#include "core/bf16.h"
#include "core/error.h"
#include "core/hd.h"

namespace gdn::mma {

constexpr int kM = 16, kN = 8, kK = 16;  // the tile shape
constexpr int kWarp = 32;

// Element e (0-7) of lane's A fragment: its row and column in the 16 x 16 tile.
GDN_HD constexpr int a_row(int lane, int e) {
  return lane / 4 + ((e / 2) % 2) * 8;
}
GDN_HD constexpr int a_col(int lane, int e) {
  return (lane % 4) * 2 + e % 2 + (e / 4) * 8;
}
// Element e (0-3) of lane's B fragment: its row (k) and column (n) in the 16 x 8 tile.
GDN_HD constexpr int b_row(int lane, int e) {
  return (lane % 4) * 2 + e % 2 + (e / 2) * 8;
}
GDN_HD constexpr int b_col(int lane, int /*e*/) {
  return lane / 4;
}
// Element e (0-3) of lane's C / D fragment: its row and column in the 16 x 8 tile.
GDN_HD constexpr int c_row(int lane, int e) {
  return lane / 4 + (e / 2) * 8;
}
GDN_HD constexpr int c_col(int lane, int e) {
  return (lane % 4) * 2 + e % 2;
}

// Two floats rounded to bf16 (to nearest, ties to even) in one register, the lower-numbered
// element in the low half (PTX's packing). On the GPU one cvt.rn.bf16x2.f32, which gives the
// software rounding's bits for every value but NaN (a NaN comes out as the canonical one).
GDN_HD inline std::uint32_t pack_bf16(float lo, float hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  std::uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
#else
  return std::uint32_t(to_bf16(lo).bits) | (std::uint32_t(to_bf16(hi).bits) << 16);
#endif
}
// Two adjacent bf16 of memory in one register, no rounding: one 32-bit load on the GPU (p
// 4-byte aligned).
GDN_HD inline std::uint32_t pair_at(const Bf16* p) {
#ifdef __CUDA_ARCH__
  return *reinterpret_cast<const std::uint32_t*>(p);
#else
  // The CPU emulation of the kernels checks what the GPU would fault on.
  GDN_CHECK(reinterpret_cast<std::uintptr_t>(p) % 4 == 0,
            "mma::pair_at: a bf16 pair at an address not 4-byte aligned (an odd leading "
            "dimension or tile offset)");
  return std::uint32_t(p[0].bits) | (std::uint32_t(p[1].bits) << 16);
#endif
}
GDN_HD inline float unpack_lo(std::uint32_t r) {
  return to_float(Bf16{std::uint16_t(r & 0xffffu)});
}
GDN_HD inline float unpack_hi(std::uint32_t r) {
  return to_float(Bf16{std::uint16_t(r >> 16)});
}

struct FragA {
  std::uint32_t r[4];
};
struct FragB {
  std::uint32_t r[2];
};
struct FragC {
  float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
};

// ldmatrix.sync.aligned.m8n8.xN[.trans].shared.b16: N 8 x 8 bf16 matrices of shared memory
// into N registers of every lane. Lane l supplies the address of row l % 8 of matrix l / 8
// (row_at(matrix, row): 16 bytes, 16-byte aligned; lanes past 8 N repeat valid rows).
// Lane (g, t) = (l / 4, l % 4) receives from matrix m row g, elements 2t and 2t + 1, or with
// kTrans column g, rows 2t and 2t + 1 (the pair across rows, which 16-bit loads would
// otherwise gather). The emulation gathers what each lane would receive from the rows the
// other lanes supply, so the address map is checked on the CPU.
template <int N, bool kTrans, typename RowAt>
GDN_HD void load_matrices(int lane, RowAt row_at, std::uint32_t (&out)[N]) {
  static_assert(N == 1 || N == 2 || N == 4);
#if defined(__CUDA_ARCH__)
  const auto a = static_cast<unsigned>(__cvta_generic_to_shared(row_at((lane / 8) % N, lane % 8)));
  if constexpr (N == 4 && kTrans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(out[0]), "=r"(out[1]), "=r"(out[2]), "=r"(out[3])
                 : "r"(a));
  else if constexpr (N == 4)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(out[0]), "=r"(out[1]), "=r"(out[2]), "=r"(out[3])
                 : "r"(a));
  else if constexpr (N == 2 && kTrans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];"
                 : "=r"(out[0]), "=r"(out[1])
                 : "r"(a));
  else if constexpr (N == 2)
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];"
                 : "=r"(out[0]), "=r"(out[1])
                 : "r"(a));
  else if constexpr (kTrans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];"
                 : "=r"(out[0])
                 : "r"(a));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];" : "=r"(out[0]) : "r"(a));
#else
  const int g = lane / 4, t = lane % 4;
  for (int m = 0; m < N; ++m) {
    for (int row = 0; row < 8; ++row)
      GDN_CHECK(reinterpret_cast<std::uintptr_t>(row_at(m, row)) % 16 == 0,
                "mma::load_matrices: a row of an 8 x 8 matrix at an address not 16-byte aligned "
                "(a leading dimension or tile offset not a multiple of 8)");
    if (kTrans)
      out[m] = std::uint32_t(row_at(m, 2 * t)[g].bits) |
               (std::uint32_t(row_at(m, 2 * t + 1)[g].bits) << 16);
    else
      out[m] = std::uint32_t(row_at(m, g)[2 * t].bits) |
               (std::uint32_t(row_at(m, g)[2 * t + 1].bits) << 16);
  }
#endif
}

// A bf16 tile in shared memory as an mma operand: element (r, c) at m[r * ld + c] (Rows) or
// at m[c * ld + r] (Cols, the tile's transpose). A fragment register holds two elements
// adjacent along k: along a row of Rows for A (a_pair) and of Cols for B (b_pair), one
// 32-bit load (even ld, 4-byte aligned m); across rows otherwise (B of Rows, A of Cols),
// where the whole fragment is one ldmatrix .trans (load_matrices; ld and the tile's offset
// multiples of 8: 16-byte rows). No rounding: the values are bf16 already. at(r, c)
// offsets the view.
struct Rows {
  const Bf16* m;
  int ld;
  GDN_HD float operator()(int r, int c) const { return to_float(m[r * ld + c]); }
  GDN_HD Rows at(int r, int c) const { return {m + r * ld + c, ld}; }
  GDN_HD std::uint32_t a_pair(int i, int p) const { return pair_at(m + i * ld + p); }
  // B (p, j) = m[p ld + j]: matrix q holds k rows 8 q + [0, 8); the pairs lie across them.
  GDN_HD FragB b_frag(int lane) const {
    FragB f;
    load_matrices<2, true>(
        lane, [&](int q, int row) { return m + (8 * q + row) * ld; }, f.r);
    return f;
  }
};
struct Cols {
  const Bf16* m;
  int ld;
  GDN_HD float operator()(int r, int c) const { return to_float(m[c * ld + r]); }
  GDN_HD Cols at(int r, int c) const { return {m + c * ld + r, ld}; }
  // A (i, p) = m[p ld + i]: matrix q holds k rows 8 (q / 2) + [0, 8), columns 8 (q % 2) on.
  GDN_HD FragA a_frag(int lane) const {
    FragA f;
    load_matrices<4, true>(
        lane, [&](int q, int row) { return m + (8 * (q / 2) + row) * ld + 8 * (q % 2); }, f.r);
    return f;
  }
  GDN_HD std::uint32_t b_pair(int p, int j) const { return pair_at(m + j * ld + p); }
};
// Two adjacent floats rounded into one register: one 64-bit load and one cvt on the GPU
// (p 8-byte aligned).
GDN_HD inline std::uint32_t pack_pair_at(const float* p) {
#ifdef __CUDA_ARCH__
  const float2 v = *reinterpret_cast<const float2*>(p);
  return pack_bf16(v.x, v.y);
#else
  GDN_CHECK(reinterpret_cast<std::uintptr_t>(p) % 8 == 0,
            "mma::pack_pair_at: a float pair at an address not 8-byte aligned (an odd leading "
            "dimension or tile offset)");
  return pack_bf16(p[0], p[1]);
#endif
}
// An fp32 tile as an mma operand, rounded to bf16 as it is loaded: element (r, c) at
// m[r * ld + c] (FloatRows) or m[c * ld + r] (FloatCols). A register's two elements are one
// 64-bit load where they sit side by side (even ld, 8-byte aligned m), two otherwise.
struct FloatRows {
  const float* m;
  int ld;
  GDN_HD float operator()(int r, int c) const { return m[r * ld + c]; }
  GDN_HD FloatRows at(int r, int c) const { return {m + r * ld + c, ld}; }
  GDN_HD std::uint32_t a_pair(int i, int p) const { return pack_pair_at(m + i * ld + p); }
  GDN_HD std::uint32_t b_pair(int p, int j) const {
    return pack_bf16(m[p * ld + j], m[(p + 1) * ld + j]);
  }
};
struct FloatCols {
  const float* m;
  int ld;
  GDN_HD float operator()(int r, int c) const { return m[c * ld + r]; }
  GDN_HD FloatCols at(int r, int c) const { return {m + c * ld + r, ld}; }
  GDN_HD std::uint32_t a_pair(int i, int p) const {
    return pack_bf16(m[p * ld + i], m[(p + 1) * ld + i]);
  }
  GDN_HD std::uint32_t b_pair(int p, int j) const { return pack_pair_at(m + j * ld + p); }
};

// Any other operand is an accessor f(r, c) -> float, rounded to bf16 as it is loaded (two at
// a time: pack_bf16); offset(f, r0, c0) is the same for views and accessors.
template <typename F>
GDN_HD auto offset(const F& f, int r0, int c0) {
  if constexpr (requires { f.at(r0, c0); })
    return f.at(r0, c0);
  else
    return [f, r0, c0](int r, int c) { return f(r0 + r, c0 + c); };
}

// lane's A fragment of the 16 x 16 tile whose element (i, p) is at(i, p).
template <typename At>
GDN_HD FragA load_a(int lane, const At& at) {
  if constexpr (requires { at.a_frag(lane); }) {
    return at.a_frag(lane);
  } else {
    FragA f;
    for (int r = 0; r < 4; ++r) {
      const int i = a_row(lane, 2 * r), p = a_col(lane, 2 * r);  // and (i, p + 1)
      if constexpr (requires { at.a_pair(i, p); })
        f.r[r] = at.a_pair(i, p);
      else
        f.r[r] = pack_bf16(at(i, p), at(i, p + 1));
    }
    return f;
  }
}
// lane's B fragment of the 16 x 8 tile whose element (p, j) is at(p, j).
template <typename At>
GDN_HD FragB load_b(int lane, const At& at) {
  if constexpr (requires { at.b_frag(lane); }) {
    return at.b_frag(lane);
  } else {
    FragB f;
    for (int r = 0; r < 2; ++r) {
      const int p = b_row(lane, 2 * r), j = b_col(lane, 2 * r);  // and (p + 1, j)
      if constexpr (requires { at.b_pair(p, j); })
        f.r[r] = at.b_pair(p, j);
      else
        f.r[r] = pack_bf16(at(p, j), at(p + 1, j));
    }
    return f;
  }
}
// Rows and Cols whose every fragment is one ldmatrix (the two above for the pairs along
// rows, the .trans ones of Rows and Cols across them): views of tiles whose leading
// dimension the compiler knows.
struct MatrixRows : Rows {
  GDN_HD MatrixRows at(int r, int c) const { return {Rows::at(r, c)}; }
  GDN_HD FragA a_frag(int lane) const {
    FragA f;  // matrix q: rows 8 (q % 2) + [0, 8), columns 8 (q / 2) + [0, 8)
    load_matrices<4, false>(
        lane, [&](int q, int row) { return m + (8 * (q % 2) + row) * ld + 8 * (q / 2); }, f.r);
    return f;
  }
};
struct MatrixCols : Cols {
  GDN_HD MatrixCols at(int r, int c) const { return {Cols::at(r, c)}; }
  GDN_HD FragB b_frag(int lane) const {
    FragB f;  // matrix q: rows j in [0, 8), k columns 8 q + [0, 8)
    load_matrices<2, false>(
        lane, [&](int q, int row) { return m + row * ld + 8 * q; }, f.r);
    return f;
  }
};
// Calls put(i, j, value) for lane's four elements of a C / D tile.
template <typename Put>
GDN_HD void store_c(int lane, const FragC& f, Put put) {
  for (int e = 0; e < 4; ++e) put(c_row(lane, e), c_col(lane, e), f.c[e]);
}

// A 16 x 16 product tile D (fp32 accumulators, as a C fragment) turned into the A operand
// of the next mma without shared memory: the C layouts of two side-by-side 16 x 8 tiles
// (columns 0-7 and 8-15) hold, lane by lane, exactly the A layout's elements (rows g and
// g + 8, columns 2t, 2t + 1 and 2t + 8, 2t + 9). Flash attention's P V uses it.
GDN_HD inline FragA c_pair_to_a(const FragC& left, const FragC& right) {
  FragA f;
  f.r[0] = pack_bf16(left.c[0], left.c[1]);
  f.r[1] = pack_bf16(left.c[2], left.c[3]);
  f.r[2] = pack_bf16(right.c[0], right.c[1]);
  f.r[3] = pack_bf16(right.c[2], right.c[3]);
  return f;
}

}  // namespace gdn::mma
