// The CP op on this rank's shard on device Dev: inputs moved in, the forward (and the
// backward) timed with the counters of the op's communicator reset around each pass, the
// outputs moved back to host tensors.
#pragma once

#include <chrono>

#include "core/error.h"
#include "core/watchdog.h"
#include "cp/gdn_cp.h"
#include "gdn_kernel/inputs.h"
#include "gdn_kernel/shards.h"
#include "gdn_kernel/stats.h"

namespace gdn::kernel_app {

template <typename T>
struct OpOutputs {
  Tensor<T> o, ht, dq, dk, dv, dg, dbeta, dh0;
  PassStats fwd, bwd;
};

// comm carries the op's exchanges and takes Dev's buffers.
template <typename T, typename Dev>
OpOutputs<T> run_op(Communicator& comm, const Args& a, const Inputs& in, Watchdog& watchdog) {
  using clock = std::chrono::steady_clock;
  const GdnProblem& p = in.problem;
  CpOptions options;
  options.pair_scan = a.log_depth_scan ? PairScan::log_depth : PairScan::allgather;
  const CpContext cp = CpContext::contiguous(comm, p.T, options);
  const Shard& sh = cp.shard;
  GDN_CHECK(sh.begin == in.shard.begin && sh.end == in.shard.end,
            "run_op: the inputs hold tokens [", in.shard.begin, ", ", in.shard.end,
            ") but this rank's shard is [", sh.begin, ", ", sh.end, ")");
  auto file = [&](const std::string& n) { return input_path(a, n); };
  // The inputs hold this rank's shard already.
  auto as_tensor = [&](const NpyArray& x, const std::string& name) {
    return npy_to_tensor<T>(x, file(name));
  };
  auto on_device = [](const Tensor<T>& t) { return to_device<Dev>(t.ptr(), t.data.size()); };
  auto to_tensor = [](const Buffer<Dev, T>& b, const Shape& shape) {
    Tensor<T> t(shape);
    Dev::download(t.ptr(), b.data(), b.size());
    return t;
  };
  const Tensor<T> q = as_tensor(in.q, "q"), k = as_tensor(in.k, "k"), v = as_tensor(in.v, "v"),
                  g = as_tensor(in.g, "g"), beta = as_tensor(in.beta, "beta");
  const Tensor<T> h0 = in.h0 ? npy_to_tensor<T>(*in.h0, file("h0")) : Tensor<T>();
  const Buffer<Dev, T> q_d = on_device(q), k_d = on_device(k), v_d = on_device(v),
                       g_d = on_device(g), beta_d = on_device(beta), h0_d = on_device(h0);
  const GdnInputView<T> local{q_d.data(), k_d.data(),    v_d.data(),
                              g_d.data(), beta_d.data(), in.h0 ? h0_d.data() : nullptr};
  const Shape state = {p.num_sequences(), p.Hv, p.K, p.V};
  OpOutputs<T> out;
  Buffer<Dev, T> o_d(std::size_t(p.B) * sh.size() * p.Hv * p.V), ht_d(std::size_t(numel(state)));

  // Forward. Counters are reset around each pass so stats.json separates them and leaves
  // out the set-up agreement and the output gathering.
  watchdog.progress(-1, "the forward");
  comm.barrier();
  comm.reset_counters();
  auto t0 = clock::now();
  GdnContextParallel<T, Dev> op;
  op.forward(cp, p, local, o_d.data(), ht_d.data());
  comm.barrier();  // the pass is done on every rank (and, on a GPU, its kernels)
  out.fwd.seconds = std::chrono::duration<double>(clock::now() - t0).count();
  out.fwd.counters = comm.counters();
  out.o = to_tensor(o_d, {p.B, sh.size(), p.Hv, p.V});
  out.ht = to_tensor(ht_d, state);
  if (!a.backward) return out;

  const Tensor<T> dO = as_tensor(*in.dO, "do");
  const Tensor<T> dht = in.dht ? npy_to_tensor<T>(*in.dht, file("dht")) : Tensor<T>();
  const Buffer<Dev, T> dO_d = on_device(dO), dht_d = on_device(dht);
  Buffer<Dev, T> dq_d(q.data.size()), dk_d(k.data.size()), dv_d(v.data.size()), dg_d(g.data.size()),
      dbeta_d(beta.data.size()), dh0_d(in.h0 ? numel(state) : 0);
  GdnGradView<T> grads{dq_d.data(), dk_d.data(),    dv_d.data(),
                       dg_d.data(), dbeta_d.data(), in.h0 ? dh0_d.data() : nullptr};
  watchdog.progress(-1, "the backward");
  comm.barrier();
  comm.reset_counters();
  t0 = clock::now();
  op.backward(cp, dO_d.data(), in.dht ? dht_d.data() : nullptr, grads);
  comm.barrier();
  out.bwd.seconds = std::chrono::duration<double>(clock::now() - t0).count();
  out.bwd.counters = comm.counters();
  out.dq = to_tensor(dq_d, q.shape);
  out.dk = to_tensor(dk_d, k.shape);
  out.dv = to_tensor(dv_d, v.shape);
  out.dg = to_tensor(dg_d, g.shape);
  out.dbeta = to_tensor(dbeta_d, beta.shape);
  if (in.h0) out.dh0 = to_tensor(dh0_d, state);
  return out;
}

}  // namespace gdn::kernel_app
