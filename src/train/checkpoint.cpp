// Every file of a checkpoint (all integers little-endian):
//   "GDNCKPT1" | u64 header length | JSON header | data | u64 FNV-1a-64 of all bytes
//   before it | "GDNCKEND"
// A part's header: {"format": 2, "kind": "part", "step", "rank", "dtype", "runs": [[global,
// n], ...]}; its data: the values of its runs one after another, then the first moments,
// then the second. A manifest's header: {"format": 2, "kind": "manifest", "step", "dtype",
// "config_json", "params": [{"name", "shape"}], "parts": [{"file", "bytes", "checksum",
// "runs"}]}; it has no data.
#include "train/checkpoint.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <tuple>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/writable_dir.h"

namespace gdn {
namespace {

static_assert(std::endian::native == std::endian::little,
              "checkpoints are written in host byte order, which must be little-endian");

namespace fs = std::filesystem;
using nlohmann::json;

constexpr char kMagic[8] = {'G', 'D', 'N', 'C', 'K', 'P', 'T', '1'};
constexpr char kEndMagic[8] = {'G', 'D', 'N', 'C', 'K', 'E', 'N', 'D'};
constexpr std::size_t kFixed = 8 + 8 + 8 + 8;  // magic, header length, checksum, end magic
constexpr int kFormat = 2;                     // 1: one whole file per checkpoint

struct Fnv1a {
  std::uint64_t h = 0xcbf29ce484222325ull;
  void add(const void* p, std::size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
  }
};

std::string sys_error() {
  return std::strerror(errno);
}

// Writes to a file while hashing and counting what it writes.
class HashingWriter {
 public:
  explicit HashingWriter(AtomicFile& file) : file_(file) {}
  void write(const void* p, std::size_t n, bool hash = true) {
    if (hash) fnv_.add(p, n);
    file_.write(p, n);
    bytes_ += n;
  }
  std::uint64_t hash() const { return fnv_.h; }
  std::uint64_t bytes() const { return bytes_; }

 private:
  AtomicFile& file_;
  Fnv1a fnv_;
  std::uint64_t bytes_ = 0;
};

// Writes one checkpoint file atomically: magic, header, the data `write_data(w)` writes,
// checksum, end magic. Returns its size and checksum.
template <typename F>
std::pair<std::uint64_t, std::uint64_t> write_checkpoint_file(const std::string& path,
                                                              const std::string& tmp_path,
                                                              const std::string& header,
                                                              F&& write_data) {
  AtomicFile file(path, "save_checkpoint", tmp_path);
  HashingWriter w(file);
  w.write(kMagic, 8);
  const std::uint64_t hlen = header.size();
  w.write(&hlen, 8);
  w.write(header.data(), header.size());
  write_data(w);
  const std::uint64_t sum = w.hash();
  w.write(&sum, 8, false);
  w.write(kEndMagic, 8, false);
  const std::string unsynced = file.commit();
  if (!unsynced.empty()) spdlog::warn("checkpoint {}: {}", path, unsynced);
  return {w.bytes(), sum};
}

// "ckpt-00000003.bin", or ".ckpt-00000003.bin.tmp" while it is written.
std::string file_name(std::int64_t step, bool tmp = false) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%sckpt-%08lld.bin%s", tmp ? "." : "",
                static_cast<long long>(step), tmp ? ".tmp" : "");
  return buf;
}

std::string part_suffix(int rank) {
  char buf[24];
  std::snprintf(buf, sizeof buf, ".part-%05d", rank);
  return buf;
}

// Step of a "ckpt-<digits>.bin" name, or -1.
std::int64_t step_of(const std::string& name) {
  const std::string pre = "ckpt-", suf = ".bin";
  if (name.size() <= pre.size() + suf.size() || name.rfind(pre, 0) != 0 ||
      name.compare(name.size() - suf.size(), suf.size(), suf) != 0)
    return -1;
  const std::string digits = name.substr(pre.size(), name.size() - pre.size() - suf.size());
  if (digits.size() > 18 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return -1;
  return std::stoll(digits);
}

std::vector<char> read_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  GDN_CHECK(f, "cannot open checkpoint '", path, "': ", sys_error());
  std::vector<char> bytes;
  char buf[1 << 16];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) bytes.insert(bytes.end(), buf, buf + n);
  const bool err = std::ferror(f);
  std::fclose(f);
  GDN_CHECK(!err, "error reading checkpoint '", path, "'");
  return bytes;
}

std::uint64_t read_u64(const char* p) {
  std::uint64_t x;
  std::memcpy(&x, p, 8);
  return x;
}

// A verified file: its header, where its data lies and its checksum.
struct Parsed {
  json header;
  std::size_t data_begin = 0, data_end = 0;
  std::uint64_t checksum = 0;
};

// A checkpoint whose header has another format than kFormat: which, and whose it is.
std::string other_format(const std::string& path, int format) {
  return "checkpoint '" + path + "' has format " + std::to_string(format) +
         "; this gdn-cp reads format " + std::to_string(kFormat) + " (it was written by " +
         (format < kFormat ? "an older gdn-cp, as one whole file" : "a newer gdn-cp") + ")";
}

// Checks magic, length, checksum and end magic, then parses the header and checks its
// format and kind. Throws a message that says why the file is not a complete one.
Parsed verify(const std::string& path, const std::vector<char>& b, const char* kind) {
  GDN_CHECK(b.size() >= kFixed, "checkpoint '", path, "' is truncated (", b.size(),
            " bytes, a checkpoint has at least ", kFixed, ")");
  GDN_CHECK(std::memcmp(b.data(), kMagic, 8) == 0, "'", path,
            "' is not a gdn-cp checkpoint (no GDNCKPT1 magic)");
  GDN_CHECK(std::memcmp(b.data() + b.size() - 8, kEndMagic, 8) == 0, "checkpoint '", path,
            "' is truncated or torn (no end marker)");
  const std::size_t body = b.size() - 16;
  Fnv1a fnv;
  fnv.add(b.data(), body);
  GDN_CHECK(fnv.h == read_u64(b.data() + body), "checkpoint '", path,
            "' is corrupt: checksum mismatch");
  const std::uint64_t hlen = read_u64(b.data() + 8);
  GDN_CHECK(hlen <= body - 16, "checkpoint '", path, "' has a header length ", hlen,
            " beyond the end of the file");
  Parsed p;
  try {
    p.header = json::parse(b.begin() + 16, b.begin() + 16 + std::ptrdiff_t(hlen));
    const int format = p.header.value("format", 1);
    GDN_CHECK(format == kFormat, other_format(path, format));
    const std::string k = p.header.at("kind").get<std::string>();
    GDN_CHECK(k == kind, "checkpoint '", path, "' is a ", k, ", expected a ", kind);
  } catch (const json::exception& e) {
    throw_error("checkpoint '", path, "' has a malformed header: ", e.what());
  }
  p.data_begin = 16 + hlen;
  p.data_end = body;
  p.checksum = fnv.h;
  return p;
}

// The element type a verified header names.
DType header_dtype(const std::string& path, const json& h) {
  const std::string dt = h.at("dtype").get<std::string>();
  const std::optional<DType> t = enum_from_name<DType>(dt);
  GDN_CHECK(t == DType::f32 || t == DType::f64, "checkpoint '", path, "' has dtype '", dt,
            "': expected f32 or f64");
  return *t;
}

// Calls f(i, x) for the n stored elements from byte `at` of b, each as a double: one
// branch on the dtype per call, not per element.
template <typename F>
void for_each_stored(const std::vector<char>& b, std::size_t at, std::size_t n, DType t, F&& f) {
  if (t == DType::f32) {
    for (std::size_t i = 0; i < n; ++i) {
      float x;
      std::memcpy(&x, b.data() + at + 4 * i, 4);
      f(i, double(x));
    }
  } else {
    for (std::size_t i = 0; i < n; ++i) {
      double x;
      std::memcpy(&x, b.data() + at + 8 * i, 8);
      f(i, x);
    }
  }
}

json runs_json(const std::vector<GlobalRun>& runs) {
  json j = json::array();
  for (const GlobalRun& r : runs) j.push_back({r.global, r.n});
  return j;
}

// Runs as a header lists them, `at` the running total.
std::vector<GlobalRun> runs_from_json(const json& j) {
  std::vector<GlobalRun> runs;
  std::int64_t at = 0;
  for (const json& r : j) {
    runs.push_back({r.at(0).get<std::int64_t>(), at, r.at(1).get<std::int64_t>()});
    at += runs.back().n;
  }
  return runs;
}

// A part as the manifest lists it (its runs as [global, n]: `at` is their running total).
json part_entry(const CheckpointPart& p) {
  return {
      {"file", p.file}, {"bytes", p.bytes}, {"checksum", p.checksum}, {"runs", runs_json(p.runs)}};
}
CheckpointPart part_from_entry(const json& e) {
  return {e.at("file").get<std::string>(), e.at("bytes").get<std::uint64_t>(),
          e.at("checksum").get<std::uint64_t>(), runs_from_json(e.at("runs"))};
}

std::int64_t total_of(const std::vector<ParamInfo>& params) {
  return params.empty() ? 0 : params.back().offset + params.back().size;
}

// The parameter holding element g of the whole model's flat order.
const ParamInfo& param_at(const std::vector<ParamInfo>& params, std::int64_t g) {
  const auto it = std::upper_bound(params.begin(), params.end(), g,
                                   [](std::int64_t x, const ParamInfo& p) { return x < p.offset; });
  return *std::prev(it);
}

// Where each element of [0, total) is stored: (global, part, at in the part, n), sorted.
struct Piece {
  std::int64_t global, n;
  std::size_t part;
  std::int64_t at;
};

// The parts' runs as pieces; throws unless they cover [0, total) once.
std::vector<Piece> cover(const std::string& what, const std::vector<CheckpointPart>& parts,
                         std::int64_t total) {
  std::vector<Piece> pieces;
  for (std::size_t k = 0; k < parts.size(); ++k)
    for (const GlobalRun& r : parts[k].runs)
      if (r.n > 0) pieces.push_back({r.global, r.n, k, r.at});
  std::sort(pieces.begin(), pieces.end(),
            [](const Piece& a, const Piece& b) { return a.global < b.global; });
  std::int64_t next = 0;
  for (const Piece& p : pieces) {
    GDN_CHECK(p.global == next, what, ": its parts ",
              p.global < next ? "hold element " : "leave out element ", std::min(p.global, next),
              p.global < next ? " twice" : "", " of the model's ", total);
    next += p.n;
  }
  GDN_CHECK(next == total, what, ": its parts hold ", next, " of the model's ", total, " elements");
  return pieces;
}

// A manifest's contents.
struct Manifest {
  TrainingState state;
  std::vector<std::pair<std::string, Shape>> params;
  std::vector<CheckpointPart> parts;
};

Manifest parse_manifest(const std::string& path, const Parsed& p) {
  Manifest m;
  try {
    const json& h = p.header;
    m.state.step = h.at("step").get<std::int64_t>();
    m.state.config_json = h.at("config_json").get<std::string>();
    m.state.dtype = header_dtype(path, h);
    for (const json& e : h.at("params"))
      m.params.emplace_back(e.at("name").get<std::string>(), e.at("shape").get<Shape>());
    for (const json& e : h.at("parts")) m.parts.push_back(part_from_entry(e));
  } catch (const json::exception& e) {
    throw_error("checkpoint '", path, "' has a malformed header: ", e.what());
  }
  for (const CheckpointPart& part : m.parts)
    GDN_CHECK(part.file.find('/') == std::string::npos && !part.file.empty(), "checkpoint '", path,
              "' names a part '", part.file, "' outside its directory");
  return m;
}

// Throws unless the manifest's parameter table is the model's: the first parameter whose
// name or shape differs is named.
void check_params(const std::string& path, const Manifest& m,
                  const std::vector<ParamInfo>& params) {
  for (std::size_t i = 0; i < std::min(m.params.size(), params.size()); ++i) {
    const auto& [name, shape] = m.params[i];
    GDN_CHECK(name == params[i].name, "checkpoint '", path, "': parameter ", i, " is '", name,
              "', the model's is '", params[i].name, "'");
    GDN_CHECK(shape == params[i].shape, "checkpoint '", path, "': parameter '", name,
              "' has shape ", shape_str(shape), ", the model's is ", shape_str(params[i].shape));
  }
  GDN_CHECK(m.params.size() == params.size(), "checkpoint '", path, "' holds ", m.params.size(),
            " parameters, the model has ", params.size(), " (",
            m.params.size() > params.size() ? "extra: '" + m.params[params.size()].first
                                            : "missing: '" + params[m.params.size()].name,
            "')");
}

std::string part_path(const std::string& manifest, const CheckpointPart& part) {
  return (fs::path(manifest).parent_path() / part.file).string();
}

// "" when every part is there with the size the manifest records, else why not.
std::string missing_part(const std::string& manifest, const Manifest& m) {
  for (const CheckpointPart& part : m.parts) {
    const std::string path = part_path(manifest, part);
    std::error_code ec;
    const std::uintmax_t size = fs::file_size(path, ec);
    if (ec) return "its part '" + path + "' is missing (" + ec.message() + ")";
    if (size != part.bytes)
      return "its part '" + path + "' has " + std::to_string(size) +
             " bytes, the manifest records " + std::to_string(part.bytes) +
             " (torn, or of another save)";
  }
  return "";
}

// A part read and checked against the manifest that lists it: complete, the checksum and
// runs recorded there, finite values.
struct LoadedPart {
  std::vector<char> bytes;
  Parsed p;
  DType dtype = DType::f32;
  std::int64_t n = 0;  // elements per kind
};

LoadedPart load_part(const std::string& manifest, const Manifest& m, const CheckpointPart& part) {
  const std::string path = part_path(manifest, part);
  LoadedPart l;
  std::error_code ec;
  GDN_CHECK(fs::exists(path, ec), "checkpoint '", manifest, "': its part '", path, "' is missing");
  l.bytes = read_file(path);
  l.p = verify(path, l.bytes, "part");
  GDN_CHECK(l.p.checksum == part.checksum && l.bytes.size() == part.bytes, "checkpoint '", manifest,
            "': its part '", path, "' is not the one it lists (checksum or size differs: written ",
            "by another save)");
  try {
    l.dtype = header_dtype(path, l.p.header);
    const std::vector<GlobalRun> runs = runs_from_json(l.p.header.at("runs"));
    GDN_CHECK(l.p.header.at("step").get<std::int64_t>() == m.state.step &&
                  l.dtype == m.state.dtype && runs.size() == part.runs.size() &&
                  std::equal(runs.begin(), runs.end(), part.runs.begin(),
                             [](const GlobalRun& a, const GlobalRun& b) {
                               return a.global == b.global && a.n == b.n;
                             }),
              "checkpoint '", manifest, "': its part '", path,
              "' holds another step, dtype or runs than the manifest lists");
    for (const GlobalRun& r : runs) l.n += r.n;
  } catch (const json::exception& e) {
    throw_error("checkpoint '", path, "' has a malformed header: ", e.what());
  }
  const std::size_t es = dtype_size(l.dtype);
  GDN_CHECK(l.p.data_end - l.p.data_begin == std::size_t(3 * l.n) * es, "checkpoint '", path,
            "' holds ", l.p.data_end - l.p.data_begin, " data bytes for ", 3 * l.n, " elements");
  // A run that diverged must never be resumed from.
  for_each_stored(l.bytes, l.p.data_begin, std::size_t(3 * l.n), l.dtype,
                  [&](std::size_t i, double x) {
                    if (!std::isfinite(x))
                      throw_error("checkpoint '", path, "' holds a non-finite value (at data byte ",
                                  i * es, "): it was written by a run that diverged");
                  });
  return l;
}

// The complete-looking manifests of dir, newest first (steps and paths; not verified).
std::vector<std::pair<std::int64_t, std::string>> manifest_files(const std::string& dir) {
  std::vector<std::pair<std::int64_t, std::string>> found;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return found;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::int64_t step = step_of(e.path().filename().string());
    if (step >= 0 && e.is_regular_file(ec)) found.emplace_back(step, e.path().string());
  }
  std::sort(found.begin(), found.end(), std::greater<>());
  return found;
}

// The files of manifest's directory named "<manifest's name>.part-*".
std::vector<fs::path> part_files(const std::string& manifest) {
  std::vector<fs::path> out;
  const fs::path dir = fs::path(manifest).parent_path();
  const std::string prefix = fs::path(manifest).filename().string() + ".part-";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().filename().string().rfind(prefix, 0) == 0) out.push_back(e.path());
  return out;
}

// Why a file named like a manifest is another program's or another version's (its
// magic or its header's format differ from this gdn-cp's), or "" when it is not: it may
// still be torn or corrupt.
std::string foreign_reason(const std::string& path, const std::vector<char>& b) {
  constexpr std::size_t kFamily = 7;  // "GDNCKPT": the magic's version is its last byte
  if (b.size() < kFamily || std::memcmp(b.data(), kMagic, kFamily) != 0)
    return "'" + path + "' is not a gdn-cp checkpoint (no GDNCKPT1 magic at its start)";
  if (b.size() >= 8 && b[7] != kMagic[7])
    return "checkpoint '" + path + "' has the magic GDNCKPT" + std::string(1, b[7]) +
           "; this gdn-cp reads GDNCKPT1 (it was written by another gdn-cp version)";
  if (b.size() < 16) return "";
  const std::uint64_t hlen = read_u64(b.data() + 8);
  if (hlen > b.size() - 16) return "";
  const json h = json::parse(b.begin() + 16, b.begin() + 16 + std::ptrdiff_t(hlen), nullptr,
                             /*allow_exceptions=*/false);
  if (!h.is_object() || !h.contains("format") || !h["format"].is_number_integer()) return "";
  const int format = h["format"].get<int>();
  return format == kFormat ? "" : other_format(path, format);
}

}  // namespace

std::string to_entry_text(const CheckpointPart& part) {
  return part_entry(part).dump();
}

CheckpointPart part_from_entry_text(const std::string& text) {
  try {
    return part_from_entry(json::parse(text));
  } catch (const json::exception& e) {
    throw_error("a checkpoint part's entry is malformed: ", e.what());
  }
}

template <typename T>
CheckpointPart write_checkpoint_part(const std::string& dir, std::int64_t step, int rank,
                                     const std::vector<ParamInfo>& params,
                                     const std::vector<GlobalRun>& runs, const T* values,
                                     const T* m, const T* v) {
  const T* const kinds[3] = {values, m, v};
  // A non-finite value would poison every run resumed from it: refuse to write one.
  for (int k = 0; k < 3; ++k)
    for (const GlobalRun& r : runs)
      for (std::int64_t i = 0; i < r.n; ++i)
        GDN_CHECK(std::isfinite(double(kinds[k][r.at + i])),
                  "refusing to write a checkpoint at step ", step, ": ",
                  k == 0 ? "parameter" : "AdamW moment of", " '",
                  param_at(params, r.global + i).name, "' holds a non-finite value");
  std::error_code ec;
  fs::create_directories(dir, ec);
  GDN_CHECK(!ec, "cannot create checkpoint directory '", dir, "': ", ec.message());

  CheckpointPart part;
  part.file = file_name(step) + part_suffix(rank);
  std::int64_t at = 0;
  for (const GlobalRun& r : runs) part.runs.push_back({r.global, at, r.n}), at += r.n;
  const std::string text = json{
      {"format", kFormat},
      {"kind", "part"},
      {"step", step},
      {"rank", rank},
      {"dtype", dtype_name(dtype_of<T>())},
      {"runs",
       runs_json(runs)}}.dump();
  const std::string path = (fs::path(dir) / part.file).string();
  std::tie(part.bytes, part.checksum) =
      write_checkpoint_file(path, path + ".tmp", text, [&](HashingWriter& w) {
        for (const T* x : kinds)
          for (const GlobalRun& r : runs) w.write(x + r.at, std::size_t(r.n) * sizeof(T));
      });
  return part;
}

void write_checkpoint_manifest(const std::string& dir, const TrainingState& state, DType dtype,
                               const std::vector<ParamInfo>& params,
                               const std::vector<CheckpointPart>& parts) {
  const std::string path = checkpoint_path(dir, state.step);
  cover("save_checkpoint: the checkpoint at step " + std::to_string(state.step), parts,
        total_of(params));
  json table = json::array(), list = json::array();
  for (const ParamInfo& p : params) table.push_back({{"name", p.name}, {"shape", p.shape}});
  for (const CheckpointPart& p : parts) list.push_back(part_entry(p));
  const std::string text = json{
      {"format", kFormat},
      {"kind", "manifest"},
      {"step", state.step},
      {"dtype", dtype_name(dtype)},
      {"config_json", state.config_json},
      {"params", table},
      {"parts", list}}.dump();
  write_checkpoint_file(path, (fs::path(dir) / file_name(state.step, true)).string(), text,
                        [](HashingWriter&) {});
  // Parts of an earlier save of this step that this one did not replace (more ranks).
  for (const fs::path& f : part_files(path)) {
    const std::string name = f.filename().string();
    if (std::none_of(parts.begin(), parts.end(),
                     [&](const CheckpointPart& p) { return p.file == name; })) {
      std::error_code ec;
      fs::remove(f, ec);
    }
  }
}

template <typename T>
TrainingState load_checkpoint(const std::string& path, const std::vector<ParamInfo>& params,
                              const std::vector<GlobalRun>& want, T* values, T* m, T* v) {
  const std::vector<char> bytes = read_file(path);
  const Manifest man = parse_manifest(path, verify(path, bytes, "manifest"));
  check_params(path, man, params);
  const std::vector<Piece> pieces = cover("checkpoint '" + path + "'", man.parts, total_of(params));
  // Staged first, so a bad part leaves the outputs untouched.
  std::int64_t staged_n = 0;
  for (const GlobalRun& r : want) {
    GDN_CHECK(r.n >= 0 && r.global >= 0 && r.global + r.n <= total_of(params),
              "load_checkpoint: asked for elements [", r.global, ", ", r.global + r.n,
              ") of a model of ", total_of(params));
    staged_n += r.n;
  }
  std::vector<T> staged[3];
  for (std::vector<T>& s : staged) s.resize(std::size_t(staged_n));
  std::map<std::size_t, LoadedPart> loaded;  // each part read once, only when needed
  std::int64_t base = 0;
  for (const GlobalRun& r : want) {
    if (r.n == 0) continue;
    auto it = std::upper_bound(pieces.begin(), pieces.end(), r.global,
                               [](std::int64_t g, const Piece& p) { return g < p.global; });
    for (--it; it != pieces.end() && it->global < r.global + r.n; ++it) {
      const std::int64_t lo = std::max(r.global, it->global);
      const std::int64_t hi = std::min(r.global + r.n, it->global + it->n);
      if (hi <= lo) continue;
      auto l = loaded.find(it->part);
      if (l == loaded.end())
        l = loaded.emplace(it->part, load_part(path, man, man.parts[it->part])).first;
      const LoadedPart& lp = l->second;
      const std::size_t es = dtype_size(lp.dtype);
      for (int k = 0; k < 3; ++k) {
        T* dst = staged[k].data() + (base + lo - r.global);
        for_each_stored(
            lp.bytes, lp.p.data_begin + std::size_t(k * lp.n + it->at + lo - it->global) * es,
            std::size_t(hi - lo), lp.dtype, [&](std::size_t i, double x) { dst[i] = T(x); });
      }
    }
    base += r.n;
  }
  base = 0;
  for (const GlobalRun& r : want) {
    T* const out[3] = {values, m, v};
    for (int k = 0; k < 3; ++k) std::copy_n(staged[k].begin() + base, r.n, out[k] + r.at);
    base += r.n;
  }
  return man.state;
}

template <typename T>
void save_checkpoint(const std::string& dir, const TrainingState& state,
                     const std::vector<ParamInfo>& params, const CheckpointData<T>& d) {
  const std::int64_t n = total_of(params);
  GDN_CHECK(std::int64_t(d.values.size()) == n && std::int64_t(d.m.size()) == n &&
                std::int64_t(d.v.size()) == n,
            "save_checkpoint: ", d.values.size(), " values and ", d.m.size(), " + ", d.v.size(),
            " moments for a model of ", n, " parameter elements");
  const std::vector<GlobalRun> all{{0, 0, n}};
  const CheckpointPart part = write_checkpoint_part(dir, state.step, 0, params, all,
                                                    d.values.data(), d.m.data(), d.v.data());
  write_checkpoint_manifest(dir, state, dtype_of<T>(), params, {part});
}

template <typename T>
TrainingState load_checkpoint(const std::string& path, const std::vector<ParamInfo>& params,
                              CheckpointData<T>& out) {
  const std::int64_t n = total_of(params);
  CheckpointData<T> d{std::vector<T>(std::size_t(n)), std::vector<T>(std::size_t(n)),
                      std::vector<T>(std::size_t(n))};
  const TrainingState s =
      load_checkpoint(path, params, {{0, 0, n}}, d.values.data(), d.m.data(), d.v.data());
  out = std::move(d);
  return s;
}

std::string checkpoint_path(const std::string& dir, std::int64_t step) {
  return (fs::path(dir) / file_name(step)).string();
}

std::vector<CheckpointFile> scan_checkpoints(const std::string& dir) {
  std::vector<CheckpointFile> out;
  for (const auto& [step, path] : manifest_files(dir)) {
    CheckpointFile& f = out.emplace_back();
    f.step = step;
    f.path = path;
    try {
      const std::vector<char> bytes = read_file(path);
      f.gdn = bytes.size() >= 8 && std::memcmp(bytes.data(), kMagic, 8) == 0;
      const std::string foreign = foreign_reason(path, bytes);
      f.foreign = !foreign.empty();
      GDN_CHECK(!f.foreign, foreign);
      const Manifest m = parse_manifest(path, verify(path, bytes, "manifest"));
      const std::string missing = missing_part(path, m);
      GDN_CHECK(missing.empty(), "checkpoint '", path, "' is incomplete: ", missing);
      f.state = m.state;
    } catch (const Error& e) {
      f.problem = e.what();
    }
  }
  return out;
}

std::optional<std::string> latest_checkpoint(const std::string& dir, bool warn) {
  for (const CheckpointFile& f : scan_checkpoints(dir)) {
    if (f.problem.empty()) return f.path;
    if (warn) spdlog::warn("skipping checkpoint {}: {}", f.path, f.problem);
  }
  return std::nullopt;
}

std::string remove_checkpoint(const std::string& manifest) {
  std::error_code ec;
  fs::remove(manifest, ec);
  if (ec) return ec.message();
  for (const fs::path& f : part_files(manifest)) {
    fs::remove(f, ec);
    if (ec) return "'" + f.string() + "': " + ec.message();
  }
  return "";
}

int remove_checkpoint_temporaries(const std::string& dir) {
  static const std::regex temporary(R"((\.ckpt-[0-9]+\.bin|ckpt-[0-9]+\.bin\.part-[0-9]+)\.tmp)");
  int n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!std::regex_match(e.path().filename().string(), temporary) || !e.is_regular_file(ec))
      continue;
    if (fs::remove(e.path(), ec)) ++n;
  }
  return n;
}

void check_checkpoint_dir(const std::string& dir) {
  require_writable_dir(dir, "checkpoint directory");
}

#define GDN_CHECKPOINT_INSTANTIATE(T)                                                          \
  template CheckpointPart write_checkpoint_part<T>(                                            \
      const std::string&, std::int64_t, int, const std::vector<ParamInfo>&,                    \
      const std::vector<GlobalRun>&, const T*, const T*, const T*);                            \
  template TrainingState load_checkpoint<T>(const std::string&, const std::vector<ParamInfo>&, \
                                            const std::vector<GlobalRun>&, T*, T*, T*);        \
  template void save_checkpoint<T>(const std::string&, const TrainingState&,                   \
                                   const std::vector<ParamInfo>&, const CheckpointData<T>&);   \
  template TrainingState load_checkpoint<T>(const std::string&, const std::vector<ParamInfo>&, \
                                            CheckpointData<T>&);
GDN_CHECKPOINT_INSTANTIATE(float)
GDN_CHECKPOINT_INSTANTIATE(double)
#undef GDN_CHECKPOINT_INSTANTIATE

}  // namespace gdn
