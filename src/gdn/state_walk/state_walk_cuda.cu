// The forward walks on the GPU: in fp32 and fp64 one block per (batch * value head, column
// tile) job running state_walk_tiled.h's bodies, the tile in dynamic shared memory; in the
// bf16 mode the register walks of state_walk_bf16.h. Both launched here.
#include "gdn/chunk/bf16_launch.cuh"
#include "gdn/chunk/cuda_launch.cuh"
#include "gdn/state_walk/state_walk_bf16.h"
#include "gdn/state_walk/state_walk_cuda.h"
#include "gdn/state_walk/state_walk_tiled.h"

namespace gdn::pass {

namespace {

template <typename T>
__global__ void transition_kernel(PassArgs<T> a, T* M, T* U, int bv) {
  auto math = tile_kernel_of(a);
  const CudaExec ex{a.gemm};
  const std::int64_t jobs =
      std::int64_t(a.B) * a.Hv * (walk::tiles(a.K, bv) + walk::tiles(a.V, bv));
  for (std::int64_t job = blockIdx.x; job < jobs; job += gridDim.x)
    walk::transition(math, ex, a, M, U, bv, job, tile_of_block<T>());
}

template <typename T>
__global__ void state_walk_kernel(PassArgs<T> a, const T* h_in, T* ht, int bv) {
  auto math = tile_kernel_of(a);
  const CudaExec ex{a.gemm};
  const std::int64_t jobs = std::int64_t(a.B) * a.Hv * walk::tiles(a.V, bv);
  for (std::int64_t job = blockIdx.x; job < jobs; job += gridDim.x)
    walk::state_walk(math, ex, a, h_in, ht, bv, job, tile_of_block<T>());
}

// The register walks' job bodies (bf16_launch.cuh's walk_kernel runs them).
struct StateWalk {
  static constexpr int kMinBlocks = 1;
  PassArgs<float> a;
  const float* h_in;
  float* ht;
  int bv;
  template <typename Blk>
  __device__ void operator()(Blk& blk, std::int64_t job) const {
    rwalk::state_walk(blk, a, h_in, ht, bv, job, walk_smem);
  }
};
struct Transition {
  static constexpr int kMinBlocks = 1;
  PassArgs<float> a;
  float *M, *U;
  int bv;
  template <typename Blk>
  __device__ void operator()(Blk& blk, std::int64_t job) const {
    rwalk::transition(blk, a, M, U, bv, job, walk_smem);
  }
};

}  // namespace

template <typename T>
void launch_transition(const PassArgs<T>& a, T* M, T* U) {
  if (a.B * a.Hv == 0) return;
  if constexpr (std::is_same_v<T, float>) {
    // transition's tiles cover M's K columns and U's V.
    const int bv = walk_width(a);
    const std::int64_t jobs =
        std::int64_t(a.B) * a.Hv * (walk::tiles(a.K, bv) + walk::tiles(a.V, bv));
    if (launch_register("transition", Transition{a, M, U, bv}, jobs,
                        rwalk::StateLayout{a.K, bv}.bytes(), nullptr))
      return count_launch("transition", KernelPath::bf16_register);
  }
  count_launch("transition", KernelPath::tiled);
  const WalkLaunch l = walk_launch(a, transition_kernel<T>);
  const std::int64_t tiles = (a.K + l.bv - 1) / l.bv + (a.V + l.bv - 1) / l.bv;
  transition_kernel<T><<<walk_grid(a.B * a.Hv * tiles), kThreads, l.smem>>>(a, M, U, l.bv);
  GDN_CUDA_CHECK(cudaGetLastError());
}

template <typename T>
void launch_state_walk(const PassArgs<T>& a, const T* h_in, T* ht) {
  if (a.B * a.Hv == 0) return;
  if constexpr (std::is_same_v<T, float>) {
    const int bv = walk_width(a);
    if (launch_register("state_walk", StateWalk{a, h_in, ht, bv}, walk_jobs(a, bv),
                        rwalk::StateLayout{a.K, bv}.bytes(), nullptr))
      return count_launch("state_walk", KernelPath::bf16_register);
  }
  count_launch("state_walk", KernelPath::tiled);
  const WalkLaunch l = walk_launch(a, state_walk_kernel<T>);
  const std::int64_t tiles = (a.V + l.bv - 1) / l.bv;
  state_walk_kernel<T><<<walk_grid(a.B * a.Hv * tiles), kThreads, l.smem>>>(a, h_in, ht, l.bv);
  GDN_CUDA_CHECK(cudaGetLastError());
}

template void launch_transition(const PassArgs<float>&, float*, float*);
template void launch_transition(const PassArgs<double>&, double*, double*);
template void launch_state_walk(const PassArgs<float>&, const float*, float*);
template void launch_state_walk(const PassArgs<double>&, const double*, double*);

}  // namespace gdn::pass
