// cpu_features() against the kernel's own reading of the CPU, /proc/cpuinfo (the flags of
// the first processor and its model name), where that file exists; and the build's
// compiled ISA against what the CPU runs (a binary that runs here can only use what the CPU
// has).
#include <catch2/catch.hpp>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "core/cpu_features.h"

using namespace gdn;

namespace {

struct CpuInfo {
  bool found = false;
  std::set<std::string> flags;
  std::string model;
};

CpuInfo proc_cpuinfo() {
  CpuInfo info;
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  bool have_flags = false, have_model = false;
  while (std::getline(in, line) && !(have_flags && have_model)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    key.erase(key.find_last_not_of(" \t") + 1);
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(' '));
    if (key == "flags" && !have_flags) {
      std::istringstream words(value);
      for (std::string w; words >> w;) info.flags.insert(w);
      have_flags = info.found = true;
    } else if (key == "model name" && !have_model) {
      info.model = value;
      have_model = true;
    }
  }
  return info;
}

}  // namespace

TEST_CASE("cpu_features reads what /proc/cpuinfo says", "[cpu]") {
  const CpuInfo info = proc_cpuinfo();
  const CpuFeatures& f = cpu_features();
  INFO(f.describe());
  if (!info.found) {
    WARN("no /proc/cpuinfo flags here: nothing to compare with");
    return;
  }
  // The kernel lists a feature only where the OS enables its registers, as cpu_features does.
  CHECK(f.fma == info.flags.count("fma"));
  CHECK(f.avx2 == info.flags.count("avx2"));
  CHECK(f.avx512f == info.flags.count("avx512f"));
  CHECK(f.avx512_bf16 == info.flags.count("avx512_bf16"));
  CHECK(f.amx_bf16 == (info.flags.count("amx_bf16") && info.flags.count("amx_tile")));
  if (!info.model.empty()) CHECK(f.model == info.model);
  const std::string d = f.describe();
  CHECK(d.rfind(f.model + ":", 0) == 0);
  CHECK((d.find("AVX512_BF16") != std::string::npos) == f.avx512_bf16);
}

TEST_CASE("the build's ISA is one this CPU runs", "[cpu]") {
  const CpuFeatures& f = cpu_features();
  const std::string isa = compiled_isa();
  INFO(isa << " on " << f.describe());
  if (isa == "AVX-512F") CHECK(f.avx512f);
  if (isa == "AVX2+FMA") CHECK((f.avx2 && f.fma));
  CHECK((isa == "AVX-512F" || isa == "AVX2+FMA" || isa == "AVX" || isa == "baseline"));
}
