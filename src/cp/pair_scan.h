// Scans over affine maps x -> A x + B, one (A: K x K, B: K x V) pair per (batch, head),
// stored as [BH, K, K] then [BH, K, V]. The forward scan composes the ranks' (M_r, U_r)
// in rank order to find each rank's entry state (DESIGN.md section 3); the backward scan
// composes (M_r^T, D_r) in reverse rank order to find each rank's exit adjoint (section 4).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "comm/communicator.h"

namespace gdn {

struct PairDims {
  int BH, K, V;
  std::int64_t a_elems() const { return std::int64_t(BH) * K * K; }
  std::int64_t b_elems() const { return std::int64_t(BH) * K * V; }
  std::int64_t pair_elems() const { return a_elems() + b_elems(); }
};

// Linear scans over pairs every rank already holds (from an all-gather): pairs[i] is
// rank i's map. Forward: x_r = f_{r-1}(... f_0(0)), the state entering rank r.
template <typename T>
void scan_states_from(const std::vector<const T*>& A, const std::vector<const T*>& B, int r,
                      const PairDims& d, T* x);
// Backward: lambda_r = g_{r+1}(... g_{P-1}(0)) with g_i(y) = A_i^T y + B_i.
template <typename T>
void scan_adjoints_from(const std::vector<const T*>& A, const std::vector<const T*>& B, int r,
                        const PairDims& d, T* lambda);

// The same two results by a Hillis-Steele scan over point-to-point messages:
// ceil(log2 P) rounds, at most one pair sent per round. A, B: this rank's map.
// reverse = false: x -> A x + B, composed in rank order (forward states).
// reverse = true:  y -> A^T y + B, composed in reverse rank order (backward adjoints).
template <typename T>
void log_depth_exclusive_scan(Communicator& comm, const T* A, const T* B, const PairDims& d,
                              bool reverse, const std::string& site, T* out);

}  // namespace gdn
