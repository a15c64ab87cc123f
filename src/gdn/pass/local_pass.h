// The chunked gated delta rule over one contiguous slice [t0, t1) of the sequence: the
// building block of both the single-rank op (the slice is everything) and context
// parallelism (docs/design.md §3-4). No communication in here: the slice's entry state
// h_in and exit adjoint lambda come from the caller.
//
// The slice is split into segments at packed-sequence boundaries. A segment that starts
// a sequence begins from that sequence's h0 (or zero); only a first segment that
// continues a sequence from the previous slice depends on h_in.
//
// LocalPass<T, Dev> is a SlicePass (slice_pass.h: the members' contracts). It holds the
// slice's layout and buffers and is written once; the passes themselves are per device
// (device_passes.h; local_pass_host.cpp: OpenMP over (batch, head) and chunks;
// local_pass_cuda.cu: the phases' CUDA launches in order), both running ChunkKernel of
// gdn/chunk. Every pointer lives in Dev's memory.
#pragma once

#include <cstdint>
#include <optional>

#include "core/device.h"
#include "core/lifecycle.h"
#include "gdn/chunk/pass_buffer.h"
#include "gdn/pass/device_passes.h"
#include "gdn/pass/slice_pass.h"
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

  // The members of SlicePass (slice_pass.h, which says what each does), and what is
  // LocalPass's own: the bf16 mode's factors and tensors.
  void reset(const GdnProblem& p, std::int64_t t0, std::int64_t t1, const GdnInputView<T>& in);
  void rebind(const GdnInputView<T>& in) { in_ = in; }
  std::int64_t tokens() const { return layout_ ? layout_->tokens() : 0; }

  // Whether prepare() would make Bf16Factors blocks now (pass::bf16_factors: float passes in
  // the bf16 mode on CUDA where every register kernel runs). After reset().
  bool makes_bf16_factors();
  // The bf16 mode's tensors in bf16 (PassArgs::io), which the register kernels then read
  // and write instead of reset()'s q, k, v and beta (which may be null) and the passes' dO
  // and o (null then): only where prepare() makes bf16 factors; kept until the next call.
  void set_bf16_io(const Bf16Io& io) { io_ = io; }

  // On the host, transition() and output() without prepare() make each chunk's factors in
  // scratch, which is faster when nothing reuses them (the single-rank op): the factors
  // never leave the cache; the CUDA passes call prepare() themselves.
  void prepare();
  void transition(T* M, T* U);
  // Where prepare() made bf16 factors, the chunk entry states are kept in bf16 (half the
  // memory).
  void output(const T* h_in, T* o, T* ht);
  // Runs in parallel over (batch, value head, chunk) instead of walking the chunks in
  // order; each job makes its chunk's factors (on the host in scratch; on CUDA into the
  // factor buffer, kept for adjoint() as after prepare()); where the states were kept in
  // bf16, prepare() and the register outputs run instead. In the bf16 mode on CUDA the kept
  // states are rounded, so ht must be null there (it throws).
  void output_from_states(T* o, T* ht);
  void adjoint(const T* dO, const T* dht, T* D);
  void backward(const T* lambda, const T* dO, const T* dht, GdnGradView<T>& g);

  // Keep::replay keeps B Hv K V elements per chunk (a chunk's entry state: the only input
  // of its outputs besides its tokens).
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
  // The WY factors are about 6 K + C elements per token and value head at K = V.
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

static_assert(SlicePass<LocalPass<float, Host>, float>);

}  // namespace gdn
