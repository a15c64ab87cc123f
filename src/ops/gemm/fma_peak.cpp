// The FMA peak microbenchmark (fma_peak.h). Its chains of FMAs are the GEMM path's own
// (register_gemm.h, fma_chains): it measures the instruction the GEMM micro-kernel issues.
#include "ops/gemm/fma_peak.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <vector>

#include "ops/gemm/gemm.h"
#include "ops/gemm/gemm_path.h"

#if defined(__linux__)
#include <sched.h>
#endif

namespace gdn::la {

namespace {

constexpr int kWindows = 8;  // timed windows per phase; the best counts
constexpr int kWarmup = 3;   // untimed windows first, per phase: the clock ramps under load

// CPU time of the calling thread: what it ran for, whoever else held its core meanwhile.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The CPUs this process may run on, in order (empty where affinity is not available).
std::vector<int> allowed_cpus() {
  std::vector<int> cpus;
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
#endif
  return cpus;
}

// Pins the calling thread to one CPU for its lifetime and then restores its mask; a no-op
// for cpu < 0 or where affinity is not available. Returns whether it pinned.
class Pin {
 public:
  explicit Pin(int cpu) {
#if defined(__linux__)
    if (cpu < 0 || sched_getaffinity(0, sizeof old_, &old_) != 0) return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    pinned_ = sched_setaffinity(0, sizeof one, &one) == 0;
#else
    (void)cpu;
#endif
  }
  ~Pin() {
#if defined(__linux__)
    if (pinned_) sched_setaffinity(0, sizeof old_, &old_);
#endif
  }
  Pin(const Pin&) = delete;
  Pin& operator=(const Pin&) = delete;
  bool pinned() const {
    return pinned_;
  }

 private:
#if defined(__linux__)
  cpu_set_t old_{};
#endif
  bool pinned_ = false;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

template <typename T>
FmaPeak measure_fma_peak(double seconds) {
  const GemmKernels& g = gemm_kernels();
  const int L = gemm_lanes<T>();
  T (*fma_chains)(long, T) = nullptr;
  if constexpr (sizeof(T) == 4)
    fma_chains = g.fma_chains_f32;
  else
    fma_chains = g.fma_chains_f64;
  const double flops_per_block = 2.0 * L * g.fma_chains * kFmaInner;
  const double window_s = seconds / (2 * (kWindows + kWarmup));
  const std::vector<int> cpus = allowed_cpus();
  volatile T sink = 0;
  FmaPeak peak{};
  peak.lanes = L;
  peak.windows = kWindows;
  peak.window_seconds = window_s;

  // Phase 1, one thread. The window is calibrated in CPU time, so a neighbour's burst
  // during calibration cannot shrink the windows to a few timer ticks.
  long blocks = 16;
  {
    const Pin pin(cpus.empty() ? -1 : cpus[0]);
    for (;;) {
      const double c0 = thread_cpu_seconds();
      sink = sink + fma_chains(blocks, T(1e-3));
      const double s = thread_cpu_seconds() - c0;
      if (s > 2e-3 || blocks > (1L << 30)) {
        blocks = std::max(1L, long(double(blocks) * window_s / s));
        break;
      }
      blocks *= 4;
    }
    for (int w = 0; w < kWarmup + kWindows; ++w) {
      const double c0 = thread_cpu_seconds();
      sink = sink + fma_chains(blocks, T(1e-3));
      const double s = thread_cpu_seconds() - c0;
      if (w >= kWarmup) peak.gflops_one = std::max(peak.gflops_one, flops_per_block * blocks / s);
    }
  }

  // Phase 2, every thread at once, window by window (a barrier between windows, so the
  // windows overlap): per window the sum of the threads' CPU-time rates, and the wall rate.
  const int max_team = omp_get_max_threads();
  std::vector<double> rate(std::size_t(kWindows) * max_team, 0.0), wall(kWindows + 1, 0.0);
  int team = 1, pinned_all = 1;
#pragma omp parallel reduction(min : pinned_all)
  {
    const int tid = omp_get_thread_num(), n = omp_get_num_threads();
#pragma omp single
    team = n;
    const Pin pin(n <= int(cpus.size()) ? cpus[tid] : -1);
    pinned_all = pin.pinned() ? 1 : 0;
    T part = 0;
    for (int w = -kWarmup; w < kWindows; ++w) {
#pragma omp barrier
      if (w >= 0) {
#pragma omp master
        wall[w] = wall_seconds();
#pragma omp barrier
      }
      const double c0 = thread_cpu_seconds();
      part += fma_chains(blocks, T(1e-3) * T(tid + 1));
      const double s = thread_cpu_seconds() - c0;
      if (w >= 0) rate[std::size_t(w) * max_team + tid] = flops_per_block * blocks / s;
    }
#pragma omp barrier
#pragma omp master
    wall[kWindows] = wall_seconds();
#pragma omp critical
    sink = sink + part;
  }
  // The windows' wall times: each from its start to the next one's (the barrier after a
  // window waits for its slowest thread).
  std::vector<double> sums(kWindows);
  for (int w = 0; w < kWindows; ++w) {
    for (int t = 0; t < team; ++t) sums[w] += rate[std::size_t(w) * max_team + t];
    const double wall_rate = flops_per_block * blocks * team / (wall[w + 1] - wall[w]);
    if (sums[w] > peak.gflops) peak.gflops = sums[w];
    peak.gflops_wall = std::max(peak.gflops_wall, wall_rate);
  }
  peak.gflops_median = median(sums);
  peak.threads = team;
  peak.pinned = pinned_all == 1;
  const double giga = 1e-9;
  peak.gflops *= giga;
  peak.gflops_median *= giga;
  peak.gflops_wall *= giga;
  peak.gflops_one *= giga;
  (void)sink;
  return peak;
}

template FmaPeak measure_fma_peak<float>(double);
template FmaPeak measure_fma_peak<double>(double);

}  // namespace gdn::la
