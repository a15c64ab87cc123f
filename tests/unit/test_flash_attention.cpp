// The flash attention kernels' order of operations on the CPU (flash_emulation.h: the
// kernels' tiles, per-lane code and emulated mma): the fragment paths exact on integers,
// the tile skipping, and the forward and backward against the host op in fp64.
//
// Tolerances (relative L2 against fp64): o 1e-2, lse 2e-3, dq, dk, dv 2e-2. bf16 keeps 8
// significant bits, a relative rounding error up to u = 2^-9 = 2e-3 per operand; the
// forward rounds Q, K, V and P (a few u per product, averaging down over the sums), the
// backward also dO and dS, and dS = P (dP - delta) loses digits where dP ~ delta, hence
// twice the forward's bound. lse (~log of the keys seen) is relatively 10x less affected.
// Measured: o 3.1e-3 - 3.3e-3, lse 2.8e-4 - 3.7e-4, gradients 3.3e-3 - 4.7e-3 (printed by
// the INFO line); fp32 operands alone would give about 1e-6. tests/gpu uses the same.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "core/rng.h"
#include "flash_emulation.h"
#include "ops/attention/attention.h"
#include "test_support.h"

using namespace gdn;
using namespace gdn::test;
using i64 = std::int64_t;
namespace fl = gdn::flash;

namespace {

std::vector<float> integers(std::size_t n, Rng& rng, int range) {
  std::vector<float> x(n);
  for (float& e : x) e = float(std::floor(rng.uniform() * (2 * range + 1)) - range);
  return x;
}
std::vector<float> normals(std::size_t n, std::uint64_t seed, double scale = 1.0) {
  Rng rng(seed);
  std::vector<float> x(n);
  for (float& e : x) e = float(scale * rng.normal());
  return x;
}
std::vector<double> wide(const std::vector<float>& x) {
  return {x.begin(), x.end()};
}
std::vector<i64> range(i64 lo, i64 hi) {
  std::vector<i64> r(std::size_t(hi - lo));
  std::iota(r.begin(), r.end(), lo);
  return r;
}
// kstart of Tq = Tk rows 0..T-1 cut into documents at the given starts (the first is 0).
std::vector<i64> documents(i64 T, const std::vector<i64>& starts) {
  std::vector<i64> ks(static_cast<std::size_t>(T));
  for (i64 i = 0; i < T; ++i)
    for (i64 s : starts)
      if (s <= i) ks[std::size_t(i)] = s;
  return ks;
}

}  // namespace

TEST_CASE("flash fragment paths give Q K^T, P V and the key-major products exactly", "[flash]") {
  // One 64 x 64 tile at D = 50 (padded to 64). Entries in [-1, 1]: S entries are integers
  // below 64 in magnitude, exact as bf16 P, and every sum is exact in fp32, so the emulated
  // tensor-core path must equal the plain loops bit for bit.
  constexpr int Dp = 64, D = 50, T = fl::kTile;
  using L = fl::Layout<Dp>;
  Rng rng(11);
  const auto q = integers(T * D, rng, 1), k = integers(T * D, rng, 1), v = integers(T * D, rng, 1);
  std::vector<Bf16> Qs(L::kRowElems), Ks(L::kRowElems), Vs(L::kRowElems);
  for (int tid = 0; tid < fl::kThreads; ++tid) {
    fl::stage_rows<Dp>(tid, q.data(), D, T, D, Qs.data());
    fl::stage_rows<Dp>(tid, k.data(), D, 60, D, Ks.data());  // keys 60..63: padding, zero
    fl::stage_rows<Dp>(tid, v.data(), D, 60, D, Vs.data());
  }
  auto kval = [&](int j, int d) { return j < 60 ? double(k[j * D + d]) : 0.0; };
  int wrong_s = 0, wrong_o = 0, wrong_st = 0, wrong_x = 0;
  for (int warp = 0; warp < fl::kWarps; ++warp) {
    // The forward's and dQ's layout: S = Q K^T, then O = S V with S as P (c_pair_to_a).
    flash_emu::Frags s[8] = {}, o[Dp / 8] = {};
    for (int ks = 0; ks < Dp; ks += 16)
      for (int c = 0; c < 8; ++c)
        flash_emu::mma_tiles(s[c], Qs.data() + warp * 16 * L::kLdRow + ks, L::kLdRow,
                             Ks.data() + c * 8 * L::kLdRow + ks, L::kLdRow);
    for (int kk = 0; kk < fl::kSlices; ++kk)
      for (int n = 0; n < Dp / 8; ++n)
        flash_emu::mma_pair(o[n], s[2 * kk], s[2 * kk + 1], Vs.data() + kk * 16 * L::kLdRow + n * 8,
                            L::kLdRow);
    std::vector<double> S(16 * T);
    for (int r = 0; r < 16; ++r)
      for (int j = 0; j < T; ++j) {
        double x = 0;
        for (int d = 0; d < D; ++d) x += q[(warp * 16 + r) * D + d] * kval(j, d);
        S[r * T + j] = x;
      }
    for (int lane = 0; lane < 32; ++lane)
      for (int e = 0; e < 4; ++e) {
        const int r = mma::c_row(lane, e);
        for (int c = 0; c < 8; ++c)
          wrong_s += double(s[c].f[lane].c[e]) != S[r * T + c * 8 + mma::c_col(lane, e)];
        for (int n = 0; n < Dp / 8; ++n) {
          const int d = n * 8 + mma::c_col(lane, e);
          double x = 0;
          for (int j = 0; j < 60 && d < D; ++j) x += S[r * T + j] * v[j * D + d];
          wrong_o += double(o[n].f[lane].c[e]) != x;
        }
      }
    // The dK / dV layout: S^T = K Q^T (warp's 16 keys), then X = S^T Q through Q^T.
    flash_emu::Frags st[8] = {}, x[Dp / 8] = {};
    for (int ks = 0; ks < Dp; ks += 16)
      for (int c = 0; c < 8; ++c)
        flash_emu::mma_tiles(st[c], Ks.data() + warp * 16 * L::kLdRow + ks, L::kLdRow,
                             Qs.data() + c * 8 * L::kLdRow + ks, L::kLdRow);
    for (int kk = 0; kk < fl::kSlices; ++kk)
      for (int n = 0; n < Dp / 8; ++n)
        flash_emu::mma_pair(x[n], st[2 * kk], st[2 * kk + 1],
                            Qs.data() + kk * 16 * L::kLdRow + n * 8, L::kLdRow);
    for (int lane = 0; lane < 32; ++lane)
      for (int e = 0; e < 4; ++e) {
        const int j = warp * 16 + mma::c_row(lane, e);
        for (int c = 0; c < 8; ++c) {
          const int i = c * 8 + mma::c_col(lane, e);
          double y = 0;
          for (int d = 0; d < D; ++d) y += kval(j, d) * q[i * D + d];
          wrong_st += double(st[c].f[lane].c[e]) != y;
        }
        for (int n = 0; n < Dp / 8; ++n) {
          const int d = n * 8 + mma::c_col(lane, e);
          double y = 0;
          for (int i = 0; i < T && d < D; ++i) {
            double sji = 0;
            for (int dd = 0; dd < D; ++dd) sji += kval(j, dd) * q[i * D + dd];
            y += sji * q[i * D + d];
          }
          wrong_x += double(x[n].f[lane].c[e]) != y;
        }
      }
  }
  CHECK(wrong_s == 0);
  CHECK(wrong_o == 0);
  CHECK(wrong_st == 0);
  CHECK(wrong_x == 0);
}

TEST_CASE("flash tile windows skip the key tiles no row of a query tile sees", "[flash]") {
  // Documents [0, 100) and [100, 256) of one row; Tq = Tk = 256.
  const std::vector<i64> qpos = range(0, 256), ks = documents(256, {0, 100});
  const fl::Window w1 = fl::tile_window(qpos.data(), ks.data(), 0, 256, 64);   // rows 64..127
  const fl::Window w2 = fl::tile_window(qpos.data(), ks.data(), 0, 256, 128);  // rows 128..191
  CHECK(w1.lo == 0);
  CHECK(w1.hi == 127);
  CHECK(w2.lo == 100);
  CHECK(w2.hi == 191);
  CHECK(fl::first_key_tile(w2) == 64);
  CHECK(fl::meets(w2, 64));
  CHECK_FALSE(fl::meets(w2, 0));
  CHECK_FALSE(fl::meets(w2, 192));
  // Padding rows past Tq see nothing; a short last tile's window is its rows' only.
  const fl::Window pad = fl::query_window(qpos.data(), nullptr, 0, 200, 230);
  CHECK_FALSE(fl::visible(0, pad));
  CHECK_FALSE(fl::meets(pad, 0));
  CHECK(fl::tile_window(qpos.data(), nullptr, 0, 200, 192).hi == 199);
  // Without documents: the causal triangle from key 0.
  CHECK(fl::tile_window(qpos.data(), nullptr, 0, 256, 192).lo == 0);
}

TEST_CASE("flash online softmax: a row with no key yet subtracts 0, no NaN", "[flash]") {
  float m = fl::kNoMax, l = 0, mu = 1;
  CHECK(fl::online_step(m, l, fl::kNoMax, mu) == 0.0f);
  CHECK(mu == 0.0f);
  CHECK(l == 0.0f);
  CHECK(fl::online_step(m, l, 3.0f, mu) == 0.0f);  // alpha = exp2(-inf): nothing to rescale
  CHECK(m == 3.0f);
  l = 2.0f;
  CHECK(fl::online_step(m, l, 5.0f, mu) == 0.25f);  // exp2(3 - 5)
  CHECK(l == 0.5f);
  CHECK(fl::inverse_sum(0.0f) == 0.0f);
  CHECK(fl::natural_lse(1.0f, 4.0f) == Approx(3 * std::log(2.0)));
}

TEST_CASE("flash forward and backward in the kernels' order match the host op in fp64", "[flash]") {
  struct Case {
    const char* name;
    FlashProblem p;
  };
  const std::vector<i64> docs0 = documents(190, {0, 70, 130}), docs1 = documents(190, {0, 20, 150});
  std::vector<i64> docs = docs0;
  docs.insert(docs.end(), docs1.begin(), docs1.end());
  std::vector<i64> stripes = range(0, 50), late = range(150, 200);
  stripes.insert(stripes.end(), late.begin(), late.end());
  const std::vector<Case> cases = {
      // GQA 4:1, T not a multiple of 64, keys past the last query (their dk, dv are 0).
      {"causal", {2, range(0, 150), {}, 170, 4, 1, 64, 0.125}},
      // The layer-local balance's rank 0 of P = 2: stripes 0 and 3 of 4; D padded 40 -> 64.
      {"two stripes", {1, stripes, {}, 200, 4, 1, 40, 1 / std::sqrt(40.0)}},
      // Documents, different per batch row; GQA 8:2; D padded 96 -> 128.
      {"documents", {2, range(0, 190), docs, 190, 8, 2, 96, 1 / std::sqrt(96.0)}},
      // Qwen3-Next's head_dim.
      {"D 256", {1, range(0, 100), {}, 100, 4, 1, 256, 1 / 16.0}},
  };
  for (const Case& c : cases) {
    const FlashProblem& p = c.p;
    INFO(c.name);
    const std::size_t nq = std::size_t(p.B * p.Tq() * p.Hq * p.D),
                      nk = std::size_t(p.B * p.Tk * p.Hkv * p.D),
                      nl = std::size_t(p.B * p.Tq() * p.Hq);
    // q scaled up: a softmax far from uniform (as test_attention_ops does).
    const auto q = normals(nq, 1, 1.5), k = normals(nk, 2), v = normals(nk, 3),
               dout = normals(nq, 4);
    const auto qd = wide(q), kd = wide(k), vd = wide(v), gd = wide(dout);
    std::vector<double> o(nq), lse(nl), dq(nq), dk(nk), dv(nk);
    ops::attention_forward(Host{}, Precision::plain, qd.data(), kd.data(), vd.data(), p.qpos.data(),
                           p.B, p.Tq(), p.Tk, p.Hq, p.Hkv, p.D, p.scale, o.data(), lse.data(),
                           p.ks());
    ops::attention_backward(Host{}, Precision::plain, qd.data(), kd.data(), vd.data(), o.data(),
                            lse.data(), gd.data(), p.qpos.data(), p.B, p.Tq(), p.Tk, p.Hq, p.Hkv,
                            p.D, p.scale, dq.data(), dk.data(), dv.data(), p.ks());
    std::vector<float> fo(nq, NAN), flse(nl, NAN), fdq(nq, NAN), fdk(nk, NAN), fdv(nk, NAN);
    emulated_flash_forward(p, q.data(), k.data(), v.data(), fo.data(), flse.data());
    emulated_flash_backward(p, q.data(), k.data(), v.data(), fo.data(), flse.data(), dout.data(),
                            fdq.data(), fdk.data(), fdv.data());
    const double e_o = rel_l2(fo.data(), o.data(), nq), e_lse = rel_l2(flse.data(), lse.data(), nl);
    const double e_dq = rel_l2(fdq.data(), dq.data(), nq), e_dk = rel_l2(fdk.data(), dk.data(), nk),
                 e_dv = rel_l2(fdv.data(), dv.data(), nk);
    INFO("rel L2: o " << e_o << " lse " << e_lse << " dq " << e_dq << " dk " << e_dk << " dv "
                      << e_dv);
    CHECK(e_o <= 1e-2);
    CHECK(e_lse <= 2e-3);
    CHECK(e_dq <= 2e-2);
    CHECK(e_dk <= 2e-2);
    CHECK(e_dv <= 2e-2);
    // Keys no query reaches: exact zeros (every output written, none left NaN).
    const i64 last = *std::max_element(p.qpos.begin(), p.qpos.end());
    int bad = 0;
    for (int b = 0; b < p.B; ++b)
      for (i64 j = 0; j < p.Tk; ++j)
        for (int e = 0; e < p.Hkv * p.D; ++e) {
          const std::size_t x = std::size_t((b * p.Tk + j) * p.Hkv * p.D + e);
          bad += j > last ? (fdk[x] != 0.0f || fdv[x] != 0.0f) : !std::isfinite(fdk[x] + fdv[x]);
        }
    CHECK(bad == 0);
  }
}
