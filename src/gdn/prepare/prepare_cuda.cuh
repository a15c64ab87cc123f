// The WY preparation on the GPU in fp32 and fp64: one block per (batch * value head,
// chunk) job, ChunkKernel::prepare (chunk_prepare.h) on CudaExec in the job's workspace.
// The bf16 mode's kernel is prepare_bf16.h.
#pragma once

#include "gdn/pass/block_buffers.cuh"

namespace gdn::pass {

namespace {  // each translation unit that includes this (float, double) compiles its own

template <typename T>
__global__ void prepare_kernel(PassArgs<T> a) {
  const BlockBuffers<T> buf(a);
  auto math = kernel_of(a, buf);
  const std::int64_t jobs = std::int64_t(a.B) * a.Hv * a.num_chunks;
  for (std::int64_t job = blockIdx.x; job < jobs; job += gridDim.x) {
    const int bh = int(job / a.num_chunks);
    const std::int64_t c = job % a.num_chunks;
    gather_rows(a, bh, c, buf);
    __syncthreads();
    math.prepare(buf.rows(), a.factors_of(bh, c));  // ends with a barrier
  }
}

}  // namespace

}  // namespace gdn::pass
