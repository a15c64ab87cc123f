#include "gdn_kernel/inputs.h"

#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <vector>

#include "comm/call_sites.h"
#include "core/error.h"

namespace fs = std::filesystem;

namespace gdn::kernel_app {

namespace {

bool is_float(DType t) {
  return t == DType::f32 || t == DType::f64;
}

void require_float(const NpyHeader& a, const std::string& file) {
  GDN_CHECK(is_float(a.dtype), file, ": dtype ", dtype_name(a.dtype),
            " is not supported here: expected float32 ('<f4') or float64 ('<f8')");
}

// `pattern` names the dimensions ("[B, T, Hv]"), `from` says where their values came from.
void require_shape(const NpyHeader& a, const std::string& file, const Shape& expected,
                   const std::string& pattern, const std::string& from) {
  GDN_CHECK(a.shape == expected, file, ": shape ", shape_str(a.shape),
            " does not match the other inputs: expected ", pattern, " = ", shape_str(expected),
            " (", from, ")");
}

// A dimension the op holds in an int (batch, heads, head dims), as read from the file.
int small_dim(std::int64_t d, const std::string& file, const char* name) {
  GDN_CHECK(d <= INT_MAX, file, ": ", name, " = ", d, " is too large: expected at most ", INT_MAX);
  return int(d);
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

double element(const NpyArray& a, std::int64_t i) {
  if (a.dtype == DType::f32) {
    float x;
    std::memcpy(&x, a.bytes.data() + i * 4, 4);
    return x;
  }
  double x;
  std::memcpy(&x, a.bytes.data() + i * 8, 8);
  return x;
}

// beta in [0, 2]: the delta rule's range with fla's negative eigenvalues (beta = 2 sigmoid).
bool beta_in_range(double x) {
  return x >= 0 && x <= 2;
}

std::int64_t first_out_of_range(const NpyArray& a) {
  const std::int64_t n = numel(a.shape);
  for (std::int64_t i = 0; i < n; ++i)
    if (!beta_in_range(element(a, i))) return i;
  return -1;
}

// One value check: NaN and +-Inf are refused (g may be -inf: "forget everything before
// this token"), and beta must lie in [0, 2].
struct ValueCheck {
  const NpyArray* arr;
  std::string name;
  bool sharded;  // a [B, T, ...] shard (else the whole array)
  enum Kind { finite, finite_or_neg_inf, beta_range } kind;
};

// The checks in the order a single rank reports them: every file's finite values first.
std::vector<ValueCheck> value_checks(const Inputs& in) {
  std::vector<ValueCheck> c = {{&in.q, "q", true, ValueCheck::finite},
                               {&in.k, "k", true, ValueCheck::finite},
                               {&in.v, "v", true, ValueCheck::finite},
                               {&in.g, "g", true, ValueCheck::finite_or_neg_inf},
                               {&in.beta, "beta", true, ValueCheck::finite}};
  if (in.h0) c.push_back({&*in.h0, "h0", false, ValueCheck::finite});
  if (in.dO) c.push_back({&*in.dO, "do", true, ValueCheck::finite});
  if (in.dht) c.push_back({&*in.dht, "dht", false, ValueCheck::finite});
  c.push_back({&in.beta, "beta", true, ValueCheck::beta_range});
  return c;
}

// The shape of the whole file a check's array came from.
Shape full_shape(const ValueCheck& c, const Inputs& in) {
  Shape s = c.arr->shape;
  if (c.sharded) s[1] = in.problem.T;
  return s;
}

}  // namespace

std::string input_path(const Args& a, const std::string& name) {
  return (fs::path(a.in) / (name + ".npy")).string();
}

Inputs load_inputs(const Args& a, int rank, int P) {
  Inputs in;
  // First every header (the files' errors in this order), then the checks, then the data.
  auto header = [&](const std::string& name) { return read_npy_header(input_path(a, name)); };
  auto header_optional = [&](const std::string& name) -> std::optional<NpyHeader> {
    if (!fs::exists(input_path(a, name))) return std::nullopt;
    return header(name);
  };
  GDN_CHECK(fs::is_directory(a.in), "--in ", a.in, ": not a directory (expected the directory ",
            "holding q.npy, k.npy, v.npy, g.npy, beta.npy)");
  const NpyHeader hq = header("q"), hk = header("k"), hv = header("v"), hg = header("g"),
                  hbeta = header("beta");
  const std::optional<NpyHeader> hh0 = header_optional("h0"), hcu = header_optional("cu_seqlens");
  std::optional<NpyHeader> hdo, hdht;
  if (a.backward) {
    hdo = header("do");
    hdht = header_optional("dht");
  }

  // Element types: float tensors, integer boundaries.
  std::vector<std::pair<const NpyHeader*, std::string>> floats = {
      {&hq, "q"}, {&hk, "k"}, {&hv, "v"}, {&hg, "g"}, {&hbeta, "beta"}};
  if (hh0) floats.push_back({&*hh0, "h0"});
  if (hdo) floats.push_back({&*hdo, "do"});
  if (hdht) floats.push_back({&*hdht, "dht"});
  bool any_f64 = false;
  for (auto& [h, name] : floats) {
    require_float(*h, input_path(a, name));
    any_f64 |= h->dtype == DType::f64;
  }
  in.compute = a.dtype.value_or(any_f64 ? DType::f64 : DType::f32);

  // Shapes: q fixes B, T, Hk, K; v fixes Hv, V; everything else must agree. Dimensions
  // stay 64-bit until they are known to fit where the op keeps them.
  const std::string qf = input_path(a, "q"), vf = input_path(a, "v");
  GDN_CHECK(hq.shape.size() == 4, qf, ": shape ", shape_str(hq.shape), " has ", hq.shape.size(),
            " dimensions: expected 4, [B, T, Hk, K]");
  const std::int64_t B = hq.shape[0], T = hq.shape[1];
  require_shape(hk, input_path(a, "k"), hq.shape, "[B, T, Hk, K]", "the shape of " + qf);
  GDN_CHECK(hv.shape.size() == 4 && hv.shape[0] == B && hv.shape[1] == T, vf, ": shape ",
            shape_str(hv.shape),
            " does not match the other inputs: expected [B, T, Hv, V] with B=", B, ", T=", T,
            " (from ", qf, " ", shape_str(hq.shape), ")");
  const std::int64_t Hv = hv.shape[2], V = hv.shape[3];
  const std::string bth = "B, T from " + qf + ", Hv from " + vf;
  require_shape(hg, input_path(a, "g"), {B, T, Hv}, "[B, T, Hv]", bth);
  require_shape(hbeta, input_path(a, "beta"), {B, T, Hv}, "[B, T, Hv]", bth);
  if (hdo) require_shape(*hdo, input_path(a, "do"), hv.shape, "[B, T, Hv, V]", "like " + vf);

  GdnProblem& p = in.problem;
  p.B = small_dim(B, qf, "B");
  p.T = T;
  p.Hk = small_dim(hq.shape[2], qf, "Hk");
  p.K = small_dim(hq.shape[3], qf, "K");
  p.Hv = small_dim(Hv, vf, "Hv");
  p.V = small_dim(V, vf, "V");
  p.chunk_size = a.chunk_size;
  p.scale = a.scale;
  p.l2norm_qk = a.l2norm_qk;
  if (hcu) {
    const std::string cf = input_path(a, "cu_seqlens");
    GDN_CHECK(hcu->dtype == DType::i32 || hcu->dtype == DType::i64, cf, ": dtype ",
              dtype_name(hcu->dtype), " is not supported: expected int32 ('<i4') or int64 ('<i8')");
    GDN_CHECK(hcu->shape.size() == 1, cf, ": shape ", shape_str(hcu->shape),
              " is not 1-D: expected [N+1] sequence boundaries 0, ..., T");
    GDN_CHECK(hcu->shape[0] >= 2, cf, ": shape ", shape_str(hcu->shape), " holds ", hcu->shape[0],
              " boundaries: expected at least 2 ([0, ..., T])");
    p.cu_seqlens = npy_to_tensor<std::int64_t>(read_npy(cf), cf).data;
  }
  // Hv % Hk, chunk size, scale and the cu_seqlens rules (B = 1, non-decreasing, ends at T).
  p.validate();

  const Shape state = {p.num_sequences(), Hv, p.K, V};
  const std::string nfrom = hcu ? "N = len(cu_seqlens) - 1" : "N = B";
  if (hh0) require_shape(*hh0, input_path(a, "h0"), state, "[N, Hv, K, V]", nfrom);
  if (hdht) require_shape(*hdht, input_path(a, "dht"), state, "[N, Hv, K, V]", nfrom);

  // The data: this rank's tokens of the [B, T, ...] files (B runs each), the states whole.
  in.shard = contiguous_shard(T, P, rank);
  auto shard = [&](const std::string& name, const NpyHeader& h) {
    return read_npy_rows(input_path(a, name), h, 1, in.shard.begin, in.shard.size());
  };
  in.q = shard("q", hq);
  in.k = shard("k", hk);
  in.v = shard("v", hv);
  in.g = shard("g", hg);
  in.beta = shard("beta", hbeta);
  if (hh0) in.h0 = read_npy(input_path(a, "h0"));
  if (hdo) in.dO = shard("do", *hdo);
  if (hdht) in.dht = read_npy(input_path(a, "dht"));
  return in;
}

ValueVerdict agree_on_values(Communicator& comm, const Inputs& in) {
  const std::vector<ValueCheck> checks = value_checks(in);
  ValueVerdict v;
  // max over ranks of -index is the lowest index; kNone (no bad value here) loses to any.
  constexpr std::int64_t kNone = std::numeric_limits<std::int64_t>::min();
  std::vector<std::int64_t> lowest(checks.size(), kNone);
  for (std::size_t c = 0; c < checks.size(); ++c) {
    const ValueCheck& ch = checks[c];
    const std::int64_t i = ch.kind == ValueCheck::beta_range
                               ? first_out_of_range(*ch.arr)
                               : first_nonfinite(*ch.arr, ch.kind == ValueCheck::finite_or_neg_inf);
    v.local.push_back(i);
    v.global.push_back(
        i < 0 || !ch.sharded
            ? i
            : npy_slice_flat_index(full_shape(ch, in), 1, in.shard.begin, in.shard.size(), i));
    if (v.global.back() >= 0) lowest[c] = -v.global.back();
  }
  comm.all_reduce_max(lowest.data(), lowest.size(), app_sites::kCheckValues);
  for (std::size_t c = 0; c < checks.size(); ++c)
    if (lowest[c] != kNone) {
      v.check = int(c);
      v.index = -lowest[c];
      break;
    }
  return v;
}

void throw_bad_value(const Args& a, const Inputs& in, const ValueVerdict& v) {
  if (v.check < 0 || v.global[std::size_t(v.check)] != v.index) return;
  const ValueCheck ch = value_checks(in)[std::size_t(v.check)];
  const std::string file = input_path(a, ch.name);
  const std::int64_t i = v.index;
  const double x = element(*ch.arr, v.local[std::size_t(v.check)]);
  const std::string where =
      ": element " + index_str(full_shape(ch, in), i) + " (flat index " + std::to_string(i) + ")";
  if (ch.kind == ValueCheck::beta_range)
    throw_error(file, where, " is ", x, ": expected beta in [0, 2]");
  const bool allow_neg_inf = ch.kind == ValueCheck::finite_or_neg_inf;
  throw_error(file, where, " is ",
              std::isnan(x) ? "NaN"
              : x > 0       ? "+Inf"
                            : "-Inf",
              ": expected finite values",
              allow_neg_inf ? " (or -inf, the limit that forgets the state)" : "");
}

}  // namespace gdn::kernel_app
