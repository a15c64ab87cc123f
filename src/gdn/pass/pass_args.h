// What the per-device passes of LocalPass (local_pass.h) work on: a view of the slice's
// layout, inputs and buffers, by value, plus the declarations of the passes for each
// device. local_pass_host.cpp and local_pass_cuda.cu define them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/bf16.h"
#include "core/device.h"
#include "core/hd.h"
#include "gdn/chunk/chunk_gemm.h"
#include "gdn/problem.h"
#include "gdn/slice_layout.h"

namespace gdn {

// The bf16 mode's tensors as ChunkedGdnBf16 stores them ([B, Tl, H, D] like `in`), for the
// register kernels to read and write as they are: q, k, v, beta and dO widened as they
// load them (q and k also normalised, l2norm_row's bits, where `l2norm`), o rounded as they
// store it. No widened copies. Null: the kernels read PassArgs::in, dO and o in T.
struct Bf16Io {
  const Bf16 *q = nullptr, *k = nullptr, *v = nullptr, *beta = nullptr, *dO = nullptr;
  Bf16* o = nullptr;
  bool l2norm = false;
};

template <typename T>
struct PassArgs {
  using Segment = SliceLayout::Segment;
  using Chunk = SliceLayout::Chunk;

  int B, Hk, Hv, K, V, C, G;  // G = Hv / Hk
  bool packed;                // cu_seqlens given
  std::int64_t Tl;            // tokens of the slice
  std::int64_t num_segments, num_chunks;
  const Segment* segments;  // the layout's tables, in the device's memory
  const Chunk* chunks;
  GdnInputView<T> in;
  T scale;
  std::size_t fsize;  // elements of one chunk's factors
  T* factors;         // [B * Hv, chunks, fsize]; valid when `prepared`
  bool prepared;
  T* states;     // [B * Hv, chunks, K, V]
  T* workspace;  // the device's scratch (workspace_elems of it)
  // [B * Hv, chunks, K, V]: the adjoint of every chunk's exit state, which the CUDA backward's
  // sequential walk stores for its chunk-parallel part (pass::chunk_parallel_backward);
  // null on the host, whose backward stays one fused walk.
  T* adjoints = nullptr;
  // CUDA, float: what the chunk math's GEMMs run on (bf16 tensor cores in the bf16 mode, TF32
  // with pass::set_cuda_tf32, else fp32). The CUDA passes set it per launch; the host ignores
  // it.
  ChunkGemm gemm = ChunkGemm::kFp32;
  // The factors are Bf16Factors blocks (gdn/pass/bf16_factors.h), which only the bf16
  // register kernels read, instead of ChunkFactors<T>: LocalPass sets it from what
  // prepare() chose (pass::bf16_factors), and every pass then takes its register kernel.
  // The entry states and exit adjoints are then bf16 too (bf16_entry_state): half of
  // `states` and `adjoints` holds them.
  bool bf16_factors = false;
  // Set only with bf16_factors (LocalPass::set_bf16_io).
  Bf16Io io;

  GDN_HD int seq_of(const Segment& s, int b) const { return packed ? s.seq : b; }
  GDN_HD std::int64_t state_offset(int seq, int h) const {
    return (std::int64_t(seq) * Hv + h) * K * V;
  }
  GDN_HD T* factors_of(int bh, std::int64_t c) const {
    return factors + (std::size_t(bh) * num_chunks + c) * fsize;
  }
  GDN_HD T* entry_state(int bh, std::int64_t c) const {
    return states + (std::size_t(bh) * num_chunks + c) * K * V;
  }
  GDN_HD T* exit_adjoint(int bh, std::int64_t c) const {
    return adjoints + (std::size_t(bh) * num_chunks + c) * K * V;
  }
  // The same in bf16 (with bf16_factors): what only an mma and part 1's dgamma read, rounded
  // once as the walk stores it (the tiled walks round their float copies alike on bf16
  // GEMMs, walk::store_kept).
  GDN_HD Bf16* bf16_entry_state(int bh, std::int64_t c) const {
    return reinterpret_cast<Bf16*>(states) + (std::size_t(bh) * num_chunks + c) * K * V;
  }
  GDN_HD Bf16* bf16_exit_adjoint(int bh, std::int64_t c) const {
    return reinterpret_cast<Bf16*>(adjoints) + (std::size_t(bh) * num_chunks + c) * K * V;
  }
  // The segment holding chunk c (0 <= c < num_chunks): a binary search over the segments'
  // first chunks, so that a pass over independent chunks finds which sequence a chunk
  // belongs to and whether it is the last chunk of one.
  GDN_HD std::int64_t segment_of(std::int64_t c) const {
    std::int64_t lo = 0, hi = num_segments - 1;
    while (lo < hi) {
      const std::int64_t mid = (lo + hi + 1) / 2;
      if (segments[mid].first_chunk <= c)
        lo = mid;
      else
        hi = mid - 1;
    }
    return lo;
  }
};

// The passes of LocalPass on one device, same meaning as its members; backward gets
// scratch dqv, dkv of grad_scratch_heads(Dev, G) x [B, Tl, Hk, K] elements each.
// output_from_states reads a.states; where !a.prepared it makes each chunk's factors
// itself: in scratch on the host, into a.factors on CUDA (which needs_prepare).
// workspace_elems is how much scratch the device's passes want in PassArgs::workspace.
namespace pass {
// Per-value-head blocks of dq / dk scratch the backward needs: the CUDA pass writes all G
// and sums them; the host pass writes the first head of each group straight into dq, dk
// and adds the other G - 1 in order (the same sums, without a copy when G = 1).
inline int grad_scratch_heads(Host, int G) {
  return G - 1;
}
int grad_scratch_heads(Cuda, int G);
// Whether prepare() writes Bf16Factors blocks for these arguments: on CUDA in the bf16 mode
// (float passes under a bf16 autocast scope) where every register kernel can run (the
// shape, the device's shared memory, no GDN_CUDA_WALK=tiled); never on the host.
template <typename T>
bool bf16_factors(Host, const PassArgs<T>&) {
  return false;
}
template <typename T>
bool bf16_factors(Cuda, const PassArgs<T>& a);
// Whether transition() and output() need prepare() first: the host can make each chunk's
// factors on the fly; the CUDA passes read them from the factor buffer.
inline bool needs_prepare(Host) {
  return false;
}
bool needs_prepare(Cuda);
// Whether backward() runs as a sequential adjoint walk that stores every chunk's exit
// adjoint (PassArgs::adjoints, B Hv K V elements per chunk, allocated by LocalPass for the
// call) followed by one independent job per chunk; it needs the WY factors (prepare()).
// The host keeps its fused walk (the chunk's backward carries the adjoint itself).
inline bool chunk_parallel_backward(Host) {
  return false;
}
bool chunk_parallel_backward(Cuda);
// The CUDA passes' float GEMMs on tensor cores: TF32 inputs (10 mantissa bits) with fp32
// accumulation, about 1e-3 relative instead of fp32's 1e-6, so off by default. mode 1: on,
// 0: off, -1 (the default): on where the environment variable GDN_CUDA_TF32 is "1".
// fp64 passes ignore it. CUDA builds only.
void set_cuda_tf32(int mode);
bool cuda_tf32();

template <typename T>
std::size_t workspace_elems(Host, const PassArgs<T>& a);
template <typename T>
std::size_t workspace_elems(Cuda, const PassArgs<T>& a);
template <typename T>
void prepare(Host, const PassArgs<T>& a);
template <typename T>
void prepare(Cuda, const PassArgs<T>& a);
template <typename T>
void transition(Host, const PassArgs<T>& a, T* M, T* U);
template <typename T>
void transition(Cuda, const PassArgs<T>& a, T* M, T* U);
template <typename T>
void output(Host, const PassArgs<T>& a, const T* h_in, T* o, T* ht);
template <typename T>
void output(Cuda, const PassArgs<T>& a, const T* h_in, T* o, T* ht);
template <typename T>
void output_from_states(Host, const PassArgs<T>& a, T* o, T* ht);
template <typename T>
void output_from_states(Cuda, const PassArgs<T>& a, T* o, T* ht);
template <typename T>
void adjoint(Host, const PassArgs<T>& a, const T* dO, const T* dht, T* D);
template <typename T>
void adjoint(Cuda, const PassArgs<T>& a, const T* dO, const T* dht, T* D);
template <typename T>
void backward(Host, const PassArgs<T>& a, const T* lambda, const T* dO, const T* dht,
              GdnGradView<T>& g, T* dqv, T* dkv);
template <typename T>
void backward(Cuda, const PassArgs<T>& a, const T* lambda, const T* dO, const T* dht,
              GdnGradView<T>& g, T* dqv, T* dkv);
}  // namespace pass

}  // namespace gdn
