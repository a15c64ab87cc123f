// The algebra of affine maps x -> A x + B on K x V states, one (batch, head) block at a
// time, on the host (docs/design.md §3-4, §4b): A is K x K, B and x are K x V, row-major.
// Written once here and used by both scans that compose such maps: the cross-rank scans
// (pair_scan_host.cpp) and the scans over the pieces of one rank's slice (split_scan.h).
#pragma once

namespace gdn::pairs {

// x <- op(A) x + B, op(A) = A or A^T; tmp: K * V elements of scratch.
template <typename T>
void apply(bool transpose, const T* A, const T* B, int K, int V, T* x, T* tmp);

// (A, B) = outer after inner = (Ao Ai, Ao Bi + Bo); A null: the offset B alone. The outputs
// must not alias the inputs.
template <typename T>
void compose(const T* Ao, const T* Bo, const T* Ai, const T* Bi, int K, int V, T* A, T* B);

// dst = src^T for a K x K block; dst must not alias src.
template <typename T>
void transpose(const T* src, int K, T* dst);

}  // namespace gdn::pairs
