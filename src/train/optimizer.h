// AdamW with linear warmup and cosine decay, and global-norm gradient clipping.
#pragma once

#include <cstdint>
#include <vector>

#include "model/params.h"

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

// Learning rate for 0-based `step`: (step + 1) / warmup * lr during warmup, then cosine.
double learning_rate(const AdamWConfig& c, std::int64_t step);

// Global L2 norm of all gradients (accumulated in double). The caller has already summed
// gradients over ranks, so every rank computes the same norm. If max_norm > 0 and the
// norm exceeds it, scales every gradient by max_norm / norm. Returns the norm before
// clipping.
template <typename T>
double clip_grad_norm(ParamStore<T>& params, double max_norm);

template <typename T>
class AdamW {
 public:
  AdamW(const AdamWConfig& c, const ParamStore<T>& params);  // zero moments, one per param
  // One update of every parameter with its gradient at learning rate lr; step is 0-based
  // (bias correction uses step + 1).
  void step(ParamStore<T>& params, std::int64_t step, double lr);

  const AdamWConfig& config() const { return c_; }
  // First and second moments, in parameter order (for checkpoints).
  std::vector<Tensor<T>>& m() { return m_; }
  std::vector<Tensor<T>>& v() { return v_; }
  const std::vector<Tensor<T>>& m() const { return m_; }
  const std::vector<Tensor<T>>& v() const { return v_; }

 private:
  AdamWConfig c_;
  std::vector<Tensor<T>> m_, v_;
};

}  // namespace gdn
