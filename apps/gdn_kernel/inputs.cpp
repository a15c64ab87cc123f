#include "gdn_kernel/inputs.h"

#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <vector>

#include "core/error.h"

namespace fs = std::filesystem;

namespace gdn::kernel_app {

namespace {

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

// NaN and +-Inf are refused; g may be -inf ("forget everything before this token").
void require_finite(const NpyArray& a, const std::string& file, bool allow_neg_inf) {
  const std::int64_t i = first_nonfinite(a, allow_neg_inf);
  if (i < 0) return;
  const double x = element(a, i);
  throw_error(file, ": element ", index_str(a.shape, i), " (flat index ", i, ") is ",
              std::isnan(x) ? "NaN"
              : x > 0       ? "+Inf"
                            : "-Inf",
              ": expected finite values",
              allow_neg_inf ? " (or -inf, the limit that forgets the state)" : "");
}

// beta in [0, 2]: the delta rule's range with fla's negative eigenvalues (beta = 2 sigmoid).
void require_beta_range(const NpyArray& a, const std::string& file) {
  const std::int64_t n = numel(a.shape);
  for (std::int64_t i = 0; i < n; ++i) {
    const double x = element(a, i);
    GDN_CHECK(x >= 0 && x <= 2, file, ": element ", index_str(a.shape, i), " (flat index ", i,
              ") is ", x, ": expected beta in [0, 2]");
  }
}

}  // namespace

std::string input_path(const Args& a, const std::string& name) {
  return (fs::path(a.in) / (name + ".npy")).string();
}

Inputs load_inputs(const Args& a) {
  Inputs in;
  auto read = [&](const std::string& name) { return read_npy(input_path(a, name)); };
  auto read_optional = [&](const std::string& name) -> std::optional<NpyArray> {
    if (!fs::exists(input_path(a, name))) return std::nullopt;
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
    require_float(*arr, input_path(a, name));
    any_f64 |= arr->dtype == DType::f64;
  }
  in.compute = a.dtype.empty() ? (any_f64 ? DType::f64 : DType::f32)
                               : (a.dtype == "f64" ? DType::f64 : DType::f32);

  // Shapes: q fixes B, T, Hk, K; v fixes Hv, V; everything else must agree. Dimensions
  // stay 64-bit until they are known to fit where the op keeps them.
  const std::string qf = input_path(a, "q"), vf = input_path(a, "v");
  GDN_CHECK(in.q.shape.size() == 4, qf, ": shape ", shape_str(in.q.shape), " has ",
            in.q.shape.size(), " dimensions: expected 4, [B, T, Hk, K]");
  const std::int64_t B = in.q.shape[0], T = in.q.shape[1];
  require_shape(in.k, input_path(a, "k"), in.q.shape, "[B, T, Hk, K]", "the shape of " + qf);
  GDN_CHECK(in.v.shape.size() == 4 && in.v.shape[0] == B && in.v.shape[1] == T, vf, ": shape ",
            shape_str(in.v.shape),
            " does not match the other inputs: expected [B, T, Hv, V] with B=", B, ", T=", T,
            " (from ", qf, " ", shape_str(in.q.shape), ")");
  const std::int64_t Hv = in.v.shape[2], V = in.v.shape[3];
  const std::string bth = "B, T from " + qf + ", Hv from " + vf;
  require_shape(in.g, input_path(a, "g"), {B, T, Hv}, "[B, T, Hv]", bth);
  require_shape(in.beta, input_path(a, "beta"), {B, T, Hv}, "[B, T, Hv]", bth);
  if (in.dO) require_shape(*in.dO, input_path(a, "do"), in.v.shape, "[B, T, Hv, V]", "like " + vf);

  GdnProblem& p = in.problem;
  p.B = small_dim(B, qf, "B");
  p.T = T;
  p.Hk = small_dim(in.q.shape[2], qf, "Hk");
  p.K = small_dim(in.q.shape[3], qf, "K");
  p.Hv = small_dim(Hv, vf, "Hv");
  p.V = small_dim(V, vf, "V");
  p.chunk_size = a.chunk_size;
  p.scale = a.scale;
  p.l2norm_qk = a.l2norm_qk;
  if (cu) {
    const std::string cf = input_path(a, "cu_seqlens");
    GDN_CHECK(cu->dtype == DType::i32 || cu->dtype == DType::i64, cf, ": dtype ",
              dtype_name(cu->dtype), " is not supported: expected int32 ('<i4') or int64 ('<i8')");
    GDN_CHECK(cu->shape.size() == 1, cf, ": shape ", shape_str(cu->shape),
              " is not 1-D: expected [N+1] sequence boundaries 0, ..., T");
    GDN_CHECK(cu->shape[0] >= 2, cf, ": shape ", shape_str(cu->shape), " holds ", cu->shape[0],
              " boundaries: expected at least 2 ([0, ..., T])");
    p.cu_seqlens = npy_to_tensor<std::int64_t>(*cu, cf).data;
  }
  // Hv % Hk, chunk size, scale and the cu_seqlens rules (B = 1, non-decreasing, ends at T).
  p.validate();

  const Shape state = {p.num_sequences(), Hv, p.K, V};
  const std::string nfrom = cu ? "N = len(cu_seqlens) - 1" : "N = B";
  if (in.h0) require_shape(*in.h0, input_path(a, "h0"), state, "[N, Hv, K, V]", nfrom);
  if (in.dht) require_shape(*in.dht, input_path(a, "dht"), state, "[N, Hv, K, V]", nfrom);

  for (auto& [arr, name] : floats) require_finite(*arr, input_path(a, name), name == "g");
  require_beta_range(in.beta, input_path(a, "beta"));
  return in;
}

}  // namespace gdn::kernel_app
