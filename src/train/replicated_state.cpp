#include "train/replicated_state.h"

#include "comm/call_sites.h"
#include "ops/adamw/adamw.h"
#include "runtime/devices.h"

namespace gdn {

template <typename T, typename Dev>
void reduce_grads(ParamStore<T, Dev>& ps, Mesh& mesh) {
  if (mesh.ep == 1) {
    mesh.world->all_reduce_sum(ps.grads(), std::size_t(ps.num_elements()),
                               train_sites::kGradAllReduce);
    return;
  }
  const std::vector<ParamUnit>& units = ps.units();
  for (std::size_t u = 0; u < units.size();) {
    std::size_t v = u;
    while (v < units.size() && units[v].expert == units[u].expert) ++v;
    const std::int64_t begin = units[u].begin, n = units[v - 1].end - begin;
    if (units[u].expert)
      mesh.expert_comm->all_reduce_sum(ps.grads() + begin, std::size_t(n),
                                       train_sites::kExpertGradAllReduce);
    else
      mesh.world->all_reduce_sum(ps.grads() + begin, std::size_t(n), train_sites::kGradAllReduce);
    u = v;
  }
}

template <typename T, typename Dev>
double whole_sum_squares(const ParamStore<T, Dev>& ps, const T* flat, const Mesh& mesh,
                         Communicator* host_ep) {
  if (mesh.ep == 1) return ops::sum_squares(Dev{}, flat, ps.num_elements());
  double dense = 0, experts = 0;
  for (const ParamUnit& u : ps.units())
    (u.expert ? experts : dense) += ops::sum_squares(Dev{}, flat + u.begin, u.size());
  host_ep->all_reduce_sum(&experts, 1, train_sites::kExpertNorms);
  return dense + experts;
}

#define GDN_INSTANTIATE(T, Dev)                                                               \
  template void reduce_grads<T, Dev>(ParamStore<T, Dev>&, Mesh&);                             \
  template double whole_sum_squares<T, Dev>(const ParamStore<T, Dev>&, const T*, const Mesh&, \
                                            Communicator*);
GDN_FOR_EACH_DEVICE(GDN_INSTANTIATE)
#undef GDN_INSTANTIATE

}  // namespace gdn
