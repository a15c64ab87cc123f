// Attention on cuDNN's fused SDPA (the cudnn-frontend graph API, as TransformerEngine's
// fused attention runs it): the float CUDA op's bf16 path where cuDNN takes the
// configuration (attention.h's AttentionBackend). The op's contract is attention.h's; here
// the mask is cut into attention_segments (a shard's rows, the balance's stripes, packed
// documents), each segment a ragged (THD) sequence of cuDNN's with the bottom-right causal
// mask, so q, k, v, o and the gradients are read and written where they lie in [B, T, H, D].
// Inputs are rounded to bf16 (the values a bf16 model holds are bf16 already), products
// and the softmax statistics are fp32, outputs come back as float.
//
// One graph per shape (backward or not, heads, head dim, scale, the segment capacity and the
// rows' bounds), built on first use and kept for the process: never per step. Where cuDNN
// refuses one (its version, the GPU, a shape), the call returns false and the reason is
// noted once per shape; the caller then runs the flash kernel.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/device.h"
#include "ops/attention/attention_segments.h"

namespace gdn::ops {

// Whether this build has cuDNN's attention (cuDNN and cudnn-frontend found at configure).
bool cudnn_attention_built();

// What identifies a graph: everything its build depends on.
struct CudnnAttentionShape {
  bool backward = false;
  int Hq = 0, Hkv = 0, D = 0;
  float scale = 0;
  std::int64_t segments = 0;    // the capacity: a power of two >= the segments of the call
  std::int64_t Tq = 0, Tk = 0;  // the rows of q (o, stats) and of k (v) per batch row
  int B = 0;
  bool operator<(const CudnnAttentionShape& o) const;
};
// The shape of a call with n segments (the capacity rounded up, so that calls whose packed
// documents differ share a graph).
CudnnAttentionShape cudnn_attention_shape(bool backward, int B, std::int64_t Tq, std::int64_t Tk,
                                          int Hq, int Hkv, int D, double scale, std::size_t n);

// One call's (one wave's) index tensors for cuDNN: per segment its query and key rows, and
// the ragged offsets, in elements, of its first row in q (o, dO, dQ: rows of Hq D), k (v, dK,
// dV: Hkv D) and the statistics (Hq), cap + 1 of them; the capacity past the wave's segments
// is empty segments at the end offset. Throws where an index does not fit cuDNN's int32.
struct CudnnAttentionTables {
  std::vector<std::int32_t> seq_q, seq_kv, off_q, off_kv, off_stats;
};
CudnnAttentionTables cudnn_attention_tables(const std::vector<AttentionSegment>& wave,
                                            std::int64_t cap, std::int64_t Tq, std::int64_t Tk,
                                            int Hq, int Hkv, int D);

// Notes that cuDNN refused shape s, and why (once per shape); and the notes not taken yet,
// in order, one line each ("forward, 16 / 2 heads, D 512, ...: why"), for the run to log.
void note_cudnn_attention_refusal(const CudnnAttentionShape& s, const std::string& why);
std::vector<std::string> take_cudnn_attention_notes();

#if GDN_HAVE_CUDNN
// The op (attention.h's contract; float in Cuda memory, qpos and kstart too: read back once
// per call to cut the segments). False where cuDNN refuses the call's shape (the reason
// noted, nothing written): the caller runs the flash kernel instead.
bool cudnn_attention_forward(const float* q, const float* k, const float* v,
                             const std::int64_t* qpos, int B, std::int64_t Tq, std::int64_t Tk,
                             int Hq, int Hkv, int D, double scale, float* o, float* lse,
                             const std::int64_t* kstart);
bool cudnn_attention_backward(const float* q, const float* k, const float* v, const float* o,
                              const float* lse, const float* dout, const std::int64_t* qpos, int B,
                              std::int64_t Tq, std::int64_t Tk, int Hq, int Hkv, int D,
                              double scale, float* dq, float* dk, float* dv,
                              const std::int64_t* kstart);
#endif

}  // namespace gdn::ops
