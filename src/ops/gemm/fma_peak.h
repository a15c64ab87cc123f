// The FMA peak of this CPU (fp32 or fp64), measured: gdn_bench reports its achieved GFLOP/s as a
// percentage of it. A measurement rather than a table of clock rates and FMA units,
// because the clock under load (turbo, a neighbour on a shared machine, a VM's throttle)
// is what the benchmark's kernels get too.
#pragma once

namespace gdn::la {

struct FmaPeak {
  double gflops;   // GFLOP/s of all threads together (an FMA counts 2 FLOPs)
  int threads;     // OpenMP threads that ran it
  int lanes;       // elements per vector (16 floats with AVX-512, 8 with AVX2)
  double seconds;  // wall time of the fastest timed run
};

// Runs independent chains of vector FMAs in T (enough of them to cover the FMA latency) on
// every OpenMP thread at once for about `seconds` in all, and returns the fastest of three
// runs. Nothing a compiler could fold away: the chains start from runtime values and
// their sum is kept. Defined for float and double.
template <typename T>
FmaPeak measure_fma_peak(double seconds = 0.3);

}  // namespace gdn::la
