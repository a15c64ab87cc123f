// gdn_npy_diff: compares the .npy files two directories have in common, e.g. the outputs
// of a 1-rank and a 4-rank gdn_kernel run, and prints one parity line per file:
//   name  max_abs  rel_l2        (rel_l2 = ||a - b|| / ||b||)
// Exits 1 when a shape differs, a value is not finite, or rel_l2 exceeds --tol.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <cxxopts.hpp>
#include <filesystem>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/npy.h"

namespace fs = std::filesystem;
using namespace gdn;

namespace {

// Any supported element type, widened to double (i64 beyond 2^53 loses bits; fine here).
std::vector<double> as_doubles(const NpyArray& a) {
  const std::size_t n = static_cast<std::size_t>(numel(a.shape));
  std::vector<double> out(n);
  auto load = [&](auto tag) {
    using E = decltype(tag);
    for (std::size_t i = 0; i < n; ++i) {
      E x;
      std::memcpy(&x, a.bytes.data() + i * sizeof(E), sizeof(E));
      out[i] = static_cast<double>(x);
    }
  };
  switch (a.dtype) {
    case DType::f32:
      load(float{});
      break;
    case DType::f64:
      load(double{});
      break;
    case DType::i32:
      load(std::int32_t{});
      break;
    case DType::i64:
      load(std::int64_t{});
      break;
    case DType::bf16:  // numpy has no bf16: read_npy never makes one
      throw_error("bf16 .npy data is not supported");
  }
  return out;
}

std::set<std::string> npy_names(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ".npy") out.insert(e.path().stem().string());
  return out;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos <= s.size()) {
    std::size_t end = std::min(s.find(',', pos), s.size());
    if (end > pos) out.push_back(s.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

// Prints one line; returns true when the pair is within tolerance.
bool compare(const fs::path& a_dir, const fs::path& b_dir, const std::string& name, double tol) {
  for (const auto& dir : {a_dir, b_dir})
    if (!fs::exists(dir / (name + ".npy"))) {
      std::printf("%-10s missing in %s  FAIL\n", name.c_str(), dir.string().c_str());
      return false;
    }
  const NpyArray a = read_npy((a_dir / (name + ".npy")).string());
  const NpyArray b = read_npy((b_dir / (name + ".npy")).string());
  if (a.shape != b.shape) {
    std::printf("%-10s shapes differ: %s vs %s  FAIL\n", name.c_str(), shape_str(a.shape).c_str(),
                shape_str(b.shape).c_str());
    return false;
  }
  const std::vector<double> x = as_doubles(a), y = as_doubles(b);
  double max_abs = 0, diff2 = 0, ref2 = 0;
  bool finite = true;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double d = x[i] - y[i];
    finite &= std::isfinite(x[i]) && std::isfinite(y[i]);
    max_abs = std::max(max_abs, std::abs(d));
    diff2 += d * d;
    ref2 += y[i] * y[i];
  }
  // A zero reference only matches an exact zero difference.
  const double rel = ref2 > 0 ? std::sqrt(diff2 / ref2) : (diff2 > 0 ? INFINITY : 0.0);
  const bool ok = finite && rel <= tol;
  std::printf("%-10s %12.3e %12.3e  %s%s\n", name.c_str(), max_abs, rel, ok ? "ok" : "FAIL",
              finite ? "" : " (non-finite values)");
  return ok;
}

int run(int argc, char** argv) {
  cxxopts::Options o("gdn_npy_diff",
                     "Compares the .npy files present in both DIR_A and DIR_B (or the --names "
                     "given) and prints\n  name  max_abs  rel_l2   with rel_l2 = ||a - b|| / "
                     "||b||.\nExit code 1 if shapes differ, values are not finite or rel_l2 > "
                     "--tol.");
  o.add_options()("a", "first directory (DIR_A)", cxxopts::value<std::string>())(
      "b", "reference directory (DIR_B); rel_l2 is relative to its values",
      cxxopts::value<std::string>())(
      "names", "comma-separated file stems to compare (e.g. o,ht,dq); each must exist in both",
      cxxopts::value<std::string>())("tol", "largest accepted rel_l2",
                                     cxxopts::value<double>()->default_value("1e-10"))(
      "h,help", "print this help");
  o.parse_positional({"a", "b"});
  o.positional_help("DIR_A DIR_B");
  auto res = o.parse(argc, argv);
  if (res.count("help")) {
    std::cout << o.help() << std::endl;
    return 0;
  }
  GDN_CHECK(res.count("a") && res.count("b") && res.unmatched().empty(),
            "usage: gdn_npy_diff DIR_A DIR_B [--names o,ht,...] [--tol 1e-10]");
  const fs::path a = res["a"].as<std::string>(), b = res["b"].as<std::string>();
  for (const auto& d : {a, b}) GDN_CHECK(fs::is_directory(d), d.string(), ": not a directory");
  const double tol = res["tol"].as<double>();

  std::vector<std::string> names;
  if (res.count("names")) {
    names = split(res["names"].as<std::string>());
  } else {
    const auto in_a = npy_names(a), in_b = npy_names(b);
    std::set_intersection(in_a.begin(), in_a.end(), in_b.begin(), in_b.end(),
                          std::back_inserter(names));
  }
  GDN_CHECK(!names.empty(), "no .npy files in common between ", a.string(), " and ", b.string());
  std::printf("%-10s %12s %12s\n", "name", "max_abs", "rel_l2");
  int failed = 0;
  for (const auto& n : names) failed += !compare(a, b, n, tol);
  std::printf("%zu compared, %d failed (tol %.1e)\n", names.size(), failed, tol);
  return failed ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "gdn_npy_diff: " << e.what() << std::endl;
    return 1;
  }
}
