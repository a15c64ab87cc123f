// The FMA peak of this CPU (fp32 or fp64), measured: gdn_bench reports its achieved GFLOP/s as a
// percentage of it. A measurement rather than a table of clock rates and FMA units,
// because the clock under load (turbo, the vector licence, a VM's throttle) is what the
// benchmark's kernels get too.
//
// Rates are by each thread's own CPU time (CLOCK_THREAD_CPUTIME_ID), not wall time: on a
// shared machine a neighbour that holds one core for part of a window stretches the
// team's wall time (one of two threads at half speed halves a wall-time figure) but not
// the CPU time a thread ran for. What the neighbours took shows in gflops_wall instead.
#pragma once

namespace gdn::la {

struct FmaPeak {
  double gflops;          // all threads at once: the best window's sum of per-thread rates
  double gflops_median;   // the median window of the same
  double gflops_wall;     // the same best window by wall time (below gflops: neighbours ran)
  double gflops_one;      // one thread alone (the best window)
  int threads;            // OpenMP threads that ran it
  int lanes;              // elements per vector (16 floats with AVX-512, 8 with AVX2)
  int windows;            // timed windows per phase (one thread; all threads)
  double window_seconds;  // the length a window was calibrated to
  bool pinned;            // whether each thread ran on a CPU of its own (Linux affinity)
};

// Runs independent chains of vector FMAs in T (enough of them to cover the FMA latency
// times the FMA ports) for about `seconds` in all: on one thread, then on every OpenMP
// thread at once (each pinned to a CPU of its own where there are enough), each phase a
// warm-up (the clock ramps under a vector load) and then short timed windows, of which
// the best counts (a neighbour's burst only slows a window down). Nothing a compiler could
// fold away: the chains start from runtime values and their sum is kept. The threads'
// affinity is restored afterwards. Defined for float and double.
template <typename T>
FmaPeak measure_fma_peak(double seconds = 0.3);

}  // namespace gdn::la
