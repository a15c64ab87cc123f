// What every phase's bf16 register kernel launch shares (docs/design.md §2f): the block
// policy of gdn/chunk/bf16_walk.h on the GPU (a lane holds its own fragments, the mma is
// the instruction, copies are 16-byte cp.async, sm_80 on), the one kernel that runs a
// phase's job body over its jobs, and the rule that decides whether it runs. Each phase's
// launcher (gdn/<phase>/<phase>_cuda.cu) names its job body and its shared memory.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "gdn/chunk/bf16_walk.h"
#include "gdn/chunk/launch_counts.h"
#include "gdn/chunk/pass_args.h"
#include "ops/cuda_util.cuh"
#include "ops/mma/mma_bf16.cuh"
#include "runtime/cuda_check.h"
#include "runtime/cuda_device.h"

namespace gdn::pass {

namespace {  // each translation unit that launches compiles its own kernels

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
struct DeviceWarp {
  int lane;
  template <typename T>
  using Reg = T;
  template <typename F>
  __device__ auto make(F f) const {
    return f(lane);
  }
  template <typename F>
  __device__ void each(F f) const {
    f(lane);
  }
  template <typename T>
  __device__ T& at(T& r, int) const {
    return r;
  }
  __device__ void mma(mma::FragC& d, const mma::FragA& a, const mma::FragB& b) const {
    mma::mma_bf16(d, a, b);
  }
};

struct DeviceBlock {
  rwalk::State<DeviceWarp>& st;
  template <typename F>
  __device__ void warps(F f) {
    f(DeviceWarp{int(threadIdx.x) % mma::kWarp}, int(threadIdx.x) / mma::kWarp, st);
  }
  template <typename F>
  __device__ void threads(F f) {
    f(int(threadIdx.x));
  }
  __device__ void sync() { __syncthreads(); }
  __device__ void copy16(void* dst, const void* src) { ops::cuda_util::copy16_async(dst, src); }
  __device__ void commit() { ops::cuda_util::async_commit(); }
  __device__ void wait_all() { ops::cuda_util::async_wait_all(); }
};
#endif

extern __shared__ __align__(16) unsigned char walk_smem[];

// One block per job, looping where the grid is smaller; each thread's accumulators are
// its warp's share of the walked tile. Walk holds a phase's arguments and calls its job
// body; Walk::kMinBlocks is the blocks per SM to keep registers for, which must be said:
// without it ptxas aimed at two for the walks and spilled the state walk at 128 registers.
template <typename Walk>
__global__ void __launch_bounds__(rwalk::kThreads, Walk::kMinBlocks)
    walk_kernel(Walk walk, std::int64_t jobs) {
#if __CUDA_ARCH__ >= 800
  rwalk::State<DeviceWarp> st;
  DeviceBlock blk{st};
  for (std::int64_t job = blockIdx.x; job < jobs; job += gridDim.x) walk(blk, job);
#endif
}

// Jobs per walk: (batch * value head, column tile) pairs.
inline std::int64_t walk_jobs(const PassArgs<float>& a, int bv) {
  return std::int64_t(a.B) * a.Hv * walk::tiles(a.V, bv);
}

inline bool aligned16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

// The current device's compute capability and shared memory per block, read once per
// device and thread (they do not change; the passes ask at every launch).
struct DeviceLimits {
  int compute_major = 0;
  std::size_t smem_optin = 0;
};
inline const DeviceLimits& device_limits() {
  thread_local int known = -1;
  thread_local DeviceLimits limits;
  int device = 0;
  GDN_CUDA_CHECK(cudaGetDevice(&device));
  if (device != known) {
    int optin = 0;
    GDN_CUDA_CHECK(
        cudaDeviceGetAttribute(&limits.compute_major, cudaDevAttrComputeCapabilityMajor, device));
    GDN_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    limits.smem_optin = std::size_t(optin);
    known = device;
  }
  return limits;
}

// What decides whether a register kernel runs (launch_counts.h): the bf16 mode, a shape it
// takes (bv = 0: prepare's), 16-byte aligned factors (and dO for the adjoints), a device
// with cp.async and room for `smem` bytes, and no train.cuda_walk tiled.
inline RegisterConditions conditions(const PassArgs<float>& a, int bv, const void* dO,
                                     std::size_t smem) {
  RegisterConditions c;
  c.bf16_mode = a.gemm == ChunkGemm::kBf16;
  c.tiled_forced = cuda_walk() == CudaWalk::tiled;
  c.shape_supported =
      bv == 0 ? rwalk::prepare_supported(a.C, a.K, a.V) : rwalk::supported(a.C, a.K, a.V, bv);
  c.C = a.C, c.K = a.K, c.V = a.V, c.bv = bv;
  c.factors_aligned = aligned16(a.factors) && a.fsize % 4 == 0;
  c.dO_aligned = !dO || aligned16(dO);
  c.smem = smem;
  const DeviceLimits& d = device_limits();
  c.compute_major = d.compute_major;
  c.smem_optin = d.smem_optin;
  return c;
}

// Whether the register kernel of `phase` runs: exactly where prepare() made Bf16Factors
// blocks, which nothing else reads; there it must (a reason it cannot is a defect: the
// choice in pass::bf16_factors covers every kernel's shape and shared memory). Sets the
// kernel's shared memory.
template <typename Kernel>
bool usable(const char* phase, const PassArgs<float>& a, int bv, const float* dO, std::size_t smem,
            Kernel kernel) {
  if (!a.bf16_factors) return false;
  const void* d = a.io.dO ? static_cast<const void*>(a.io.dO) : dO;  // the dO the passes read
  const std::string why = register_fallback_reason(conditions(a, bv, d, smem));
  GDN_CHECK(why.empty(), "GDN CUDA pass: the ", phase, " register kernel cannot run (", why,
            "), but prepare() made bf16 factors, which only the register kernels read");
  GDN_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  return true;
}

// Launches `walk` over `jobs` jobs where usable(); false otherwise.
template <typename Walk>
bool launch_register(const char* phase, const Walk& walk, std::int64_t jobs, std::size_t smem,
                     const float* dO) {
  if (!usable(phase, walk.a, walk.bv, dO, smem, walk_kernel<Walk>)) return false;
  const int grid = int(std::max<std::int64_t>(1, std::min<std::int64_t>(jobs, 1 << 30)));
  walk_kernel<Walk><<<grid, rwalk::kThreads, smem>>>(walk, jobs);
  GDN_CUDA_CHECK(cudaGetLastError());
  return true;
}

}  // namespace

}  // namespace gdn::pass
