// The one table every benchmark prints (gdn_bench, gdn_split_bench, gdn_attn_bench and,
// through gdn_bench_table, scripts/bench_cp_exchange.sh), after nccl-tests: two header
// lines starting with '#', the column names and their units, then one row per
// measurement in fixed-width, right-aligned columns. The last two columns are the
// correctness check of the row, as nccl-tests' #wrong: `error`, the row's error against a
// reference the benchmark computes independently (the largest rel_l2_error below of the
// row's outputs, unless the benchmark's notes say otherwise), and `check`, "ok" within the row's
// tolerance, "WRONG" beyond it or when the error is not finite, "-" where the row has no output of
// its own to check (the benchmark's footnote says which). finish() prints the count of wrong rows;
// a benchmark exits 1 when there is one.
#pragma once

#include <cmath>
#include <cstddef>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

namespace gdn::app {

struct BenchColumn {
  std::string name, unit;  // unit "" prints nothing under the name
  int width = 10;
};

// A row's correctness: its error against the reference and the largest accepted. The
// default (NaN) is a row with nothing of its own to check.
struct BenchCheck {
  double error = std::numeric_limits<double>::quiet_NaN();
  double tol = 0;
  bool checked() const { return !std::isnan(error) || tol < 0; }
};
// An unchecked row, and a check that failed to run (printed as WRONG).
inline BenchCheck unchecked() {
  return {};
}
inline BenchCheck failed_check() {
  return {std::numeric_limits<double>::quiet_NaN(), -1};
}

class BenchTable {
 public:
  // `columns`: the measurement's columns; error (its unit `error_unit`) and check are
  // added after them.
  explicit BenchTable(std::vector<BenchColumn> columns, std::string error_unit = "(rel L2)",
                      std::ostream& out = std::cout);
  void header() const;
  // cells.size() == columns.size(); a cell wider than its column widens that row only.
  void row(const std::vector<std::string>& cells, const BenchCheck& check);
  // "# <n> rows, <w> wrong" (and a note per footnote line given); returns w.
  int finish(const std::vector<std::string>& notes = {}) const;
  // finish(), then the benchmark's exit status: 1 when a row is wrong, else 0.
  int exit_status(const std::vector<std::string>& notes = {}) const {
    return finish(notes) > 0 ? 1 : 0;
  }
  int wrong() const { return wrong_; }

 private:
  std::vector<BenchColumn> columns_;
  std::ostream& out_;
  int rows_ = 0, wrong_ = 0;
};

// Fixed-point and scientific cells ("-" for NaN).
std::string fixed(double v, int decimals);
std::string sci(double v, int digits = 1);

// ||got - ref|| / ||ref|| (as gdn_npy_diff and the tests measure): 0 when both are zero;
// infinite when ref is zero and got is not, or when got holds a NaN or an Inf.
template <typename A, typename B>
double rel_l2_error(const A* got, const B* ref, std::size_t n) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double g = double(got[i]), r = double(ref[i]);
    if (!std::isfinite(g)) return std::numeric_limits<double>::infinity();
    diff += (g - r) * (g - r);
    norm += r * r;
  }
  if (diff == 0) return 0;
  return norm > 0 ? std::sqrt(diff / norm) : std::numeric_limits<double>::infinity();
}
template <typename A, typename B>
double rel_l2_error(const std::vector<A>& got, const std::vector<B>& ref) {
  return got.size() == ref.size() ? rel_l2_error(got.data(), ref.data(), got.size())
                                  : std::numeric_limits<double>::infinity();
}

}  // namespace gdn::app
