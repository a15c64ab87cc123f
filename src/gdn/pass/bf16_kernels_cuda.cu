// The block policy of gdn/pass/bf16_walk.h on the GPU, and the register kernels and their
// launches (prepare, four walks, outputs): a lane holds its own fragments, the mma is the
// instruction, copies are 16-byte cp.async (sm_80 on).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "gdn/adjoint_walk/adjoint_walk_bf16.h"
#include "gdn/backward/backward_bf16.h"
#include "gdn/outputs/outputs_bf16.h"
#include "gdn/pass/bf16_kernels_cuda.h"
#include "gdn/pass/launch_counts.h"
#include "gdn/prepare/prepare_bf16.h"
#include "gdn/state_walk/state_walk_bf16.h"
#include "ops/cuda_util.cuh"
#include "ops/mma/mma_bf16.cuh"
#include "runtime/cuda_check.h"
#include "runtime/cuda_device.h"

namespace gdn::pass {

namespace {

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

// Jobs per walk: (batch * value head, column tile) pairs; transition's tiles cover M's K
// columns and U's V.
std::int64_t walk_jobs(const PassArgs<float>& a, int bv) {
  return std::int64_t(a.B) * a.Hv * walk::tiles(a.V, bv);
}
std::int64_t transition_jobs(const PassArgs<float>& a, int bv) {
  return std::int64_t(a.B) * a.Hv * (walk::tiles(a.K, bv) + walk::tiles(a.V, bv));
}

// Each kernel's arguments, calling its job body; kMinBlocks: the blocks per SM to keep
// registers for (the walks' shared memory allows one).
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
struct Prepare {
  static constexpr int kMinBlocks = 2;
  PassArgs<float> a;
  int bv;  // 0: no column tiles, and usable() checks prepare's shape
  template <typename Blk>
  __device__ void operator()(Blk& blk, std::int64_t job) const {
    rwalk::prepare(blk, a, job, walk_smem);
  }
};
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

// The backward's chunk jobs [job0, job0 + n): part 1 and part 2, each job's handoff at
// handoff + (job - job0) * BackwardHandoff::floats().
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

// One block per job, looping where the grid is smaller; each thread's accumulators are
// its warp's share of the walked tile. The minimum blocks per SM must be said: without it
// ptxas aimed at two for the walks and spilled the state walk at 128 registers.
template <typename Walk>
__global__ void __launch_bounds__(rwalk::kThreads, Walk::kMinBlocks)
    walk_kernel(Walk walk, std::int64_t jobs) {
#if __CUDA_ARCH__ >= 800
  rwalk::State<DeviceWarp> st;
  DeviceBlock blk{st};
  for (std::int64_t job = blockIdx.x; job < jobs; job += gridDim.x) walk(blk, job);
#endif
}

bool aligned16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

// The current device's compute capability and shared memory per block, read once per
// device and thread (they do not change; the passes ask at every launch).
struct DeviceLimits {
  int compute_major = 0;
  std::size_t smem_optin = 0;
};
const DeviceLimits& device_limits() {
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
// with cp.async and room for `smem` bytes, and no GDN_CUDA_WALK=tiled.
RegisterConditions conditions(const PassArgs<float>& a, int bv, const void* dO, std::size_t smem) {
  RegisterConditions c;
  const char* env = std::getenv("GDN_CUDA_WALK");
  c.bf16_mode = a.gemm == ChunkGemm::kBf16;
  c.tiled_forced = env && std::string(env) == "tiled";
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
// choice in register_factors covers every kernel's shape and shared memory). Sets the
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
bool launch(const char* phase, const Walk& walk, std::int64_t jobs, std::size_t smem,
            const float* dO) {
  if (!usable(phase, walk.a, walk.bv, dO, smem, walk_kernel<Walk>)) return false;
  const int grid = int(std::max<std::int64_t>(1, std::min<std::int64_t>(jobs, 1 << 30)));
  walk_kernel<Walk><<<grid, rwalk::kThreads, smem>>>(walk, jobs);
  GDN_CUDA_CHECK(cudaGetLastError());
  return true;
}

// The most shared memory any register kernel takes at this K and V (walks at width 64).
std::size_t largest_smem(int K, int V) {
  return std::max({rwalk::PrepareLayout{K, V}.bytes(), rwalk::StateLayout{K, 64}.bytes(),
                   rwalk::AdjointLayout{K, 64}.bytes(), rwalk::OutputLayout{K, 64}.bytes(),
                   rwalk::ProductsLayout{K, V}.bytes(), rwalk::WyLayout{K, V}.bytes()});
}

}  // namespace

bool register_factors(const PassArgs<float>& a) {
  if (a.gemm != ChunkGemm::kBf16) return false;  // every fp32 pass: no reason to record
  RegisterConditions c = conditions(a, 0, nullptr, largest_smem(a.K, a.V));
  c.factors_aligned = true;  // the device pool's blocks, and Bf16Factors' size is 4 k floats
  const std::string why = register_fallback_reason(c);
  if (why.empty()) return true;
  note_fallback("prepare", why);
  return false;
}

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
      1, std::min<std::int64_t>(jobs, std::int64_t(workspace_elems(Cuda{}, a) / per_job)));
  for (std::int64_t job0 = 0; job0 < jobs; job0 += batch) {  // usable() held above
    const std::int64_t n = std::min(batch, jobs - job0);
    part1.job0 = part2.job0 = job0;
    launch("backward_chunks", part1, n, products, dO);
    launch("backward_chunks", part2, n, wy, dO);
  }
  return true;
}

bool register_state_walk(const PassArgs<float>& a, const float* h_in, float* ht, int bv) {
  return launch("state_walk", StateWalk{a, h_in, ht, bv}, walk_jobs(a, bv),
                rwalk::StateLayout{a.K, bv}.bytes(), nullptr);
}

bool register_transition(const PassArgs<float>& a, float* M, float* U, int bv) {
  return launch("transition", Transition{a, M, U, bv}, transition_jobs(a, bv),
                rwalk::StateLayout{a.K, bv}.bytes(), nullptr);
}

bool register_adjoint(const PassArgs<float>& a, const float* dO, const float* dht, float* D,
                      int bv) {
  return launch("adjoint", Adjoint{a, dO, dht, D, bv}, walk_jobs(a, bv),
                rwalk::AdjointLayout{a.K, bv}.bytes(), dO);
}

bool register_prepare(const PassArgs<float>& a) {
  return launch("prepare", Prepare{a, 0}, std::int64_t(a.B) * a.Hv * a.num_chunks,
                rwalk::PrepareLayout{a.K, a.V}.bytes(), nullptr);
}

// Column tiles of 64 where V allows: every tile re-reads the chunk's w, q_g and P.
bool register_outputs(const PassArgs<float>& a, float* o) {
  const int bv = walk::output_width(a.V);
  return launch("outputs", Outputs{a, o, bv}, rwalk::output_jobs(a, bv),
                rwalk::OutputLayout{a.K, bv}.bytes(), nullptr);
}

bool register_backward_walk(const PassArgs<float>& a, const float* lambda, const float* dO,
                            const float* dht, float* dh0, int bv) {
  return launch("backward_walk", BackwardWalk{a, lambda, dO, dht, dh0, bv}, walk_jobs(a, bv),
                rwalk::AdjointLayout{a.K, bv}.bytes(), dO);
}

}  // namespace gdn::pass
