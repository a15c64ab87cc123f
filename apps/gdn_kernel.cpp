// gdn_kernel: the gated delta rule with context parallelism on .npy files, under mpirun.
//
//   mpirun -np P gdn_kernel --in DIR --out DIR [--backward] [--chunk-size 64] [--scale S]
//       [--l2norm-qk] [--dtype f32|f64] [--log-depth-scan] [--check-nan]
//       [--load-balance none|zigzag]
//
// Every rank reads the whole input files and keeps its contiguous shard; rank 0 gathers
// the outputs and writes them with stats.json. All validation happens before the first
// collective of the computation, on every rank, and the ranks agree on the outcome, so bad
// input gives one message and exit code 1 everywhere instead of a hang.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <cxxopts.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "app_common.h"
#include "comm/mpi_communicator.h"
#include "core/error.h"
#include "core/npy.h"
#include "cp/gdn_cp.h"
#include "cp/shard.h"
#include "device_flag.h"
#if GDN_HAVE_CUDA
#include "comm/device_communicator.h"
#include "cuda/cuda_space.h"
#endif

namespace fs = std::filesystem;
using namespace gdn;

namespace {

struct Args {
  std::string in, out;
  bool backward = false, l2norm_qk = false, log_depth_scan = false, check_nan = false;
  int chunk_size = 64;
  double scale = 0;
  std::string dtype;  // "" = the inputs' dtype
  app::Device device = app::Device::cpu;
  bool help = false;
};

cxxopts::Options make_options() {
  cxxopts::Options o("gdn_kernel",
                     "The gated delta rule (GDN) with context parallelism on .npy files.\n"
                     "Run under mpirun: each rank takes a contiguous shard of the sequence.\n"
                     "Inputs in --in: q.npy, k.npy [B,T,Hk,K]; v.npy [B,T,Hv,V]; g.npy (log-decay)"
                     ", beta.npy [B,T,Hv];\n  optional h0.npy [N,Hv,K,V], cu_seqlens.npy "
                     "(int32/int64 [N+1], B=1: packed sequences);\n  with --backward do.npy "
                     "[B,T,Hv,V] and optional dht.npy [N,Hv,K,V].\n"
                     "Outputs in --out (rank 0): o.npy, ht.npy; with --backward dq, dk, dv, dg, "
                     "dbeta (and dh0 when h0 is given),\n  the gradients of sum(o*do) + "
                     "sum(ht*dht); stats.json with the bytes each rank moved per call site.");
  o.add_options()("in", "input directory holding the .npy files", cxxopts::value<std::string>())(
      "out", "output directory (created by rank 0 if missing)", cxxopts::value<std::string>())(
      "backward", "also run the backward (needs do.npy; dht.npy optional)")(
      "chunk-size", "tokens per chunk: a power of two in [16, 128]",
      cxxopts::value<int>()->default_value("64"))(
      "scale", "output scale s in o = s S^T q; 0 means 1/sqrt(K)",
      cxxopts::value<double>()->default_value("0"))(
      "l2norm-qk", "L2-normalise q and k inside the op (gradients go through the norm)")(
      "dtype",
      "compute and output dtype, f32 or f64 (default: the inputs' dtype, f64 if any "
      "input is f64)",
      cxxopts::value<std::string>())(
      "log-depth-scan",
      "combine the per-rank pairs with a Hillis-Steele scan over point-to-point messages "
      "(ceil(log2 P) rounds) instead of one all-gather; same result")(
      "check-nan", "fail if any input holds NaN or Inf, naming the file and the first bad index")(
      "load-balance",
      "sequence sharding: none (contiguous, in rank order) is the only one GDN allows; zigzag "
      "is refused with the reason",
      cxxopts::value<std::string>()->default_value("none"))(
      "device",
      "where the op runs: auto (cuda when this build has the CUDA path and a GPU is visible), "
      "cpu or cuda (one GPU per process; ranks sharing a GPU fall back to MPI with host "
      "staging)",
      cxxopts::value<std::string>()->default_value("auto"))("h,help", "print this help");
  return o;
}

Args parse_args(int argc, char** argv) {
  auto options = make_options();
  auto res = options.parse(argc, argv);
  Args a;
  if (res.count("help")) {
    a.help = true;
    return a;
  }
  GDN_CHECK(res.unmatched().empty(), "unexpected argument '", res.unmatched().front(),
            "' (see --help)");
  GDN_CHECK(res.count("in"), "--in DIR is required (the directory holding q.npy, k.npy, ...)");
  GDN_CHECK(res.count("out"), "--out DIR is required (where o.npy, ht.npy, ... are written)");
  a.in = res["in"].as<std::string>();
  a.out = res["out"].as<std::string>();
  a.backward = res.count("backward") > 0;
  a.l2norm_qk = res.count("l2norm-qk") > 0;
  a.log_depth_scan = res.count("log-depth-scan") > 0;
  a.check_nan = res.count("check-nan") > 0;
  a.chunk_size = res["chunk-size"].as<int>();
  a.scale = res["scale"].as<double>();
  if (res.count("dtype")) {
    a.dtype = res["dtype"].as<std::string>();
    GDN_CHECK(a.dtype == "f32" || a.dtype == "f64", "--dtype ", a.dtype,
              " is not supported: expected f32 or f64");
  }
  a.device = app::resolve_device(res["device"].as<std::string>());
  // Refused on every rank before anything else: zigzag would silently compute garbage.
  require_contiguous_shards(parse_load_balance(res["load-balance"].as<std::string>()),
                            "--load-balance");
  return a;
}

// The inputs as read from disk (every rank reads the whole files), already validated.
struct Inputs {
  NpyArray q, k, v, g, beta;
  std::optional<NpyArray> h0, dO, dht;
  GdnProblem problem;
  DType compute = DType::f64;
};

std::string path_of(const Args& a, const std::string& name) {
  return (fs::path(a.in) / (name + ".npy")).string();
}

bool is_float(DType t) {
  return t == DType::f32 || t == DType::f64;
}

void require_float(const NpyArray& a, const std::string& file) {
  GDN_CHECK(is_float(a.dtype), file, ": dtype ", dtype_name(a.dtype),
            " is not supported here: expected float32 ('<f4') or float64 ('<f8')");
}

// `pattern` names the dimensions ("[B, T, Hv]"), `from` says where their values came from.
void require_shape(const NpyArray& a, const std::string& file, const Shape& expected,
                   const std::string& pattern, const std::string& from) {
  GDN_CHECK(a.shape == expected, file, ": shape ", shape_str(a.shape),
            " does not match the other inputs: expected ", pattern, " = ", shape_str(expected),
            " (", from, ")");
}

// Multi-index of flat element i of an array of the given shape, e.g. "[0, 3, 1]".
std::string index_str(const Shape& s, std::int64_t i) {
  Shape idx(s.size());
  for (std::size_t d = s.size(); d-- > 0;) {
    idx[d] = s[d] ? i % s[d] : 0;
    i = s[d] ? i / s[d] : 0;
  }
  return shape_str(idx);
}

template <typename F>
void require_finite_as(const NpyArray& a, const std::string& file) {
  const std::int64_t n = numel(a.shape);
  for (std::int64_t i = 0; i < n; ++i) {
    F x;
    std::memcpy(&x, a.bytes.data() + i * sizeof(F), sizeof(F));
    if (!std::isfinite(x))
      throw_error(file, ": element ", index_str(a.shape, i), " (flat index ", i, ") is ",
                  std::isnan(x) ? "NaN" : "Inf", ": --check-nan requires finite inputs");
  }
}

void require_finite(const NpyArray& a, const std::string& file) {
  if (a.dtype == DType::f32) require_finite_as<float>(a, file);
  if (a.dtype == DType::f64) require_finite_as<double>(a, file);
}

Inputs load_inputs(const Args& a, int rank) {
  Inputs in;
  auto read = [&](const std::string& name) { return read_npy(path_of(a, name)); };
  auto read_optional = [&](const std::string& name) -> std::optional<NpyArray> {
    if (!fs::exists(path_of(a, name))) return std::nullopt;
    return read(name);
  };
  GDN_CHECK(fs::is_directory(a.in), "--in ", a.in, ": not a directory (expected the directory ",
            "holding q.npy, k.npy, v.npy, g.npy, beta.npy)");
  in.q = read("q");
  in.k = read("k");
  in.v = read("v");
  in.g = read("g");
  in.beta = read("beta");
  in.h0 = read_optional("h0");
  auto cu = read_optional("cu_seqlens");
  if (a.backward) {
    in.dO = read("do");
    in.dht = read_optional("dht");
  }

  // Element types: float tensors, integer boundaries.
  std::vector<std::pair<const NpyArray*, std::string>> floats = {
      {&in.q, "q"}, {&in.k, "k"}, {&in.v, "v"}, {&in.g, "g"}, {&in.beta, "beta"}};
  if (in.h0) floats.push_back({&*in.h0, "h0"});
  if (in.dO) floats.push_back({&*in.dO, "do"});
  if (in.dht) floats.push_back({&*in.dht, "dht"});
  bool any_f64 = false;
  for (auto& [arr, name] : floats) {
    require_float(*arr, path_of(a, name));
    any_f64 |= arr->dtype == DType::f64;
  }
  in.compute = a.dtype.empty() ? (any_f64 ? DType::f64 : DType::f32)
                               : (a.dtype == "f64" ? DType::f64 : DType::f32);

  // Shapes: q fixes B, T, Hk, K; v fixes Hv, V; everything else must agree.
  const std::string qf = path_of(a, "q"), vf = path_of(a, "v");
  GDN_CHECK(in.q.shape.size() == 4, qf, ": shape ", shape_str(in.q.shape), " has ",
            in.q.shape.size(), " dimensions: expected 4, [B, T, Hk, K]");
  const std::int64_t B = in.q.shape[0], T = in.q.shape[1];
  require_shape(in.k, path_of(a, "k"), in.q.shape, "[B, T, Hk, K]", "the shape of " + qf);
  GDN_CHECK(in.v.shape.size() == 4 && in.v.shape[0] == B && in.v.shape[1] == T, vf, ": shape ",
            shape_str(in.v.shape),
            " does not match the other inputs: expected [B, T, Hv, V] with B=", B, ", T=", T,
            " (from ", qf, " ", shape_str(in.q.shape), ")");
  const std::int64_t Hv = in.v.shape[2], V = in.v.shape[3];
  const std::string bth = "B, T from " + qf + ", Hv from " + vf;
  require_shape(in.g, path_of(a, "g"), {B, T, Hv}, "[B, T, Hv]", bth);
  require_shape(in.beta, path_of(a, "beta"), {B, T, Hv}, "[B, T, Hv]", bth);
  if (in.dO) require_shape(*in.dO, path_of(a, "do"), in.v.shape, "[B, T, Hv, V]", "like " + vf);

  GdnProblem& p = in.problem;
  p.B = int(B);
  p.T = int(T);
  p.Hk = int(in.q.shape[2]);
  p.K = int(in.q.shape[3]);
  p.Hv = int(Hv);
  p.V = int(V);
  p.chunk_size = a.chunk_size;
  p.scale = a.scale;
  p.l2norm_qk = a.l2norm_qk;
  if (cu) {
    const std::string cf = path_of(a, "cu_seqlens");
    GDN_CHECK(cu->dtype == DType::i32 || cu->dtype == DType::i64, cf, ": dtype ",
              dtype_name(cu->dtype), " is not supported: expected int32 ('<i4') or int64 ('<i8')");
    GDN_CHECK(cu->shape.size() == 1, cf, ": shape ", shape_str(cu->shape),
              " is not 1-D: expected [N+1] sequence boundaries 0, ..., T");
    p.cu_seqlens = npy_to_tensor<std::int64_t>(*cu, cf).data;
  }
  // Hv % Hk, chunk size, scale and the cu_seqlens rules (B = 1, increasing, ends at T).
  p.validate();

  const Shape state = {p.num_sequences(), Hv, p.K, V};
  const std::string nfrom = cu ? "N = len(cu_seqlens) - 1" : "N = B";
  if (in.h0) require_shape(*in.h0, path_of(a, "h0"), state, "[N, Hv, K, V]", nfrom);
  if (in.dht) require_shape(*in.dht, path_of(a, "dht"), state, "[N, Hv, K, V]", nfrom);

  if (a.check_nan)
    for (auto& [arr, name] : floats) require_finite(*arr, path_of(a, name));

  // Only rank 0 writes; a failure to create the directory is agreed on like any other.
  if (rank == 0) {
    std::error_code ec;
    fs::create_directories(a.out, ec);
    GDN_CHECK(!ec && fs::is_directory(a.out), "--out ", a.out,
              ": cannot create the output directory", ec ? ": " + ec.message() : "");
  }
  return in;
}

// Elements per token of a [B, T, ...] array (computed from the trailing dimensions, so an
// empty shard still knows its row size).
std::int64_t row_elems(const Shape& s) {
  return numel(Shape(s.begin() + 2, s.end()));
}

// Tokens [begin, end) of a [B, T, ...] array, converted to T.
template <typename T>
Tensor<T> shard_of(const NpyArray& a, const std::string& what, const Shard& s) {
  const Tensor<T> full = npy_to_tensor<T>(a, what);
  Shape shape = full.shape;
  shape[1] = s.size();
  Tensor<T> out(shape);
  const std::int64_t row = row_elems(full.shape);
  for (std::int64_t b = 0; b < full.shape[0]; ++b)
    std::copy_n(full.ptr() + (b * full.shape[1] + s.begin) * row, s.size() * row,
                out.ptr() + b * s.size() * row);
  return out;
}

// Reassembles a [B, T, ...] tensor on rank 0 from every rank's shard. Shards differ in
// size (even zero), so each rank contributes a block padded to the largest shard.
template <typename T>
Tensor<T> gather_tokens(Communicator& comm, const Tensor<T>& local, std::int64_t T_global) {
  const int P = comm.size();
  const std::int64_t B = local.shape[0], per = contiguous_shard(T_global, P, 0).size();
  const std::int64_t row = row_elems(local.shape);
  const std::int64_t block = B * per * row;
  std::vector<T> mine(block, T(0)), all(block * P);
  std::copy(local.data.begin(), local.data.end(), mine.begin());
  comm.all_gather(mine.data(), all.data(), sizeof(T) * block, "app.gather_outputs");
  if (comm.rank() != 0) return {};  // only rank 0 writes
  Shape shape = local.shape;
  shape[1] = T_global;
  Tensor<T> out(shape);
  for (int r = 0; r < P; ++r) {
    const Shard s = contiguous_shard(T_global, P, r);
    for (std::int64_t b = 0; b < B; ++b)
      std::copy_n(all.data() + r * block + b * s.size() * row, s.size() * row,
                  out.ptr() + (b * T_global + s.begin) * row);
  }
  return out;
}

const std::vector<std::string>& known_sites() {
  static const std::vector<std::string> s = {
      cp_sites::kForwardPairs,    cp_sites::kBackwardAdjoints, cp_sites::kForwardLogScan,
      cp_sites::kBackwardLogScan, cp_sites::kFinalState,       cp_sites::kInitialStateGrad};
  return s;
}

// This rank's counters for the known CP sites as a flat array (calls, sent, received).
std::vector<std::int64_t> flatten(const std::map<std::string, CommCounter>& c, int rank) {
  std::vector<std::int64_t> out;
  for (const auto& site : known_sites()) {
    auto it = c.find(site);
    const CommCounter z = it == c.end() ? CommCounter{} : it->second;
    out.insert(out.end(), {z.calls, z.bytes_sent, z.bytes_received});
  }
  for (const auto& [site, ctr] : c)
    if (site.rfind("cp.", 0) == 0 &&
        std::find(known_sites().begin(), known_sites().end(), site) == known_sites().end())
      spdlog::warn("rank {}: call site {} is not in cp_sites and is left out of stats.json", rank,
                   site);
  return out;
}

// {site: [{calls, bytes_sent, bytes_received} for each rank]} for sites used by any rank.
nlohmann::ordered_json counters_json(Communicator& comm,
                                     const std::map<std::string, CommCounter>& c) {
  const std::vector<std::int64_t> mine = flatten(c, comm.rank());
  std::vector<std::int64_t> all(mine.size() * comm.size());
  comm.all_gather(mine.data(), all.data(), sizeof(std::int64_t) * mine.size(), "app.gather_stats");
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (std::size_t s = 0; s < known_sites().size(); ++s) {
    nlohmann::ordered_json per_rank = nlohmann::ordered_json::array();
    bool used = false;
    for (int r = 0; r < comm.size(); ++r) {
      const std::int64_t* x = all.data() + r * mine.size() + 3 * s;
      used |= x[0] > 0;
      per_rank.push_back(
          {{"rank", r}, {"calls", x[0]}, {"bytes_sent", x[1]}, {"bytes_received", x[2]}});
    }
    if (used) j[known_sites()[s]] = per_rank;
  }
  return j;
}

double max_over_ranks(Communicator& comm, double x) {
  comm.all_reduce_max(&x, 1, "app.gather_stats");
  return x;
}

// The CP op on this rank's shard, in Space (host, or the GPU in the CUDA build): inputs
// moved in, outputs moved back to host tensors. comm carries the op's exchanges (device
// buffers for the CUDA space); its counters before and after each pass go to stats.json.
template <typename T>
struct OpOutputs {
  Tensor<T> o, ht, dq, dk, dv, dg, dbeta, dh0;
  double fwd_s = 0, bwd_s = 0;
  std::map<std::string, CommCounter> fwd_counters, bwd_counters;
};

template <typename T, typename Space>
OpOutputs<T> run_op(Communicator& comm, const Args& a, const Inputs& in) {
  using clock = std::chrono::steady_clock;
  using Vec = typename Space::Vector;
  const GdnProblem& p = in.problem;
  const Shard sh = contiguous_shard(p.T, comm.size(), comm.rank());
  auto file = [&](const std::string& n) { return path_of(a, n); };
  auto in_space = [](const Tensor<T>& t) { return Space::upload(t.ptr(), t.size()); };
  const Tensor<T> q = shard_of<T>(in.q, file("q"), sh), k = shard_of<T>(in.k, file("k"), sh),
                  v = shard_of<T>(in.v, file("v"), sh), g = shard_of<T>(in.g, file("g"), sh),
                  beta = shard_of<T>(in.beta, file("beta"), sh);
  const Tensor<T> h0 = in.h0 ? npy_to_tensor<T>(*in.h0, file("h0")) : Tensor<T>();
  Vec q_s = in_space(q), k_s = in_space(k), v_s = in_space(v), g_s = in_space(g),
      beta_s = in_space(beta), h0_s = in_space(h0);
  const GdnTensors<T> local{q_s.data(), k_s.data(),    v_s.data(),
                            g_s.data(), beta_s.data(), in.h0 ? h0_s.data() : nullptr};
  const Shape state = {p.num_sequences(), p.Hv, p.K, p.V};
  OpOutputs<T> out;
  out.o = Tensor<T>({p.B, sh.size(), p.Hv, p.V});
  out.ht = Tensor<T>(state);
  Vec o_s(out.o.size()), ht_s(out.ht.size());

  // Forward. Counters are reset around each pass so stats.json separates them and leaves
  // out the set-up agreement and the output gathering.
  comm.barrier();
  comm.reset_counters();
  auto t0 = clock::now();
  GdnContextParallel<T, Space> cp(comm, p, local, CpOptions{a.log_depth_scan});
  cp.forward(o_s.data(), ht_s.data());
  comm.barrier();  // the pass is done on every rank (and, on a GPU, its kernels)
  out.fwd_s = std::chrono::duration<double>(clock::now() - t0).count();
  out.fwd_counters = comm.counters();
  Space::download(o_s, out.o.ptr());
  Space::download(ht_s, out.ht.ptr());
  if (!a.backward) return out;

  const Tensor<T> dO = shard_of<T>(*in.dO, file("do"), sh);
  const Tensor<T> dht = in.dht ? npy_to_tensor<T>(*in.dht, file("dht")) : Tensor<T>();
  Vec dO_s = in_space(dO), dht_s = in_space(dht);
  Vec dq_s(q.size()), dk_s(k.size()), dv_s(v.size()), dg_s(g.size()), dbeta_s(beta.size()),
      dh0_s(in.h0 ? numel(state) : 0);
  GdnGrads<T> grads{dq_s.data(), dk_s.data(),    dv_s.data(),
                    dg_s.data(), dbeta_s.data(), in.h0 ? dh0_s.data() : nullptr};
  comm.barrier();
  comm.reset_counters();
  t0 = clock::now();
  cp.backward(dO_s.data(), in.dht ? dht_s.data() : nullptr, grads);
  comm.barrier();
  out.bwd_s = std::chrono::duration<double>(clock::now() - t0).count();
  out.bwd_counters = comm.counters();
  auto to_host = [](const Vec& v, const Shape& shape) {
    Tensor<T> t(shape);
    Space::download(v, t.ptr());
    return t;
  };
  out.dq = to_host(dq_s, q.shape);
  out.dk = to_host(dk_s, k.shape);
  out.dv = to_host(dv_s, v.shape);
  out.dg = to_host(dg_s, g.shape);
  out.dbeta = to_host(dbeta_s, beta.shape);
  if (in.h0) out.dh0 = to_host(dh0_s, state);
  return out;
}

// Gathers the outputs to rank 0, which writes them and stats.json; comm is the host MPI
// communicator whatever space the op ran in.
template <typename T>
void write_outputs(Communicator& comm, const Args& a, const Inputs& in, const OpOutputs<T>& r) {
  const GdnProblem& p = in.problem;
  const int P = comm.size();
  const double fwd_s = r.fwd_s, bwd_s = r.bwd_s;
  const auto& fwd_counters = r.fwd_counters;
  const auto& bwd_counters = r.bwd_counters;
  const Tensor<T>&o = r.o, &ht = r.ht, &dq = r.dq, &dk = r.dk, &dv = r.dv, &dg = r.dg,
        &dbeta = r.dbeta, &dh0 = r.dh0;

  // Gather and write. ht and dh0 are global and identical on every rank already.
  auto write = [&](const std::string& name, const Tensor<T>& t) {
    if (comm.rank() == 0) write_npy<T>((fs::path(a.out) / (name + ".npy")).string(), t);
  };
  write("o", gather_tokens(comm, o, p.T));
  write("ht", ht);
  if (a.backward) {
    write("dq", gather_tokens(comm, dq, p.T));
    write("dk", gather_tokens(comm, dk, p.T));
    write("dv", gather_tokens(comm, dv, p.T));
    write("dg", gather_tokens(comm, dg, p.T));
    write("dbeta", gather_tokens(comm, dbeta, p.T));
    if (in.h0) write("dh0", dh0);
  }

  nlohmann::ordered_json stats;
  stats["ranks"] = P;
  stats["shape"] = {{"B", p.B},
                    {"T", p.T},
                    {"Hk", p.Hk},
                    {"Hv", p.Hv},
                    {"K", p.K},
                    {"V", p.V},
                    {"N", p.num_sequences()},
                    {"packed", !p.cu_seqlens.empty()}};
  stats["dtype"] = dtype_name(dtype_of<T>());
  stats["device"] = app::device_name(a.device);
  stats["chunk_size"] = p.chunk_size;
  stats["scale"] = p.scale_value();
  stats["l2norm_qk"] = p.l2norm_qk;
  stats["log_depth_scan"] = a.log_depth_scan;
  stats["h0"] = in.h0.has_value();
  stats["dht"] = in.dht.has_value();
  nlohmann::ordered_json shards = nlohmann::ordered_json::array();
  for (int r = 0; r < P; ++r) {
    const Shard s = contiguous_shard(p.T, P, r);
    shards.push_back({s.begin, s.end});
  }
  stats["shards"] = shards;
  stats["forward"] = counters_json(comm, fwd_counters);
  const double fwd_max = max_over_ranks(comm, fwd_s);
  stats["seconds"] = {{"forward", fwd_max}};
  if (a.backward) {
    stats["backward"] = counters_json(comm, bwd_counters);
    stats["seconds"]["backward"] = max_over_ranks(comm, bwd_s);
  }
  if (comm.rank() != 0) return;
  const fs::path stats_path = fs::path(a.out) / "stats.json";
  std::ofstream(stats_path) << stats.dump(2) << "\n";
  GDN_CHECK(fs::exists(stats_path), "cannot write ", stats_path.string());
  spdlog::info(
      "B={} T={} Hk={} Hv={} K={} V={} N={} {} on P={} ranks: forward {:.4f} s{}{} -> {}", p.B, p.T,
      p.Hk, p.Hv, p.K, p.V, p.num_sequences(), dtype_name(dtype_of<T>()), P, fwd_max,
      a.backward ? fmt::format(", backward {:.4f} s", stats["seconds"]["backward"].get<double>())
                 : "",
      a.log_depth_scan ? " (log-depth scan)" : "", a.out);
}

template <typename T>
void run(Communicator& comm, const Args& a, const Inputs& in) {
#if GDN_HAVE_CUDA
  if (a.device == app::Device::cuda) {
    // NCCL over device buffers (or MPI with host staging when ranks share a GPU).
    const auto device_comm = make_device_communicator(MPI_COMM_WORLD);
    write_outputs(comm, a, in, run_op<T, CudaSpace<T>>(*device_comm, a, in));
    return;
  }
#endif
  write_outputs(comm, a, in, run_op<T, HostSpace<T>>(comm, a, in));
}

}  // namespace

int main(int argc, char** argv) {
  MpiRuntime mpi(&argc, &argv);
  int rc = 0;
  {
    MpiCommunicator comm;
    app::setup_logging("gdn_kernel");
    Args args;
    Inputs in;
    // Parsing and validation on every rank, no collectives, then one agreement.
    const bool ok = app::run_setup_collectively(comm, [&] {
      args = parse_args(argc, argv);
      if (!args.help) in = load_inputs(args, comm.rank());
    });
    if (!ok) {
      rc = 1;
    } else if (args.help) {
      if (comm.rank() == 0) std::cout << make_options().help() << std::endl;
    } else {
      try {
        if (in.compute == DType::f64)
          run<double>(comm, args, in);
        else
          run<float>(comm, args, in);
      } catch (const std::exception& e) {
        // Past set-up, other ranks may be inside a collective: end the whole job.
        spdlog::error("rank {}: {}", comm.rank(), e.what());
        spdlog::default_logger()->flush();
        comm.abort(1);
      }
    }
  }
  return rc;
}
