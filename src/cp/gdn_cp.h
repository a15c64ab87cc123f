// The gated delta rule with context parallelism (DESIGN.md sections 3-4).
//
// Forward:  1. local pass from a zero state -> (M_r, U_r);  2. all-gather the pairs and
//           prefix-scan them -> h_in_r;  3. local pass from h_in_r -> outputs.
// Backward: 1. local adjoint pass with lambda = 0 -> D_r;  2. all-gather D_r, suffix-scan
//           with the M_r kept from the forward -> lambda_r;  3. full local backward.
// With log_depth_scan, step 2 is a Hillis-Steele scan over point-to-point messages.
// Talks to other ranks only through the Communicator.
#pragma once

#include <vector>

#include "comm/communicator.h"
#include "cp/host_space.h"
#include "cp/pair_scan.h"
#include "cp/shard.h"
#include "gdn/problem.h"

namespace gdn {

struct CpOptions {
  bool log_depth_scan = false;
};

// Call-site names of the Communicator counters, for tests and stats.
namespace cp_sites {
inline const char* const kForwardPairs = "cp.fwd.allgather_pairs";
inline const char* const kBackwardAdjoints = "cp.bwd.allgather_adjoints";
inline const char* const kForwardLogScan = "cp.fwd.log_depth_scan";
inline const char* const kBackwardLogScan = "cp.bwd.log_depth_scan";
inline const char* const kFinalState = "cp.fwd.final_state";
inline const char* const kInitialStateGrad = "cp.bwd.dh0";
}  // namespace cp_sites

// Space: where buffers live and the passes run (HostSpace, or the CUDA build's device
// space); every pointer given to and returned by this class lives there.
template <typename T, typename Space = HostSpace<T>>
class GdnContextParallel {
 public:
  // p is the global problem (T the whole sequence); `local` views this rank's shard,
  // contiguous_shard(p.T, comm.size(), comm.rank()): [B, shard tokens, H, D]. local.h0,
  // when set, is the global [N, Hv, K, V] initial state (the same on every rank).
  GdnContextParallel(Communicator& comm, const GdnProblem& p, const GdnTensors<T>& local,
                     CpOptions opt = {});

  const Shard& shard() const { return shard_; }

  // o: this shard's outputs [B, shard tokens, Hv, V]. ht (may be null): the global final
  // states [N, Hv, K, V], the same on every rank.
  void forward(T* o, T* ht);
  // dO: this shard's output gradient; dht (may be null): global [N, Hv, K, V].
  // grads.dq ... dbeta: this shard's input gradients; grads.dh0 (global, when h0 was
  // given) the same on every rank.
  void backward(const T* dO, const T* dht, GdnGrads<T>& grads);

 private:
  Communicator& comm_;
  GdnProblem p_;
  CpOptions opt_;
  Shard shard_;
  typename Space::Normalizer norm_;
  typename Space::Pass pass_;
  PairDims dims_;
  typename Space::Vector own_M_;     // this rank's M (log-depth backward)
  typename Space::Vector gathered_;  // every rank's (M, U), kept for the backward's suffix scan
};

}  // namespace gdn
