// The training state of every rank put together on rank 0, in the whole model's flat
// order (ParamInfo::global), for checkpoints and Hugging Face exports: each rank sends
// the runs it is responsible for (its owned parts when sharded; with ep > 1 and no
// sharding, rank 0 the parameters other than experts and the first ep group its experts).
#pragma once

#include <cstdint>
#include <vector>

#include "comm/communicator.h"
#include "model/params.h"

namespace gdn {

// Collective over comm: every rank's runs of each source (host arrays), put at their
// places in `total`-element arrays on rank 0, one per source (empty elsewhere). The runs
// of all ranks must cover each element once.
template <typename T>
std::vector<std::vector<T>> gather_runs(Communicator& comm, const std::vector<GlobalRun>& runs,
                                        const std::vector<const T*>& sources, std::int64_t total,
                                        const char* site);

}  // namespace gdn
