// gdn_kernel's inputs: the .npy files of --in, checked on every rank before any collective
// (shapes that agree, dtypes, packed sequence boundaries), each rank reading only its own
// shard of the [B, T, ...] files and the small global ones whole; then the value checks
// (finite values, the documented ranges) over the shards, agreed by one all-reduce.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/dtype.h"
#include "core/npy.h"
#include "cp/shard.h"
#include "gdn/problem.h"
#include "gdn_kernel/options.h"

namespace gdn::kernel_app {

struct Inputs {
  // This rank's shard of the [B, T, ...] inputs: tokens [shard.begin, shard.end), so their
  // shape is [B, shard.size(), ...]. h0 and dht ([N, Hv, K, V]) are whole on every rank.
  NpyArray q, k, v, g, beta;
  std::optional<NpyArray> h0, dO, dht;
  GdnProblem problem;
  Shard shard;
  DType compute = DType::f64;
};

std::string input_path(const Args& a, const std::string& name);

// Reads the headers of every input file and checks them (dtypes, shapes that agree, the
// problem's rules), then reads this rank's shard (contiguous_shard(T, P, rank)) of each
// [B, T, ...] file, B runs of rows, and h0, dht and cu_seqlens whole. No collectives.
// Throws gdn::Error naming the file and what was expected.
Inputs load_inputs(const Args& a, int rank, int P);

// Where the value checks found the first bad value over all ranks: the first check that
// fails on any rank (in the order q, k, v, g, beta, h0, do, dht finite, then beta in
// [0, 2]) and its lowest flat index in the whole file; and, per check, this rank's first
// bad value (global flat index; -1 if none) and where it lies in this rank's array.
struct ValueVerdict {
  int check = -1;  // -1: every value is good
  std::int64_t index = -1;
  std::vector<std::int64_t> global, local;
};

// Each rank checks its shards (and the whole h0, dht); one all-reduce agrees on the first
// bad value. Collective: every rank calls it after load_inputs succeeded on all of them.
ValueVerdict agree_on_values(Communicator& comm, const Inputs& in);

// Throws gdn::Error for the verdict's bad value, naming the file, the element (its index in
// the whole file) and what was expected, on the rank(s) holding it; nothing on the others
// or when every value is good. So the job reports it once, as a single rank would.
void throw_bad_value(const Args& a, const Inputs& in, const ValueVerdict& v);

}  // namespace gdn::kernel_app
