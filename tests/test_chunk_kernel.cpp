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
#include "ops/gdn_chunk/host_exec.h"
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
