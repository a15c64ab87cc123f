#include "train/optimizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/enum_names.h"
#include "core/error.h"
#include "ops/adamw/adamw.h"
#include "runtime/devices.h"

namespace gdn {

AdamWConfig adamw_config(const TrainConfig& t) {
  AdamWConfig a;
  a.lr = t.lr;
  a.weight_decay = t.weight_decay;
  a.warmup_steps = t.warmup_steps;
  a.total_steps = t.steps;
  a.schedule = t.lr_schedule;
  a.min_lr = t.min_lr < 0 ? 0.1 * t.lr : t.min_lr;
  a.decay_fraction = t.decay_fraction;
  return a;
}

namespace {

// The step the decay starts at (p = 0): after warmup, or for wsd after its stable phase.
std::int64_t decay_start(const AdamWConfig& c) {
  if (c.schedule != LrSchedule::wsd) return c.warmup_steps;
  const std::int64_t after = std::max<std::int64_t>(0, c.total_steps - c.warmup_steps);
  const auto decay = std::max<std::int64_t>(1, std::llround(c.decay_fraction * double(after)));
  return std::max<std::int64_t>(c.warmup_steps, c.total_steps - decay);
}

}  // namespace

double learning_rate(const AdamWConfig& c, std::int64_t step) {
  if (step < c.warmup_steps) return double(step + 1) / double(c.warmup_steps) * c.lr;
  if (c.schedule == LrSchedule::constant) return c.lr;
  const std::int64_t start = decay_start(c);
  if (step < start) return c.lr;  // wsd's stable phase
  const std::int64_t span = std::max<std::int64_t>(1, c.total_steps - start);
  const double p = std::clamp(double(step - start) / double(span), 0.0, 1.0);
  if (c.schedule == LrSchedule::cosine)
    return c.min_lr + (c.lr - c.min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * p));
  return c.min_lr + (c.lr - c.min_lr) * (1.0 - p);  // linear, and wsd's decay
}

std::string describe_schedule(const AdamWConfig& c) {
  std::string s = fmt::format("lr {:g}, {} warmup steps, then ", c.lr, c.warmup_steps);
  switch (c.schedule) {
    case LrSchedule::cosine:
    case LrSchedule::linear:
      return s + fmt::format("{} to {:g} at step {}", name_of(c.schedule), c.min_lr, c.total_steps);
    case LrSchedule::constant:
      return s + "constant";
    case LrSchedule::wsd:
      break;
  }
  return s + fmt::format("constant (wsd) to step {}, then linear to {:g} at step {}",
                         decay_start(c), c.min_lr, c.total_steps);
}

template <typename T, typename Dev>
double grad_norm(const ParamStore<T, Dev>& params) {
  return std::sqrt(ops::sum_squares(Dev{}, params.grads(), params.num_elements()));
}

double clip_factor(double norm, double max_norm) {
  return max_norm > 0 && std::isfinite(norm) && norm > max_norm ? max_norm / norm : 1.0;
}

template <typename T, typename Dev>
AdamW<T, Dev>::AdamW(const AdamWConfig& c, const ParamStore<T, Dev>& params)
    : AdamW(c, params.num_elements()) {}

template <typename T, typename Dev>
AdamW<T, Dev>::AdamW(const AdamWConfig& c, std::int64_t n)
    : c_(c), m_(std::size_t(n)), v_(std::size_t(n)) {}

template <typename T, typename Dev>
void AdamW<T, Dev>::step(ParamStore<T, Dev>& params, std::int64_t step, double lr,
                         double grad_scale) {
  GDN_CHECK(std::int64_t(m_.size()) == params.num_elements(), "AdamW holds moments for ", m_.size(),
            " elements, the model has ", params.num_elements());
  // One update per run of consecutive parameters with the same decay flag.
  for (std::size_t i = 0; i < params.size();) {
    const bool decay = params.info(i).decay;
    std::size_t j = i;
    while (j < params.size() && params.info(j).decay == decay) ++j;
    const std::int64_t o = params.info(i).offset;
    const std::int64_t n = params.info(j - 1).offset + params.info(j - 1).size - o;
    ops::adamw_update(Dev{}, params.values() + o, params.grads() + o, m_.data() + o, v_.data() + o,
                      n, lr, c_.beta1, c_.beta2, c_.eps, decay ? c_.weight_decay : 0.0, step,
                      grad_scale);
    i = j;
  }
}

#define GDN_INSTANTIATE(T, Dev)                                 \
  template double grad_norm<T, Dev>(const ParamStore<T, Dev>&); \
  template class AdamW<T, Dev>;
GDN_FOR_EACH_DEVICE(GDN_INSTANTIATE)
#undef GDN_INSTANTIATE

}  // namespace gdn
