#include "train/optimizer.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.h"

namespace gdn {

double learning_rate(const AdamWConfig& c, std::int64_t step) {
  if (step < c.warmup_steps) return double(step + 1) / double(c.warmup_steps) * c.lr;
  const double min_lr = c.min_lr_ratio * c.lr;
  const std::int64_t span = std::max<std::int64_t>(1, c.total_steps - c.warmup_steps);
  const double progress = std::clamp(double(step - c.warmup_steps) / double(span), 0.0, 1.0);
  return min_lr + (c.lr - min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
}

template <typename T>
double clip_grad_norm(ParamStore<T>& params, double max_norm) {
  // One sequential sum in parameter order: the same bits on every rank and every run.
  double sq = 0;
  for (std::size_t i = 0; i < params.size(); ++i)
    for (const T g : params[i].grad.data) sq += double(g) * double(g);
  const double norm = std::sqrt(sq);
  // A non-finite norm is returned untouched so the caller can report it.
  if (max_norm > 0 && std::isfinite(norm) && norm > max_norm) {
    const double scale = max_norm / norm;
    for (std::size_t i = 0; i < params.size(); ++i)
      for (T& g : params[i].grad.data) g = T(double(g) * scale);
  }
  return norm;
}

template <typename T>
AdamW<T>::AdamW(const AdamWConfig& c, const ParamStore<T>& params) : c_(c) {
  m_.reserve(params.size());
  v_.reserve(params.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    m_.emplace_back(params[i].value.shape);
    v_.emplace_back(params[i].value.shape);
  }
}

template <typename T>
void AdamW<T>::step(ParamStore<T>& params, std::int64_t step, double lr) {
  GDN_CHECK(params.size() == m_.size(), "AdamW holds moments for ", m_.size(),
            " parameters, the model has ", params.size());
  const double b1 = c_.beta1, b2 = c_.beta2;
  const double bc1 = 1.0 - std::pow(b1, double(step + 1));
  const double bc2 = 1.0 - std::pow(b2, double(step + 1));
  for (std::size_t i = 0; i < params.size(); ++i) {
    Param<T>& p = params[i];
    GDN_CHECK(p.value.size() == m_[i].size(), "AdamW moment ", i, " has ", m_[i].size(),
              " elements, parameter '", p.name, "' has ", p.value.size());
    // Decoupled decay (PyTorch order: p *= 1 - lr * wd, then the Adam update).
    const double keep = p.decay ? 1.0 - lr * c_.weight_decay : 1.0;
    T* w = p.value.ptr();
    const T* g = p.grad.ptr();
    T* m = m_[i].ptr();
    T* v = v_[i].ptr();
    const std::int64_t n = p.value.size();
    // Element-wise, so threading cannot change the result.
#pragma omp parallel for schedule(static) if (n > (1 << 16))
    for (std::int64_t e = 0; e < n; ++e) {
      const double gd = double(g[e]);
      const double me = b1 * double(m[e]) + (1.0 - b1) * gd;
      const double ve = b2 * double(v[e]) + (1.0 - b2) * gd * gd;
      m[e] = T(me);
      v[e] = T(ve);
      const double update = (me / bc1) / (std::sqrt(ve / bc2) + c_.eps);
      w[e] = T(double(w[e]) * keep - lr * update);
    }
  }
}

template double clip_grad_norm<float>(ParamStore<float>&, double);
template double clip_grad_norm<double>(ParamStore<double>&, double);
template class AdamW<float>;
template class AdamW<double>;

}  // namespace gdn
