// The parameters' training state as one rank holds it: the values, the gradients' sums
// over the ranks, and the AdamW moments (docs/design.md §6d). The trainer sees only this
// interface; train.shard chooses what is behind it:
//
//   none               ReplicatedState (train/replicated_state.h): every rank holds every
//                      parameter (with ep > 1, its ep rank's experts), the gradients
//                      all-reduced, AdamW on the whole store.
//   optimizer, full    ShardedState (train/sharded_state.h): each rank owns one part of
//                      every unit; the gradients reduce-scattered into it, AdamW on it.
//
// Collective where it says so: every rank calls it at the same point of the step.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "model/model.h"
#include "train/mesh.h"
#include "train/optimizer.h"
#include "train/state_gather.h"
#include "train/train_config.h"

namespace gdn {

template <typename T, typename Dev>
class ParamState {
 public:
  virtual ~ParamState() = default;

  // The seeded initial values.
  virtual void init(std::uint64_t seed) = 0;
  // Before a step: the gradients to zero.
  virtual void zero_grad() = 0;
  // After the backward, the gradients summed over every rank (collective), under the
  // watchdog phase reduce_phase(); null when the backward already did it (train.shard full).
  virtual const char* reduce_phase() const = 0;
  virtual void reduce_gradients() = 0;
  // The whole model's gradient norm (collective).
  virtual double grad_norm() = 0;
  // One AdamW update with the gradients times `clip` (the clip factor); returns the sum
  // of squares of every value after it, non-finite when one is (collective).
  virtual double update(const AdamWConfig& c, std::int64_t step, double lr, double clip) = 0;
  // The name of the first parameter with a non-finite gradient (or value), agreed over
  // the ranks; "(none)". Collective.
  virtual std::string first_nonfinite(bool grads) = 0;

  // Checkpoints and exports. The values this rank holds (its owned parts, or every
  // parameter it holds), on the host, in read_runs()'s places; their count.
  virtual std::vector<T> local_values() const = 0;
  virtual std::size_t local_count() const = 0;
  // Sets them (collective: optimizer gathers the resident values).
  virtual void set_local_values(const std::vector<T>& values) = 0;
  // The gradients in the same places, after reduce_gradients(): their sums over the ranks
  // (gdn_eval writes them; a training step reads them on the device).
  virtual std::vector<T> local_grads() const = 0;
  // AdamW's first (m) or second (v) moments in the same places.
  virtual std::vector<T> local_moments(bool second) const = 0;
  virtual void set_local_moments(const std::vector<T>& m, const std::vector<T>& v) = 0;
  // The runs of the whole model's flat order this rank writes (its owned parts;
  // replicated, rank 0 all but the experts and the first ep group its experts) and reads
  // (its owned parts, or every parameter it holds), at places of local_values().
  virtual std::vector<GlobalRun> written_runs() const = 0;
  virtual std::vector<GlobalRun> read_runs() const = 0;
};

// The state train.shard asks for. world: the host communicator of every rank; host_ep:
// the ep group on the host (null when ep = 1). With train.shard full the state becomes
// the model's UnitGather.
template <typename T, typename Dev>
std::unique_ptr<ParamState<T, Dev>> make_param_state(const TrainConfig& t, Model<T, Dev>& model,
                                                     Mesh& mesh, Communicator& world,
                                                     Communicator* host_ep);

}  // namespace gdn
