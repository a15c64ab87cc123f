// ChunkKernel is one source for the CPU (HostExec) and the GPU (CudaExec). These tests
// check, on the CPU, that its math does not depend on how an Exec runs it:
//  - RefExec: one thread, a naive triple-loop GEMM instead of the blocked la::gemm;
//  - ThreadedExec: N std::threads emulating the threads of one CUDA block, with a
//    std::barrier for __syncthreads and block_gemm (the GEMM CudaExec runs). This walks
//    the non-serial code paths (split loops, barriers, thread-0 sections) that the GPU
//    takes, so a missing barrier or a race shows up here as a wrong result.
// Each runs prepare, step, compose, adjoint and backward on one chunk and must match
// HostExec (itself checked against the token recurrence by test_chunked).
#include <barrier>
#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "core/rng.h"
#include "gdn/adjoint_walk/adjoint_walk_tiled.h"
#include "gdn/backward/chunk_backward.h"
#include "gdn/chunk/host_exec.h"
#include "gdn/chunk/tiled_gemm.h"
#include "gdn/outputs/chunk_outputs.h"
#include "gdn/pass/local_pass.h"
#include "gdn/prepare/chunk_prepare.h"
#include "gdn/random_inputs.h"
#include "gdn/slice_layout.h"
#include "gdn/state_walk/state_walk_tiled.h"
#include "mma_emulation.h"
#include "slice_reference.h"
#include "test_support.h"

using namespace gdn;
using namespace gdn::test;

namespace {

struct RefExec {
  static constexpr bool serial = true;
  static constexpr int tid() { return 0; }
  static constexpr int nthreads() { return 1; }
  static void sync() {}
  template <typename T>
  static void gemm(bool ta, bool tb, int m, int n, int k, T alpha, const T* A, int lda, const T* B,
                   int ldb, T beta, T* C, int ldc, Structure = Structure::kDense) {
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        T acc = 0;
        for (int p = 0; p < k; ++p)
          acc += (ta ? A[p * lda + i] : A[i * lda + p]) * (tb ? B[j * ldb + p] : B[p * ldb + j]);
        C[i * ldc + j] = (beta == T(0) ? T(0) : beta * C[i * ldc + j]) + alpha * acc;
      }
  }
};

// After each barrier a thread yields a pseudo-random number of times, so the threads run
// each stretch between barriers out of step: code that reads another thread's results
// without a barrier in between then reads them too early, and the results differ.
struct ThreadedExec {
  static constexpr bool serial = false;
  int t, n;
  std::barrier<>* bar;
  mutable unsigned state = 0;
  int tid() const { return t; }
  int nthreads() const { return n; }
  void sync() const {
    bar->arrive_and_wait();
    state = state * 1664525u + 1013904223u + unsigned(t) * 2654435761u;
    for (unsigned i = 0; i < (state >> 28); ++i) std::this_thread::yield();
  }
  template <typename T>
  void gemm(bool ta, bool tb, int m, int nn, int k, T alpha, const T* A, int lda, const T* B,
            int ldb, T beta, T* C, int ldc, Structure = Structure::kDense) const {
    sync();
    block_gemm<T>(t, n, ta, tb, m, nn, k, alpha, A, lda, B, ldb, beta, C, ldc);
    sync();
  }
};

// One chunk's inputs (rows past `valid` zero-padded, as the passes gather them) and the
// buffers every kernel call reads and updates.
template <typename T>
struct ChunkCase {
  int C, K, V, valid;
  T scale;
  std::vector<T> q, k, v, g, beta, dO, h, M, mu, dh;  // inputs and in-out states
  std::vector<T> f, o, dq, dk, dv, dg, dbeta, hb;     // outputs

  ChunkCase(int C_, int K_, int V_, int valid_, std::uint64_t seed)
      : C(C_), K(K_), V(V_), valid(valid_), scale(T(1 / std::sqrt(double(K_)))) {
    Rng rng(seed);
    auto rows = [&](std::vector<T>& x, int width, auto gen) {
      x.assign(std::size_t(C) * width, T(0));
      for (int i = 0; i < valid; ++i)
        for (int d = 0; d < width; ++d) x[i * width + d] = T(gen());
    };
    auto full = [&](std::vector<T>& x, std::size_t n) {
      x.resize(n);
      for (T& e : x) e = T(rng.normal());
    };
    const double ks = 1 / std::sqrt(double(K));
    rows(q, K, [&] { return rng.normal() * ks; });
    rows(k, K, [&] { return rng.normal() * ks; });
    rows(v, V, [&] { return rng.normal(); });
    rows(g, 1, [&] { return -std::log1p(std::exp(rng.normal())) * 0.3; });
    rows(beta, 1, [&] { return 1 / (1 + std::exp(-rng.normal())); });
    rows(dO, V, [&] { return rng.normal(); });
    full(h, std::size_t(K) * V);
    full(M, std::size_t(K) * K);
    full(mu, std::size_t(K) * V);
    full(dh, std::size_t(K) * V);
    f.assign(ChunkFactors<T>{C, K, V}.size(), T(0));
    o.assign(std::size_t(C) * V, T(0));
    for (auto* x : {&dq, &dk}) x->assign(std::size_t(C) * K, T(0));
    dv.assign(std::size_t(C) * V, T(0));
    for (auto* x : {&dg, &dbeta}) x->assign(C, T(0));
    hb = h;  // the state entering the chunk, for backward (step updates h)
  }

  // Every call of ChunkKernel in the order the passes use them; all threads of an Exec
  // call it with the same arguments.
  template <typename Exec>
  void run(Exec ex, T* workspace) {
    ChunkKernel<T, Exec> math(C, K, V, scale, workspace, ex);
    const ChunkRows<T> r{q.data(), k.data(), v.data(), g.data(), beta.data()};
    math.prepare(r, f.data());
    math.step(f.data(), h.data(), o.data());
    math.compose(f.data(), M.data());
    math.adjoint(f.data(), mu.data(), dO.data());
    math.backward(r, hb.data(), dO.data(), dh.data(),
                  {dq.data(), dk.data(), dv.data(), dg.data(), dbeta.data()});
  }

  std::vector<std::pair<const char*, const std::vector<T>*>> results() const {
    return {{"factors", &f}, {"o", &o},   {"h", &h},   {"M", &M},   {"mu", &mu},      {"dh", &dh},
            {"dq", &dq},     {"dk", &dk}, {"dv", &dv}, {"dg", &dg}, {"dbeta", &dbeta}};
  }
};

template <typename T>
ChunkCase<T> run_host(ChunkCase<T> c) {
  std::vector<T> ws(ChunkKernel<T, HostExec>::workspace_size(c.C, c.K, c.V));
  c.run(HostExec{}, ws.data());
  return c;
}

template <typename T>
ChunkCase<T> run_ref(ChunkCase<T> c) {
  std::vector<T> ws(ChunkKernel<T, RefExec>::workspace_size(c.C, c.K, c.V));
  c.run(RefExec{}, ws.data());
  return c;
}

// N threads share one workspace, as the threads of a CUDA block share its scratch. The
// workspace starts as NaN so that reading scratch nobody wrote shows up.
template <typename T>
ChunkCase<T> run_threaded(ChunkCase<T> c, int n) {
  std::vector<T> ws(ChunkKernel<T, ThreadedExec>::workspace_size(c.C, c.K, c.V),
                    std::numeric_limits<T>::quiet_NaN());
  std::barrier<> bar(n);
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t)
    threads.emplace_back([&c, &ws, &bar, t, n] { c.run(ThreadedExec{t, n, &bar}, ws.data()); });
  for (auto& th : threads) th.join();
  return c;
}

template <typename T>
void check_same(const ChunkCase<T>& got, const ChunkCase<T>& want, double tol) {
  const auto a = got.results(), b = want.results();
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].first);
    CHECK(rel_l2(a[i].second->data(), b[i].second->data(), b[i].second->size()) <= tol);
  }
}

struct Shape3 {
  int C, K, V, valid;
};
// C = 16 (the inverse's base case), 32, 64 and 128 (one to three levels of blocking), K != V,
// K = V = 128 (Qwen3-Next's heads), and partial chunks (zero-padded rows, as at the end of a
// segment).
const std::vector<Shape3> kShapes = {{16, 8, 24, 16},  {32, 16, 16, 19},     {64, 32, 16, 64},
                                     {64, 16, 40, 37}, {128, 128, 128, 128}, {128, 32, 64, 77}};

}  // namespace

TEST_CASE("ChunkKernel does not depend on the GEMM (naive reference GEMM)", "[chunk_kernel]") {
  for (const Shape3& s : kShapes) {
    INFO("C=" << s.C << " K=" << s.K << " V=" << s.V << " valid=" << s.valid);
    const ChunkCase<double> c(s.C, s.K, s.V, s.valid, 11);
    check_same(run_ref(c), run_host(c), 1e-12);
  }
}

TEST_CASE("ChunkKernel on N emulated block threads matches one thread", "[chunk_kernel]") {
  for (const Shape3& s : kShapes)
    for (int n : {1, 3, 8, 37}) {
      INFO("C=" << s.C << " K=" << s.K << " V=" << s.V << " valid=" << s.valid << " threads=" << n);
      const ChunkCase<double> c(s.C, s.K, s.V, s.valid, 12);
      check_same(run_threaded(c, n), run_host(c), 1e-12);
      const ChunkCase<float> cf(s.C, s.K, s.V, s.valid, 12);
      check_same(run_threaded(cf, n), run_host(cf), 2e-5);
    }
}

TEST_CASE("HostExec is the serial policy ChunkMath runs", "[chunk_kernel]") {
  // ChunkMath (what LocalPass uses) is ChunkKernel<T, HostExec> with an owned workspace.
  const ChunkCase<double> c(32, 16, 8, 30, 13);
  ChunkCase<double> viaMath = c;
  ChunkMath<double> math(c.C, c.K, c.V, c.scale);
  const ChunkRows<double> r{viaMath.q.data(), viaMath.k.data(), viaMath.v.data(), viaMath.g.data(),
                            viaMath.beta.data()};
  math.prepare(r, viaMath.f.data());
  math.step(viaMath.f.data(), viaMath.h.data(), viaMath.o.data());
  math.compose(viaMath.f.data(), viaMath.M.data());
  math.adjoint(viaMath.f.data(), viaMath.mu.data(), viaMath.dO.data());
  math.backward(r, viaMath.hb.data(), viaMath.dO.data(), viaMath.dh.data(),
                {viaMath.dq.data(), viaMath.dk.data(), viaMath.dv.data(), viaMath.dg.data(),
                 viaMath.dbeta.data()});
  check_same(viaMath, run_host(c), 0.0);
}

namespace {

// A column tile [c0, c0 + n) of a rows x width row-major matrix, copied out (dense, leading
// dimension n, as a GPU block holds it in shared memory) and back.
template <typename T>
std::vector<T> tile_of(const std::vector<T>& x, int rows, int width, int c0, int n) {
  std::vector<T> t(std::size_t(rows) * n);
  for (int i = 0; i < rows; ++i)
    for (int d = 0; d < n; ++d) t[std::size_t(i) * n + d] = x[std::size_t(i) * width + c0 + d];
  return t;
}
template <typename T>
void put_tile(const std::vector<T>& t, int rows, int width, int c0, int n, std::vector<T>& x) {
  for (int i = 0; i < rows; ++i)
    for (int d = 0; d < n; ++d) x[std::size_t(i) * width + c0 + d] = t[std::size_t(i) * n + d];
}

// step / compose / adjoint tile by tile (step_cols, compose_cols, adjoint_cols) with
// HostExec, against the full-width forms on the same factors. Half the tiles work on a
// dense copy of the tile (the GPU's shared-memory tile), half in place (leading dimension
// V or K), so both the tile pointer and the leading dimensions are exercised. The kernel
// that runs the tiles has a null workspace: the *_cols forms must not touch it.
template <typename T>
void check_tiles(const Shape3& s, int bv, double tol) {
  ChunkCase<T> full(s.C, s.K, s.V, s.valid, 21);
  std::vector<T> ws(ChunkKernel<T, HostExec>::workspace_size(s.C, s.K, s.V));
  ChunkKernel<T, HostExec> math(s.C, s.K, s.V, full.scale, ws.data());
  const ChunkRows<T> r{full.q.data(), full.k.data(), full.v.data(), full.g.data(),
                       full.beta.data()};
  math.prepare(r, full.f.data());
  ChunkCase<T> tiled = full;  // same inputs, same factors
  math.step(full.f.data(), full.h.data(), full.o.data());
  math.compose(full.f.data(), full.M.data());
  math.adjoint(full.f.data(), full.mu.data(), full.dO.data());

  ChunkKernel<T, HostExec> cols(s.C, s.K, s.V, full.scale, nullptr);
  const T* f = tiled.f.data();
  const int C = s.C, K = s.K, V = s.V;
  std::vector<T> scratch(std::size_t(C) * bv);
  int tile = 0;
  for (int c0 = 0; c0 < V; c0 += bv, ++tile) {
    const int n = std::min(bv, V - c0);
    if (tile % 2 == 0) {
      std::vector<T> h = tile_of(tiled.h, K, V, c0, n), o(std::size_t(C) * n);
      std::vector<T> mu = tile_of(tiled.mu, K, V, c0, n), dO = tile_of(tiled.dO, C, V, c0, n);
      cols.step_cols(f, c0, n, h.data(), n, o.data(), n, scratch.data());
      cols.adjoint_cols(f, n, mu.data(), n, dO.data(), n, scratch.data());
      put_tile(h, K, V, c0, n, tiled.h);
      put_tile(o, C, V, c0, n, tiled.o);
      put_tile(mu, K, V, c0, n, tiled.mu);
    } else {
      cols.step_cols(f, c0, n, tiled.h.data() + c0, V, tiled.o.data() + c0, V, scratch.data());
      cols.adjoint_cols(f, n, tiled.mu.data() + c0, V, tiled.dO.data() + c0, V, scratch.data());
    }
  }
  tile = 0;
  for (int c0 = 0; c0 < K; c0 += bv, ++tile) {
    const int n = std::min(bv, K - c0);
    if (tile % 2 == 0) {
      std::vector<T> m = tile_of(tiled.M, K, K, c0, n);
      cols.compose_cols(f, n, m.data(), n, scratch.data());
      put_tile(m, K, K, c0, n, tiled.M);
    } else {
      cols.compose_cols(f, n, tiled.M.data() + c0, K, scratch.data());
    }
  }
  const auto got = tiled.results(), want = full.results();
  for (std::size_t i = 0; i < 5; ++i) {  // factors, o, h, M, mu
    INFO(got[i].first);
    CHECK(rel_l2(got[i].second->data(), want[i].second->data(), want[i].second->size()) <= tol);
  }
}

}  // namespace

TEST_CASE("ChunkKernel column tiles (step_cols, compose_cols, adjoint_cols) equal the full width",
          "[chunk_kernel]") {
  for (const Shape3& s : kShapes)
    for (int bv : {1, 7, 16, 32, 64, 128}) {
      if (bv > std::max(s.K, s.V)) continue;
      INFO("C=" << s.C << " K=" << s.K << " V=" << s.V << " valid=" << s.valid << " BV=" << bv);
      check_tiles<double>(s, bv, 1e-12);
      check_tiles<float>(s, bv, 2e-5);
    }
  // The full width through the *_cols forms is the full-width form's call: the same bits.
  const Shape3 s{64, 32, 48, 50};
  check_tiles<double>(s, 48, 0.0);
}

namespace {

// The CUDA backward's order of operations (local_pass_cuda.cu), with HostExec, against the
// host's fused walk over a run of chunks of one (batch, head):
//   fused:  dh = lambda; for c = last..0: backward(c) from dh (updates dh); dh0 = dh
//   split:  (a) mu = lambda; for c = last..0: exit[c] = mu; mu <- adjoint(c) (tile by tile,
//           adjoint_cols over column tiles of width bv); dh0 = mu
//           (b) for every c independently: dh = exit[c]; backward(c) from dh
// Every gradient, and dh0, must agree; (b)'s returned entry adjoint must be exit[c - 1]
// (dh0 for the first chunk), which the split does not otherwise use.
template <typename T>
void check_split_backward(int C, int K, int V, int nchunks, int last_valid, int bv, double tol) {
  std::vector<ChunkCase<T>> ch;
  for (int c = 0; c < nchunks; ++c)
    ch.emplace_back(C, K, V, c + 1 == nchunks ? last_valid : C, 100 + c);
  ChunkMath<T> math(C, K, V, ch[0].scale);
  auto rows = [&](const ChunkCase<T>& x) {
    return ChunkRows<T>{x.q.data(), x.k.data(), x.v.data(), x.g.data(), x.beta.data()};
  };
  // Forward: the entry state of every chunk (output()'s states) and the factors.
  std::vector<std::vector<T>> entry(nchunks);
  std::vector<T> h = ch[0].h, o(std::size_t(C) * V);
  for (int c = 0; c < nchunks; ++c) {
    math.prepare(rows(ch[c]), ch[c].f.data());
    entry[c] = h;
    math.step(ch[c].f.data(), h.data(), o.data());
  }
  const std::vector<T> lambda = ch[nchunks - 1].dh;
  auto grads = [](ChunkCase<T>& x) {
    return ChunkRowGrads<T>{x.dq.data(), x.dk.data(), x.dv.data(), x.dg.data(), x.dbeta.data()};
  };

  std::vector<ChunkCase<T>> fused = ch, split = ch;
  std::vector<T> dh = lambda;
  for (int c = nchunks - 1; c >= 0; --c)
    math.backward(rows(ch[c]), entry[c].data(), ch[c].dO.data(), dh.data(), grads(fused[c]));
  const std::vector<T> dh0_fused = dh;

  // (a) the adjoint walk, column tile by column tile, storing each chunk's exit adjoint.
  ChunkKernel<T, HostExec> cols(C, K, V, ch[0].scale, nullptr);
  std::vector<std::vector<T>> exits(nchunks, std::vector<T>(std::size_t(K) * V));
  std::vector<T> mu = lambda, scratch(std::size_t(C) * bv);
  for (int c0 = 0; c0 < V; c0 += bv) {
    const int n = std::min(bv, V - c0);
    std::vector<T> tile = tile_of(mu, K, V, c0, n);
    for (int c = nchunks - 1; c >= 0; --c) {
      put_tile(tile, K, V, c0, n, exits[c]);
      const std::vector<T> dO = tile_of(ch[c].dO, C, V, c0, n);
      cols.adjoint_cols(ch[c].f.data(), n, tile.data(), n, dO.data(), n, scratch.data());
    }
    put_tile(tile, K, V, c0, n, mu);
  }
  // (b) every chunk on its own, from its entry state and exit adjoint.
  for (int c = 0; c < nchunks; ++c) {
    std::vector<T> d = exits[c];
    math.backward(rows(ch[c]), entry[c].data(), ch[c].dO.data(), d.data(), grads(split[c]));
    INFO("entry adjoint of chunk " << c);
    const std::vector<T>& before = c == 0 ? mu : exits[c - 1];
    CHECK(rel_l2(d.data(), before.data(), before.size()) <= tol);
  }
  CHECK(rel_l2(mu.data(), dh0_fused.data(), mu.size()) <= tol);
  for (int c = 0; c < nchunks; ++c) {
    const auto got = split[c].results(), want = fused[c].results();
    for (std::size_t i = 6; i < got.size(); ++i) {  // dq, dk, dv, dg, dbeta
      INFO("chunk " << c << " " << got[i].first);
      CHECK(rel_l2(got[i].second->data(), want[i].second->data(), want[i].second->size()) <= tol);
    }
  }
}

}  // namespace

TEST_CASE(
    "Chunk-parallel backward (adjoint walk storing exit adjoints, then every chunk alone) "
    "equals the fused backward walk",
    "[chunk_kernel]") {
  struct S {
    int C, K, V, nchunks, last_valid, bv;
  };
  for (const S& s : std::vector<S>{{16, 8, 24, 5, 9, 7},
                                   {32, 16, 16, 3, 32, 16},
                                   {64, 32, 40, 4, 37, 32},
                                   {64, 128, 128, 3, 50, 32}}) {
    INFO("C=" << s.C << " K=" << s.K << " V=" << s.V << " chunks=" << s.nchunks << " BV=" << s.bv);
    check_split_backward<double>(s.C, s.K, s.V, s.nchunks, s.last_valid, s.bv, 1e-12);
    check_split_backward<float>(s.C, s.K, s.V, s.nchunks, s.last_valid, s.bv, 1e-4);
  }
}

namespace {

// CudaExec's GEMM (tiled_gemm, tiled_gemm.h) on kTileThreads emulated block threads: the same
// source the GPU runs, the same choice of output tile (4 x 2 per thread where n <= 32), a
// staging buffer shared by the threads as a block shares its shared memory.
struct TiledExec {
  static constexpr bool serial = false;
  int t;
  std::barrier<>* bar;
  void* stage;  // tiled_gemm_stage_elems<4, 4>() elements of the T in use
  int tid() const { return t; }
  int nthreads() const { return kTileThreads; }
  void sync() const { bar->arrive_and_wait(); }
  template <typename T>
  void gemm(bool ta, bool tb, int m, int n, int k, T alpha, const T* A, int lda, const T* B,
            int ldb, T beta, T* C, int ldc, Structure s = Structure::kDense) const {
    sync();
    auto barrier = [this] { sync(); };
    T* st = static_cast<T*>(stage);
    if (n <= 32)
      tiled_gemm<4, 2>(t, barrier, st, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, s);
    else
      tiled_gemm<4, 4>(t, barrier, st, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc, s);
    sync();
  }
};

// f(exec) on kTileThreads threads sharing one barrier and one staging buffer.
template <typename T, typename F>
void on_tiled_block(F f) {
  std::vector<T> stage(tiled_gemm_stage_elems<4, 4>(), std::numeric_limits<T>::quiet_NaN());
  std::barrier<> bar(kTileThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kTileThreads; ++t)
    threads.emplace_back([&, t] { f(TiledExec{t, &bar, stage.data()}); });
  for (auto& th : threads) th.join();
}

struct GemmShape {
  int m, n, k;
};

}  // namespace

TEST_CASE("The tiled block GEMM (CudaExec's) equals the plain product, every transposition",
          "[chunk_kernel][tiled_gemm]") {
  Rng rng(31);
  const std::vector<GemmShape> shapes = {{64, 32, 128}, {37, 53, 29}, {128, 128, 64},
                                         {16, 16, 16},  {1, 5, 3},    {70, 33, 17}};
  for (const GemmShape& g : shapes)
    for (int tr = 0; tr < 4; ++tr)
      for (Structure s :
           {Structure::kDense, Structure::kLowerA, Structure::kUpperA, Structure::kLowerC}) {
        const bool ta = tr & 1, tb = tr & 2;
        const bool square = g.m == g.k;  // the triangular hints need op(A) square
        if ((s == Structure::kLowerA || s == Structure::kUpperA) && !square) continue;
        INFO("m=" << g.m << " n=" << g.n << " k=" << g.k << " ta=" << ta << " tb=" << tb
                  << " s=" << int(s));
        // Leading dimensions wider than the operands, as the V-tiled passes use them.
        const int lda = (ta ? g.m : g.k) + 3, ldb = (tb ? g.k : g.n) + 2, ldc = g.n + 5;
        std::vector<double> A(std::size_t(ta ? g.k : g.m) * lda),
            B(std::size_t(tb ? g.n : g.k) * ldb);
        for (double& x : A) x = rng.normal();
        for (double& x : B) x = rng.normal();
        auto opA = [&](int i, int p) -> double& { return ta ? A[p * lda + i] : A[i * lda + p]; };
        for (int i = 0; i < g.m; ++i)
          for (int p = 0; p < g.k; ++p)
            if ((s == Structure::kLowerA && p > i) || (s == Structure::kUpperA && p < i))
              opA(i, p) = 0;
        std::vector<double> C0(std::size_t(g.m) * ldc);
        for (double& x : C0) x = rng.normal();
        for (const double beta : {0.0, 0.5}) {
          std::vector<double> want = C0, got = C0;
          if (beta == 0)  // beta = 0 never reads C
            for (double& x : got) x = std::numeric_limits<double>::quiet_NaN();
          RefExec::gemm(ta, tb, g.m, g.n, g.k, -1.25, A.data(), lda, B.data(), ldb, beta,
                        want.data(), ldc);
          on_tiled_block<double>([&](const TiledExec& ex) {
            ex.gemm(ta, tb, g.m, g.n, g.k, -1.25, A.data(), lda, B.data(), ldb, beta, got.data(),
                    ldc, s);
          });
          double err = 0, ref = 0;
          for (int i = 0; i < g.m; ++i)
            for (int j = 0; j < g.n; ++j) {
              if (s == Structure::kLowerC && j > i) continue;  // nobody reads these
              const double d = got[i * ldc + j] - want[i * ldc + j];
              err += d * d;
              ref += want[i * ldc + j] * want[i * ldc + j];
            }
          CHECK(std::sqrt(err) <= 1e-13 * std::sqrt(ref));
          // Entries outside the m x n window (the padding of ldc) are untouched.
          if (beta != 0)
            for (int i = 0; i < g.m; ++i)
              for (int j = g.n; j < ldc; ++j) CHECK(got[i * ldc + j] == C0[i * ldc + j]);
        }
      }
}

TEST_CASE("The tiled block GEMM's entries do not depend on the width or the column offset",
          "[chunk_kernel][tiled_gemm]") {
  // What makes a V-tiled pass (n = BV columns at offset c0) and a full-width chunk job give
  // the same bits (local_pass_cuda.cu): each entry is one thread's sum in the same order.
  Rng rng(32);
  const int m = 64, k = 128, V = 128;
  std::vector<float> A(std::size_t(m) * k), B(std::size_t(k) * V);
  for (float& x : A) x = float(rng.normal());
  for (float& x : B) x = float(rng.normal());
  std::vector<float> full(std::size_t(m) * V), tiled(std::size_t(m) * V);
  on_tiled_block<float>([&](const TiledExec& ex) {
    ex.gemm(false, false, m, V, k, 1.f, A.data(), k, B.data(), V, 0.f, full.data(), V);
    for (int c0 = 0; c0 < V; c0 += 32)  // 4 x 2 tiles at n = 32, 4 x 4 at n = 128
      ex.gemm(false, false, m, 32, k, 1.f, A.data(), k, B.data() + c0, V, 0.f, tiled.data() + c0,
              V);
  });
  CHECK(full == tiled);
}

TEST_CASE("ChunkKernel with the tiled block GEMM on 256 emulated block threads matches one thread",
          "[chunk_kernel][tiled_gemm]") {
  for (const Shape3& s :
       {Shape3{64, 32, 16, 64}, Shape3{64, 128, 128, 50}, Shape3{32, 16, 16, 19}}) {
    INFO("C=" << s.C << " K=" << s.K << " V=" << s.V << " valid=" << s.valid);
    ChunkCase<double> c(s.C, s.K, s.V, s.valid, 14);
    const ChunkCase<double> want = run_host(c);
    std::vector<double> ws(ChunkKernel<double, TiledExec>::workspace_size(s.C, s.K, s.V),
                           std::numeric_limits<double>::quiet_NaN());
    on_tiled_block<double>([&](const TiledExec& ex) { c.run(ex, ws.data()); });
    check_same(c, want, 1e-12);
  }
}

TEST_CASE("ChunkKernel::outputs is step's o without the state update, same bits",
          "[chunk_kernel]") {
  for (const Shape3& s : kShapes) {
    INFO("C=" << s.C << " K=" << s.K << " V=" << s.V << " valid=" << s.valid);
    ChunkCase<double> c(s.C, s.K, s.V, s.valid, 15);
    ChunkMath<double> math(s.C, s.K, s.V, c.scale);
    const ChunkRows<double> r{c.q.data(), c.k.data(), c.v.data(), c.g.data(), c.beta.data()};
    math.prepare(r, c.f.data());
    std::vector<double> ws(ChunkKernel<double, HostExec>::workspace_size(s.C, s.K, s.V));
    ChunkKernel<double, HostExec> k(s.C, s.K, s.V, c.scale, ws.data());
    std::vector<double> o(c.o.size());
    const std::vector<double> h = c.h;
    k.outputs(c.f.data(), c.h.data(), o.data());
    CHECK(c.h == h);
    math.step(c.f.data(), c.h.data(), c.o.data());
    CHECK(o == c.o);
  }
}

namespace {

// The CUDA passes (local_pass_cuda.cu) on the CPU: their walk job bodies (gdn/chunk/walk_tiles.h,
// gdn/state_walk/state_walk_tiled.h, gdn/adjoint_walk/adjoint_walk_tiled.h, the same source the
// kernels run) on the policy of RunJob, each (b, h, column tile) job after the other, and their
// chunk jobs (ChunkKernel::outputs, ChunkKernel::backward from the stored entry states and exit
// adjoints) written out here as the kernels do them; against LocalPass<double, Host>, every output
// and gradient.
struct SerialJobs {  // every job on one thread (HostExec)
  template <typename F>
  void operator()(int C, int K, int V, double scale, F job) const {
    ChunkKernel<double, HostExec> math(C, K, V, scale, nullptr);
    job(math, HostExec{});
  }
};
struct ThreadedJobs {  // every job on n emulated block threads (ThreadedExec, block_gemm)
  int n;
  template <typename F>
  void operator()(int C, int K, int V, double scale, F job) const {
    std::barrier<> bar(n);
    std::vector<std::thread> threads;
    for (int t = 0; t < n; ++t)
      threads.emplace_back([&, t] {
        const ThreadedExec ex{t, n, &bar};
        ChunkKernel<double, ThreadedExec> math(C, K, V, scale, nullptr, ex);
        job(math, ex);
      });
    for (auto& th : threads) th.join();
  }
};

template <typename RunJobs>
void check_cuda_pass_order(const Case& c, std::int64_t t0, std::int64_t t1, int bv,
                           const RunJobs& run_jobs) {
  const GdnProblem& p = c.p;
  const SliceReference r(c, t0, t1, /*seed=*/71);
  const Tensor<double>&q = r.q, &k = r.k, &v = r.v, &g = r.g, &beta = r.beta, &dO = r.dO,
        &h_in = r.h_in, &lambda = r.lambda, &M = r.M, &U = r.U, &o = r.o, &ht = r.ht, &D = r.D;
  const Grads<double>& gr = r.gr;
  const double* dht_p = r.dht_p;
  const GdnInputView<double> in = r.in(c);
  const std::int64_t Tl = t1 - t0;
  const Shape local = SliceReference::local_shape(p, Tl), bh_state = SliceReference::bh_state(p);
  const GdnProblem& lp = r.lp;

  // The CUDA order of operations.
  const SliceLayout L(p, t0, t1);
  const int B = p.B, Hv = p.Hv, Hk = p.Hk, K = p.K, V = p.V, C = p.chunk_size, G = p.group();
  const std::int64_t nc = std::int64_t(L.chunks.size());
  const std::size_t fsize = ChunkFactors<double>{C, K, V}.size();
  std::vector<double> factors(std::size_t(B) * Hv * nc * fsize);
  std::vector<double> states(std::size_t(B) * Hv * nc * K * V, std::nan(""));
  std::vector<double> exits(states.size(), std::nan(""));
  PassArgs<double> a{B,
                     Hk,
                     Hv,
                     K,
                     V,
                     C,
                     G,
                     !p.cu_seqlens.empty(),
                     Tl,
                     std::int64_t(L.segments.size()),
                     nc,
                     L.segments.data(),
                     L.chunks.data(),
                     in,
                     double(p.scale_value()),
                     fsize,
                     factors.data(),
                     true,
                     states.data(),
                     nullptr,
                     exits.data(),
                     ChunkGemm::kFp32,
                     false,
                     {}};
  pass::prepare(Host{}, a);
  std::vector<double> tile(walk::tile_elems(K, C, bv), std::nan(""));
  Tensor<double> eM(M.shape), eU(U.shape), eo(local), eht(state_shape(p)), eD(bh_state);
  Grads<double> eg(lp, false);
  eg.dh0 = Tensor<double>(gr.dh0.shape);
  const std::int64_t BH = std::int64_t(B) * Hv;
  for (std::int64_t job = 0; job < BH * (walk::tiles(K, bv) + walk::tiles(V, bv)); ++job)
    run_jobs(C, K, V, a.scale, [&](auto& math, const auto& ex) {
      walk::transition(math, ex, a, eM.ptr(), eU.ptr(), bv, job, tile.data());
    });
  for (std::int64_t job = 0; job < BH * walk::tiles(V, bv); ++job)
    run_jobs(C, K, V, a.scale, [&](auto& math, const auto& ex) {
      walk::state_walk(math, ex, a, h_in.ptr(), eht.ptr(), bv, job, tile.data());
    });
  for (std::int64_t job = 0; job < BH * walk::tiles(V, bv); ++job)
    run_jobs(C, K, V, a.scale, [&](auto& math, const auto& ex) {
      walk::adjoint(math, ex, a, dO.ptr(), dht_p, eD.ptr(), bv, job, tile.data());
    });
  for (std::int64_t job = 0; job < BH * walk::tiles(V, bv); ++job)
    run_jobs(C, K, V, a.scale, [&](auto& math, const auto& ex) {
      walk::backward_walk(math, ex, a, lambda.ptr(), dO.ptr(), dht_p, c.h0 ? eg.dh0.ptr() : nullptr,
                          bv, job, tile.data());
    });
  // The chunk jobs (outputs_kernel, backward_chunks_kernel).
  ChunkMath<double> math(C, K, V, a.scale);
  std::vector<double> rq(std::size_t(C) * K), rk(rq.size()), rv(std::size_t(C) * V), rg(C), rb(C),
      rdO(rv.size()), ob(rv.size()), dh(std::size_t(K) * V), gq(rq.size()), gk(rq.size()),
      gvv(rv.size()), gg(C), gb(C);
  for (std::int64_t job = 0; job < BH * nc; ++job) {
    const int bh = int(job / nc), b = bh / Hv, hv = bh % Hv, hk = hv / G;
    const std::int64_t ci = job % nc;
    const SliceLayout::Chunk ch = L.chunks[ci];
    const std::int64_t t = std::int64_t(b) * Tl + ch.begin;
    auto gather = [&](const double* src, int width, int H, int h, std::vector<double>& dst) {
      for (int i = 0; i < C; ++i)
        for (int x = 0; x < width; ++x)
          dst[std::size_t(i) * width + x] = i < ch.rows ? src[((t + i) * H + h) * width + x] : 0.0;
    };
    gather(q.ptr(), K, Hk, hk, rq);
    gather(k.ptr(), K, Hk, hk, rk);
    gather(v.ptr(), V, Hv, hv, rv);
    gather(g.ptr(), 1, Hv, hv, rg);
    gather(beta.ptr(), 1, Hv, hv, rb);
    gather(dO.ptr(), V, Hv, hv, rdO);
    const double* entry = a.entry_state(bh, ci);
    std::vector<double> ws(ChunkKernel<double, HostExec>::workspace_size(C, K, V));
    ChunkKernel<double, HostExec> full(C, K, V, a.scale, ws.data());
    full.outputs(a.factors_of(bh, ci), entry, ob.data());
    const double* ex_adj = a.exit_adjoint(bh, ci);
    std::copy(ex_adj, ex_adj + dh.size(), dh.begin());
    math.backward({rq.data(), rk.data(), rv.data(), rg.data(), rb.data()}, entry, rdO.data(),
                  dh.data(), {gq.data(), gk.data(), gvv.data(), gg.data(), gb.data()});
    for (int i = 0; i < ch.rows; ++i) {
      for (int x = 0; x < V; ++x) {
        eo.data[((t + i) * Hv + hv) * V + x] = ob[std::size_t(i) * V + x];
        eg.dv.data[((t + i) * Hv + hv) * V + x] = gvv[std::size_t(i) * V + x];
      }
      for (int x = 0; x < K; ++x) {
        eg.dq.data[((t + i) * Hk + hk) * K + x] += gq[std::size_t(i) * K + x];
        eg.dk.data[((t + i) * Hk + hk) * K + x] += gk[std::size_t(i) * K + x];
      }
      eg.dg.data[(t + i) * Hv + hv] = gg[i];
      eg.dbeta.data[(t + i) * Hv + hv] = gb[i];
    }
  }
  INFO(c.name << " slice [" << t0 << ", " << t1 << ") BV=" << bv);
  auto close = [](const char* what, const Tensor<double>& got, const Tensor<double>& want) {
    INFO(what);
    CHECK(rel_l2(got.ptr(), want.ptr(), want.data.size()) <= 1e-12);
  };
  close("M", eM, M);
  close("U", eU, U);
  close("o", eo, o);
  close("ht", eht, ht);
  close("D", eD, D);
  close("dq", eg.dq, gr.dq);
  close("dk", eg.dk, gr.dk);
  close("dv", eg.dv, gr.dv);
  close("dg", eg.dg, gr.dg);
  close("dbeta", eg.dbeta, gr.dbeta);
  if (c.h0) close("dh0", eg.dh0, gr.dh0);
}

const std::vector<Case> kCudaOrderCases = {
    {"B=2, K=12, V=20, C=32, h0, dht", make_problem(2, 100, 2, 2, 12, 20, 32), true, true},
    {"packed, Hv = 2 Hk, C=16", make_problem(1, 150, 1, 2, 16, 8, 16, false, {0, 10, 11, 80, 150}),
     true, true},
    {"no h0, no dht, Hv = 3 Hk", make_problem(1, 90, 1, 3, 8, 24, 16), false, false},
};

}  // namespace

TEST_CASE(
    "The CUDA passes' order of operations (V-tiled walks, then chunk jobs) on the CPU "
    "equals the host passes",
    "[chunk_kernel][cuda_order]") {
  const Case c = GENERATE(from_range(kCudaOrderCases));
  DYNAMIC_SECTION(c.name) {
    for (int bv : {8, 64}) {
      check_cuda_pass_order(c, 0, c.p.T, bv, SerialJobs{});
      if (c.p.B != 1) continue;
      check_cuda_pass_order(c, c.p.T / 3, c.p.T - 7, bv, SerialJobs{});
    }
  }
}

TEST_CASE(
    "The CUDA passes' order of operations on emulated block threads (split loops, barriers) "
    "equals the host passes",
    "[chunk_kernel][cuda_order]") {
  // One case each, ragged tiles; apart from the table above, so that each runs once.
  const std::vector<Case>& cases = kCudaOrderCases;
  check_cuda_pass_order(cases[1], cases[1].p.T / 3, cases[1].p.T - 7, 6, ThreadedJobs{3});
  check_cuda_pass_order(cases[0], 0, cases[0].p.T, 8, ThreadedJobs{4});
}

// The GPU's bf16 mode runs every ChunkKernel GEMM on bf16 tensor cores: operands rounded
// to bf16 (8 significant bits), products and sums in fp32. Emulated here in the GPU's order
// (Bf16MmaExec), every output of the chunk algebra stays within bf16's reach of the exact
// fp64 chunk: 1.6e-3 to 5.1e-3 relative L2 measured, dg and dbeta at C = 128 1.1e-2 (a
// difference of row and column sums), held to 3e-2 (docs/design.md §2f).
// A factor or a state stored in bf16 between GEMMs would stay near that; a lost term or
// a wrong operand would not.
TEST_CASE("ChunkKernel with the bf16 tensor-core GEMM stays within bf16 of fp64",
          "[chunk_kernel][mma]") {
  for (const Shape3& s : {Shape3{64, 128, 128, 64}, Shape3{64, 16, 40, 37}, Shape3{32, 16, 16, 19},
                          Shape3{128, 32, 64, 77}}) {
    INFO("C=" << s.C << " K=" << s.K << " V=" << s.V << " valid=" << s.valid);
    ChunkCase<float> c(s.C, s.K, s.V, s.valid, 21);
    std::vector<float> ws(ChunkKernel<float, Bf16MmaExec>::workspace_size(s.C, s.K, s.V));
    c.run(Bf16MmaExec{}, ws.data());
    const ChunkCase<double> exact = run_host(ChunkCase<double>(s.C, s.K, s.V, s.valid, 21));
    const auto got = c.results();
    const auto want = exact.results();
    for (std::size_t i = 0; i < got.size(); ++i) {
      const double err =
          rel_l2(got[i].second->data(), want[i].second->data(), want[i].second->size());
      INFO(got[i].first << " rel_l2 " << err);
      CHECK(err < 3e-2);
    }
  }
}

// decay_terms' prefix sums run as a segmented scan on a thread group (log2 C barrier steps)
// and as one loop on a serial Exec: the same G, segments and decays, -inf rows (a forgotten
// state) anywhere, the first and last rows included, for thread counts below and above C.
TEST_CASE("The threads' segmented gate scan equals the serial one, with -inf rows",
          "[chunk_kernel]") {
  const double inf = std::numeric_limits<double>::infinity();
  for (const std::vector<int>& resets :
       {std::vector<int>{}, {0}, {5, 6}, {1, 17, 40, 63}, {63}, {3, 31, 32, 33}}) {
    for (int n : {1, 7, 32, 256}) {
      INFO("threads=" << n << " resets=" << resets.size());
      ChunkCase<double> c(64, 16, 24, 64, 31);
      for (int r : resets) c.g[std::size_t(r)] = -inf;
      check_same(run_threaded(c, n), run_host(c), 1e-12);
    }
  }
}
