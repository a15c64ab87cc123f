// AdamW with linear warmup and cosine decay, and global-norm gradient clipping, on the
// flat parameter and gradient buffers of a ParamStore (in Dev's memory).
#pragma once

#include <cstdint>

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
  int total_steps = 1;        // cosine decay from lr to min_lr_ratio * lr at total_steps
  double min_lr_ratio = 0.1;
};

// The AdamW settings of a run's train config (lr, weight decay, warmup, steps).
AdamWConfig adamw_config(const TrainConfig& t);

// Learning rate for 0-based `step`: (step + 1) / warmup * lr during warmup, then cosine.
double learning_rate(const AdamWConfig& c, std::int64_t step);

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
