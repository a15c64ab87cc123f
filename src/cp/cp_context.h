// What every context-parallel layer needs to know about the layout, built once per step
// and handed to each mixer: the cp group's communicator, this rank's shard, the global
// sequence length, and the options of the exchange (docs/design.md §3).
#pragma once

#include <cstdint>

#include "comm/communicator.h"
#include "cp/documents.h"
#include "cp/shard.h"
#include "gdn/pairs/scan_cost.h"

namespace gdn {

struct CpOptions {
  // How GDN layers scan their pairs (gdn/pairs/scan_cost.h): allgather or log_depth; auto
  // is resolved before a step (model/pair_scan_choice.h) and refused here.
  PairScan pair_scan = PairScan::allgather;
  // Inside the attention layers only: query rows in a balanced zigzag set (attention_cp.h).
  bool attention_layer_local = false;
  // The intra-rank sequence split of the host passes (gdn/split/split_pass.h, docs/design.md §4b):
  // 0 decides (split when B * Hv would leave OpenMP threads idle and the shard has the
  // chunks for it; the bits then depend on the thread count), 1 never splits, S >= 2
  // always cuts the shard into S pieces (fewer when it has fewer chunks).
  int split_pieces = 0;
  // The scan over the pieces: Hillis-Steele (log depth) instead of the serial chain.
  bool split_log_depth = false;
};

// The step's part of a CpContext: which tokens of the step's rows this rank holds, and
// how the rows are cut into documents. The model gets one per step; the communicator and
// the options it gets once (model/model_comms.h).
struct StepShard {
  Shard shard;  // this rank's tokens [begin, end) of every row
  std::int64_t T_global = 0;
  const Documents* documents = nullptr;  // null: each row is one document

  // The contiguous shard of rank r of P (shard.h).
  static StepShard contiguous(std::int64_t T_global, int P = 1, int r = 0) {
    return {contiguous_shard(T_global, P, r), T_global};
  }
};

struct CpContext {
  Communicator& comm;  // the cp group; takes buffers of the device the layers run on
  Shard shard;         // this rank's tokens [begin, end) of every sequence
  std::int64_t T_global = 0;
  CpOptions options;
  // Packed documents of the rows of this step (documents.h); null: each row is one.
  const Documents* documents = nullptr;

  // The contiguous shard of rank comm.rank() of comm.size() (shard.h).
  static CpContext contiguous(Communicator& comm, std::int64_t T_global, CpOptions opt = {}) {
    return {comm, contiguous_shard(T_global, comm.size(), comm.rank()), T_global, opt};
  }
  static CpContext of(Communicator& comm, const StepShard& s, CpOptions opt) {
    return {comm, s.shard, s.T_global, opt, s.documents};
  }
  std::int64_t tokens() const { return shard.size(); }
};

}  // namespace gdn
