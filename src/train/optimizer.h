// AdamW with linear warmup and a learning-rate schedule (cosine, linear, constant, wsd), and
// global-norm gradient clipping, on the flat parameter and gradient buffers of a ParamStore
// (in Dev's memory).
#pragma once

#include <cstdint>
#include <string>

#include "core/device.h"
#include "model/params.h"
#include "train/train_config.h"

namespace gdn {

struct AdamWConfig {
  double lr = 1e-3;  // peak learning rate
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.0;  // decoupled; applied only to params with decay = true
  int warmup_steps = 0;       // linear warmup from lr / warmup_steps to lr
  int total_steps = 1;        // the decay reaches min_lr at total_steps
  LrSchedule schedule = LrSchedule::cosine;
  double min_lr = 1e-4;
  double decay_fraction = 0.2;  // wsd
};

// The AdamW settings of a run's train config (lr, weight decay, warmup, steps, schedule;
// a negative min_lr becomes lr / 10).
AdamWConfig adamw_config(const TrainConfig& t);

// Learning rate for 0-based `step`: (step + 1) / warmup * lr during warmup; then, with
// p = (step - start) / (total_steps - start) in [0, 1] and start = warmup_steps,
//   cosine:   min_lr + (lr - min_lr) (1 + cos(pi p)) / 2
//   linear:   min_lr + (lr - min_lr) (1 - p)
//   constant: lr
//   wsd:      lr until start = total_steps - D, D = round(decay_fraction (total_steps -
//             warmup_steps)) (at least 1, start no earlier than warmup_steps), then linear.
// Steps past total_steps keep the last value's formula at p = 1 (min_lr, or lr).
double learning_rate(const AdamWConfig& c, std::int64_t step);

// "lr 0.0003, 10 warmup steps, then cosine to 3e-05 at step 1000" and the like: the
// start-up line's words for the schedule.
std::string describe_schedule(const AdamWConfig& c);

// Global L2 norm of all gradients (accumulated in double, in parameter order). The caller
// has already summed gradients over ranks, so every rank computes the same norm. Clipping
// multiplies the gradients by clip_factor: max_norm / norm where max_norm > 0 and a finite
// norm exceeds it, else 1. The trainer hands the factor to AdamW::step instead of scaling
// the gradients: one pass over them fewer, the same bits.
template <typename T, typename Dev>
double grad_norm(const ParamStore<T, Dev>& params);
double clip_factor(double norm, double max_norm);

template <typename T, typename Dev>
class AdamW {
 public:
  AdamW(const AdamWConfig& c, const ParamStore<T, Dev>& params);  // zero moments
  // Moments for n elements (0: the moments live elsewhere, train/sharded_state.h).
  AdamW(const AdamWConfig& c, std::int64_t n);
  // One update of every parameter with its gradient times grad_scale (clip_factor) at
  // learning rate lr; step is 0-based (bias correction uses step + 1).
  void step(ParamStore<T, Dev>& params, std::int64_t step, double lr, double grad_scale = 1.0);

  const AdamWConfig& config() const { return c_; }
  // First and second moments, flat in parameter order (as the ParamStore's values).
  Buffer<Dev, T>& m() { return m_; }
  Buffer<Dev, T>& v() { return v_; }
  const Buffer<Dev, T>& m() const { return m_; }
  const Buffer<Dev, T>& v() const { return v_; }

 private:
  AdamWConfig c_;
  Buffer<Dev, T> m_, v_;
};

}  // namespace gdn
