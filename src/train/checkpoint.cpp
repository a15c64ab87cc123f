// File layout (all integers little-endian):
//   "GDNCKPT1" | u64 header length | JSON header | tensor data | u64 FNV-1a-64 of all
//   bytes before it | "GDNCKEND"
// The header lists every tensor (name, kind param|m|v, shape, byte offset into the data),
// the step and the run's config.
#include "train/checkpoint.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/dtype.h"
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

// Writes to a file while hashing what it writes.
class HashingWriter {
 public:
  explicit HashingWriter(AtomicFile& file) : file_(file) {}
  void write(const void* p, std::size_t n, bool hash = true) {
    if (hash) fnv_.add(p, n);
    file_.write(p, n);
  }
  std::uint64_t hash() const { return fnv_.h; }

 private:
  AtomicFile& file_;
  Fnv1a fnv_;
};

// "ckpt-00000003.bin", or ".ckpt-00000003.bin.tmp" while it is written.
std::string file_name(std::int64_t step, bool tmp = false) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%sckpt-%08lld.bin%s", tmp ? "." : "",
                static_cast<long long>(step), tmp ? ".tmp" : "");
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

// A verified file: its header and where the tensor data starts.
struct Parsed {
  json header;
  std::size_t data_begin = 0, data_end = 0;
};

// Checks magic, length, checksum and end magic, then parses the header. Throws a message
// that says why the file is not a complete checkpoint.
Parsed verify(const std::string& path, const std::vector<char>& b) {
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
  } catch (const json::exception& e) {
    throw_error("checkpoint '", path, "' has a malformed header: ", e.what());
  }
  p.data_begin = 16 + hlen;
  p.data_end = body;
  return p;
}

void append_tensor(json& list, std::uint64_t& offset, const std::string& name, const char* kind,
                   const Shape& shape, std::size_t elem_bytes) {
  list.push_back({{"name", name}, {"kind", kind}, {"shape", shape}, {"offset", offset}});
  offset += std::uint64_t(numel(shape)) * elem_bytes;
}

// The element type of a verified file's tensors.
DType file_dtype(const std::string& path, const Parsed& p) {
  try {
    const std::string dt = p.header.at("dtype").get<std::string>();
    const std::optional<DType> t = enum_from_name<DType>(dt);
    GDN_CHECK(t == DType::f32 || t == DType::f64, "checkpoint '", path, "' has dtype '", dt,
              "': expected f32 or f64");
    return *t;
  } catch (const json::exception& e) {
    throw_error("checkpoint '", path, "' has a malformed header: ", e.what());
  }
}

// Element i of the data section as a double.
double data_at(const std::vector<char>& b, std::size_t at, DType t) {
  if (t == DType::f32) {
    float x;
    std::memcpy(&x, b.data() + at, 4);
    return x;
  }
  double x;
  std::memcpy(&x, b.data() + at, 8);
  return x;
}

// Throws unless every stored value is finite: a run that diverged must never be resumed
// from, so such a file counts as not a checkpoint.
void require_finite_data(const std::string& path, const Parsed& p, const std::vector<char>& b) {
  const DType t = file_dtype(path, p);
  const std::size_t es = dtype_size(t);
  for (std::size_t at = p.data_begin; at + es <= p.data_end; at += es)
    if (!std::isfinite(data_at(b, at, t)))
      throw_error("checkpoint '", path, "' holds a non-finite value (at data byte ",
                  at - p.data_begin, "): it was written by a run that diverged");
}

// Copies one stored tensor into dst (n elements), converting from the file's element type.
template <typename T>
void read_tensor(const std::string& path, const Parsed& p, const json& entry, DType file_type,
                 const std::vector<char>& b, std::size_t n, T* dst) {
  const std::size_t esize = dtype_size(file_type);
  const std::uint64_t offset = entry.at("offset").get<std::uint64_t>();
  GDN_CHECK(offset <= p.data_end - p.data_begin && n * esize <= p.data_end - p.data_begin - offset,
            "checkpoint '", path, "': tensor '", entry.at("name").get<std::string>(), "' (",
            entry.at("kind").get<std::string>(), ") lies beyond the data section");
  for (std::size_t i = 0; i < n; ++i)
    dst[i] = T(data_at(b, p.data_begin + offset + i * esize, file_type));
}

// The complete checkpoints of dir, newest first (steps and paths; not verified).
std::vector<std::pair<std::int64_t, std::string>> checkpoint_files(const std::string& dir) {
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

}  // namespace

template <typename T>
void save_checkpoint(const std::string& dir, const TrainingState& state,
                     const std::vector<ParamInfo>& params, const CheckpointData<T>& d) {
  const std::size_t n = params.empty() ? 0 : std::size_t(params.back().offset + params.back().size);
  GDN_CHECK(d.values.size() == n && d.m.size() == n && d.v.size() == n,
            "save_checkpoint: ", d.values.size(), " values and ", d.m.size(), " + ", d.v.size(),
            " moments for a model of ", n, " parameter elements");
  // A non-finite value would poison every run resumed from it: refuse to write one.
  for (const ParamInfo& p : params)
    for (const std::vector<T>* x : {&d.values, &d.m, &d.v})
      for (std::int64_t i = 0; i < p.size; ++i)
        GDN_CHECK(std::isfinite(double((*x)[std::size_t(p.offset + i)])),
                  "refusing to write a checkpoint at step ", state.step, ": ",
                  x == &d.values ? "parameter" : "AdamW moment of", " '", p.name,
                  "' holds a non-finite value");
  std::error_code ec;
  fs::create_directories(dir, ec);
  GDN_CHECK(!ec, "cannot create checkpoint directory '", dir, "': ", ec.message());

  json tensors = json::array();
  std::uint64_t offset = 0;
  for (const ParamInfo& p : params)
    for (const char* kind : {"param", "m", "v"})
      append_tensor(tensors, offset, p.name, kind, p.shape, sizeof(T));
  const json header = {{"format", 1},
                       {"step", state.step},
                       {"dtype", dtype_name(dtype_of<T>())},
                       {"config_json", state.config_json},
                       {"data_bytes", offset},
                       {"tensors", tensors}};
  const std::string text = header.dump();

  const std::string final_path = (fs::path(dir) / file_name(state.step)).string();
  const std::string tmp_path = (fs::path(dir) / file_name(state.step, true)).string();
  AtomicFile file(final_path, "save_checkpoint", tmp_path);
  HashingWriter w(file);
  w.write(kMagic, 8);
  const std::uint64_t hlen = text.size();
  w.write(&hlen, 8);
  w.write(text.data(), text.size());
  for (const ParamInfo& p : params)
    for (const std::vector<T>* x : {&d.values, &d.m, &d.v})
      w.write(x->data() + p.offset, std::size_t(p.size) * sizeof(T));
  const std::uint64_t sum = w.hash();
  w.write(&sum, 8, false);
  w.write(kEndMagic, 8, false);
  // The file is complete and in place; a directory that cannot be synced only gets a warning.
  const std::string unsynced = file.commit();
  if (!unsynced.empty()) spdlog::warn("checkpoint {}: {}", final_path, unsynced);
}

namespace {

// One file as latest_checkpoint and scan_checkpoints see it: complete, checksum right,
// finite values, a readable header; otherwise the reason in `problem`.
CheckpointFile inspect_checkpoint(std::int64_t step, const std::string& path) {
  CheckpointFile f;
  f.step = step;
  f.path = path;
  try {
    const std::vector<char> bytes = read_file(path);
    f.gdn = bytes.size() >= 8 && std::memcmp(bytes.data(), kMagic, 8) == 0;
    const Parsed p = verify(path, bytes);
    require_finite_data(path, p, bytes);
    f.state.dtype = file_dtype(path, p);
    try {
      f.state.step = p.header.at("step").get<std::int64_t>();
      f.state.config_json = p.header.at("config_json").get<std::string>();
    } catch (const json::exception& e) {
      throw_error("checkpoint '", path, "' has a malformed header: ", e.what());
    }
  } catch (const Error& e) {
    f.problem = e.what();
  }
  return f;
}

}  // namespace

std::optional<std::string> latest_checkpoint(const std::string& dir, bool warn) {
  for (const auto& [step, path] : checkpoint_files(dir)) {
    const CheckpointFile f = inspect_checkpoint(step, path);
    if (f.problem.empty()) return path;
    if (warn) spdlog::warn("skipping checkpoint {}: {}", path, f.problem);
  }
  return std::nullopt;
}

template <typename T>
TrainingState load_checkpoint(const std::string& path, const std::vector<ParamInfo>& params,
                              CheckpointData<T>& out) {
  const std::vector<char> bytes = read_file(path);
  const Parsed p = verify(path, bytes);
  require_finite_data(path, p, bytes);
  const DType file_type = file_dtype(path, p);
  TrainingState state;
  // Everything is checked before the first value is written: a bad file changes nothing.
  std::vector<const json*> entries(params.size() * 3);
  try {
    const json& h = p.header;
    state.step = h.at("step").get<std::int64_t>();
    state.config_json = h.at("config_json").get<std::string>();
    state.dtype = file_type;
    const json& list = h.at("tensors");
    std::size_t np = 0;
    for (const json& e : list) np += e.at("kind").get<std::string>() == "param";
    for (const json& e : list) {
      const std::string kind = e.at("kind").get<std::string>();
      const std::string name = e.at("name").get<std::string>();
      const int k = kind == "param" ? 0 : kind == "m" ? 1 : kind == "v" ? 2 : -1;
      GDN_CHECK(k >= 0, "checkpoint '", path, "': tensor '", name, "' has kind '", kind,
                "': expected param, m or v");
      // Parameters are matched by position, so the first difference is the one reported.
      std::size_t i = 0;
      while (i < params.size() && (entries[i * 3 + k] != nullptr)) ++i;
      GDN_CHECK(i < params.size(), "checkpoint '", path, "' holds ", np,
                " parameters, the model has ", params.size(), " (extra: '", name, "')");
      GDN_CHECK(name == params[i].name, "checkpoint '", path, "': parameter ", i, " is '", name,
                "', the model's is '", params[i].name, "'");
      const Shape shape = e.at("shape").get<Shape>();
      GDN_CHECK(shape == params[i].shape, "checkpoint '", path, "': parameter '", name, "' (", kind,
                ") has shape ", shape_str(shape), ", the model's is ", shape_str(params[i].shape));
      entries[i * 3 + k] = &e;
    }
    for (std::size_t i = 0; i < params.size(); ++i)
      GDN_CHECK(entries[i * 3] && entries[i * 3 + 1] && entries[i * 3 + 2], "checkpoint '", path,
                "' has no complete entry (param, m, v) for parameter '", params[i].name,
                "' (it holds ", np, " parameters, the model has ", params.size(), ")");
  } catch (const json::exception& e) {
    throw_error("checkpoint '", path, "' has a malformed header: ", e.what());
  }
  // Reads into copies first, so an out-of-range offset leaves `out` untouched.
  const std::size_t n = params.empty() ? 0 : std::size_t(params.back().offset + params.back().size);
  CheckpointData<T> staged{std::vector<T>(n), std::vector<T>(n), std::vector<T>(n)};
  for (std::size_t i = 0; i < params.size(); ++i) {
    std::vector<T>* dst[3] = {&staged.values, &staged.m, &staged.v};
    for (int k = 0; k < 3; ++k)
      read_tensor(path, p, *entries[i * 3 + k], file_type, bytes, std::size_t(params[i].size),
                  dst[k]->data() + params[i].offset);
  }
  out = std::move(staged);
  return state;
}

std::string checkpoint_path(const std::string& dir, std::int64_t step) {
  return (fs::path(dir) / file_name(step)).string();
}

std::vector<CheckpointFile> scan_checkpoints(const std::string& dir) {
  std::vector<CheckpointFile> out;
  for (const auto& [step, path] : checkpoint_files(dir))
    out.push_back(inspect_checkpoint(step, path));
  return out;
}

void check_checkpoint_dir(const std::string& dir) {
  require_writable_dir(dir, "checkpoint directory");
}

#define GDN_CHECKPOINT_INSTANTIATE(T)                                                          \
  template void save_checkpoint<T>(const std::string&, const TrainingState&,                   \
                                   const std::vector<ParamInfo>&, const CheckpointData<T>&);   \
  template TrainingState load_checkpoint<T>(const std::string&, const std::vector<ParamInfo>&, \
                                            CheckpointData<T>&);
GDN_CHECKPOINT_INSTANTIATE(float)
GDN_CHECKPOINT_INSTANTIATE(double)
#undef GDN_CHECKPOINT_INSTANTIATE

}  // namespace gdn
