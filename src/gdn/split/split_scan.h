// The scans over the pieces of one rank's slice (the intra-rank split, docs/design.md
// §4b), in shared memory on the host. They compose the same maps as the cross-rank scans
// (pair_scan.h: (M, U) forward, (M^T, D) backward) with the same algebra (pair_algebra.h),
// on one of two schedules:
//   serial chain: the seed note's correction chain. Piece j waits for the state of piece
//     j - 1: one apply (K x K times K x V) per piece, in order; parallel over (batch, head)
//     only.
//   log depth: a Hillis-Steele scan of the pairs, ceil(log2 n) rounds of compositions
//     (K x K times K x (K + V)) in parallel over (batch, head, piece), then one apply per
//     piece. About n log2 n compositions instead of n applies, for a chain of log2 n.
// Both are exact up to rounding; each gives the same bits for any number of threads.
#pragma once

#include <vector>

#include "gdn/pairs/pair_scan.h"

namespace gdn {

// n maps in scan order, each given as [BH, K, K] and [BH, K, V] blocks: f_j(x) = A_j x + B_j,
// or A_j^T x + B_j with `transpose` (the adjoint maps of the backward).
template <typename T>
struct PiecePairs {
  std::vector<const T*> A, B;
  bool transpose = false;
  int size() const { return int(A.size()); }
};

// out[j] = f_j(... f_0(x_in)) for j = 0 .. n - 1, each [BH, K, V]; x_in null: zero.
template <typename T>
void scan_pieces(const PiecePairs<T>& f, const PairDims& d, bool log_depth, const T* x_in,
                 const std::vector<T*>& out);

// The whole composition f_{n-1} o ... o f_0 as one pair: A [BH, K, K], B [BH, K, V].
// n >= 1; forward maps only (not transposed). Serial: n - 1 compositions in order; log
// depth: a pairwise tree of ceil(log2 n) levels.
template <typename T>
void fold_pieces(const PiecePairs<T>& f, const PairDims& d, bool log_depth, T* A, T* B);

}  // namespace gdn
