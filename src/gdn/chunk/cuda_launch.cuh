// What every phase's CUDA launcher shares: the grid of a chunk-job kernel, the column tile
// width and shared memory of a tiled walk. The kernels
// and their launches are in the phase folders (gdn/<phase>/<phase>_cuda.cu); LocalPass's
// CUDA passes (gdn/pass/local_pass_cuda.cu) sequence them. Host code, inline: each
// translation unit that launches includes it.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/error.h"
#include "gdn/chunk/block_buffers.cuh"
#include "gdn/chunk/launch_counts.h"
#include "gdn/chunk/pass_args.h"
#include "gdn/chunk/walk_tiles.h"
#include "runtime/cuda_check.h"
#include "runtime/cuda_device.h"

namespace gdn::pass {

inline int grid_for(std::int64_t n, int threads) {
  return int(std::min<std::int64_t>((n + threads - 1) / threads, 65535));
}

inline int sm_count() {
  int device = 0, sms = 0;
  GDN_CUDA_CHECK(cudaGetDevice(&device));
  GDN_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return std::max(1, sms);
}

// A few resident blocks per SM; more only multiplies the workspace.
inline int blocks_for(std::int64_t jobs) {
  return int(std::max<std::int64_t>(1, std::min<std::int64_t>(jobs, 4 * sm_count())));
}

// The chunk jobs (prepare, output_from_states, backward part (b)) have the most jobs, so
// they launch the most blocks, each with its BlockBuffers; the walks keep their tiles in
// shared memory. LocalPass's workspace on CUDA (pass::workspace_elems).
template <typename T>
std::size_t chunk_job_workspace_elems(const PassArgs<T>& a) {
  return std::size_t(
             blocks_for(std::int64_t(a.B) * a.Hv * std::max<std::int64_t>(1, a.num_chunks))) *
         BlockBuffers<T>::size(a.C, a.K, a.V);
}

// A walk kernel's launch: its column tile width BV and dynamic shared memory.
struct WalkLaunch {
  int bv;
  std::size_t smem;
};

// BV = 64 where B Hv ceil(V / 64) blocks already fill the SMs, else 32 (docs/design.md
// §2e); then halved until the tiles fit the block's shared memory next to the kernel's
// static share (the GEMM's staging), which only large K or C in fp64 need.
template <typename T>
int walk_width(const PassArgs<T>& a) {
  return walk::walk_width_for(std::int64_t(a.B) * a.Hv, a.V, sm_count());
}

template <typename T, typename Kernel>
WalkLaunch walk_launch(const PassArgs<T>& a, Kernel kernel) {
  int bv = std::max(1, std::min(walk_width(a), std::max(a.K, a.V)));
  int device = 0, optin = 0;
  GDN_CUDA_CHECK(cudaGetDevice(&device));
  GDN_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  cudaFuncAttributes attr{};
  GDN_CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
  const std::size_t room = std::size_t(optin) - std::min<std::size_t>(optin, attr.sharedSizeBytes);
  while (bv > 1 && walk::tile_elems(a.K, a.C, bv) * sizeof(T) > room) bv /= 2;
  const std::size_t smem = walk::tile_elems(a.K, a.C, bv) * sizeof(T);
  GDN_CHECK(smem <= room, "GDN CUDA pass: a K = ", a.K, ", C = ", a.C,
            " state column does not fit in shared memory (", room, " bytes)");
  // Above the default 48 KiB a kernel must opt in; setting it every launch is cheap.
  GDN_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  return {bv, smem};
}

// One block per (b, h, tile) job: the walks are few and long, so every one gets its block.
inline int walk_grid(std::int64_t jobs) {
  return int(std::max<std::int64_t>(1, std::min<std::int64_t>(jobs, 1 << 30)));
}

}  // namespace gdn::pass
