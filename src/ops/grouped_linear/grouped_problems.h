// The expert linears as cuBLAS's grouped GEMM sees them (grouped_library.h): one column-major
// problem per expert with rows, C_e = op(A_e) op(B_e), its operands given as element offsets
// from the call's bases. cuBLAS is column-major, and a row-major [r, c] array is a
// column-major [c, r] one, so with W_e [out, in]:
//   forward  y_e^T [out, n]   = W_e [out, in] x_e^T [in, n]      (A = W, B = x, C = y)
//   dx       dx_e^T [in, n]   = W_e^T [in, out] dy_e^T [out, n]  (A = W, B = dy, C = dx)
//   dW       dW_e^T [in, out] = x_e^T [in, n] dy_e [n, out]      (A = x, B = dy, C = dW)
// Host code, so the CPU tests run the very list the GPU runs (test_grouped_problems).
#pragma once

#include <cstdint>
#include <vector>

namespace gdn::ops::grouped_gemm {

struct Problem {
  bool ta = false, tb = false;  // op(A) = A^T, op(B) = B^T
  int m = 0, n = 0, k = 0;      // op(A) is m x k, op(B) k x n, C m x n
  std::int64_t a = 0, b = 0, c = 0;
  int lda = 0, ldb = 0, ldc = 0;
};

enum class Pass { forward, dx, dw };

// The problems of one pass over the experts with rows (offsets on the host, a partition of
// the rows), in expert order.
inline std::vector<Problem> problems(Pass pass, const std::int64_t* offsets, int E,
                                     std::int64_t w_stride, int in, int out) {
  std::vector<Problem> ps;
  for (int e = 0; e < E; ++e) {
    const std::int64_t o = offsets[e], rows = offsets[e + 1] - o, w = e * w_stride;
    if (rows == 0) continue;
    const int n = int(rows);
    switch (pass) {
      case Pass::forward:
        ps.push_back({true, false, out, n, in, w, o * in, o * out, in, in, out});
        break;
      case Pass::dx:
        ps.push_back({false, false, in, n, out, w, o * out, o * in, in, out, in});
        break;
      case Pass::dw:
        ps.push_back({false, true, in, out, n, o * in, o * out, w, in, out, in});
        break;
    }
  }
  return ps;
}

}  // namespace gdn::ops::grouped_gemm
