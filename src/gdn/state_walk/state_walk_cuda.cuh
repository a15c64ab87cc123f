// The forward walks on the GPU in fp32 and fp64: one block per (batch * value head,
// column tile) job running state_walk_tiled.h's bodies, the tile in dynamic shared memory.
// The bf16 mode's register walks are state_walk_bf16.h.
#pragma once

#include "gdn/pass/block_buffers.cuh"
#include "gdn/state_walk/state_walk_tiled.h"

namespace gdn::pass {

namespace {  // each translation unit that includes this (float, double) compiles its own

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

}  // namespace

}  // namespace gdn::pass
