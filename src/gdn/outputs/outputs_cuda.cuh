// Every chunk's outputs on the GPU in fp32 and fp64, one block per (batch * value head,
// chunk) job on CudaExec (chunk_outputs.h, chunk_state_walk.h's step). The bf16 mode's
// kernel is outputs_bf16.h.
#pragma once

#include "gdn/pass/block_buffers.cuh"

namespace gdn::pass {

namespace {  // each translation unit that includes this (float, double) compiles its own

// LocalPass::output, part (b): every chunk's outputs from its entry state at once, one
// block per (batch * value head, chunk) job (ChunkKernel::outputs: the same GEMM calls as
// the step's, so the same bits as output_from_states, which steps the full width).
template <typename T>
__global__ void outputs_kernel(PassArgs<T> a, T* o) {
  const BlockBuffers<T> buf(a);
  auto math = kernel_of(a, buf);
  const int V = a.V;
  const std::int64_t jobs = std::int64_t(a.B) * a.Hv * a.num_chunks;
  for (std::int64_t job = blockIdx.x; job < jobs; job += gridDim.x) {
    const int bh = int(job / a.num_chunks), b = bh / a.Hv, hv = bh % a.Hv;
    const std::int64_t c = job % a.num_chunks;
    math.outputs(a.factors_of(bh, c), a.entry_state(bh, c), buf.o);  // barriers in its GEMMs
    const std::int64_t t = std::int64_t(b) * a.Tl + a.chunks[c].begin;
    scatter(buf.o, a.chunks[c].rows, V, o + (t * a.Hv + hv) * V, std::int64_t(a.Hv) * V);
    __syncthreads();  // the next job overwrites buf.o
  }
}

// output()'s outputs from the entry states it kept, one block per (batch * value
// head, chunk) job: no chunk waits for the one before. Where the factors are not made
// yet, each job makes its chunk's into the factor buffer first (prepare_kernel's work,
// the same bits), so adjoint() finds them there.
template <typename T>
__global__ void output_from_states_kernel(PassArgs<T> a, T* o, T* ht) {
  const BlockBuffers<T> buf(a);
  auto math = kernel_of(a, buf);
  const int V = a.V;
  const std::int64_t KV = std::int64_t(a.K) * V;
  const std::int64_t jobs = std::int64_t(a.B) * a.Hv * a.num_chunks;
  for (std::int64_t job = blockIdx.x; job < jobs; job += gridDim.x) {
    const int bh = int(job / a.num_chunks), b = bh / a.Hv, hv = bh % a.Hv;
    const std::int64_t c = job % a.num_chunks;
    if (!a.prepared) {
      gather_rows(a, bh, c, buf);
      __syncthreads();
      math.prepare(buf.rows(), a.factors_of(bh, c));  // ends with a barrier
    }
    block_copy(buf.h, a.entry_state(bh, c), KV);  // step's entry barrier orders it
    math.step(a.factors_of(bh, c), buf.h, buf.o);
    const std::int64_t t = std::int64_t(b) * a.Tl + a.chunks[c].begin;
    scatter(buf.o, a.chunks[c].rows, V, o + (t * a.Hv + hv) * V, std::int64_t(a.Hv) * V);
    // The last chunk of a sequence that ends in the slice leaves with its final state.
    const Segment s = a.segments[a.segment_of(c)];
    if (ht && s.ends && c == s.first_chunk + s.num_chunks - 1)
      block_copy(ht + a.state_offset(a.seq_of(s, b), hv), buf.h, KV);
    __syncthreads();  // the next job overwrites the row buffers, buf.h and buf.o
  }
}

}  // namespace

}  // namespace gdn::pass
