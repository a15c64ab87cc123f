// The FLOPs of the chunked passes (docs/design.md §2, §2b, §3), for benchmarks that report
// GFLOP/s. Counted per chunk of C rows and summed over B * Hv * ceil(T / C) chunks, with a
// multiply-add as 2 FLOPs and the products as the kernel computes them (ChunkKernel):
// a triangular operand or a lower-triangle-only result counts its nonzero half, C^2 n
// for C x C x n (the diagonal's C n is dropped). Only the matrix products are counted:
// the elementwise work (decay terms, scalings, row sums) is O(C^2 + C (K + V)) per chunk,
// under 3% of the total at the benchmark shapes.
//
//   prepare  (the WY factors)     3 C^2 K + C^2 V + C^3 / 3
//              K K^T, Q K^T (lower): 2 C^2 K; (I + L)^-1: C^3 / 3; u = T bV: C^2 V;
//              w = T bGK: C^2 K
//   output   (step with o)        6 C K V + C^2 V
//              v_new = u - w h, q_g h, h_next: 3 x 2 C K V; P v_new: C^2 V
//   state    (phase 1 of CP)      4 C K^2 + 4 C K V
//              the transition M <- gamma M - k~^T (w M): 4 C K^2; U: v_new, h_next: 4 C K V
//   adjoint  (CP backward phase 1) 6 C K V + C^2 V
//              k~ mu, q_g^T dO, w^T dv_new: 3 x 2 C K V; P^T dO (upper triangle): C^2 V
//   backward (of one chunk)       prepare + 14 C K V + 4 C^2 V + 6 C^2 K
//              the factors again, v_new and seven C x K x V products: 14 C K V;
//              dP, P^T dO, T^T du, dVb u^T: 4 C^2 V; dP K, dP^T Q, T^T dw, dKb w^T: 4 C^2 K,
//              and the symmetric (G + G^T) K: 2 C^2 K
//
// So the single-rank forward (prepare fused into the output pass) is prepare + output and
// forward + backward is 2 prepare + output + the rest of backward.
#pragma once

#include <cstdint>

#include "gdn/problem.h"

namespace gdn {

struct ChunkFlops {
  double prepare, output, state, adjoint, backward;  // FLOPs of all chunks, per pass
  double forward() const { return prepare + output; }
  double forward_backward() const { return forward() + backward; }
};

inline ChunkFlops chunk_flops(const GdnProblem& p) {
  const double C = p.chunk_size, K = p.K, V = p.V;
  const double chunks = double(p.B) * p.Hv * double((p.T + p.chunk_size - 1) / p.chunk_size);
  const double prep = 3 * C * C * K + C * C * V + C * C * C / 3;
  ChunkFlops f;
  f.prepare = chunks * prep;
  f.output = chunks * (6 * C * K * V + C * C * V);
  f.state = chunks * (4 * C * K * K + 4 * C * K * V);
  f.adjoint = chunks * (6 * C * K * V + C * C * V);
  f.backward = chunks * (prep + 14 * C * K * V + 4 * C * C * V + 6 * C * C * K);
  return f;
}

}  // namespace gdn
