// The GEMM path: the kernel tables this build has, which of them this CPU can run, and the
// one in use.
#include "ops/gemm/gemm_path.h"

#include <atomic>

#include "core/cpu_features.h"
#include "core/error.h"

namespace gdn::la {

namespace {

struct Entry {
  GemmPath path;
  const char* name;
  const GemmKernels* kernels;
  bool (*runs)(const CpuFeatures&);
};

// Narrowest first.
const Entry kEntries[] = {
#if defined(GDN_GEMM_X86)
    {GemmPath::kAvx2, "avx2", &kGemmAvx2, [](const CpuFeatures& f) { return f.avx2 && f.fma; }},
    {GemmPath::kAvx512, "avx512", &kGemmAvx512, [](const CpuFeatures& f) { return f.avx512f; }},
    {GemmPath::kAvx512Bf16, "avx512_bf16", &kGemmAvx512Bf16,
     [](const CpuFeatures& f) { return f.avx512f && f.avx512_bf16; }},
#else
    {GemmPath::kGeneric, "generic", &kGemmGeneric, [](const CpuFeatures&) { return true; }},
#endif
};

const Entry* entry(GemmPath p) {
  for (const Entry& e : kEntries)
    if (e.path == p) return &e;
  return nullptr;
}

std::string choices() {
  std::string s;
  for (const GemmPath p : gemm_paths()) s += std::string(s.empty() ? "" : ", ") + gemm_path_name(p);
  return s;
}

const Entry& checked(GemmPath p, const std::string& what) {
  const Entry* e = entry(p);
  GDN_CHECK(e && e->runs(cpu_features()), what, ": this build on this CPU (",
            cpu_features().describe(), ") runs the GEMM paths ", choices());
  return *e;
}

const Entry& initial() {
  return checked(gemm_paths().back(), "the widest GEMM path");
}

std::atomic<const Entry*>& current() {
  static std::atomic<const Entry*> e{&initial()};
  return e;
}

}  // namespace

const char* gemm_path_name(GemmPath p) {
  const Entry* e = entry(p);
  return e ? e->name : "unknown";
}

std::vector<GemmPath> gemm_paths() {
  std::vector<GemmPath> out;
  for (const Entry& e : kEntries)
    if (e.runs(cpu_features())) out.push_back(e.path);
  GDN_CHECK(!out.empty(), "this CPU (", cpu_features().describe(),
            ") runs none of this build's GEMM paths (AVX2 + FMA at the least)");
  return out;
}

GemmPath gemm_path_named(const std::string& name, const std::string& what) {
  for (const Entry& e : kEntries)
    if (name == e.name) return checked(e.path, what + " " + name).path;
  throw_error(what, " ", name, " is not a GEMM path: this build on this CPU (",
              cpu_features().describe(), ") runs ", choices());
}

GemmPath gemm_path() {
  return current().load(std::memory_order_relaxed)->path;
}

void set_gemm_path(GemmPath p) {
  current().store(&checked(p, std::string("GEMM path ") + gemm_path_name(p)),
                  std::memory_order_relaxed);
}

const GemmKernels& gemm_kernels() {
  return *current().load(std::memory_order_relaxed)->kernels;
}

}  // namespace gdn::la
