// The training state sharded over every rank of the mesh (train.shard, docs/design.md
// §6d). Each rank owns one part of every unit of parameters (model/param_partition.h) and
// keeps, for that part only, the values, the reduced gradients and the AdamW moments.
//
//   optimizer: the model's parameters stay resident and whole (ParamStore::allocate).
//              After the backward, each unit's gradients are reduce-scattered into the
//              owned gradients; the norm, clipping and AdamW run on the owned part; the
//              updated parts are all-gathered back into the whole values.
//   full:      the model stores its parameters by unit. As the UnitGather of the model,
//              this gathers a unit's values before its forward and again before its
//              backward, reduce-scatters its gradients as soon as the backward has
//              finished them, and frees both.
//
// The gradient norm and the non-finite checks need one all-reduce each, over the owned
// parts' sums of squares, so every rank takes the same decision.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "model/model.h"
#include "model/param_partition.h"
#include "train/optimizer.h"
#include "train/param_state.h"
#include "train/train_config.h"

namespace gdn {

template <typename T, typename Dev>
class ShardedState final : public UnitGather, public ParamState<T, Dev> {
 public:
  // Collective over world (Dev's communicator of every rank, which moves the gradients and
  // values) and host_world (the same ranks on the host: norms, flags, checkpoints).
  // expert_group: with ep > 1, the ranks holding this rank's experts (Mesh::expert_comm),
  // over which the units of experts are split; null: the world. mode: optimizer or full.
  ShardedState(Sharding mode, Model<T, Dev>& model, Communicator& world, Communicator& host_world,
               Communicator* expert_group = nullptr);

  // init(seed): the owned values from the model's seeded initialisation (full: drawn one
  // unit at a time; optimizer: taken from the resident values).
  // The owned values from the whole model's host values in its flat order (checkpoints, weights
  // read from a file); optimizer: the resident values as well.
  void set_values(const std::vector<T>& whole);

  // The owned values from the seeded initialisation (ParamState).
  void init(std::uint64_t seed) override;
  // Before a step: the owned gradients to zero.
  void zero_grad() override;
  // optimizer: after the backward, each unit's resident gradients reduce-scattered into
  // the owned gradients (full: done by release(); reduce_phase() is null).
  const char* reduce_phase() const override;
  void reduce_gradients() override;
  // The global gradient norm (one all-reduce).
  double grad_norm() override;
  // One AdamW update of the owned values with the gradients times grad_scale (the clip
  // factor, train/optimizer.h); optimizer: then all-gathered into the model's.
  void adamw_step(const AdamWConfig& c, std::int64_t step, double lr, double grad_scale = 1.0);
  // The sum of squares of every value (one all-reduce): non-finite when one is.
  double values_sum_squares();
  // The name of the first parameter with a non-finite owned gradient (or value), agreed
  // over the ranks; "(none)".
  std::string first_nonfinite(bool grads) override;
  // ParamState: AdamW, then the sum of squares of every value.
  double update(const AdamWConfig& c, std::int64_t step, double lr, double clip) override {
    adamw_step(c, step, lr, clip);
    return values_sum_squares();
  }
  // ParamState: the owned part and its moments on the host, and their runs of the whole
  // model (written and read alike).
  std::vector<T> local_values() const override { return to_host<Dev>(values_); }
  std::vector<T> local_grads() const override { return to_host<Dev>(grads_); }
  std::size_t local_count() const override { return std::size_t(partition_.owned()); }
  void set_local_values(const std::vector<T>& values) override { set_owned_values(values); }
  std::vector<T> local_moments(bool second) const override {
    return to_host<Dev>(second ? v_ : m_);
  }
  void set_local_moments(const std::vector<T>& m, const std::vector<T>& v) override {
    set_owned_moments(m, v);
  }
  std::vector<GlobalRun> written_runs() const override;
  std::vector<GlobalRun> read_runs() const override { return written_runs(); }

  // The owned values from a host array in the owned order (a checkpoint's or a Hugging
  // Face checkpoint's runs); optimizer: then all-gathered into the resident ones.
  // Collective.
  void set_owned_values(const std::vector<T>& values);
  // The owned AdamW moments from host arrays in the owned order.
  void set_owned_moments(const std::vector<T>& m, const std::vector<T>& v);

  const ParamPartition& partition() const { return partition_; }
  // The owned part, unit after unit (partition().part(u).at).
  const Buffer<Dev, T>& owned_values() const { return values_; }
  const Buffer<Dev, T>& owned_grads() const { return grads_; }
  const Buffer<Dev, T>& owned_m() const { return m_; }
  const Buffer<Dev, T>& owned_v() const { return v_; }

  // UnitGather (full).
  void acquire(std::size_t u, bool values) override;
  void release(std::size_t u, bool grads) override;

 private:
  // The ranks unit u is split over: the world, or the expert group.
  Communicator& group(std::size_t u) {
    return expert_ && partition_.unit(u).expert ? *expert_ : world_;
  }
  void reduce_unit(std::size_t u, const T* grads);
  void gather_unit(std::size_t u, T* values, const char* site);
  // optimizer: every unit's owned parts all-gathered into the resident values.
  void gather_resident();

  Sharding mode_;
  Model<T, Dev>& model_;
  ParamStore<T, Dev>& ps_;
  Communicator& world_;
  Communicator& host_;
  Communicator* expert_;
  ParamPartition partition_;
  Buffer<Dev, T> values_, grads_, m_, v_;  // the owned part, unit after unit
  Buffer<Dev, T> scratch_;                 // one unit's padded gradients, or a block
  // Runs of owned elements with one decay flag: [at, at + n) of the owned buffer.
  struct Run {
    std::int64_t at, n;
    bool decay;
  };
  std::vector<Run> runs_;
  // full: the units gathered since zero_grad(). A unit's first gather of a step counts
  // under the forward's site, later ones under the backward's.
  std::vector<bool> gathered_;
};

}  // namespace gdn
