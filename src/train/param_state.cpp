#include "train/param_state.h"

#include "runtime/devices.h"
#include "train/replicated_state.h"
#include "train/sharded_state.h"

namespace gdn {

template <typename T, typename Dev>
std::unique_ptr<ParamState<T, Dev>> make_param_state(const TrainConfig& t, Model<T, Dev>& model,
                                                     Mesh& mesh, Communicator& world,
                                                     Communicator* host_ep) {
  if (t.shard == Sharding::none)
    return std::make_unique<ReplicatedState<T, Dev>>(model, mesh, world, host_ep, adamw_config(t));
  auto s = std::make_unique<ShardedState<T, Dev>>(t.shard, model, *mesh.world, world,
                                                  mesh.expert_comm.get());
  if (t.shard == Sharding::full) model.set_unit_gather(s.get());
  return s;
}

#define GDN_INSTANTIATE(T, Dev)                                          \
  template std::unique_ptr<ParamState<T, Dev>> make_param_state<T, Dev>( \
      const TrainConfig&, Model<T, Dev>&, Mesh&, Communicator&, Communicator*);
GDN_FOR_EACH_DEVICE(GDN_INSTANTIATE)
#undef GDN_INSTANTIATE

}  // namespace gdn
