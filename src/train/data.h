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
  // Writes tokens [begin, begin + count) of that window (0 <= begin, 0 <= count,
  // begin + count <= len) into out: the same values sequence(step, index, len) gives
  // there, so a cp rank can take just its shard. The built-in sources read only those
  // tokens of a file, and generate synthetic tokens only up to begin + count (a Markov
  // chain has to be walked from its start; nothing before begin is stored). This default,
  // for other sources, draws the whole window and copies the part.
  virtual void window_part(std::int64_t step, std::int64_t index, std::int64_t len,
                           std::int64_t begin, std::int64_t count, std::int32_t* out) const;
  // Whether the source records where its documents start (a Megatron index), and where
  // they start inside window (step, index, len): positions p, 0 < p < len, ascending.
  virtual bool has_documents() const { return false; }
  virtual std::vector<std::int64_t> document_starts(std::int64_t step, std::int64_t index,
                                                    std::int64_t len) const;
  // A file's tokens as one stream, in the order they lie there (the windows above are parts
  // of it at seeded offsets): its length (0 for synthetic data, which has no stream), tokens
  // [first, first + count) of it, and where documents start inside [first, first + len) as
  // positions from first (0 < p < len; a Megatron index's record, else none). Validation
  // reads consecutive windows this way (train/eval_windows.h).
  virtual std::int64_t stream_tokens() const { return 0; }
  virtual void stream_part(std::int64_t first, std::int64_t count, std::int32_t* out) const;
  virtual std::vector<std::int64_t> stream_document_starts(std::int64_t first,
                                                           std::int64_t len) const;
  // Entropy in nats of the source's unigram (token frequency) distribution: a model that
  // learns anything beyond frequencies gets its loss below this.
  virtual double unigram_entropy() const = 0;
  virtual std::string describe() const = 0;
  // The size of the data's file in bytes (0 for synthetic data): part of a run's identity.
  virtual std::int64_t stored_bytes() const { return 0; }
  // Whether a document split at `eos` (or the source's own record) can have a counted
  // target: some document of two tokens or more. False for data that is all EOS, whose
  // every target train.documents eos would mask: nothing to train on.
  virtual bool can_count_targets(std::int32_t eos) const {
    (void)eos;
    return true;
  }
};

// data = "synthetic": a seeded random Markov chain over vocab_size tokens (each token has
// a few likely successors, so there is structure to learn).
// Otherwise a file path; its name chooses the format:
//   *.u16, *.u32  pre-tokenized: a raw little-endian stream of uint16 / uint32 token ids,
//                 nothing else in the file (no header; size = 2 or 4 bytes per token);
//   *.npy         pre-tokenized: a 1-D int32 or int64 array of token ids (C order,
//                 little-endian, as np.save writes it);
//   *.bin, *.idx  a Megatron-LM indexed dataset (preprocess_data.py's output: X.bin holds
//                 the tokens of every document back to back, X.idx where each one starts,
//                 train/megatron_index.h); either name opens both. The token stream is the
//                 .bin's, and has_documents() gives the index's document starts;
//   anything else a text file: byte-level tokens (needs vocab_size >= 256).
// "W1:FILE1,W2:FILE2,..." blends sources by weight (train/blend.h).
// Each sequence is a window of len consecutive tokens of the stream at a seeded offset,
// the same offsets for text and token files of the same length. Files (text and tokens)
// are never held in memory: each window, or the part of it window_part asks for, is
// read from the file with pread, so a file need not fit in RAM and a rank's memory does
// not grow with it (the file must not change during the run; one that shrank is an error
// naming it). At construction one streaming pass checks every id of a token file (each
// must lie in [0, vocab_size)) and counts the token or byte frequencies for
// unigram_entropy(). Errors (at construction) name the file and the problem: missing or
// unreadable, a directory or not a regular file, shorter than seq_len + 1 tokens, vocab
// too small for bytes, a raw size that is not a multiple of the id size, an .npy that is
// not a 1-D int32/int64 array, the first id out of range (its index and value).
std::unique_ptr<TokenSource> make_token_source(const std::string& data, int vocab_size,
                                               std::uint64_t seed, std::int64_t seq_len);

// The seed of sequence (step, index): a hash of (seed, step, index), so any rank can draw
// any sequence without drawing the ones before it.
std::uint64_t sequence_seed(std::uint64_t seed, std::int64_t step, std::int64_t index);

// Whether `data` names a Megatron indexed dataset (*.bin or *.idx), whose index records
// the documents (train.documents eos then needs no eos_token_id).
bool is_indexed_dataset(const std::string& data);

// Where documents start in window (step, index, seq_len + 1) of src, whose first seq_len
// tokens (the inputs) are `inputs`: the source's own record when it has one (inputs may
// then be null), else after every `eos` (Documents::starts_after). Positions p with
// 0 < p <= seq_len (cp/documents.h).
std::vector<std::int64_t> window_document_starts(const TokenSource& src, std::int64_t step,
                                                 std::int64_t index, std::int64_t seq_len,
                                                 const std::int32_t* inputs, std::int32_t eos);

}  // namespace gdn
