#include "train/step_log.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "model/memory_estimate.h"

namespace gdn {

namespace {

// Whether a log line is the record of a step before `step`.
bool before(const std::string& line, std::int64_t step) {
  const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) return false;
  return j["step"].get<std::int64_t>() < step;
}

std::string format_eta(double seconds) {
  const long s = std::lround(std::max(0.0, seconds));
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
  return buf;
}

}  // namespace

StepLog::StepLog(const TrainConfig& t, const ModelConfig& m, bool root, ModelFlopRate rate)
    : t_(t), moe_(m.num_moe_layers() > 0), root_(root), rate_(rate) {
  if (!root || t.log.empty()) return;
  // Non-blocking, so that a FIFO nobody reads fails now (ENXIO) instead of hanging.
  fd_ = ::open(t.log.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0644);
  GDN_CHECK(fd_ >= 0 || errno != ENXIO, "the log '", t.log, "'", t.origin("log"),
            " is a FIFO that no process reads: start its reader first, or pass a regular file");
  GDN_CHECK(fd_ >= 0, "cannot open the log file '", t.log, "'", t.origin("log"), ": ",
            std::strerror(errno));
  const int flags = ::fcntl(fd_, F_GETFL);
  if (flags >= 0) (void)::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK);
}

StepLog::~StepLog() {
  if (fd_ >= 0) ::close(fd_);
}

void StepLog::append(const std::string& line) {
  const std::string text = line + '\n';
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (!write_failed_)
        spdlog::warn("cannot write the log file '{}': {}; the steps go on, unlogged there", t_.log,
                     std::strerror(errno));
      write_failed_ = true;
      return;
    }
    done += std::size_t(n);
  }
}

void StepLog::write_validation(std::int64_t step, double loss, std::int64_t tokens, double ms,
                               double best) {
  if (!root_) return;
  spdlog::info(
      "validation after step {:>5} | val loss {:.6f} over {} targets | {:.1f} ms | best {:.6f}",
      step + 1, loss, tokens, ms, best);
  if (fd_ >= 0)
    append(
        nlohmann::json{{"step", step}, {"val_loss", loss}, {"val_tokens", tokens}, {"val_ms", ms}}
            .dump());
}

void StepLog::write(const StepRecord& r, double seconds_per_step) {
  if (!root_) return;
  const double remaining = double(t_.steps - (r.step + 1));
  const bool moe = moe_;
  if (r.skipped) {
    ++skipped_;
    spdlog::warn(
        "step {:>5}/{} | skipped: no counted target in the batch (train.documents "
        "masked every one), no update | {} skipped so far",
        r.step + 1, t_.steps, skipped_);
    if (fd_ >= 0)
      append(nlohmann::json{{"step", r.step},
                            {"loss", nullptr},
                            {"skipped", true},
                            {"skipped_steps", skipped_},
                            {"tokens", 0},
                            {"lr", r.lr},
                            {"step_ms", r.step_ms}}
                 .dump());
    return;
  }
  const std::string aux = moe ? fmt::format(" | aux {:.6f}", r.aux_loss) : "";
  const bool rate = rate_.flops_per_step > 0 && r.step_ms > 0;
  std::string flops;
  if (rate) {
    flops = fmt::format(" | {:.3g} TFLOP/s/rank", rate_.per_rank(r.step_ms) * 1e-12);
    if (rate_.peak > 0) flops += fmt::format(" MFU {:.1f}%", 100 * rate_.mfu(r.step_ms));
  }
  spdlog::info(
      "step {:>5}/{} | loss {:.6f}{} | grad norm {:.4f} | lr {:.3e} | {:.1f} ms | {:.0f} tok/s{} | "
      "peak RSS {}{} | ETA {}",
      r.step + 1, t_.steps, r.loss, aux, r.grad_norm, r.lr, r.step_ms,
      double(r.tokens) / (r.step_ms / 1000.0), flops, format_bytes(double(r.peak_rss)),
      r.peak_device > 0 ? " | device " + format_bytes(double(r.peak_device)) : "",
      format_eta(seconds_per_step * remaining));
  if (fd_ >= 0) {
    nlohmann::json j{
        {"step", r.step},     {"loss", r.loss},       {"grad_norm", r.grad_norm}, {"lr", r.lr},
        {"tokens", r.tokens}, {"step_ms", r.step_ms}, {"peak_rss", r.peak_rss}};
    if (r.peak_device > 0) j["peak_device"] = r.peak_device;
    if (rate) j["model_tflops"] = rate_.per_rank(r.step_ms) * 1e-12;  // per rank
    if (rate && rate_.peak > 0) j["mfu"] = rate_.mfu(r.step_ms);
    if (skipped_ > 0) j["skipped_steps"] = skipped_;
    if (moe) {
      j["aux_loss"] = r.aux_loss;
      j["total"] = r.total;
    }
    if (!r.profile.empty()) j["profile"] = r.profile;
    append(j.dump());
  }
}

void StepLog::profile(const std::vector<StepRecord>& steps) const {
  if (!t_.profile || !root_ || steps.empty()) return;
  const std::size_t n = steps.size(), first = std::min<std::size_t>(3, t_.steps);
  const bool last = steps.back().step + 1 == t_.steps;
  if (n != first && !(last && n > first)) return;
  // The first step pays for first touches and warm-up: left out once there are others.
  const std::size_t from = n > 1 ? 1 : 0;
  std::vector<StepProfile> ps;
  for (std::size_t i = from; i < n; ++i) ps.push_back(steps[i].profile);
  spdlog::info("profile of rank 0, mean of steps {}-{} (wall time by component):",
               steps[from].step + 1, steps.back().step + 1);
  for (const std::string& line : profile_table(ps)) spdlog::info("{}", line);
}

std::int64_t truncate_step_log(const std::string& path, std::int64_t step) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) return 0;
  // Through a symbolic link, the file it names is rewritten (the link stays).
  const fs::path real = fs::canonical(path, ec);
  if (ec || !fs::is_regular_file(real, ec)) return 0;
  std::ifstream in(real);
  GDN_CHECK(in.good(), "cannot read the log file '", path, "': ", std::strerror(errno));
  std::string kept, line;
  std::int64_t dropped = 0;
  while (std::getline(in, line)) {
    if (before(line, step))
      kept += line + '\n';
    else
      ++dropped;
  }
  GDN_CHECK(!in.bad(), "cannot read the log file '", path, "': ", std::strerror(errno));
  if (dropped > 0) write_file_atomically(real.string(), kept, "rewriting the log file");
  return dropped;
}

std::optional<LoggedSteps> logged_steps(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (path.empty() || !fs::is_regular_file(path, ec)) return std::nullopt;
  std::ifstream in(path);
  LoggedSteps out;
  std::string line;
  while (std::getline(in, line)) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) continue;
    ++out.count;
    out.last = j["step"].get<std::int64_t>();
  }
  if (out.count == 0) return std::nullopt;
  return out;
}

}  // namespace gdn
