// The bf16 GEMM (la::gemm_bf16) and the linear layers of the bf16 mode on it, against a
// naive reference of the rule gemm.h states: products of bf16 values exact in float, each
// pair of k added odd element first (std::fma of exact products: one rounding per add),
// k in the linear layers' blocks of 256 added into C one after another. On every GEMM path
// the CPU runs, bit for bit: on the AVX512_BF16 path this checks the CPU's own vdpbf16ps
// against the rule; the widening paths must give the same bits. The path chosen by name
// (train.gemm_path) is checked too.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/precision.h"
#include "core/rng.h"
#include "ops/gemm/gemm.h"
#include "ops/gemm/gemm_path.h"
#include "ops/linear/linear.h"

using namespace gdn;

namespace {

float bf(float x) {
  return to_float(la::bf16_operand(x));
}

// sum_{p < k} a(p) b(p) by the rule: pairs (2q, 2q + 1), the odd product first; a zero pads
// an odd k. Products of bf16 values are exact, so fma(a, b, acc) is the exact product added
// with one rounding.
template <typename A, typename B>
float pair_sum(int k, A a, B b) {
  float acc = 0;
  for (int q = 0; 2 * q < k; ++q) {
    const int o = 2 * q + 1;
    acc = std::fma(o < k ? a(o) : 0.0f, o < k ? b(o) : 0.0f, acc);
    acc = std::fma(a(2 * q), b(2 * q), acc);
  }
  return acc;
}

// Restores the GEMM path a test case found.
struct PathGuard {
  la::GemmPath before = la::gemm_path();
  ~PathGuard() { la::set_gemm_path(before); }
};

}  // namespace

TEST_CASE("bf16_operand rounds to nearest even and flushes what vdpbf16ps counts as zero",
          "[gemm][bf16]") {
  CHECK(bf(1.0f) == 1.0f);
  CHECK(bf(1.0f + 0x1p-8f) == 1.0f);  // a tie: to the even neighbour
  CHECK(bf(1.0f + 0x1p-8f + 0x1p-20f) == 1.0f + 0x1p-7f);
  CHECK(bf(0x1p-126f) == 0x1p-126f);  // the smallest normal stays
  CHECK(bf(0x1p-127f) == 0.0f);       // a subnormal goes
  CHECK(std::signbit(bf(-0x1p-130f)));
  CHECK(std::isinf(bf(INFINITY)));
}

TEST_CASE("la::gemm_bf16 adds each pair odd element first, bit for bit on every path",
          "[gemm][bf16]") {
  const PathGuard guard;
  Rng rng(11);
  for (const la::GemmPath path : la::gemm_paths()) {
    la::set_gemm_path(path);
    int checked = 0;
    for (const int m : {1, 5, 8, 13, 64})
      for (const int n : {1, 7, 16, 17, 33, 64, 100})
        for (const int k : {2, 10, 32, 258}) {
          const int lda = k + 4, ldb = 2 * n + 6, ldc = n + 3;
          std::vector<Bf16> A(std::size_t(m) * lda), B(std::size_t(k / 2) * ldb);
          std::vector<float> C(std::size_t(m) * ldc);
          for (Bf16& x : A) x = la::bf16_operand(float(rng.normal()));
          for (Bf16& x : B) x = la::bf16_operand(float(rng.normal()));
          for (float& x : C) x = float(rng.normal());
          const float beta = (m + n) % 3 == 0 ? 0.0f : m % 2 ? 1.0f : -0.3f;
          std::vector<float> want = C;
          for (int i = 0; i < m; ++i)
            for (int j = 0; j < n; ++j) {
              const float acc = pair_sum(
                  k, [&](int p) { return to_float(A[std::size_t(i) * lda + p]); },
                  [&](int p) { return to_float(B[std::size_t(p / 2) * ldb + 2 * j + p % 2]); });
              float& c = want[std::size_t(i) * ldc + j];
              c = beta == 0.0f ? acc : beta == 1.0f ? c + acc : beta * c + acc;
            }
          la::gemm_bf16(m, n, k, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
          for (int i = 0; i < m; ++i)
            for (int j = 0; j < ldc; ++j) {  // the padding columns stay untouched
              INFO("path " << la::gemm_path_name(path) << " m " << m << " n " << n << " k " << k
                           << " beta " << beta << " at " << i << ", " << j);
              REQUIRE(C[std::size_t(i) * ldc + j] == want[std::size_t(i) * ldc + j]);
            }
          ++checked;
        }
    CHECK(checked == 140);
  }
}

TEST_CASE("la::gemm_bf16 refuses an odd k", "[gemm][bf16]") {
  std::vector<Bf16> A(8), B(8);
  std::vector<float> C(4);
  CHECK_THROWS_AS(la::gemm_bf16(1, 1, 3, A.data(), 4, B.data(), 2, 0.0f, C.data(), 1), Error);
}

// The linear layers of the bf16 mode follow the rule with the layer's blocks of 256 (the
// first block written, the next ones added), and an odd reduction padded with a zero pair:
// forward (k = in, odd), dx (k = out) and dW (k = N tokens, odd; added into dW).
TEST_CASE("bf16-mode linear layers follow the bf16 GEMM rule on every path", "[gemm][bf16]") {
  const PathGuard guard;
  constexpr int kDepth = 256;  // linear_host.cpp's reduction block
  const std::int64_t N = 301;
  const int in = 517, out = 40;
  Rng rng(5);
  std::vector<float> x(std::size_t(N) * in), W(std::size_t(out) * in), dy(std::size_t(N) * out),
      dW0(W.size());
  for (auto* v : {&x, &W, &dy, &dW0})
    for (float& e : *v) e = float(rng.normal());
  // sum over p < k of a(p) b(p), in blocks of kDepth added one after another onto c0 (none:
  // the first block is written).
  auto blocked = [&](int k, auto a, auto b, const float* c0) {
    float c = 0;
    for (int p0 = 0; p0 < k; p0 += kDepth) {
      const float s = pair_sum(
          std::min(kDepth, k - p0), [&](int p) { return bf(a(p0 + p)); },
          [&](int p) { return bf(b(p0 + p)); });
      c = p0 == 0 && !c0 ? s : (p0 == 0 ? *c0 : c) + s;
    }
    return c;
  };
  std::vector<float> y_want(std::size_t(N) * out), dx_want(x.size()), dW_want(W.size());
  for (std::int64_t r = 0; r < N; ++r)
    for (int o = 0; o < out; ++o)
      y_want[r * out + o] = blocked(
          in, [&](int p) { return x[r * in + p]; }, [&](int p) { return W[o * in + p]; }, nullptr);
  for (std::int64_t r = 0; r < N; ++r)
    for (int i = 0; i < in; ++i)
      dx_want[r * in + i] = blocked(
          out, [&](int p) { return dy[r * out + p]; }, [&](int p) { return W[p * in + i]; },
          nullptr);
  for (int o = 0; o < out; ++o)
    for (int i = 0; i < in; ++i)
      dW_want[o * in + i] = blocked(
          int(N), [&](int p) { return dy[p * out + o]; }, [&](int p) { return x[p * in + i]; },
          &dW0[o * in + i]);
  for (const la::GemmPath path : la::gemm_paths()) {
    INFO("path " << la::gemm_path_name(path));
    la::set_gemm_path(path);
    const Precision mode = Precision::bf16;
    std::vector<float> y(y_want.size()), dx(dx_want.size()), dW = dW0;
    ops::linear_forward(Host{}, mode, x.data(), W.data(), N, in, out, y.data());
    ops::linear_backward(Host{}, mode, x.data(), W.data(), dy.data(), N, in, out, dx.data(),
                         dW.data());
    CHECK(y == y_want);
    CHECK(dx == dx_want);
    CHECK(dW == dW_want);
  }
}

// An A operand longer than the copy bound (linear_host.cpp's kCopyBytes, 32 MiB) runs a
// block of rows at a time: the same bits as the rows run in calls below the bound. Here
// x is 2100 rows of 8191 (odd: padded): 34 MiB as bf16 pairs, 69 MiB as kSwapped floats.
TEST_CASE("bf16-mode linear layers give the same bits for a long A, run in row blocks",
          "[gemm][bf16]") {
  const PathGuard guard;
  const std::int64_t N = 2100, half = 1050;
  const int in = 8191, out = 16;
  Rng rng(7);
  std::vector<float> x(std::size_t(N) * in), W(std::size_t(out) * in);
  for (auto* v : {&x, &W})
    for (float& e : *v) e = float(rng.normal());
  for (const la::GemmPath path : la::gemm_paths()) {
    INFO("path " << la::gemm_path_name(path));
    la::set_gemm_path(path);
    const Precision mode = Precision::bf16;
    std::vector<float> y(std::size_t(N) * out), y_want(y.size());
    ops::linear_forward(Host{}, mode, x.data(), W.data(), N, in, out, y.data());
    ops::linear_forward(Host{}, mode, x.data(), W.data(), half, in, out, y_want.data());
    ops::linear_forward(Host{}, mode, x.data() + half * in, W.data(), N - half, in, out,
                        y_want.data() + half * out);
    CHECK(y == y_want);
  }
}

// train.gemm_path's names (train/run_layout.h): each path this CPU runs by its name; a
// name that is none, or one this CPU cannot run, refused naming the setting and the choices.
TEST_CASE("gemm_path_named picks a path this CPU runs and refuses others") {
  const std::vector<la::GemmPath> runs = la::gemm_paths();
  for (const char* name : {"generic", "avx2", "avx512", "avx512_bf16", "bogus"}) {
    bool known = false;
    for (const la::GemmPath p : runs) known = known || std::string(name) == la::gemm_path_name(p);
    if (known) {
      CHECK(la::gemm_path_name(la::gemm_path_named(name, "--gemm-path")) == std::string(name));
    } else {
      CHECK_THROWS_WITH(la::gemm_path_named(name, "--gemm-path"),
                        Catch::Contains(std::string("--gemm-path ") + name) &&
                            Catch::Contains("runs") &&
                            Catch::Contains(la::gemm_path_name(runs.front())));
    }
  }
  CHECK(la::gemm_path() == runs.back());  // nothing set it: the widest
}
