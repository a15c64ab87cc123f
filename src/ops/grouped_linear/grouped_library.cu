// cuBLAS's grouped GEMM for the bf16 expert linears (grouped_library.h), over the problems of
// grouped_problems.h.
#include <cstdint>
#include <vector>

#include "core/bf16.h"
#include "core/error.h"
#include "ops/convert/convert.h"
#include "ops/cuda_util.cuh"
#include "ops/grouped_linear/grouped_library.h"
#include "ops/grouped_linear/grouped_problems.h"
#include "runtime/cublas.h"
#include "runtime/cuda_check.h"
#include "runtime/cuda_device.h"

namespace gdn::ops {

using namespace cuda_util;

namespace {

// y = float(b), or y += float(b) (one rounding: the float sum), over `blocks` blocks of
// `block` values `stride` apart (the experts' weights may lie between other parameters').
__global__ void widen_kernel(const Bf16* b, i64 blocks, i64 block, i64 stride, bool add, float* y) {
  for (i64 i = thread_index(); i < blocks * block; i += thread_stride()) {
    const i64 at = i / block * stride + i % block;
    y[at] = add ? y[at] + gdn::to_float(b[at]) : gdn::to_float(b[at]);
  }
}

void widen(const Bf16* b, i64 blocks, i64 block, i64 stride, bool add, float* y) {
  if (blocks * block == 0) return;
  widen_kernel<<<blocks_for(blocks * block), kThreads>>>(b, blocks, block, stride, add, y);
  check_launch();
}

// The elements from W_0's first to W_{E-1}'s last (other parameters may lie between).
i64 span(int E, i64 w_stride, int in, int out) {
  return i64(E - 1) * w_stride + i64(out) * in;
}

std::vector<i64> host_offsets(const i64* offsets, int E, i64 R) {
  std::vector<i64> h(std::size_t(E) + 1);
  GDN_CUDA_CHECK(cudaMemcpy(h.data(), offsets, h.size() * sizeof(i64), cudaMemcpyDeviceToHost));
  check_grouped_offsets(h.data(), E, R);
  return h;
}

// The problems on cuBLAS: A, B, C the pass's bf16 bases. The pointer arrays go to the
// device (cuBLAS reads them there), the shapes stay on the host; each problem is its own
// group of one (the experts' row counts differ).
void run(const std::vector<grouped_gemm::Problem>& ps, const Bf16* A, const Bf16* B, Bf16* C) {
  const int g = int(ps.size());
  if (g == 0) return;
  std::vector<cublasOperation_t> ta, tb;
  std::vector<int> m, n, k, lda, ldb, ldc, size(ps.size(), 1);
  std::vector<float> alpha(ps.size(), 1.0f), beta(ps.size(), 0.0f);
  std::vector<void*> ptrs(3 * ps.size());
  for (int i = 0; i < g; ++i) {
    const grouped_gemm::Problem& p = ps[std::size_t(i)];
    ta.push_back(p.ta ? CUBLAS_OP_T : CUBLAS_OP_N), tb.push_back(p.tb ? CUBLAS_OP_T : CUBLAS_OP_N);
    m.push_back(p.m), n.push_back(p.n), k.push_back(p.k);
    lda.push_back(p.lda), ldb.push_back(p.ldb), ldc.push_back(p.ldc);
    ptrs[std::size_t(i)] = const_cast<Bf16*>(A + p.a);
    ptrs[std::size_t(g + i)] = const_cast<Bf16*>(B + p.b);
    ptrs[std::size_t(2 * g + i)] = C + p.c;
  }
  DeviceBuffer<void*> d(ptrs.size());
  GDN_CUDA_CHECK(
      cudaMemcpy(d.data(), ptrs.data(), ptrs.size() * sizeof(void*), cudaMemcpyHostToDevice));
  GDN_CUBLAS_CHECK(cublasGemmGroupedBatchedEx(
      cublas_handle(), ta.data(), tb.data(), m.data(), n.data(), k.data(), alpha.data(), d.data(),
      CUDA_R_16BF, lda.data(), d.data() + g, CUDA_R_16BF, ldb.data(), beta.data(), d.data() + 2 * g,
      CUDA_R_16BF, ldc.data(), g, size.data(), CUBLAS_COMPUTE_32F));
}

}  // namespace

void grouped_library_forward(const float* x, const float* W, i64 w_stride, const i64* offsets,
                             int E, i64 R, int in, int out, float* y) {
  using grouped_gemm::Pass;
  const std::vector<i64> o = host_offsets(offsets, E, R);
  const DeviceBuffer<Bf16> xb = to_bf16_copy<Cuda>(x, R * in),
                           wb = to_bf16_copy<Cuda>(W, span(E, w_stride, in, out));
  DeviceBuffer<Bf16> yb(static_cast<std::size_t>(R * out));
  run(grouped_gemm::problems(Pass::forward, o.data(), E, w_stride, in, out), wb.data(), xb.data(),
      yb.data());
  widen(yb.data(), 1, R * out, 0, false, y);
}

void grouped_library_backward(const float* x, const float* W, i64 w_stride, const float* dy,
                              const i64* offsets, int E, i64 R, int in, int out, float* dx,
                              float* dW, bool accumulate) {
  using grouped_gemm::Pass;
  const std::vector<i64> o = host_offsets(offsets, E, R);
  const DeviceBuffer<Bf16> dyb = to_bf16_copy<Cuda>(dy, R * out);
  if (dx) {
    const DeviceBuffer<Bf16> wb = to_bf16_copy<Cuda>(W, span(E, w_stride, in, out));
    DeviceBuffer<Bf16> dxb(static_cast<std::size_t>(R * in));
    run(grouped_gemm::problems(Pass::dx, o.data(), E, w_stride, in, out), wb.data(), dyb.data(),
        dxb.data());
    widen(dxb.data(), 1, R * in, 0, accumulate, dx);
  }
  if (dW) {
    const DeviceBuffer<Bf16> xb = to_bf16_copy<Cuda>(x, R * in);
    // Zeros for the experts with no rows: the sum below adds them unchanged.
    DeviceBuffer<Bf16> dwb(static_cast<std::size_t>(span(E, w_stride, in, out)));
    GDN_CUDA_CHECK(cudaMemset(dwb.data(), 0, dwb.size() * sizeof(Bf16)));
    run(grouped_gemm::problems(Pass::dw, o.data(), E, w_stride, in, out), xb.data(), dyb.data(),
        dwb.data());
    widen(dwb.data(), E, i64(out) * in, w_stride, true, dW);
  }
}

}  // namespace gdn::ops
