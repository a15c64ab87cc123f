// The gated delta rule with context parallelism (docs/design.md §3-4).
//
// Forward:  1. local pass from a zero state -> (M_r, U_r);  2. all-gather the pairs and
//           prefix-scan them -> h_in_r;  3. local pass from h_in_r -> outputs.
// Backward: 1. local adjoint pass with lambda = 0 -> D_r;  2. all-gather D_r, suffix-scan
//           with the M_r kept from the forward -> lambda_r;  3. full local backward.
// With options.pair_scan log_depth, step 2 is a Hillis-Steele scan over point-to-point
// messages, and the layer keeps only its own M for the backward instead of every rank's pair.
// At P = 1 there is nothing to compose: phases 1 and 2 are skipped. A recomputed forward
// (after release(Keep::replay)) skips all three: the outputs come again from the per-chunk
// entry states the first forward's phase 3 kept.
// On the host the local passes are a SplitLocalPass (split_pass.h): when B * Hv leaves
// threads idle, the shard is cut into pieces that run as virtual ranks inside this one
// (options.split_pieces, docs/design.md §4b); unsplit, it is the plain LocalPass.
// Talks to other ranks only through the CpContext's Communicator.
#pragma once

#include <type_traits>

#include "core/device.h"
#include "core/lifecycle.h"
#include "cp/cp_context.h"
#include "cp/log_depth_scan.h"
#include "gdn/pass/local_pass.h"
#include "gdn/problem.h"
#include "gdn/qk_norm.h"
#include "gdn/split/split_pass.h"

namespace gdn {

// One object per layer, kept for the whole run: its buffers (pass factors and states, the
// gathered pairs) are reused from step to step. Every pointer lives in Dev's memory, and
// the CpContext's Communicator must take Dev's buffers.
template <typename T, typename Dev>
class GdnContextParallel {
 public:
  // p is the global problem (p.T == cp.T_global); `local` views this rank's shard
  // cp.shard: [B, shard tokens, H, D]. local.h0, when set, is the global [N, Hv, K, V]
  // initial state (the same on every rank). o: this shard's outputs [B, shard tokens, Hv,
  // V]. ht (may be null): the global final states [N, Hv, K, V], the same on every rank.
  // The views must stay valid until backward().
  void forward(const CpContext& cp, const GdnProblem& p, const GdnInputView<T>& local, T* o, T* ht);
  // dO: this shard's output gradient; dht (may be null): global [N, Hv, K, V].
  // grads.dq ... dbeta: this shard's input gradients; grads.dh0 (global, when h0 was
  // given) the same on every rank. Same cp as the forward.
  void backward(const CpContext& cp, const T* dO, const T* dht, GdnGradView<T>& grads);
  // The forward's inputs moved: the same values at other addresses (a layer that kept
  // them in bf16 and decoded them, ops/convert/kept.h). The backward reads `local` instead; q and
  // k are normalised again (the same bits).
  void rebind(const GdnInputView<T>& local) {
    norm_.normalize(p_, shard_.size(), local);
    pass_.rebind(norm_.view());
  }
  // Frees the normalised q and k between forward() and a rebind() that makes them again.
  void release_inputs() { norm_.release(); }
  // Frees what the forward kept for the backward (activation recomputation, docs/design.md
  // §6c). Keep::replay keeps the local pass's per-chunk entry states (B Hv K V elements
  // per chunk of the shard, at any P) and what the backward's phase 2 reads from the
  // forward (at P > 1 the gathered pairs, B Hv K (K + V) P elements, or with the
  // log-depth scan this rank's M). The next forward, a recomputation of the last one on
  // the same shard and inputs, then skips phases 1-2 (no transition pass, no exchange)
  // and the sequential phase 3: it remakes the outputs from the kept states, in parallel
  // over chunks (LocalPass::output_from_states). The results are the same bits. The entry
  // state h_in goes: the first chunk's kept state holds it.
  void release(Keep keep) {
    norm_.release();
    pass_.release(keep);
    for (Buffer<Dev, T>* b : {&h_in_, &lambda_}) *b = Buffer<Dev, T>();
    if (keep == Keep::nothing)
      for (Buffer<Dev, T>* b : {&own_M_, &gathered_}) *b = Buffer<Dev, T>();
    lifecycle_.release(keep);
  }
  // How the last forward split this rank's shard (always 1 piece off the host).
  const PieceSplit& piece_split() const { return split_; }

 private:
  using Pass = std::conditional_t<std::is_same_v<Dev, Host>, SplitLocalPass<T>, LocalPass<T, Dev>>;
  static_assert(SlicePass<Pass, T>);

  // The forward's phases 1-3 on the shard pass_ was reset to: o, and the rows of ht
  // (zeroed by the caller) of the sequences that end in the shard.
  void three_phases(const CpContext& cp, T* o, T* ht);

  GdnProblem p_;
  const Communicator* comm_ = nullptr;  // of the last forward, to check backward's
  Shard shard_{};                       // of the last forward, to check a replay's
  Lifecycle lifecycle_{"GdnContextParallel"};
  QKNormalizer<T, Dev> norm_;
  Pass pass_;
  PieceSplit split_{};
  PairDims dims_{};
  // This rank's entry state and exit adjoint (the pair, D and the gathered D are local to
  // forward and backward: a layer holds only what its backward reads).
  Buffer<Dev, T> h_in_, lambda_;
  Buffer<Dev, T> own_M_;     // this rank's M (log-depth backward)
  Buffer<Dev, T> gathered_;  // every rank's (M, U), kept for the backward's suffix scan
};

}  // namespace gdn
