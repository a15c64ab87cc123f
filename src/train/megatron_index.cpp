#include "train/megatron_index.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace gdn {

namespace {

constexpr char kMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
constexpr std::int64_t kHeaderBytes = 9 + 8 + 1 + 8 + 8;
constexpr const char* kShortNote = "the index must not change during the run";
constexpr std::int64_t kBlock = 1 << 16;  // entries per read of the check

// Token sizes of the integer codes of Megatron's DType enum; 0 for the others.
int token_bytes_of(int code) {
  switch (code) {
    case 4:  // int32
      return 4;
    case 5:  // int64
      return 8;
    case 8:  // uint16
      return 2;
    default:
      return 0;
  }
}

template <typename E>
E load(const unsigned char* p, std::int64_t i) {
  E v;
  std::memcpy(&v, p + i * std::int64_t(sizeof(E)), sizeof(E));
  return v;
}

}  // namespace

MegatronIndex::MegatronIndex(const std::string& idx_path)
    : file_(idx_path, "", "Megatron index",
            "expected the .idx of a Megatron-LM indexed dataset next to its .bin",
            "a Megatron-LM .idx file") {
  const std::string& p = path();
  GDN_CHECK(file_.size() >= kHeaderBytes, "Megatron index '", p, "' has ", file_.size(),
            " bytes, fewer than its ", kHeaderBytes, "-byte header");
  unsigned char h[kHeaderBytes];
  file_.read(h, kHeaderBytes, 0, kShortNote);
  GDN_CHECK(std::memcmp(h, kMagic, 9) == 0, "Megatron index '", p,
            "' does not start with MMIDIDX: expected the .idx of a Megatron-LM (MMap) indexed "
            "dataset");
  const std::uint64_t version = load<std::uint64_t>(h + 9, 0);
  GDN_CHECK(version == 1, "Megatron index '", p, "' has version ", version, ": expected 1");
  code_ = h[17];
  token_bytes_ = token_bytes_of(code_);
  GDN_CHECK(token_bytes_ > 0, "Megatron index '", p, "' stores tokens of dtype code ", code_,
            ": expected token ids as int32 (4), int64 (5) or uint16 (8)");
  seq_count_ = load<std::int64_t>(h + 18, 0);
  doc_count_ = load<std::int64_t>(h + 26, 0);
  const std::int64_t S = seq_count_, D = doc_count_;
  GDN_CHECK(S >= 0 && D >= 1 && S < (std::int64_t(1) << 40) && D <= S + 1, "Megatron index '", p,
            "' says ", S, " sequences and ", D,
            " document starts: expected at least one start and no more than sequences + 1");
  offsets_at_ = kHeaderBytes + 4 * S;
  docs_at_ = offsets_at_ + 8 * S;
  const std::int64_t size = docs_at_ + 8 * D;
  GDN_CHECK(file_.size() == size || file_.size() == size + S, "Megatron index '", p, "' has ",
            file_.size(), " bytes, but its header's ", S, " sequences and ", D,
            " document starts need ", size, " (or ", size + S, " with sequence modes)");
  // The lengths and offsets together, a block at a time.
  std::vector<unsigned char> lens(std::size_t(4 * kBlock)), offs(std::size_t(8 * kBlock));
  for (std::int64_t i0 = 0; i0 < S; i0 += kBlock) {
    const std::int64_t n = std::min(kBlock, S - i0);
    file_.read(lens.data(), 4 * n, kHeaderBytes + 4 * i0, kShortNote);
    file_.read(offs.data(), 8 * n, offsets_at_ + 8 * i0, kShortNote);
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int32_t len = load<std::int32_t>(lens.data(), i);
      const std::int64_t off = load<std::int64_t>(offs.data(), i);
      GDN_CHECK(len >= 0, "Megatron index '", p, "': sequence ", i0 + i, " has length ", len,
                ": expected >= 0");
      GDN_CHECK(off == tokens_ * token_bytes_, "Megatron index '", p, "': sequence ", i0 + i,
                " starts at byte ", off, " of the .bin, but the sequences before it end at byte ",
                tokens_ * token_bytes_, ": expected them back to back (an index of another .bin?)");
      tokens_ += len;
    }
  }
  std::int64_t prev = 0;
  for (std::int64_t d0 = 0; d0 < D; d0 += kBlock) {
    const std::int64_t n = std::min(kBlock, D - d0);
    file_.read(offs.data(), 8 * n, docs_at_ + 8 * d0, kShortNote);
    for (std::int64_t d = 0; d < n; ++d) {
      const std::int64_t s = load<std::int64_t>(offs.data(), d);
      GDN_CHECK((d0 + d == 0 ? s == 0 : s >= prev) && s <= S, "Megatron index '", p,
                "': document start ", d0 + d, " is sequence ", s,
                d0 + d == 0 ? ": expected 0" : ", expected a sequence after the previous start, ",
                d0 + d == 0 ? "" : std::to_string(prev), " and at most ", S);
      prev = s;
    }
  }
  GDN_CHECK(prev == S, "Megatron index '", p, "': the last document start is sequence ", prev,
            ": expected ", S, ", the end of the sequences");
}

std::int64_t MegatronIndex::read_i64(std::int64_t offset) const {
  std::int64_t v = 0;
  file_.read(&v, 8, offset, kShortNote);
  return v;
}

std::int64_t MegatronIndex::doc_start(std::int64_t d) const {
  const std::int64_t s = read_i64(docs_at_ + 8 * d);
  return s == seq_count_ ? tokens_ : read_i64(offsets_at_ + 8 * s) / token_bytes_;
}

std::vector<std::int64_t> MegatronIndex::starts_in(std::int64_t begin, std::int64_t end) const {
  // The first document starting after begin: starts never decrease in d.
  std::int64_t lo = 0, hi = doc_count_ - 1;  // documents [0, D - 1)
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    if (doc_start(mid) > begin)
      hi = mid;
    else
      lo = mid + 1;
  }
  std::vector<std::int64_t> out;
  for (std::int64_t d = lo; d < doc_count_ - 1; ++d) {
    const std::int64_t s = doc_start(d);
    if (s >= end) break;
    if (out.empty() || out.back() != s) out.push_back(s);
  }
  return out;
}

bool MegatronIndex::has_multi_token_document() const {
  // Fewer documents than tokens: one of them has two (empty documents only lower the count).
  if (documents() < tokens_) return true;
  for (std::int64_t d = 0; d + 1 < doc_count_; ++d)
    if (doc_start(d + 1) - doc_start(d) >= 2) return true;
  return false;
}

}  // namespace gdn
