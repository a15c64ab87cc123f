// Every chunk's backward on the GPU in fp32 and fp64 (backward part (b)), one block per
// (batch * value head, chunk) job running ChunkKernel::backward (chunk_backward.h) on
// CudaExec, and the sum of the per-value-head dq, dk over each key head's group. The bf16
// mode's two kernels are backward_bf16.h.
#pragma once

#include "gdn/head_groups.h"
#include "gdn/pass/block_buffers.cuh"

namespace gdn::pass {

namespace {  // each translation unit that includes this (float, double) compiles its own

// Backward, part (b): one block per (batch * value head, chunk) job, the chunk's whole
// backward from its entry state (output()) and exit adjoint (part (a)); the entry adjoint it
// returns in buf.h is part (a)'s too and is dropped. dq, dk per value head go to dqv, dkv
// ([G, B, Tl, Hk, K]); summed per group afterwards.
template <typename T>
__global__ void backward_chunks_kernel(PassArgs<T> a, const T* dO, GdnGradView<T> gr, T* dqv,
                                       T* dkv) {
  const BlockBuffers<T> buf(a);
  auto math = kernel_of(a, buf);
  const int K = a.K, V = a.V, G = a.G;
  const std::int64_t KV = std::int64_t(K) * V;
  const std::int64_t qk_elems = std::int64_t(a.B) * a.Tl * a.Hk * K;
  const std::int64_t qk_stride = std::int64_t(a.Hk) * K, v_stride = std::int64_t(a.Hv) * V;
  const std::int64_t jobs = std::int64_t(a.B) * a.Hv * a.num_chunks;
  for (std::int64_t job = blockIdx.x; job < jobs; job += gridDim.x) {
    const int bh = int(job / a.num_chunks), b = bh / a.Hv, hv = bh % a.Hv, hk = hv / G;
    const std::int64_t c = job % a.num_chunks;
    const Chunk ch = a.chunks[c];
    const std::int64_t t = std::int64_t(b) * a.Tl + ch.begin;
    const std::int64_t qk_at = (t * a.Hk + hk) * K, v_at = (t * a.Hv + hv) * V;
    gather_rows(a, bh, c, buf);
    gather(dO + v_at, v_stride, ch.rows, V, a.C, buf.dO);
    block_copy(buf.h, a.exit_adjoint(bh, c), KV);
    __syncthreads();
    math.backward(buf.rows(), a.entry_state(bh, c), buf.dO, buf.h, buf.grads());
    const std::int64_t head = std::int64_t(hv % G) * qk_elems;
    scatter(buf.dq, ch.rows, K, dqv + head + qk_at, qk_stride);
    scatter(buf.dk, ch.rows, K, dkv + head + qk_at, qk_stride);
    scatter(buf.dv, ch.rows, V, gr.dv + v_at, v_stride);
    scatter(buf.dg, ch.rows, 1, gr.dg + t * a.Hv + hv, a.Hv);
    scatter(buf.dbeta, ch.rows, 1, gr.dbeta + t * a.Hv + hv, a.Hv);
    __syncthreads();  // the next job overwrites the row buffers
  }
}

// out[x] = sum over the G blocks of per_head (the key head's gradient).
template <typename T>
__global__ void sum_head_groups_kernel(const T* per_head, std::int64_t n, int G, T* out) {
  for (std::int64_t x = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; x < n;
       x += std::int64_t(gridDim.x) * blockDim.x) {
    T acc = 0;
    for (int j = 0; j < G; ++j) acc += per_head[j * n + x];
    out[x] = acc;
  }
}

// The same sum per row of dim elements (a thread each), then the l2norm's backward of the
// row in place, from the bf16 input x the op normalised inside prepare (PassArgs::io):
// head_groups.h's sum_head_group_row_l2norm, without writing and reading the summed
// gradient twice.
template <typename T>
__global__ void sum_head_groups_l2norm_kernel(const T* per_head, std::int64_t rows, int dim, int G,
                                              const Bf16* x, T* out) {
  for (std::int64_t r = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; r < rows;
       r += std::int64_t(gridDim.x) * blockDim.x)
    sum_head_group_row_l2norm(per_head, rows * dim, r, dim, G, x, out);
}

}  // namespace

}  // namespace gdn::pass
