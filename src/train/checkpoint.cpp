// File layout (all integers little-endian):
//   "GDNCKPT1" | u64 header length | JSON header | tensor data | u64 FNV-1a-64 of all
//   bytes before it | "GDNCKEND"
// The header lists every tensor (name, kind param|m|v, shape, byte offset into the data).
#include "train/checkpoint.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/error.h"

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

// Writes to a file descriptor while hashing what it writes.
class HashingWriter {
 public:
  HashingWriter(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  void write(const void* p, std::size_t n, bool hash = true) {
    if (hash) fnv_.add(p, n);
    const char* c = static_cast<const char*>(p);
    while (n > 0) {
      const ssize_t w = ::write(fd_, c, n);
      if (w < 0 && errno == EINTR) continue;
      GDN_CHECK(w > 0, "cannot write checkpoint '", path_, "': ", sys_error());
      c += w;
      n -= std::size_t(w);
    }
  }
  std::uint64_t hash() const { return fnv_.h; }

 private:
  int fd_;
  std::string path_;
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

// Makes a rename durable. The file itself is complete by now, so a file system that cannot
// fsync directories only gets a warning.
void fsync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  const int rc = fd >= 0 ? ::fsync(fd) : -1;
  if (rc != 0) spdlog::warn("cannot fsync checkpoint directory {}: {}", dir, sys_error());
  if (fd >= 0) ::close(fd);
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

template <typename T>
void append_tensor(json& list, std::uint64_t& offset, const std::string& name, const char* kind,
                   const Tensor<T>& t) {
  list.push_back({{"name", name}, {"kind", kind}, {"shape", t.shape}, {"offset", offset}});
  offset += std::uint64_t(t.size()) * sizeof(T);
}

// Copies one stored tensor into dst, converting from the file's element type.
template <typename T>
void read_tensor(const std::string& path, const Parsed& p, const json& entry, DType file_type,
                 const std::vector<char>& b, Tensor<T>& dst) {
  const std::size_t esize = dtype_size(file_type);
  const std::uint64_t offset = entry.at("offset").get<std::uint64_t>();
  const std::size_t n = std::size_t(dst.size());
  GDN_CHECK(offset <= p.data_end - p.data_begin && n * esize <= p.data_end - p.data_begin - offset,
            "checkpoint '", path, "': tensor '", entry.at("name").get<std::string>(), "' (",
            entry.at("kind").get<std::string>(), ") lies beyond the data section");
  const char* src = b.data() + p.data_begin + offset;
  if (file_type == DType::f32) {
    for (std::size_t i = 0; i < n; ++i) {
      float x;
      std::memcpy(&x, src + i * 4, 4);
      dst.data[i] = T(x);
    }
  } else {
    for (std::size_t i = 0; i < n; ++i) {
      double x;
      std::memcpy(&x, src + i * 8, 8);
      dst.data[i] = T(x);
    }
  }
}

}  // namespace

template <typename T>
void save_checkpoint(const std::string& dir, const TrainingState& state,
                     const ParamStore<T>& params, const AdamW<T>& opt) {
  GDN_CHECK(opt.m().size() == params.size() && opt.v().size() == params.size(),
            "AdamW holds moments for ", opt.m().size(), " parameters, the model has ",
            params.size());
  std::error_code ec;
  fs::create_directories(dir, ec);
  GDN_CHECK(!ec, "cannot create checkpoint directory '", dir, "': ", ec.message());

  json tensors = json::array();
  std::uint64_t offset = 0;
  for (std::size_t i = 0; i < params.size(); ++i) {
    append_tensor(tensors, offset, params[i].name, "param", params[i].value);
    append_tensor(tensors, offset, params[i].name, "m", opt.m()[i]);
    append_tensor(tensors, offset, params[i].name, "v", opt.v()[i]);
  }
  const json header = {{"format", 1},
                       {"step", state.step},
                       {"rng_state", state.rng_state},
                       {"dtype", dtype_name(dtype_of<T>())},
                       {"config_json", state.config_json},
                       {"data_bytes", offset},
                       {"tensors", tensors}};
  const std::string text = header.dump();

  const std::string final_path = (fs::path(dir) / file_name(state.step)).string();
  const std::string tmp_path = (fs::path(dir) / file_name(state.step, true)).string();
  int fd = ::open(tmp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  GDN_CHECK(fd >= 0, "cannot create checkpoint '", tmp_path, "': ", sys_error());
  try {
    HashingWriter w(fd, tmp_path);
    w.write(kMagic, 8);
    const std::uint64_t hlen = text.size();
    w.write(&hlen, 8);
    w.write(text.data(), text.size());
    for (std::size_t i = 0; i < params.size(); ++i)
      for (const Tensor<T>* t : {&params[i].value, &opt.m()[i], &opt.v()[i]})
        w.write(t->ptr(), std::size_t(t->size()) * sizeof(T));
    const std::uint64_t sum = w.hash();
    w.write(&sum, 8, false);
    w.write(kEndMagic, 8, false);
    // The data must be on disk before the rename makes the file visible.
    GDN_CHECK(::fsync(fd) == 0, "cannot fsync checkpoint '", tmp_path, "': ", sys_error());
    const int rc = ::close(fd);
    fd = -1;
    GDN_CHECK(rc == 0, "cannot close checkpoint '", tmp_path, "': ", sys_error());
  } catch (...) {
    if (fd >= 0) ::close(fd);
    ::unlink(tmp_path.c_str());
    throw;
  }
  if (::rename(tmp_path.c_str(), final_path.c_str()) != 0) {
    const std::string err = sys_error();
    ::unlink(tmp_path.c_str());
    throw_error("cannot rename checkpoint '", tmp_path, "' to '", final_path, "': ", err);
  }
  fsync_dir(dir);
}

std::optional<std::string> latest_checkpoint(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return std::nullopt;
  std::vector<std::pair<std::int64_t, std::string>> found;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::int64_t step = step_of(e.path().filename().string());
    if (step >= 0 && e.is_regular_file(ec)) found.emplace_back(step, e.path().string());
  }
  std::sort(found.begin(), found.end(), std::greater<>());
  for (const auto& [step, path] : found) {
    try {
      verify(path, read_file(path));
      return path;
    } catch (const Error& e) {
      spdlog::warn("skipping checkpoint {}: {}", path, e.what());
    }
  }
  return std::nullopt;
}

template <typename T>
TrainingState load_checkpoint(const std::string& path, ParamStore<T>& params, AdamW<T>& opt) {
  const std::vector<char> bytes = read_file(path);
  const Parsed p = verify(path, bytes);
  TrainingState state;
  // Everything is checked before the first value is written: a bad file changes nothing.
  std::vector<const json*> entries(params.size() * 3);
  DType file_type{};
  try {
    const json& h = p.header;
    const std::string dt = h.at("dtype").get<std::string>();
    GDN_CHECK(dt == "f32" || dt == "f64", "checkpoint '", path, "' has dtype '", dt,
              "': expected f32 or f64");
    file_type = dt == "f32" ? DType::f32 : DType::f64;
    state.step = h.at("step").get<std::int64_t>();
    state.rng_state = h.at("rng_state").get<std::uint64_t>();
    state.config_json = h.at("config_json").get<std::string>();

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
      GDN_CHECK(shape == params[i].value.shape, "checkpoint '", path, "': parameter '", name, "' (",
                kind, ") has shape ", shape_str(shape), ", the model's is ",
                shape_str(params[i].value.shape));
      entries[i * 3 + k] = &e;
    }
    for (std::size_t i = 0; i < params.size(); ++i)
      GDN_CHECK(entries[i * 3] && entries[i * 3 + 1] && entries[i * 3 + 2], "checkpoint '", path,
                "' has no complete entry (param, m, v) for parameter '", params[i].name,
                "' (it holds ", np, " parameters, the model has ", params.size(), ")");
  } catch (const json::exception& e) {
    throw_error("checkpoint '", path, "' has a malformed header: ", e.what());
  }
  GDN_CHECK(opt.m().size() == params.size() && opt.v().size() == params.size(),
            "AdamW holds moments for ", opt.m().size(), " parameters, the model has ",
            params.size());
  // Reads into copies first, so an out-of-range offset leaves the model untouched.
  std::vector<Tensor<T>> staged;
  staged.reserve(entries.size());
  for (std::size_t i = 0; i < params.size(); ++i)
    for (int k = 0; k < 3; ++k) {
      staged.emplace_back(params[i].value.shape);
      read_tensor(path, p, *entries[i * 3 + k], file_type, bytes, staged.back());
    }
  for (std::size_t i = 0; i < params.size(); ++i) {
    params[i].value.data.swap(staged[i * 3].data);
    opt.m()[i].data.swap(staged[i * 3 + 1].data);
    opt.v()[i].data.swap(staged[i * 3 + 2].data);
  }
  return state;
}

template void save_checkpoint<float>(const std::string&, const TrainingState&,
                                     const ParamStore<float>&, const AdamW<float>&);
template void save_checkpoint<double>(const std::string&, const TrainingState&,
                                      const ParamStore<double>&, const AdamW<double>&);
template TrainingState load_checkpoint<float>(const std::string&, ParamStore<float>&,
                                              AdamW<float>&);
template TrainingState load_checkpoint<double>(const std::string&, ParamStore<double>&,
                                               AdamW<double>&);

}  // namespace gdn
