#include "train/run_paths.h"

#include <sys/stat.h>

#include <filesystem>
#include <optional>

#include "core/error.h"
#include "train/data.h"
#include "train/run_lock.h"

namespace gdn {

namespace {

namespace fs = std::filesystem;

// The path resolved as far as it exists (links, ".", ".."), absolute.
fs::path resolved(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  if (!p.has_filename()) p = p.parent_path();
  return p;
}

struct Id {
  dev_t dev;
  ino_t ino;
  bool operator==(const Id&) const = default;
};
std::optional<Id> file_id(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return Id{st.st_dev, st.st_ino};
}

bool same_file(const std::string& a, const std::string& b) {
  const std::optional<Id> x = file_id(a), y = file_id(b);
  if (x && y) return *x == *y;
  return resolved(a) == resolved(b);
}

// Whether `inner` is `outer` or lies inside it.
bool within(const fs::path& inner, const fs::path& outer) {
  auto i = inner.begin();
  for (auto o = outer.begin(); o != outer.end(); ++o, ++i)
    if (i == inner.end() || *i != *o) return false;
  return true;
}

// An input folder stands for the regular files in it (an HF checkpoint's).
std::vector<RunPath> input_files(const std::vector<RunPath>& inputs) {
  std::vector<RunPath> out;
  for (const RunPath& in : inputs) {
    std::error_code ec;
    if (!fs::is_directory(in.path, ec)) {
      out.push_back(in);
      continue;
    }
    for (const fs::directory_entry& e : fs::directory_iterator(in.path, ec))
      if (e.is_regular_file(ec)) out.push_back({in.flag, e.path().string()});
  }
  return out;
}

// The checkpoint directory of another live run that holds `path`, with its holder.
std::optional<std::pair<fs::path, std::string>> other_run_dir(const fs::path& path,
                                                              const fs::path& own, double stale_s) {
  for (fs::path dir = path; !dir.empty(); dir = dir.parent_path()) {
    if (!own.empty() && dir == own) return std::nullopt;  // ours: what is inside is ours
    const std::string holder =
        RunLock::live_holder(RunLock::checkpoint_dir_lock(dir.string()), stale_s);
    if (!holder.empty()) return std::make_pair(dir, holder);
    if (dir == dir.root_path()) break;
  }
  return std::nullopt;
}

}  // namespace

std::vector<std::string> data_files(const std::string& data) {
  if (data == "synthetic" || data.empty()) return {};
  if (!is_indexed_dataset(data)) return {data};
  const fs::path prefix = fs::path(data).replace_extension();
  return {prefix.string() + ".bin", prefix.string() + ".idx"};
}

void check_run_paths(const RunPaths& p, double stale_s) {
  const std::vector<RunPath> inputs = input_files(p.inputs);
  for (const RunPath& out : p.outputs)
    for (const RunPath& in : inputs)
      GDN_CHECK(!file_id(in.path) || !same_file(out.path, in.path), out.flag, " '", out.path,
                "' is the ", in.flag, " file '", in.path,
                "': the run would write over its own input. Pass another ", out.flag);
  for (std::size_t i = 0; i < p.outputs.size(); ++i)
    for (std::size_t j = i + 1; j < p.outputs.size(); ++j)
      GDN_CHECK(!same_file(p.outputs[i].path, p.outputs[j].path), p.outputs[i].flag, " '",
                p.outputs[i].path, "' and ", p.outputs[j].flag, " '", p.outputs[j].path,
                "' are one file: each output needs its own");
  const fs::path own = p.checkpoint_dir.empty() ? fs::path() : resolved(p.checkpoint_dir);
  for (const RunPath& r : p.replaced) {
    const fs::path dir = resolved(r.path);
    auto refuse_inside = [&](const RunPath& x, const char* what) {
      GDN_CHECK(!within(resolved(x.path), dir), r.flag, " '", r.path, "' holds the ", x.flag, " ",
                what, " '", x.path, "': ", r.flag,
                " replaces that folder whole at the end. Pass a folder of its own");
    };
    for (const RunPath& in : p.inputs) refuse_inside(in, "input");
    for (const RunPath& out : p.outputs) refuse_inside(out, "output");
    if (!own.empty()) refuse_inside({"--checkpoint-dir", p.checkpoint_dir}, "folder");
  }
  std::vector<RunPath> written = p.outputs;
  written.insert(written.end(), p.replaced.begin(), p.replaced.end());
  for (const RunPath& w : written)
    if (const auto other = other_run_dir(resolved(w.path), own, stale_s))
      throw_error(w.flag, " '", w.path, "' lies inside checkpoint directory '",
                  other->first.string(), "' of another run (", other->second,
                  "), which holds its lock: writing there would mix that run's files with "
                  "this run's. Pass a path outside it");
}

}  // namespace gdn
