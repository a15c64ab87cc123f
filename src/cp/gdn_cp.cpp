#include "cp/gdn_cp.h"

#include <omp.h>

#include "comm/call_sites.h"
#include "core/error.h"
#include "gdn/empty_sequences.h"
#include "runtime/devices.h"

namespace gdn {

template <typename T, typename Dev>
void GdnContextParallel<T, Dev>::forward(const CpContext& cp, const GdnProblem& p,
                                         const GdnInputView<T>& local, T* o, T* ht) {
  p.validate();
  GDN_CHECK(p.T == cp.T_global, "GdnContextParallel: problem T = ", p.T,
            " but the CP context has T_global = ", cp.T_global);
  // A recomputation (after release(Keep::replay)) of the forward on the same shard.
  const bool replay = lifecycle_.forward();
  GDN_CHECK(!replay || (comm_ == &cp.comm && shard_.begin == cp.shard.begin &&
                        shard_.end == cp.shard.end && p.T == p_.T && p.B == p_.B),
            "GdnContextParallel: a recomputed forward on another group, shard or problem");
  p_ = p;
  comm_ = &cp.comm;
  shard_ = cp.shard;
  dims_ = {p.B * p.Hv, p.K, p.V};
  GDN_CHECK(cp.options.pair_scan != PairScan::automatic,
            "GdnContextParallel: pair_scan auto reached a layer; resolve it first "
            "(model/pair_scan_choice.h)");
  const int P = cp.comm.size(), r = cp.comm.rank();
  norm_.normalize(p_, cp.tokens(), local);
  if constexpr (std::is_same_v<Dev, Host>) {
    split_ = choose_piece_split({cp.options.split_pieces, cp.options.split_log_depth}, p_,
                                cp.shard.begin, cp.shard.end, omp_get_max_threads());
    pass_.reset(p_, cp.shard.begin, cp.shard.end, norm_.view(), split_);
  } else {
    pass_.reset(p_, cp.shard.begin, cp.shard.end, norm_.view());
  }
  const std::int64_t state_elems = std::int64_t(p_.num_sequences()) * p_.Hv * p_.K * p_.V;
  if (ht) Dev::fill(ht, state_elems, T(0));
  if (replay) {
    // The outputs again from the chunk entry states the first forward kept; phases 1-2
    // (and the exchange) made h_in, which those states already hold.
    pass_.output_from_states(o, ht);
  } else {
    three_phases(cp, o, ht);
  }
  // The factors are not kept for the backward: its phase 1 makes them again (its phase 3
  // makes its own chunk by chunk), so a layer holds them only while it runs. They are the
  // largest buffer of the pass (on the GPU, which keeps them through phases 1-3, 2.4 GB per
  // layer at a 32K-token shard of Qwen3-Next: 32 heads, K = V = 128); kept for every layer
  // they would bound the shard, and on the host cost P > 1 more per token than P = 1, which
  // never stores them.
  pass_.release_factors();
  if (ht && r == 0) copy_empty_sequence_states<Dev>(p_, local.h0, ht);
  // Each sequence's final state is on the rank holding its last token; share it.
  if (ht && P > 1) cp.comm.all_reduce_sum(ht, state_elems, cp_sites::kFinalState);
}

template <typename T, typename Dev>
void GdnContextParallel<T, Dev>::three_phases(const CpContext& cp, T* o, T* ht) {
  const int P = cp.comm.size(), r = cp.comm.rank();
  const std::int64_t na = dims_.a_elems(), pair = dims_.pair_elems();
  const T* h_in = nullptr;  // one rank: every sequence starts in its slice
  if (P > 1) {
    // Phase 1: this shard as one affine map of its entry state.
    pass_.prepare();
    PassBuffer<Dev, T> mine(pair);  // written whole by the transition
    h_in_.resize(dims_.b_elems());
    pass_.transition(mine.data(), mine.data() + na);
    // Phase 2: the entry state h_in_r from the pairs of the ranks before this one.
    if (cp.options.pair_scan == PairScan::log_depth) {
      own_M_.resize(na);
      Dev::copy(own_M_.data(), mine.data(), na);
      log_depth_scan(Dev{}, cp.comm, mine.data(), mine.data() + na, dims_, /*reverse=*/false,
                     cp_sites::kForwardLogScan, h_in_.data());
    } else {
      gathered_.resize(pair * P);
      cp.comm.all_gather(mine.data(), gathered_.data(), sizeof(T) * pair, cp_sites::kForwardPairs);
      std::vector<const T*> A(P), B(P);
      for (int i = 0; i < P; ++i) {
        A[i] = gathered_.data() + i * pair;
        B[i] = A[i] + na;
      }
      scan_states(Dev{}, A, B, r, dims_, h_in_.data());
    }
    h_in = h_in_.data();
  }
  // Phase 3: outputs from the true entry state.
  pass_.output(h_in, o, ht);
}

template <typename T, typename Dev>
void GdnContextParallel<T, Dev>::backward(const CpContext& cp, const T* dO, const T* dht,
                                          GdnGradView<T>& grads) {
  lifecycle_.backward();
  GDN_CHECK(comm_ == &cp.comm, "GdnContextParallel::backward without a forward on this group");
  const int P = cp.comm.size(), r = cp.comm.rank();
  const std::int64_t nb = dims_.b_elems(), pair = dims_.pair_elems();
  const T* lambda = nullptr;  // one rank: every sequence ends in its slice
  if (P > 1) {
    // Phase 1: D_r = dLoss/dh_in_r with a zero exit adjoint.
    PassBuffer<Dev, T> D(nb);  // written whole by the adjoint pass
    lambda_.resize(nb);
    pass_.prepare();
    pass_.adjoint(dO, dht, D.data());
    // Phase 2: the exit adjoint lambda_r from the ranks after this one.
    if (cp.options.pair_scan == PairScan::log_depth) {
      log_depth_scan(Dev{}, cp.comm, own_M_.data(), D.data(), dims_, /*reverse=*/true,
                     cp_sites::kBackwardLogScan, lambda_.data());
    } else {
      PassBuffer<Dev, T> all_D(nb * P);
      cp.comm.all_gather(D.data(), all_D.data(), sizeof(T) * nb, cp_sites::kBackwardAdjoints);
      std::vector<const T*> A(P), B(P);
      for (int i = 0; i < P; ++i) {
        A[i] = gathered_.data() + i * pair;
        B[i] = all_D.data() + i * nb;
      }
      scan_adjoints(Dev{}, A, B, r, dims_, lambda_.data());
    }
    lambda = lambda_.data();
  }
  // Phase 3: the exact local backward from the true h_in (kept) and lambda.
  const std::int64_t state_elems = std::int64_t(p_.num_sequences()) * p_.Hv * p_.K * p_.V;
  if (grads.dh0) Dev::fill(grads.dh0, state_elems, T(0));
  pass_.backward(lambda, dO, dht, grads);
  pass_.release_factors();
  if (grads.dh0 && r == 0) copy_empty_sequence_states<Dev>(p_, dht, grads.dh0);
  norm_.backward(grads.dq, grads.dk);
  // Each sequence's dh0 is on the rank holding its first token; share it.
  if (grads.dh0 && P > 1)
    cp.comm.all_reduce_sum(grads.dh0, state_elems, cp_sites::kInitialStateGrad);
}

#define GDN_INSTANTIATE(T, Dev) template class GdnContextParallel<T, Dev>;
GDN_FOR_EACH_DEVICE(GDN_INSTANTIATE)
#undef GDN_INSTANTIATE

}  // namespace gdn
