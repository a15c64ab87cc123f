// gdn_kernel's outputs are a set: o.npy, ht.npy, the gradients, and stats.json, which is
// written last and marks the set complete. An OutputSet makes the set all-or-nothing: it
// first removes the directory's stats.json (so an older set no longer looks complete),
// writes each file as a temporary that is checked and renamed into place, and, unless
// commit() was reached, removes every file it wrote when it goes away. A failed run
// (a full disk, say) leaves no mixture of new files and a stale stats.json. Rank 0 only.
#pragma once

#include <string>
#include <vector>

#include "core/tensor.h"

namespace gdn::kernel_app {

class OutputSet {
 public:
  // Creates dir if missing; removes dir/stats.json. Throws gdn::Error with the OS's reason.
  explicit OutputSet(std::string dir);
  ~OutputSet();
  OutputSet(const OutputSet&) = delete;
  OutputSet& operator=(const OutputSet&) = delete;

  template <typename T>
  void npy(const std::string& name, const Tensor<T>& t);  // dir/name.npy
  // dir/stats.json, then the set is complete.
  void commit(const std::string& stats_json);

 private:
  std::string path(const std::string& file) const;
  std::string dir_;
  std::vector<std::string> written_;
  bool committed_ = false;
};

// Creates dir if it is missing; throws gdn::Error naming it and the OS's reason.
void make_output_dir(const std::string& dir);

}  // namespace gdn::kernel_app
