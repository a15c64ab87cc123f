// cudnn_attention.h on cuDNN: one graph per CudnnAttentionShape, THD layout with ragged
// offsets (every tensor read and written where it lies in [B, T, H, D]), padding mask from
// the segments' lengths, bottom-right causal alignment per segment.
//
// cuDNN is loaded at run time, on the first attention that asks for it
// (NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING: the frontend calls it through dlsym), not linked:
// a CPU run never maps its libraries (libcudnn and NVRTC, some 40 MiB of resident memory
// at start-up when linked), and a GPU machine without it runs the flash kernels, saying why.
#include <cudnn.h>
#include <cudnn_frontend.h>
#include <dlfcn.h>

#include <algorithm>
#include <climits>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/bf16.h"
#include "core/error.h"
#include "ops/attention/attention_segments.h"
#include "ops/attention/cudnn_attention.h"
#include "ops/convert/convert.h"
#include "ops/elementwise/elementwise.h"
#include "runtime/cuda_check.h"
#include "runtime/cuda_device.h"
#include "runtime/device_buffer.h"

namespace cudnn_frontend {
void* cudnn_dlhandle = nullptr;  // the frontend's shim looks cuDNN's symbols up here
}  // namespace cudnn_frontend

namespace gdn::ops {

namespace {

namespace fe = cudnn_frontend;

// "" once libcudnn is loaded (the first call loads it), else why it cannot be.
const std::string& cudnn_library() {
  static const std::string why = [] {
    for (const char* name : {"libcudnn.so.9", "libcudnn.so"}) {
      fe::cudnn_dlhandle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (fe::cudnn_dlhandle) return std::string();
    }
    const char* e = dlerror();
    return std::string("cannot load libcudnn.so.9: ") + (e ? e : "dlopen failed");
  }();
  return why;
}
using i64 = std::int64_t;
using Attr = fe::graph::Tensor_attributes;

// The graphs' tensor ids. Q, O, dO and dQ share one ragged offset tensor (the same rows of
// Hq D), K, V, dK and dV another (Hkv D), the statistics a third (Hq).
enum Uid : i64 {
  kQ = 1,
  kK,
  kV,
  kO,
  kStats,
  kDO,
  kDQ,
  kDK,
  kDV,
  kSeqQ,
  kSeqKv,
  kOffQ,
  kOffKv,
  kOffStats
};

cudnnHandle_t handle() {
  // One per process, on the legacy default stream as every op here; never destroyed (it
  // would outlive the CUDA context at exit).
  static cudnnHandle_t h = [] {
    cudnnHandle_t made = nullptr;
    const cudnnStatus_t st = fe::detail::create_handle(&made);
    GDN_CHECK(st == CUDNN_STATUS_SUCCESS, "cudnnCreate: ", fe::detail::get_error_string(st));
    return made;
  }();
  return h;
}

std::shared_ptr<Attr> index_tensor(fe::graph::Graph& g, const char* name, i64 uid, i64 n) {
  return g.tensor(Attr()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim({n, 1, 1, 1})
                      .set_stride({1, 1, 1, 1})
                      .set_data_type(fe::DataType_t::INT32));
}

// [S, H, T, width] over rows of H width elements, at ragged offsets.
std::shared_ptr<Attr> rows(fe::graph::Graph& g, const char* name, i64 uid, i64 S, i64 H, i64 T,
                           i64 width, const std::shared_ptr<Attr>& offsets) {
  return g.tensor(Attr()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim({S, H, T, width})
                      .set_stride({T * H * width, width, H * width, 1})
                      .set_ragged_offset(offsets));
}

void set_rows(const std::shared_ptr<Attr>& t, i64 uid, i64 S, i64 H, i64 T, i64 width,
              const std::shared_ptr<Attr>& offsets) {
  t->set_output(true)
      .set_uid(uid)
      .set_dim({S, H, T, width})
      .set_stride({T * H * width, width, H * width, 1})
      .set_ragged_offset(offsets);
}

struct Built {
  std::shared_ptr<fe::graph::Graph> graph;  // null: refused
  std::string why;
  i64 workspace = 0;
};

// "" once the graph has an execution plan, else the first step's refusal.
std::string build_plans(fe::graph::Graph& g) {
  const std::function<fe::error_t()> steps[] = {
      [&] { return g.validate(); }, [&] { return g.build_operation_graph(handle()); },
      [&] { return g.create_execution_plans({fe::HeurMode_t::A}); },
      [&] { return g.check_support(handle()); }, [&] { return g.build_plans(handle()); }};
  for (const auto& step : steps) {
    fe::error_t e = step();
    if (e.is_bad()) return e.get_message();
  }
  return "";
}

Built build(const CudnnAttentionShape& s) {
  if (!cudnn_library().empty()) return {nullptr, cudnn_library(), 0};
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  const i64 S = s.segments;
  const auto off_q = index_tensor(*g, "off_q", kOffQ, S + 1);
  const auto off_kv = index_tensor(*g, "off_kv", kOffKv, S + 1);
  const auto off_stats = index_tensor(*g, "off_stats", kOffStats, S + 1);
  const auto seq_q = index_tensor(*g, "seq_q", kSeqQ, S);
  const auto seq_kv = index_tensor(*g, "seq_kv", kSeqKv, S);
  const auto Q = rows(*g, "Q", kQ, S, s.Hq, s.Tq, s.D, off_q);
  const auto K = rows(*g, "K", kK, S, s.Hkv, s.Tk, s.D, off_kv);
  const auto V = rows(*g, "V", kV, S, s.Hkv, s.Tk, s.D, off_kv);
  if (!s.backward) {
    auto options = fe::graph::SDPA_attributes()
                       .set_name("sdpa")
                       .set_generate_stats(true)
                       .set_attn_scale(s.scale)
                       .set_padding_mask(true)
                       .set_seq_len_q(seq_q)
                       .set_seq_len_kv(seq_kv)
                       .set_causal_mask_bottom_right(true);
    auto [O, stats] = g->sdpa(Q, K, V, options);
    set_rows(O, kO, S, s.Hq, s.Tq, s.D, off_q);
    set_rows(stats, kStats, S, s.Hq, s.Tq, 1, off_stats);
    stats->set_data_type(fe::DataType_t::FLOAT);
  } else {
    const auto O = rows(*g, "O", kO, S, s.Hq, s.Tq, s.D, off_q);
    const auto dO = rows(*g, "dO", kDO, S, s.Hq, s.Tq, s.D, off_q);
    const auto stats = rows(*g, "stats", kStats, S, s.Hq, s.Tq, 1, off_stats);
    stats->set_data_type(fe::DataType_t::FLOAT);
    auto options = fe::graph::SDPA_backward_attributes()
                       .set_name("sdpa_backward")
                       .set_attn_scale(s.scale)
                       .set_padding_mask(true)
                       .set_seq_len_q(seq_q)
                       .set_seq_len_kv(seq_kv)
                       .set_causal_mask_bottom_right(true)
                       .set_deterministic_algorithm(true);  // the same bits every step
    auto [dQ, dK, dV] = g->sdpa_backward(Q, K, V, O, dO, stats, options);
    set_rows(dQ, kDQ, S, s.Hq, s.Tq, s.D, off_q);
    set_rows(dK, kDK, S, s.Hkv, s.Tk, s.D, off_kv);
    set_rows(dV, kDV, S, s.Hkv, s.Tk, s.D, off_kv);
  }
  Built b;
  b.why = build_plans(*g);
  if (!b.why.empty()) return b;
  fe::error_t e = g->get_workspace_size(b.workspace);
  if (e.is_bad()) {
    b.why = "workspace size: " + e.get_message();
    return b;
  }
  b.graph = g;
  return b;
}

// The graph of shape s, built on first use; null where cuDNN refused it (noted).
const Built& graph_of(const CudnnAttentionShape& s) {
  static std::map<CudnnAttentionShape, Built> graphs;
  auto it = graphs.find(s);
  if (it == graphs.end()) {
    Built b;
    try {  // the frontend throws where cuDNN's symbols or the handle cannot be had
      b = build(s);
    } catch (const std::exception& e) {
      b = {nullptr, e.what(), 0};
    }
    it = graphs.emplace(s, std::move(b)).first;
    if (!it->second.graph) note_cudnn_attention_refusal(s, it->second.why);
  }
  return it->second;
}

// A wave's index tensors in device memory (int32: cuDNN's ragged offsets), padded to the
// graph's capacity with empty segments.
struct WaveTables {
  DeviceBuffer<std::int32_t> seq_q, seq_kv, off_q, off_kv, off_stats;
};

WaveTables tables(const std::vector<AttentionSegment>& wave, i64 cap, i64 Tq, i64 Tk, int Hq,
                  int Hkv, int D) {
  const CudnnAttentionTables h = cudnn_attention_tables(wave, cap, Tq, Tk, Hq, Hkv, D);
  auto up = [](const std::vector<std::int32_t>& v) {
    DeviceBuffer<std::int32_t> d(v.size());
    GDN_CUDA_CHECK(
        cudaMemcpy(d.data(), v.data(), v.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice));
    return d;
  };
  return {up(h.seq_q), up(h.seq_kv), up(h.off_q), up(h.off_kv), up(h.off_stats)};
}

AttentionSegments segments_of(const i64* qpos, const i64* kstart, int B, i64 Tq) {
  std::vector<i64> pos(static_cast<std::size_t>(Tq)),
      ks(kstart ? static_cast<std::size_t>(B * Tq) : 0);
  GDN_CUDA_CHECK(cudaMemcpy(pos.data(), qpos, pos.size() * sizeof(i64), cudaMemcpyDeviceToHost));
  if (kstart)
    GDN_CUDA_CHECK(cudaMemcpy(ks.data(), kstart, ks.size() * sizeof(i64), cudaMemcpyDeviceToHost));
  return attention_segments(pos.data(), kstart ? ks.data() : nullptr, B, Tq);
}

DeviceBuffer<Bf16> narrowed(const float* x, i64 n) {
  DeviceBuffer<Bf16> b(static_cast<std::size_t>(n));
  to_bf16(Cuda{}, x, n, b.data());
  return b;
}

void run(const Built& b, std::unordered_map<i64, void*>& pack, const WaveTables& t) {
  pack[kSeqQ] = const_cast<std::int32_t*>(t.seq_q.data());
  pack[kSeqKv] = const_cast<std::int32_t*>(t.seq_kv.data());
  pack[kOffQ] = const_cast<std::int32_t*>(t.off_q.data());
  pack[kOffKv] = const_cast<std::int32_t*>(t.off_kv.data());
  pack[kOffStats] = const_cast<std::int32_t*>(t.off_stats.data());
  DeviceBuffer<std::int8_t> workspace(static_cast<std::size_t>(std::max<i64>(b.workspace, 1)));
  fe::error_t e = b.graph->execute(handle(), pack, workspace.data());
  GDN_CHECK(e.is_good(), "cudnn attention: execute: ", e.get_message());
}

}  // namespace

namespace {

// The widest wave: the graphs' capacity (forward and backward alike).
std::size_t widest(const AttentionSegments& segs) {
  std::size_t n = 0;
  for (const std::vector<AttentionSegment>& w : segs.waves) n = std::max(n, w.size());
  return n;
}

}  // namespace

bool cudnn_attention_forward(const float* q, const float* k, const float* v, const i64* qpos, int B,
                             i64 Tq, i64 Tk, int Hq, int Hkv, int D, double scale, float* o,
                             float* lse, const i64* kstart) {
  const i64 rows = i64(B) * Tq * Hq;
  if (rows == 0) return true;
  const AttentionSegments segs = segments_of(qpos, kstart, B, Tq);
  const CudnnAttentionShape shape =
      cudnn_attention_shape(false, B, Tq, Tk, Hq, Hkv, D, scale, widest(segs));
  const Built& built = graph_of(shape);
  if (!built.graph) return false;
  const i64 nq = rows * D, nk = i64(B) * Tk * Hkv * D;
  DeviceBuffer<Bf16> q16 = narrowed(q, nq), k16 = narrowed(k, nk), v16 = narrowed(v, nk),
                     o16(static_cast<std::size_t>(nq));
  // By wave, as the backward: within one the segments lie in order without overlap, as
  // packed sequences do; each wave writes its own query rows of o and the statistics.
  for (const std::vector<AttentionSegment>& wave : segs.waves) {
    std::unordered_map<i64, void*> pack = {
        {kQ, q16.data()}, {kK, k16.data()}, {kV, v16.data()}, {kO, o16.data()}, {kStats, lse}};
    run(built, pack, tables(wave, shape.segments, Tq, Tk, Hq, Hkv, D));
  }
  to_float(Cuda{}, o16.data(), nq, o);
  return true;
}

bool cudnn_attention_backward(const float* q, const float* k, const float* v, const float* o,
                              const float* lse, const float* dout, const i64* qpos, int B, i64 Tq,
                              i64 Tk, int Hq, int Hkv, int D, double scale, float* dq, float* dk,
                              float* dv, const i64* kstart) {
  const i64 nq = i64(B) * Tq * Hq * D, nk = i64(B) * Tk * Hkv * D;
  if (nq == 0) {
    if (dk) GDN_CUDA_CHECK(cudaMemset(dk, 0, std::size_t(nk) * sizeof(float)));
    if (dv) GDN_CUDA_CHECK(cudaMemset(dv, 0, std::size_t(nk) * sizeof(float)));
    return true;
  }
  const AttentionSegments segs = segments_of(qpos, kstart, B, Tq);
  const CudnnAttentionShape shape =
      cudnn_attention_shape(true, B, Tq, Tk, Hq, Hkv, D, scale, widest(segs));
  const Built& built = graph_of(shape);
  if (!built.graph) return false;
  DeviceBuffer<Bf16> q16 = narrowed(q, nq), k16 = narrowed(k, nk), v16 = narrowed(v, nk),
                     o16 = narrowed(o, nq), do16 = narrowed(dout, nq),
                     dq16(static_cast<std::size_t>(nq)), dk16(static_cast<std::size_t>(nk)),
                     dv16(static_cast<std::size_t>(nk));
  DeviceBuffer<float> part(static_cast<std::size_t>(nk));
  for (std::size_t w = 0; w < segs.waves.size(); ++w) {
    // A wave writes the keys its segments see, once each: the rest of dK, dV stay zero.
    GDN_CUDA_CHECK(cudaMemset(dk16.data(), 0, std::size_t(nk) * sizeof(Bf16)));
    GDN_CUDA_CHECK(cudaMemset(dv16.data(), 0, std::size_t(nk) * sizeof(Bf16)));
    std::unordered_map<i64, void*> pack = {
        {kQ, q16.data()},   {kK, k16.data()},   {kV, v16.data()},
        {kO, o16.data()},   {kDO, do16.data()}, {kStats, const_cast<float*>(lse)},
        {kDQ, dq16.data()}, {kDK, dk16.data()}, {kDV, dv16.data()}};
    run(built, pack, tables(segs.waves[w], shape.segments, Tq, Tk, Hq, Hkv, D));
    for (auto [d16, out] : {std::pair{&dk16, dk}, std::pair{&dv16, dv}}) {
      if (!out) continue;
      if (w == 0) {
        to_float(Cuda{}, d16->data(), nk, out);
      } else {
        to_float(Cuda{}, d16->data(), nk, part.data());
        add(Cuda{}, out, out, part.data(), nk);
      }
    }
  }
  if (dq) to_float(Cuda{}, dq16.data(), nq, dq);  // each query row written by its one wave
  return true;
}

}  // namespace gdn::ops
