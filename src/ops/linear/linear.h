// Linear layers without bias, y = x W^T with W [out, in] (the PyTorch layout), and their
// backward. The conventions of every op in src/ops (docs/design.md §7): the first
// argument is the device tag (Host{} or Cuda{}, pointers in that device's memory); N is
// the number of rows (tokens); backward functions overwrite input gradients and
// accumulate (+=) into parameter gradients, the precision (core/precision.h) follows the
// device tag, so a parameter used twice (a tied embedding)
// sums correctly; a null gradient pointer is skipped. linear_backward adds into dx instead
// when asked (`accumulate`): the input gradient of an x that several linears read. The
// host version is bit-identical for any OMP_NUM_THREADS; the CUDA version uses cuBLAS (N
// must fit an int).
#pragma once

#include <cstdint>

#include "core/device.h"
#include "core/precision.h"

namespace gdn::ops {

// linear_forward:  y[N, out] = x[N, in] W^T.
// linear_backward: dx[N, in] = dy W (dx += dy W when accumulate: the bits of computing dy W
//   apart and adding it);  dW[out, in] += dy^T x.
template <typename T>
void linear_forward(Host, Precision, const T* x, const T* W, std::int64_t N, int in, int out, T* y);
template <typename T>
void linear_forward(Cuda, Precision, const T* x, const T* W, std::int64_t N, int in, int out, T* y);
template <typename T>
void linear_backward(Host, Precision, const T* x, const T* W, const T* dy, std::int64_t N, int in,
                     int out, T* dx, T* dW, bool accumulate = false);
template <typename T>
void linear_backward(Cuda, Precision, const T* x, const T* W, const T* dy, std::int64_t N, int in,
                     int out, T* dx, T* dW, bool accumulate = false);

}  // namespace gdn::ops
