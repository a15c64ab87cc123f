// What a GEMM caller knows about its operands' zeros, so that a GEMM may skip work that
// only adds exact zeros (or fills entries nobody reads). Plain C++ with no host code: the
// chunk kernel passes it to either execution policy, and the CUDA block GEMM ignores it
// (computing the full product is always a correct way to honour it).
#pragma once

namespace gdn {

enum class Structure {
  kDense,   // no known zeros
  kLowerA,  // op(A)(i, p) = 0 for p > i (lower triangular, diagonal included)
  kUpperA,  // op(A)(i, p) = 0 for p < i (upper triangular, diagonal included)
  kLowerC,  // only C(i, j) with j <= i is wanted: the entries above the diagonal may be
            // left as they were or written; callers never read them
};

}  // namespace gdn
