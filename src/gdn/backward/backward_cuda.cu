// Every chunk's backward on the GPU (backward part (b)): in fp32 and fp64 one block per
// (batch * value head, chunk) job running ChunkKernel::backward (chunk_backward.h) on
// CudaExec; in the bf16 mode the two kernels of backward_bf16.h. Then the sum of the
// per-value-head dq, dk over each key head's group. All launched here.
#include "gdn/backward/backward_bf16.h"
#include "gdn/backward/backward_cuda.h"
#include "gdn/backward/chunk_backward.h"
#include "gdn/chunk/bf16_launch.cuh"
#include "gdn/chunk/cuda_launch.cuh"
#include "gdn/head_groups.h"

namespace gdn::pass {

namespace {

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

// The register kernels' job bodies for the chunk jobs [job0, job0 + n): part 1 and part 2,
// each job's handoff at handoff + (job - job0) * BackwardHandoff::floats().
struct BackwardProducts {
  static constexpr int kMinBlocks = 1;
  PassArgs<float> a;
  const float* dO;
  float *dqv, *dkv, *handoff;
  std::int64_t job0;
  int bv;  // 0: prepare's shape rule
  template <typename Blk>
  __device__ void operator()(Blk& blk, std::int64_t job) const {
    const std::size_t n = rwalk::BackwardHandoff{a.K, a.V}.floats();
    rwalk::backward_products(blk, a, dO, dqv, dkv, handoff + job * n, job0 + job, walk_smem);
  }
};
struct BackwardWy {
  static constexpr int kMinBlocks = 1;
  PassArgs<float> a;
  GdnGradView<float> gr;
  float *dqv, *dkv, *handoff;
  std::int64_t job0;
  int bv;
  template <typename Blk>
  __device__ void operator()(Blk& blk, std::int64_t job) const {
    const std::size_t n = rwalk::BackwardHandoff{a.K, a.V}.floats();
    rwalk::backward_wy(blk, a, gr, dqv, dkv, handoff + job * n, job0 + job, walk_smem);
  }
};

// Part (b) in the bf16 mode: dq and dk into dqv and dkv (per value head), dv, dg, dbeta
// into gr; the two kernels hand each other their products through a.workspace, as many
// jobs at a time as it holds. False, launching nothing, where the factors are not bf16.
bool register_backward_chunks(const PassArgs<float>& a, const float* dO,
                              const GdnGradView<float>& gr, float* dqv, float* dkv) {
  const std::int64_t jobs = std::int64_t(a.B) * a.Hv * a.num_chunks;
  const std::size_t per_job = rwalk::BackwardHandoff{a.K, a.V}.floats();
  const std::size_t products = rwalk::ProductsLayout{a.K, a.V}.bytes(),
                    wy = rwalk::WyLayout{a.K, a.V}.bytes();
  BackwardProducts part1{a, dO, dqv, dkv, a.workspace, 0, 0};
  BackwardWy part2{a, gr, dqv, dkv, a.workspace, 0, 0};
  if (jobs == 0 || !a.workspace ||
      !usable("backward_chunks", a, 0, dO, products, walk_kernel<BackwardProducts>) ||
      !usable("backward_chunks", a, 0, dO, wy, walk_kernel<BackwardWy>))
    return false;
  const std::int64_t batch = std::max<std::int64_t>(
      1, std::min<std::int64_t>(jobs, std::int64_t(chunk_job_workspace_elems(a) / per_job)));
  for (std::int64_t job0 = 0; job0 < jobs; job0 += batch) {  // usable() held above
    const std::int64_t n = std::min(batch, jobs - job0);
    part1.job0 = part2.job0 = job0;
    launch_register("backward_chunks", part1, n, products, dO);
    launch_register("backward_chunks", part2, n, wy, dO);
  }
  return true;
}

}  // namespace

template <typename T>
void launch_backward_chunks(const PassArgs<T>& a, const T* dO, GdnGradView<T>& gr, T* dqv, T* dkv) {
  const std::int64_t jobs = std::int64_t(a.B) * a.Hv * a.num_chunks;
  if (jobs == 0) return;
  bool split = false;
  if constexpr (std::is_same_v<T, float>) split = register_backward_chunks(a, dO, gr, dqv, dkv);
  count_launch("backward_chunks", split ? KernelPath::bf16_register : KernelPath::tiled);
  if (!split) {
    backward_chunks_kernel<T><<<blocks_for(jobs), kThreads>>>(a, dO, gr, dqv, dkv);
    GDN_CUDA_CHECK(cudaGetLastError());
  }
  const std::int64_t qk_elems = std::int64_t(a.B) * a.Tl * a.Hk * a.K;
  if (qk_elems == 0) return;
  if (a.io.l2norm) {  // the bf16 op normalised q and k inside: their backward here too
    const std::int64_t rows = qk_elems / a.K;
    sum_head_groups_l2norm_kernel<T>
        <<<grid_for(rows, 256), 256>>>(dqv, rows, a.K, a.G, a.io.q, gr.dq);
    GDN_CUDA_CHECK(cudaGetLastError());
    sum_head_groups_l2norm_kernel<T>
        <<<grid_for(rows, 256), 256>>>(dkv, rows, a.K, a.G, a.io.k, gr.dk);
    GDN_CUDA_CHECK(cudaGetLastError());
    return;
  }
  sum_head_groups_kernel<T><<<grid_for(qk_elems, 256), 256>>>(dqv, qk_elems, a.G, gr.dq);
  GDN_CUDA_CHECK(cudaGetLastError());
  sum_head_groups_kernel<T><<<grid_for(qk_elems, 256), 256>>>(dkv, qk_elems, a.G, gr.dk);
  GDN_CUDA_CHECK(cudaGetLastError());
}

template void launch_backward_chunks(const PassArgs<float>&, const float*, GdnGradView<float>&,
                                     float*, float*);
template void launch_backward_chunks(const PassArgs<double>&, const double*, GdnGradView<double>&,
                                     double*, double*);

}  // namespace gdn::pass
