#include "train/eval_windows.h"

#include <fmt/format.h>

#include "core/error.h"

namespace gdn {

EvalWindows::EvalWindows(const std::string& file, int vocab_size, std::int64_t seq_len,
                         std::int64_t K, int batch)
    : path_(file), seq_len_(seq_len), K_(K), batch_(batch) {
  GDN_CHECK(file != "synthetic" && !file.empty(), "train.eval_data '", file,
            "': expected a data file (validation reads a file's consecutive windows)");
  try {
    file_ = make_token_source(file, vocab_size, /*seed=*/0, seq_len);
  } catch (const Error& e) {
    throw_error("train.eval_data: ", e.what());
  }
  const std::int64_t n = file_->stream_tokens();
  GDN_CHECK(n > 0, "train.eval_data '", file, "' (", file_->describe(),
            ") is not one stream of tokens: expected one text, token or Megatron file");
  GDN_CHECK(n >= seq_len + 1, "train.eval_data '", file, "' holds ", n,
            " tokens: one window needs seq_len + 1 = ", seq_len + 1);
  const std::int64_t windows = (n - 1) / seq_len;
  GDN_CHECK(K <= windows, "train.eval_sequences ", K, " is more than train.eval_data '", file,
            "' holds: ", windows, " windows of seq_len + 1 = ", seq_len + 1,
            " tokens (consecutive, overlapping by one)");
}

std::int64_t EvalWindows::start(std::int64_t step, std::int64_t index, std::int64_t len) const {
  GDN_CHECK(len == seq_len_ + 1, "validation windows are ", seq_len_ + 1, " tokens, asked ", len);
  // Past the K (the last chunk's spare rows): window w mod K, never counted.
  return (step * batch_ + index) % K_ * seq_len_;
}

void EvalWindows::sequence(std::int64_t step, std::int64_t index, std::int64_t len,
                           std::int32_t* out) const {
  file_->stream_part(start(step, index, len), len, out);
}

void EvalWindows::window_part(std::int64_t step, std::int64_t index, std::int64_t len,
                              std::int64_t begin, std::int64_t count, std::int32_t* out) const {
  GDN_CHECK(begin >= 0 && count >= 0 && begin <= len - count, "window_part: tokens [", begin, ", ",
            begin + count, ") are not inside a window of ", len, " tokens");
  file_->stream_part(start(step, index, len) + begin, count, out);
}

std::vector<std::int64_t> EvalWindows::document_starts(std::int64_t step, std::int64_t index,
                                                       std::int64_t len) const {
  return file_->stream_document_starts(start(step, index, len), len);
}

std::string EvalWindows::describe() const {
  return fmt::format("the first {} consecutive windows of {}", K_, file_->describe());
}

}  // namespace gdn
