// gdn_bench: times the single-rank chunked gated delta rule against the token-by-token
// recurrence, side by side in one run, and prints the benchmark table on stdout
// (common/bench_table.h), or with --json the same measurements as JSON lines:
//   first the FMA peak of this CPU in --dtype, measured in the same run (ops/gemm/fma_peak.h),
//   then the practical ceiling: the best rate of a --ceiling-size square GEMM, ours and
//   OpenBLAS's where the build found it (gdn_bench/gemm_ceiling.h); one per (shape,
//   variant) with the median of --reps timed runs after --warmup and, for the chunked ones,
//   the FLOPs of gdn/flop_count.h, the GFLOP/s and the percentage of that peak and of that
//   ceiling; then one with the ratios recurrent / chunked (and CPU / CUDA when both ran).
// The table's check column compares each variant's outputs (and gradients) with the op in
// fp64 on the same inputs: the token-by-token recurrence (the chunked op above
// --skip-recurrent-above), from h_in for the phases; a wrong row makes the exit code 1.
// The JSON lines assert nothing (and skip that reference).
//
// FLOPs (gdn/flop_count.h; multiply-add = 2, triangles count their nonzero half, matrix
// products only), per chunk of C rows, times B Hv ceil(T / C) chunks:
//   prepare  = 3 C^2 K + C^2 V + C^3 / 3        output = 6 C K V + C^2 V
//   state    = 4 C K^2 + 4 C K V                backward = prepare + 14 C K V + 4 C^2 V + 6 C^2 K
//   forward = prepare + output; forward + backward = forward + backward.
//
// The CPU phases (--phases, on by default) time LocalPass's passes one by one on the slice
// a CP rank holds: the second half [T, 2T) of sequences 2T long, so that phase 1 composes
// the transition M and phase 3 starts from a given h_in. phase_prepare (the WY factors of
// every chunk, kept), phase_transition (phase 1: the slice's pair (M, U) from the kept factors),
// phase_output (phase 3 from the kept factors), phase_backward (the full local backward).
// Then phases 1 + 3 both ways: cp_fwd_reuse (one prepare, both passes read the kept
// factors: what src/cp does) and cp_fwd_recompute (each pass makes every chunk's factors
// on the fly and keeps none); the last line gives recompute / reuse.
// --device cuda|all also times the same single-rank op on the GPU (CUDA build only),
// ChunkedGdn<T, Cuda>, on inputs uploaded once, outside the timed region; each timed run
// ends with a device synchronisation.
#include <omp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <cxxopts.hpp>
#include <functional>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>
#include <type_traits>
#include <vector>

#include "common/app_common.h"
#include "common/bench_table.h"
#include "common/deprecated_env.h"
#include "common/gdn_reference.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/precision.h"
#include "core/rng.h"
#include "gdn/chunk/launch_counts.h"
#include "gdn/flop_count.h"
#include "gdn/op/bf16_op.h"
#include "gdn/op/op.h"
#include "gdn/pass/byte_count.h"
#include "gdn/pass/local_pass.h"
#include "gdn/random_inputs.h"
#include "gdn/recurrent.h"
#include "gdn_bench/gemm_ceiling.h"
#include "ops/convert/convert.h"
#include "ops/gemm/fma_peak.h"
#include "ops/gemm/gemm_path.h"

#if GDN_HAVE_CUDA
#include "runtime/cuda_device.h"
#include "runtime/cuda_timer.h"
#include "runtime/device_select.h"
#endif

using namespace gdn;
using json = nlohmann::ordered_json;

namespace {

struct Settings {
  int chunk_size = kDefaultChunkSize, reps = 5, recurrent_reps = 3, warmup = 1;
  int cpu_reps = 5, cpu_warmup = 1;  // the CPU chunked variants (default: --reps, --warmup)
  std::int64_t skip_recurrent_above = 16384;
  bool cpu = true, cuda = false;     // which devices to time (from --device)
  bool phases = true;                // time LocalPass's passes one by one (CPU)
  double peak_gflops = 0;            // the FMA peak measured at start-up
  double ceiling_gflops = 0;         // the best large GEMM rate, ours or the library's (0: none)
  app::BenchTable* table = nullptr;  // the table's rows; null: JSON lines (--json)
  double tol = 0;                    // the check's tolerance in --dtype (rel L2)
  // The GPU variants' kernel paths (gdn/chunk/launch_counts.h), one note each for the table.
  std::vector<std::string>* launch_notes = nullptr;
  std::regex variants{".*"};  // --variants: only the variants whose names match run
};

json shape_json(const GdnProblem& p) {
  return {{"B", p.B}, {"T", p.T}, {"Hk", p.Hk}, {"Hv", p.Hv}, {"K", p.K}, {"V", p.V}};
}

struct Timing {
  double median_ms, min_ms, cpu_ms;
};

// Median and fastest wall time in milliseconds of `reps` calls of fn, after `warmup`
// untimed calls, and the median process CPU time (all threads, user + system). The
// minimum is the run least disturbed by a neighbour on a shared machine, and CPU time
// does not count the time a neighbour holds the core; the median wall time is what the
// ratios use.
// With `events` (GPU variants that launch without a sync) each run's time is the GPU's,
// between two CUDA events (runtime/cuda_timer.h), not the host's wall time.
Timing time_ms(const std::function<void()>& fn, int warmup, int reps, bool events = false) {
  (void)events;  // a CPU-only build has no GPU variants
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> ms, cpu;
  for (int i = 0; i < reps; ++i) {
    const std::clock_t c0 = std::clock();
    const auto t0 = std::chrono::steady_clock::now();
#if GDN_HAVE_CUDA
    if (events) {
      ms.push_back(cuda_event_ms(fn));
      cpu.push_back(1e3 * double(std::clock() - c0) / CLOCKS_PER_SEC);
      continue;
    }
#endif
    fn();
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    cpu.push_back(1e3 * double(std::clock() - c0) / CLOCKS_PER_SEC);
  }
  return {app::median(ms), *std::min_element(ms.begin(), ms.end()), app::median(cpu)};
}

// A timed variant: its name, one run of it, and the FLOPs of one run (0: not counted);
// for the table, the error of what the last run wrote against the fp64 reference (null:
// nothing of its own to check) and its tolerance (0: Settings::tol).
struct Variant {
  std::string name;
  std::function<void()> fn;
  double flops = 0;
  std::function<double()> check = nullptr;
  double tol = 0;
  bool events = false;  // timed by CUDA events (time_ms)
};
using Variants = std::vector<Variant>;

// Times each variant, prints its line and records its median in out.
template <typename T>
void time_variants(const GdnProblem& p, const Settings& s, const char* device,
                   const Variants& variants, std::map<std::string, double>& out) {
  for (const auto& [name, fn, flops, check, tol, events] : variants) {
    if (!std::regex_match(name, s.variants)) continue;
    const bool recurrent = name.rfind("recurrent", 0) == 0;
    const bool cpu = std::string(device) == "cpu";
    const int reps = recurrent ? s.recurrent_reps : cpu ? s.cpu_reps : s.reps;
    const int warmup = cpu && !recurrent ? s.cpu_warmup : s.warmup;
    pass::reset_launch_counts();
    const Timing t = time_ms(fn, warmup, reps, events);
    const double ms = t.median_ms;
    out[name] = ms;
    // Which kernels the GPU passes took, so that a silent fallback to the tiled kernels
    // shows beside the time (the counts are of every run, warm-up included).
    json launches = json::object();
    std::string launched;
    for (const pass::PhaseLaunches& l : pass::launch_counts()) {
      launches[l.phase] = {{"register", l.bf16_register}, {"tiled", l.tiled}};
      if (!l.fallback.empty()) launches[l.phase]["fallback"] = l.fallback;
      launched +=
          fmt::format("{}{} {} register / {} tiled{}", launched.empty() ? "" : ", ", l.phase,
                      l.bf16_register, l.tiled, l.fallback.empty() ? "" : " (" + l.fallback + ")");
    }
    if (!cpu && s.launch_notes)
      s.launch_notes->push_back(fmt::format("kernels of {} at {},{},{},{},{},{}: {}", name, p.B,
                                            p.T, p.Hk, p.Hv, p.K, p.V, launched));
    if (s.table) {
      const double gflops = flops > 0 ? flops / (ms * 1e-3) * 1e-9 : NAN;
      s.table->row(app::shape_cells(p, {name, device, app::fixed(ms, 3), app::fixed(t.min_ms, 3),
                                        app::fixed(double(p.B) * p.T / (ms * 1e-3) * 1e-6, 3),
                                        app::fixed(gflops, 2),
                                        app::fixed(cpu ? 100 * gflops / s.peak_gflops : NAN, 1)}),
                   check ? app::BenchCheck{check(), tol > 0 ? tol : s.tol} : app::unchecked());
      continue;
    }
    json line = {{"shape", shape_json(p)},
                 {"variant", name},
                 {"device", device},
                 {"dtype", dtype_name(dtype_of<T>())},
                 {"chunk_size", p.chunk_size},
                 {"median_ms", ms},
                 {"min_ms", t.min_ms},
                 {"cpu_ms", t.cpu_ms},
                 {"tokens_per_s", double(p.B) * p.T / (ms * 1e-3)},
                 {"reps", reps},
                 {"warmup", warmup},
                 {"threads", omp_get_max_threads()}};
    if (!cpu) line["launches"] = launches;
    if (flops > 0) {
      const double gflops = flops / (ms * 1e-3) * 1e-9;
      line["gflop"] = flops * 1e-9;
      line["gflops"] = gflops;
      // Against the CPU's peak and GEMM ceiling: meaningful for the CPU variants only.
      if (cpu) line["pct_of_peak"] = 100 * gflops / s.peak_gflops;
      if (cpu && s.ceiling_gflops > 0)
        line["pct_of_gemm_ceiling"] = 100 * gflops / s.ceiling_gflops;
    }
    std::cout << line.dump() << std::endl;
  }
}

// The CPU variants: the chunked op, and the recurrence up to --skip-recurrent-above (in
// fp64 it is the reference itself: not checked). `ref`: the table's reference (or null).
template <typename T>
void bench_cpu(const GdnProblem& p, const Settings& s, const GdnInputView<T>& in, const T* dO,
               const T* dht, const app::GdnReference* ref, std::map<std::string, double>& out) {
  const Shape state = {p.num_sequences(), p.Hv, p.K, p.V};
  Tensor<T> o({p.B, p.T, p.Hv, p.V}), ht(state);
  Tensor<T> dq({p.B, p.T, p.Hk, p.K}), dk(dq.shape), dv(o.shape), dg({p.B, p.T, p.Hv}),
      dbeta(dg.shape), dh0(state);
  GdnGradView<T> grads{dq.ptr(), dk.ptr(), dv.ptr(), dg.ptr(), dbeta.ptr(), dh0.ptr()};

  // The chunked variants include the constructor: it does the L2 norm and allocations
  // that a caller pays on every call.
  const ChunkFlops f = chunk_flops(p);
  std::function<double()> fwd_check, fwd_bwd_check;
  if (ref) {
    fwd_check = [&] { return app::outputs_error(*ref, o.ptr(), ht.ptr()); };
    fwd_bwd_check = [&] {
      return std::max(app::outputs_error(*ref, o.ptr(), ht.ptr()),
                      app::grads_error(*ref, grads, true));
    };
  }
  Variants variants = {
      {"chunked_fwd", [&] { ChunkedGdn<T>(p, in).forward(o.ptr(), ht.ptr()); }, f.forward(),
       fwd_check},
      {"chunked_fwd_bwd",
       [&] {
         ChunkedGdn<T> op(p, in);
         op.forward(o.ptr(), ht.ptr());
         op.backward(dO, dht, grads);
       },
       f.forward_backward(), fwd_bwd_check},
  };
  if (p.T <= s.skip_recurrent_above) {
    const bool own = !std::is_same_v<T, double>;  // not the reference itself
    variants.push_back({"recurrent_fwd", [&] { recurrent_forward(p, in, o.ptr(), ht.ptr()); }, 0,
                        own ? fwd_check : nullptr});
    variants.push_back({"recurrent_fwd_bwd",
                        [&] {
                          recurrent_forward(p, in, o.ptr(), ht.ptr());
                          recurrent_backward(p, in, dO, dht, grads);
                        },
                        0, own ? fwd_bwd_check : nullptr});
  }
  time_variants<T>(p, s, "cpu", variants, out);
}

// LocalPass's passes one by one, on the slice [T, 2T) of sequences 2T long (the file's
// header says why), and phases 1 + 3 with the WY factors kept or recomputed.
// The table's reference is the op from h_in on these T tokens (the slice ends its
// sequences: dht is the exit adjoint, lambda is not used); phase_prepare writes nothing
// of its own (phase_output reads its factors).
template <typename T>
void bench_phases(const GdnProblem& p, const Settings& s, const GdnInputView<T>& in, const T* dO,
                  const T* dht, std::map<std::string, double>& out) {
  GdnProblem whole = p;
  whole.T = 2 * p.T;
  const Shape state = {p.num_sequences(), p.Hv, p.K, p.V};
  Tensor<T> o({p.B, p.T, p.Hv, p.V}), ht(state), M({p.B, p.Hv, p.K, p.K}), U(state), h_in(state),
      lambda(state);
  Rng rng(3);
  for (T& x : h_in.data) x = T(0.5 * rng.normal());
  for (T& x : lambda.data) x = T(rng.normal());
  Tensor<T> dq({p.B, p.T, p.Hk, p.K}), dk(dq.shape), dv(o.shape), dg({p.B, p.T, p.Hv}),
      dbeta(dg.shape), dh0(state);
  GdnGradView<T> grads{dq.ptr(), dk.ptr(), dv.ptr(), dg.ptr(), dbeta.ptr(), dh0.ptr()};
  const GdnInputView<T> slice{in.q, in.k, in.v, in.g, in.beta, nullptr};  // continues: no h0
  LocalPass<T, Host> pass(whole, p.T, whole.T, slice);
  const ChunkFlops f = chunk_flops(p);
  std::function<double()> transition_check, output_check, backward_check, cp_fwd_check;
  app::GdnReference ref;
  if (s.table) {
    ref = app::gdn_reference(p, in, h_in.ptr(), dO, dht, p.T <= s.skip_recurrent_above);
    transition_check = [&] {  // h_out = M h_in + U against the reference's final state
      std::vector<double> h(ref.ht.size());
      const std::size_t K = std::size_t(p.K), V = std::size_t(p.V);
      for (std::size_t bh = 0; bh < std::size_t(p.B) * p.Hv; ++bh)
        for (std::size_t i = 0; i < K; ++i)
          for (std::size_t j = 0; j < V; ++j) {
            double x = double(U.data[(bh * K + i) * V + j]);
            for (std::size_t l = 0; l < K; ++l)
              x += double(M.data[(bh * K + i) * K + l]) * double(h_in.data[(bh * K + l) * V + j]);
            h[(bh * K + i) * V + j] = x;
          }
      return app::rel_l2_error(h, ref.ht);
    };
    output_check = [&] { return app::outputs_error(ref, o.ptr(), ht.ptr()); };
    backward_check = [&] { return app::grads_error(ref, grads, false); };
    cp_fwd_check = [&] { return std::max(transition_check(), output_check()); };
  }
  // In order: each pass needs the one before it (prepare: the factors; output: the chunk
  // entry states for backward); the two cp_fwd variants reset the pass and come last.
  const Variants variants = {
      {"phase_prepare", [&] { pass.prepare(); }, f.prepare},
      {"phase_transition", [&] { pass.transition(M.ptr(), U.ptr()); }, f.transition,
       transition_check},
      {"phase_output", [&] { pass.output(h_in.ptr(), o.ptr(), ht.ptr()); }, f.output, output_check},
      {"phase_backward", [&] { pass.backward(lambda.ptr(), dO, dht, grads); }, f.backward,
       backward_check},
      {"cp_fwd_reuse",
       [&] {
         pass.reset(whole, p.T, whole.T, slice);
         pass.prepare();
         pass.transition(M.ptr(), U.ptr());
         pass.output(h_in.ptr(), o.ptr(), ht.ptr());
       },
       f.prepare + f.transition + f.output, cp_fwd_check},
      {"cp_fwd_recompute",
       [&] {
         pass.reset(whole, p.T, whole.T, slice);
         pass.transition(M.ptr(), U.ptr());
         pass.output(h_in.ptr(), o.ptr(), ht.ptr());
       },
       2 * f.prepare + f.transition + f.output, cp_fwd_check},
  };
  time_variants<T>(p, s, "cpu", variants, out);
}

// --bytes: one shape's table of gdn/byte_count.h, in GB (1e9 bytes).
void print_bytes(const GdnProblem& p, int sms) {
  std::cout << fmt::format(
      "# bf16 op forward + backward at {},{},{},{},{},{} (C = {}, l2norm {}, "
      "{} SMs): GB per kernel\n",
      p.B, p.T, p.Hk, p.Hv, p.K, p.V, p.chunk_size, p.l2norm_qk ? "on" : "off", sms);
  auto line = [](const std::string& name, double read, double written, double reread) {
    std::cout << fmt::format("{:<46} {:>8.3f} {:>8.3f} {:>8.3f} {:>8.3f}\n", name, read / 1e9,
                             written / 1e9, (read + written) / 1e9, reread / 1e9);
  };
  std::cout << fmt::format("{:<46} {:>8} {:>8} {:>8} {:>8}\n", "kernel", "read", "written", "total",
                           "reread");
  double read = 0, written = 0, reread = 0;
  for (const KernelBytes& k : bf16_op_bytes(p, sms)) {
    line(k.kernel, k.read, k.written, k.reread);
    read += k.read, written += k.written, reread += k.reread;
  }
  line("sum", read, written, reread);
}

#if GDN_HAVE_CUDA
// The bf16 storage mode on the GPU (ChunkedGdnBf16<Cuda>: q, k, v, beta, o and dO in bf16,
// as fla's chunk_gated_delta_rule is timed), with f32 runs only. Its backward has no dht:
// the table's reference is made again without it.
void bench_cuda_bf16(const GdnProblem& p, const Settings& s, const GdnInputs<float>& d,
                     const Tensor<float>& dO_h, std::map<std::string, double>& out) {
  auto up16 = [](const Tensor<float>& t) {
    std::vector<Bf16> h(t.data.size());
    ops::to_bf16(Host{}, t.ptr(), std::int64_t(h.size()), h.data());
    return to_device<Cuda>(h.data(), h.size());
  };
  auto up = [](const Tensor<float>& t) { return to_device<Cuda>(t.ptr(), t.data.size()); };
  const DeviceBuffer<Bf16> q = up16(d.q), k = up16(d.k), v = up16(d.v), beta = up16(d.beta),
                           dO = up16(dO_h);
  const DeviceBuffer<float> g = up(d.g), h0 = up(d.h0);
  const Bf16Inputs in{q.data(),    k.data(), v.data(),
                      beta.data(), g.data(), d.h0.empty() ? nullptr : h0.data()};
  const std::size_t states = std::size_t(p.num_sequences()) * p.Hv * p.K * p.V;
  DeviceBuffer<Bf16> o(std::size_t(p.B) * p.T * p.Hv * p.V);
  DeviceBuffer<float> ht(states), dq(d.q.data.size()), dk(d.k.data.size()), dv(d.v.data.size()),
      dg(d.g.data.size()), dbeta(d.beta.data.size()), dh0(states);
  GdnGradView<float> grads{dq.data(), dk.data(), dv.data(), dg.data(), dbeta.data(), dh0.data()};
  Cuda::synchronize();
  const ChunkFlops f = chunk_flops(p);
  // bf16 inputs against the fp64 op on the unrounded ones: within 1e-2 (docs/gpu.md),
  // 3e-2 as tests/gpu/test_cuda_bf16.cpp.
  std::function<double()> fwd_check, fwd_bwd_check;
  app::GdnReference ref;
  if (s.table) {
    const std::vector<float> no_dht(states, 0.0f);
    ref = app::gdn_reference(p, d.view(), d.h0.ptr(), dO_h.ptr(), no_dht.data(),
                             p.T <= s.skip_recurrent_above);
    fwd_check = [&] {
      std::vector<float> o32;
      for (const Bf16 x : to_host<Cuda>(o)) o32.push_back(to_float(x));
      return app::outputs_error(ref, o32.data(), to_host<Cuda>(ht).data());
    };
    fwd_bwd_check = [&] {
      std::vector<float> hq = to_host<Cuda>(dq), hk = to_host<Cuda>(dk), hv = to_host<Cuda>(dv),
                         hg = to_host<Cuda>(dg), hb = to_host<Cuda>(dbeta),
                         hh0 = to_host<Cuda>(dh0);
      const GdnGradView<float> g{hq.data(), hk.data(), hv.data(), hg.data(), hb.data(), hh0.data()};
      return std::max(fwd_check(), app::grads_error(ref, g, true));
    };
  }
  const Variants variants = {
      {"cuda_chunked_bf16_fwd",
       [&] {
         ChunkedGdnBf16<Cuda>(p, in).forward(o.data(), ht.data());
         Cuda::synchronize();
       },
       f.forward(), fwd_check, 3e-2},
      {"cuda_chunked_bf16_fwd_bwd",
       [&] {
         ChunkedGdnBf16<Cuda> op(p, in);
         op.forward(o.data(), ht.data());
         op.backward(dO.data(), nullptr, grads);
         Cuda::synchronize();
       },
       f.forward_backward(), fwd_bwd_check, 3e-2},
  };
  time_variants<float>(p, s, "cuda", variants, out);
}

// LocalPass's passes on the GPU one by one over the whole sequence, each timed by CUDA
// events (the kernels' time, no launch overhead or sync): prepare, transition (CP phase 1),
// output (phase 3: the state walk and the outputs), adjoint (backward phase 1), backward
// (the adjoint walk and every chunk's backward). With bf16, inside a bf16 autocast scope:
// the bf16 mode's kernels. The rows check nothing of their own (the op's rows do).
template <typename T>
void bench_cuda_passes(const GdnProblem& p, const Settings& s, const GdnInputView<T>& in,
                       const T* dO, const T* dht, bool bf16, std::map<std::string, double>& out) {
  const std::size_t KV = std::size_t(p.K) * p.V, BH = std::size_t(p.B) * p.Hv;
  const std::size_t states = std::size_t(p.num_sequences()) * KV * p.Hv;
  DeviceBuffer<T> o(BH * p.T * p.V), ht(states), M(BH * p.K * p.K), U(BH * KV), D(BH * KV),
      h_in(BH * KV), lambda(BH * KV), dq(std::size_t(p.B) * p.T * p.Hk * p.K), dk(dq.size()),
      dv(o.size()), dg(BH * p.T), dbeta(dg.size()), dh0(states);
  Cuda::fill(h_in.data(), h_in.size(), T(0));
  Cuda::fill(lambda.data(), lambda.size(), T(0));
  GdnGradView<T> grads{dq.data(), dk.data(),    dv.data(),
                       dg.data(), dbeta.data(), in.h0 ? dh0.data() : nullptr};
  GdnProblem pp = p;
  pp.precision = precision_of(bf16);
  LocalPass<T, Cuda> pass(pp, 0, p.T, in);
  const ChunkFlops f = chunk_flops(p);
  const std::string tag = bf16 ? "cuda_bf16_pass_" : "cuda_pass_";
  // In order: each pass reads what the one before it kept (the factors, the chunk states).
  Variants variants = {
      {tag + "prepare", [&] { pass.prepare(); }, f.prepare},
      {tag + "transition", [&] { pass.transition(M.data(), U.data()); }, f.transition},
      {tag + "output", [&] { pass.output(h_in.data(), o.data(), ht.data()); }, f.output},
      {tag + "adjoint", [&] { pass.adjoint(dO, dht, D.data()); }, f.adjoint},
      {tag + "backward", [&] { pass.backward(lambda.data(), dO, dht, grads); }, f.backward},
  };
  for (Variant& v : variants) v.events = true;
  time_variants<T>(p, s, "cuda", variants, out);
}

// The CUDA variants: ChunkedGdn<T, Cuda> on inputs uploaded here, outside the timed region.
// Like the CPU ones they include the constructor (device allocations); each run ends with
// a device sync.
template <typename T>
void bench_cuda(const GdnProblem& p, const Settings& s, const GdnInputs<T>& d,
                const Tensor<T>& dO_h, const Tensor<T>& dht_h, const app::GdnReference* ref,
                std::map<std::string, double>& out) {
  auto up = [](const Tensor<T>& t) { return to_device<Cuda>(t.ptr(), t.data.size()); };
  const DeviceBuffer<T> q = up(d.q), k = up(d.k), v = up(d.v), g = up(d.g), beta = up(d.beta),
                        h0 = up(d.h0), dO = up(dO_h), dht = up(dht_h);
  const GdnInputView<T> in{q.data(), k.data(),    v.data(),
                           g.data(), beta.data(), d.h0.empty() ? nullptr : h0.data()};
  const std::size_t states = std::size_t(p.num_sequences()) * p.Hv * p.K * p.V;
  DeviceBuffer<T> o(std::size_t(p.B) * p.T * p.Hv * p.V), ht(states);
  DeviceBuffer<T> dq(d.q.data.size()), dk(d.k.data.size()), dv(d.v.data.size()),
      dg(d.g.data.size()), dbeta(d.beta.data.size()), dh0(states);
  GdnGradView<T> grads{dq.data(), dk.data(), dv.data(), dg.data(), dbeta.data(), dh0.data()};
  Cuda::synchronize();

  const ChunkFlops f = chunk_flops(p);
  // TF32 GEMMs (--cuda-tf32) are about 1e-3 relative (docs/gpu.md).
  const double tol = std::is_same_v<T, float> && pass::cuda_tf32() ? 1e-2 : 0;
  std::function<double()> fwd_check, fwd_bwd_check;
  if (ref) {
    fwd_check = [&] {
      return app::outputs_error(*ref, to_host<Cuda>(o).data(), to_host<Cuda>(ht).data());
    };
    fwd_bwd_check = [&] {
      std::vector<T> hq = to_host<Cuda>(dq), hk = to_host<Cuda>(dk), hv = to_host<Cuda>(dv),
                     hg = to_host<Cuda>(dg), hb = to_host<Cuda>(dbeta), hh0 = to_host<Cuda>(dh0);
      const GdnGradView<T> g{hq.data(), hk.data(), hv.data(), hg.data(), hb.data(), hh0.data()};
      return std::max(fwd_check(), app::grads_error(*ref, g, true));
    };
  }
  const Variants variants = {
      {"cuda_chunked_fwd",
       [&] {
         ChunkedGdn<T, Cuda>(p, in).forward(o.data(), ht.data());
         Cuda::synchronize();
       },
       f.forward(), fwd_check, tol},
      {"cuda_chunked_fwd_bwd",
       [&] {
         ChunkedGdn<T, Cuda> op(p, in);
         op.forward(o.data(), ht.data());
         op.backward(dO.data(), dht.data(), grads);
         Cuda::synchronize();
       },
       f.forward_backward(), fwd_bwd_check, tol},
  };
  time_variants<T>(p, s, "cuda", variants, out);
  if constexpr (std::is_same_v<T, float>) bench_cuda_bf16(p, s, d, dO_h, out);
  bench_cuda_passes<T>(p, s, in, dO.data(), dht.data(), /*bf16=*/false, out);
  if constexpr (std::is_same_v<T, float>)
    bench_cuda_passes<T>(p, s, in, dO.data(), dht.data(), /*bf16=*/true, out);
}
#endif

// Times every variant of the chosen devices at one shape; returns the medians by name.
template <typename T>
std::map<std::string, double> bench_shape(const GdnProblem& p, const Settings& s) {
  const GdnInputs<T> d = random_gdn_inputs<T>(p, /*seed=*/1, /*with_h0=*/true);
  const Shape state = {p.num_sequences(), p.Hv, p.K, p.V};
  Rng rng(2);
  Tensor<T> dO({p.B, p.T, p.Hv, p.V}), dht(state);
  for (T& x : dO.data) x = T(rng.normal());
  for (T& x : dht.data) x = T(rng.normal());
  std::map<std::string, double> out;
  std::optional<app::GdnReference> ref;  // the table's
  if (s.table)
    ref = app::gdn_reference(p, d.view(), d.h0.ptr(), dO.ptr(), dht.ptr(),
                             p.T <= s.skip_recurrent_above);
  const app::GdnReference* r = ref ? &*ref : nullptr;
  if (s.cpu) bench_cpu<T>(p, s, d.view(), dO.ptr(), dht.ptr(), r, out);
  if (s.cpu && s.phases) bench_phases<T>(p, s, d.view(), dO.ptr(), dht.ptr(), out);
#if GDN_HAVE_CUDA
  if (s.cuda) bench_cuda<T>(p, s, d, dO, dht, r, out);
#endif
  return out;
}

// --device cpu|cuda|all into s.cpu, s.cuda. Returns a warning when `all` finds no GPU
// (the CPU is still timed); `cuda` without a GPU is an error.
std::string resolve_devices(const std::string& flag, Settings& s) {
  GDN_CHECK(flag == "cpu" || flag == "cuda" || flag == "all", "--device ", flag,
            " is not known: expected cpu, cuda or all");
  s.cpu = flag != "cuda";
  s.cuda = false;
  if (flag == "cpu") return {};
  std::string why;
#if GDN_HAVE_CUDA
  s.cuda = visible_gpu_count(&why) > 0;
#else
  why = "this build has no CUDA path (nvcc or NCCL was not found when it was configured)";
#endif
  if (s.cuda) return {};
  GDN_CHECK(flag == "all", "--device cuda: no GPU visible (", why,
            "); use --device cpu or --device all");
  return "no GPU visible: " + why + "; timing the CPU only";
}

cxxopts::Options make_options() {
  cxxopts::Options o(
      "gdn_bench",
      "Times the chunked gated delta rule (forward; forward+backward) against the "
      "token-by-token recurrence\nat a few shapes in one run, on the CPU and (--device cuda|all) "
      "the GPU. Prints the CPU's FMA peak\n(measured first, in --dtype, by each thread's CPU "
      "time: one thread, then all at once), the GEMM\nceiling (the best rate of a "
      "--ceiling-size square GEMM, ours and OpenBLAS's when built with it),\na table row per "
      "(shape, variant) with the median of --reps runs, for the chunked variants\nGFLOP/s and "
      "percent of that peak, and the error against the op in fp64 (exit 1 when one is\nbeyond "
      "its tolerance), then the ratios recurrent / chunked, CPU / CUDA and WY recompute /\n"
      "reuse. --json: JSON lines instead (with the percent of the ceiling; no check). Threads: "
      "OMP_NUM_THREADS.\n\n"
      "FLOPs per chunk of C rows (multiply-add = 2, triangles count their nonzero half, matrix\n"
      "products only), times B Hv ceil(T / C) chunks:\n"
      "  prepare = 3 C^2 K + C^2 V + C^3/3   output = 6 C K V + C^2 V   "
      "state = 4 C K^2 + 4 C K V\n"
      "  backward = prepare + 14 C K V + 4 C^2 V + 6 C^2 K\n"
      "  forward = prepare + output;  forward + backward = forward + backward\n\n"
      "--phases times LocalPass's passes one by one on a CP rank's slice ([T, 2T) of sequences "
      "2T long):\nphase_prepare, phase_transition (CP phase 1), phase_output (phase 3), "
      "phase_backward; then phases 1 + 3\nwith the WY factors kept (cp_fwd_reuse, what CP "
      "does) or made again by each pass (cp_fwd_recompute).");
  o.add_options()("shapes", "shapes as 'B,T,Hk,Hv,K,V;...'",
                  cxxopts::value<std::string>()->default_value(
                      "1,1024,2,4,64,64;1,4096,2,4,64,64;1,16384,2,4,64,64"))(
      "dtype", "f32 or f64", cxxopts::value<std::string>()->default_value("f32"))(
      "device",
      "cpu, cuda (the chunked op on the GPU only) or all (both; the CPU only, with a warning "
      "line, when no GPU is visible)",
      cxxopts::value<std::string>()->default_value("cpu"))(
      "cuda-tf32",
      "the CUDA op's fp32 chunk GEMMs on TF32 tensor cores (gdn_train --cuda-tf32; its rows "
      "are checked to 1e-2)")(
      "chunk-size", "chunk size of the chunked op: a power of two in [16, 128]",
      cxxopts::value<int>()->default_value(std::to_string(kDefaultChunkSize)))(
      "reps", "timed runs per chunked variant (the median is reported)",
      cxxopts::value<int>()->default_value("5"))(
      "cpu-reps", "timed runs per CPU chunked variant (default: --reps)", cxxopts::value<int>())(
      "recurrent-reps", "timed runs per recurrent variant (it is slow at large T)",
      cxxopts::value<int>()->default_value("3"))("warmup",
                                                 "untimed runs before timing each variant",
                                                 cxxopts::value<int>()->default_value("1"))(
      "cpu-warmup", "untimed runs before each CPU chunked variant (default: --warmup)",
      cxxopts::value<int>())("skip-recurrent-above",
                             "skip the recurrence for shapes with T above this",
                             cxxopts::value<std::int64_t>()->default_value("16384"))(
      "phases", "time the CPU passes one by one and WY reuse vs recompute (--phases=false: off)",
      cxxopts::value<bool>()->default_value("true"))(
      "peak-seconds", "seconds of the FMA peak microbenchmark",
      cxxopts::value<double>()->default_value("0.3"))(
      "ceiling-size", "n of the n x n x n GEMMs of the ceiling line (0: skip it)",
      cxxopts::value<int>()->default_value("1024"))(
      "ceiling-reps", "timed runs per ceiling GEMM (the fastest counts)",
      cxxopts::value<int>()->default_value("3"))(
      "json", "JSON lines instead of the table (no check against the fp64 reference)")(
      "variants",
      "run only the variants whose whole name matches this regular expression (e.g. "
      "'cuda_chunked_bf16_fwd_bwd', for a profiler); the ratios need both sides",
      cxxopts::value<std::string>()->default_value(".*"))(
      "l2norm-qk",
      "L2-normalise q and k inside the op (as Qwen3-Next does, and fla and FlashQLA with "
      "use_qk_l2norm_in_kernel)")(
      "bytes",
      "print, per shape, the global-memory bytes each kernel of the bf16 op's forward + "
      "backward on CUDA reads and writes (counted from the kernels' code, gdn/byte_count.h), "
      "and exit; no GPU needed")(
      "sms", "with --bytes: the GPU's multiprocessors (they set the walks' column width)",
      cxxopts::value<int>()->default_value("132"))("h,help", "print this help");
  return o;
}

// What the flags ask for beside Settings.
struct Flags {
  DType dtype = DType::f32;
  double peak_seconds = 0.3;
  int ceiling_size = 1024, ceiling_reps = 3;
  std::vector<GdnProblem> shapes;
  bool as_json = false;
};

// Reads the flags into s and the returned Flags; throws naming a bad one.
Flags read_flags(const cxxopts::ParseResult& res, Settings& s) {
  GDN_CHECK(res.unmatched().empty(), "unexpected argument '", res.unmatched().front(), "'");
  Flags f;
  s.chunk_size = res["chunk-size"].as<int>();
  s.reps = res["reps"].as<int>();
  s.recurrent_reps = res["recurrent-reps"].as<int>();
  s.warmup = res["warmup"].as<int>();
  s.cpu_reps = res.count("cpu-reps") ? res["cpu-reps"].as<int>() : s.reps;
  s.cpu_warmup = res.count("cpu-warmup") ? res["cpu-warmup"].as<int>() : s.warmup;
  s.skip_recurrent_above = res["skip-recurrent-above"].as<std::int64_t>();
  s.phases = res["phases"].as<bool>();
  try {
    s.variants = std::regex(res["variants"].as<std::string>());
  } catch (const std::regex_error& e) {
    GDN_CHECK(false, "--variants '", res["variants"].as<std::string>(),
              "': not a regular expression (", e.what(), ")");
  }
  f.peak_seconds = res["peak-seconds"].as<double>();
  GDN_CHECK(f.peak_seconds > 0, "--peak-seconds must be > 0");
  f.ceiling_size = res["ceiling-size"].as<int>();
  f.ceiling_reps = res["ceiling-reps"].as<int>();
  GDN_CHECK(f.ceiling_size >= 0 && f.ceiling_size <= 8192, "--ceiling-size ", f.ceiling_size,
            ": expected 0 (skip) to 8192");
  GDN_CHECK(f.ceiling_reps >= 1, "--ceiling-reps ", f.ceiling_reps, ": expected >= 1");
  GDN_CHECK(
      s.reps >= 1 && s.cpu_reps >= 1 && s.recurrent_reps >= 1 && s.warmup >= 0 && s.cpu_warmup >= 0,
      "--reps, --cpu-reps and --recurrent-reps must be >= 1, --warmup and --cpu-warmup "
      ">= 0");
  f.dtype = parse_real_dtype(res["dtype"].as<std::string>(), "--dtype");
  f.shapes = app::parse_gdn_shapes(res["shapes"].as<std::string>(), s.chunk_size);
  for (GdnProblem& p : f.shapes) p.l2norm_qk = res.count("l2norm-qk") > 0;
  f.as_json = res.count("json") > 0;
  return f;
}

// Measures the FMA peak and prints it with the CPU and the build's ISA.
la::FmaPeak report_peak(const Flags& f, int chunk_size) {
  // The peak in the same run as the timings, on the same threads, so that the percentages
  // compare like with like on a machine whose clock or neighbours vary.
  const la::FmaPeak peak = f.dtype == DType::f64 ? la::measure_fma_peak<double>(f.peak_seconds)
                                                 : la::measure_fma_peak<float>(f.peak_seconds);
  // gflops_wall below gflops: neighbours held the cores; all / one thread well below the
  // thread count: the threads share a core's FMA units (SMT siblings on the host).
  // Which CPU, the vector ISA this build's host code was compiled for and the GEMM path it
  // runs (gemm_path.h), beside every figure.
  const std::string cpu = cpu_features().describe(),
                    isa = compiled_isa() + (compiled_native() ? " (-march=native)" : "") +
                          ", GEMM path " + la::gemm_path_name(la::gemm_path());
  if (!f.as_json)
    std::cout << fmt::format(
                     "# gdn_bench {}, chunk size {}, {} threads; FMA peak {:.1f} GFLOP/s "
                     "({:.1f} one thread, {:.1f} by wall time)\n# CPU {}; compiled for {}",
                     dtype_name(f.dtype), chunk_size, omp_get_max_threads(), peak.gflops,
                     peak.gflops_one, peak.gflops_wall, cpu, isa)
              << std::endl;
  else
    std::cout << json{{"fma_peak",
                       {{"dtype", dtype_name(f.dtype)},
                        {"cpu", cpu},
                        {"compiled_isa", isa},
                        {"gflops", peak.gflops},
                        {"gflops_median", peak.gflops_median},
                        {"gflops_wall", peak.gflops_wall},
                        {"gflops_one_thread", peak.gflops_one},
                        {"all_over_one_thread", peak.gflops / peak.gflops_one},
                        {"threads", peak.threads},
                        {"pinned", peak.pinned},
                        {"lanes", peak.lanes},
                        {"windows", peak.windows},
                        {"window_s", peak.window_seconds}}}}
                     .dump()
              << std::endl;
  return peak;
}

// Measures and prints the GEMM ceiling; returns its best rate (ours or the library's).
double report_ceiling(const Flags& f, const la::FmaPeak& peak) {
  const bench::GemmCeiling c =
      f.dtype == DType::f64 ? bench::measure_gemm_ceiling<double>(f.ceiling_size, f.ceiling_reps)
                            : bench::measure_gemm_ceiling<float>(f.ceiling_size, f.ceiling_reps);
  json line = {{"n", c.n},
               {"dtype", dtype_name(f.dtype)},
               {"threads", omp_get_max_threads()},
               {"ours_gflops", c.ours.gflops},
               {"ours_ms", c.ours.ms},
               {"ours_gflops_cpu", c.ours.gflops_cpu},
               {"ours_pct_of_peak", 100 * c.ours.gflops / peak.gflops}};
  if (c.blas.gflops > 0) {
    line["blas"] = c.blas_name;
    line["blas_threads"] = c.blas_threads;
    line["blas_gflops"] = c.blas.gflops;
    line["blas_ms"] = c.blas.ms;
    line["blas_gflops_cpu"] = c.blas.gflops_cpu;
    line["blas_pct_of_peak"] = 100 * c.blas.gflops / peak.gflops;
    line["blas_rel_diff"] = c.blas_rel_diff;
  } else {
    line["blas"] = nullptr;  // this build found no OpenBLAS (scripts/setup.sh installs it)
  }
  line["ceiling_gflops"] = c.best();
  if (f.as_json)
    std::cout << json{{"gemm_ceiling", line}}.dump() << std::endl;
  else
    std::cout << fmt::format("# GEMM ceiling {}^3: {:.1f} GFLOP/s ours{}", c.n, c.ours.gflops,
                             c.blas.gflops > 0
                                 ? fmt::format(", {:.1f} {}", c.blas.gflops, c.blas_name)
                                 : std::string())
              << std::endl;
  return c.best();
}

// Each shape's ratios: recurrent / chunked, CPU / CUDA, WY recompute / reuse.
struct Ratios {
  json recurrent = json::array(), device = json::array(), wy = json::array();
};

// Times every shape (bench_shape) and returns the ratios of their medians.
Ratios bench_shapes(const Flags& f, const Settings& s) {
  Ratios r;
  for (const auto& p : f.shapes) {
    const auto ms = f.dtype == DType::f64 ? bench_shape<double>(p, s) : bench_shape<float>(p, s);
    if (ms.count("recurrent_fwd"))
      r.recurrent.push_back({{"shape", shape_json(p)},
                             {"fwd", ms.at("recurrent_fwd") / ms.at("chunked_fwd")},
                             {"fwd_bwd", ms.at("recurrent_fwd_bwd") / ms.at("chunked_fwd_bwd")}});
    if (ms.count("chunked_fwd") && ms.count("cuda_chunked_fwd"))
      r.device.push_back({{"shape", shape_json(p)},
                          {"fwd", ms.at("chunked_fwd") / ms.at("cuda_chunked_fwd")},
                          {"fwd_bwd", ms.at("chunked_fwd_bwd") / ms.at("cuda_chunked_fwd_bwd")}});
    if (ms.count("cp_fwd_reuse"))
      r.wy.push_back({{"shape", shape_json(p)},
                      {"cp_fwd", ms.at("cp_fwd_recompute") / ms.at("cp_fwd_reuse")}});
  }
  return r;
}

// Prints the ratios: one JSON line, or the table's notes; returns the exit code (1 when a
// check of the table failed).
int report_ratios(const Flags& f, const Settings& s, const Ratios& r) {
  json ratios = {{"ratios_recurrent_over_chunked", r.recurrent}};
  if (s.cpu && s.cuda) ratios["ratios_cpu_over_cuda"] = r.device;
  if (s.cpu && s.phases) ratios["ratios_wy_recompute_over_reuse"] = r.wy;
  ratios["fma_peak_gflops"] = s.peak_gflops;
  if (s.ceiling_gflops > 0) ratios["gemm_ceiling_gflops"] = s.ceiling_gflops;
  ratios["dtype"] = dtype_name(f.dtype);
  if (f.as_json) {
    std::cout << ratios.dump() << std::endl;
    return 0;
  }
  std::vector<std::string> notes = {
      fmt::format(
          "check: rel L2 against the op in fp64 on the same inputs (the recurrence; the "
          "chunked op at T > {}), the largest over o, ht and the gradients; tolerance {:.0e}{}",
          s.skip_recurrent_above, s.tol, s.cuda ? " (cuda bf16 3e-2, TF32 1e-2)" : ""),
      "phases: the slice [T, 2T) from a random h_in; phase_transition checks M h_in + U; "
      "phase_prepare writes nothing of its own"};
  auto ratio_notes = [&](const char* what, const json& list) {
    for (const json& r : list) {
      const json& sh = r["shape"];
      std::string line = fmt::format("{} at {},{},{},{},{},{}:", what, sh["B"].get<int>(),
                                     sh["T"].get<std::int64_t>(), sh["Hk"].get<int>(),
                                     sh["Hv"].get<int>(), sh["K"].get<int>(), sh["V"].get<int>());
      for (const auto& [key, value] : r.items())
        if (key != "shape") line += fmt::format(" {} {:.2f}", key, value.get<double>());
      notes.push_back(line);
    }
  };
  ratio_notes("recurrent / chunked", r.recurrent);
  if (s.cpu && s.cuda) ratio_notes("cpu / cuda", r.device);
  if (s.cpu && s.phases) ratio_notes("wy recompute / reuse", r.wy);
  notes.insert(notes.end(), s.launch_notes->begin(), s.launch_notes->end());
  return s.table->exit_status(notes);
}

int run(int argc, char** argv) {
  app::apply_deprecated_env();  // the kernel choices of the old variables, warned
  cxxopts::Options o = make_options();
  auto res = o.parse(argc, argv);
  if (res.count("help")) {
    std::cout << o.help() << std::endl;
    return 0;
  }
  Settings s;
  const Flags f = read_flags(res, s);
  if (res.count("bytes")) {
    const int sms = res["sms"].as<int>();
    GDN_CHECK(sms >= 1, "--sms ", sms, ": expected >= 1");
    for (const GdnProblem& p : f.shapes) print_bytes(p, sms);
    return 0;
  }
  if (res.count("cuda-tf32")) pass::set_cuda_tf32(true);
  const std::string warning = resolve_devices(res["device"].as<std::string>(), s);
  if (!warning.empty())
    std::cout << (f.as_json ? json{{"warning", warning}}.dump() : "# warning: " + warning)
              << std::endl;
  const la::FmaPeak peak = report_peak(f, s.chunk_size);
  s.peak_gflops = peak.gflops;
  if (f.ceiling_size > 0) s.ceiling_gflops = report_ceiling(f, peak);
  std::vector<std::string> launch_notes;
  // The table: one row per (shape, variant); the ratios and the check's reference below it.
  std::optional<app::BenchTable> table =
      app::open_shape_table(f.as_json, {{"variant", "", 25}, {"device", "", 6}},
                            {{"rate", "(GFLOP/s)", 9}, {"peak", "(%)", 5}});
  if (table) {
    s.table = &*table;
    s.launch_notes = &launch_notes;
    s.tol = app::check_tolerance(f.dtype);
  }
  return report_ratios(f, s, bench_shapes(f, s));
}

}  // namespace

int main(int argc, char** argv) {
  return gdn::app::serial_main("gdn_bench", run, argc, argv);
}
