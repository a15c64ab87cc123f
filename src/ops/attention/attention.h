// Causal grouped-query softmax attention over global positions: the core of the gated
// full-attention layer under context parallelism. A rank holds some query rows (any set of
// global positions: a contiguous shard, or the zigzag chunks) and the keys and values of
// the whole sequence (all-gathered). Query row i has global position qpos[i], the same for
// every sequence b, and attends to keys 0..qpos[i] (causal, inclusive):
//   o_i = sum_j softmax_j(scale q_i . k_j) v_j,  lse_i = log sum_j exp(scale q_i . k_j).
// Grouped-query attention as Hugging Face's repeat_kv: query head h reads kv head
// h / (Hq / Hkv). qpos lives in the device's memory, like the data. The host version
// checks the positions; the CUDA version reads them only on the device (a check there is
// a copy to the host per call): its caller checks them with check_attention_positions
// where it makes them on the host.
// Packed documents (cp/documents.h): kstart [B, Tq] (may be null: all 0) is the first key
// query row (b, i) may see, the start of its document; the mask is then keys
// kstart..qpos[i], block-diagonal causal, and key blocks before a tile's rows are skipped.
#pragma once

#include <array>
#include <cstdint>

#include "core/device.h"
#include "core/precision.h"

namespace gdn::ops {

// Which kernels the CUDA attention runs (train.attention_backend): auto, in Precision::bf16
// cuDNN's fused SDPA (cudnn_attention.h) where the build has it and cuDNN takes the shape,
// else the flash kernels, and the exact (fp64-accumulating) ones otherwise; cudnn (falling
// back to flash where refused), flash or exact in either mode (flash_attention.h).
// Process-wide, set once at start-up from the run's layout (train/run_layout.h) or by a
// test; the host has one kernel and ignores it.
enum class AttentionBackend { automatic, cudnn, flash, exact };
constexpr std::array<const char*, 4> enum_names(AttentionBackend) {
  return {"auto", "cudnn", "flash", "exact"};
}
void set_attention_backend(AttentionBackend b);
AttentionBackend attention_backend();

// What the float CUDA op runs in precision p at head dim D under backend b: cuDNN first (the
// flash kernels where it refuses the shape), the flash kernels (D <= 256), or the exact
// ones. Host code, so that the choice is tested on any machine.
enum class AttentionKernel { cudnn, flash, exact };
AttentionKernel attention_kernel(AttentionBackend b, Precision p, int D, bool cudnn_built);

// The (query, key) pairs per query head summed over the B rows, sum_{b, i} (qpos[i] + 1 -
// kstart[b, i]): the work of one rank, whose forward costs 4 D Hq pairs FLOPs (q k^T and
// P v). kstart host-side, may be null (B rows of the full causal triangle).
inline std::int64_t attention_pairs(const std::int64_t* qpos, std::int64_t Tq, int B = 1,
                                    const std::int64_t* kstart = nullptr) {
  std::int64_t pairs = 0;
  for (int b = 0; b < B; ++b)
    for (std::int64_t i = 0; i < Tq; ++i)
      pairs += qpos[i] + 1 - (kstart ? kstart[std::int64_t(b) * Tq + i] : 0);
  return pairs;
}

// Throws gdn::Error naming the first bad entry unless 0 <= qpos[i] < Tk for every i and
// 0 <= kstart[b Tq + i] <= qpos[i] (kstart may be null). Host pointers.
void check_attention_positions(const std::int64_t* qpos, const std::int64_t* kstart, int B,
                               std::int64_t Tq, std::int64_t Tk);

// attention_forward: q [B, Tq, Hq, D]; k, v [B, Tk, Hkv, D] (keys at positions 0..Tk-1);
// qpos [Tq] with 0 <= qpos[i] < Tk; o [B, Tq, Hq, D]; lse [B, Tq, Hq] (for the backward).
// Hq must be a multiple of Hkv. The precision chooses the CUDA kernels (attention_backend
// above); the host's arithmetic is the same in either.
// attention_backward: dout = dL/do; dq [B, Tq, Hq, D], dk, dv [B, Tk, Hkv, D] overwritten
// (keys past max(qpos) get zeros); any of them may be null (skipped).
template <typename T>
void attention_forward(Host, Precision, const T* q, const T* k, const T* v,
                       const std::int64_t* qpos, int B, std::int64_t Tq, std::int64_t Tk, int Hq,
                       int Hkv, int D, double scale, T* o, T* lse,
                       const std::int64_t* kstart = nullptr);
template <typename T>
void attention_forward(Cuda, Precision, const T* q, const T* k, const T* v,
                       const std::int64_t* qpos, int B, std::int64_t Tq, std::int64_t Tk, int Hq,
                       int Hkv, int D, double scale, T* o, T* lse,
                       const std::int64_t* kstart = nullptr);
template <typename T>
void attention_backward(Host, Precision, const T* q, const T* k, const T* v, const T* o,
                        const T* lse, const T* dout, const std::int64_t* qpos, int B,
                        std::int64_t Tq, std::int64_t Tk, int Hq, int Hkv, int D, double scale,
                        T* dq, T* dk, T* dv, const std::int64_t* kstart = nullptr);
template <typename T>
void attention_backward(Cuda, Precision, const T* q, const T* k, const T* v, const T* o,
                        const T* lse, const T* dout, const std::int64_t* qpos, int B,
                        std::int64_t Tq, std::int64_t Tk, int Hq, int Hkv, int D, double scale,
                        T* dq, T* dk, T* dv, const std::int64_t* kstart = nullptr);

}  // namespace gdn::ops
