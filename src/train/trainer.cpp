#include "train/trainer.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>

#include "cp/shard.h"
#include "train/checkpoint.h"

namespace gdn {

namespace {

AdamWConfig adamw_config(const TrainConfig& t) {
  AdamWConfig a;
  a.lr = t.lr;
  a.weight_decay = t.weight_decay;
  a.warmup_steps = t.warmup_steps;
  a.total_steps = t.steps;
  return a;
}

std::string format_eta(double seconds) {
  const long s = std::lround(std::max(0.0, seconds));
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
  return buf;
}

}  // namespace

template <typename T>
Trainer<T>::Trainer(const RunConfig& cfg, Communicator& world, bool resume)
    : cfg_(cfg),
      mesh_(make_mesh(world, cfg.train.dp, cfg.train.cp)),
      model_(cfg.model, cfg.train.chunk_size),
      opt_(adamw_config(cfg.train), model_.params()),
      data_(make_token_source(cfg.train.data, cfg.model.vocab_size, cfg.train.seed,
                              cfg.train.seq_len)) {
  model_.init(cfg.train.seed);
  rng_state_ = cfg.train.seed;
  if (resume && !cfg.train.checkpoint_dir.empty()) {
    if (auto path = latest_checkpoint(cfg.train.checkpoint_dir)) {
      const TrainingState s = load_checkpoint(*path, model_.params(), opt_);
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

template <typename T>
StepRecord Trainer<T>::step() {
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
  ParamStore<T>& ps = model_.params();
  ps.zero_grad();
  double loss = model_.forward_backward(*mesh_.cp_comm, tokens.data(), targets.data(), Bl, s.size(),
                                        t.seq_len, 1.0 / double(global_tokens));
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

  StepRecord r;
  r.step = step_;
  r.loss = loss / double(global_tokens);
  r.grad_norm = clip_grad_norm(ps, t.grad_clip);
  r.lr = learning_rate(opt_.config(), step_);
  opt_.step(ps, step_, r.lr);
  r.tokens = global_tokens;
  r.step_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ++step_;
  return r;
}

template <typename T>
void Trainer<T>::log_step(const StepRecord& r, double seconds_per_step) {
  if (mesh_.world->rank() != 0) return;
  const double remaining = double(cfg_.train.steps - (r.step + 1));
  spdlog::info(
      "step {:>5}/{} | loss {:.6f} | grad norm {:.4f} | lr {:.3e} | {:.1f} ms | {:.0f} tok/s | ETA "
      "{}",
      r.step + 1, cfg_.train.steps, r.loss, r.grad_norm, r.lr, r.step_ms,
      double(r.tokens) / (r.step_ms / 1000.0), format_eta(seconds_per_step * remaining));
  if (log_.is_open()) {
    nlohmann::json j{{"step", r.step}, {"loss", r.loss},     {"grad_norm", r.grad_norm},
                     {"lr", r.lr},     {"tokens", r.tokens}, {"step_ms", r.step_ms}};
    log_ << j.dump() << '\n';
    log_.flush();
  }
}

template <typename T>
void Trainer<T>::save() {
  if (cfg_.train.checkpoint_dir.empty() || mesh_.world->rank() != 0) return;
  TrainingState s;
  s.step = step_;
  s.rng_state = rng_state_;
  s.config_json = to_json(cfg_).dump();
  save_checkpoint(cfg_.train.checkpoint_dir, s, model_.params(), opt_);
  spdlog::info("checkpoint at step {} in {}", step_, cfg_.train.checkpoint_dir);
}

template <typename T>
std::vector<StepRecord> Trainer<T>::run() {
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

template class Trainer<float>;
template class Trainer<double>;

}  // namespace gdn
