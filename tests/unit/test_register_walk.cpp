// The GPU's bf16 register kernels (gdn/register_*.h: prepare, the walks with their tile
// in mma accumulators across chunks and cp.async stages, the outputs) run on the CPU: the
// very source the kernels run, on a block policy whose warps hold all 32 lanes' fragments
// and whose mma is emulated from the PTX ISA's tables (mma_emulation.h). Against the
// CudaExec order of operations on the emulated bf16 block GEMM (ChunkKernel::prepare and
// outputs, walk::*), which runs the same mma steps in the same k order with the same
// epilogues: every factor, entry state, final state, output, M, U, D, exit adjoint and dh0
// must be equal bit for bit. And, as an oracle of its own, within bf16's reach of the
// host's fp32 passes.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "gdn/adjoint_walk/adjoint_walk_bf16.h"
#include "gdn/adjoint_walk/adjoint_walk_tiled.h"
#include "gdn/backward/backward_bf16.h"
#include "gdn/backward/chunk_backward.h"
#include "gdn/outputs/chunk_outputs.h"
#include "gdn/outputs/outputs_bf16.h"
#include "gdn/pass/device_passes.h"
#include "gdn/prepare/prepare_bf16.h"
#include "gdn/random_inputs.h"
#include "gdn/slice_layout.h"
#include "gdn/state_walk/state_walk_bf16.h"
#include "gdn/state_walk/state_walk_tiled.h"
#include "mma_emulation.h"
#include "ops/l2norm/l2norm.h"
#include "test_support.h"

using namespace gdn;
using namespace gdn::test;

namespace {

template <typename T>
struct Lanes {
  T v[32]{};
};

struct EmulatedWarp {
  template <typename T>
  using Reg = Lanes<T>;
  template <typename F>
  auto make(F f) const {
    Lanes<decltype(f(0))> r;
    for (int lane = 0; lane < 32; ++lane) r.v[lane] = f(lane);
    return r;
  }
  template <typename F>
  void each(F f) const {
    for (int lane = 0; lane < 32; ++lane) f(lane);
  }
  template <typename T>
  T& at(Lanes<T>& r, int lane) const {
    return r.v[lane];
  }
  void mma(Lanes<mma::FragC>& d, const Lanes<mma::FragA>& a, const Lanes<mma::FragB>& b) const {
    emulate_mma(d.v, a.v, b.v);
  }
};

// The block: each phase between barriers runs warp after warp (or thread after thread),
// so sync() has nothing to wait for; copies land at once.
struct EmulatedBlock {
  using State = rwalk::State<EmulatedWarp>;
  std::vector<State> states = std::vector<State>(rwalk::kWarps);
  template <typename F>
  void warps(F f) {
    for (int w = 0; w < rwalk::kWarps; ++w) f(EmulatedWarp{}, w, states[w]);
  }
  template <typename F>
  void threads(F f) {
    for (int tid = 0; tid < rwalk::kThreads; ++tid) f(tid);
  }
  void sync() {}
  void copy16(void* dst, const void* src) { std::memcpy(dst, src, 16); }
  void commit() {}
  void wait_all() {}
};

// C rows of n elements of src from offset at (row stride `stride`), rows past `rows` zero:
// one chunk's rows as the chunk kernel takes them.
std::vector<float> chunk_rows(const std::vector<float>& src, std::int64_t at, std::int64_t stride,
                              int rows, int C, int n) {
  std::vector<float> r(std::size_t(C) * n, 0.0f);
  for (int i = 0; i < rows; ++i) std::copy_n(src.data() + at + i * stride, n, r.data() + i * n);
  return r;
}

// ChunkFactors<float> blocks as the Bf16Factors blocks the register kernels read (w, k~,
// q_g, P and u rounded to bf16, gamma as it is), or (widen) back.
std::vector<float> convert_factors(const std::vector<float>& f, int C, int K, int V, bool widen) {
  const ChunkFactors<float> cf{C, K, V};
  const Bf16Factors bf{C, K, V};
  const std::size_t from = widen ? bf.floats() : cf.size(), to = widen ? cf.size() : bf.floats();
  const std::size_t n = f.size() / from, CK = std::size_t(C) * K;
  std::vector<float> out(n * to, 0.0f);
  for (std::size_t x = 0; x < n; ++x) {
    const float* src = f.data() + x * from;
    float* dst = out.data() + x * to;
    // w, k~ and q_g lie together in both layouts; then P and u in Bf16Factors, u and P in
    // ChunkFactors.
    auto convert = [&](std::size_t wide_at, std::size_t narrow_at, std::size_t m) {
      for (std::size_t e = 0; e < m; ++e) {
        if (widen)
          dst[wide_at + e] = to_float(bf.w(src)[narrow_at + e]);
        else
          bf.w(dst)[narrow_at + e] = to_bf16(src[wide_at + e]);
      }
    };
    convert(0, 0, 3 * CK);
    convert(std::size_t(cf.P(src) - cf.w(src)), 3 * CK, std::size_t(C) * C);
    convert(3 * CK, 3 * CK + std::size_t(C) * C, std::size_t(C) * V);
    *(widen ? cf.gamma_at(dst) : bf.gamma_at(dst)) = widen ? bf.gamma(src) : cf.gamma(src);
  }
  return out;
}
std::vector<float> to_bf16_factors(const std::vector<float>& f, int C, int K, int V) {
  return convert_factors(f, C, K, V, false);
}
std::vector<float> from_bf16_factors(const std::vector<float>& f, int C, int K, int V) {
  return convert_factors(f, C, K, V, true);
}

// Entry states or exit adjoints as the register kernels keep them (PassArgs::
// bf16_entry_state): bf16 in the first half of a float buffer; NaN where n is given.
std::vector<float> to_bf16_states(const std::vector<float>& x) {
  std::vector<float> out((x.size() + 1) / 2);
  Bf16* h = reinterpret_cast<Bf16*>(out.data());
  for (std::size_t i = 0; i < x.size(); ++i) h[i] = to_bf16(x[i]);
  return out;
}
std::vector<float> bf16_nan_states(std::size_t n) {
  return to_bf16_states(std::vector<float>(n, NAN));
}
std::vector<float> from_bf16_states(const std::vector<float>& x, std::size_t n) {
  std::vector<float> out(n);
  const Bf16* h = reinterpret_cast<const Bf16*>(x.data());
  for (std::size_t i = 0; i < n; ++i) out[i] = to_float(h[i]);
  return out;
}

// `packed` (Bf16Factors blocks) with the T = (I + L)^{-1} sections of `from`'s blocks, which
// ChunkFactors blocks have no counterpart of (convert_factors leaves them zero).
std::vector<float> with_inverse_of(std::vector<float> packed, const std::vector<float>& from, int C,
                                   int K, int V) {
  const Bf16Factors bf{C, K, V};
  for (std::size_t x = 0; x < packed.size(); x += bf.floats())
    std::copy_n(bf.Tinv(from.data() + x), std::size_t(C) * C, bf.Tinv(packed.data() + x));
  return packed;
}

// a's arguments with the same factors as Bf16Factors blocks in `packed`.
PassArgs<float> with_bf16_factors(PassArgs<float> a, std::vector<float>& packed) {
  a.factors = packed.data();
  a.fsize = Bf16Factors{a.C, a.K, a.V}.floats();
  a.bf16_factors = true;
  return a;
}

struct WalkCase {
  const char* name;
  GdnProblem p;
  std::int64_t t0, t1;
  int bv;
  std::vector<std::int64_t> forget;  // tokens with g = -inf
  // The bf16 op's form: the register kernels read q, k, v, beta and dO and write o in bf16
  // (PassArgs::io), normalising q and k where l2norm is set.
  bool bf16_io = false, l2norm = false;
};

// The bf16 tensors of a bf16_io case, and x made the float values every other path reads
// (widened; rows of `norm` elements normalised by l2norm_row where norm > 0).
std::vector<Bf16> to_bf16_io(std::vector<float>& x, int norm) {
  std::vector<Bf16> h(x.size());
  for (std::size_t e = 0; e < x.size(); ++e) {
    h[e] = to_bf16(x[e]);
    x[e] = to_float(h[e]);
  }
  if (norm > 0)
    for (std::size_t r = 0; r < x.size(); r += norm) l2norm_row(x.data() + r, norm, x.data() + r);
  return h;
}

void check_walks(const WalkCase& c) {
  const GdnProblem& p = c.p;
  const int B = p.B, Hv = p.Hv, K = p.K, V = p.V, C = p.chunk_size, bv = c.bv;
  GdnInputs<float> d = random_gdn_inputs<float>(p, 17, true, 0.3);
  for (std::int64_t b = 0; b < B; ++b)
    for (const std::int64_t t : c.forget)
      for (int h = 0; h < Hv; ++h)
        d.g.data[(b * p.T + t) * Hv + h] = -std::numeric_limits<float>::infinity();
  std::vector<float> q = token_slice(d.q, c.t0, c.t1).data, k = token_slice(d.k, c.t0, c.t1).data,
                     v = token_slice(d.v, c.t0, c.t1).data, g = token_slice(d.g, c.t0, c.t1).data,
                     beta = token_slice(d.beta, c.t0, c.t1).data;
  const SliceLayout L(p, c.t0, c.t1);
  // Chunk ci of bh's rows, zero-padded to C, as ChunkKernel takes them.
  struct Rows {
    std::vector<float> q, k, v, g, beta;
    ChunkRows<float> view() const { return {q.data(), k.data(), v.data(), g.data(), beta.data()}; }
  };
  auto rows_of = [&](const rwalk::RowsAt& at) {
    return Rows{chunk_rows(q, at.qk, at.qk_stride, at.rows, C, K),
                chunk_rows(k, at.qk, at.qk_stride, at.rows, C, K),
                chunk_rows(v, at.v, at.v_stride, at.rows, C, V),
                chunk_rows(g, at.gb, at.gb_stride, at.rows, C, 1),
                chunk_rows(beta, at.gb, at.gb_stride, at.rows, C, 1)};
  };
  const std::int64_t nc = std::int64_t(L.chunks.size()), BH = std::int64_t(B) * Hv;
  const std::size_t fsize = ChunkFactors<float>{C, K, V}.size(), KV = std::size_t(K) * V;
  std::vector<float> factors(BH * nc * fsize), want_states(BH * nc * KV, NAN);
  std::vector<float> got_states = bf16_nan_states(want_states.size());
  Rng rng(3);
  auto random = [&rng](std::size_t n) {
    std::vector<float> x(n);
    for (float& e : x) e = float(0.5 * rng.normal());
    return x;
  };
  const std::size_t n_ht = std::size_t(p.num_sequences()) * Hv * KV;
  const std::vector<float> h_in = random(BH * KV), lambda = random(BH * KV), dht = random(n_ht);
  std::vector<float> dO = random(std::size_t(BH) * (c.t1 - c.t0) * V);
  std::vector<Bf16> q16, k16, v16, beta16, dO16, o16;
  Bf16Io io;
  if (c.bf16_io) {
    const int norm = c.l2norm ? K : 0;
    q16 = to_bf16_io(q, norm), k16 = to_bf16_io(k, norm), v16 = to_bf16_io(v, 0);
    beta16 = to_bf16_io(beta, 0), dO16 = to_bf16_io(dO, 0);
    o16.assign(std::size_t(B) * (c.t1 - c.t0) * Hv * V, Bf16{0x7fc0});  // NaN
    io = {q16.data(), k16.data(), v16.data(), beta16.data(), dO16.data(), o16.data(), c.l2norm};
  }
  // The register kernels' view of the inputs: through io alone in a bf16_io case.
  auto registers = [&](PassArgs<float> r) {
    r.io = io;
    if (c.bf16_io) r.in.q = r.in.k = r.in.v = r.in.beta = nullptr;
    return r;
  };
  const float* dO_reg = c.bf16_io ? nullptr : dO.data();
  std::vector<float> want_exits(want_states.size(), NAN),
      got_exits = bf16_nan_states(want_exits.size());
  PassArgs<float> a{B,
                    p.Hk,
                    Hv,
                    K,
                    V,
                    C,
                    p.group(),
                    !p.cu_seqlens.empty(),
                    c.t1 - c.t0,
                    std::int64_t(L.segments.size()),
                    nc,
                    L.segments.data(),
                    L.chunks.data(),
                    {q.data(), k.data(), v.data(), g.data(), beta.data(), d.h0.ptr()},
                    float(p.scale_value()),
                    fsize,
                    factors.data(),
                    true,
                    want_states.data(),
                    nullptr,
                    want_exits.data(),
                    ChunkGemm::kBf16,
                    false,
                    {}};
  pass::prepare(Host{}, a);
  // The bf16 mode's u, rounded as ChunkKernel::wy rounds it on a bf16 GEMM.
  for (std::size_t x = 0; x < factors.size(); x += fsize) {
    float* u = ChunkFactors<float>{C, K, V}.u(factors.data() + x);
    for (int e = 0; e < C * V; ++e) u[e] = to_float(to_bf16(u[e]));
  }
  REQUIRE(rwalk::supported(C, K, V, bv));

  // The tiled walks on the emulated bf16 block GEMM.
  std::vector<float> want_ht(n_ht, 7.0f), want_M(BH * K * K), want_U(BH * KV), want_D(BH * KV),
      want_dh0(n_ht, 7.0f);
  ChunkKernel<float, Bf16MmaExec> math(C, K, V, a.scale, nullptr);
  std::vector<float> tile(walk::tile_elems(K, C, bv));
  const std::int64_t state_jobs = BH * walk::tiles(V, bv);
  const std::int64_t transition_jobs = BH * (walk::tiles(K, bv) + walk::tiles(V, bv));
  for (std::int64_t job = 0; job < state_jobs; ++job)
    walk::state_walk(math, Bf16MmaExec{}, a, h_in.data(), want_ht.data(), bv, job, tile.data());
  for (std::int64_t job = 0; job < transition_jobs; ++job)
    walk::transition(math, Bf16MmaExec{}, a, want_M.data(), want_U.data(), bv, job, tile.data());
  for (std::int64_t job = 0; job < state_jobs; ++job) {
    walk::adjoint(math, Bf16MmaExec{}, a, dO.data(), dht.data(), want_D.data(), bv, job,
                  tile.data());
    walk::backward_walk(math, Bf16MmaExec{}, a, lambda.data(), dO.data(), dht.data(),
                        want_dh0.data(), bv, job, tile.data());
  }

  // ChunkKernel::outputs on the emulated bf16 GEMM, each chunk from its entry state.
  const std::int64_t Tl = c.t1 - c.t0;
  std::vector<float> want_o(std::size_t(B) * Tl * Hv * V, NAN), got_o = want_o;
  {
    std::vector<float> ws(ChunkKernel<float, Bf16MmaExec>::workspace_size(C, K, V)),
        ob(std::size_t(C) * V);
    ChunkKernel<float, Bf16MmaExec> full(C, K, V, a.scale, ws.data());
    for (int bh = 0; bh < BH; ++bh)
      for (std::int64_t ci = 0; ci < nc; ++ci) {
        full.outputs(a.factors_of(bh, ci), a.entry_state(bh, ci), ob.data());
        const std::int64_t t = std::int64_t(bh / Hv) * Tl + L.chunks[ci].begin;
        for (int i = 0; i < L.chunks[ci].rows; ++i)
          std::copy_n(ob.data() + std::size_t(i) * V, V,
                      want_o.data() + ((t + i) * Hv + bh % Hv) * V);
      }
  }

  // The register walks, every job on one emulated block, on the factors in bf16.
  std::vector<float> packed = to_bf16_factors(factors, C, K, V);
  PassArgs<float> r = registers(with_bf16_factors(a, packed));
  r.states = got_states.data();
  r.adjoints = got_exits.data();
  std::vector<float> got_ht(n_ht, 7.0f), got_M(want_M.size(), NAN), got_U(want_U.size(), NAN),
      got_D(want_D.size(), NAN), got_dh0(n_ht, 7.0f);
  std::vector<unsigned char> smem(
      std::max({rwalk::StateLayout{K, bv}.bytes(), rwalk::AdjointLayout{K, bv}.bytes(),
                rwalk::OutputLayout{K, bv}.bytes()}),
      0xff);
  EmulatedBlock blk;
  for (std::int64_t job = 0; job < state_jobs; ++job)
    rwalk::state_walk(blk, r, h_in.data(), got_ht.data(), bv, job, smem.data());
  for (std::int64_t job = 0; job < transition_jobs; ++job)
    rwalk::transition(blk, r, got_M.data(), got_U.data(), bv, job, smem.data());
  for (std::int64_t job = 0; job < rwalk::output_jobs(r, bv); ++job)
    rwalk::outputs(blk, r, got_o.data(), bv, job, smem.data());
  for (std::int64_t job = 0; job < state_jobs; ++job) {
    rwalk::adjoint(blk, r, dO_reg, dht.data(), got_D.data(), bv, job, smem.data());
    rwalk::backward_walk(blk, r, lambda.data(), dO_reg, dht.data(), got_dh0.data(), bv, job,
                         smem.data());
  }
  if (c.bf16_io)  // o in bf16: the float o rounded once
    for (std::size_t x = 0; x < o16.size(); ++x) {
      got_o[x] = to_float(o16[x]);
      want_o[x] = to_float(to_bf16(want_o[x]));
    }

  // The factors: ChunkKernel::prepare on the emulated GEMM, chunk by chunk, against the
  // register prepare's jobs (each factor rounded as the register kernels store it), and
  // both against the host's fp32 factors.
  std::vector<float> want_f(factors.size(), 0.0f), got_f = to_bf16_factors(want_f, C, K, V);
  {
    std::vector<float> ws(ChunkKernel<float, Bf16GroupExec>::workspace_size(C, K, V));
    ChunkKernel<float, Bf16GroupExec> math(C, K, V, a.scale, ws.data());
    for (int bh = 0; bh < BH; ++bh)
      for (std::int64_t ci = 0; ci < nc; ++ci) {
        const rwalk::RowsAt at = rwalk::rows_at(a, bh, ci);
        math.prepare(rows_of(at).view(), want_f.data() + (std::size_t(bh) * nc + ci) * fsize);
      }
    const PassArgs<float> r = registers(with_bf16_factors(a, got_f));
    std::vector<unsigned char> smem(rwalk::PrepareLayout{K, V}.bytes(), 0xff);
    EmulatedBlock blk;
    for (std::int64_t job = 0; job < BH * nc; ++job) rwalk::prepare(blk, r, job, smem.data());
  }

  // The backward's chunk jobs: ChunkKernel::backward on the emulated GEMM, chunk by chunk,
  // from the walks' entry states and exit adjoints, against the two register kernels. Both
  // take the bf16 factors (ChunkKernel::backward makes them again; the kernels read them).
  const std::int64_t qk_elems = std::int64_t(B) * Tl * p.Hk * K;
  const std::size_t n_qkv = std::size_t(p.group()) * qk_elems, n_v = std::size_t(B) * Tl * Hv * V,
                    n_gb = std::size_t(B) * Tl * Hv;
  std::vector<float> want_dqv(n_qkv, NAN), want_dkv(n_qkv, NAN), want_dv(n_v, NAN),
      want_dg(n_gb, NAN), want_dbeta(n_gb, NAN);
  std::vector<float> got_dqv = want_dqv, got_dkv = want_dkv, got_dv = want_dv, got_dg = want_dg,
                     got_dbeta = want_dbeta;
  {
    PassArgs<float> r = a;
    r.factors = want_f.data();
    // T from the register prepare (ChunkKernel::backward inverts again: the outputs' bits
    // below check that the stored T is its T rounded).
    std::vector<float> want_packed =
        with_inverse_of(to_bf16_factors(want_f, C, K, V), got_f, C, K, V);
    // The walks' states as the register kernels keep them (the tiled walks' are rounded).
    std::vector<float> states16 = to_bf16_states(want_states), exits16 = to_bf16_states(want_exits);
    PassArgs<float> rb = registers(with_bf16_factors(r, want_packed));
    rb.states = states16.data();
    rb.adjoints = exits16.data();
    std::vector<float> ws(ChunkKernel<float, Bf16GroupExec>::workspace_size(C, K, V));
    ChunkKernel<float, Bf16GroupExec> math(C, K, V, a.scale, ws.data());
    std::vector<float> dh(KV), dq(std::size_t(C) * K), dk(dq.size()), dv(std::size_t(C) * V), dg(C),
        db(C);
    for (int bh = 0; bh < BH; ++bh)
      for (std::int64_t ci = 0; ci < nc; ++ci) {
        const rwalk::RowsAt at = rwalk::rows_at(r, bh, ci);
        const std::vector<float> rdO = chunk_rows(dO, at.v, at.v_stride, at.rows, C, V);
        std::copy_n(r.exit_adjoint(bh, ci), KV, dh.data());
        math.backward(rows_of(at).view(), r.entry_state(bh, ci), rdO.data(), dh.data(),
                      {dq.data(), dk.data(), dv.data(), dg.data(), db.data()});
        const std::int64_t head = rwalk::head_rows(r, bh, at);
        for (int i = 0; i < at.rows; ++i) {
          std::copy_n(dq.data() + i * K, K, want_dqv.data() + head + i * at.qk_stride);
          std::copy_n(dk.data() + i * K, K, want_dkv.data() + head + i * at.qk_stride);
          std::copy_n(dv.data() + i * V, V, want_dv.data() + at.v + i * at.v_stride);
          want_dg[at.gb + i * at.gb_stride] = dg[i];
          want_dbeta[at.gb + i * at.gb_stride] = db[i];
        }
      }
    const rwalk::ProductsLayout l1{K, V};
    const rwalk::WyLayout l2{K, V};
    std::vector<unsigned char> smem(std::max(l1.bytes(), l2.bytes()), 0xff);
    std::vector<float> handoff(rwalk::BackwardHandoff{K, V}.floats(), NAN);
    GdnGradView<float> gr;
    gr.dv = got_dv.data();
    gr.dg = got_dg.data();
    gr.dbeta = got_dbeta.data();
    EmulatedBlock blk;
    for (std::int64_t job = 0; job < BH * nc; ++job) {
      rwalk::backward_products(blk, rb, dO_reg, got_dqv.data(), got_dkv.data(), handoff.data(), job,
                               smem.data());
      std::fill(smem.begin(), smem.end(), 0xff);  // part 2 finds nothing of part 1's
      rwalk::backward_wy(blk, rb, gr, got_dqv.data(), got_dkv.data(), handoff.data(), job,
                         smem.data());
    }
  }

  INFO(c.name);
  CHECK(bit_difference(got_dqv, want_dqv) == "");
  CHECK(bit_difference(got_dkv, want_dkv) == "");
  CHECK(bit_difference(got_dv, want_dv) == "");
  CHECK(bit_difference(got_dg, want_dg) == "");
  CHECK(bit_difference(got_dbeta, want_dbeta) == "");
  CHECK(bit_difference(got_f, with_inverse_of(to_bf16_factors(want_f, C, K, V), got_f, C, K, V)) ==
        "");
  // T = (I + L)^{-1} of a strictly lower L: unit lower triangular.
  std::size_t not_unit_lower = 0;
  for (std::size_t x = 0; x < got_f.size(); x += Bf16Factors{C, K, V}.floats()) {
    const Bf16* T = Bf16Factors{C, K, V}.Tinv(got_f.data() + x);
    for (int i = 0; i < C; ++i)
      for (int j = i; j < C; ++j)
        not_unit_lower += to_float(T[i * C + j]) != (i == j ? 1.0f : 0.0f);
  }
  CHECK(not_unit_lower == 0);
  // ChunkKernel::prepare on a bf16 GEMM rounds u itself (so the tiled kernels read the u
  // the register kernels keep): every u is a bf16 value already.
  std::size_t unrounded = 0;
  for (std::size_t x = 0; x < want_f.size(); x += fsize)
    for (int e = 0; e < C * V; ++e) {
      const float u = ChunkFactors<float>{C, K, V}.u(want_f.data() + x)[e];
      unrounded += u != to_float(to_bf16(u));
    }
  CHECK(unrounded == 0);
  const std::vector<float> got_wide = from_bf16_factors(got_f, C, K, V);
  CHECK(rel_l2(got_wide.data(), factors.data(), factors.size()) < 3e-2);
  // The kept states in bf16, and the tiled walks' float copies rounded alike
  // (walk::store_kept on a bf16 GEMM), so the backward's chunk jobs read the same values.
  CHECK(bit_difference(from_bf16_states(got_states, want_states.size()), want_states) == "");
  CHECK(bit_difference(from_bf16_states(to_bf16_states(want_states), want_states.size()),
                       want_states) == "");
  CHECK(bit_difference(from_bf16_states(to_bf16_states(want_exits), want_exits.size()),
                       want_exits) == "");
  CHECK(bit_difference(got_ht, want_ht) == "");
  CHECK(bit_difference(got_M, want_M) == "");
  CHECK(bit_difference(got_U, want_U) == "");
  CHECK(bit_difference(got_o, want_o) == "");
  CHECK(bit_difference(got_D, want_D) == "");
  CHECK(bit_difference(from_bf16_states(got_exits, want_exits.size()), want_exits) == "");
  CHECK(bit_difference(got_dh0, want_dh0) == "");

  // The host's fp32 passes: the same quantities to bf16 accuracy.
  PassArgs<float> h = a;
  std::vector<float> host_states(want_states.size()), host_ht(n_ht, 7.0f), host_o(want_o.size());
  std::vector<float> host_M(want_M.size()), host_U(want_U.size()), host_D(want_D.size());
  h.states = host_states.data();
  h.adjoints = nullptr;
  h.gemm = ChunkGemm::kFp32;
  pass::output(Host{}, h, h_in.data(), host_o.data(), host_ht.data());
  pass::transition(Host{}, h, host_M.data(), host_U.data());
  pass::adjoint(Host{}, h, dO.data(), dht.data(), host_D.data());
  CHECK(rel_l2(from_bf16_states(got_states, host_states.size()).data(), host_states.data(),
               host_states.size()) < 3e-2);
  CHECK(rel_l2(got_ht.data(), host_ht.data(), host_ht.size()) < 3e-2);
  CHECK(rel_l2(got_M.data(), host_M.data(), host_M.size()) < 3e-2);
  CHECK(rel_l2(got_U.data(), host_U.data(), host_U.size()) < 3e-2);
  CHECK(rel_l2(got_o.data(), host_o.data(), host_o.size()) < 3e-2);
  CHECK(rel_l2(got_D.data(), host_D.data(), host_D.size()) < 3e-2);
  // The whole fp32 backward on the host (its fused walk), from the same adjoints: dq and dk
  // summed over each key head's value heads, as the CUDA pass sums dqv and dkv.
  GdnGradView<float> hg;
  std::vector<float> host_dq(qk_elems), host_dk(qk_elems), host_dv(n_v), host_dg(n_gb),
      host_db(n_gb), host_dh0(n_ht), hqv(std::max<std::size_t>(1, n_qkv - qk_elems)),
      hkv(hqv.size());
  hg.dq = host_dq.data(), hg.dk = host_dk.data(), hg.dv = host_dv.data();
  hg.dg = host_dg.data(), hg.dbeta = host_db.data(), hg.dh0 = host_dh0.data();
  pass::backward(Host{}, h, lambda.data(), dO.data(), dht.data(), hg, hqv.data(), hkv.data());
  std::vector<float> sum_dq(qk_elems, 0.0f), sum_dk(qk_elems, 0.0f);
  for (int j = 0; j < p.group(); ++j)
    for (std::int64_t x = 0; x < qk_elems; ++x) {
      sum_dq[x] += got_dqv[j * qk_elems + x];
      sum_dk[x] += got_dkv[j * qk_elems + x];
    }
  CHECK(rel_l2(sum_dq.data(), host_dq.data(), host_dq.size()) < 3e-2);
  CHECK(rel_l2(sum_dk.data(), host_dk.data(), host_dk.size()) < 3e-2);
  CHECK(rel_l2(got_dv.data(), host_dv.data(), host_dv.size()) < 3e-2);
  CHECK(rel_l2(got_dg.data(), host_dg.data(), host_dg.size()) < 3e-2);
  CHECK(rel_l2(got_dbeta.data(), host_db.data(), host_db.size()) < 3e-2);
}

}  // namespace

TEST_CASE("The register kernels equal the CudaExec order on the bf16 GEMM, bit for bit",
          "[register_walk][mma]") {
  const std::vector<WalkCase> cases = {
      // One sequence continuing through the slice: M walked from I, U from 0, h_in.
      {"K = V = 128, BV = 64, inside one sequence",
       make_problem(2, 300, 1, 2, 128, 128),
       30,
       230,
       64,
       {}},
      // Whole sequences from h0 with forgotten rows (gamma = 0): ht, M = 0, U from h0.
      {"K = V = 128, BV = 32, whole, -inf rows",
       make_problem(1, 150, 1, 2, 128, 128),
       0,
       150,
       32,
       {5, 64, 140}},
      // Packed documents cut by the slice at both ends.
      {"K = V = 64, BV = 32, packed",
       make_problem(1, 300, 1, 2, 64, 64, 64, false, {0, 70, 71, 200, 300}),
       50,
       260,
       32,
       {}},
      {"K = 64, V = 128, BV = 64, Hv = 2 Hk", make_problem(1, 140, 1, 2, 64, 128), 0, 140, 64, {}},
      // The bf16 op's form: bf16 tensors through PassArgs::io, q and k normalised inside.
      {"K = V = 128, BV = 32, bf16 tensors, l2norm",
       make_problem(2, 150, 1, 2, 128, 128),
       20,
       150,
       32,
       {70},
       true,
       true},
      {"K = 64, V = 128, BV = 64, bf16 tensors, packed",
       make_problem(1, 300, 1, 2, 64, 128, 64, false, {0, 70, 71, 200, 300}),
       50,
       260,
       64,
       {},
       true,
       false},
  };
  for (const WalkCase& c : cases) check_walks(c);
}

TEST_CASE("The register kernels take only the shapes they are written for", "[register_walk]") {
  CHECK(rwalk::supported(64, 128, 128, 64));
  CHECK(rwalk::supported(64, 64, 96, 32));
  CHECK_FALSE(rwalk::supported(32, 128, 128, 64));  // C
  CHECK_FALSE(rwalk::supported(64, 96, 128, 64));   // K
  CHECK_FALSE(rwalk::supported(64, 128, 96, 64));   // ragged tiles
  CHECK_FALSE(rwalk::supported(64, 128, 128, 16));  // bv
  // The largest jobs' shared memory fits an H200's 227 KiB per block.
  CHECK(rwalk::StateLayout{128, 64}.bytes() <= 227 * 1024);
  CHECK(rwalk::AdjointLayout{128, 64}.bytes() <= 227 * 1024);
  CHECK(3 * rwalk::OutputLayout{128, 64}.bytes() <= 227 * 1024);  // three blocks per SM
  CHECK(2 * rwalk::PrepareLayout{128, 128}.bytes() <= 227 * 1024);
  CHECK(rwalk::ProductsLayout{128, 128}.bytes() <= 227 * 1024);
  CHECK(rwalk::WyLayout{128, 128}.bytes() <= 227 * 1024);
  CHECK(rwalk::prepare_supported(64, 128, 128));
  CHECK_FALSE(rwalk::prepare_supported(64, 128, 96));  // V not a multiple of 64
}
