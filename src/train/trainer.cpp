#include "train/trainer.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <type_traits>

#include "comm/call_sites.h"
#include "core/error.h"
#include "core/host_memory.h"
#include "model/hf_weights.h"
#include "ops/attention/cudnn_attention.h"
#include "ops/cross_entropy/cross_entropy.h"
#include "runtime/devices.h"
#include "train/batch.h"
#include "train/checkpoint.h"
#include "train/checkpoint_set.h"
#include "train/hf_export.h"
#include "train/run_identity.h"
#include "train/run_report.h"
#include "train/state_gather.h"
#include "train/step_log.h"

namespace gdn {

namespace {

// agreed_stop_signal's answer when another run took over one of this run's locks: above
// every signal number.
constexpr int kLockLost = 1 << 10;

// "" when a checkpoint's config describes the model `m`, else why not ("was written by a
// different model (checkpoint vs this run): model.key: a vs b; ...").
std::string model_mismatch(const std::string& config_json, const ModelConfig& m) {
  ModelConfig saved;
  try {
    saved = parse_model_config(nlohmann::json::parse(config_json).at("model"), "the checkpoint");
  } catch (const nlohmann::json::exception& e) {
    return std::string("has no readable model config: ") + e.what();
  } catch (const Error& e) {
    return std::string("has a model config this run cannot read: ") + e.what();
  }
  std::string list;
  for (const std::string& x : architecture_differences(saved, m))
    list += (list.empty() ? "" : "; ") + ("model." + x);
  return list.empty() ? "" : "was written by a different model (checkpoint vs this run): " + list;
}

}  // namespace

template <typename T, typename Dev>
Trainer<T, Dev>::Trainer(const RunConfig& cfg, Communicator& world, Communicator& dev_world,
                         const TrainerOptions& opt)
    : cfg_(cfg),
      opt_(opt),
      world_(world),
      run_(cfg, world, dev_world, opt.memory_available),
      whole_(parameter_infos(cfg.model)),
      adamw_config_(adamw_config(cfg.train)),
      data_(opt.data ? opt.data
                     : make_token_source(cfg.train.data, cfg.model.vocab_size, cfg.train.seed,
                                         cfg.train.seq_len)) {
  if (!cfg.train.eval_data.empty())
    eval_ =
        std::make_unique<EvalWindows>(cfg.train.eval_data, cfg.model.vocab_size, cfg.train.seq_len,
                                      cfg.train.eval_sequences, cfg.train.batch_size);
  identity_ = run_identity(cfg_, *data_);
  identity_["layout"] = run_.layout().to_json();  // recorded, not compared on resume
  // Recorded too: the schedule in words (resume compares the lrs themselves, run_identity.h).
  identity_["schedule"] = describe_schedule(adamw_config_);
  progress("initialising the model");
  profile::enable(cfg.train.profile);  // this thread runs the steps
  // On a GPU the profile waits for the device at each scope boundary (core/profile.h).
  profile::set_wait(cfg.train.profile && !std::is_same_v<Dev, Host> ? &Dev::synchronize : nullptr);
  run_.state().init(cfg.train.seed);
  if (!opt.init_from.empty()) {
    progress("reading the Hugging Face weights");
    // Each rank reads its elements of each tensor (its owned parts, or every parameter
    // it holds), all of them, so the seeded values are not needed here.
    std::vector<T> mine(run_.state().local_count());
    std::vector<std::string> skipped;
    read_hf_weights(opt.init_from, cfg.model, whole_, run_.state().read_runs(), mine.data(),
                    skipped);
    run_.state().set_local_values(mine);
    if (world.rank() == 0)
      spdlog::info("initial weights from {}{}", opt.init_from,
                   skipped.empty()
                       ? std::string()
                       : fmt::format(" ({} tensors of other models skipped: {}{})", skipped.size(),
                                     skipped.front(), skipped.size() > 1 ? ", ..." : ""));
  }
  const TrainConfig& t = cfg.train;
  // Every rank writes its part: each checks now that it can, instead of failing at the
  // first save; rank 0 keeps the directory (old runs, the rotation).
  if (!t.checkpoint_dir.empty()) {
    check_checkpoint_dir(t.checkpoint_dir);
    if (world.rank() == 0) prepare_checkpoint_dir();
  }
  if (opt.resume && !t.checkpoint_dir.empty()) resume();
  if (rotation_) rotation_->report();  // after resume(): a refused one says why, alone
  if (world.rank() == 0 && !opt.exchange_out.empty()) {
    std::ofstream f(opt.exchange_out);  // written after the first step: fail now, not then
    GDN_CHECK(f.good(), "cannot write the exchange record '", opt.exchange_out,
              "' (--exchange-out): ", std::strerror(errno));
  }
  log_ = std::make_unique<StepLog>(cfg_.train, cfg_.model, world.rank() == 0, opt.rate);
}

template <typename T, typename Dev>
void Trainer<T, Dev>::export_hf(const std::string& dir, std::int64_t max_file_bytes,
                                DType file_dtype) const {
  const std::vector<T> values = run_.state().local_values();
  write_hf_export(world_, dir, cfg_.model, whole_, run_.state().written_runs(), values.data(),
                  max_file_bytes, file_dtype);
  if (world_.rank() == 0)
    spdlog::info("wrote a Hugging Face checkpoint of the weights ({}) to {}",
                 dtype_name(file_dtype), dir);
}

template <typename T, typename Dev>
void Trainer<T, Dev>::prepare_checkpoint_dir() {
  const TrainConfig& t = cfg_.train;
  const std::string& dir = t.checkpoint_dir;
  // This run holds the directory's lock: a temporary there is a killed save's.
  if (const int n = remove_checkpoint_temporaries(dir))
    spdlog::info("removed {} temporary {} of an interrupted checkpoint save in {}", n,
                 n == 1 ? "file" : "files", dir);
  std::vector<CheckpointFile> files = scan_checkpoints(dir);
  if (!opt_.resume) {
    // A fresh run among another run's checkpoints would overwrite some and leave the
    // rest, and a later --resume would continue the old run from them.
    std::vector<std::string> old;
    for (const CheckpointFile& f : files)
      if (f.gdn) old.push_back(f.path);
    if (!old.empty() && !opt_.overwrite_checkpoints) {
      std::string names;
      for (std::size_t i = 0; i < old.size() && i < 3; ++i)
        names += (i ? ", " : "") + std::filesystem::path(old[i]).filename().string();
      if (old.size() > 3) names += ", ...";
      const std::string refused = why_resume_refuses(files);
      throw_error(
          "checkpoint directory '", dir, "'", t.origin("checkpoint_dir"), " holds ", old.size(),
          old.size() == 1 ? " checkpoint" : " checkpoints", " of another run (", names,
          "): a fresh run would overwrite some and leave the rest for a later --resume. ",
          refused.empty()
              ? "Pass --resume to continue that run, --overwrite-checkpoints"
              : "--resume would refuse them (" + refused + "): pass --overwrite-checkpoints",
          " to delete them first, or use another directory");
    }
    for (const std::string& path : old) {
      const std::string why = remove_checkpoint(path);
      GDN_CHECK(why.empty(), "--overwrite-checkpoints: cannot delete '", path, "': ", why);
    }
    if (!old.empty())
      spdlog::info("--overwrite-checkpoints: deleted the {} checkpoints of an earlier run in {}",
                   old.size(), dir);
    std::erase_if(files, [](const CheckpointFile& f) { return f.gdn; });
  }
  rotation_ = std::make_unique<CheckpointRotation>(
      dir, t.keep_checkpoints, files,
      [this](const TrainingState& s) { return model_mismatch(s.config_json, cfg_.model); });
}

template <typename T, typename Dev>
ResumeRefusal Trainer<T, Dev>::resume_refusal(const CheckpointFile& f,
                                              const std::vector<std::string>& accepted) const {
  // Names and shapes can agree for another model (Hk 2 -> 4 with K 16 -> 8): compare the
  // architecture the checkpoint was written by.
  const std::string mismatch = model_mismatch(f.state.config_json, cfg_.model);
  if (!mismatch.empty()) return {mismatch, ""};
  const IdentityDifferences d =
      compare_run_identity(nlohmann::json::parse(f.state.config_json, nullptr, false), cfg_,
                           identity_, f.state.step, accepted);
  if (d.refused.empty()) return {};
  ResumeRefusal r{"was written by another run (checkpoint vs this run): ", ""};
  for (std::size_t i = 0; i < d.refused.size(); ++i) r.why += (i ? "; " : "") + d.refused[i];
  for (std::size_t i = 0; i < d.refused_keys.size(); ++i)
    r.keys += (i ? "," : "") + d.refused_keys[i];
  return r;
}

template <typename T, typename Dev>
std::string Trainer<T, Dev>::why_resume_refuses(const std::vector<CheckpointFile>& files) const {
  const auto newest = std::find_if(files.begin(), files.end(),
                                   [](const CheckpointFile& f) { return f.problem.empty(); });
  if (newest == files.end())
    return files.empty() ? "" : "none can be loaded: " + files.front().problem;
  const ResumeRefusal r = resume_refusal(*newest, {});
  if (r.why.empty()) return "";
  return "the newest " + r.why +
         (r.keys.empty() ? std::string() : "; --accept-changes " + r.keys + " continues it");
}

template <typename T, typename Dev>
void Trainer<T, Dev>::resume() {
  progress("loading the checkpoint");
  const std::string& dir = cfg_.train.checkpoint_dir;
  const std::size_t n = run_.state().local_count();
  std::vector<T> values(n), m(n), v(n);
  const std::optional<LoadedCheckpoint> loaded = load_newest_checkpoint<T>(
      world_, dir, whole_, run_.state().read_runs(), values.data(), m.data(), v.data(),
      [&](const CheckpointFile& f) {
        const ResumeRefusal r = resume_refusal(f, opt_.accepted_changes);
        if (r.why.empty()) return;
        if (r.keys.empty())
          throw_error("--resume: checkpoint '", f.path, "' ", r.why,
                      ". Resume with the config it was trained with, or use another "
                      "--checkpoint-dir");
        throw_error("--resume: checkpoint '", f.path, "' ", r.why,
                    ". Resume with the settings it was written with, use another "
                    "--checkpoint-dir, or pass --accept-changes ",
                    r.keys, " to continue it with these changes");
      });
  if (!loaded) {  // no file named like a checkpoint (load_newest_checkpoint refuses others)
    if (world_.rank() == 0) {
      // A new or mistyped directory beside the log of a run: a fresh start would drop it.
      const std::string& log = cfg_.train.log;
      if (const std::optional<LoggedSteps> logged = logged_steps(log))
        throw_error("--resume: checkpoint directory '", dir, "'",
                    cfg_.train.origin("checkpoint_dir"), " holds no checkpoint, but the log '", log,
                    "'", cfg_.train.origin("log"), " holds ", logged->count,
                    " steps of a run (the last {\"step\": ", logged->last,
                    "}): starting from step 0 would drop them. Check the checkpoint directory "
                    "(a new or mistyped one?), or move the log away (or pass another --log) to "
                    "start afresh");
      spdlog::warn("--resume: no checkpoint in {}; starting from step 0", dir);
      drop_logged_steps();
    }
    return;
  }
  run_.state().set_local_values(values);
  run_.state().set_local_moments(m, v);
  const TrainingState& s = loaded->state;
  step_ = saved_step_ = s.step;
  if (world_.rank() != 0) return;
  spdlog::info("resumed from {} at step {}", loaded->path, step_);
  const nlohmann::json saved = nlohmann::json::parse(s.config_json, nullptr, false);
  if (saved.is_object() && saved.contains("run") && saved["run"].contains("best_val_loss") &&
      saved["run"]["best_val_loss"].is_number()) {
    best_val_ = saved["run"]["best_val_loss"].get<double>();
    identity_["best_val_loss"] = best_val_;
  }
  if (!saved.is_object() || !saved.contains("run"))
    spdlog::warn(
        "--resume: checkpoint {} records no run identity (written before gdn-cp "
        "recorded one): its seed, data and settings were not compared with this run's",
        loaded->path);
  for (const std::string& x :
       compare_run_identity(saved, cfg_, identity_, s.step, opt_.accepted_changes).accepted)
    spdlog::warn(
        "--resume: continuing with a change accepted by --accept-changes "
        "(checkpoint vs this run): {}",
        x);
  const TrainConfig& t = cfg_.train;
  if (!opt_.init_from.empty())
    spdlog::warn(
        "--init-from {}: not used, the weights and AdamW moments come from the checkpoint "
        "(a resumed run continues its own weights)",
        opt_.init_from);
  if (saved.is_object() && saved.contains("train") && saved["train"].is_object()) {
    const std::string was = saved["train"].value("dtype", std::string());
    if (!was.empty() && was != dtype_name(t.dtype))
      spdlog::warn("--resume: checkpoint {} was written by a {} run and this run is {}{}",
                   loaded->path, was, dtype_name(t.dtype), t.origin("dtype"));
  }
  const DType stored = value_dtype(t.dtype);  // bf16 runs keep f32 values
  if (s.dtype != stored)
    spdlog::warn(
        "--resume: checkpoint {} holds {} values and this run is {}{}: its parameters and "
        "AdamW moments are {} to {}",
        loaded->path, dtype_name(s.dtype), dtype_name(t.dtype), t.origin("dtype"),
        stored == DType::f32 ? "rounded" : "widened", dtype_name(stored));
  drop_logged_steps();
}

template <typename T, typename Dev>
void Trainer<T, Dev>::drop_logged_steps() {
  // Steps logged after the checkpoint was written run again: the log keeps one line each.
  const std::string& log = cfg_.train.log;
  if (log.empty()) return;
  const std::int64_t dropped = truncate_step_log(log, step_);
  if (dropped > 0)
    spdlog::info("--resume: dropped {} {} of {} past step {} (those steps run again)", dropped,
                 dropped == 1 ? "line" : "lines", log, step_);
}

template <typename T, typename Dev>
void Trainer<T, Dev>::progress(const char* phase) {
  if (opt_.watchdog) opt_.watchdog->progress(step_, phase);
}

template <typename T, typename Dev>
Batch Trainer<T, Dev>::read_batch() {
  progress("reading data");
  profile::Region region("data");
  Batch b = next_batch(*data_, cfg_.train, cfg_.model.eos_token_id, run_.shard(),
                       run_.mesh().dp_rank, step_, world_);
  if (b.documents && !documents_reported_)
    report_documents(world_, run_.mesh().cp_rank, cfg_.train, *data_, cfg_.model.eos_token_id,
                     *b.documents, b.global_targets, step_);
  documents_reported_ = documents_reported_ || b.documents.has_value();
  return b;
}

template <typename T, typename Dev>
StepRecord Trainer<T, Dev>::forward_backward(const Batch& b) {
  StepRecord r;
  r.step = step_;
  r.lr = learning_rate(adamw_config_, step_);
  r.tokens = b.global_targets;
  const auto losses = run_.forward_backward(b, [this](const char* phase) { progress(phase); });
  for (const std::string& why : ops::take_cudnn_attention_notes())
    spdlog::warn("attention: cuDNN refused {}; the flash kernel runs it", why);
  double loss = losses.ce_sum;
  progress(train_sites::kLossAllReduce);
  world_.all_reduce_sum(&loss, 1, train_sites::kLossAllReduce);
  record_peaks(r);
  r.loss = loss / double(b.global_targets);
  r.aux_loss = losses.aux;
  r.total = r.loss +
            (cfg_.model.output_router_logits ? cfg_.model.router_aux_loss_coef * r.aux_loss : 0.0);
  return r;
}

template <typename T, typename Dev>
void Trainer<T, Dev>::update(StepRecord& r) {
  progress("optimizer");
  profile::Region region("optimizer");
  r.grad_norm = run_.state().grad_norm();
  // After the all-reduces every rank holds the same loss and gradients, so every rank
  // takes the same decision here.
  if (!std::isfinite(r.total) || !std::isfinite(r.grad_norm)) {
    r.diverged = "step " + std::to_string(step_ + 1) + ": the loss is " + std::to_string(r.loss) +
                 " and the gradient norm " + std::to_string(r.grad_norm) +
                 "; the first non-finite gradient is '" + run_.state().first_nonfinite(true) + "'";
    return;
  }
  // Clipping is a factor AdamW applies as it reads the gradients (the bits of scaling them
  // first, without that pass); the gradients themselves stay unclipped.
  const double clip = clip_factor(r.grad_norm, cfg_.train.grad_clip);
  if (!std::isfinite(run_.state().update(adamw_config_, step_, r.lr, clip)))
    r.diverged = "step " + std::to_string(step_ + 1) + ": the update made parameter '" +
                 run_.state().first_nonfinite(false) + "' non-finite";
}

template <typename T, typename Dev>
StepRecord Trainer<T, Dev>::step() {
  const auto t0 = std::chrono::steady_clock::now();
  if (cfg_.train.profile) profile::take();  // what ran between the steps is not this step's
  const Batch batch = read_batch();
  // The count is the same on every rank: all skip together.
  if (batch.global_targets == 0) return skipped_step(t0);
  StepRecord r = forward_backward(batch);
  update(r);
  r.step_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (cfg_.train.profile) r.profile = to_step_profile(profile::take(), r.step_ms);
  ++step_;
  return r;
}

template <typename T, typename Dev>
void Trainer<T, Dev>::validate() {
  progress("validation");
  const auto t0 = std::chrono::steady_clock::now();
  const int dp_rank = run_.mesh().dp_rank;
  double sums[2] = {0, 0};  // cross-entropy, counted targets
  for (std::int64_t c = 0; c < eval_->chunks(); ++c) {
    Batch b =
        next_batch(*eval_, cfg_.train, cfg_.model.eos_token_id, run_.shard(), dp_rank, c, world_);
    const std::size_t per_row = b.targets.size() / std::size_t(std::max(b.rows, 1));
    for (int r = 0; r < b.rows; ++r)  // the last chunk's rows past the K count nothing
      if (!eval_->counted(c, std::int64_t(dp_rank) * b.rows + r))
        std::fill_n(b.targets.begin() + std::ptrdiff_t(r * per_row), per_row, ops::kIgnoreTarget);
    sums[1] += double(std::count_if(b.targets.begin(), b.targets.end(),
                                    [](std::int32_t x) { return x != ops::kIgnoreTarget; }));
    sums[0] += run_.forward_loss(b);
  }
  world_.all_reduce_sum(sums, 2, train_sites::kValidationAllReduce);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const double loss = sums[0] / sums[1];
  best_val_ = std::isnan(best_val_) ? loss : std::min(best_val_, loss);
  identity_["best_val_loss"] = best_val_;  // the next checkpoint records it
  log_->write_validation(step_ - 1, loss, std::int64_t(sums[1]), ms, best_val_);
}

template <typename T, typename Dev>
void Trainer<T, Dev>::record_peaks(StepRecord& r) {
  std::int64_t peaks[2] = {peak_resident_bytes(), Dev::peak_bytes()};
  world_.all_reduce_max(peaks, 2, train_sites::kMemoryAllReduce);
  r.peak_rss = peaks[0];
  r.peak_device = peaks[1];
}

template <typename T, typename Dev>
StepRecord Trainer<T, Dev>::skipped_step(std::chrono::steady_clock::time_point t0) {
  // Training on it would still decay the weights and step the moments (and MoE's aux
  // loss): a step on nothing. The data cursor moves on as for any step.
  StepRecord r;
  r.step = step_;
  r.lr = learning_rate(adamw_config_, step_);
  r.skipped = true;
  r.loss = r.total = std::numeric_limits<double>::quiet_NaN();
  record_peaks(r);
  r.step_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (cfg_.train.profile) (void)profile::take();
  ++step_;
  return r;
}

template <typename T, typename Dev>
int Trainer<T, Dev>::agreed_stop_signal() {
  if (!opt_.stop_requested && !opt_.lock_lost) return 0;
  int sig = opt_.stop_requested ? opt_.stop_requested() : 0;
  if (opt_.lock_lost) {
    lock_lost_ = opt_.lock_lost();
    if (!lock_lost_.empty()) sig = kLockLost;
  }
  world_.all_reduce_max(&sig, 1, train_sites::kStopAgree);
  return sig;
}

template <typename T, typename Dev>
void Trainer<T, Dev>::save() {
  if (cfg_.train.checkpoint_dir.empty()) return;
  progress("writing a checkpoint");
  save_to(cfg_.train.checkpoint_dir);
  saved_step_ = step_;
  if (world_.rank() != 0) return;
  if (rotation_) rotation_->saved(step_);
  spdlog::info("checkpoint at step {} in {}", step_, cfg_.train.checkpoint_dir);
}

template <typename T, typename Dev>
std::string Trainer<T, Dev>::save_rescue(const std::string& export_dir) {
  const std::string& dir = cfg_.train.checkpoint_dir;
  if (!dir.empty() && saved_step_ == step_) return checkpoint_path(dir, step_);
  std::filesystem::path target(export_dir);
  if (!target.has_filename()) target = target.parent_path();
  // One name on every rank: rank 0's pid.
  std::int64_t pid = world_.rank() == 0 ? std::int64_t(::getpid()) : 0;
  world_.all_reduce_max(&pid, 1, train_sites::kCheckpointGather);
  const char* tmp = std::getenv("TMPDIR");
  const std::string tail = ".rescue-step-" + std::to_string(step_);
  const std::vector<std::string> places{
      target.string() + tail,
      std::string(tmp && *tmp ? tmp : "/tmp") + "/gdn-" + std::to_string(pid) + tail};
  for (const std::string& place : places) {
    std::string why;
    try {
      check_checkpoint_dir(place);
      save_to(place);
    } catch (const std::exception& e) {
      why = e.what();
    }
    int failed = why.empty() ? 0 : 1;
    world_.all_reduce_max(&failed, 1, train_sites::kCheckpointGather);
    if (!failed) return checkpoint_path(place, step_);
    if (!why.empty())
      spdlog::warn("rank {}: cannot write the rescue checkpoint in {}: {}", world_.rank(), place,
                   why);
  }
  return "";
}

template <typename T, typename Dev>
void Trainer<T, Dev>::save_to(const std::string& dir) {
  TrainingState s;
  s.step = step_;
  nlohmann::json config = to_json(cfg_);
  config["run"] = identity_;
  s.config_json = config.dump();
  const std::vector<GlobalRun> runs = run_.state().written_runs();
  std::vector<T> values, m, v;
  if (!runs.empty()) {
    values = run_.state().local_values();
    m = run_.state().local_moments(false);
    v = run_.state().local_moments(true);
  }
  save_checkpoint_set(world_, dir, s, whole_, runs, values.data(), m.data(), v.data());
}

template <typename T, typename Dev>
RunResult Trainer<T, Dev>::run() {
  RunResult out;
  const auto start = std::chrono::steady_clock::now();
  const double cpu_start = process_cpu_seconds();
  for (Communicator* c : run_.group_comms()) c->reset_counters();
  // Readings of the world's counters before the first step (write_exchange_record).
  // A signal during set-up stops the run before its first step (outside the first step's
  // counters, which gdn_plan predicts).
  if (step_ >= cfg_.train.steps && world_.rank() == 0)
    spdlog::warn("nothing to train: the run is at step {} and train.steps is {}{}", step_,
                 cfg_.train.steps,
                 step_ > 0 ? " (pass a larger --steps to continue it)" : std::string());
  int stop = step_ < cfg_.train.steps ? agreed_stop_signal() : 0;
  const CounterReadings before{world_.counters(), run_.mesh().world->counters()};
  while (!stop && step_ < cfg_.train.steps) {
    out.steps.push_back(step());
    const StepRecord& r = out.steps.back();
    if (out.steps.size() == 1 && !opt_.exchange_out.empty()) {
      const std::vector<Communicator*> groups = run_.group_comms();
      write_exchange_record(world_, *run_.mesh().world, {groups.begin(), groups.end()}, before,
                            run_.mesh(), step_, opt_.exchange_out);
    }
    if (out.steps.size() == 1)
      report_exchange(world_, *run_.mesh().cp_comm, double(run_.model().attention_pairs()),
                      cfg_.train.attention_load_balance);
    if (!r.diverged.empty()) {
      out.stopped = r.diverged + ": stopping; no checkpoint was written for this step";
      break;
    }
    // Before this step writes anything (its log line, a checkpoint): are the run's locks
    // still its own, and did a signal come?
    stop = agreed_stop_signal();
    if (stop == kLockLost) break;
    // ETA from the mean step time of this process (a resumed run starts its clock anew).
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    log_->write(r, elapsed / double(out.steps.size()));
    log_->profile(out.steps);
    if (r.skipped) ++out.skipped_steps;
    const int eval_every = cfg_.train.eval_every;
    if (eval_ && ((eval_every > 0 && step_ % eval_every == 0) || step_ == cfg_.train.steps))
      validate();
    const int every = cfg_.train.checkpoint_every;
    if ((every > 0 && step_ % every == 0) || step_ == cfg_.train.steps) save();
    // A run that has done its last step ends as usual, whatever came meanwhile.
    if (step_ == cfg_.train.steps) stop = 0;
  }
  if (stop == kLockLost) {
    out.lock_lost = true;
    out.stopped =
        (lock_lost_.empty() ? std::string("rank 0 lost a lock of this run") : lock_lost_) +
        ": stopped after step " + std::to_string(step_) +
        " without writing its log line or a checkpoint (" +
        (saved_step_ > 0 ? "the last checkpoint this run wrote or resumed is step " +
                               std::to_string(saved_step_)
                         : std::string("this run wrote no checkpoint")) +
        "); two runs must not write the same files";
    stop = 0;
  }
  if (stop) {
    out.stop_signal = stop;
    if (saved_step_ != step_ && step_ > 0) save();
    // Every rank's part is in place before any rank exits with "preempted", which makes
    // mpirun or srun end the others.
    int done = 0;
    world_.all_reduce_max(&done, 1, train_sites::kStopAgree);
  }
  out.cpu_seconds = process_cpu_seconds() - cpu_start;
  progress("done");
  return out;
}

#define GDN_INSTANTIATE(T, Dev) template class Trainer<T, Dev>;
GDN_FOR_EACH_DEVICE(GDN_INSTANTIATE)
#undef GDN_INSTANTIATE

}  // namespace gdn
