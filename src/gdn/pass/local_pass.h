// The chunked gated delta rule over one contiguous slice [t0, t1) of the sequence: the
// building block of both the single-rank op (the slice is everything) and context
// parallelism (docs/design.md §3-4). No communication in here: the slice's entry state
// h_in and exit adjoint lambda come from the caller.
//
// The slice is split into segments at packed-sequence boundaries. A segment that starts
// a sequence begins from that sequence's h0 (or zero); only a first segment that
// continues a sequence from the previous slice depends on h_in.
//
// LocalPass<T, Dev> holds the slice's layout and buffers and is written once; the passes
// themselves are per device (local_pass_host.cpp: OpenMP over (batch, head) and chunks;
// local_pass_cuda.cu: one CUDA block per job), both running ChunkKernel of
// gdn/chunk. Every pointer lives in Dev's memory.
#pragma once

#include <cstdint>
#include <optional>

#include "core/device.h"
#include "core/lifecycle.h"
#include "gdn/pass/pass_args.h"
#include "gdn/pass/pass_buffer.h"
#include "gdn/problem.h"
#include "gdn/slice_layout.h"

namespace gdn {

template <typename T, typename Dev>
class LocalPass {
 public:
  LocalPass() = default;
  LocalPass(const GdnProblem& p, std::int64_t t0, std::int64_t t1, const GdnInputView<T>& in) {
    reset(p, t0, t1, in);
  }

  // Points the pass at a slice: p is the global problem; `in` holds this slice's tokens
  // ([B, t1 - t0, H, D]), q and k already L2-normalised if asked; in.h0, when set, is
  // global [N, Hv, K, V]. The views must outlive the calls below. Buffers are kept from
  // call to call; the layout is rebuilt only when the slice or the sequences change.
  void reset(const GdnProblem& p, std::int64_t t0, std::int64_t t1, const GdnInputView<T>& in);

  // Points the pass at other views of the same values as the last reset()'s (fresh copies
  // of inputs the caller freed in between, as the bf16 mode does): everything the passes
  // keep stays valid, so backward() may follow the output() before.
  void rebind(const GdnInputView<T>& in) { in_ = in; }

  std::int64_t tokens() const { return layout_ ? layout_->tokens() : 0; }

  // Whether prepare() would make Bf16Factors blocks now (pass::bf16_factors: float passes in
  // the bf16 mode on CUDA where every register kernel runs). After reset().
  bool makes_bf16_factors();
  // The bf16 mode's tensors in bf16 (PassArgs::io), which the register kernels then read
  // and write instead of reset()'s q, k, v and beta (which may be null) and the passes' dO
  // and o (null then): only where prepare() makes bf16 factors; kept until the next call.
  void set_bf16_io(const Bf16Io& io) { io_ = io; }

  // WY factors of every chunk, kept for the passes below (chunks are independent, so
  // this runs in parallel over chunks). adjoint() needs it. transition() and output()
  // without it make each chunk's factors on the fly on the host, which is faster when
  // nothing reuses them (the single-rank op): the factors never leave the cache; the
  // CUDA passes call it themselves. Phase 1 and 3 of CP share one prepare() (the WY
  // reuse, docs/design.md §3).
  void prepare();
  // Phase 1: the slice as one affine map h_out = M h_in + U, per (b, h):
  // M [B, Hv, K, K], U [B, Hv, K, V]. An empty slice is the identity (M = I, U = 0).
  void transition(T* M, T* U);
  // Phase 3: outputs o [B, t1 - t0, Hv, V] from the entry state h_in [B, Hv, K, V]
  // (null: zero). Keeps each chunk's entry state for backward() (in bf16 where prepare()
  // made bf16 factors, half the memory). ht, when set, gets the final state of every
  // sequence that ends in this slice (other rows untouched).
  void output(const T* h_in, T* o, T* ht);
  // Phase 3 again, for activation recomputation: the same o and ht bits as the output()
  // whose chunk entry states release(Keep::replay) kept, on the same slice and the same
  // inputs (reset() again with them is fine). No h_in: the kept states already hold it.
  // The chunks are independent given their entry states, so this runs in parallel over
  // (batch, value head, chunk) instead of walking the chunks in order; each job makes
  // its chunk's factors (on the host in scratch; on CUDA into the factor buffer, kept for
  // adjoint() as after prepare()); where the states were kept in bf16, prepare() and the
  // register outputs run instead. backward() may follow, as after output(). In the bf16
  // mode on CUDA the kept states are rounded, so ht must be null there (it throws).
  void output_from_states(T* o, T* ht);
  // Backward phase 1: D [B, Hv, K, V] = dLoss/dh_in with a zero exit adjoint (lambda = 0);
  // dht (global [N, Hv, K, V], may be null) applies where a sequence ends in the slice.
  void adjoint(const T* dO, const T* dht, T* D);
  // Backward phase 3 (after output()): gradients for this slice's tokens, given the
  // exit adjoint lambda [B, Hv, K, V] (null: zero). g.dq and g.dk are with respect to the
  // q and k of reset(). g.dh0 (global, may be null) gets the rows of the sequences that
  // start in this slice; other rows are untouched.
  void backward(const T* lambda, const T* dO, const T* dht, GdnGradView<T>& g);

  // Frees what the passes keep between calls (factors, scratch) for activation
  // recomputation (docs/design.md §6c). Keep::replay keeps the chunk entry states of the
  // last output() (B Hv K V elements per chunk, the only input of a chunk's outputs
  // besides its tokens), for output_from_states() after the next reset(); Keep::nothing
  // frees them too. The next reset() and passes allocate what they need again.
  void release(Keep keep) {
    factors_ = PassBuffer<Dev, T>();
    workspace_ = Buffer<Dev, T>();
    prepared_ = bf16_factors_ = false;
    if (keep == Keep::nothing) {
      states_ = PassBuffer<Dev, T>();
      states_of_ = States::none;
      states_bf16_ = false;
    } else if (states_of_ == States::inputs) {
      states_of_ = States::kept;
    }
  }
  // Frees the WY factors only (the largest buffer: about 6 K + C elements per token and
  // value head at K = V), inside one forward or backward; the passes that need them
  // prepare() again. Not a lifecycle step: nothing else changes.
  void release_factors() {
    factors_ = PassBuffer<Dev, T>();
    prepared_ = bf16_factors_ = false;
  }

 private:
  PassArgs<T> args();
  std::size_t factor_size(bool bf16) const;  // of one chunk's factor block (PassArgs::fsize)
  std::size_t factor_elems() const;          // of every chunk's factors
  // Of every chunk's entry state: in T, or in bf16 (half as many T) where the register
  // kernels keep them (PassArgs::bf16_entry_state).
  std::size_t state_elems(bool bf16) const;

  GdnProblem p_;
  std::optional<SliceLayout> layout_;
  GdnInputView<T> in_;
  bool prepared_ = false;      // factors_ hold this reset's WY factors
  bool bf16_factors_ = false;  // as Bf16Factors blocks (pass::bf16_factors)
  Bf16Io io_;
  // What states_ hold: nothing; the chunk entry states of an output() on this reset's
  // inputs (backward() may run); or those of an output() before release(Keep::replay),
  // kept through reset() on the same layout (output_from_states() may run).
  enum class States { none, inputs, kept };
  States states_of_ = States::none;
  bool states_bf16_ = false;  // states_ hold bf16 values (the output() ran on bf16 factors)
  Buffer<Dev, SliceLayout::Segment> segments_;  // the layout's tables in Dev's memory
  Buffer<Dev, SliceLayout::Chunk> chunks_;
  PassBuffer<Dev, T> factors_;  // [B * Hv, chunks, factor size], filled by prepare()
  PassBuffer<Dev, T> states_;   // [B * Hv, chunks, K, V], filled by output()
  Buffer<Dev, T> workspace_;    // per thread group scratch of the device's passes
};

}  // namespace gdn
