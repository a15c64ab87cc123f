// The FMA peak microbenchmark (fma_peak.h), with the GEMM's own vector type and fmadd
// (simd.h): it measures the instruction the GEMM micro-kernel issues.
#include "ops/gemm/fma_peak.h"

#include <omp.h>

#include <algorithm>
#include <chrono>

#include "ops/gemm/simd.h"

namespace gdn::la {

namespace {

using simd::Vec;

// Independent accumulator chains: the FMA latency (4-5 cycles) times the FMA ports (2)
// needs about 10. 16 leaves headroom in AVX-512's 32 registers; AVX2's 16 take 12 plus
// the two operands.
constexpr int kChains = simd::kVecRegs >= 32 ? 16 : 12;
constexpr int kInner = 256;  // FMAs per chain between clock reads

// `blocks` x kInner x kChains vector FMAs; returns their sum so nothing is dead code.
template <typename T>
T fma_chains(long blocks, T seed) {
  Vec<T> acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = simd::broadcast(seed * T(c + 1));
  // a * acc + b with |a| < 1 keeps the values bounded (no overflow, no subnormals).
  const Vec<T> a = simd::broadcast(T(0.999) + seed * T(1e-9)), b = simd::broadcast(T(1e-3));
  for (long blk = 0; blk < blocks; ++blk) {
    for (int i = 0; i < kInner; ++i) {
#pragma GCC unroll 16
      for (int c = 0; c < kChains; ++c) acc[c] = simd::fmadd(a, acc[c], b);
    }
    // The accumulators must be in memory here, so the compiler can neither collapse the
    // block loop into a closed form nor drop it (a store per chain per kInner FMAs).
    __asm__ volatile("" : : "r"(acc) : "memory");
  }
  Vec<T> s = acc[0];
  for (int c = 1; c < kChains; ++c) s += acc[c];
  T out = 0;
  for (int l = 0; l < simd::kLanes<T>; ++l) out += s[l];
  return out;
}

}  // namespace

template <typename T>
FmaPeak measure_fma_peak(double seconds) {
  constexpr int L = simd::kLanes<T>;
  const double flops_per_block = 2.0 * L * kChains * kInner;
  // Calibrate the block count on one short run, then time three runs of ~seconds / 3 on all
  // threads at once and keep the fastest (a neighbour's burst only slows a run down).
  volatile T sink = 0;
  long blocks = 64;
  for (;;) {
    const auto t0 = std::chrono::steady_clock::now();
    sink = sink + fma_chains<T>(blocks, T(1e-3));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > 0.01 || blocks > (1L << 30)) {
      blocks = std::max(1L, long(double(blocks) * (seconds / 3) / s));
      break;
    }
    blocks *= 4;
  }
  FmaPeak best{0, 1, L, 0};
  for (int run = 0; run < 3; ++run) {
    T part = 0;
    int team = 1;
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel reduction(+ : part)
    {
#pragma omp single nowait
      team = omp_get_num_threads();
      part += fma_chains<T>(blocks, T(1e-3) * T(omp_get_thread_num() + 1));
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    sink = sink + part;
    const double gflops = flops_per_block * double(blocks) * team / s * 1e-9;
    if (gflops > best.gflops) best = {gflops, team, L, s};
  }
  return best;
}

template FmaPeak measure_fma_peak<float>(double);
template FmaPeak measure_fma_peak<double>(double);

}  // namespace gdn::la
