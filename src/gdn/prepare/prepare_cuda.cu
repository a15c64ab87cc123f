// The WY preparation on the GPU: in fp32 and fp64 one block per (batch * value head,
// chunk) job, ChunkKernel::prepare (chunk_prepare.h) on CudaExec in the job's workspace;
// in the bf16 mode the register kernel of prepare_bf16.h. Both launched here.
#include "gdn/chunk/bf16_launch.cuh"
#include "gdn/chunk/cuda_launch.cuh"
#include "gdn/prepare/chunk_prepare.h"
#include "gdn/prepare/prepare_bf16.h"
#include "gdn/prepare/prepare_cuda.h"

namespace gdn::pass {

namespace {

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

// The register kernel's job body (bf16_launch.cuh's walk_kernel runs it).
struct Prepare {
  static constexpr int kMinBlocks = 2;
  PassArgs<float> a;
  int bv;  // 0: no column tiles, and usable() checks prepare's shape
  template <typename Blk>
  __device__ void operator()(Blk& blk, std::int64_t job) const {
    rwalk::prepare(blk, a, job, walk_smem);
  }
};

}  // namespace

template <typename T>
void launch_prepare(const PassArgs<T>& a) {
  const std::int64_t jobs = std::int64_t(a.B) * a.Hv * a.num_chunks;
  if (jobs == 0) return;
  if constexpr (std::is_same_v<T, float>)
    if (launch_register("prepare", Prepare{a, 0}, jobs, rwalk::PrepareLayout{a.K, a.V}.bytes(),
                        nullptr))
      return count_launch("prepare", KernelPath::bf16_register);
  count_launch("prepare", KernelPath::tiled);
  prepare_kernel<T><<<blocks_for(jobs), kThreads>>>(a);
  GDN_CUDA_CHECK(cudaGetLastError());
}

template void launch_prepare(const PassArgs<float>&);
template void launch_prepare(const PassArgs<double>&);

}  // namespace gdn::pass
