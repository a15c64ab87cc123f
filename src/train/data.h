// Token data for training. Every sequence of every step is a pure function of
// (seed, step, global sequence index), so any dp x cp layout sees the same global batch,
// and the data cursor in a checkpoint is just the next step.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gdn {

class TokenSource {
 public:
  virtual ~TokenSource() = default;
  // Writes sequence `index` of step `step`: len tokens (seq_len + 1: inputs and the
  // next-token targets) into out.
  virtual void sequence(std::int64_t step, std::int64_t index, std::int64_t len,
                        std::int32_t* out) const = 0;
  // Entropy in nats of the source's unigram (token frequency) distribution: a model that
  // learns anything beyond frequencies gets its loss below this.
  virtual double unigram_entropy() const = 0;
  virtual std::string describe() const = 0;
};

// data = "synthetic": a seeded random Markov chain over vocab_size tokens (each token has
// a few likely successors, so there is structure to learn).
// Otherwise a path to a text file: byte-level tokens (needs vocab_size >= 256), each
// sequence a window at a seeded random offset. Errors name the file and the problem
// (missing, shorter than len, vocab too small).
std::unique_ptr<TokenSource> make_token_source(const std::string& data, int vocab_size,
                                               std::uint64_t seed, std::int64_t seq_len);

}  // namespace gdn
