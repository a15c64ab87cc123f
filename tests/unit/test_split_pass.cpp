// The intra-rank sequence split (gdn/split/split_pass.h, docs/design.md §4b): a slice cut into S
// pieces that run as virtual ranks must give the unsplit op's results (fp64, 1e-12
// relative) for every S, scan kind and layout (varlen, h0, -inf, slices that are not a
// multiple of C, B * Hv = 1 and 2), phase by phase on an interior slice (the P > 1
// interface) and end to end through GdnContextParallel on one rank; and the same bits for
// any thread count at a fixed S.
#include <omp.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <stdexcept>

#include "comm/single_communicator.h"
#include "cp/gdn_cp.h"
#include "gdn/op/op.h"
#include "gdn/pass/local_pass.h"
#include "gdn/split/split_jobs.h"
#include "gdn/split/split_pass.h"
#include "gdn/split/split_scan.h"
#include "test_support.h"

using namespace gdn;
using namespace gdn::test;

namespace {

constexpr double kExact = 1e-12;

struct ThreadGuard {
  int saved = omp_get_max_threads();
  ~ThreadGuard() { omp_set_num_threads(saved); }
};

// Seeded inputs and cotangents of a case. A slow decay (g about -0.012 per token) so the
// state carries real weight across every piece boundary.
struct Inputs {
  GdnInputs<double> d;
  Tensor<double> dO, dht;
  explicit Inputs(const Case& c)
      : d(random_gdn_inputs<double>(c.p, 51, c.h0, /*g_scale=*/0.05)),
        dO(random_tensor<double>(output_shape(c.p), 52)),
        dht(random_tensor<double>(state_shape(c.p), 53)) {
    forget_at(d, c.forget);
  }
};

template <typename T>
struct Result {
  Tensor<T> o, ht;
  Grads<T> grads;
  int pieces = 1;
  explicit Result(const Case& c) : o(output_shape(c.p)), ht(state_shape(c.p)), grads(c.p, c.h0) {}
  std::vector<std::pair<std::string, const Tensor<T>*>> named() const {
    auto n = grads.named();
    n.insert(n.begin(), {{"o", &o}, {"ht", &ht}});
    return n;
  }
};

// The unsplit single-rank op: one LocalPass over the whole sequence.
Result<double> run_unsplit(const Case& c, const Inputs& in) {
  Result<double> r(c);
  ChunkedGdn<double> op(c.p, in.d.view());
  op.forward(r.o.ptr(), r.ht.ptr());
  GdnGradView<double> g = r.grads.view();
  op.backward(in.dO.ptr(), c.dht ? in.dht.ptr() : nullptr, g);
  return r;
}

// GdnContextParallel on one rank, with the split options given.
template <typename T>
Result<T> run_cp1(const Case& c, const GdnInputs<T>& d, const Tensor<T>& dO, const Tensor<T>& dht,
                  CpOptions opt) {
  Result<T> r(c);
  SingleCommunicator comm;
  const CpContext cp = CpContext::contiguous(comm, c.p.T, opt);
  GdnContextParallel<T, Host> op;
  op.forward(cp, c.p, d.view(), r.o.ptr(), r.ht.ptr());
  GdnGradView<T> g = r.grads.view();
  op.backward(cp, dO.ptr(), c.dht ? dht.ptr() : nullptr, g);
  r.pieces = op.piece_split().pieces;
  return r;
}

CpOptions split_options(int S, bool log_depth) {
  CpOptions o;
  o.split_pieces = S;
  o.split_log_depth = log_depth;
  return o;
}

void check_close(const Result<double>& got, const Result<double>& want, double tol) {
  const auto g = got.named(), w = want.named();
  for (std::size_t i = 0; i < g.size(); ++i) {
    const double err = rel_l2(*g[i].second, *w[i].second);
    INFO(g[i].first << " rel err " << err);
    CHECK(err <= tol);
  }
}

std::int64_t chunks_of(const GdnProblem& p, std::int64_t t0, std::int64_t t1) {
  return std::int64_t(SliceLayout(p, t0, t1).chunks.size());
}

const std::vector<Case> kCases = {
    {"B*Hv = 1, T not a multiple of C, h0, dht", make_problem(1, 300, 1, 1, 8, 12, 16), true, true},
    {"B*Hv = 2 (B = 2), l2norm, h0", make_problem(2, 203, 1, 1, 8, 8, 16, true), true, true},
    {"B*Hv = 2 (Hv = 2 Hk), K != V, no h0", make_problem(1, 250, 1, 2, 12, 6, 16, true), false,
     true},
    {"packed, zero-length sequences, h0",
     make_problem(1, 400, 1, 2, 8, 8, 16, false, {0, 37, 37, 150, 160, 333, 400}), true, true},
    {"packed, boundaries on piece boundaries",
     make_problem(1, 256, 1, 1, 8, 8, 16, false, {0, 64, 128, 192, 256}), true, true},
    {"g = -inf on and next to piece boundaries",
     make_problem(1, 256, 1, 1, 8, 8, 16),
     true,
     true,
     {63, 64, 100, 255}},
    {"C = 64, no dht", make_problem(1, 1000, 1, 1, 16, 16, 64, true), true, false},
};

}  // namespace

TEST_CASE("split points are chunk starts of the slice, never an empty piece", "[split]") {
  const GdnProblem p = make_problem(1, 200, 1, 1, 4, 4, 16, false, {0, 10, 50, 50, 200});
  for (const auto& [t0, t1] :
       std::vector<std::pair<std::int64_t, std::int64_t>>{{0, 200}, {5, 190}, {40, 41}, {70, 70}}) {
    const SliceLayout l(p, t0, t1);
    for (int S : {1, 2, 3, 4, 7, 100}) {
      const std::vector<std::int64_t> b = split_points(l, S);
      INFO("slice [" << t0 << ", " << t1 << ") S=" << S);
      REQUIRE(b.size() >= 2);
      CHECK(std::int64_t(b.size()) - 1 ==
            std::clamp<std::int64_t>(S, 1, std::max<std::size_t>(l.chunks.size(), 1)));
      CHECK(b.front() == 0);
      CHECK(b.back() == t1 - t0);
      for (std::size_t i = 1; i + 1 < b.size(); ++i) {
        CHECK(b[i] > b[i - 1]);
        const bool chunk_start = std::any_of(l.chunks.begin(), l.chunks.end(),
                                             [&](const auto& c) { return c.begin == b[i]; });
        CHECK(chunk_start);
      }
    }
  }
}

TEST_CASE("the automatic plan splits only when B*Hv leaves threads idle", "[split]") {
  const PieceSplit autom{0, false};                              // 0: the plan decides
  const GdnProblem one = make_problem(1, 4096, 1, 1, 8, 8, 64);  // 64 chunks
  CHECK(choose_piece_split(autom, one, 0, one.T, 2).pieces == 2);
  CHECK(choose_piece_split(autom, one, 0, one.T, 8).pieces == 8);
  CHECK(choose_piece_split(autom, one, 0, one.T, 1).pieces == 1);
  CHECK(choose_piece_split(autom, one, 0, 7 * 64, 2).pieces == 1);  // under 4 chunks a piece
  CHECK(choose_piece_split(autom, one, 0, 8 * 64, 4).pieces == 2);  // as many as the chunks allow
  const GdnProblem two = make_problem(1, 4096, 1, 2, 8, 8, 64);
  CHECK(choose_piece_split(autom, two, 0, two.T, 2).pieces == 1);  // B*Hv = threads
  CHECK(choose_piece_split(autom, two, 0, two.T, 3).pieces == 1);  // 2 heads a job: no gain at S=3
  CHECK(choose_piece_split(autom, two, 0, two.T, 4).pieces == 4);
  const GdnProblem rows = make_problem(2, 4096, 1, 1, 8, 8, 64);
  CHECK(choose_piece_split(autom, rows, 0, rows.T, 4).pieces == 2);  // B x S = 4 jobs
  CHECK(choose_piece_split(autom, rows, 0, rows.T, 3).pieces == 1);
  CHECK(choose_piece_split(PieceSplit{1, false}, one, 0, one.T, 8).pieces == 1);
  const PieceSplit forced = choose_piece_split(PieceSplit{5, true}, two, 0, two.T, 1);
  CHECK(forced.pieces == 5);
  CHECK(forced.log_depth);
}

TEST_CASE("a job's parallel regions run on its one thread, even with nesting on", "[split]") {
  ThreadGuard guard;
  omp_set_num_threads(2);
  const int saved_levels = omp_get_max_active_levels();
  omp_set_max_active_levels(2);
  std::vector<int> inner(6, 0);
  for_each_job(6, [&](int j) {
#pragma omp parallel
    {
#pragma omp single
      inner[j] = omp_get_num_threads();
    }
  });
  omp_set_max_active_levels(saved_levels);
  for (int n : inner) CHECK(n == 1);
  CHECK(omp_get_max_threads() == 2);  // the caller's thread count is unchanged
  CHECK_THROWS_WITH(for_each_job(4,
                                 [](int j) {
                                   if (j == 2) throw std::runtime_error("job 2 failed");
                                 }),
                    "job 2 failed");
}

TEST_CASE("piece scans: serial chain and log depth equal the maps applied in order", "[split]") {
  const int BH = 2, K = 5, V = 3;
  const PairDims d{BH, K, V};
  for (int n : {1, 2, 3, 5, 8, 9}) {
    std::vector<Tensor<double>> A, B;
    PiecePairs<double> f;
    for (int j = 0; j < n; ++j) {
      A.push_back(random_tensor<double>({BH, K, K}, 100 + j, 0.4));
      B.push_back(random_tensor<double>({BH, K, V}, 200 + j));
    }
    for (int j = 0; j < n; ++j) {
      f.A.push_back(A[j].ptr());
      f.B.push_back(B[j].ptr());
    }
    const Tensor<double> x0 = random_tensor<double>({BH, K, V}, 300);
    for (bool transpose : {false, true}) {
      f.transpose = transpose;
      // The naive reference: x <- op(A_j) x + B_j, j = 0 .. n-1, keeping every x.
      std::vector<Tensor<double>> want;
      Tensor<double> x = x0;
      for (int j = 0; j < n; ++j) {
        Tensor<double> y = B[j];
        for (int bh = 0; bh < BH; ++bh)
          for (int i = 0; i < K; ++i)
            for (int c = 0; c < V; ++c)
              for (int l = 0; l < K; ++l) {
                const double a =
                    transpose ? A[j].data[(bh * K + l) * K + i] : A[j].data[(bh * K + i) * K + l];
                y.data[(bh * K + i) * V + c] += a * x.data[(bh * K + l) * V + c];
              }
        want.push_back(y);
        x = y;
      }
      for (bool log_depth : {false, true}) {
        INFO("n=" << n << " transpose=" << transpose << " log_depth=" << log_depth);
        std::vector<Tensor<double>> got(n, Tensor<double>({BH, K, V}));
        std::vector<double*> out;
        for (auto& g : got) out.push_back(g.ptr());
        scan_pieces(f, d, log_depth, x0.ptr(), out);
        for (int j = 0; j < n; ++j) CHECK(rel_l2(got[j], want[j]) < kExact);
        if (transpose) continue;
        // The fold: its offset is the last state from zero, and it maps x0 to the last state.
        Tensor<double> M({BH, K, K}), U({BH, K, V});
        fold_pieces(f, d, log_depth, M.ptr(), U.ptr());
        Tensor<double> y = U;
        for (int bh = 0; bh < BH; ++bh)
          for (int i = 0; i < K; ++i)
            for (int c = 0; c < V; ++c)
              for (int l = 0; l < K; ++l)
                y.data[(bh * K + i) * V + c] +=
                    M.data[(bh * K + i) * K + l] * x0.data[(bh * K + l) * V + c];
        CHECK(rel_l2(y, want.back()) < kExact);
      }
    }
  }
}

TEST_CASE("split through GdnContextParallel on one rank equals the unsplit op (fp64)", "[split]") {
  const Case c = GENERATE(from_range(kCases));
  DYNAMIC_SECTION(c.name) {
    const Inputs in(c);
    const Result<double> want = run_unsplit(c, in);
    const std::int64_t chunks = chunks_of(c.p, 0, c.p.T);
    for (int S : {2, 3, 4, 7}) {
      for (bool log_depth : {false, true}) {
        INFO(c.name << ": S=" << S << (log_depth ? " log-depth" : " serial chain"));
        const Result<double> got = run_cp1(c, in.d, in.dO, in.dht, split_options(S, log_depth));
        CHECK(got.pieces == std::min<std::int64_t>(S, chunks));
        check_close(got, want, kExact);
      }
    }
  }
}

TEST_CASE("split_pieces = 1 is the unsplit pass, bit for bit", "[split]") {
  const Case& c = kCases[3];
  const Inputs in(c);
  const Result<double> want = run_unsplit(c, in);
  const Result<double> got = run_cp1(c, in.d, in.dO, in.dht, split_options(1, false));
  CHECK(got.pieces == 1);
  const auto g = got.named(), w = want.named();
  for (std::size_t i = 0; i < g.size(); ++i) {
    INFO(g[i].first);
    CHECK(bit_difference(*g[i].second, *w[i].second) == "");
  }
}

TEST_CASE("split, phase by phase on an interior slice, equals LocalPass (fp64)", "[split]") {
  // The P > 1 interface: the slice continues a sequence from h_in and passes lambda on.
  const std::vector<std::tuple<Case, std::int64_t, std::int64_t>> slices = {
      {kCases[0], 37, 290},   // starts and ends inside the one sequence
      {kCases[1], 16, 203},   // B = 2, ends where the sequences end
      {kCases[3], 100, 350},  // packed: continues sequence 2, holds 3 and 4, stops in 5
  };
  const auto slice = GENERATE_REF(from_range(slices));
  const auto& [c, t0, t1] = slice;
  DYNAMIC_SECTION(c.name << ", tokens [" << t0 << ", " << t1 << ")") {
    const Inputs in(c);
    const GdnProblem& p = c.p;
    const std::int64_t n = t1 - t0;
    const int BH = p.B * p.Hv, K = p.K, V = p.V;
    const Tensor<double> q = token_slice(in.d.q, t0, t1), k = token_slice(in.d.k, t0, t1),
                         v = token_slice(in.d.v, t0, t1), g = token_slice(in.d.g, t0, t1),
                         beta = token_slice(in.d.beta, t0, t1), dO = token_slice(in.dO, t0, t1);
    const GdnInputView<double> view{q.ptr(), k.ptr(),    v.ptr(),
                                    g.ptr(), beta.ptr(), c.h0 ? in.d.h0.ptr() : nullptr};
    const Tensor<double> h_in = random_tensor<double>({BH, K, V}, 61),
                         lambda = random_tensor<double>({BH, K, V}, 62);
    const double* dht = c.dht ? in.dht.ptr() : nullptr;
    struct Phases {
      Tensor<double> M, U, o, ht, D;
      Grads<double> grads;
    };
    auto run = [&](auto& pass) {
      GdnProblem local = p;
      local.T = n;
      local.cu_seqlens.clear();
      Phases r{Tensor<double>({BH, K, K}),          Tensor<double>({BH, K, V}),
               Tensor<double>(output_shape(local)), Tensor<double>(state_shape(p)),
               Tensor<double>({BH, K, V}),          Grads<double>(local, false)};
      r.grads.dh0 = Tensor<double>(c.h0 ? state_shape(p) : Shape{0});
      pass.prepare();
      pass.transition(r.M.ptr(), r.U.ptr());
      pass.output(h_in.ptr(), r.o.ptr(), r.ht.ptr());
      pass.adjoint(dO.ptr(), dht, r.D.ptr());
      GdnGradView<double> gv = r.grads.view();
      pass.backward(lambda.ptr(), dO.ptr(), dht, gv);
      return r;
    };
    LocalPass<double, Host> whole(p, t0, t1, view);
    const Phases want = run(whole);
    for (int S : {2, 3, 4, 7}) {
      for (bool log_depth : {false, true}) {
        INFO(c.name << " slice [" << t0 << ", " << t1 << ") S=" << S
                    << (log_depth ? " log-depth" : " serial chain"));
        SplitLocalPass<double> split;
        split.reset(p, t0, t1, view, {S, log_depth});
        REQUIRE(split.pieces() == S);
        const Phases got = run(split);
        CHECK(rel_l2(got.M, want.M) < kExact);
        CHECK(rel_l2(got.U, want.U) < kExact);
        CHECK(rel_l2(got.o, want.o) < kExact);
        CHECK(rel_l2(got.ht, want.ht) < kExact);
        CHECK(rel_l2(got.D, want.D) < kExact);
        const auto gg = got.grads.named(), wg = want.grads.named();
        for (std::size_t i = 0; i < gg.size(); ++i) {
          INFO(gg[i].first);
          CHECK(rel_l2(*gg[i].second, *wg[i].second) < kExact);
        }
        // backward() again without adjoint() first: it makes the pieces' D itself.
        GdnProblem local = p;
        local.T = n;
        Grads<double> g2(local, false);
        g2.dh0 = Tensor<double>(c.h0 ? state_shape(p) : Shape{0});
        GdnGradView<double> gv2 = g2.view();
        split.backward(lambda.ptr(), dO.ptr(), dht, gv2);
        CHECK(bit_difference(g2.dq, got.grads.dq) == "");
        CHECK(bit_difference(g2.dg, got.grads.dg) == "");
      }
    }
  }
}

TEST_CASE("the split gives the same bits for 1, 2 and 3 threads at a fixed S", "[split]") {
  ThreadGuard guard;
  const Case c = GENERATE(values({kCases[0], kCases[3]}));
  DYNAMIC_SECTION(c.name) {
    const Inputs in(c);
    for (bool log_depth : {false, true}) {
      omp_set_num_threads(1);
      const Result<double> ref = run_cp1(c, in.d, in.dO, in.dht, split_options(3, log_depth));
      REQUIRE(ref.pieces == 3);
      for (int threads : {2, 3}) {
        omp_set_num_threads(threads);
        const Result<double> got = run_cp1(c, in.d, in.dO, in.dht, split_options(3, log_depth));
        const auto g = got.named(), w = ref.named();
        for (std::size_t i = 0; i < g.size(); ++i) {
          INFO(c.name << " threads=" << threads << " " << g[i].first);
          CHECK(bit_difference(*g[i].second, *w[i].second) == "");
        }
      }
    }
  }
}

TEST_CASE("split in fp32 stays within fp32 rounding of the unsplit op", "[split]") {
  const Case& c = kCases[0];
  const Inputs in(c);
  const GdnInputs<float> d{cast<float>(in.d.q), cast<float>(in.d.k),    cast<float>(in.d.v),
                           cast<float>(in.d.g), cast<float>(in.d.beta), cast<float>(in.d.h0)};
  const Tensor<float> dO = cast<float>(in.dO), dht = cast<float>(in.dht);
  const Result<float> unsplit = run_cp1(c, d, dO, dht, split_options(1, false));
  for (bool log_depth : {false, true}) {
    const Result<float> split = run_cp1(c, d, dO, dht, split_options(4, log_depth));
    const auto g = split.named(), w = unsplit.named();
    for (std::size_t i = 0; i < g.size(); ++i) {
      INFO(g[i].first);
      CHECK(rel_l2(*g[i].second, *w[i].second) < 1e-5);
    }
  }
}

TEST_CASE("GdnContextParallel splits by itself when B*Hv leaves threads idle", "[split]") {
  ThreadGuard guard;
  const Case& c = kCases[0];  // B*Hv = 1, 19 chunks
  const Inputs in(c);
  const Result<double> want = run_unsplit(c, in);
  omp_set_num_threads(2);
  const Result<double> two = run_cp1(c, in.d, in.dO, in.dht, CpOptions{});
  CHECK(two.pieces == 2);
  check_close(two, want, kExact);
  omp_set_num_threads(1);
  CHECK(run_cp1(c, in.d, in.dO, in.dht, CpOptions{}).pieces == 1);
}
