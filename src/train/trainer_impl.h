// Trainer, written once over the model's Backend. Included by the files that instantiate
// it (trainer.cpp: host; the CUDA library: device).
#pragma once

#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include "cp/shard.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

namespace gdn {

namespace trainer_detail {

inline AdamWConfig adamw_config(const TrainConfig& t) {
  AdamWConfig a;
  a.lr = t.lr;
  a.weight_decay = t.weight_decay;
  a.warmup_steps = t.warmup_steps;
  a.total_steps = t.steps;
  return a;
}

inline std::string format_eta(double seconds) {
  const long s = std::lround(std::max(0.0, seconds));
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
  return buf;
}

}  // namespace trainer_detail

template <typename T, typename Backend>
Trainer<T, Backend>::Trainer(const RunConfig& cfg, Communicator& world, bool resume,
                             Communicator* device_world)
    : cfg_(cfg),
      mesh_(make_mesh(world, cfg.train.dp, cfg.train.cp)),
      model_(cfg.model, cfg.train.chunk_size),
      opt_(trainer_detail::adamw_config(cfg.train), model_.params()),
      data_(make_token_source(cfg.train.data, cfg.model.vocab_size, cfg.train.seed,
                              cfg.train.seq_len)) {
  if constexpr (Backend::kOnDevice) {
    GDN_CHECK(device_world && device_world->size() == world.size() &&
                  device_world->rank() == world.rank(),
              "Trainer on the device: needs a device communicator over the same ranks as world");
    device_mesh_ = make_mesh(*device_world, cfg.train.dp, cfg.train.cp);
    m_.resize(model_.params().num_elements());
    v_.resize(model_.params().num_elements());
  }
  model_.init(cfg.train.seed);
  rng_state_ = cfg.train.seed;
  if (resume && !cfg.train.checkpoint_dir.empty()) {
    if (auto path = latest_checkpoint(cfg.train.checkpoint_dir)) {
      const TrainingState s = load_checkpoint(*path, model_.params(), opt_);
      model_.upload_params();
      upload_moments();
      step_ = s.step;
      rng_state_ = s.rng_state;
      if (world.rank() == 0) spdlog::info("resumed from {} at step {}", *path, step_);
    } else if (world.rank() == 0) {
      spdlog::warn("--resume: no complete checkpoint in {}; starting from step 0",
                   cfg.train.checkpoint_dir);
    }
  }
  if (world.rank() == 0 && !cfg.train.log.empty()) {
    log_.open(cfg.train.log, std::ios::app);
    GDN_CHECK(log_.good(), "cannot open the log file train.log = '", cfg.train.log, "'");
  }
}

template <typename T, typename Backend>
StepRecord Trainer<T, Backend>::step() {
  const auto t0 = std::chrono::steady_clock::now();
  const TrainConfig& t = cfg_.train;
  const int Bl = t.batch_size / t.dp;
  const Shard s = contiguous_shard(t.seq_len, t.cp, mesh_.cp_rank);
  // This rank's shard of its dp group's sequences: inputs [t0, t1), targets shifted by one.
  std::vector<std::int32_t> seq(t.seq_len + 1), tokens(Bl * s.size()), targets(Bl * s.size());
  for (int b = 0; b < Bl; ++b) {
    data_->sequence(step_, std::int64_t(mesh_.dp_rank) * Bl + b, t.seq_len + 1, seq.data());
    std::copy_n(seq.data() + s.begin, s.size(), tokens.data() + b * s.size());
    std::copy_n(seq.data() + s.begin + 1, s.size(), targets.data() + b * s.size());
  }
  const std::int64_t global_tokens = std::int64_t(t.batch_size) * t.seq_len;
  const double grad_scale = 1.0 / double(global_tokens);
  ParamStore<T>& ps = model_.params();
  model_.zero_grad();
  StepRecord r;
  r.step = step_;
  r.lr = learning_rate(opt_.config(), step_);
  double loss = 0;
  if constexpr (Backend::kOnDevice) {
    const auto d_tokens = Backend::upload(tokens.data(), tokens.size());
    const auto d_targets = Backend::upload(targets.data(), targets.size());
    loss = model_.forward_backward(*device_mesh_.cp_comm, d_tokens.data(), d_targets.data(), Bl,
                                   s.size(), t.seq_len, grad_scale);
    mesh_.world->all_reduce_sum(&loss, 1, train_sites::kLossAllReduce);
    device_update(r);
  } else {
    loss = model_.forward_backward(*mesh_.cp_comm, tokens.data(), targets.data(), Bl, s.size(),
                                   t.seq_len, grad_scale);
    // Parameters are replicated: sum their gradients over every rank (dp and cp alike).
    flat_.resize(ps.num_elements());
    std::size_t off = 0;
    for (std::size_t i = 0; i < ps.size(); ++i) {
      std::copy(ps[i].grad.data.begin(), ps[i].grad.data.end(), flat_.begin() + off);
      off += ps[i].grad.data.size();
    }
    mesh_.world->all_reduce_sum(flat_.data(), flat_.size(), train_sites::kGradAllReduce);
    off = 0;
    for (std::size_t i = 0; i < ps.size(); ++i) {
      std::copy_n(flat_.begin() + off, ps[i].grad.data.size(), ps[i].grad.data.begin());
      off += ps[i].grad.data.size();
    }
    mesh_.world->all_reduce_sum(&loss, 1, train_sites::kLossAllReduce);
    r.grad_norm = clip_grad_norm(ps, t.grad_clip);
    opt_.step(ps, step_, r.lr);
  }
  r.loss = loss / double(global_tokens);
  r.tokens = global_tokens;
  r.step_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ++step_;
  return r;
}

// The host path's all-reduce, clip_grad_norm and AdamW<T>::step on the flat device copies
// (the parameters sit back to back in parameter order, so one call covers them all).
template <typename T, typename Backend>
void Trainer<T, Backend>::device_update(StepRecord& r) {
  if constexpr (Backend::kOnDevice) {
    Backend& be = model_.backend();
    const std::size_t n = be.num_elements();
    device_mesh_.world->all_reduce_sum(be.grads(), n, train_sites::kGradAllReduce);
    r.grad_norm = std::sqrt(Backend::sum_squares(be.grads(), n));
    const double max_norm = cfg_.train.grad_clip;
    if (max_norm > 0 && std::isfinite(r.grad_norm) && r.grad_norm > max_norm)
      Backend::scale(be.grads(), n, max_norm / r.grad_norm);
    const AdamWConfig& c = opt_.config();
    ParamStore<T>& ps = model_.params();
    for (std::size_t i = 0; i < ps.size(); ++i) {
      const Param<T>& p = ps[i];
      const std::int64_t o = p.offset;
      Backend::adamw_update(be.values() + o, be.grads() + o, m_.data() + o, v_.data() + o,
                            p.value.size(), r.lr, c.beta1, c.beta2, c.eps,
                            p.decay ? c.weight_decay : 0.0, step_);
    }
  } else {
    (void)r;
  }
}

template <typename T, typename Backend>
void Trainer<T, Backend>::upload_moments() {
  if constexpr (Backend::kOnDevice) {
    const ParamStore<T>& ps = model_.params();
    for (std::size_t i = 0; i < ps.size(); ++i) {
      Backend::upload(m_.data() + ps[i].offset, opt_.m()[i].ptr(), opt_.m()[i].data.size());
      Backend::upload(v_.data() + ps[i].offset, opt_.v()[i].ptr(), opt_.v()[i].data.size());
    }
  }
}

template <typename T, typename Backend>
void Trainer<T, Backend>::download_moments() {
  if constexpr (Backend::kOnDevice) {
    const ParamStore<T>& ps = model_.params();
    for (std::size_t i = 0; i < ps.size(); ++i) {
      Backend::download(opt_.m()[i].ptr(), m_.data() + ps[i].offset, opt_.m()[i].data.size());
      Backend::download(opt_.v()[i].ptr(), v_.data() + ps[i].offset, opt_.v()[i].data.size());
    }
  }
}

template <typename T, typename Backend>
void Trainer<T, Backend>::log_step(const StepRecord& r, double seconds_per_step) {
  if (mesh_.world->rank() != 0) return;
  const double remaining = double(cfg_.train.steps - (r.step + 1));
  spdlog::info(
      "step {:>5}/{} | loss {:.6f} | grad norm {:.4f} | lr {:.3e} | {:.1f} ms | {:.0f} tok/s | ETA "
      "{}",
      r.step + 1, cfg_.train.steps, r.loss, r.grad_norm, r.lr, r.step_ms,
      double(r.tokens) / (r.step_ms / 1000.0),
      trainer_detail::format_eta(seconds_per_step * remaining));
  if (log_.is_open()) {
    nlohmann::json j{{"step", r.step}, {"loss", r.loss},     {"grad_norm", r.grad_norm},
                     {"lr", r.lr},     {"tokens", r.tokens}, {"step_ms", r.step_ms}};
    log_ << j.dump() << '\n';
    log_.flush();
  }
}

template <typename T, typename Backend>
void Trainer<T, Backend>::save() {
  if (cfg_.train.checkpoint_dir.empty() || mesh_.world->rank() != 0) return;
  // The device copies are the working ones: bring them to the host first (rank 0 only;
  // plain copies, no collective).
  model_.download_params();
  download_moments();
  TrainingState s;
  s.step = step_;
  s.rng_state = rng_state_;
  s.config_json = to_json(cfg_).dump();
  save_checkpoint(cfg_.train.checkpoint_dir, s, model_.params(), opt_);
  spdlog::info("checkpoint at step {} in {}", step_, cfg_.train.checkpoint_dir);
}

template <typename T, typename Backend>
std::vector<StepRecord> Trainer<T, Backend>::run() {
  std::vector<StepRecord> out;
  const auto start = std::chrono::steady_clock::now();
  while (step_ < cfg_.train.steps) {
    out.push_back(step());
    // ETA from the mean step time of this process (a resumed run starts its clock anew).
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    log_step(out.back(), elapsed / double(out.size()));
    const int every = cfg_.train.checkpoint_every;
    if ((every > 0 && step_ % every == 0) || step_ == cfg_.train.steps) save();
  }
  return out;
}

}  // namespace gdn
