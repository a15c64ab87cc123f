#include "gdn_kernel/output_set.h"

#include <filesystem>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/npy.h"

namespace fs = std::filesystem;

namespace gdn::kernel_app {

void make_output_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  GDN_CHECK(!ec && fs::is_directory(dir), "--out ", dir, ": cannot create the output directory",
            ec ? ": " + ec.message() : std::string(": it exists and is not a directory"));
}

OutputSet::OutputSet(std::string dir) : dir_(std::move(dir)) {
  make_output_dir(dir_);
  std::error_code ec;
  fs::remove(path("stats.json"), ec);
  GDN_CHECK(!ec, "--out ", dir_, ": cannot remove the previous stats.json: ", ec.message());
}

OutputSet::~OutputSet() {
  if (committed_) return;
  for (const std::string& p : written_) {
    std::error_code ec;
    fs::remove(p, ec);  // best effort: the run is failing already
  }
}

std::string OutputSet::path(const std::string& file) const {
  return (fs::path(dir_) / file).string();
}

template <typename T>
void OutputSet::npy(const std::string& name, const Tensor<T>& t) {
  const std::string p = path(name + ".npy");
  write_npy<T>(p, t);  // temporary, every write and the close checked, then rename
  written_.push_back(p);
}

void OutputSet::commit(const std::string& stats_json) {
  try {
    (void)write_file_atomically(path("stats.json"), stats_json, "--out " + dir_);
  } catch (const Error& e) {
    throw_error(e.what(), "; the outputs of this run were removed");
  }
  committed_ = true;
}

template void OutputSet::npy<float>(const std::string&, const Tensor<float>&);
template void OutputSet::npy<double>(const std::string&, const Tensor<double>&);

}  // namespace gdn::kernel_app
