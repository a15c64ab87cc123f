// The GDN operator on the GPU against the CPU path: LocalPass<T, Cuda> against
// LocalPass<double, Host>, phase by phase, on whole slices and on slices that continue a
// sequence; and GdnContextParallel<T, Cuda> against the single-rank CPU op. The GPU's
// order of operations differs from the host's (V-tiled walks; output and backward split
// into a walk and a chunk-parallel part): tests/unit/test_chunk_kernel.cpp checks that order
// on the CPU, these check the kernels. Tolerances:
// fp32 relative <= 1e-4 against the fp64 CPU result, fp64 <= 1e-10. Skipped (exit 77)
// where no GPU is visible; CI compiles and links it without one.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "comm/single_communicator.h"
#include "core/precision.h"
#include "cp/gdn_cp.h"
#include "cp/shard.h"
#include "gdn/chunk/launch_counts.h"
#include "gdn/op/op.h"
#include "gdn/pass/local_pass.h"
#include "gpu_support.h"
#include "runtime/cuda_check.h"
#include "slice_reference.h"

using namespace gdn;
using namespace gdn::test;

namespace {

// Tokens [s.begin, s.end) of a [B, T, ...] tensor.
Tensor<double> token_slice(const Tensor<double>& x, const Shard& s) {
  return gdn::test::token_slice(x, s.begin, s.end);
}

// One slice [t0, t1) of a problem: every phase of the local pass on the CPU (fp64)
// and on the GPU (T), from the same random entry state, exit adjoint and cotangents.
template <typename T>
void check_pass(const Case& c, std::int64_t t0, std::int64_t t1, double tol = tolerance<T>(),
                Precision precision = Precision::plain) {
  GdnProblem p = c.p;
  p.precision = precision;
  // CPU, fp64.
  const SliceReference r(c, t0, t1, /*seed=*/41);
  const Tensor<double>&q = r.q, &k = r.k, &v = r.v, &g = r.g, &beta = r.beta, &dO = r.dO,
        &dht = r.dht, &h_in = r.h_in, &lambda = r.lambda, &M = r.M, &U = r.U, &o = r.o, &ht = r.ht,
        &D = r.D;
  const Grads<double>& gr = r.gr;
  const GdnInputs<double>& d = r.d;

  // GPU, T.
  const DeviceBuffer<T> dq_in = on_gpu<T>(q), dk_in = on_gpu<T>(k), dv_in = on_gpu<T>(v),
                        dg_in = on_gpu<T>(g), dbeta_in = on_gpu<T>(beta),
                        dh0_in = on_gpu<T>(c.h0 ? d.h0 : Tensor<double>(Shape{0})),
                        ddO = on_gpu<T>(dO), ddht = on_gpu<T>(dht), dh_in = on_gpu<T>(h_in),
                        dlambda = on_gpu<T>(lambda);
  LocalPass<T, Cuda> gpu(p, t0, t1,
                         {dq_in.data(), dk_in.data(), dv_in.data(), dg_in.data(), dbeta_in.data(),
                          c.h0 ? dh0_in.data() : nullptr});
  DeviceBuffer<T> gM(M.data.size()), gU(U.data.size()), go(o.data.size()), ght(ht.data.size()),
      gD(D.data.size()), gdq(gr.dq.data.size()), gdk(gr.dk.data.size()), gdv(gr.dv.data.size()),
      gdg(gr.dg.data.size()), gdbeta(gr.dbeta.data.size()), gdh0(gr.dh0.data.size());
  GdnGradView<T> ggv{gdq.data(), gdk.data(),    gdv.data(),
                     gdg.data(), gdbeta.data(), c.h0 ? gdh0.data() : nullptr};
  gpu.prepare();
  gpu.transition(gM.data(), gU.data());
  gpu.output(dh_in.data(), go.data(), ght.data());
  gpu.adjoint(ddO.data(), c.dht ? ddht.data() : nullptr, gD.data());
  gpu.backward(dlambda.data(), ddO.data(), c.dht ? ddht.data() : nullptr, ggv);

  INFO(c.name << " slice [" << t0 << ", " << t1 << ") " << (sizeof(T) == 4 ? "fp32" : "fp64"));
  check_close("M", gM, M, tol);
  check_close("U", gU, U, tol);
  check_close("o", go, o, tol);
  check_close("ht", ght, ht, tol);
  check_close("D", gD, D, tol);
  check_close("dq", gdq, gr.dq, tol);
  check_close("dk", gdk, gr.dk, tol);
  check_close("dv", gdv, gr.dv, tol);
  check_close("dg", gdg, gr.dg, tol);
  check_close("dbeta", gdbeta, gr.dbeta, tol);
  if (c.h0) check_close("dh0", gdh0, gr.dh0, tol);
}

const std::vector<Case> kPassCases = {
    {"B=2, T not a multiple of C", make_problem(2, 100, 2, 2, 16, 16, 64), true, true},
    {"Hv = 4 Hk, K != V, C=32", make_problem(1, 157, 1, 4, 12, 20, 32), false, true},
    {"packed sequences, C=16", make_problem(1, 150, 1, 2, 16, 8, 16, false, {0, 10, 11, 80, 150}),
     true, true},
    {"K = V = 64, C=64", make_problem(1, 200, 1, 2, 64, 64, 64), true, true},
    // Qwen3-Next's heads at every chunk size the inverse blocks differently: one 16 x 16
    // block (C = 16), two levels (64) and three (128).
    {"K = V = 128, C=16", make_problem(1, 150, 1, 2, 128, 128, 16), true, true},
    {"K = V = 128, C=64", make_problem(1, 300, 1, 2, 128, 128, 64), true, true},
    {"K = V = 128, C=128, Hv = 2 Hk", make_problem(1, 300, 1, 2, 128, 128, 128), true, true},
    // The V-tiled walks (local_pass_cuda.cu): K and V not multiples of the tile width
    // (BV = 32 here: tiles of 32, 32, 16 columns of U and 32, 16 of M), and enough
    // (batch, head) pairs for BV = 64 (B Hv ceil(V / 64) >= the SM count) with a ragged
    // last tile (96 = 64 + 32).
    {"K = 48, V = 80: ragged column tiles", make_problem(1, 130, 1, 2, 48, 80, 32), true, true},
    {"B Hv = 136, V = 96: BV = 64 tiles", make_problem(2, 40, 4, 68, 16, 96, 16), true, true},
};

// The recomputation of a slice on the GPU (LocalPass::output_from_states): output, then
// release(Keep::replay), reset and the outputs from the kept states, then adjoint and
// backward. o, ht, D and the gradients must be the same bits as the plain passes on the
// GPU (output, adjoint, backward).
template <typename T>
void check_replay(const Case& c, std::int64_t t0, std::int64_t t1) {
  const GdnProblem& p = c.p;
  const Shard s{t0, t1};
  const GdnInputs<double> d = random_gdn_inputs<double>(p, 46, c.h0, /*g_scale=*/0.1);
  const Shape local = {p.B, std::int64_t(t1 - t0), p.Hv, p.V};
  const Shape bh_state = {p.B, p.Hv, p.K, p.V};
  const DeviceBuffer<T> q = on_gpu<T>(token_slice(d.q, s)), k = on_gpu<T>(token_slice(d.k, s)),
                        v = on_gpu<T>(token_slice(d.v, s)), g = on_gpu<T>(token_slice(d.g, s)),
                        beta = on_gpu<T>(token_slice(d.beta, s)),
                        h0 = on_gpu<T>(c.h0 ? d.h0 : Tensor<double>(Shape{0})),
                        dO = on_gpu<T>(random_tensor<double>(local, 47)),
                        dht = on_gpu<T>(random_tensor<double>(state_shape(p), 48)),
                        h_in = on_gpu<T>(random_tensor<double>(bh_state, 49)),
                        lambda = on_gpu<T>(random_tensor<double>(bh_state, 50));
  const GdnInputView<T> in{q.data(), k.data(),    v.data(),
                           g.data(), beta.data(), c.h0 ? h0.data() : nullptr};
  const T* dht_p = c.dht ? dht.data() : nullptr;
  GdnProblem lp = p;
  lp.T = t1 - t0;
  const Grads<double> shapes(lp, false);
  const std::int64_t n_state = Tensor<double>(state_shape(p)).size();
  // o, ht, D, dq, dk, dv, dg, dbeta, dh0
  const std::vector<std::int64_t> sizes = {Tensor<double>(local).size(),
                                           n_state,
                                           Tensor<double>(bh_state).size(),
                                           shapes.dq.size(),
                                           shapes.dk.size(),
                                           shapes.dv.size(),
                                           shapes.dg.size(),
                                           shapes.dbeta.size(),
                                           n_state};
  auto run = [&](bool replay) {
    std::vector<DeviceBuffer<T>> b;
    for (const std::int64_t n : sizes) b.emplace_back(std::size_t(n));
    LocalPass<T, Cuda> pass(p, t0, t1, in);
    if (replay) {  // a first forward into scratch, then the recomputation
      DeviceBuffer<T> o(static_cast<std::size_t>(sizes[0])), ht(static_cast<std::size_t>(sizes[1]));
      pass.output(h_in.data(), o.data(), ht.data());
      pass.release(Keep::replay);
      pass.reset(p, t0, t1, in);
      pass.output_from_states(b[0].data(), b[1].data());
    } else {
      pass.output(h_in.data(), b[0].data(), b[1].data());
    }
    pass.adjoint(dO.data(), dht_p, b[2].data());
    GdnGradView<T> gv{b[3].data(), b[4].data(), b[5].data(),
                      b[6].data(), b[7].data(), c.h0 ? b[8].data() : nullptr};
    pass.backward(lambda.data(), dO.data(), dht_p, gv);
    std::vector<std::vector<T>> host;
    for (const DeviceBuffer<T>& x : b) host.push_back(to_host<Cuda>(x));
    return host;
  };
  const std::vector<std::vector<T>> want = run(false), got = run(true);
  const char* names[] = {"o", "ht", "D", "dq", "dk", "dv", "dg", "dbeta", "dh0"};
  INFO(c.name << " slice [" << t0 << ", " << t1 << ") " << (sizeof(T) == 4 ? "fp32" : "fp64"));
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO(names[i]);
    CHECK(bit_difference(got[i], want[i]) == "");
  }
}

// GdnContextParallel<T, Cuda> on one rank against the CPU single-rank op (fp64).
template <typename T>
void check_cp(const Case& c) {
  const GdnProblem& p = c.p;
  const GdnInputs<double> d = random_gdn_inputs<double>(p, 51, c.h0);
  const Tensor<double> dO = random_tensor<double>(output_shape(p), 52);
  const Tensor<double> dht = random_tensor<double>(state_shape(p), 53);
  Tensor<double> o(output_shape(p)), ht(state_shape(p));
  Grads<double> gr(p, c.h0);
  GdnGradView<double> gv = gr.view();
  ChunkedGdn<double, Host> cpu(p, d.view());
  cpu.forward(o.ptr(), ht.ptr());
  cpu.backward(dO.ptr(), c.dht ? dht.ptr() : nullptr, gv);

  const DeviceBuffer<T> q = on_gpu<T>(d.q), k = on_gpu<T>(d.k), v = on_gpu<T>(d.v),
                        g = on_gpu<T>(d.g), beta = on_gpu<T>(d.beta), h0 = on_gpu<T>(d.h0),
                        ddO = on_gpu<T>(dO), ddht = on_gpu<T>(dht);
  DeviceBuffer<T> go(o.data.size()), ght(ht.data.size()), gdq(gr.dq.data.size()),
      gdk(gr.dk.data.size()), gdv(gr.dv.data.size()), gdg(gr.dg.data.size()),
      gdbeta(gr.dbeta.data.size()), gdh0(gr.dh0.data.size());
  // One rank: phases 1 and 2 do not run, so nothing crosses a (host) communicator.
  SingleCommunicator comm;
  const CpContext cp = CpContext::contiguous(comm, p.T);
  GdnContextParallel<T, Cuda> op;
  op.forward(cp, p,
             {q.data(), k.data(), v.data(), g.data(), beta.data(), c.h0 ? h0.data() : nullptr},
             go.data(), ght.data());
  GdnGradView<T> ggv{gdq.data(), gdk.data(),    gdv.data(),
                     gdg.data(), gdbeta.data(), c.h0 ? gdh0.data() : nullptr};
  op.backward(cp, ddO.data(), c.dht ? ddht.data() : nullptr, ggv);

  INFO(c.name << " " << (sizeof(T) == 4 ? "fp32" : "fp64"));
  check_close("o", go, o);
  check_close("ht", ght, ht);
  check_close("dq", gdq, gr.dq);
  check_close("dk", gdk, gr.dk);
  check_close("dv", gdv, gr.dv);
  check_close("dg", gdg, gr.dg);
  check_close("dbeta", gdbeta, gr.dbeta);
  if (c.h0) check_close("dh0", gdh0, gr.dh0);
}

}  // namespace

TEST_CASE("LocalPass on the GPU equals the CPU, every phase, whole slices", "[cuda]") {
  for (const Case& c : kPassCases) {
    check_pass<double>(c, 0, c.p.T);
    check_pass<float>(c, 0, c.p.T);
  }
}

TEST_CASE("LocalPass on the GPU equals the CPU on slices that continue a sequence", "[cuda]") {
  for (const Case& c : kPassCases) {
    if (c.p.B != 1) continue;
    const std::int64_t t0 = c.p.T / 3, t1 = c.p.T - 7;  // cuts mid-chunk and mid-sequence
    check_pass<double>(c, t0, t1);
    check_pass<float>(c, t0, t1);
  }
}

TEST_CASE("LocalPass on the GPU: outputs from the kept chunk states, then backward, same bits",
          "[cuda][recompute]") {
  for (const Case& c : kPassCases) {
    check_replay<double>(c, 0, c.p.T);
    check_replay<float>(c, 0, c.p.T);
    if (c.p.B != 1) continue;
    const std::int64_t t0 = c.p.T / 3, t1 = c.p.T - 7;  // continues a sequence from h_in
    check_replay<double>(c, t0, t1);
    check_replay<float>(c, t0, t1);
  }
}

TEST_CASE("GdnContextParallel on the GPU equals the CPU op (one rank)", "[cuda]") {
  const std::vector<Case> cases = {
      {"l2norm, h0, dht, Hv = 2 Hk", make_problem(2, 130, 1, 2, 16, 24, 32, true), true, true},
      {"packed, l2norm", make_problem(1, 150, 1, 2, 16, 8, 16, true, {0, 10, 11, 80, 150}), true,
       true},
      {"no h0, no dht, C=64", make_problem(1, 90, 2, 2, 32, 32, 64), false, false},
  };
  for (const Case& c : cases) {
    check_cp<double>(c);
    check_cp<float>(c);
  }
}

TEST_CASE("the log-depth scan's local steps on the GPU equal the host's (fp64 1e-13)", "[cuda]") {
  // Three (b, h) blocks of K = 16, V = 24: start_scan in both orientations, then a map
  // composed after the started one, as cp/log_depth_scan.cpp calls them.
  const PairDims d{3, 16, 24};
  const std::size_t n = std::size_t(d.pair_elems());
  const Tensor<double> a = random_tensor<double>({d.BH, d.K, d.K + d.V}, 61),
                       b = random_tensor<double>({d.BH, d.K, d.K + d.V}, 62);
  for (bool reverse : {false, true}) {
    std::vector<double> own(n), prefix(n), tmp(n);
    start_scan(Host{}, a.ptr(), a.ptr() + d.a_elems(), d, reverse, own.data(), prefix.data());
    compose_pairs(Host{}, b.ptr(), own.data(), d, false, prefix.data(), tmp.data());
    const DeviceBuffer<double> ga = on_gpu<double>(a), gb = on_gpu<double>(b);
    DeviceBuffer<double> gown(n), gprefix(n), gtmp(n);
    start_scan(Cuda{}, ga.data(), ga.data() + d.a_elems(), d, reverse, gown.data(), gprefix.data());
    CHECK(to_host<Cuda>(gown) == own);
    compose_pairs(Cuda{}, gb.data(), gown.data(), d, false, gprefix.data(), gtmp.data());
    INFO((reverse ? "reverse" : "forward"));
    CHECK(rel_l2(to_host<Cuda>(gprefix).data(), prefix.data(), n) <= 1e-13);
    // The offsets alone: the maps stay as they were (the started own's).
    compose_pairs(Host{}, b.ptr(), own.data(), d, true, own.data(), tmp.data());
    compose_pairs(Cuda{}, gb.data(), gown.data(), d, true, gown.data(), gtmp.data());
    const std::vector<double> got = to_host<Cuda>(gown);
    CHECK(std::equal(got.begin(), got.begin() + d.a_elems(), own.begin()));
    CHECK(rel_l2(got.data() + d.a_elems(), own.data() + d.a_elems(), n - d.a_elems()) <= 1e-13);
  }
}

// The GPU output pass's o of case c on the inputs of `seed`, after set_mode() and, with bf16,
// in Precision::bf16: two calls that differ in the GEMM mode alone.
template <typename SetMode>
std::vector<float> gpu_outputs(const Case& c, std::uint64_t seed, SetMode set_mode,
                               bool bf16 = false) {
  const GdnInputs<double> d = random_gdn_inputs<double>(c.p, seed, false, 0.1);
  const DeviceBuffer<float> q = on_gpu<float>(d.q), k = on_gpu<float>(d.k), v = on_gpu<float>(d.v),
                            g = on_gpu<float>(d.g), beta = on_gpu<float>(d.beta);
  set_mode();
  GdnProblem p = c.p;
  p.precision = precision_of(bf16);
  LocalPass<float, Cuda> pass(p, 0, c.p.T,
                              {q.data(), k.data(), v.data(), g.data(), beta.data(), nullptr});
  DeviceBuffer<float> o(std::size_t(c.p.B * c.p.T * c.p.Hv * c.p.V));
  pass.output(nullptr, o.data(), nullptr);
  return to_host<Cuda>(o);
}

// The tensor-core GEMMs (pass::set_cuda_tf32, off by default): TF32 inputs keep 10 mantissa
// bits, so the passes are held to rel L2 3e-2 against the fp64 CPU instead of fp32's 1e-4
// (the chunk inverse and the state recurrence compound the 5e-4 per-input rounding; dg,
// a difference of row and column sums, is the loosest). Also checks that the switch takes
// effect: the outputs differ from the SIMT path's.
TEST_CASE("LocalPass on the GPU with TF32 tensor-core GEMMs (opt-in) is close to the CPU",
          "[cuda][tf32]") {
  struct Reset {
    ~Reset() { pass::set_cuda_tf32(false); }
  } reset;
  for (const Case& c : {kPassCases[0], kPassCases[2], kPassCases[5], kPassCases[7]}) {
    pass::set_cuda_tf32(true);
    check_pass<float>(c, 0, c.p.T, 3e-2);
    if (c.p.B == 1) check_pass<float>(c, c.p.T / 3, c.p.T - 7, 3e-2);
  }
  const Case& c = kPassCases[5];
  const std::vector<float> simt = gpu_outputs(c, 61, [] { pass::set_cuda_tf32(false); });
  const std::vector<float> tc = gpu_outputs(c, 61, [] { pass::set_cuda_tf32(true); });
  CHECK(simt != tc);
  CHECK(rel_l2(tc.data(), simt.data(), simt.size()) <= 1e-2);
}

// The bf16 tensor-core GEMMs (mma.sync m16n8k16, docs/design.md §2f), which the passes run
// in Precision::bf16: held to the TF32 case's 3e-2 against the fp64 CPU (bf16 keeps
// 8 significant bits to TF32's 11; the CPU emulation of the same GEMM order measures
// 1.6e-3 to 1.1e-2 per chunk). Also checks that the scope takes effect.
TEST_CASE("LocalPass on the GPU with bf16 tensor-core GEMMs is close to the CPU",
          "[cuda][bf16_mma]") {
  for (const Case& c :
       {kPassCases[0], kPassCases[2], kPassCases[3], kPassCases[5], kPassCases[7]}) {
    check_pass<float>(c, 0, c.p.T, 3e-2, Precision::bf16);
    if (c.p.B == 1) check_pass<float>(c, c.p.T / 3, c.p.T - 7, 3e-2, Precision::bf16);
  }
  const Case& c = kPassCases[5];
  const std::vector<float> simt = gpu_outputs(c, 62, [] {});
  const std::vector<float> tc = gpu_outputs(
      c, 62, [] {}, /*bf16=*/true);
  CHECK(simt != tc);
  CHECK(rel_l2(tc.data(), simt.data(), simt.size()) <= 2e-2);
}

// The bf16 mode's register kernels (gdn/register_*.h: prepare, the walks with their tile
// in mma accumulators, the outputs), which run at C = 64, K = 64 or 128, against the
// CudaExec kernels they replace (train.cuda_walk tiled), through every pass: the same mma
// steps in the same order with the same epilogue (mma::epilogue, no FMA contraction), so
// the same bits, as test_register_walk checks on the CPU with an emulated mma.
TEST_CASE("The register kernels on the GPU give the tiled kernels' bits", "[cuda][bf16_mma]") {
  for (const Case& c : {kPassCases[3], kPassCases[5]}) {
    GdnProblem p = c.p;
    p.precision = Precision::bf16;
    const GdnInputs<double> d = random_gdn_inputs<double>(p, 63, true, 0.1);
    const DeviceBuffer<float> h0 = on_gpu<float>(d.h0);
    const Shape bh_state = {p.B, p.Hv, p.K, p.V};
    auto run = [&](const char* walk, std::int64_t t0) {
      pass::set_cuda_walk(std::string(walk) == "tiled" ? pass::CudaWalk::tiled
                                                       : pass::CudaWalk::automatic);
      pass::reset_launch_counts();
      const Shard s{t0, p.T};
      const DeviceBuffer<float> q = on_gpu<float>(token_slice(d.q, s)),
                                k = on_gpu<float>(token_slice(d.k, s)),
                                v = on_gpu<float>(token_slice(d.v, s)),
                                g = on_gpu<float>(token_slice(d.g, s)),
                                beta = on_gpu<float>(token_slice(d.beta, s)),
                                h_in = on_gpu<float>(random_tensor<double>(bh_state, 64)),
                                lambda = on_gpu<float>(random_tensor<double>(bh_state, 65)),
                                dht = on_gpu<float>(random_tensor<double>(state_shape(p), 66)),
                                dO = on_gpu<float>(random_tensor<double>(
                                    {p.B, p.T - t0, std::int64_t(p.Hv), std::int64_t(p.V)}, 67));
      LocalPass<float, Cuda> pass(p, t0, p.T,
                                  {q.data(), k.data(), v.data(), g.data(), beta.data(), h0.data()});
      const std::size_t KV = std::size_t(p.K) * p.V, BH = std::size_t(p.B) * p.Hv;
      DeviceBuffer<float> o(dO.size()), ht(h0.size()), M(BH * p.K * p.K), U(BH * KV), D(BH * KV),
          dq(q.size()), dk(k.size()), dv(v.size()), dg(g.size()), dbeta(beta.size()),
          dh0(h0.size());
      GdnGradView<float> gv{dq.data(), dk.data(), dv.data(), dg.data(), dbeta.data(), dh0.data()};
      pass.prepare();
      pass.transition(M.data(), U.data());
      pass.output(h_in.data(), o.data(), ht.data());
      pass.adjoint(dO.data(), dht.data(), D.data());
      pass.backward(lambda.data(), dO.data(), dht.data(), gv);
      pass::set_cuda_walk(pass::CudaWalk::automatic);
      // Which path ran: every phase on the register kernels, or (tiled) none of them, with
      // train.cuda_walk tiled as the reason prepare() made no bf16 factors.
      const bool want_register = std::string(walk) == "register";
      const std::vector<pass::PhaseLaunches> launched = pass::launch_counts();
      CHECK(launched.size() == 7);
      for (const pass::PhaseLaunches& l : launched) {
        INFO(c.name << " " << walk << ": " << pass::format_launch_counts());
        CHECK((want_register ? l.tiled : l.bf16_register) == 0);
        CHECK((want_register ? l.bf16_register : l.tiled) > 0);
        const bool noted = !want_register && l.phase == "prepare";
        CHECK(l.fallback == (noted ? "train.cuda_walk tiled" : ""));
      }
      std::vector<std::vector<float>> out;
      for (const DeviceBuffer<float>* b : {&o, &ht, &M, &U, &D, &dq, &dk, &dv, &dg, &dbeta, &dh0})
        out.push_back(to_host<Cuda>(*b));
      return out;
    };
    const char* names[] = {"o", "ht", "M", "U", "D", "dq", "dk", "dv", "dg", "dbeta", "dh0"};
    for (std::int64_t t0 : {std::int64_t(0), p.T / 3}) {
      const auto tiled = run("tiled", t0), reg = run("register", t0);
      for (std::size_t x = 0; x < tiled.size(); ++x) {
        INFO(c.name << " t0 = " << t0 << ": " << names[x]);
        CHECK(bit_difference(reg[x], tiled[x]) == "");
      }
    }
  }
}
