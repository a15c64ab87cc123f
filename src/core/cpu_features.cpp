#include "core/cpu_features.h"

#include <unistd.h>

#include <cstdint>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define GDN_X86 1
#else
#define GDN_X86 0
#endif

namespace gdn {

namespace {

#if defined(GDN_BASELINE_NEEDS_AVX2) && defined(__x86_64__)
// A build for x86-64-v3 would die of SIGILL at its first AVX2 instruction on an older CPU.
// This runs before main and any static constructor of ours, compiled for plain x86-64
// whatever the build's flags, and says why instead.
__attribute__((constructor(101), target("arch=x86-64"))) void check_baseline() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return;
  static const char msg[] =
      "gdn-cp: this binary is built for x86-64-v3 (AVX2 and FMA) and this CPU lacks them; "
      "rebuild with -DGDN_BASELINE_ARCH=x86-64\n";
  if (write(2, msg, sizeof msg - 1) < 0) _exit(1);
  _exit(1);
}
#endif

#if GDN_X86
struct Regs {
  unsigned a = 0, b = 0, c = 0, d = 0;
};
Regs cpuid(unsigned leaf, unsigned sub = 0) {
  Regs r;
  if (!__get_cpuid_count(leaf, sub, &r.a, &r.b, &r.c, &r.d)) return Regs{};
  return r;
}
// XCR0: the register state the OS saves (bit 1 SSE, 2 AVX, 5-7 AVX-512, 17-18 AMX tiles).
std::uint64_t xcr0() {
  std::uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (std::uint64_t(hi) << 32) | lo;
}
bool bit(unsigned r, int i) {
  return (r >> i) & 1u;
}
#endif

CpuFeatures read() {
  CpuFeatures f;
#if GDN_X86
  const Regs l1 = cpuid(1);
  const bool osxsave = bit(l1.c, 27);
  const std::uint64_t x = osxsave ? xcr0() : 0;
  const bool avx_os = (x & 0x6) == 0x6, avx512_os = avx_os && (x & 0xe0) == 0xe0,
             amx_os = (x & 0x60000) == 0x60000;
  const unsigned max_leaf = cpuid(0).a;
  const Regs l7 = max_leaf >= 7 ? cpuid(7) : Regs{};
  const Regs l71 = max_leaf >= 7 && l7.a >= 1 ? cpuid(7, 1) : Regs{};
  f.fma = avx_os && bit(l1.c, 12);
  f.avx2 = avx_os && bit(l7.b, 5);
  f.avx512f = avx512_os && bit(l7.b, 16);
  f.avx512_bf16 = avx512_os && bit(l71.a, 5);
  f.amx_bf16 = amx_os && bit(l7.d, 22) && bit(l7.d, 24);  // AMX-BF16 and AMX-TILE
  if (cpuid(0x80000000).a >= 0x80000004) {
    char brand[49] = {};
    for (unsigned i = 0; i < 3; ++i) {
      const Regs r = cpuid(0x80000002 + i);
      std::memcpy(brand + 16 * i, &r, 16);
    }
    f.model = brand;
    const auto first = f.model.find_first_not_of(' ');
    const auto last = f.model.find_last_not_of(' ');
    f.model = first == std::string::npos ? "" : f.model.substr(first, last - first + 1);
  }
#endif
  if (f.model.empty()) f.model = "unknown CPU";
  return f;
}

}  // namespace

std::string CpuFeatures::describe() const {
  std::string s = model + ":";
  for (const auto& [on, name] :
       {std::pair{avx2, "AVX2"}, std::pair{fma, "FMA"}, std::pair{avx512f, "AVX-512F"},
        std::pair{avx512_bf16, "AVX512_BF16"}})
    if (on) s += std::string(" ") + name;
  if (!avx2 && !avx512f) s += " no AVX2";
  s += amx_bf16 ? " AMX-BF16" : ", no AMX";
  return s;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = read();
  return f;
}

std::string compiled_isa() {
#if defined(__AVX512F__)
  return "AVX-512F";
#elif defined(__AVX2__) && defined(__FMA__)
  return "AVX2+FMA";
#elif defined(__AVX__)
  return "AVX";
#else
  return "baseline";
#endif
}

bool compiled_native() {
#ifdef GDN_NATIVE_ARCH_BUILD
  return true;
#else
  return false;
#endif
}

}  // namespace gdn
