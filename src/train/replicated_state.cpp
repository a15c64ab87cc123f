#include "train/replicated_state.h"

#include <cmath>

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

template <typename T, typename Dev>
ReplicatedState<T, Dev>::ReplicatedState(Model<T, Dev>& model, Mesh& mesh, Communicator& world,
                                         Communicator* host_ep, const AdamWConfig& c)
    : model_(model),
      mesh_(mesh),
      world_(world),
      host_ep_(host_ep),
      adamw_(c, model.params().num_elements()) {}

template <typename T, typename Dev>
const char* ReplicatedState<T, Dev>::reduce_phase() const {
  return train_sites::kGradAllReduce;
}

template <typename T, typename Dev>
double ReplicatedState<T, Dev>::grad_norm() {
  if (mesh_.ep == 1) return gdn::grad_norm(model_.params());  // as it always was: the same bits
  return std::sqrt(sum_squares(model_.params().grads()));
}

template <typename T, typename Dev>
double ReplicatedState<T, Dev>::update(const AdamWConfig&, std::int64_t step, double lr,
                                       double clip) {
  adamw_.step(model_.params(), step, lr, clip);
  return sum_squares(model_.params().values());
}

template <typename T, typename Dev>
std::string ReplicatedState<T, Dev>::first_nonfinite(bool grads) {
  const ParamStore<T, Dev>& ps = model_.params();
  const std::vector<T> host = grads ? ps.host_grads() : ps.host_values();
  for (const ParamInfo& p : ps.infos())
    for (std::int64_t i = 0; i < p.size; ++i)
      if (!std::isfinite(double(host[std::size_t(p.offset + i)]))) return p.name;
  return "(none)";
}

template <typename T, typename Dev>
std::size_t ReplicatedState<T, Dev>::local_count() const {
  return std::size_t(model_.params().num_elements());
}

template <typename T, typename Dev>
void ReplicatedState<T, Dev>::set_local_values(const std::vector<T>& values) {
  model_.params().set_values(values);
}

template <typename T, typename Dev>
std::vector<T> ReplicatedState<T, Dev>::local_moments(bool second) const {
  return to_host<Dev>(second ? adamw_.v() : adamw_.m());
}

template <typename T, typename Dev>
void ReplicatedState<T, Dev>::set_local_moments(const std::vector<T>& m, const std::vector<T>& v) {
  Dev::upload(adamw_.m().data(), m.data(), m.size());
  Dev::upload(adamw_.v().data(), v.data(), v.size());
}

template <typename T, typename Dev>
std::vector<GlobalRun> ReplicatedState<T, Dev>::written_runs() const {
  // Rank 0 all but the experts, each rank of the first ep group its experts.
  const ParamStore<T, Dev>& ps = model_.params();
  std::vector<GlobalRun> runs;
  for (const ParamUnit& u : ps.units())
    if (u.expert ? world_.rank() < mesh_.ep : world_.rank() == 0)
      for_each_global_run(ps.infos(), u.begin, u.end,
                          [&](std::int64_t local, std::int64_t g, std::int64_t n) {
                            runs.push_back({g, local, n});
                          });
  return runs;
}

template <typename T, typename Dev>
std::vector<GlobalRun> ReplicatedState<T, Dev>::read_runs() const {
  const ParamStore<T, Dev>& ps = model_.params();
  std::vector<GlobalRun> runs;
  for_each_global_run(ps.infos(), 0, ps.num_elements(),
                      [&](std::int64_t local, std::int64_t g, std::int64_t n) {
                        runs.push_back({g, local, n});
                      });
  return runs;
}

#define GDN_INSTANTIATE(T, Dev)                                                               \
  template class ReplicatedState<T, Dev>;                                                     \
  template void reduce_grads<T, Dev>(ParamStore<T, Dev>&, Mesh&);                             \
  template double whole_sum_squares<T, Dev>(const ParamStore<T, Dev>&, const T*, const Mesh&, \
                                            Communicator*);
GDN_FOR_EACH_DEVICE(GDN_INSTANTIATE)
#undef GDN_INSTANTIATE

}  // namespace gdn
