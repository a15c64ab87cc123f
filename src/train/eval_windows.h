// The validation set of train.eval_data: the file cut into consecutive windows of seq_len + 1
// tokens that overlap by one (window w starts at token w seq_len), the first K
// (train.eval_sequences) of them. As a TokenSource it serves them as a training batch's
// windows, so next_batch shards them over cp and splits them over dp as it does a step's:
// (step, index) is window step * batch + index of a chunk of `batch` windows (the training
// batch), and windows past K repeat earlier ones (their targets are not counted:
// counted_rows). Documents come from the file's own index (a Megatron dataset) or its EOS
// tokens, as in training.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "train/data.h"

namespace gdn {

class EvalWindows final : public TokenSource {
 public:
  // Opens `file` as train.data would open it. Errors name the file: not one stream of
  // tokens (synthetic data, a blend), shorter than one window, fewer than K windows (how
  // many it holds).
  EvalWindows(const std::string& file, int vocab_size, std::int64_t seq_len, std::int64_t K,
              int batch);

  // Chunks of `batch` windows that cover the K.
  std::int64_t chunks() const { return (K_ + batch_ - 1) / batch_; }
  // Window (chunk, index): whether it is one of the K (its targets count).
  bool counted(std::int64_t chunk, std::int64_t index) const { return chunk * batch_ + index < K_; }

  void sequence(std::int64_t step, std::int64_t index, std::int64_t len,
                std::int32_t* out) const override;
  void window_part(std::int64_t step, std::int64_t index, std::int64_t len, std::int64_t begin,
                   std::int64_t count, std::int32_t* out) const override;
  bool has_documents() const override { return file_->has_documents(); }
  std::vector<std::int64_t> document_starts(std::int64_t step, std::int64_t index,
                                            std::int64_t len) const override;
  double unigram_entropy() const override { return file_->unigram_entropy(); }
  std::string describe() const override;
  std::int64_t stored_bytes() const override { return file_->stored_bytes(); }
  bool can_count_targets(std::int32_t eos) const override { return file_->can_count_targets(eos); }

 private:
  // Where window (step, index) of len = seq_len + 1 tokens starts in the file's stream.
  std::int64_t start(std::int64_t step, std::int64_t index, std::int64_t len) const;

  std::unique_ptr<TokenSource> file_;
  std::string path_;
  std::int64_t seq_len_, K_;
  int batch_;
};

}  // namespace gdn
