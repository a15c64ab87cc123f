#include "gdn/chunk/launch_counts.h"

#include <atomic>
#include <mutex>
#include <sstream>

namespace gdn::pass {

namespace {
std::mutex mu;
std::vector<PhaseLaunches> counts;

PhaseLaunches& entry(const char* phase) {
  for (PhaseLaunches& p : counts)
    if (p.phase == phase) return p;
  counts.push_back({phase, 0, 0, ""});
  return counts.back();
}
}  // namespace

void count_launch(const char* phase, KernelPath path) {
  const std::lock_guard<std::mutex> lock(mu);
  PhaseLaunches& p = entry(phase);
  (path == KernelPath::bf16_register ? p.bf16_register : p.tiled) += 1;
}

void note_fallback(const char* phase, const std::string& why) {
  const std::lock_guard<std::mutex> lock(mu);
  entry(phase).fallback = why;
}

std::vector<PhaseLaunches> launch_counts() {
  const std::lock_guard<std::mutex> lock(mu);
  return counts;
}

void reset_launch_counts() {
  const std::lock_guard<std::mutex> lock(mu);
  counts.clear();
}

std::string format_launch_counts() {
  std::ostringstream s;
  for (const PhaseLaunches& p : launch_counts()) {
    s << p.phase << ": " << p.bf16_register << " register, " << p.tiled << " tiled";
    if (!p.fallback.empty()) s << "; fallback: " << p.fallback;
    s << "\n";
  }
  return s.str();
}

std::string register_fallback_reason(const RegisterConditions& c) {
  std::ostringstream s;
  if (!c.bf16_mode) return "not the bf16 mode (the register kernels are bf16 only)";
  if (c.tiled_forced) return "train.cuda_walk tiled";
  if (!c.shape_supported) {
    s << "shape C = " << c.C << ", K = " << c.K << ", V = " << c.V;
    if (c.bv > 0) s << ", walk width " << c.bv;
    s << " (register kernels take C = 64, K = 64 or 128, V a multiple of the width)";
    return s.str();
  }
  if (!c.factors_aligned) return "the WY factors are not 16-byte aligned";
  if (!c.dO_aligned) return "dO is not 16-byte aligned";
  if (c.compute_major < 8) {
    s << "compute capability " << c.compute_major << ".x has no cp.async (needs 8.0 or later)";
    return s.str();
  }
  if (c.smem > c.smem_optin) {
    s << "needs " << c.smem << " bytes of shared memory, the device allows " << c.smem_optin;
    return s.str();
  }
  return "";
}

namespace {
std::atomic<CudaWalk> walk{CudaWalk::automatic};
std::atomic<bool> tf32{false};
}  // namespace

void set_cuda_tf32(bool on) {
  tf32 = on;
}

bool cuda_tf32() {
  return tf32;
}

void set_cuda_walk(CudaWalk w) {
  walk = w;
}

CudaWalk cuda_walk() {
  return walk;
}

}  // namespace gdn::pass
