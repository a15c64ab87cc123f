// MpiCommunicator under mpirun (1 and 3 ranks): data lands where the interface says and
// the byte counters are exact. Every rank runs every case; expected values are computed
// from rank and size so a misplaced block or a wrong reduction fails on some rank.
#include <mpi.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

#include "comm/mpi_communicator.h"
#include "comm/single_communicator.h"
#include "core/error.h"
#include "test_support.h"

using namespace gdn;
using Catch::Contains;
using gdn::test::error_of;

namespace {

// The counters of a call site (the front's, comm/communicator.h): calls, bytes sent and
// bytes received.
void check_counted(const Communicator& c, const std::string& site, std::int64_t calls,
                   std::int64_t sent, std::int64_t received) {
  INFO("site " << site);
  const CommCounter& k = c.counter(site);
  CHECK(k.calls == calls);
  CHECK(k.bytes_sent == sent);
  CHECK(k.bytes_received == received);
}

// Value element i of rank r contributes; distinct across ranks and positions.
template <typename T>
T val(int r, std::size_t i) {
  return static_cast<T>(1000 * (r + 1) + static_cast<int>(i));
}

// Element i of block q (the block meant for rank q) that rank r contributes to
// reduce_scatter_sum; distinct across ranks, blocks and positions (i < 100), and for i64
// beyond 32 bits. Sums over up to 4 ranks stay exact in every type.
template <typename T>
T rs_val(int r, int q, std::size_t i) {
  const std::int64_t v = 10000 * (r + 1) + 100 * q + static_cast<std::int64_t>(i);
  if constexpr (std::is_same_v<T, std::int64_t>) return v * 4000000000LL;
  return static_cast<T>(v);
}

// all_to_all: bytes rank p sends rank q, and byte j of that message. Sizes differ per pair
// and include zeros (rank 1 sends rank 0 nothing); with two ranks or more the last rank
// sends nothing to anyone, itself included. 39 bytes are 6 pieces of at most 7.
std::size_t a2a_bytes(int p, int q, int n) {
  if (n > 1 && p == n - 1) return 0;
  return static_cast<std::size_t>((p * 3 + q * 5 + 1) % 4) * 13;
}
unsigned char a2a_byte(int p, int q, std::size_t j) {
  return static_cast<unsigned char>(p * 71 + q * 31 + static_cast<int>(j) + 1);
}
constexpr unsigned char kUntouched = 0xEE;  // fills gaps no block may write

// all_gather_v: the bytes of rank q's block (every third rank, rank 1 first, gives none)
// and byte j of it. 9 and 17 bytes are 2 and 3 pieces of at most 7.
std::size_t agv_bytes(int q) {
  return q % 3 == 1 ? 0 : static_cast<std::size_t>(9 + 4 * q);
}
unsigned char agv_byte(int q, std::size_t j) {
  return static_cast<unsigned char>(q * 53 + static_cast<int>(j) + 7);
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
    check_counted(c, "t.gather", 4, total, total * n);
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
    check_counted(c, "t.sum", 1, b, b);
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
  check_counted(c, "site.a", 2, 32, 32 * n);
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
  check_counted(c, "t.none", 1, 0, 0);
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

// The reduce_scatter_sum and all_to_all cases use CHECK, not REQUIRE, for values: a rank
// that left a test case early would leave the others waiting in the next collective.
TEMPLATE_TEST_CASE("reduce_scatter_sum sums block rank() over all ranks", "[comm]", float, double,
                   std::int32_t, std::int64_t) {
  MpiCommunicator c;
  const int r = c.rank(), n = c.size();
  const std::size_t es = sizeof(TestType);
  // Whole blocks; pieces of 5 f32/i32 or 2 f64/i64 elements (the last one shorter); and
  // pieces of 7 bytes, i.e. one element each (an element is never split).
  for (std::size_t chunk : {std::size_t{INT_MAX}, std::size_t{20}, std::size_t{7}}) {
    CAPTURE(chunk);
    c.set_max_message_bytes(chunk);
    c.reset_counters();
    std::int64_t moved = 0;
    for (std::size_t count : {std::size_t{1}, std::size_t{11}, std::size_t{33}}) {
      CAPTURE(count);
      std::vector<TestType> send(count * n);
      for (int q = 0; q < n; ++q)
        for (std::size_t i = 0; i < count; ++i) send[q * count + i] = rs_val<TestType>(r, q, i);
      const std::vector<TestType> sent = send;
      // One guard element past recv: nothing may be written beyond count elements.
      std::vector<TestType> recv(count + 1, static_cast<TestType>(-7));
      c.reduce_scatter_sum(send.data(), recv.data(), count, "t.rs");
      for (std::size_t i = 0; i < count; ++i) {
        TestType expect = 0;
        for (int p = 0; p < n; ++p) expect += rs_val<TestType>(p, r, i);
        CHECK(recv[i] == expect);
      }
      CHECK(recv[count] == static_cast<TestType>(-7));
      CHECK(send == sent);
      moved += static_cast<std::int64_t>(count * es);

      // In place: recv is this rank's own block of send; the other blocks stay as they were.
      c.reduce_scatter_sum(send.data(), send.data() + r * count, count, "t.rs_in_place");
      for (int q = 0; q < n; ++q)
        for (std::size_t i = 0; i < count; ++i) {
          TestType expect = 0;
          if (q == r)
            for (int p = 0; p < n; ++p) expect += rs_val<TestType>(p, r, i);
          else
            expect = rs_val<TestType>(r, q, i);
          CHECK(send[q * count + i] == expect);
        }
    }
    const CommCounter& k = c.counter("t.rs");
    CHECK(k.calls == 3);
    CHECK(k.bytes_sent == moved * n);  // the whole input, own block included
    CHECK(k.bytes_received == moved);
    check_counted(c, "t.rs_in_place", 3, moved * n, moved);

    // Zero elements, through the DType overload, with no buffers at all.
    c.reduce_scatter_sum(nullptr, nullptr, 0, dtype_of<TestType>(), "t.rs_empty");
    check_counted(c, "t.rs_empty", 1, 0, 0);
  }
}

TEST_CASE("all_to_all delivers unequal blocks at their offsets and counts bytes", "[comm]") {
  MpiCommunicator c;
  const int r = c.rank(), n = c.size();
  with_chunk_sizes(c, [&] {
    // Send blocks in reverse peer order with 5-byte gaps; receive blocks in peer order,
    // starting at 2, with 3-byte gaps. Gaps and the tail of recv must stay untouched.
    std::vector<std::size_t> sb(n), so(n), rb(n), ro(n);
    std::size_t send_end = 0, recv_end = 2;
    for (int q = n - 1; q >= 0; --q) {
      sb[q] = a2a_bytes(r, q, n);
      so[q] = send_end;
      send_end += sb[q] + 5;
    }
    for (int q = 0; q < n; ++q) {
      rb[q] = a2a_bytes(q, r, n);
      ro[q] = recv_end;
      recv_end += rb[q] + 3;
    }
    std::vector<unsigned char> send(send_end, 0), recv(recv_end + 4, kUntouched);
    for (int q = 0; q < n; ++q)
      for (std::size_t j = 0; j < sb[q]; ++j) send[so[q] + j] = a2a_byte(r, q, j);
    const std::vector<unsigned char> sent = send;

    c.all_to_all(send.data(), sb, so, recv.data(), rb, ro, "t.a2a");
    std::vector<unsigned char> expect(recv.size(), kUntouched);
    for (int q = 0; q < n; ++q)
      for (std::size_t j = 0; j < rb[q]; ++j) expect[ro[q] + j] = a2a_byte(q, r, j);
    for (std::size_t b = 0; b < recv.size(); ++b) {
      CAPTURE(b);
      CHECK(static_cast<int>(recv[b]) == static_cast<int>(expect[b]));
    }
    CHECK(send == sent);

    // Counted: what crosses to other ranks; the block to self is a local copy.
    std::int64_t out = 0, in = 0;
    for (int q = 0; q < n; ++q)
      if (q != r) {
        out += static_cast<std::int64_t>(sb[q]);
        in += static_cast<std::int64_t>(rb[q]);
      }
    const CommCounter& k = c.counter("t.a2a");
    CHECK(k.calls == 1);
    CHECK(k.bytes_sent == out);
    CHECK(k.bytes_received == in);
    if (n > 1 && r == n - 1) CHECK(k.bytes_sent == 0);

    // Nothing at all to anyone: still a valid call, counted with 0 bytes.
    const std::vector<std::size_t> zeros(n, 0);
    c.all_to_all(nullptr, zeros, zeros, nullptr, zeros, zeros, "t.a2a_empty");
    check_counted(c, "t.a2a_empty", 1, 0, 0);
  });
}

TEST_CASE("all_to_all: a message of the wrong size is an error naming site, rank and peer",
          "[comm]") {
  MpiCommunicator c;
  const int r = c.rank(), n = c.size();
  if (n < 2) return;
  // Whole messages: one per pair each way, so every call completes on every rank and only
  // rank 0, the receiver, sees the mismatch. Ranks other than 0 and 1 exchange nothing.
  const std::vector<std::size_t> offsets(n, 0);
  std::vector<unsigned char> send(16, 1), recv(16, 0);
  auto run = [&](std::size_t sent_by_1, std::size_t expected_by_0, const std::string& site) {
    std::vector<std::size_t> sb(n, 0), rb(n, 0);
    if (r == 1) sb[0] = sent_by_1;
    if (r == 0) rb[1] = expected_by_0;
    const std::string m =
        error_of([&] { c.all_to_all(send.data(), sb, offsets, recv.data(), rb, offsets, site); });
    if (r != 0) CHECK(m.empty());
    return m;
  };
  // Rank 1 sends fewer bytes than rank 0 expects.
  std::string m = run(8, 16, "t.short");
  if (r == 0)
    CHECK_THAT(m, Contains("all_to_all at site 't.short' on rank 0") &&
                      Contains("expected 16 bytes from rank 1, got 8"));
  // Rank 1 sends nothing where rank 0 expects bytes: the empty message still arrives.
  m = run(0, 8, "t.none");
  if (r == 0) CHECK_THAT(m, Contains("t.none") && Contains("expected 8 bytes from rank 1, got 0"));
  // Rank 1 sends more than rank 0 expects: MPI truncates, and the receive names the peer.
  m = run(16, 4, "t.long");
  if (r == 0)
    CHECK_THAT(m, Contains("MPI_Irecv failed at site 't.long' on rank 0") &&
                      Contains("expecting 4 bytes from rank 1"));
  if (r == 0) CHECK(c.counters().empty());  // failed calls are not counted

  // Nothing was left in flight: a matching exchange afterwards delivers what it should.
  send.assign(16, static_cast<unsigned char>(r + 1));
  recv.assign(16, 0);
  m = run(16, 16, "t.after");
  CHECK(m.empty());
  if (r == 0) CHECK(recv == std::vector<unsigned char>(16, 2));
  c.barrier();
}

TEST_CASE("all_to_all rejects vectors of the wrong length and a mismatched block to self",
          "[comm]") {
  MpiCommunicator c;
  const int r = c.rank(), n = c.size();
  std::vector<unsigned char> buf(8, 0);
  const std::vector<std::size_t> ok(n, 0), longer(n + 1, 0), shorter(n - 1, 0);
  // Local checks before any message: every rank throws alike, so nobody waits.
  CHECK_THROWS_WITH(
      c.all_to_all(buf.data(), longer, ok, buf.data(), ok, ok, "t.len"),
      Contains("MpiCommunicator::all_to_all at site 't.len' on rank " + std::to_string(r)) &&
          Contains("send_bytes has " + std::to_string(n + 1) + " entries") &&
          Contains("expected size() = " + std::to_string(n)));
  CHECK_THROWS_WITH(c.all_to_all(buf.data(), ok, ok, buf.data(), ok, shorter, "t.len"),
                    Contains("recv_offsets has " + std::to_string(n - 1) + " entries"));
  std::vector<std::size_t> sb(n, 0), rb(n, 0);
  sb[r] = 4;
  rb[r] = 8;
  CHECK_THROWS_WITH(c.all_to_all(buf.data(), sb, ok, buf.data(), rb, ok, "t.self"),
                    Contains("t.self") && Contains("block to self") &&
                        Contains("send_bytes = 4 but recv_bytes = 8"));
  CHECK(c.counters().empty());  // failed calls are not counted
  c.barrier();
}

TEST_CASE("all_gather_v places uneven blocks at their offsets and counts bytes", "[comm]") {
  MpiCommunicator c;
  const int r = c.rank(), n = c.size();
  std::vector<std::size_t> rb(n);
  std::size_t total = 0;
  for (int q = 0; q < n; ++q) total += rb[q] = agv_bytes(q);
  // Whole blocks (one MPI_Allgatherv); a limit the whole output just fits in but every
  // offset passes (MPI_Allgatherv into a packed scratch); pieces of at most 7 bytes (the
  // point-to-point path, as the output is over the limit).
  for (std::size_t chunk : {std::size_t{INT_MAX}, total, std::size_t{7}}) {
    CAPTURE(chunk);
    c.set_max_message_bytes(chunk);
    c.reset_counters();
    // Blocks in reverse rank order after a leading gap, with 3-byte gaps between them and
    // after the last: gaps and the zero-length blocks must leave kUntouched everywhere else.
    const std::size_t lead = chunk == total ? total + 1 : 2;
    std::vector<std::size_t> ro(n);
    std::size_t end = lead;
    for (int q = n - 1; q >= 0; --q) {
      ro[q] = end;
      end += rb[q] + 3;
    }
    std::vector<unsigned char> expect(end, kUntouched);
    for (int q = 0; q < n; ++q)
      for (std::size_t j = 0; j < rb[q]; ++j) expect[ro[q] + j] = agv_byte(q, j);
    std::vector<unsigned char> mine(rb[r]);
    for (std::size_t j = 0; j < rb[r]; ++j) mine[j] = agv_byte(r, j);
    const std::vector<unsigned char> sent = mine;

    std::vector<unsigned char> recv(end, kUntouched);
    c.all_gather_v(mine.data(), mine.size(), recv.data(), rb, ro, "t.agv");
    for (std::size_t b = 0; b < end; ++b) {
      CAPTURE(b);
      CHECK(static_cast<int>(recv[b]) == static_cast<int>(expect[b]));
    }
    CHECK(mine == sent);

    // In place: this rank's block already sits in the output.
    std::vector<unsigned char> all(end, kUntouched);
    std::copy(mine.begin(), mine.end(), all.begin() + static_cast<std::ptrdiff_t>(ro[r]));
    c.all_gather_v(all.data() + ro[r], rb[r], all.data(), rb, ro, "t.agv_in_place");
    for (std::size_t b = 0; b < end; ++b) {
      CAPTURE(b);
      CHECK(static_cast<int>(all[b]) == static_cast<int>(expect[b]));
    }

    // Nothing from anyone, with no buffers at all: still a valid call, counted with 0 bytes.
    const std::vector<std::size_t> zeros(n, 0);
    c.all_gather_v(nullptr, 0, nullptr, zeros, zeros, "t.agv_empty");

    // Counted like all_gather: this rank's block sent, the whole output (own block
    // included) received.
    for (const char* site : {"t.agv", "t.agv_in_place"}) {
      CAPTURE(site);
      check_counted(c, site, 1, static_cast<std::int64_t>(rb[r]), static_cast<std::int64_t>(total));
    }
    check_counted(c, "t.agv_empty", 1, 0, 0);
  }
}

TEST_CASE("all_gather_v rejects vectors of the wrong length and send_bytes != recv_bytes[rank]",
          "[comm]") {
  MpiCommunicator c;
  const int r = c.rank(), n = c.size();
  const std::string rs = std::to_string(r);
  std::vector<unsigned char> buf(8, 0);
  const std::vector<std::size_t> ok(n, 0), longer(n + 1, 0), shorter(n - 1, 0);
  // Local checks before any message: every rank throws alike, so nobody waits.
  CHECK_THROWS_WITH(c.all_gather_v(buf.data(), 0, buf.data(), longer, ok, "t.agv_len"),
                    Contains("MpiCommunicator::all_gather_v at site 't.agv_len' on rank " + rs) &&
                        Contains("recv_bytes has " + std::to_string(n + 1) + " entries") &&
                        Contains("expected size() = " + std::to_string(n)));
  CHECK_THROWS_WITH(c.all_gather_v(buf.data(), 0, buf.data(), ok, shorter, "t.agv_len"),
                    Contains("recv_offsets has " + std::to_string(n - 1) + " entries"));
  std::vector<std::size_t> rb(n, 0);
  rb[r] = 8;
  CHECK_THROWS_WITH(c.all_gather_v(buf.data(), 4, buf.data(), rb, ok, "t.agv_self"),
                    Contains("MpiCommunicator::all_gather_v at site 't.agv_self' on rank " + rs) &&
                        Contains("send_bytes = 4 but recv_bytes[" + rs + "] = 8") &&
                        Contains("expected equal sizes"));
  CHECK(c.counters().empty());  // failed calls are not counted
  c.barrier();
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

TEST_CASE("SingleCommunicator reduce_scatter_sum and all_to_all are copies", "[comm][single]") {
  SingleCommunicator s;
  std::vector<double> a = {1, 2, 3}, b(4, -1);
  s.reduce_scatter_sum(a.data(), b.data(), 3, "rs");
  CHECK(b == std::vector<double>{1, 2, 3, -1});
  s.reduce_scatter_sum(a.data(), a.data(), 3, "rs");  // in place: block 0 is recv itself
  CHECK(a == std::vector<double>{1, 2, 3});
  s.reduce_scatter_sum(nullptr, nullptr, 0, DType::f32, "rs");
  check_counted(s, "rs", 3, 48, 48);

  // The one block is the block to self: copied between the offsets, counted as 0 bytes.
  std::vector<unsigned char> send = {9, 8, 7, 6, 5}, recv(6, kUntouched);
  s.all_to_all(send.data(), {3}, {1}, recv.data(), {3}, {2}, "a2a");
  CHECK(recv == std::vector<unsigned char>{kUntouched, kUntouched, 8, 7, 6, kUntouched});
  s.all_to_all(nullptr, {0}, {0}, nullptr, {0}, {0}, "a2a");
  check_counted(s, "a2a", 2, 0, 0);
  REQUIRE_THROWS_WITH(s.all_to_all(send.data(), {3, 0}, {0}, recv.data(), {3}, {0}, "bad"),
                      Contains("SingleCommunicator::all_to_all at site 'bad'") &&
                          Contains("send_bytes has 2 entries, expected size() = 1"));
  REQUIRE_THROWS_WITH(s.all_to_all(send.data(), {3}, {0}, recv.data(), {2}, {0}, "bad"),
                      Contains("send_bytes = 3 but recv_bytes = 2"));
  CHECK(s.counters().count("bad") == 0);
}

TEST_CASE("SingleCommunicator all_gather_v is a copy to the block's offset", "[comm][single]") {
  SingleCommunicator s;
  std::vector<unsigned char> send = {9, 8, 7}, recv(6, kUntouched);
  s.all_gather_v(send.data(), 3, recv.data(), {3}, {2}, "agv");
  CHECK(recv == std::vector<unsigned char>{kUntouched, kUntouched, 9, 8, 7, kUntouched});
  // In place: the block is already there.
  s.all_gather_v(recv.data() + 2, 3, recv.data(), {3}, {2}, "agv");
  CHECK(recv == std::vector<unsigned char>{kUntouched, kUntouched, 9, 8, 7, kUntouched});
  s.all_gather_v(nullptr, 0, nullptr, {0}, {0}, "agv");
  check_counted(s, "agv", 3, 6, 6);
  REQUIRE_THROWS_WITH(s.all_gather_v(send.data(), 3, recv.data(), {3, 0}, {0}, "bad"),
                      Contains("SingleCommunicator::all_gather_v at site 'bad' on rank 0") &&
                          Contains("recv_bytes has 2 entries, expected size() = 1"));
  REQUIRE_THROWS_WITH(s.all_gather_v(send.data(), 3, recv.data(), {2}, {0}, "bad"),
                      Contains("send_bytes = 3 but recv_bytes[0] = 2"));
  CHECK(s.counters().count("bad") == 0);
}
