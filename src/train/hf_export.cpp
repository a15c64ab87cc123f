#include "train/hf_export.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>

#include "comm/call_sites.h"
#include "core/atomic_file.h"
#include "core/bf16.h"
#include "core/error.h"
#include "core/safetensors.h"
#include "core/writable_dir.h"
#include "model/hf_weights.h"

namespace gdn {

std::vector<std::vector<std::size_t>> hf_export_files(const std::vector<std::int64_t>& tensor_bytes,
                                                      std::int64_t max_bytes) {
  std::vector<std::vector<std::size_t>> files(1);
  std::int64_t in_file = 0;
  for (std::size_t t = 0; t < tensor_bytes.size(); ++t) {
    if (!files.back().empty() && in_file + tensor_bytes[t] > max_bytes) {
      files.emplace_back();
      in_file = 0;
    }
    files.back().push_back(t);
    in_file += tensor_bytes[t];
  }
  return files;
}

namespace {

// The values of one file as `dtype`'s bytes (f32, f64 or bf16), little-endian.
template <typename T>
std::vector<char> file_bytes(const std::vector<T>& data, DType dtype) {
  std::vector<char> out(data.size() * dtype_size(dtype));
  auto fill = [&](auto tag, auto convert) {
    using E = decltype(tag);
    E* dst = reinterpret_cast<E*>(out.data());
    for (std::size_t i = 0; i < data.size(); ++i) dst[i] = convert(data[i]);
  };
  if (dtype == DType::bf16)
    fill(Bf16{}, [](T x) { return to_bf16(float(x)); });
  else if (dtype == DType::f32)
    fill(float{}, [](T x) { return float(x); });
  else
    fill(double{}, [](T x) { return double(x); });
  return out;
}

SafetensorsDtype safetensors_dtype(DType t) {
  return t == DType::bf16  ? SafetensorsDtype::BF16
         : t == DType::f32 ? SafetensorsDtype::F32
                           : SafetensorsDtype::F64;
}

const char* torch_dtype_name(DType t) {
  return t == DType::bf16 ? "bfloat16" : t == DType::f32 ? "float32" : "float64";
}

namespace fs = std::filesystem;

// The names an export writes.
bool is_export_file(const std::string& name) {
  static const std::regex shard(R"(model-[0-9]{5}-of-[0-9]{5}\.safetensors)");
  return name == "config.json" || name == "model.safetensors" ||
         name == "model.safetensors.index.json" || std::regex_match(name, shard);
}

// DIR as an absolute path through its links ("." and a link to a directory work: the
// directory they name is swapped, a link stays a link).
fs::path export_path(const std::string& dir) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(dir, ec), ec);
  if (!p.has_filename()) p = p.parent_path();
  return p;
}

// The regular files of dir an export does not write; the other entries it does not
// write go to `refused`.
std::vector<std::string> foreign_entries(const fs::path& dir, std::vector<std::string>* refused) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (is_export_file(name)) continue;
    if (e.is_regular_file(ec) && !e.is_symlink(ec))
      files.push_back(name);
    else if (refused)
      refused->push_back(name);
  }
  std::sort(files.begin(), files.end());
  return files;
}

void sync_dir(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  (void)::fsync(fd);
  ::close(fd);
}

// Puts the export written in `fresh` in place of dir (see the header), carrying dir's
// files that an export does not write.
void swap_in(const fs::path& fresh, const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    fs::rename(fresh, dir, ec);
    GDN_CHECK(!ec, "--export-hf: cannot move the export into '", dir.string(), "': ", ec.message());
    sync_dir(dir.parent_path());
    return;
  }
  std::vector<std::string> refused;
  const std::vector<std::string> carried = foreign_entries(dir, &refused);
  std::string list;
  for (const std::string& x : refused) list += (list.empty() ? "" : ", ") + x;
  GDN_CHECK(refused.empty(), "--export-hf: '", dir.string(), "' now holds entries an export does ",
            "not write and cannot carry over (", list, "); the new export is left in '",
            fresh.string(), "'");
  for (const std::string& name : carried) {
    const fs::path from = dir / name, to = fresh / name;
    if (::link(from.c_str(), to.c_str()) != 0) fs::copy_file(from, to, ec);
    GDN_CHECK(!ec, "--export-hf: cannot carry '", from.string(),
              "' into the new export: ", ec.message());
  }
  if (!carried.empty()) {
    std::string names;
    for (const std::string& x : carried) names += (names.empty() ? "" : ", ") + x;
    spdlog::warn(
        "--export-hf: {} holds files an export does not write, kept beside the new "
        "export: {}",
        dir.string(), names);
  }
  sync_dir(fresh);
  if (::renameat2(AT_FDCWD, fresh.c_str(), AT_FDCWD, dir.c_str(), RENAME_EXCHANGE) != 0) {
    const int err = errno;
    GDN_CHECK(err == EINVAL || err == ENOSYS || err == EOPNOTSUPP, "--export-hf: cannot swap '",
              fresh.string(), "' with '", dir.string(), "': ", std::strerror(err));
    // No exchange here: the old export aside, then the new one in, in two renames.
    const fs::path old = fs::path(fresh.string() + ".old");
    fs::rename(dir, old, ec);
    GDN_CHECK(!ec, "--export-hf: cannot move the old export '", dir.string(),
              "' aside: ", ec.message());
    fs::rename(fresh, dir, ec);
    GDN_CHECK(!ec, "--export-hf: cannot move the new export into '", dir.string(),
              "': ", ec.message(), " (the old one is in '", old.string(), "')");
    fs::remove_all(old, ec);
  } else {
    fs::remove_all(fresh, ec);  // the old export, now
  }
  sync_dir(dir.parent_path());
}

// Where this process writes the new export before it swaps it in: beside the target.
fs::path staging_path(const fs::path& target) {
  std::string hidden(".");  // appended, not "." + ...: GCC 12 warns there (-Wrestrict)
  hidden += target.filename().string();
  hidden += ".gdn-export-" + std::to_string(::getpid());
  return target.parent_path() / hidden;
}

// The longest name an export writes in its folder: a shard's, while it is written.
constexpr const char* kLongestFile = "model-00001-of-00001.safetensors.tmp";

// Creates and removes the folders the export makes (the staging folder, the old export's
// place where renameat2 cannot swap) and the longest file name in the staging folder.
void probe_export_names(const fs::path& target) {
  const fs::path fresh = staging_path(target), old = fs::path(fresh.string() + ".old");
  for (const fs::path& d : {fresh, old}) {
    std::error_code ec;
    fs::create_directory(d, ec);
    const std::string made = ec ? ec.message() : std::string();
    if (ec) fs::remove_all(fresh, ec);
    GDN_CHECK(made.empty(), "--export-hf '", target.string(), "': cannot create the folder '",
              d.string(), "' the export writes beside it (", made,
              "): pass a shorter name or another place");
  }
  const std::string file = (fresh / kLongestFile).string();
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const int err = errno;
  if (fd >= 0) ::close(fd);
  std::error_code ec;
  fs::remove_all(fresh, ec);
  fs::remove_all(old, ec);
  GDN_CHECK(fd >= 0, "--export-hf '", target.string(), "': cannot create the file '", file,
            "' the export writes (", std::strerror(err), "): pass a shorter path");
}

}  // namespace

void check_export_dir(const std::string& dir) {
  require_writable_dir(dir, "the --export-hf directory");
  const fs::path p = export_path(dir);
  require_writable_dir(p.parent_path().string(),
                       "the parent of the --export-hf directory (the new "
                       "export is written beside it, then swapped in)");
  probe_export_names(p);
  std::vector<std::string> refused;
  (void)foreign_entries(p, &refused);
  std::string list;
  for (const std::string& x : refused) list += (list.empty() ? "" : ", ") + x;
  GDN_CHECK(refused.empty(), "--export-hf '", dir, "' holds entries an export does not write (",
            list,
            "): the export replaces the directory as a whole and carries only plain files; "
            "move them or export to another directory");
}

template <typename T>
void write_hf_export(Communicator& comm, const std::string& dir, const ModelConfig& c,
                     const std::vector<ParamInfo>& whole, const std::vector<GlobalRun>& runs,
                     const T* values, std::int64_t max_bytes, DType file_dtype) {
  GDN_CHECK(max_bytes > 0, "--export-hf: the file size limit is ", max_bytes, " bytes");
  GDN_CHECK(file_dtype == DType::f32 || file_dtype == DType::f64 || file_dtype == DType::bf16,
            "--export-dtype ", dtype_name(file_dtype), ": expected f32, f64 or bf16");
  const std::int64_t es = std::int64_t(dtype_size(file_dtype));
  ModelConfig text = c;  // the text model only, under "model."
  text.multimodal = false;
  const bool root = comm.rank() == 0;
  // The new export is written beside dir, then swapped in whole.
  const fs::path target = export_path(dir);
  const fs::path fresh = staging_path(target);
  const std::string out = fresh.string();
  // A failed export leaves the previous one as it was, and nothing of its own.
  struct Discard {
    const fs::path& p;
    bool on;
    ~Discard() {
      std::error_code ec;
      if (on) fs::remove_all(p, ec);
    }
  } discard{fresh, root};
  // Rank 0's failure: the other ranks go on sending (every gather is collective) and all
  // learn of it at the end.
  std::string failure;
  auto on_root = [&](const auto& write) {
    if (!root || !failure.empty()) return;
    try {
      write();
    } catch (const std::exception& e) {
      failure = e.what();
    }
  };
  on_root([&] {
    std::error_code ec;
    fs::remove_all(fresh, ec);  // a crashed export's, with the same pid
    fs::create_directories(fresh, ec);
    GDN_CHECK(!ec, "--export-hf: cannot create directory '", out, "': ", ec.message());
    nlohmann::json config = to_json(text);
    config["dtype"] = torch_dtype_name(file_dtype);
    (void)write_file_atomically(out + "/config.json", config.dump(2) + "\n", "--export-hf");
  });
  const std::vector<HfTensorMap> maps = hf_tensor_maps(text, whole, false);
  std::vector<std::int64_t> bytes;
  for (const HfTensorMap& m : maps) bytes.push_back(numel(m.shape) * es);
  const std::vector<std::vector<std::size_t>> files = hf_export_files(bytes, max_bytes);
  const std::size_t n_files = files.size();
  auto file_name = [&](std::size_t f) {
    if (n_files == 1) return std::string("model.safetensors");
    char buf[64];
    std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", f + 1, n_files);
    return std::string(buf);
  };
  nlohmann::json weight_map = nlohmann::json::object();
  std::int64_t total = 0;
  for (std::size_t f = 0; f < n_files; ++f) {
    // This file's tensors back to back; each rank's elements of them, by where they go.
    std::vector<std::int64_t> base;
    std::int64_t size = 0;
    for (std::size_t t : files[f]) base.push_back(size), size += numel(maps[t].shape);
    std::vector<GlobalRun> mine;
    for (std::size_t i = 0; i < files[f].size(); ++i)
      for (const HfRun& h : maps[files[f][i]].runs)
        for (const GlobalRun& r : runs) {
          const std::int64_t lo = std::max(h.param, r.global);
          const std::int64_t hi = std::min(h.param + h.len, r.global + r.n);
          if (lo < hi)
            mine.push_back({base[i] + h.hf + (lo - h.param), r.at + (lo - r.global), hi - lo});
        }
    const std::vector<T> data =
        gather_runs<T>(comm, mine, {values}, size, train_sites::kExportGather)[0];
    on_root([&] {
      const std::vector<char> stored = file_bytes(data, file_dtype);
      std::vector<SafetensorsTensor> tensors;
      for (std::size_t i = 0; i < files[f].size(); ++i) {
        const HfTensorMap& m = maps[files[f][i]];
        tensors.emplace_back(m.name, safetensors_dtype(file_dtype), m.shape,
                             stored.data() + base[i] * es);
        weight_map[m.name] = file_name(f);
      }
      write_safetensors(out + "/" + file_name(f), tensors, {{"format", "pt"}});
      total += size * es;
    });
  }
  on_root([&] {
    if (n_files > 1) {
      const nlohmann::json index{{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
      (void)write_file_atomically(out + "/model.safetensors.index.json", index.dump(2) + "\n",
                                  "--export-hf");
    }
    discard.on = false;  // written whole: kept, and named, if the swap fails
    swap_in(fresh, target);
  });
  int failed = failure.empty() ? 0 : 1;
  comm.all_reduce_max(&failed, 1, train_sites::kExportGather);
  if (failed)
    throw_error(root ? failure : std::string("--export-hf: rank 0 could not write the export"));
}

template void write_hf_export<float>(Communicator&, const std::string&, const ModelConfig&,
                                     const std::vector<ParamInfo>&, const std::vector<GlobalRun>&,
                                     const float*, std::int64_t, DType);
template void write_hf_export<double>(Communicator&, const std::string&, const ModelConfig&,
                                      const std::vector<ParamInfo>&, const std::vector<GlobalRun>&,
                                      const double*, std::int64_t, DType);

}  // namespace gdn
