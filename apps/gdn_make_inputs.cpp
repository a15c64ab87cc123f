// gdn_make_inputs: writes a seeded input directory for gdn_kernel (q, k, v, g, beta and,
// on request, h0, cu_seqlens, do, dht), in the value ranges the GDN layer produces.
// Serial; the same seed gives the same files on every machine.
#include <spdlog/spdlog.h>

#include <cxxopts.hpp>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "common/app_common.h"
#include "core/error.h"
#include "core/npy.h"
#include "core/rng.h"
#include "gdn/random_inputs.h"

namespace fs = std::filesystem;
using namespace gdn;

namespace {

cxxopts::Options make_options() {
  cxxopts::Options o("gdn_make_inputs",
                     "Writes seeded GDN inputs for gdn_kernel into --out: q.npy, k.npy "
                     "[B,T,Hk,K], v.npy [B,T,Hv,V], g.npy, beta.npy [B,T,Hv],\noptionally h0.npy "
                     "[N,Hv,K,V], cu_seqlens.npy [N+1], do.npy [B,T,Hv,V], dht.npy [N,Hv,K,V].");
  o.add_options()("out", "output directory (created if missing)", cxxopts::value<std::string>())(
      "B,batch", "batch size (also --B)", cxxopts::value<int>()->default_value("1"))(
      "T,seq-len", "sequence length, tokens per batch row (also --T)",
      cxxopts::value<std::int64_t>()->default_value("256"))(
      "Hk", "key heads (q and k)", cxxopts::value<int>()->default_value("2"))(
      "Hv", "value heads (v, g, beta, o); a multiple of Hk",
      cxxopts::value<int>()->default_value("4"))("K,key-dim", "key head dimension (also --K)",
                                                 cxxopts::value<int>()->default_value("64"))(
      "V,value-dim", "value head dimension (also --V)", cxxopts::value<int>()->default_value("64"))(
      "seed", "RNG seed (same seed, same files)",
      cxxopts::value<std::uint64_t>()->default_value("1"))(
      "dtype", "element type of the files: f32 or f64",
      cxxopts::value<std::string>()->default_value("f64"))(
      "g-scale",
      "multiply the log-decay g by this: below 1 the state remembers longer, so more of it "
      "crosses rank boundaries (the default decay forgets within a few hundred tokens)",
      cxxopts::value<double>()->default_value("1"))(
      "h0", "also write an initial state h0.npy [N,Hv,K,V]")(
      "cu-seqlens", "packed sequences: boundaries 0,...,T (needs B=1), written as cu_seqlens.npy",
      cxxopts::value<std::string>())("cu-dtype", "element type of cu_seqlens.npy: i32 or i64",
                                     cxxopts::value<std::string>()->default_value("i64"))(
      "backward", "also write the output gradient do.npy and, with --h0, dht.npy")(
      "allow-invalid",
      "write the files even when the shape or cu_seqlens is invalid for the op (for testing "
      "gdn_kernel's error messages)")("h,help", "print this help");
  return o;
}

// do and dht: standard normal from their own stream, so adding --backward leaves the
// forward inputs unchanged for a given seed.
template <typename T>
Tensor<T> normal_tensor(Shape s, Rng& rng) {
  Tensor<T> t(std::move(s));
  for (T& x : t.data) x = T(rng.normal());
  return t;
}

template <typename T>
void write_all(const cxxopts::ParseResult& res, const GdnProblem& p, const std::string& dir) {
  const bool with_h0 = res.count("h0") > 0;
  const std::uint64_t seed = res["seed"].as<std::uint64_t>();
  GdnInputs<T> d = random_gdn_inputs<T>(p, seed, with_h0, res["g-scale"].as<double>());
  auto path = [&](const char* name) {
    return (fs::path(dir) / (std::string(name) + ".npy")).string();
  };
  write_npy<T>(path("q"), d.q);
  write_npy<T>(path("k"), d.k);
  write_npy<T>(path("v"), d.v);
  write_npy<T>(path("g"), d.g);
  write_npy<T>(path("beta"), d.beta);
  if (with_h0) write_npy<T>(path("h0"), d.h0);
  if (!p.cu_seqlens.empty()) {
    Tensor<std::int64_t> cu({std::int64_t(p.cu_seqlens.size())});
    cu.data = p.cu_seqlens;
    if (res["cu-dtype"].as<std::string>() == "i32")
      write_npy<std::int32_t>(path("cu_seqlens"), cast<std::int32_t>(cu));
    else
      write_npy<std::int64_t>(path("cu_seqlens"), cu);
  }
  if (res.count("backward")) {
    Rng rng(seed ^ 0xD0D0D0D0D0D0D0D0ull);
    write_npy<T>(path("do"), normal_tensor<T>({p.B, p.T, p.Hv, p.V}, rng));
    if (with_h0)
      write_npy<T>(path("dht"), normal_tensor<T>({p.num_sequences(), p.Hv, p.K, p.V}, rng));
  }
}

// cxxopts needs two characters for a long option, so "--B 2" would be rejected; the
// documented spellings --B, --T, --K, --V become their long names here.
std::vector<std::string> normalise_args(int argc, char** argv) {
  const std::map<std::string, std::string> alias = {
      {"--B", "--batch"}, {"--T", "--seq-len"}, {"--K", "--key-dim"}, {"--V", "--value-dim"}};
  std::vector<std::string> out(argv, argv + argc);
  for (auto& a : out) {
    const std::string key = a.substr(0, a.find('='));
    if (auto it = alias.find(key); it != alias.end()) a = it->second + a.substr(key.size());
  }
  return out;
}

int run(int argc, char** argv) {
  auto options = make_options();
  std::vector<std::string> args = normalise_args(argc, argv);
  std::vector<char*> ptrs;
  for (auto& a : args) ptrs.push_back(a.data());
  auto res = options.parse(int(ptrs.size()), ptrs.data());
  if (res.count("help")) {
    std::cout << options.help() << std::endl;
    return 0;
  }
  GDN_CHECK(res.unmatched().empty(), "unexpected argument '", res.unmatched().front(), "'");
  GDN_CHECK(res.count("out"), "--out DIR is required");
  GdnProblem p;
  p.B = res["batch"].as<int>();
  p.T = res["seq-len"].as<std::int64_t>();
  p.Hk = res["Hk"].as<int>();
  p.Hv = res["Hv"].as<int>();
  p.K = res["key-dim"].as<int>();
  p.V = res["value-dim"].as<int>();
  if (res.count("cu-seqlens"))
    p.cu_seqlens = app::parse_int_list(res["cu-seqlens"].as<std::string>(), ',', "--cu-seqlens");
  const DType dtype = parse_real_dtype(res["dtype"].as<std::string>(), "--dtype");
  const std::string cu_dtype = res["cu-dtype"].as<std::string>();
  GDN_CHECK(res["g-scale"].as<double>() >= 0, "--g-scale ", res["g-scale"].as<double>(),
            ": expected >= 0 (g is a log-decay and must stay <= 0)");
  GDN_CHECK(cu_dtype == "i32" || cu_dtype == "i64", "--cu-dtype ", cu_dtype,
            ": expected i32 or i64");
  // Sizes must be usable as array dimensions even with --allow-invalid.
  GDN_CHECK(p.B >= 1 && p.T >= 0 && p.Hk >= 1 && p.Hv >= 1 && p.K >= 1 && p.V >= 1, "shape B=", p.B,
            " T=", p.T, " Hk=", p.Hk, " Hv=", p.Hv, " K=", p.K, " V=", p.V,
            ": expected B, Hk, Hv, K, V >= 1 and T >= 0");
  if (!res.count("allow-invalid")) p.validate();
  GDN_CHECK(p.cu_seqlens.empty() || p.cu_seqlens.size() >= 2,
            "--cu-seqlens needs at least two boundaries (0 and T)");

  const std::string dir = res["out"].as<std::string>();
  fs::create_directories(dir);
  if (dtype == DType::f64)
    write_all<double>(res, p, dir);
  else
    write_all<float>(res, p, dir);
  spdlog::info("wrote B={} T={} Hk={} Hv={} K={} V={} N={} {}{}{} to {}", p.B, p.T, p.Hk, p.Hv, p.K,
               p.V, p.num_sequences(), dtype_name(dtype), res.count("h0") ? " with h0" : "",
               res.count("backward") ? " and do" : "", dir);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return gdn::app::serial_main("gdn_make_inputs", run, argc, argv);
}
