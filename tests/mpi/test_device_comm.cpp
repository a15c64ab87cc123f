// Device selection and the device communicators under mpirun (1 and 2 ranks). The error
// checks, local-rank and no-GPU parts run everywhere (ctest's test_device_comm_np*); the
// round trips on device buffers, tagged [gpu], run in test_device_comm_gpu_np*, which
// reports SKIP (exit 77) where no GPU is visible. Value checks use CHECK, not REQUIRE: a rank that
// left a test case early would leave the others waiting in the next collective.
#include <cuda_runtime.h>
#include <mpi.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "comm/device_communicator.h"
#include "comm/mpi_communicator.h"
#include "comm/nccl_communicator.h"
#include "comm/staging_communicator.h"
#include "core/error.h"
#include "cp/log_depth_scan.h"
#include "runtime/cuda_check.h"
#include "runtime/cuda_device.h"
#include "runtime/device_select.h"
#include "test_support.h"

using namespace gdn;
using Catch::Contains;
using gdn::test::error_of;

namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// The node-local rank and size straight from MPI, to compare node_local_rank against.
LocalRank mpi_local() {
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank(), MPI_INFO_NULL, &node);
  LocalRank lr;
  MPI_Comm_rank(node, &lr.rank);
  MPI_Comm_size(node, &lr.size);
  MPI_Comm_free(&node);
  return lr;
}

// Sets (or, with nullopt, unsets) an environment variable for one scope. mpirun itself
// sets OMPI_COMM_WORLD_LOCAL_RANK, so the tests must put it back.
class EnvGuard {
 public:
  EnvGuard(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    set(value);
  }
  ~EnvGuard() { set(old_); }
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;

 private:
  void set(const std::optional<std::string>& v) {
    if (v)
      setenv(name_, v->c_str(), 1);
    else
      unsetenv(name_);
  }
  const char* name_;
  std::optional<std::string> old_;
};

// A device array with host round trips, for the tests only.
template <typename T>
struct DeviceVec {
  explicit DeviceVec(const std::vector<T>& host) : n(host.size()) {
    GDN_CUDA_CHECK(cudaMalloc(&p, (n > 0 ? n : 1) * sizeof(T)));
    GDN_CUDA_CHECK(cudaMemcpy(p, host.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  }
  ~DeviceVec() { cudaFree(p); }
  DeviceVec(const DeviceVec&) = delete;
  DeviceVec& operator=(const DeviceVec&) = delete;
  std::vector<T> host() const {
    std::vector<T> h(n);
    GDN_CUDA_CHECK(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
  }
  T* p = nullptr;
  std::size_t n;
};

// Value element i of rank r contributes; distinct across ranks and positions.
template <typename T>
T val(int r, std::size_t i) {
  return static_cast<T>(1000 * (r + 1) + static_cast<int>(i));
}

// The same checks for every backend: data lands where the interface says and the byte
// counters equal MpiCommunicator's.
void check_round_trips(Communicator& c) {
  const int r = c.rank(), n = c.size();
  REQUIRE(n == world_size());
  c.reset_counters();

  std::int64_t gathered = 0;
  for (std::size_t elems : {std::size_t{0}, std::size_t{1}, std::size_t{5}, std::size_t{33}}) {
    CAPTURE(elems);
    std::vector<double> mine(elems);
    for (std::size_t i = 0; i < elems; ++i) mine[i] = val<double>(r, i);
    DeviceVec<double> d_mine(mine), d_all(std::vector<double>(elems * n, -1.0));
    c.all_gather(d_mine.p, d_all.p, elems * sizeof(double), "t.gather");
    const auto all = d_all.host();
    for (int q = 0; q < n; ++q)
      for (std::size_t i = 0; i < elems; ++i) CHECK(all[q * elems + i] == val<double>(q, i));
    gathered += static_cast<std::int64_t>(elems * sizeof(double));
  }
  CHECK(c.counter("t.gather").calls == 4);
  CHECK(c.counter("t.gather").bytes_sent == gathered);
  CHECK(c.counter("t.gather").bytes_received == gathered * n);

  {  // in place: this rank's block already sits in the output
    std::vector<float> all(3 * n, -1.0f);
    for (std::size_t i = 0; i < 3; ++i) all[r * 3 + i] = val<float>(r, i);
    DeviceVec<float> d(all);
    c.all_gather(d.p + r * 3, d.p, 3 * sizeof(float), "t.gather_in_place");
    const auto got = d.host();
    for (int q = 0; q < n; ++q)
      for (std::size_t i = 0; i < 3; ++i) CHECK(got[q * 3 + i] == val<float>(q, i));
  }

  {  // sums and maxima in all four types
    std::vector<double> f64(7);
    std::vector<std::int64_t> i64(7);
    std::vector<float> f32(7);
    std::vector<std::int32_t> i32(7);
    for (std::size_t i = 0; i < 7; ++i) {
      f64[i] = val<double>(r, i);
      i64[i] = val<std::int64_t>(r, i) * 4000000000LL;  // beyond 32 bits
      f32[i] = val<float>(r, i) * (r % 2 ? 1.0f : -1.0f);
      i32[i] = val<std::int32_t>(r, i) * (r % 2 ? 1 : -1);
    }
    DeviceVec<double> d64(f64);
    DeviceVec<std::int64_t> di64(i64);
    DeviceVec<float> d32(f32);
    DeviceVec<std::int32_t> di32(i32);
    c.all_reduce_sum(d64.p, 7, "t.sum");
    c.all_reduce_sum(di64.p, 7, "t.sum");
    c.all_reduce_max(d32.p, 7, "t.max");
    c.all_reduce_max(di32.p, 7, "t.max");
    const auto s64 = d64.host();
    const auto si64 = di64.host();
    const auto m32 = d32.host();
    const auto mi32 = di32.host();
    for (std::size_t i = 0; i < 7; ++i) {
      double es = 0;
      std::int64_t ei = 0;
      float em = -1e30f;
      std::int32_t emi = INT32_MIN;
      for (int q = 0; q < n; ++q) {
        es += val<double>(q, i);
        ei += val<std::int64_t>(q, i) * 4000000000LL;
        em = std::max(em, val<float>(q, i) * (q % 2 ? 1.0f : -1.0f));
        emi = std::max(emi, val<std::int32_t>(q, i) * (q % 2 ? 1 : -1));
      }
      CHECK(s64[i] == es);
      CHECK(si64[i] == ei);
      CHECK(m32[i] == em);
      CHECK(mi32[i] == emi);
    }
    CHECK(c.counter("t.sum").calls == 2);
    CHECK(c.counter("t.sum").bytes_sent == 7 * 8 * 2);
    CHECK(c.counter("t.sum").bytes_received == 7 * 8 * 2);
    CHECK(c.counter("t.max").bytes_sent == 7 * 4 * 2);
  }

  {  // a ring shift, then an open chain whose ends have no partner (-1)
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    std::vector<std::int32_t> mine(5);
    for (std::size_t i = 0; i < 5; ++i) mine[i] = val<std::int32_t>(r, i);
    DeviceVec<std::int32_t> d_send(mine), d_recv(std::vector<std::int32_t>(5, -1));
    c.send_recv(d_send.p, 20, next, d_recv.p, 20, prev, 7, "t.ring");
    auto got = d_recv.host();
    for (std::size_t i = 0; i < 5; ++i) CHECK(got[i] == val<std::int32_t>(prev, i));
    CHECK(c.counter("t.ring").bytes_sent == 20);
    CHECK(c.counter("t.ring").bytes_received == 20);

    const int dest = r + 1 < n ? r + 1 : -1, src = r > 0 ? r - 1 : -1;
    DeviceVec<std::int32_t> d_recv2(std::vector<std::int32_t>(5, -1));
    c.send_recv(d_send.p, 20, dest, d_recv2.p, 20, src, 8, "t.chain");
    got = d_recv2.host();
    for (std::size_t i = 0; i < 5; ++i)
      CHECK(got[i] == (src == -1 ? -1 : val<std::int32_t>(src, i)));
    CHECK(c.counter("t.chain").bytes_sent == (dest == -1 ? 0 : 20));
    CHECK(c.counter("t.chain").bytes_received == (src == -1 ? 0 : 20));
  }

  if (n >= 2 && r < 2) {  // blocking point-to-point between ranks 0 and 1
    std::vector<double> mine(4);
    for (std::size_t i = 0; i < 4; ++i) mine[i] = val<double>(r, i);
    DeviceVec<double> d(mine);
    if (r == 0) {
      c.send(d.p, 32, 1, 3, "t.p2p");
      c.recv(d.p, 32, 1, 4, "t.p2p");
    } else {
      DeviceVec<double> tmp(std::vector<double>(4, 0.0));
      c.recv(tmp.p, 32, 0, 3, "t.p2p");
      c.send(d.p, 32, 0, 4, "t.p2p");
      const auto got = tmp.host();
      for (std::size_t i = 0; i < 4; ++i) CHECK(got[i] == val<double>(0, i));
    }
    if (r == 0) {
      const auto got = d.host();
      for (std::size_t i = 0; i < 4; ++i) CHECK(got[i] == val<double>(1, i));
    }
    CHECK(c.counter("t.p2p").calls == 2);
    CHECK(c.counter("t.p2p").bytes_sent == 32);
    CHECK(c.counter("t.p2p").bytes_received == 32);
  }
  c.barrier();

  {  // reduce-scatter in three types, separate and in place; then zero elements
    const std::size_t count = 9;
    std::vector<double> f64(count * n);
    std::vector<std::int64_t> i64(count * n);
    std::vector<float> f32(count * n);
    for (int q = 0; q < n; ++q)
      for (std::size_t i = 0; i < count; ++i) {
        // Distinct per rank, block and position; i64 beyond 32 bits.
        const std::int64_t v = 10000 * (r + 1) + 100 * q + static_cast<std::int64_t>(i);
        f64[q * count + i] = static_cast<double>(v);
        i64[q * count + i] = v * 4000000000LL;
        f32[q * count + i] = static_cast<float>(v);
      }
    DeviceVec<double> d64(f64), d64_out(std::vector<double>(count + 1, -1.0));
    DeviceVec<std::int64_t> di64(i64), di64_out(std::vector<std::int64_t>(count, -1));
    DeviceVec<float> d32(f32);
    c.reduce_scatter_sum(d64.p, d64_out.p, count, "t.rs");
    c.reduce_scatter_sum(di64.p, di64_out.p, count, DType::i64, "t.rs");
    c.reduce_scatter_sum(d32.p, d32.p + r * count, count, "t.rs_in_place");
    const auto s64 = d64_out.host();
    const auto si64 = di64_out.host();
    const auto s32 = d32.host();
    for (std::size_t i = 0; i < count; ++i) {
      std::int64_t e = 0;
      for (int p = 0; p < n; ++p) e += 10000 * (p + 1) + 100 * r + static_cast<std::int64_t>(i);
      CHECK(s64[i] == static_cast<double>(e));
      CHECK(si64[i] == e * 4000000000LL);
      CHECK(s32[r * count + i] == static_cast<float>(e));
    }
    CHECK(s64[count] == -1.0);  // nothing written past recv
    c.reduce_scatter_sum(static_cast<const float*>(nullptr), static_cast<float*>(nullptr), 0,
                         "t.rs_empty");
    CHECK(c.counter("t.rs").calls == 2);
    CHECK(c.counter("t.rs").bytes_sent == 2 * 9 * 8 * n);
    CHECK(c.counter("t.rs").bytes_received == 2 * 9 * 8);
    CHECK(c.counter("t.rs_in_place").bytes_sent == 9 * 4 * n);
    CHECK(c.counter("t.rs_in_place").bytes_received == 9 * 4);
    CHECK(c.counter("t.rs_empty").calls == 1);
    CHECK(c.counter("t.rs_empty").bytes_sent == 0);
  }

  {  // all-to-all: unequal sizes with zeros (the last rank sends nothing), gapped offsets
    auto bytes = [n](int p, int q) -> std::size_t {
      if (n > 1 && p == n - 1) return 0;
      return static_cast<std::size_t>((p * 3 + q * 5 + 1) % 4) * 13;
    };
    auto byte = [](int p, int q, std::size_t j) {
      return static_cast<unsigned char>(p * 71 + q * 31 + static_cast<int>(j) + 1);
    };
    std::vector<std::size_t> sb(n), so(n), rb(n), ro(n);
    std::size_t send_end = 0, recv_end = 2;
    for (int q = n - 1; q >= 0; --q) {  // send blocks in reverse peer order, 5-byte gaps
      sb[q] = bytes(r, q);
      so[q] = send_end;
      send_end += sb[q] + 5;
    }
    for (int q = 0; q < n; ++q) {  // receive blocks in peer order, 3-byte gaps
      rb[q] = bytes(q, r);
      ro[q] = recv_end;
      recv_end += rb[q] + 3;
    }
    std::vector<unsigned char> send(send_end, 0), expect(recv_end, 0xEE);
    for (int q = 0; q < n; ++q) {
      for (std::size_t j = 0; j < sb[q]; ++j) send[so[q] + j] = byte(r, q, j);
      for (std::size_t j = 0; j < rb[q]; ++j) expect[ro[q] + j] = byte(q, r, j);
    }
    DeviceVec<unsigned char> d_send(send), d_recv(std::vector<unsigned char>(recv_end, 0xEE));
    c.all_to_all(d_send.p, sb, so, d_recv.p, rb, ro, "t.a2a");
    const auto got = d_recv.host();
    for (std::size_t b = 0; b < got.size(); ++b) {
      CAPTURE(b);
      CHECK(static_cast<int>(got[b]) == static_cast<int>(expect[b]));  // gaps untouched
    }
    std::int64_t out = 0, in = 0;
    for (int q = 0; q < n; ++q)
      if (q != r) {
        out += static_cast<std::int64_t>(sb[q]);
        in += static_cast<std::int64_t>(rb[q]);
      }
    CHECK(c.counter("t.a2a").calls == 1);
    CHECK(c.counter("t.a2a").bytes_sent == out);
    CHECK(c.counter("t.a2a").bytes_received == in);

    // Wrong vector length: a local check before any transfer, on every rank alike.
    const std::vector<std::size_t> longer(n + 1, 0);
    CHECK_THROWS_WITH(c.all_to_all(d_send.p, longer, so, d_recv.p, rb, ro, "t.a2a_bad"),
                      Contains("all_to_all at site 't.a2a_bad'") &&
                          Contains("send_bytes has " + std::to_string(n + 1) + " entries"));
    CHECK(c.counter("t.a2a_bad").calls == 0);
  }
  c.barrier();

  {  // all-gather of uneven blocks: every third rank (rank 1 first) gives none; receive
     // blocks in reverse rank order with 3-byte gaps, which must stay untouched
    auto bytes = [](int q) -> std::size_t {
      return q % 3 == 1 ? 0 : static_cast<std::size_t>(9 + 4 * q);
    };
    auto byte = [](int q, std::size_t j) {
      return static_cast<unsigned char>(q * 53 + static_cast<int>(j) + 7);
    };
    std::vector<std::size_t> rb(n), ro(n);
    std::size_t end = 2, total = 0;
    for (int q = n - 1; q >= 0; --q) {
      rb[q] = bytes(q);
      ro[q] = end;
      end += rb[q] + 3;
      total += rb[q];
    }
    std::vector<unsigned char> mine(rb[r]), expect(end, 0xEE);
    for (std::size_t j = 0; j < rb[r]; ++j) mine[j] = byte(r, j);
    for (int q = 0; q < n; ++q)
      for (std::size_t j = 0; j < rb[q]; ++j) expect[ro[q] + j] = byte(q, j);
    DeviceVec<unsigned char> d_mine(mine), d_recv(std::vector<unsigned char>(end, 0xEE));
    c.all_gather_v(d_mine.p, rb[r], d_recv.p, rb, ro, "t.agv");
    auto got = d_recv.host();
    for (std::size_t b = 0; b < got.size(); ++b) {
      CAPTURE(b);
      CHECK(static_cast<int>(got[b]) == static_cast<int>(expect[b]));
    }

    // In place: this rank's block already sits in the output.
    std::vector<unsigned char> start(end, 0xEE);
    std::copy(mine.begin(), mine.end(), start.begin() + static_cast<std::ptrdiff_t>(ro[r]));
    DeviceVec<unsigned char> d_all(start);
    c.all_gather_v(d_all.p + ro[r], rb[r], d_all.p, rb, ro, "t.agv_in_place");
    got = d_all.host();
    for (std::size_t b = 0; b < got.size(); ++b) {
      CAPTURE(b);
      CHECK(static_cast<int>(got[b]) == static_cast<int>(expect[b]));
    }
    for (const char* site : {"t.agv", "t.agv_in_place"}) {  // own block sent, whole output in
      CAPTURE(site);
      CHECK(c.counter(site).calls == 1);
      CHECK(c.counter(site).bytes_sent == static_cast<std::int64_t>(rb[r]));
      CHECK(c.counter(site).bytes_received == static_cast<std::int64_t>(total));
    }

    // send_bytes off this rank's block: a local check before any transfer, on every rank.
    CHECK_THROWS_WITH(c.all_gather_v(d_mine.p, rb[r] + 1, d_recv.p, rb, ro, "t.agv_bad"),
                      Contains("all_gather_v at site 't.agv_bad'") &&
                          Contains("send_bytes = " + std::to_string(rb[r] + 1)));
    CHECK(c.counter("t.agv_bad").calls == 0);
  }
  c.barrier();

  {  // split by parity, reversed order: the sub-communicator reduces only its own ranks
    auto sub = c.split(r % 2, -r);
    REQUIRE(sub != nullptr);
    int expect_size = 0, expect_rank = 0;
    for (int q = 0; q < n; ++q)
      if (q % 2 == r % 2) {
        ++expect_size;
        if (q > r) ++expect_rank;
      }
    CHECK(sub->size() == expect_size);
    CHECK(sub->rank() == expect_rank);
    DeviceVec<std::int32_t> one(std::vector<std::int32_t>{r});
    sub->all_reduce_sum(one.p, 1, "t.sub");
    std::int32_t expect = 0;
    for (int q = r % 2; q < n; q += 2) expect += q;
    CHECK(one.host()[0] == expect);
    CHECK(sub->counter("t.sub").bytes_sent == 4);
  }
}

}  // namespace

TEST_CASE("GPU error checks throw naming call, error, file:line and rank", "[cuda]") {
  set_message_rank(-1);
  std::string m = error_of([] { GDN_CUDA_CHECK(cudaErrorInvalidValue); });
  CHECK_THAT(m, Contains("cudaErrorInvalidValue") && Contains("failed") &&
                    Contains("test_device_comm.cpp:") && Contains("on rank ?"));
  CHECK_THAT(m, Contains(cudaGetErrorString(cudaErrorInvalidValue)));

  set_message_rank(world_rank());
  m = error_of([] { GDN_NCCL_CHECK_AT(ncclInvalidArgument, "t.site"); });
  CHECK_THAT(m, Contains("ncclInvalidArgument") && Contains("at site 't.site'") &&
                    Contains(ncclGetErrorString(ncclInvalidArgument)) &&
                    Contains("on rank " + std::to_string(world_rank())));

  m = error_of([] { GDN_CUBLAS_CHECK(CUBLAS_STATUS_INVALID_VALUE); });
  CHECK_THAT(m, Contains("CUBLAS_STATUS_INVALID_VALUE") &&
                    Contains(cublasGetStatusString(CUBLAS_STATUS_INVALID_VALUE)));

  CHECK(error_of([] { GDN_CUDA_CHECK(cudaSuccess); }).empty());
  CHECK(error_of([] { GDN_NCCL_CHECK(ncclSuccess); }).empty());
  CHECK(error_of([] { GDN_CUBLAS_CHECK(CUBLAS_STATUS_SUCCESS); }).empty());
  set_message_rank(-1);
}

TEST_CASE("visible_gpu_count never throws and explains a zero", "[cuda]") {
  std::string why;
  int n = -1;
  REQUIRE_NOTHROW(n = visible_gpu_count(&why));
  CHECK(n >= 0);
  if (n == 0) CHECK_FALSE(why.empty());
  INFO("visible GPUs: " << n << (n == 0 ? " (" + why + ")" : std::string()));
  SUCCEED();
}

TEST_CASE("node_local_rank matches the shared-memory split", "[cuda]") {
  EnvGuard o("OMPI_COMM_WORLD_LOCAL_RANK", std::nullopt);
  EnvGuard s("SLURM_LOCALID", std::nullopt);
  const LocalRank lr = node_local_rank(MPI_COMM_WORLD);
  const LocalRank ref = mpi_local();
  CHECK(lr.rank >= 0);
  CHECK(lr.rank < lr.size);
  CHECK(lr.size <= world_size());
  CHECK(lr.rank == ref.rank);
  CHECK(lr.size == ref.size);
}

TEST_CASE("node_local_rank prefers OMPI_COMM_WORLD_LOCAL_RANK, then SLURM_LOCALID", "[cuda]") {
  const LocalRank ref = mpi_local();
  // A valid value different from MPI's wherever the node has more than one rank.
  const std::string other = std::to_string((ref.rank + 1) % ref.size);
  const std::string other2 = std::to_string((ref.rank + ref.size - 1) % ref.size);
  {
    EnvGuard o("OMPI_COMM_WORLD_LOCAL_RANK", other);
    EnvGuard s("SLURM_LOCALID", other2);
    CHECK(node_local_rank(MPI_COMM_WORLD).rank == std::stoi(other));
  }
  {
    EnvGuard o("OMPI_COMM_WORLD_LOCAL_RANK", std::nullopt);
    EnvGuard s("SLURM_LOCALID", other2);
    CHECK(node_local_rank(MPI_COMM_WORLD).rank == std::stoi(other2));
  }
  {  // values that cannot describe this job are skipped, not trusted
    for (const char* bad : {"junk", "-1", "7x", ""}) {
      CAPTURE(bad);
      EnvGuard o("OMPI_COMM_WORLD_LOCAL_RANK", std::string(bad));
      EnvGuard s("SLURM_LOCALID", std::to_string(ref.size + 5));
      CHECK(node_local_rank(MPI_COMM_WORLD).rank == ref.rank);
    }
  }
  CHECK(node_local_rank(MPI_COMM_WORLD).size == ref.size);
}

TEST_CASE("without a GPU, choosing one fails on every rank with a clear message", "[cuda]") {
  if (visible_gpu_count() > 0) {
    SUCCEED("a GPU is visible: nothing to check here");
    return;
  }
  CHECK_THAT(error_of([] { choose_gpu(MPI_COMM_WORLD); }), Contains("no GPU visible"));
  CHECK_THAT(error_of([] { make_device_communicator(MPI_COMM_WORLD); }),
             Contains("no GPU visible") && Contains("--device cpu"));
}

TEST_CASE("StagingCommunicator round trips on device buffers", "[cuda][gpu]") {
  choose_gpu(MPI_COMM_WORLD);  // makes this rank's device current
  StagingCommunicator c(MPI_COMM_WORLD);
  check_round_trips(c);
}

// The log-depth pair scan (cp/log_depth_scan.h) on device buffers over c equals the host's
// over MPI on the same maps (fp64, 1e-12), both orientations: three (b, h) blocks of
// K = 16, V = 24 per rank, different on every rank.
static void check_log_depth_scan(Communicator& c) {
  MpiCommunicator host(MPI_COMM_WORLD);
  const PairDims d{3, 16, 24};
  const std::size_t na = std::size_t(d.a_elems()), nb = std::size_t(d.b_elems());
  const Tensor<double> pair =
      gdn::test::random_tensor<double>({d.BH, d.K, d.K + d.V}, 71 + std::uint64_t(c.rank()), 0.3);
  const std::vector<double> A(pair.data.begin(), pair.data.begin() + na),
      B(pair.data.begin() + na, pair.data.end());
  for (bool reverse : {false, true}) {
    std::vector<double> want(nb);
    log_depth_scan(Host{}, host, A.data(), B.data(), d, reverse, "t.scan_host", want.data());
    DeviceVec<double> dA(A), dB(B), dout(std::vector<double>(nb, -1.0));
    log_depth_scan(Cuda{}, c, dA.p, dB.p, d, reverse, "t.scan", dout.p);
    INFO((reverse ? "reverse" : "forward") << " rank " << c.rank());
    CHECK(gdn::test::rel_l2(dout.host().data(), want.data(), nb) <= 1e-12);
  }
  // Both counted alike: ceil(log2 P) rounds each way.
  CHECK(c.counter("t.scan").calls == host.counter("t.scan_host").calls);
  CHECK(c.counter("t.scan").bytes_sent == host.counter("t.scan_host").bytes_sent);
}

TEST_CASE("the log-depth scan over staging and NCCL equals the host's over MPI", "[cuda][gpu]") {
  const GpuChoice g = choose_gpu(MPI_COMM_WORLD);
  {
    StagingCommunicator c(MPI_COMM_WORLD);
    check_log_depth_scan(c);
  }
  if (!g.shared) {
    NcclCommunicator c(MPI_COMM_WORLD, g.device);
    check_log_depth_scan(c);
  }
}

TEST_CASE("NcclCommunicator round trips on device buffers", "[cuda][gpu]") {
  const GpuChoice g = choose_gpu(MPI_COMM_WORLD);
  if (g.shared) {  // agreed over all ranks, so every rank skips together
    WARN("ranks share a GPU: NCCL refuses that; NcclCommunicator test skipped");
    SUCCEED();
    return;
  }
  NcclCommunicator c(MPI_COMM_WORLD, g.device);
  CHECK(c.device() == g.device);
  check_round_trips(c);
}

TEST_CASE("make_device_communicator picks NCCL, or staging when ranks share a GPU", "[cuda][gpu]") {
  const GpuChoice g = choose_gpu(MPI_COMM_WORLD);
  auto c = make_device_communicator(MPI_COMM_WORLD);
  REQUIRE(c != nullptr);
  CHECK(c->size() == world_size());
  CHECK(c->rank() == world_rank());
  if (g.shared)
    CHECK(dynamic_cast<StagingCommunicator*>(c.get()) != nullptr);
  else
    CHECK(dynamic_cast<NcclCommunicator*>(c.get()) != nullptr);
  CHECK(message_rank() == world_rank());
}
