// The replicated training state (train.shard none) under expert parallelism: every rank
// holds every parameter but the experts, of which it holds its ep rank's block
// (docs/design.md §6d).
#pragma once

#include "comm/communicator.h"
#include "model/params.h"
#include "train/mesh.h"
#include "train/optimizer.h"
#include "train/param_state.h"

namespace gdn {

// Sums the gradients over the ranks: one all-reduce of the flat buffer over the world when
// ep = 1; with ep > 1, each run of units of one kind, experts over the ranks holding them
// (Mesh::expert_comm), the rest over the world.
template <typename T, typename Dev>
void reduce_grads(ParamStore<T, Dev>& ps, Mesh& mesh);

// The sum of squares of the whole model's gradients (or values) from this rank's flat
// buffer of them: with ep > 1 the experts' part is summed over the ep group (host_ep, on
// the host), which holds each expert once.
template <typename T, typename Dev>
double whole_sum_squares(const ParamStore<T, Dev>& ps, const T* flat, const Mesh& mesh,
                         Communicator* host_ep);

// train.shard none behind the trainer's ParamState: the model's own store, AdamW's moments
// for all of it.
template <typename T, typename Dev>
class ReplicatedState final : public ParamState<T, Dev> {
 public:
  // world: the host communicator of every rank; host_ep: the ep group on the host (null
  // when ep = 1).
  ReplicatedState(Model<T, Dev>& model, Mesh& mesh, Communicator& world, Communicator* host_ep,
                  const AdamWConfig& c);

  void init(std::uint64_t seed) override { model_.init(seed); }
  void zero_grad() override {}  // the trainer zeroes the model's gradients
  const char* reduce_phase() const override;
  void reduce_gradients() override { reduce_grads(model_.params(), mesh_); }
  double grad_norm() override;
  double update(const AdamWConfig& c, std::int64_t step, double lr, double clip) override;
  std::string first_nonfinite(bool grads) override;
  std::vector<T> local_values() const override { return model_.params().host_values(); }
  std::vector<T> local_grads() const override { return model_.params().host_grads(); }
  std::size_t local_count() const override;
  void set_local_values(const std::vector<T>& values) override;
  std::vector<T> local_moments(bool second) const override;
  void set_local_moments(const std::vector<T>& m, const std::vector<T>& v) override;
  std::vector<GlobalRun> written_runs() const override;
  std::vector<GlobalRun> read_runs() const override;

 private:
  double sum_squares(const T* flat) {
    return whole_sum_squares(model_.params(), flat, mesh_, host_ep_);
  }

  Model<T, Dev>& model_;
  Mesh& mesh_;
  Communicator& world_;
  Communicator* host_ep_;
  AdamW<T, Dev> adamw_;
};

}  // namespace gdn
