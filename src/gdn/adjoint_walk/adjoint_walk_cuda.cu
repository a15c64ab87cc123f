// The backward's walks on the GPU: in fp32 and fp64 one block per (batch * value head,
// column tile) job running adjoint_walk_tiled.h's bodies, the tile in dynamic shared
// memory; in the bf16 mode the register walks of adjoint_walk_bf16.h. Both launched here.
#include "gdn/adjoint_walk/adjoint_walk_bf16.h"
#include "gdn/adjoint_walk/adjoint_walk_cuda.h"
#include "gdn/adjoint_walk/adjoint_walk_tiled.h"
#include "gdn/chunk/bf16_launch.cuh"
#include "gdn/chunk/cuda_launch.cuh"

namespace gdn::pass {

namespace {

template <typename T>
__global__ void adjoint_kernel(PassArgs<T> a, const T* dO, const T* dht, T* D, int bv) {
  auto math = tile_kernel_of(a);
  const CudaExec ex{a.gemm};
  const std::int64_t jobs = std::int64_t(a.B) * a.Hv * walk::tiles(a.V, bv);
  for (std::int64_t job = blockIdx.x; job < jobs; job += gridDim.x)
    walk::adjoint(math, ex, a, dO, dht, D, bv, job, tile_of_block<T>());
}

template <typename T>
__global__ void backward_walk_kernel(PassArgs<T> a, const T* lambda, const T* dO, const T* dht,
                                     T* dh0, int bv) {
  auto math = tile_kernel_of(a);
  const CudaExec ex{a.gemm};
  const std::int64_t jobs = std::int64_t(a.B) * a.Hv * walk::tiles(a.V, bv);
  for (std::int64_t job = blockIdx.x; job < jobs; job += gridDim.x)
    walk::backward_walk(math, ex, a, lambda, dO, dht, dh0, bv, job, tile_of_block<T>());
}

// The register walks' job bodies (bf16_launch.cuh's walk_kernel runs them).
struct Adjoint {
  static constexpr int kMinBlocks = 1;
  PassArgs<float> a;
  const float *dO, *dht;
  float* D;
  int bv;
  template <typename Blk>
  __device__ void operator()(Blk& blk, std::int64_t job) const {
    rwalk::adjoint(blk, a, dO, dht, D, bv, job, walk_smem);
  }
};
struct BackwardWalk {
  static constexpr int kMinBlocks = 1;
  PassArgs<float> a;
  const float *lambda, *dO, *dht;
  float* dh0;
  int bv;
  template <typename Blk>
  __device__ void operator()(Blk& blk, std::int64_t job) const {
    rwalk::backward_walk(blk, a, lambda, dO, dht, dh0, bv, job, walk_smem);
  }
};

}  // namespace

template <typename T>
void launch_adjoint(const PassArgs<T>& a, const T* dO, const T* dht, T* D) {
  if (a.B * a.Hv == 0) return;
  if constexpr (std::is_same_v<T, float>) {
    const int bv = walk_width(a);
    if (launch_register("adjoint", Adjoint{a, dO, dht, D, bv}, walk_jobs(a, bv),
                        rwalk::AdjointLayout{a.K, bv}.bytes(), dO))
      return count_launch("adjoint", KernelPath::bf16_register);
  }
  count_launch("adjoint", KernelPath::tiled);
  const WalkLaunch l = walk_launch(a, adjoint_kernel<T>);
  const std::int64_t tiles = (a.V + l.bv - 1) / l.bv;
  adjoint_kernel<T><<<walk_grid(a.B * a.Hv * tiles), kThreads, l.smem>>>(a, dO, dht, D, l.bv);
  GDN_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void launch_backward_walk(const PassArgs<T>& a, const T* lambda, const T* dO, const T* dht,
                          T* dh0) {
  if constexpr (std::is_same_v<T, float>) {
    const int bv = walk_width(a);
    if (launch_register("backward_walk", BackwardWalk{a, lambda, dO, dht, dh0, bv},
                        walk_jobs(a, bv), rwalk::AdjointLayout{a.K, bv}.bytes(), dO))
      return count_launch("backward_walk", KernelPath::bf16_register);
  }
  count_launch("backward_walk", KernelPath::tiled);
  const WalkLaunch l = walk_launch(a, backward_walk_kernel<T>);
  const std::int64_t tiles = (a.V + l.bv - 1) / l.bv;
  backward_walk_kernel<T>
      <<<walk_grid(a.B * a.Hv * tiles), kThreads, l.smem>>>(a, lambda, dO, dht, dh0, l.bv);
  GDN_CUDA_CHECK(cudaGetLastError());
}

template void launch_adjoint(const PassArgs<float>&, const float*, const float*, float*);
template void launch_adjoint(const PassArgs<double>&, const double*, const double*, double*);
template void launch_backward_walk(const PassArgs<float>&, const float*, const float*, const float*,
                                   float*);
template void launch_backward_walk(const PassArgs<double>&, const double*, const double*,
                                   const double*, double*);

}  // namespace gdn::pass
