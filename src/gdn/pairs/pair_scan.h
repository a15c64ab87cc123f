// Scans over affine maps x -> A x + B, one (A: K x K, B: K x V) pair per (batch, head),
// stored as [BH, K, K] then [BH, K, V]. The forward scan composes the ranks' (M_r, U_r)
// in rank order to find each rank's entry state (docs/design.md §3); the backward scan
// composes (M_r^T, D_r) in reverse rank order to find each rank's exit adjoint (§4).
// These scan pairs a rank already holds (gathered by cp/gdn_cp.cpp); the scan that
// exchanges them on the way is cp/log_depth_scan.h, whose local steps are here too. Pointers live
// in the device's memory; the pointer lists themselves are host vectors.
#pragma once

#include <cstdint>
#include <vector>

#include "core/device.h"
#include "core/hd.h"

namespace gdn {

struct PairDims {
  int BH, K, V;
  GDN_HD std::int64_t a_elems() const { return std::int64_t(BH) * K * K; }
  GDN_HD std::int64_t b_elems() const { return std::int64_t(BH) * K * V; }
  GDN_HD std::int64_t pair_elems() const { return a_elems() + b_elems(); }
};

// scan_states and scan_adjoints: linear scans over pairs every rank already holds (from
// an all-gather): A[i], B[i] is rank i's map.
//   scan_states:   x = f_{r-1}(... f_0(0)), the state entering rank r.
//   scan_adjoints: lambda = g_{r+1}(... g_{P-1}(0)) with g_i(y) = A_i^T y + B_i.
template <typename T>
void scan_states(Host, const std::vector<const T*>& A, const std::vector<const T*>& B, int r,
                 const PairDims& d, T* x);
template <typename T>
void scan_states(Cuda, const std::vector<const T*>& A, const std::vector<const T*>& B, int r,
                 const PairDims& d, T* x);
template <typename T>
void scan_adjoints(Host, const std::vector<const T*>& A, const std::vector<const T*>& B, int r,
                   const PairDims& d, T* lambda);
template <typename T>
void scan_adjoints(Cuda, const std::vector<const T*>& A, const std::vector<const T*>& B, int r,
                   const PairDims& d, T* lambda);

// The local steps of the log-depth scan (cp/log_depth_scan.cpp) on pairs stored [BH, K, K]
// then [BH, K, V] in one block of d.pair_elems() elements:
//   start_scan:    own = (op(A), B), op(A) = A^T when `reverse`, else A; prefix = (I, 0).
//   compose_pairs: dst = outer after inner; dst may be outer or inner (the result goes
//                  through tmp, pair_elems() elements). offset_only: dst's offsets alone
//                  (its maps are left as they were: a last composition, whose map no one
//                  reads, skips the K x K by K x K products).
template <typename T>
void start_scan(Host, const T* A, const T* B, const PairDims& d, bool reverse, T* own, T* prefix);
template <typename T>
void start_scan(Cuda, const T* A, const T* B, const PairDims& d, bool reverse, T* own, T* prefix);
template <typename T>
void compose_pairs(Host, const T* outer, const T* inner, const PairDims& d, bool offset_only,
                   T* dst, T* tmp);
template <typename T>
void compose_pairs(Cuda, const T* outer, const T* inner, const PairDims& d, bool offset_only,
                   T* dst, T* tmp);

}  // namespace gdn
