// gdn_kernel: the gated delta rule with context parallelism on .npy files, under mpirun.
//
//   mpirun -np P gdn_kernel --in DIR --out DIR [--backward] [--chunk-size 64] [--scale S]
//       [--l2norm-qk] [--dtype f32|f64] [--log-depth-scan] [--load-balance none|zigzag]
//       [--device auto|cpu|cuda] [--watchdog-s 600]
//
// Every rank reads only its contiguous shard of the [B, T, ...] input files (and the small
// global ones whole); rank 0 gathers the outputs and writes them as an all-or-nothing set
// ending in stats.json. All validation (options.cpp, inputs.cpp) happens before the first
// collective of the computation, on every rank (the value checks on each rank's shard,
// with one all-reduce for the first bad value in the whole file), and the ranks agree on
// the outcome, so bad input gives one message and exit code 1 everywhere instead of a hang.
#include <spdlog/spdlog.h>

#include <iostream>

#include "comm/mpi_communicator.h"
#include "common/app_common.h"
#include "common/deprecated_env.h"
#include "core/error.h"
#include "core/watchdog.h"
#include "gdn_kernel/output_set.h"
#include "gdn_kernel/run_op.h"
#if GDN_HAVE_CUDA
#include "comm/device_communicator.h"
#include "gdn/chunk/launch_counts.h"
#include "runtime/cuda_device.h"
#endif

using namespace gdn;
using namespace gdn::kernel_app;

namespace {

// Gathers the outputs to rank 0, which writes them; comm is the host MPI communicator
// whatever device the op ran on.
template <typename T>
void write_outputs(Communicator& comm, const Args& a, const Inputs& in, const OpOutputs<T>& r) {
  const GdnProblem& p = in.problem;
  std::optional<OutputSet> set;
  if (comm.rank() == 0) set.emplace(a.out);
  // ht and dh0 are global and identical on every rank already.
  auto write = [&](const std::string& name, const Tensor<T>& t) {
    if (set) set->npy(name, t);
  };
  write("o", gather_tokens(comm, r.o, p.T));
  write("ht", r.ht);
  if (a.backward) {
    write("dq", gather_tokens(comm, r.dq, p.T));
    write("dk", gather_tokens(comm, r.dk, p.T));
    write("dv", gather_tokens(comm, r.dv, p.T));
    write("dg", gather_tokens(comm, r.dg, p.T));
    write("dbeta", gather_tokens(comm, r.dbeta, p.T));
    if (in.h0) write("dh0", r.dh0);
  }
  const nlohmann::ordered_json stats =
      make_stats(comm, a, p, dtype_name(dtype_of<T>()), in.h0.has_value(), in.dht.has_value(),
                 r.fwd, a.backward ? &r.bwd : nullptr);
  if (!set) return;
  set->commit(stats.dump(2) + "\n");
  spdlog::info("B={} T={} Hk={} Hv={} K={} V={} N={} {} on P={} ranks: forward {:.4f} s{}{} -> {}",
               p.B, p.T, p.Hk, p.Hv, p.K, p.V, p.num_sequences(), dtype_name(dtype_of<T>()),
               comm.size(), stats["seconds"]["forward"].get<double>(),
               a.backward
                   ? fmt::format(", backward {:.4f} s", stats["seconds"]["backward"].get<double>())
                   : "",
               a.log_depth_scan ? " (log-depth scan)" : "", a.out);
}

template <typename T>
void run(Communicator& comm, const Args& a, const Inputs& in, Watchdog& watchdog) {
#if GDN_HAVE_CUDA
  if (a.device == app::Device::cuda) {
    // NCCL over device buffers (or MPI with host staging when ranks share a GPU).
    const auto device_comm = make_device_communicator(MPI_COMM_WORLD);
    write_outputs(comm, a, in, run_op<T, Cuda>(*device_comm, a, in, watchdog));
    // Which kernels the passes took (a silent fallback to the tiled kernels shows here).
    for (const pass::PhaseLaunches& l : pass::launch_counts())
      spdlog::info("GPU kernels of {}: {} register, {} tiled{}", l.phase, l.bf16_register, l.tiled,
                   l.fallback.empty() ? "" : "; fallback: " + l.fallback);
    return;
  }
#endif
  write_outputs(comm, a, in, run_op<T, Host>(comm, a, in, watchdog));
}

}  // namespace

int main(int argc, char** argv) {
  MpiRuntime mpi(&argc, &argv);
  int rc = 0;
  {
    MpiCommunicator comm;
    app::setup_logging("gdn_kernel");
    Args args;
    Inputs in;
    // Parsing, headers, shapes and reading on every rank, no collectives, then one
    // agreement; then the value checks of every shard, one all-reduce for the first bad
    // value (reported by the rank holding it), and the second agreement.
    bool ok = app::run_setup_collectively(comm, [&] {
      app::apply_deprecated_env();  // the kernel choices (common/deprecated_env.h)
      args = parse_args(argc, argv);
      if (args.help) return;
      in = load_inputs(args, comm.rank(), comm.size());
    });
    if (ok && !args.help) {
      const ValueVerdict verdict = agree_on_values(comm, in);
      ok = app::run_setup_collectively(comm, [&] {
        throw_bad_value(args, in, verdict);
        // Only rank 0 writes; a directory it cannot create is agreed on like any other error.
        if (verdict.check < 0 && comm.rank() == 0) make_output_dir(args.out);
      });
    }
    if (!ok) {
      rc = 1;
    } else if (args.help) {
      if (comm.rank() == 0) std::cout << make_options().help() << std::endl;
    } else {
      app::report_cpu_share(comm);
      const std::string heartbeats =
          args.watchdog_s > 0 ? app::make_heartbeat_dir(comm) : std::string();
      Watchdog watchdog(args.watchdog_s, comm.rank(), comm.size(), heartbeats);
      app::run_or_abort_job(comm, [&] {
        if (in.compute == DType::f64)
          run<double>(comm, args, in, watchdog);
        else
          run<float>(comm, args, in, watchdog);
      });
    }
  }
  return rc;
}
