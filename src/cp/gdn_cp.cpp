#include "cp/gdn_cp.h"

#include <algorithm>

#include "core/error.h"

namespace gdn {

template <typename T>
GdnContextParallel<T>::GdnContextParallel(Communicator& comm, const GdnProblem& p,
                                          const GdnTensors<T>& local, CpOptions opt)
    : comm_(comm),
      p_(p.validated()),
      opt_(opt),
      shard_(contiguous_shard(p.T, comm.size(), comm.rank())),
      norm_(p_, shard_.size(), local),
      pass_(p_, shard_.begin, shard_.end, norm_.view()),
      dims_{p.B * p.Hv, p.K, p.V} {}

template <typename T>
void GdnContextParallel<T>::forward(T* o, T* ht) {
  const int P = comm_.size(), r = comm_.rank();
  const std::int64_t na = dims_.a_elems(), pair = dims_.pair_elems();
  // Phase 1: this shard as one affine map of its entry state.
  pass_.prepare();
  std::vector<T> mine(pair), h_in(dims_.b_elems());
  pass_.transition(mine.data(), mine.data() + na);
  // Phase 2: the entry state h_in_r from the pairs of the ranks before this one.
  if (opt_.log_depth_scan) {
    own_M_.assign(mine.begin(), mine.begin() + na);
    log_depth_exclusive_scan(comm_, mine.data(), mine.data() + na, dims_, /*reverse=*/false,
                             cp_sites::kForwardLogScan, h_in.data());
  } else {
    gathered_.resize(pair * P);
    comm_.all_gather(mine.data(), gathered_.data(), sizeof(T) * pair, cp_sites::kForwardPairs);
    std::vector<const T*> A(P), B(P);
    for (int i = 0; i < P; ++i) {
      A[i] = gathered_.data() + i * pair;
      B[i] = A[i] + na;
    }
    scan_states_from(A, B, r, dims_, h_in.data());
  }
  // Phase 3: outputs from the true entry state.
  const std::int64_t state_elems = std::int64_t(p_.num_sequences()) * p_.Hv * p_.K * p_.V;
  if (ht) std::fill(ht, ht + state_elems, T(0));
  pass_.output(h_in.data(), o, ht);
  // Each sequence's final state is on the rank holding its last token; share it.
  if (ht && P > 1) comm_.all_reduce_sum(ht, state_elems, cp_sites::kFinalState);
}

template <typename T>
void GdnContextParallel<T>::backward(const T* dO, const T* dht, GdnGrads<T>& grads) {
  const int P = comm_.size(), r = comm_.rank();
  const std::int64_t na = dims_.a_elems(), nb = dims_.b_elems(), pair = dims_.pair_elems();
  // Phase 1: D_r = dLoss/dh_in_r with a zero exit adjoint.
  std::vector<T> D(nb), lambda(nb);
  pass_.adjoint(dO, dht, D.data());
  // Phase 2: the exit adjoint lambda_r from the ranks after this one.
  if (opt_.log_depth_scan) {
    GDN_CHECK(!own_M_.empty() || na == 0, "GdnContextParallel::backward before forward");
    log_depth_exclusive_scan(comm_, own_M_.data(), D.data(), dims_, /*reverse=*/true,
                             cp_sites::kBackwardLogScan, lambda.data());
  } else {
    GDN_CHECK(gathered_.size() == std::size_t(pair * P),
              "GdnContextParallel::backward before forward");
    std::vector<T> all_D(nb * P);
    comm_.all_gather(D.data(), all_D.data(), sizeof(T) * nb, cp_sites::kBackwardAdjoints);
    std::vector<const T*> A(P), B(P);
    for (int i = 0; i < P; ++i) {
      A[i] = gathered_.data() + i * pair;
      B[i] = all_D.data() + i * nb;
    }
    scan_adjoints_from(A, B, r, dims_, lambda.data());
  }
  // Phase 3: the exact local backward from the true h_in (kept) and lambda.
  const std::int64_t state_elems = std::int64_t(p_.num_sequences()) * p_.Hv * p_.K * p_.V;
  if (grads.dh0) std::fill(grads.dh0, grads.dh0 + state_elems, T(0));
  pass_.backward(lambda.data(), dO, dht, grads);
  norm_.backward(grads.dq, grads.dk);
  // Each sequence's dh0 is on the rank holding its first token; share it.
  if (grads.dh0 && P > 1) comm_.all_reduce_sum(grads.dh0, state_elems, cp_sites::kInitialStateGrad);
}

template class GdnContextParallel<float>;
template class GdnContextParallel<double>;

}  // namespace gdn
