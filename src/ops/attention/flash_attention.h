// Flash attention on tensor cores (flash_attention_cuda.cu): the float CUDA attention op's
// fast path, with bf16 operands and fp32 accumulation, for head dims up to 256. Same
// contract as attention.h's attention_forward / attention_backward (arguments checked by
// the caller); the order of operations is flash_order.h's. docs/gpu.md says when the op
// takes it.
#pragma once

#include <cstdint>

#include "core/bf16.h"
#include "core/device.h"
#include "core/precision.h"

namespace gdn::ops {

// Whether the flash kernels take head dim D.
inline bool flash_attention_supports(int D) {
  return D >= 1 && D <= 256;
}

// Whether the float CUDA op runs the flash kernels at head dim D in precision p: in
// Precision::bf16 (core/precision.h), whose q, k, v are bf16 values already, as its GEMMs take bf16
// operands; attention_backend() cudnn (where cuDNN refused), flash or exact (the
// fp64-accumulating kernels, attention.h) overrides in either mode. Plain float keeps the exact
// kernels by default, as its GEMMs stay fp32 (the GPU tests compare it with the host at 1e-4, which
// bf16 operands do not meet).
bool flash_attention_chosen(int D, Precision p);

// q, k, v in float (rounded to bf16 as the kernels stage them) or in bf16 as a model that
// stores them so holds them (the forward's K and V tiles then come by cp.async, double
// buffered; D a multiple of 8). The same bits for the same bf16 values.
void flash_attention_forward(Cuda, const float* q, const float* k, const float* v,
                             const std::int64_t* qpos, int B, std::int64_t Tq, std::int64_t Tk,
                             int Hq, int Hkv, int D, double scale, float* o, float* lse,
                             const std::int64_t* kstart);
void flash_attention_forward(Cuda, const Bf16* q, const Bf16* k, const Bf16* v,
                             const std::int64_t* qpos, int B, std::int64_t Tq, std::int64_t Tk,
                             int Hq, int Hkv, int D, double scale, float* o, float* lse,
                             const std::int64_t* kstart);
void flash_attention_backward(Cuda, const float* q, const float* k, const float* v, const float* o,
                              const float* lse, const float* dout, const std::int64_t* qpos, int B,
                              std::int64_t Tq, std::int64_t Tk, int Hq, int Hkv, int D,
                              double scale, float* dq, float* dk, float* dv,
                              const std::int64_t* kstart);

void flash_attention_backward(Cuda, const Bf16* q, const Bf16* k, const Bf16* v, const float* o,
                              const float* lse, const float* dout, const std::int64_t* qpos, int B,
                              std::int64_t Tq, std::int64_t Tk, int Hq, int Hkv, int D,
                              double scale, float* dq, float* dk, float* dv,
                              const std::int64_t* kstart);

}  // namespace gdn::ops
