// The three-phase CP forward and backward, written once for any Space (see host_space.h).
// Included by the files that instantiate GdnContextParallel for a space.
#pragma once

#include "core/error.h"
#include "cp/gdn_cp.h"

namespace gdn {

template <typename T, typename Space>
GdnContextParallel<T, Space>::GdnContextParallel(Communicator& comm, const GdnProblem& p,
                                                 const GdnTensors<T>& local, CpOptions opt)
    : comm_(comm),
      p_(p.validated()),
      opt_(opt),
      shard_(contiguous_shard(p.T, comm.size(), comm.rank())),
      norm_(p_, shard_.size(), local),
      pass_(p_, shard_.begin, shard_.end, norm_.view()),
      dims_{p.B * p.Hv, p.K, p.V} {}

template <typename T, typename Space>
void GdnContextParallel<T, Space>::forward(T* o, T* ht) {
  const int P = comm_.size(), r = comm_.rank();
  const std::int64_t na = dims_.a_elems(), pair = dims_.pair_elems();
  // Phase 1: this shard as one affine map of its entry state.
  pass_.prepare();
  typename Space::Vector mine(pair), h_in(dims_.b_elems());
  pass_.transition(mine.data(), mine.data() + na);
  // Phase 2: the entry state h_in_r from the pairs of the ranks before this one.
  if (opt_.log_depth_scan) {
    own_M_.resize(na);
    Space::copy(own_M_.data(), mine.data(), na);
    Space::log_depth_scan(comm_, mine.data(), mine.data() + na, dims_, /*reverse=*/false,
                          cp_sites::kForwardLogScan, h_in.data());
  } else {
    gathered_.resize(pair * P);
    comm_.all_gather(mine.data(), gathered_.data(), sizeof(T) * pair, cp_sites::kForwardPairs);
    std::vector<const T*> A(P), B(P);
    for (int i = 0; i < P; ++i) {
      A[i] = gathered_.data() + i * pair;
      B[i] = A[i] + na;
    }
    Space::scan_states(A, B, r, dims_, h_in.data());
  }
  // Phase 3: outputs from the true entry state.
  const std::int64_t state_elems = std::int64_t(p_.num_sequences()) * p_.Hv * p_.K * p_.V;
  if (ht) Space::fill(ht, state_elems, T(0));
  pass_.output(h_in.data(), o, ht);
  // Each sequence's final state is on the rank holding its last token; share it.
  if (ht && P > 1) comm_.all_reduce_sum(ht, state_elems, cp_sites::kFinalState);
}

template <typename T, typename Space>
void GdnContextParallel<T, Space>::backward(const T* dO, const T* dht, GdnGrads<T>& grads) {
  const int P = comm_.size(), r = comm_.rank();
  const std::int64_t na = dims_.a_elems(), nb = dims_.b_elems(), pair = dims_.pair_elems();
  // Phase 1: D_r = dLoss/dh_in_r with a zero exit adjoint.
  typename Space::Vector D(nb), lambda(nb);
  pass_.adjoint(dO, dht, D.data());
  // Phase 2: the exit adjoint lambda_r from the ranks after this one.
  if (opt_.log_depth_scan) {
    GDN_CHECK(!own_M_.empty() || na == 0, "GdnContextParallel::backward before forward");
    Space::log_depth_scan(comm_, own_M_.data(), D.data(), dims_, /*reverse=*/true,
                          cp_sites::kBackwardLogScan, lambda.data());
  } else {
    GDN_CHECK(gathered_.size() == std::size_t(pair * P),
              "GdnContextParallel::backward before forward");
    typename Space::Vector all_D(nb * P);
    comm_.all_gather(D.data(), all_D.data(), sizeof(T) * nb, cp_sites::kBackwardAdjoints);
    std::vector<const T*> A(P), B(P);
    for (int i = 0; i < P; ++i) {
      A[i] = gathered_.data() + i * pair;
      B[i] = all_D.data() + i * nb;
    }
    Space::scan_adjoints(A, B, r, dims_, lambda.data());
  }
  // Phase 3: the exact local backward from the true h_in (kept) and lambda.
  const std::int64_t state_elems = std::int64_t(p_.num_sequences()) * p_.Hv * p_.K * p_.V;
  if (grads.dh0) Space::fill(grads.dh0, state_elems, T(0));
  pass_.backward(lambda.data(), dO, dht, grads);
  norm_.backward(grads.dq, grads.dk);
  // Each sequence's dh0 is on the rank holding its first token; share it.
  if (grads.dh0 && P > 1) comm_.all_reduce_sum(grads.dh0, state_elems, cp_sites::kInitialStateGrad);
}

}  // namespace gdn
