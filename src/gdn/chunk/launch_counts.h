// What the GPU passes launched, per phase: how many launches took the bf16 register kernel
// (gdn/chunk/bf16_launch.cuh) and how many the tiled CudaExec kernel, and, where a register
// kernel existed for the phase but was not taken in the bf16 mode, why (the last reason).
// Process-wide; gdn_bench and gdn_kernel print it after a CUDA run, the GPU tests assert on
// it, so a silent fallback to the slow path shows (docs/gpu.md). And the two process-wide
// choices of which kernels the CUDA passes launch (cuda_walk, cuda_tf32). Host code only:
// CPU builds have it too (and count nothing).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "core/precision.h"
#include "gdn/chunk/chunk_gemm.h"

namespace gdn::pass {

enum class KernelPath { bf16_register, tiled };

// Which walks the CUDA passes take in the bf16 mode (train.cuda_walk): auto, the register
// kernels wherever they run; tiled, always the tiled CudaExec kernels (to compare them, or
// to step around a register kernel). Process-wide, set once at start-up from the run's
// layout (train/run_layout.h) or by a test; auto until then.
enum class CudaWalk { automatic, tiled };
constexpr std::array<const char*, 2> enum_names(CudaWalk) {
  return {"auto", "tiled"};
}
void set_cuda_walk(CudaWalk w);
CudaWalk cuda_walk();
// The CUDA passes' float GEMMs on tensor cores (train.cuda_tf32): TF32 inputs (10 mantissa
// bits) with fp32 accumulation, about 1e-3 relative instead of fp32's 1e-6, so off by
// default. Process-wide and set as cuda_walk is. fp64 passes ignore it; the host keeps fp32.
void set_cuda_tf32(bool on);
bool cuda_tf32();
// What the CUDA passes' T GEMMs run on in precision p: bf16 tensor cores in
// Precision::bf16, TF32 where cuda_tf32(), else fp32; fp64 always exact.
template <typename T>
ChunkGemm chunk_gemm(Precision p) {
  if constexpr (!std::is_same_v<T, float>) return ChunkGemm::kFp32;
  if (p == Precision::bf16) return ChunkGemm::kBf16;
  return cuda_tf32() ? ChunkGemm::kTf32 : ChunkGemm::kFp32;
}

// One launch of `phase` (prepare, transition, state_walk, outputs, output_from_states,
// adjoint, backward_walk, backward_chunks) on `path`.
void count_launch(const char* phase, KernelPath path);
// The register kernel of `phase` was not taken in the bf16 mode, because `why`.
void note_fallback(const char* phase, const std::string& why);

struct PhaseLaunches {
  std::string phase;
  std::int64_t bf16_register = 0, tiled = 0;
  std::string fallback;  // the last reason a register kernel was not taken ("": none)
};
// In the order the phases were first launched.
std::vector<PhaseLaunches> launch_counts();
void reset_launch_counts();
// One line per phase: "prepare: 4 register, 0 tiled" (+ "; fallback: why").
std::string format_launch_counts();

// What decides whether a register kernel runs (gdn/chunk/bf16_launch.cuh: usable()), as
// plain values so that the CPU tests check the reasons.
struct RegisterConditions {
  bool bf16_mode = false;        // the pass runs its GEMMs on bf16 tensor cores
  bool tiled_forced = false;     // train.cuda_walk tiled
  bool shape_supported = false;  // rwalk::supported / prepare_supported for C, K, V, bv
  int C = 0, K = 0, V = 0, bv = 0;
  bool factors_aligned = false;          // 16-byte aligned factors, fsize a multiple of 4
  bool dO_aligned = true;                // 16-byte aligned dO (the adjoint walks)
  int compute_major = 0;                 // the device's compute capability
  std::size_t smem = 0, smem_optin = 0;  // the kernel's shared memory, the device's limit
};
// "" where the register kernel runs; else the first reason it cannot, naming the value.
std::string register_fallback_reason(const RegisterConditions& c);

}  // namespace gdn::pass
