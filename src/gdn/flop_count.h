// The FLOPs of the chunked passes, for benchmarks that report GFLOP/s: per pass, summed
// over B * Hv * ceil(T / C) chunks, a multiply-add as 2 FLOPs, matrix products only, a
// triangular operand as its nonzero half. The count term by term: docs/design.md §2d.
#pragma once

#include <cstdint>

#include "gdn/problem.h"

namespace gdn {

struct ChunkFlops {
  double prepare, output, transition, adjoint, backward;  // FLOPs of all chunks, per pass
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
  f.transition = chunks * (4 * C * K * K + 4 * C * K * V);
  f.adjoint = chunks * (6 * C * K * V + C * C * V);
  f.backward = chunks * (prep + 14 * C * K * V + 4 * C * C * V + 6 * C * C * K);
  return f;
}

}  // namespace gdn
