// The host RoPE and causal GQA attention ops: forwards against naive fp64 references written
// here from the formulas (Hugging Face's rotate_half; the full masked score matrix with
// repeat_kv), RoPE's backward as the adjoint and inverse rotation, attention's backward
// against central finite differences in fp64 (L = sum(o * w) for a fixed random w), the
// context-parallel query sets (contiguous from 0, a later rank's shard, zigzag chunks),
// input validation, thread-count independence and the float instantiation.
#include <omp.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "core/rng.h"
#include "ops/attention/attention.h"
#include "ops/rope/rope.h"
#include "ops_support.h"
#include "test_support.h"

using namespace gdn;
using namespace gdn::test;
using Pos = std::vector<std::int64_t>;
using i64 = std::int64_t;

namespace {

// Positions lo..hi-1.
Pos positions(i64 lo, i64 hi) {
  Pos p(std::size_t(hi - lo));
  std::iota(p.begin(), p.end(), lo);
  return p;
}
Pos concat(Pos a, const Pos& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// RoPE as transformers writes it: y = x cos(emb) + rotate_half(x) sin(emb) on the first R
// entries, emb = cat(freqs, freqs), rotate_half(x) = cat(-x2, x1); the rest passes through.
Vec naive_rope(const Vec& x, const Pos& pos, int H, int D, int R, double theta) {
  Vec y = x;
  const int half = R / 2;
  for (std::size_t n = 0; n < pos.size(); ++n)
    for (int h = 0; h < H; ++h) {
      const double* xr = &x[(n * H + h) * D];
      for (int j = 0; j < R; ++j) {
        const double inv_freq = 1.0 / std::pow(theta, double(2 * (j % half)) / R);
        const double emb = double(pos[n]) * inv_freq;
        const double rot = j < half ? -xr[j + half] : xr[j - half];
        y[(n * H + h) * D + j] = xr[j] * std::cos(emb) + rot * std::sin(emb);
      }
    }
  return y;
}

struct Attn {
  int B;
  Pos qpos;
  i64 Tk;
  int Hq, Hkv, D;
  double scale;
  i64 Tq() const { return i64(qpos.size()); }
  std::size_t nq() const { return std::size_t(B * Tq() * Hq * D); }
  std::size_t nkv() const { return std::size_t(B * Tk * Hkv * D); }
  std::size_t nlse() const { return std::size_t(B * Tq() * Hq); }
};

// The textbook attention: k and v repeated to Hq heads (repeat_kv), the whole [Tq, Tk]
// score matrix of each (b, h) with -inf above each row's position, a softmax per row.
void naive_attention(const Attn& a, const Vec& q, const Vec& k, const Vec& v, Vec& o, Vec& lse) {
  const i64 Tq = a.Tq(), Tk = a.Tk;
  const int Hq = a.Hq, D = a.D, G = a.Hq / a.Hkv;
  Vec kr(std::size_t(a.B * Tk * Hq * D)), vr(kr.size());
  for (int b = 0; b < a.B; ++b)
    for (i64 t = 0; t < Tk; ++t)
      for (int h = 0; h < Hq; ++h)
        for (int d = 0; d < D; ++d) {
          kr[((b * Tk + t) * Hq + h) * D + d] = k[((b * Tk + t) * a.Hkv + h / G) * D + d];
          vr[((b * Tk + t) * Hq + h) * D + d] = v[((b * Tk + t) * a.Hkv + h / G) * D + d];
        }
  o.assign(a.nq(), 0.0);
  lse.assign(a.nlse(), 0.0);
  for (int b = 0; b < a.B; ++b)
    for (int h = 0; h < Hq; ++h) {
      Vec S(std::size_t(Tq * Tk));
      for (i64 i = 0; i < Tq; ++i)
        for (i64 j = 0; j < Tk; ++j) {
          double s = 0;
          for (int d = 0; d < D; ++d)
            s += q[((b * Tq + i) * Hq + h) * D + d] * kr[((b * Tk + j) * Hq + h) * D + d];
          S[i * Tk + j] = j <= a.qpos[i] ? a.scale * s : -std::numeric_limits<double>::infinity();
        }
      for (i64 i = 0; i < Tq; ++i) {
        const double mx = *std::max_element(&S[i * Tk], &S[i * Tk] + Tk);
        double sum = 0;
        for (i64 j = 0; j < Tk; ++j) sum += std::exp(S[i * Tk + j] - mx);
        lse[(b * Tq + i) * Hq + h] = mx + std::log(sum);
        for (i64 j = 0; j < Tk; ++j) {
          const double p = std::exp(S[i * Tk + j] - mx) / sum;
          for (int d = 0; d < D; ++d)
            o[((b * Tq + i) * Hq + h) * D + d] += p * vr[((b * Tk + j) * Hq + h) * D + d];
        }
      }
    }
}

template <typename T>
void forward(const Attn& a, const std::vector<T>& q, const std::vector<T>& k,
             const std::vector<T>& v, std::vector<T>& o, std::vector<T>& lse) {
  o.assign(a.nq(), T(0));
  lse.assign(a.nlse(), T(0));
  ops::attention_forward(Host{}, Precision::plain, q.data(), k.data(), v.data(), a.qpos.data(), a.B,
                         a.Tq(), a.Tk, a.Hq, a.Hkv, a.D, a.scale, o.data(), lse.data());
}

// Inputs of an attention problem; q scaled up so that the softmax is far from uniform.
struct AttnInputs {
  Vec q, k, v;
  AttnInputs(const Attn& a, std::uint64_t seed)
      : q(rand_vec(a.nq(), seed, 1.5)),
        k(rand_vec(a.nkv(), seed + 1)),
        v(rand_vec(a.nkv(), seed + 2)) {}
};

}  // namespace

// ---------------------------------------------------------------------------------------
// RoPE

TEST_CASE("rope forward matches the Hugging Face formula, also in place", "[rope]") {
  struct RopeShape {
    int D, R;
    double theta;
  };
  // R < D (Qwen3-Next's partial rotary factor 0.25 at head_dim 256), R = D, R = 0.
  const RopeShape s = GENERATE(RopeShape{8, 4, 10000.0}, RopeShape{256, 64, 1e7},
                               RopeShape{6, 6, 10000.0}, RopeShape{6, 0, 10000.0});
  INFO("D " << s.D << " R " << s.R);
  const int H = 3;
  const Pos pos = {0, 1, 7, 1000, 4095, 3};
  const i64 N = i64(pos.size());
  const Vec x = rand_vec(std::size_t(N * H * s.D), 20);
  const Vec want = naive_rope(x, pos, H, s.D, s.R, s.theta);
  Vec y(x.size());
  ops::rope_forward(Host{}, x.data(), pos.data(), N, H, s.D, s.R, s.theta, y.data());
  check_close(y, want, 1e-14);
  for (std::size_t e = 0; e < x.size(); ++e)
    if (int(e % s.D) >= s.R) CHECK(y[e] == x[e]);  // pass-through, bit for bit
  Vec inplace = x;
  ops::rope_forward(Host{}, inplace.data(), pos.data(), N, H, s.D, s.R, s.theta, inplace.data());
  CHECK(inplace == y);
}

TEST_CASE("rope backward is the adjoint and the inverse of the forward", "[rope]") {
  const int H = 2, D = 10;
  const int R = GENERATE(0, 4, 10);
  INFO("R " << R);
  const Pos pos = {5, 0, 123, 77, 2048};
  const i64 N = i64(pos.size());
  const double theta = 1e6;
  const Vec x = rand_vec(std::size_t(N * H * D), 21), dy = rand_vec(x.size(), 22);
  Vec y(x.size()), dx(x.size());
  ops::rope_forward(Host{}, x.data(), pos.data(), N, H, D, R, theta, y.data());
  ops::rope_backward(Host{}, dy.data(), pos.data(), N, H, D, R, theta, dx.data());
  // <rope(x), dy> = <x, rope^T(dy)>.
  CHECK(dot(y, dy) == Approx(dot(x, dx)).epsilon(1e-14));
  // The rotation is orthogonal: its transpose undoes it (also in place).
  Vec back = y;
  ops::rope_backward(Host{}, back.data(), pos.data(), N, H, D, R, theta, back.data());
  check_close(back, x, 1e-14);
}

TEST_CASE("rope rejects a bad rotary dimension", "[rope]") {
  const Pos pos = {0, 1};
  Vec x(2 * 8), y(x.size());
  for (int R : {3, 10, -2}) {
    INFO("R " << R);
    CHECK_THROWS_WITH(
        ops::rope_forward(Host{}, x.data(), pos.data(), 2, 1, 8, R, 1e4, y.data()),
        Catch::Contains("rotary_dim = " + std::to_string(R)) && Catch::Contains("head_dim = 8"));
    CHECK_THROWS_AS(ops::rope_backward(Host{}, x.data(), pos.data(), 2, 1, 8, R, 1e4, y.data()),
                    Error);
  }
}

// ---------------------------------------------------------------------------------------
// Attention forward

TEST_CASE("attention forward matches the naive masked softmax for GQA and CP query sets",
          "[attention]") {
  const int ratio = GENERATE(1, 2, 4);
  struct Rows {
    const char* name;
    Pos qpos;
    i64 Tk;
  };
  // The small CP shapes, then ones past the op's row and key blocks (16 and 64): a first
  // rank's contiguous rows and a zigzag pair of chunks with keys no query reaches.
  const Rows rows = GENERATE(
      Rows{"from 0", positions(0, 5), 5}, Rows{"mid", positions(5, 10), 12},
      Rows{"zigzag", {0, 1, 2, 9, 10, 11}, 12}, Rows{"long from 0", positions(0, 150), 150},
      Rows{"long zigzag", concat(positions(0, 20), positions(130, 150)), 160});
  const Attn a{2, rows.qpos, rows.Tk, 2 * ratio, 2, 8, 0.5};
  INFO(rows.name << ", Hq " << a.Hq << " Hkv " << a.Hkv);
  const AttnInputs in(a, 30);
  Vec o, lse, want_o, want_lse;
  forward(a, in.q, in.k, in.v, o, lse);
  naive_attention(a, in.q, in.k, in.v, want_o, want_lse);
  check_close(o, want_o, 1e-13);
  check_close(lse, want_lse, 1e-13);
}

TEST_CASE("a rank's attention rows are those of the whole sequence", "[attention]") {
  // Context parallelism splits the rows; each row must not depend on which others a rank
  // holds: the forward bit for bit, and the ranks' dk, dv summing to the whole one's.
  const Attn whole{2, positions(0, 150), 150, 4, 2, 8, 0.4};
  const AttnInputs in(whole, 40);
  const Vec w = rand_vec(whole.nq(), 43);
  Vec o, lse;
  forward(whole, in.q, in.k, in.v, o, lse);
  Vec dk(whole.nkv()), dv(whole.nkv());
  ops::attention_backward(Host{}, Precision::plain, in.q.data(), in.k.data(), in.v.data(), o.data(),
                          lse.data(), w.data(), whole.qpos.data(), whole.B, whole.Tq(), whole.Tk,
                          whole.Hq, whole.Hkv, whole.D, whole.scale, (double*)nullptr, dk.data(),
                          dv.data());
  // Zigzag over 3 ranks: chunks of 25, rank r holding chunks r and 5 - r.
  Vec sum_dk(dk.size(), 0.0), sum_dv(dv.size(), 0.0);
  const int row = whole.Hq * whole.D;
  for (int r = 0; r < 3; ++r) {
    Attn part = whole;
    part.qpos = concat(positions(25 * r, 25 * r + 25), positions(25 * (5 - r), 25 * (6 - r)));
    auto rows_of = [&](const Vec& full) {
      Vec x;
      for (int b = 0; b < whole.B; ++b)
        for (i64 p : part.qpos) {
          const auto it = full.begin() + (b * whole.Tq() + p) * row;
          x.insert(x.end(), it, it + row);
        }
      return x;
    };
    const Vec q = rows_of(in.q), wr = rows_of(w);
    Vec po, plse;
    forward(part, q, in.k, in.v, po, plse);
    CHECK(po == rows_of(o));
    Vec pdk(dk.size()), pdv(dv.size());
    ops::attention_backward(Host{}, Precision::plain, q.data(), in.k.data(), in.v.data(), po.data(),
                            plse.data(), wr.data(), part.qpos.data(), part.B, part.Tq(), part.Tk,
                            part.Hq, part.Hkv, part.D, part.scale, (double*)nullptr, pdk.data(),
                            pdv.data());
    for (std::size_t e = 0; e < dk.size(); ++e) {
      sum_dk[e] += pdk[e];
      sum_dv[e] += pdv[e];
    }
  }
  check_close(sum_dk, dk, 1e-13);
  check_close(sum_dv, dv, 1e-13);
}

TEST_CASE("attention pairs and argument checks", "[attention]") {
  const Pos zigzag = {0, 1, 2, 9, 10, 11};
  CHECK(ops::attention_pairs(zigzag.data(), 6) == 1 + 2 + 3 + 10 + 11 + 12);
  CHECK(ops::attention_pairs(zigzag.data(), 0) == 0);

  const Attn a{1, zigzag, 12, 4, 2, 3, 1.0};
  const AttnInputs in(a, 50);
  Vec o(a.nq()), lse(a.nlse());
  auto run = [&](const Pos& qpos, int Hq, int Hkv) {
    ops::attention_forward(Host{}, Precision::plain, in.q.data(), in.k.data(), in.v.data(),
                           qpos.data(), 1, 6, 12, Hq, Hkv, 3, 1.0, o.data(), lse.data());
  };
  CHECK_THROWS_WITH(run({0, 1, 12, 9, 10, 11}, 4, 2),
                    Catch::Contains("qpos[2] = 12") && Catch::Contains("Tk = 12"));
  CHECK_THROWS_WITH(run({0, 1, 2, -1, 10, 11}, 4, 2), Catch::Contains("qpos[3] = -1"));
  CHECK_THROWS_WITH(run(zigzag, 3, 2), Catch::Contains("Hq = 3") && Catch::Contains("Hkv = 2"));
  CHECK_THROWS_AS(run(zigzag, 4, 0), Error);
  Vec g(a.nq()), gk(a.nkv());
  CHECK_THROWS_AS(
      ops::attention_backward(Host{}, Precision::plain, in.q.data(), in.k.data(), in.v.data(),
                              o.data(), lse.data(), g.data(), Pos{0, 1, 2, 9, 10, 12}.data(), 1, 6,
                              12, 4, 2, 3, 1.0, g.data(), gk.data(), gk.data()),
      Error);
}

// ---------------------------------------------------------------------------------------
// Attention backward

TEST_CASE("attention backward matches finite differences", "[attention]") {
  // Zigzag rows with GQA and keys past max(qpos); the second shape crosses the op's row
  // and key blocks.
  const Attn a = GENERATE(Attn{2, {0, 1, 5, 6}, 10, 4, 2, 5, 0.7},
                          Attn{1, concat(positions(0, 10), positions(60, 70)), 72, 2, 1, 3, 0.9});
  INFO("Tq " << a.Tq() << " Tk " << a.Tk);
  AttnInputs in(a, 60);
  const Vec w = rand_vec(a.nq(), 63);
  auto loss = [&] {
    Vec o, lse;
    forward(a, in.q, in.k, in.v, o, lse);
    return dot(o, w);
  };
  Vec o, lse;
  forward(a, in.q, in.k, in.v, o, lse);
  // Overwritten, not accumulated: start from garbage.
  Vec dq(a.nq(), 123.0), dk(a.nkv(), -7.0), dv(a.nkv(), 5.0);
  auto backward = [&](double* gq, double* gk, double* gv) {
    ops::attention_backward(Host{}, Precision::plain, in.q.data(), in.k.data(), in.v.data(),
                            o.data(), lse.data(), w.data(), a.qpos.data(), a.B, a.Tq(), a.Tk, a.Hq,
                            a.Hkv, a.D, a.scale, gq, gk, gv);
  };
  backward(dq.data(), dk.data(), dv.data());
  for (auto [name, grad, x] :
       {std::tuple{"dq", &dq, &in.q}, std::tuple{"dk", &dk, &in.k}, std::tuple{"dv", &dv, &in.v}}) {
    const Vec fd = finite_differences(*x, loss);
    const double err = rel_l2(grad->data(), fd.data(), fd.size());
    INFO(name << " rel err " << err);
    CHECK(err <= 1e-7);
  }
  // No query reaches the keys past max(qpos): their gradients are exactly zero.
  const i64 last = *std::max_element(a.qpos.begin(), a.qpos.end());
  const int row = a.Hkv * a.D;
  for (int b = 0; b < a.B; ++b)
    for (i64 t = last + 1; t < a.Tk; ++t)
      for (int e = 0; e < row; ++e) {
        CHECK(dk[(b * a.Tk + t) * row + e] == 0.0);
        CHECK(dv[(b * a.Tk + t) * row + e] == 0.0);
      }
  // Null gradients are skipped and do not change the others.
  Vec dq1(a.nq()), dk1(a.nkv()), dv1(a.nkv());
  backward(dq1.data(), nullptr, nullptr);
  backward(nullptr, dk1.data(), nullptr);
  backward(nullptr, nullptr, dv1.data());
  CHECK(dq1 == dq);
  CHECK(dk1 == dk);
  CHECK(dv1 == dv);
}

TEST_CASE("with document starts, each document's rows are its attention alone", "[attention]") {
  // Row 0: documents [0, 70), [70, 71), [71, 200); row 1: [0, 130), [130, 200). Past the
  // op's blocks, so that key blocks before a tile's documents are skipped, forward and
  // backward. The reference: each document as a batch of its own from position 0.
  const std::vector<std::vector<i64>> cu = {{0, 70, 71, 200}, {0, 130, 200}};
  const i64 T = 200;
  const Attn a{2, positions(0, T), T, 4, 2, 8, 0.4};
  const AttnInputs in(a, 80);
  const Vec w = rand_vec(a.nq(), 81);
  Pos kstart;
  for (const auto& c : cu)
    for (i64 t = 0; t < T; ++t) kstart.push_back(*(std::upper_bound(c.begin(), c.end(), t) - 1));
  Vec o(a.nq()), lse(a.nlse()), dq(a.nq()), dk(a.nkv(), 3.0), dv(a.nkv(), 3.0);
  ops::attention_forward(Host{}, Precision::plain, in.q.data(), in.k.data(), in.v.data(),
                         a.qpos.data(), a.B, T, T, a.Hq, a.Hkv, a.D, a.scale, o.data(), lse.data(),
                         kstart.data());
  ops::attention_backward(Host{}, Precision::plain, in.q.data(), in.k.data(), in.v.data(), o.data(),
                          lse.data(), w.data(), a.qpos.data(), a.B, T, T, a.Hq, a.Hkv, a.D, a.scale,
                          dq.data(), dk.data(), dv.data(), kstart.data());
  CHECK(ops::attention_pairs(a.qpos.data(), T, a.B, kstart.data()) ==
        (70 * 71 + 1 * 2 + 129 * 130 + 130 * 131 + 70 * 71) / 2);
  const int qw = a.Hq * a.D, kw = a.Hkv * a.D;
  for (int b = 0; b < 2; ++b)
    for (std::size_t d = 0; d + 1 < cu[std::size_t(b)].size(); ++d) {
      const i64 s = cu[std::size_t(b)][d], n = cu[std::size_t(b)][d + 1] - s;
      INFO("row " << b << " document [" << s << ", " << s + n << ")");
      const Attn one{1, positions(0, n), n, a.Hq, a.Hkv, a.D, a.scale};
      auto rows = [&](const Vec& x, int width) {
        return Vec(x.begin() + (b * T + s) * width, x.begin() + (b * T + s + n) * width);
      };
      const Vec q = rows(in.q, qw), k = rows(in.k, kw), v = rows(in.v, kw), g = rows(w, qw);
      Vec o1, lse1, dq1(one.nq()), dk1(one.nkv()), dv1(one.nkv());
      forward(one, q, k, v, o1, lse1);
      ops::attention_backward(Host{}, Precision::plain, q.data(), k.data(), v.data(), o1.data(),
                              lse1.data(), g.data(), one.qpos.data(), 1, n, n, a.Hq, a.Hkv, a.D,
                              a.scale, dq1.data(), dk1.data(), dv1.data());
      check_close(rows(o, qw), o1, 1e-14);
      check_close(rows(lse, a.Hq), lse1, 1e-14);
      check_close(rows(dq, qw), dq1, 1e-13);
      check_close(rows(dk, kw), dk1, 1e-13);
      check_close(rows(dv, kw), dv1, 1e-13);
    }
  // A query set of a CP rank (zigzag chunks) gives the same rows.
  const Attn z{2, concat(positions(0, 30), positions(150, 200)), T, a.Hq, a.Hkv, a.D, a.scale};
  Pos zstart;
  for (int b = 0; b < 2; ++b)
    for (i64 t : z.qpos) zstart.push_back(kstart[std::size_t(b * T + t)]);
  Vec zq, zo(z.nq()), zlse(z.nlse());
  for (int b = 0; b < 2; ++b)
    for (i64 t : z.qpos)
      zq.insert(zq.end(), in.q.begin() + (b * T + t) * qw, in.q.begin() + (b * T + t + 1) * qw);
  ops::attention_forward(Host{}, Precision::plain, zq.data(), in.k.data(), in.v.data(),
                         z.qpos.data(), 2, z.Tq(), T, a.Hq, a.Hkv, a.D, a.scale, zo.data(),
                         zlse.data(), zstart.data());
  for (int b = 0; b < 2; ++b)
    for (i64 i = 0; i < z.Tq(); ++i)
      for (int e = 0; e < qw; ++e)
        CHECK(zo[std::size_t((b * z.Tq() + i) * qw + e)] ==
              o[std::size_t((b * T + z.qpos[std::size_t(i)]) * qw + e)]);
  // A first key past the query's own position is refused.
  Pos bad = kstart;
  bad[5] = 6;
  CHECK_THROWS_WITH(ops::attention_forward(Host{}, Precision::plain, in.q.data(), in.k.data(),
                                           in.v.data(), a.qpos.data(), a.B, T, T, a.Hq, a.Hkv, a.D,
                                           a.scale, o.data(), lse.data(), bad.data()),
                    Catch::Contains("kstart[5] = 6"));
  // The same check without the op: what AttentionContextParallel runs for the GPU's op.
  CHECK_THROWS_WITH(ops::check_attention_positions(a.qpos.data(), bad.data(), a.B, T, T),
                    Catch::Contains("kstart[5] = 6"));
  CHECK_NOTHROW(ops::check_attention_positions(a.qpos.data(), kstart.data(), a.B, T, T));
}

// ---------------------------------------------------------------------------------------
// Thread counts and float

namespace {

// A zigzag shape past the blocks with keys past max(qpos), for the thread and float tests.
const Attn kBig{2, concat(positions(0, 24), positions(168, 192)), 200, 4, 2, 40, 0.15};
const Pos kRopePos = positions(100, 196);

// o, lse, dq, dk, dv and RoPE's forward and backward of kBig's inputs, in T.
template <typename T>
std::vector<std::vector<T>> run_all(const Attn& a, const AttnInputs& in, const Vec& w) {
  const auto q = to<T>(in.q), k = to<T>(in.k), v = to<T>(in.v), dout = to<T>(w);
  std::vector<T> o, lse, dq(a.nq()), dk(a.nkv()), dv(a.nkv());
  forward(a, q, k, v, o, lse);
  ops::attention_backward(Host{}, Precision::plain, q.data(), k.data(), v.data(), o.data(),
                          lse.data(), dout.data(), a.qpos.data(), a.B, a.Tq(), a.Tk, a.Hq, a.Hkv,
                          a.D, a.scale, dq.data(), dk.data(), dv.data());
  // RoPE over q viewed as [B Tq, Hq, D] rows at positions kRopePos (one per row).
  const i64 N = a.B * a.Tq();
  std::vector<T> rq(q.size()), rdq(q.size());
  ops::rope_forward(Host{}, q.data(), kRopePos.data(), N, a.Hq, a.D, 16, 1e7, rq.data());
  ops::rope_backward(Host{}, dq.data(), kRopePos.data(), N, a.Hq, a.D, 16, 1e7, rdq.data());
  return {o, lse, dq, dk, dv, rq, rdq};
}

}  // namespace

TEMPLATE_TEST_CASE("attention and rope are bit-identical for 1, 2 and 3 OpenMP threads",
                   "[attention][rope]", float, double) {
  using T = TestType;
  ThreadGuard guard;
  const AttnInputs in(kBig, 70);
  const Vec w = rand_vec(kBig.nq(), 73);
  omp_set_num_threads(1);
  const auto one = run_all<T>(kBig, in, w);
  for (int threads : {2, 3}) {
    omp_set_num_threads(threads);
    const auto many = run_all<T>(kBig, in, w);
    for (std::size_t k = 0; k < one.size(); ++k) {
      INFO("threads " << threads << " output " << k);
      CHECK(bit_difference(one[k], many[k]) == "");
    }
  }
}

TEST_CASE("attention and rope in float agree with double", "[attention][rope]") {
  const AttnInputs in(kBig, 80);
  const Vec w = rand_vec(kBig.nq(), 83);
  const auto d = run_all<double>(kBig, in, w);
  const auto f = run_all<float>(kBig, in, w);
  for (std::size_t k = 0; k < d.size(); ++k) {
    const double err = rel_l2(f[k].data(), d[k].data(), d[k].size());
    INFO("output " << k << " rel err " << err);
    CHECK(err < 1e-5);
  }
}
