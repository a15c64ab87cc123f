// The backward's walks on the GPU in fp32 and fp64: one block per (batch * value head,
// column tile) job running adjoint_walk_tiled.h's bodies, the tile in dynamic shared
// memory. The bf16 mode's register walks are adjoint_walk_bf16.h.
#pragma once

#include "gdn/adjoint_walk/adjoint_walk_tiled.h"
#include "gdn/pass/block_buffers.cuh"

namespace gdn::pass {

namespace {  // each translation unit that includes this (float, double) compiles its own

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

}  // namespace

}  // namespace gdn::pass
