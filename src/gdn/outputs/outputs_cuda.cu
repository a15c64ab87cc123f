// Every chunk's outputs on the GPU: in fp32 and fp64 one block per (batch * value head,
// chunk) job on CudaExec (chunk_outputs.h, chunk_state_walk.h's step); in the bf16 mode
// the register kernel of outputs_bf16.h. Both launched here.
#include "gdn/chunk/bf16_launch.cuh"
#include "gdn/chunk/cuda_launch.cuh"
#include "gdn/outputs/chunk_outputs.h"
#include "gdn/outputs/outputs_bf16.h"
#include "gdn/outputs/outputs_cuda.h"
#include "gdn/prepare/chunk_prepare.h"
#include "gdn/state_walk/chunk_state_walk.h"

namespace gdn::pass {

namespace {

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

// The register kernel's job body (bf16_launch.cuh's walk_kernel runs it).
struct Outputs {
  static constexpr int kMinBlocks = 3;
  PassArgs<float> a;
  float* o;
  int bv;
  template <typename Blk>
  __device__ void operator()(Blk& blk, std::int64_t job) const {
    rwalk::outputs(blk, a, o, bv, job, walk_smem);
  }
};

// Column tiles of 64 where V allows: every tile re-reads the chunk's w, q_g and P.
bool register_outputs(const PassArgs<float>& a, float* o) {
  const int bv = walk::output_width(a.V);
  return launch_register("outputs", Outputs{a, o, bv}, rwalk::output_jobs(a, bv),
                         rwalk::OutputLayout{a.K, bv}.bytes(), nullptr);
}

}  // namespace

template <typename T>
void launch_outputs(const PassArgs<T>& a, T* o) {
  const std::int64_t jobs = std::int64_t(a.B) * a.Hv * a.num_chunks;
  if (jobs == 0) return;
  if constexpr (std::is_same_v<T, float>)
    if (register_outputs(a, o)) return count_launch("outputs", KernelPath::bf16_register);
  count_launch("outputs", KernelPath::tiled);
  outputs_kernel<T><<<blocks_for(jobs), kThreads>>>(a, o);
  GDN_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void launch_output_from_states(const PassArgs<T>& a, T* o, T* ht) {
  const std::int64_t jobs = std::int64_t(a.B) * a.Hv * a.num_chunks;
  if (jobs == 0) return;
  // The bf16 mode keeps the entry states rounded to bf16 (walk::store_kept), from which the
  // last chunk's step would not give the first forward's ht bits.
  GDN_CHECK(!(ht && a.gemm == ChunkGemm::kBf16),
            "LocalPass::output_from_states: ht is not recomputed in the bf16 mode on CUDA (the "
            "kept entry states are rounded to bf16); take it from the first forward");
  if constexpr (std::is_same_v<T, float>)
    if (register_outputs(a, o)) return count_launch("outputs", KernelPath::bf16_register);
  count_launch("output_from_states", KernelPath::tiled);
  output_from_states_kernel<T><<<blocks_for(jobs), kThreads>>>(a, o, ht);
  GDN_CUDA_CHECK(cudaGetLastError());
}

template void launch_outputs(const PassArgs<float>&, float*);
template void launch_outputs(const PassArgs<double>&, double*);
template void launch_output_from_states(const PassArgs<float>&, float*, float*);
template void launch_output_from_states(const PassArgs<double>&, double*, double*);

}  // namespace gdn::pass
