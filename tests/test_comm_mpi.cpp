// MpiCommunicator under mpirun (1 and 3 ranks): data lands where the interface says and
// the byte counters are exact. Every rank runs every case; expected values are computed
// from rank and size so a misplaced block or a wrong reduction fails on some rank.
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <numeric>
#include <vector>

#include "comm/mpi_communicator.h"
#include "comm/single_communicator.h"
#include "core/error.h"

using namespace gdn;
using Catch::Contains;

namespace {

// Value element i of rank r contributes; distinct across ranks and positions.
template <typename T>
T val(int r, std::size_t i) {
  return static_cast<T>(1000 * (r + 1) + static_cast<int>(i));
}

// Runs the body once with whole messages and once split into tiny pieces, which takes
// the >INT_MAX code paths (chunking, derived types, nonblocking) on small buffers.
template <typename F>
void with_chunk_sizes(MpiCommunicator& c, F&& body) {
  for (std::size_t chunk : {std::size_t{2147483647}, std::size_t{7}}) {
    CAPTURE(chunk);
    c.set_max_message_bytes(chunk);
    c.reset_counters();
    body();
  }
}

}  // namespace

TEST_CASE("all_gather places blocks in rank order and counts bytes", "[comm]") {
  MpiCommunicator c;
  const int r = c.rank(), n = c.size();
  int world = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  REQUIRE(n == world);
  with_chunk_sizes(c, [&] {
    for (std::size_t elems : {std::size_t{0}, std::size_t{1}, std::size_t{5}, std::size_t{33}}) {
      CAPTURE(elems);
      std::vector<double> mine(elems), all(elems * n, -1.0);
      for (std::size_t i = 0; i < elems; ++i) mine[i] = val<double>(r, i);
      c.all_gather(mine.data(), all.data(), elems * sizeof(double), "t.gather");
      for (int q = 0; q < n; ++q)
        for (std::size_t i = 0; i < elems; ++i) REQUIRE(all[q * elems + i] == val<double>(q, i));
    }
    const std::int64_t total = (0 + 1 + 5 + 33) * 8;
    const CommCounter& k = c.counter("t.gather");
    CHECK(k.calls == 4);
    CHECK(k.bytes_sent == total);
    CHECK(k.bytes_received == total * n);
  });
}

TEST_CASE("all_gather in place from this rank's own block", "[comm]") {
  MpiCommunicator c;
  const int r = c.rank(), n = c.size();
  with_chunk_sizes(c, [&] {
    const std::size_t elems = 6;
    std::vector<std::int32_t> all(elems * n, -1);
    for (std::size_t i = 0; i < elems; ++i) all[r * elems + i] = val<std::int32_t>(r, i);
    c.all_gather(all.data() + r * elems, all.data(), elems * 4, "t.inplace");
    for (int q = 0; q < n; ++q)
      for (std::size_t i = 0; i < elems; ++i)
        REQUIRE(all[q * elems + i] == val<std::int32_t>(q, i));
  });
}

TEMPLATE_TEST_CASE("all_reduce_sum and all_reduce_max", "[comm]", float, double, std::int32_t,
                   std::int64_t) {
  MpiCommunicator c;
  const int r = c.rank(), n = c.size();
  with_chunk_sizes(c, [&] {
    const std::size_t count = 11;
    std::vector<TestType> s(count), m(count);
    for (std::size_t i = 0; i < count; ++i) {
      s[i] = static_cast<TestType>((r + 1) * static_cast<int>(i + 1));
      // The max sits on a different rank for different i.
      m[i] = static_cast<TestType>(((r + static_cast<int>(i)) % n) * 10 - 5);
    }
    c.all_reduce_sum(s.data(), count, "t.sum");
    c.all_reduce_max(m.data(), count, "t.max");
    const int tri = n * (n + 1) / 2;
    for (std::size_t i = 0; i < count; ++i) {
      REQUIRE(s[i] == static_cast<TestType>(tri * static_cast<int>(i + 1)));
      REQUIRE(m[i] == static_cast<TestType>((n - 1) * 10 - 5));
    }
    const std::int64_t b = count * sizeof(TestType);
    CHECK(c.counter("t.sum").calls == 1);
    CHECK(c.counter("t.sum").bytes_sent == b);
    CHECK(c.counter("t.sum").bytes_received == b);
    CHECK(c.counter("t.max").bytes_sent == b);
    CHECK(c.counter("t.max").bytes_received == b);
  });
}

TEST_CASE("all_reduce with the DType overload and zero elements", "[comm]") {
  MpiCommunicator c;
  std::int64_t x = c.rank();
  c.all_reduce_max(&x, 1, DType::i64, "t.dt");
  CHECK(x == c.size() - 1);
  c.all_reduce_sum(static_cast<float*>(nullptr), 0, "t.empty");
  CHECK(c.counter("t.empty").calls == 1);
  CHECK(c.counter("t.empty").bytes_sent == 0);
}

TEST_CASE("send_recv shifts data around the ring and along the line", "[comm]") {
  MpiCommunicator c;
  const int r = c.rank(), n = c.size();
  with_chunk_sizes(c, [&] {
    const std::size_t elems = 9;
    std::vector<float> out(elems), in(elems, -1.f);
    for (std::size_t i = 0; i < elems; ++i) out[i] = val<float>(r, i);
    // Ring: everyone sends right, receives from the left.
    const int right = (r + 1) % n, left = (r + n - 1) % n;
    c.send_recv(out.data(), elems * 4, right, in.data(), elems * 4, left, 3, "t.ring");
    for (std::size_t i = 0; i < elems; ++i) REQUIRE(in[i] == val<float>(left, i));
    CHECK(c.counter("t.ring").bytes_sent == static_cast<std::int64_t>(elems * 4));
    CHECK(c.counter("t.ring").bytes_received == static_cast<std::int64_t>(elems * 4));

    // Open line: rank 0 receives nothing, the last rank sends nothing (-1 = none).
    std::fill(in.begin(), in.end(), -1.f);
    const int dest = r + 1 < n ? r + 1 : -1, src = r > 0 ? r - 1 : -1;
    c.send_recv(out.data(), elems * 4, dest, in.data(), elems * 4, src, 4, "t.line");
    for (std::size_t i = 0; i < elems; ++i)
      REQUIRE(in[i] == (src == -1 ? -1.f : val<float>(src, i)));
    CHECK(c.counter("t.line").calls == 1);
    CHECK(c.counter("t.line").bytes_sent ==
          (dest == -1 ? 0 : static_cast<std::int64_t>(elems * 4)));
    CHECK(c.counter("t.line").bytes_received ==
          (src == -1 ? 0 : static_cast<std::int64_t>(elems * 4)));

    // Different sizes each way: send 2*(r+1) doubles, receive what the left rank sends.
    std::vector<double> big(2 * (r + 1), r + 0.5), got(2 * (left + 1), -1.0);
    c.send_recv(big.data(), big.size() * 8, right, got.data(), got.size() * 8, left, 5, "t.sizes");
    for (double g : got) REQUIRE(g == left + 0.5);
  });
}

TEST_CASE("send/recv pairs deliver exact bytes", "[comm]") {
  MpiCommunicator c;
  const int r = c.rank(), n = c.size();
  if (n < 2) {
    // One rank has nobody to talk to; the range check must still reject bad peers.
    std::int32_t x = 0;
    REQUIRE_THROWS_WITH(c.send(&x, 4, 1, 0, "t.p2p"), Contains("dest = 1"));
    REQUIRE_THROWS_WITH(c.recv(&x, 4, -1, 0, "t.p2p"), Contains("src = -1"));
    return;
  }
  with_chunk_sizes(c, [&] {
    // Rank 0 sends a distinct message to every other rank; each answers with its rank.
    if (r == 0) {
      for (int q = 1; q < n; ++q) {
        std::vector<std::int64_t> msg(q + 3);
        for (std::size_t i = 0; i < msg.size(); ++i) msg[i] = val<std::int64_t>(q, i);
        c.send(msg.data(), msg.size() * 8, q, 10 + q, "t.p2p");
      }
      std::int64_t expected_recv = 0;
      for (int q = 1; q < n; ++q) {
        std::int32_t back = -1;
        c.recv(&back, 4, q, 20, "t.p2p");
        REQUIRE(back == q * q);
        expected_recv += 4;
      }
      std::int64_t expected_sent = 0;
      for (int q = 1; q < n; ++q) expected_sent += (q + 3) * 8;
      CHECK(c.counter("t.p2p").bytes_sent == expected_sent);
      CHECK(c.counter("t.p2p").bytes_received == expected_recv);
      CHECK(c.counter("t.p2p").calls == 2 * (n - 1));
    } else {
      std::vector<std::int64_t> msg(r + 3, -1);
      c.recv(msg.data(), msg.size() * 8, 0, 10 + r, "t.p2p");
      for (std::size_t i = 0; i < msg.size(); ++i) REQUIRE(msg[i] == val<std::int64_t>(r, i));
      const std::int32_t back = r * r;
      c.send(&back, 4, 0, 20, "t.p2p");
      CHECK(c.counter("t.p2p").bytes_sent == 4);
      CHECK(c.counter("t.p2p").bytes_received == static_cast<std::int64_t>((r + 3) * 8));
    }
  });
}

TEST_CASE("a receive larger than the message sent is an error, not silent garbage", "[comm]") {
  MpiCommunicator c;
  if (c.size() < 2) return;
  if (c.rank() == 0) {
    std::int32_t x[2] = {1, 2};
    c.send(x, 8, 1, 7, "t.short");
  } else if (c.rank() == 1) {
    std::int32_t y[4] = {};
    REQUIRE_THROWS_WITH(c.recv(y, 16, 0, 7, "t.short"),
                        Contains("expected 16 bytes from rank 0") && Contains("got 8"));
  }
  c.barrier();
}

TEST_CASE("counters are per site and reset_counters clears them", "[comm]") {
  MpiCommunicator c;
  const int n = c.size();
  std::vector<float> a(4, 1.f), all(4 * n);
  c.all_gather(a.data(), all.data(), 16, "site.a");
  c.all_gather(a.data(), all.data(), 16, "site.a");
  c.all_reduce_sum(a.data(), 4, "site.b");
  c.barrier();
  CHECK(c.counters().size() == 2);
  CHECK(c.counter("site.a").calls == 2);
  CHECK(c.counter("site.a").bytes_sent == 32);
  CHECK(c.counter("site.a").bytes_received == 32 * n);
  CHECK(c.counter("site.b").calls == 1);
  CHECK(c.counter("site.b").bytes_sent == 16);
  CHECK(c.counter("never.used").calls == 0);
  CHECK(c.counter("never.used").bytes_received == 0);
  CHECK(c.counters().size() == 2);  // looking up an unused site does not create it
  c.reset_counters();
  CHECK(c.counters().empty());
  CHECK(c.counter("site.a").calls == 0);
  CHECK(a == std::vector<float>(4, static_cast<float>(n)));
}

TEST_CASE("bad arguments throw gdn::Error naming call and site", "[comm]") {
  MpiCommunicator c;
  float x = 0;
  REQUIRE_THROWS_WITH(c.send_recv(&x, 4, c.size(), &x, 4, -1, 0, "t.bad"),
                      Contains("MPI_Sendrecv") && Contains("t.bad") && Contains("dest = "));
  REQUIRE_THROWS_WITH(c.send_recv(&x, 4, -1, &x, 4, -1, -3, "t.bad"), Contains("tag = -3"));
  REQUIRE_THROWS_AS(c.set_max_message_bytes(0), Error);
  // dest = src = -1 is a valid no-op exchange.
  c.send_recv(&x, 4, -1, &x, 4, -1, 0, "t.none");
  CHECK(c.counter("t.none").calls == 1);
  CHECK(c.counter("t.none").bytes_sent == 0);
  CHECK(c.counter("t.none").bytes_received == 0);
  CHECK(c.counters().count("t.bad") == 0);  // failed calls are not counted
}

TEST_CASE("MpiCommunicator over a sub-communicator", "[comm]") {
  // Split world into even and odd ranks; each half gathers independently.
  int wr = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &wr);
  MPI_Comm half;
  REQUIRE(MPI_Comm_split(MPI_COMM_WORLD, wr % 2, wr, &half) == MPI_SUCCESS);
  {
    MpiCommunicator c(half);
    CHECK(c.rank() == wr / 2);
    std::vector<int> all(c.size());
    c.all_gather(&wr, all.data(), sizeof(int), "t.half");
    for (int q = 0; q < c.size(); ++q) REQUIRE(all[q] == 2 * q + wr % 2);
  }
  MPI_Comm_free(&half);
}

TEST_CASE("SingleCommunicator behaves as one MPI rank", "[comm][single]") {
  SingleCommunicator s;
  CHECK(s.rank() == 0);
  CHECK(s.size() == 1);
  std::vector<double> a = {1, 2, 3}, b(3, 0);
  s.all_gather(a.data(), b.data(), 24, "g");
  CHECK(b == a);
  CHECK(s.counter("g").bytes_sent == 24);
  CHECK(s.counter("g").bytes_received == 24);
  s.all_reduce_sum(a.data(), 3, "r");
  s.all_reduce_max(a.data(), 3, "r");
  CHECK(a == std::vector<double>{1, 2, 3});
  CHECK(s.counter("r").calls == 2);
  CHECK(s.counter("r").bytes_sent == 48);
  REQUIRE_THROWS_WITH(s.send(a.data(), 8, 0, 0, "p"), Contains("only one rank"));
  REQUIRE_THROWS_WITH(s.recv(a.data(), 8, 0, 0, "p"), Contains("only one rank"));
  s.send_recv(a.data(), 8, -1, b.data(), 8, -1, 0, "sr");
  CHECK(s.counter("sr").calls == 1);
  CHECK(s.counter("sr").bytes_sent == 0);
  std::vector<double> c(3, 0);
  s.send_recv(a.data(), 24, 0, c.data(), 24, 0, 0, "self");
  CHECK(c == a);
  REQUIRE_THROWS_AS(s.send_recv(a.data(), 8, 0, b.data(), 8, -1, 0, "sr"), Error);
  REQUIRE_THROWS_AS(s.send_recv(a.data(), 8, 1, b.data(), 8, 1, 0, "sr"), Error);
  s.reset_counters();
  CHECK(s.counters().empty());
}
