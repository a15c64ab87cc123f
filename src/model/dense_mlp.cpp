#include "model/dense_mlp.h"

#include "ops/elementwise/elementwise.h"
#include "ops/linear/linear.h"
#include "ops/swiglu/swiglu.h"
#include "runtime/devices.h"

namespace gdn {

template <typename T, typename Dev>
DenseMlp<T, Dev>::DenseMlp(ParamStore<T, Dev>& ps, const std::string& name, int hidden,
                           int intermediate, Precision precision)
    : Mlp<T, Dev>(name.substr(0, name.size() - 1)),
      ps_(ps),
      d_(hidden),
      I_(intermediate),
      precision_(precision) {
  gate_proj_ = ps.add(name + "gate_proj.weight", {I_, d_}, true);
  up_proj_ = ps.add(name + "up_proj.weight", {I_, d_}, true);
  down_proj_ = ps.add(name + "down_proj.weight", {d_, I_}, true);
}

template <typename T, typename Dev>
void DenseMlp<T, Dev>::init(Rng& rng, double std, const HostParams<T>& host) const {
  for (ParamId id : {gate_proj_, up_proj_, down_proj_}) {
    T* w = host.at(ps_.info(id));
    for (std::int64_t i = 0; i < ps_.info(id).size; ++i) w[i] = T(std * rng.normal());
  }
}

template <typename T, typename Dev>
ActivationElems DenseMlp<T, Dev>::activations(int hidden, int intermediate, std::int64_t N) {
  // gate, up, act are kept (in bf16 in the bf16 mode); the backward's dact, dgate, dup and
  // tmp are scratch, and in the bf16 mode the float copies of gate and up.
  const std::int64_t kept = 3 * N * intermediate;
  return {kept, N * (3 * std::int64_t(intermediate) + hidden), 0, kept, 2 * N * intermediate};
}

template <typename T, typename Dev>
void DenseMlp<T, Dev>::do_forward(std::int64_t N, const T* x, T* y) {
  const Dev dev{};
  N_ = N;
  x_ = x;
  ops::linear_forward(dev, precision_, x, ps_.value(gate_proj_), N, d_, I_,
                      gate_.open(N * I_, precision_));
  ops::linear_forward(dev, precision_, x, ps_.value(up_proj_), N, d_, I_,
                      up_.open(N * I_, precision_));
  ops::swiglu_forward(dev, gate_.values(), up_.values(), N * I_, act_.open(N * I_, precision_));
  gate_.seal();  // as soon as the forward is done with them: the float copies do not pile up
  up_.seal();
  ops::linear_forward(dev, precision_, act_.values(), ps_.value(down_proj_), N, I_, d_, y);
  act_.seal();
}

template <typename T, typename Dev>
void DenseMlp<T, Dev>::do_backward(const T* dy, T* dx) {
  const Dev dev{};
  const std::int64_t N = N_;
  Buffer<Dev, T> dgate(N * I_), dup(N * I_);
  {
    Buffer<Dev, T> dact(N * I_);
    ops::linear_backward(dev, precision_, act_.view(), ps_.value(down_proj_), dy, N, I_, d_,
                         dact.data(), ps_.grad(down_proj_));
    act_.clear();
    ops::swiglu_backward(dev, gate_.view(), up_.view(), dact.data(), N * I_, dgate.data(),
                         dup.data());
  }
  gate_.clear();  // and their decoded copies: the projections' backward reads x_ only
  up_.clear();
  ops::linear_backward(dev, precision_, x_, ps_.value(gate_proj_), dgate.data(), N, d_, I_, dx,
                       ps_.grad(gate_proj_));
  ops::linear_backward(dev, precision_, x_, ps_.value(up_proj_), dup.data(), N, d_, I_, dx,
                       ps_.grad(up_proj_),
                       /*accumulate=*/true);
}

template <typename T, typename Dev>
void DenseMlp<T, Dev>::do_release() {
  for (Kept<T, Dev>* b : {&gate_, &up_, &act_}) b->clear();
}

#define GDN_INSTANTIATE(T, Dev) template class DenseMlp<T, Dev>;
GDN_FOR_EACH_DEVICE(GDN_INSTANTIATE)
#undef GDN_INSTANTIATE

}  // namespace gdn
