// The GEMM kernels of one instruction set, as a table of plain functions. Each table is
// compiled in its own file with that ISA's flags (gemm_avx2.cpp, gemm_avx512.cpp,
// gemm_avx512bf16.cpp); gemm_path.h picks one at run time from what the CPU reports, so one
// binary runs at full speed on an AVX2 node and on an AVX-512 node alike.
//
// Those files must not emit a function that a file of another ISA could link to: they
// include only this header and the kernel bodies (register_gemm.h, simd.h, whose helpers
// sit in an ISA-named namespace), call nothing from the standard library, and take their
// scratch from the caller. test_gemm_isolation checks their objects for weak symbols.
#pragma once

#include "core/bf16.h"
#include "ops/gemm/structure.h"

namespace gdn::la {

// la::gemm's contract (gemm.h); `pack` holds at least k * 2 * lanes elements.
template <typename T>
using GemmFn = void (*)(bool ta, bool tb, int m, int n, int k, T alpha, const T* A, int lda,
                        const T* B, int ldb, T beta, T* C, int ldc, Structure s, T* pack);

// C[m x n] = beta C + A B with bf16 operands and float sums (gemm.h, gemm_bf16). k is even;
// A holds rows of k values (lda), B the k x n operand in pairs (ldb, see gemm_bf16).
// `scratch` holds at least bf16_scratch(m, n, k, lanes) floats.
using Bf16GemmFn = void (*)(int m, int n, int k, const Bf16* A, int lda, const Bf16* B, int ldb,
                            float beta, float* C, int ldc, float* scratch);

inline long bf16_scratch(int m, int n, int k, int lanes) {
  return (long(m) + n + 2L * lanes) * k;
}

// The FMA peak's chains (fma_peak.h): `blocks` x kFmaInner x fma_chains vector FMAs.
inline constexpr int kFmaInner = 256;

struct GemmKernels {
  int lanes;       // floats per vector: a strip of C two vectors wide fills a register tile
  int tile_rows;   // rows of C per register tile
  int fma_chains;  // independent FMA chains of the peak benchmark
  GemmFn<float> sgemm;
  GemmFn<double> dgemm;
  Bf16GemmFn bgemm;
  float (*fma_chains_f32)(long blocks, float seed);
  double (*fma_chains_f64)(long blocks, double seed);
};

#if defined(GDN_GEMM_X86)
extern const GemmKernels kGemmAvx2;        // AVX2 + FMA (x86-64-v3), 16 registers
extern const GemmKernels kGemmAvx512;      // AVX-512F, 32 registers; bf16 widened on load
extern const GemmKernels kGemmAvx512Bf16;  // as kGemmAvx512, bf16 pairs by vdpbf16ps
#else
extern const GemmKernels kGemmGeneric;  // the build's own flags (not an x86-64 CPU)
#endif

}  // namespace gdn::la
