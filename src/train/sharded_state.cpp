#include "train/sharded_state.h"

#include <cmath>

#include "comm/call_sites.h"
#include "core/error.h"
#include "ops/adamw/adamw.h"
#include "ops/elementwise/elementwise.h"
#include "runtime/devices.h"

namespace gdn {

template <typename T, typename Dev>
ShardedState<T, Dev>::ShardedState(Sharding mode, Model<T, Dev>& model, Communicator& world,
                                   Communicator& host_world, Communicator* expert_group)
    : mode_(mode),
      model_(model),
      ps_(model.params()),
      world_(world),
      host_(host_world),
      expert_(expert_group),
      partition_(model.params().units(), world.size(), world.rank(),
                 expert_group ? expert_group->size() : world.size(),
                 expert_group ? expert_group->rank() : world.rank()) {
  GDN_CHECK(mode != Sharding::none, "ShardedState: train.shard is none");
  GDN_CHECK(ps_.flat() == (mode == Sharding::optimizer), "ShardedState: train.shard ",
            name_of(mode), " needs the model's parameters ",
            mode == Sharding::full ? "stored by unit" : "resident");
  const std::size_t owned = std::size_t(partition_.owned());
  for (Buffer<Dev, T>* b : {&values_, &grads_, &m_, &v_}) b->resize(owned);
  gathered_.assign(partition_.num_units(), false);
  // The owned elements of each parameter, merged into runs of one decay flag.
  for (const ParamInfo& p : ps_.infos()) {
    const OwnedPart& o = partition_.part(p.unit);
    const std::int64_t lo = std::max(p.offset, o.begin);
    const std::int64_t hi = std::min(p.offset + p.size, o.begin + o.size);
    if (hi <= lo) continue;
    const std::int64_t at = o.at + (lo - o.begin);
    if (!runs_.empty() && runs_.back().decay == p.decay && runs_.back().at + runs_.back().n == at)
      runs_.back().n += hi - lo;
    else
      runs_.push_back({at, hi - lo, p.decay});
  }
}

template <typename T, typename Dev>
void ShardedState<T, Dev>::init(std::uint64_t seed) {
  if (mode_ == Sharding::optimizer) {
    model_.init(seed);
    for (std::size_t u = 0; u < partition_.num_units(); ++u) {
      const OwnedPart& o = partition_.part(u);
      Dev::copy(values_.data() + o.at, ps_.unit_values(u) + (o.begin - o.unit_begin),
                std::size_t(o.size));
    }
    return;
  }
  model_.draw_init_by_unit(seed, [&](std::size_t u, const T* host) {
    const OwnedPart& o = partition_.part(u);
    Dev::upload(values_.data() + o.at, host + (o.begin - o.unit_begin), std::size_t(o.size));
  });
}

namespace {

// The owned elements of the whole model's host values, unit after unit, into an owned
// buffer.
template <typename T, typename Dev>
void upload_owned(const ParamPartition& part, const std::vector<ParamInfo>& infos,
                  const std::vector<T>& whole, Buffer<Dev, T>& owned) {
  for (const OwnedPart& o : part.parts())
    for_each_global_run(infos, o.begin, o.begin + o.size,
                        [&](std::int64_t local, std::int64_t global, std::int64_t n) {
                          Dev::upload(owned.data() + o.at + (local - o.begin),
                                      whole.data() + global, std::size_t(n));
                        });
}

}  // namespace

template <typename T, typename Dev>
void ShardedState<T, Dev>::set_values(const std::vector<T>& whole) {
  upload_owned<T, Dev>(partition_, ps_.infos(), whole, values_);
  if (mode_ == Sharding::optimizer) ps_.set_values(local_from_global(ps_.infos(), whole));
}

template <typename T, typename Dev>
void ShardedState<T, Dev>::set_owned_values(const std::vector<T>& values) {
  GDN_CHECK(values.size() == std::size_t(partition_.owned()), "set_owned_values: ", values.size(),
            " elements for an owned part of ", partition_.owned());
  Dev::upload(values_.data(), values.data(), values.size());
  if (mode_ == Sharding::optimizer) gather_resident();
}

template <typename T, typename Dev>
void ShardedState<T, Dev>::gather_resident() {
  for (std::size_t u = 0; u < partition_.num_units(); ++u)
    gather_unit(u, ps_.unit_values(u), train_sites::kParamAllGather);
}

template <typename T, typename Dev>
void ShardedState<T, Dev>::set_owned_moments(const std::vector<T>& m, const std::vector<T>& v) {
  const std::size_t n = std::size_t(partition_.owned());
  GDN_CHECK(m.size() == n && v.size() == n, "set_owned_moments: ", m.size(), " and ", v.size(),
            " elements for an owned part of ", n);
  Dev::upload(m_.data(), m.data(), n);
  Dev::upload(v_.data(), v.data(), n);
}

template <typename T, typename Dev>
void ShardedState<T, Dev>::zero_grad() {
  Dev::fill(grads_.data(), grads_.size(), T(0));
  gathered_.assign(gathered_.size(), false);
  if (mode_ == Sharding::optimizer) ps_.zero_grad();
}

template <typename T, typename Dev>
void ShardedState<T, Dev>::reduce_unit(std::size_t u, const T* grads) {
  const OwnedPart& o = partition_.part(u);
  Communicator& comm = group(u);
  const std::int64_t n = partition_.unit(u).size(), W = comm.size();
  // W whole blocks, zero past the unit; this rank's sum lands in its own block (in place).
  scratch_.resize(std::size_t(W * o.block));
  Dev::copy(scratch_.data(), grads, std::size_t(n));
  Dev::fill(scratch_.data() + n, std::size_t(W * o.block - n), T(0));
  T* mine = scratch_.data() + std::int64_t(comm.rank()) * o.block;
  comm.reduce_scatter_sum(scratch_.data(), mine, std::size_t(o.block),
                          train_sites::kGradReduceScatter);
  ops::add(Dev{}, grads_.data() + o.at, grads_.data() + o.at, mine, o.size);
}

template <typename T, typename Dev>
void ShardedState<T, Dev>::gather_unit(std::size_t u, T* values, const char* site) {
  const OwnedPart& o = partition_.part(u);
  Communicator& comm = group(u);
  const int W = comm.size();
  std::vector<std::size_t> bytes(static_cast<std::size_t>(W)), offsets(bytes.size());
  for (int w = 0; w < W; ++w) {
    const OwnedPart p = partition_.part_of(u, w);
    bytes[std::size_t(w)] = std::size_t(p.size) * sizeof(T);
    offsets[std::size_t(w)] = std::size_t(p.begin - p.unit_begin) * sizeof(T);
  }
  T* mine = values + (o.begin - o.unit_begin);
  Dev::copy(mine, values_.data() + o.at, std::size_t(o.size));
  comm.all_gather_v(mine, std::size_t(o.size) * sizeof(T), values, bytes, offsets, site);
}

template <typename T, typename Dev>
void ShardedState<T, Dev>::reduce_gradients() {
  GDN_CHECK(mode_ == Sharding::optimizer, "reduce_gradients: train.shard full reduces by unit");
  for (std::size_t u = 0; u < partition_.num_units(); ++u) reduce_unit(u, ps_.unit_grads(u));
}

template <typename T, typename Dev>
void ShardedState<T, Dev>::acquire(std::size_t u, bool values) {
  ps_.materialize(u, values);
  if (!values) return;
  gather_unit(u, ps_.unit_values(u),
              gathered_[u] ? train_sites::kBackwardParamGather : train_sites::kForwardParamGather);
  gathered_[u] = true;
}

template <typename T, typename Dev>
void ShardedState<T, Dev>::release(std::size_t u, bool grads) {
  if (grads) reduce_unit(u, ps_.unit_grads(u));
  ps_.evict(u);
}

template <typename T, typename Dev>
double ShardedState<T, Dev>::grad_norm() {
  double sq = ops::sum_squares(Dev{}, grads_.data(), partition_.owned());
  host_.all_reduce_sum(&sq, 1, train_sites::kShardNorms);
  return std::sqrt(sq);
}

template <typename T, typename Dev>
void ShardedState<T, Dev>::adamw_step(const AdamWConfig& c, std::int64_t step, double lr,
                                      double grad_scale) {
  for (const Run& r : runs_)
    ops::adamw_update(Dev{}, values_.data() + r.at, grads_.data() + r.at, m_.data() + r.at,
                      v_.data() + r.at, r.n, lr, c.beta1, c.beta2, c.eps,
                      r.decay ? c.weight_decay : 0.0, step, grad_scale);
  if (mode_ == Sharding::optimizer) gather_resident();
}

template <typename T, typename Dev>
double ShardedState<T, Dev>::values_sum_squares() {
  double sq = ops::sum_squares(Dev{}, values_.data(), partition_.owned());
  host_.all_reduce_sum(&sq, 1, train_sites::kShardNorms);
  return sq;
}

template <typename T, typename Dev>
std::string ShardedState<T, Dev>::first_nonfinite(bool grads) {
  const std::vector<T> host = to_host<Dev>(grads ? grads_ : values_);
  const std::vector<ParamInfo>& infos = ps_.infos();
  // The lowest parameter index with a non-finite owned element, as a max of its distance
  // from the end (0: none here).
  std::int64_t found = 0;
  for (std::size_t i = 0; i < infos.size() && found == 0; ++i) {
    const ParamInfo& p = infos[i];
    const OwnedPart& o = partition_.part(p.unit);
    const std::int64_t lo = std::max(p.offset, o.begin);
    const std::int64_t hi = std::min(p.offset + p.size, o.begin + o.size);
    for (std::int64_t e = lo; e < hi; ++e)
      if (!std::isfinite(double(host[std::size_t(o.at + e - o.begin)]))) {
        found = std::int64_t(infos.size() - i);
        break;
      }
  }
  host_.all_reduce_max(&found, 1, train_sites::kShardNorms);
  return found == 0 ? "(none)" : infos[infos.size() - std::size_t(found)].name;
}

template <typename T, typename Dev>
const char* ShardedState<T, Dev>::reduce_phase() const {
  return mode_ == Sharding::optimizer ? train_sites::kGradReduceScatter : nullptr;
}

template <typename T, typename Dev>
std::vector<GlobalRun> ShardedState<T, Dev>::written_runs() const {
  std::vector<GlobalRun> runs;
  for (const OwnedPart& o : partition_.parts())
    for_each_global_run(ps_.infos(), o.begin, o.begin + o.size,
                        [&](std::int64_t local, std::int64_t g, std::int64_t n) {
                          runs.push_back({g, o.at + (local - o.begin), n});
                        });
  return runs;
}

#define GDN_INSTANTIATE(T, Dev) template class ShardedState<T, Dev>;
GDN_FOR_EACH_DEVICE(GDN_INSTANTIATE)
#undef GDN_INSTANTIATE

}  // namespace gdn
