#include "cp/attention_cp.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "comm/call_sites.h"
#include "core/error.h"
#include "cp/shard.h"
#include "ops/attention/attention.h"
#include "ops/convert/convert.h"
#include "ops/moe/moe.h"
#include "runtime/devices.h"

namespace gdn {

namespace {

using i64 = std::int64_t;

// The K, V all-gather. In Precision::bf16 k and v are bf16 values (the mixer rounds them),
// so they travel as bf16, exactly: half the bytes.
template <typename T, typename Dev>
void all_gather_kv(const CpContext& cp, Precision p, const Buffer<Dev, T>& mine,
                   Buffer<Dev, T>& all) {
  if constexpr (std::is_same_v<T, float>) {
    if (p == Precision::bf16) {
      Buffer<Dev, Bf16> mine16(mine.size()), all16(all.size());
      ops::to_bf16(Dev{}, mine.data(), i64(mine.size()), mine16.data());
      cp.comm.all_gather(mine16.data(), all16.data(), mine16.size() * sizeof(Bf16),
                         attention_sites::kKvAllGather);
      ops::to_float(Dev{}, all16.data(), i64(all.size()), all.data());
      return;
    }
  }
  cp.comm.all_gather(mine.data(), all.data(), mine.size() * sizeof(T),
                     attention_sites::kKvAllGather);
}

}  // namespace

std::vector<Shard> attention_query_ranges(i64 T, int P, int r, bool balanced) {
  if (!balanced) return {contiguous_shard(T, P, r)};
  auto chunk = [&](int c) { return Shard{T * c / (2 * P), T * (c + 1) / (2 * P)}; };
  return {chunk(r), chunk(2 * P - 1 - r)};
}

std::vector<i64> attention_query_positions(i64 T, int P, int r, bool balanced) {
  std::vector<i64> pos;
  for (const Shard& s : attention_query_ranges(T, P, r, balanced))
    for (i64 t = s.begin; t < s.end; ++t) pos.push_back(t);
  return pos;
}

template <typename T, typename Dev>
void AttentionContextParallel<T, Dev>::redistribute(const CpContext& cp, const T* src, T* dst,
                                                    int width, bool to_queries,
                                                    const char* site) const {
  // Row (b, t) goes from the owner of t's shard to the rank whose query set holds t. Both
  // sides list the rows they exchange with each peer in the same order: b, then t.
  const int P = cp.comm.size();
  const int B = d_.B;
  const i64 Tg = cp.T_global, row = i64(width) * i64(sizeof(T));
  // pos_in_queries[t] for this rank's query set; shard s of every rank.
  std::vector<std::vector<i64>> query_pos(static_cast<std::size_t>(P));
  for (int s = 0; s < P; ++s) query_pos[std::size_t(s)] = attention_query_positions(Tg, P, s, true);
  // Per peer: the positions that move between my shard and its queries (to_queries), or
  // between my queries and its shard (back).
  std::vector<std::vector<i64>> send_pos(static_cast<std::size_t>(P)),
      recv_pos(static_cast<std::size_t>(P));
  const Shard mine = cp.shard;
  for (int s = 0; s < P; ++s) {
    const Shard theirs = contiguous_shard(Tg, P, s);
    for (i64 t : query_pos[std::size_t(s)])
      if (t >= mine.begin && t < mine.end)
        (to_queries ? send_pos : recv_pos)[std::size_t(s)].push_back(t);
    for (i64 t : qpos_)
      if (t >= theirs.begin && t < theirs.end)
        (to_queries ? recv_pos : send_pos)[std::size_t(s)].push_back(t);
  }
  // Row index of position t in the source and destination layouts.
  const i64 Tl = mine.size(), Tq = i64(qpos_.size());
  auto query_index = [&](i64 t) {
    return i64(std::lower_bound(qpos_.begin(), qpos_.end(), t) - qpos_.begin());
  };
  auto src_row = [&](i64 t) { return to_queries ? t - mine.begin : query_index(t); };
  auto dst_row = [&](i64 t) { return to_queries ? query_index(t) : t - mine.begin; };
  const i64 src_T = to_queries ? Tl : Tq, dst_T = to_queries ? Tq : Tl;
  std::vector<std::size_t> send_bytes(static_cast<std::size_t>(P)),
      send_off(static_cast<std::size_t>(P)), recv_bytes(static_cast<std::size_t>(P)),
      recv_off(static_cast<std::size_t>(P));
  std::size_t ns = 0, nr = 0;
  for (int s = 0; s < P; ++s) {
    send_off[std::size_t(s)] = ns;
    send_bytes[std::size_t(s)] =
        std::size_t(B) * send_pos[std::size_t(s)].size() * std::size_t(row);
    ns += send_bytes[std::size_t(s)];
    recv_off[std::size_t(s)] = nr;
    recv_bytes[std::size_t(s)] =
        std::size_t(B) * recv_pos[std::size_t(s)].size() * std::size_t(row);
    nr += recv_bytes[std::size_t(s)];
  }
  // Both moves are gathers of whole rows (on either device, one op each): send row n is
  // source row send_src[n]; destination row r is received row dst_src[r]. Every
  // destination row arrives exactly once (each position has one owner and one query rank).
  std::vector<i64> send_src, dst_src(static_cast<std::size_t>(i64(B) * dst_T), -1);
  i64 received = 0;
  for (int s = 0; s < P; ++s)
    for (int b = 0; b < B; ++b)
      for (i64 t : send_pos[std::size_t(s)]) send_src.push_back(i64(b) * src_T + src_row(t));
  for (int s = 0; s < P; ++s)
    for (int b = 0; b < B; ++b)
      for (i64 t : recv_pos[std::size_t(s)])
        dst_src[std::size_t(i64(b) * dst_T + dst_row(t))] = received++;
  GDN_CHECK(std::find(dst_src.begin(), dst_src.end(), i64(-1)) == dst_src.end(),
            "attention redistribute: a destination row receives nothing");
  const Buffer<Dev, i64> d_send_src = to_device<Dev>(send_src.data(), send_src.size());
  const Buffer<Dev, i64> d_dst_src = to_device<Dev>(dst_src.data(), dst_src.size());
  Buffer<Dev, T> send(ns / sizeof(T)), recv(nr / sizeof(T));
  ops::gather_rows(Dev{}, src, d_send_src.data(), i64(send_src.size()), width, send.data());
  cp.comm.all_to_all(send.data(), send_bytes, send_off, recv.data(), recv_bytes, recv_off, site);
  ops::gather_rows(Dev{}, static_cast<const T*>(recv.data()), d_dst_src.data(), i64(dst_src.size()),
                   width, dst);
}

template <typename T, typename Dev>
void AttentionContextParallel<T, Dev>::forward(const CpContext& cp, const AttentionDims& d,
                                               const T* q, const T* k, const T* v, T* o) {
  lifecycle_.forward();
  d_ = d;
  const int P = cp.comm.size(), B = d.B;
  const i64 Tg = cp.T_global, Tl = cp.tokens(), Tmax = (Tg + P - 1) / P;
  const i64 kv = i64(d.Hkv) * d.D, qw = i64(d.Hq) * d.D;
  balanced_ = cp.options.attention_layer_local && P > 1;
  qpos_ = attention_query_positions(Tg, P, cp.comm.rank(), balanced_);
  const i64 Tq = i64(qpos_.size());
  qpos_dev_ = to_device<Dev>(qpos_.data(), qpos_.size());
  std::vector<i64> kstart;  // packed documents: each query row's first key
  if (cp.documents) {
    GDN_CHECK(cp.documents->rows() == B && cp.documents->length() == Tg,
              "AttentionContextParallel: documents of ", cp.documents->rows(), " rows of ",
              cp.documents->length(), " tokens for a batch of ", B, " rows of ", Tg);
    kstart = cp.documents->starts(qpos_);
    kstart_dev_ = to_device<Dev>(kstart.data(), kstart.size());
  } else {
    kstart_dev_ = Buffer<Dev, i64>();
  }
  const i64* kstart_host = kstart.empty() ? nullptr : kstart.data();
  // Checked here, once, on the host copies: the op on a GPU does not look at them.
  ops::check_attention_positions(qpos_.data(), kstart_host, B, Tq, Tg);
  pairs_ = ops::attention_pairs(qpos_.data(), Tq, B, kstart_host);

  // 1. The whole sequence's K and V: each rank contributes [B, Tmax, 2, Hkv D] (its shard,
  // zero-padded), and the blocks are unpacked to [B, T, Hkv, D] by global position.
  T* k_all = k_all_.open(B * Tg * kv, d.precision);
  T* v_all = v_all_.open(B * Tg * kv, d.precision);
  if (P == 1) {
    Dev::copy(k_all, k, std::size_t(B * Tg * kv));
    Dev::copy(v_all, v, std::size_t(B * Tg * kv));
  } else {
    Buffer<Dev, T> mine(std::size_t(B * Tmax * 2 * kv)), all(std::size_t(P * B * Tmax * 2 * kv));
    for (int b = 0; b < B; ++b) {
      T* dst = mine.data() + i64(b) * Tmax * 2 * kv;
      Dev::copy_rows(dst, 2 * kv, k + i64(b) * Tl * kv, kv, kv, Tl);
      Dev::copy_rows(dst + kv, 2 * kv, v + i64(b) * Tl * kv, kv, kv, Tl);
    }
    all_gather_kv<T, Dev>(cp, d.precision, mine, all);
    for (int s = 0; s < P; ++s) {
      const Shard sh = contiguous_shard(Tg, P, s);
      for (int b = 0; b < B; ++b) {
        const T* src = all.data() + (i64(s) * B + b) * Tmax * 2 * kv;
        Dev::copy_rows(k_all + (i64(b) * Tg + sh.begin) * kv, kv, src, 2 * kv, kv, sh.size());
        Dev::copy_rows(v_all + (i64(b) * Tg + sh.begin) * kv, kv, src + kv, 2 * kv, kv, sh.size());
      }
    }
  }
  // 2. The query rows: this shard's, or the balanced set.
  lse_.resize(std::size_t(B * Tq * d.Hq));
  const T* q_view = q;
  T* o_view = o;
  q_in_ = q;
  o_in_ = o;
  if (balanced_) {
    redistribute(cp, q, q_.open(B * Tq * qw, d.precision), int(qw), true,
                 attention_sites::kQueryToBalanced);
    q_view = q_.values();
    o_view = o_.open(B * Tq * qw, d.precision);
  }
  ops::attention_forward(Dev{}, d.precision, q_view, k_all, v_all, qpos_dev_.data(), B, Tq, Tg,
                         d.Hq, d.Hkv, d.D, d.scale, o_view, lse_.data(), kstart_or_null());
  if (balanced_)
    redistribute(cp, o_.values(), o, int(qw), false, attention_sites::kOutputFromBalanced);
  for (Kept<T, Dev>* b : {&k_all_, &v_all_, &q_, &o_}) b->seal();
}

template <typename T, typename Dev>
void AttentionContextParallel<T, Dev>::backward(const CpContext& cp, const T* dO, T* dq, T* dk,
                                                T* dv) {
  lifecycle_.backward();
  const AttentionDims& d = d_;
  const int P = cp.comm.size(), B = d.B;
  const i64 Tg = cp.T_global, Tl = cp.tokens(), Tmax = (Tg + P - 1) / P;
  const i64 kv = i64(d.Hkv) * d.D, qw = i64(d.Hq) * d.D, Tq = i64(qpos_.size());
  // The balanced layout's own q and o, or the caller's, which must still hold the
  // forward's (the mixer keeps them).
  const T* q_view = balanced_ ? q_.view() : q_in_;
  const T* o_view = balanced_ ? o_.view() : o_in_;
  Buffer<Dev, T> dO_q, dq_q;
  const T* dO_view = dO;
  T* dq_view = dq;
  if (balanced_) {
    dO_q.resize(std::size_t(B * Tq * qw));
    dq_q.resize(std::size_t(B * Tq * qw));
    redistribute(cp, dO, dO_q.data(), int(qw), true, attention_sites::kDoutToBalanced);
    dO_view = dO_q.data();
    dq_view = dq_q.data();
  }
  Buffer<Dev, T> dk_all(std::size_t(B * Tg * kv)), dv_all(std::size_t(B * Tg * kv));
  ops::attention_backward(Dev{}, d.precision, q_view, k_all_.view(), v_all_.view(), o_view,
                          lse_.data(), dO_view, qpos_dev_.data(), B, Tq, Tg, d.Hq, d.Hkv, d.D,
                          d.scale, dq_view, dk_all.data(), dv_all.data(), kstart_or_null());
  for (Kept<T, Dev>* b : {&k_all_, &v_all_, &q_, &o_}) b->release_view();
  if (balanced_)
    redistribute(cp, dq_q.data(), dq, int(qw), false, attention_sites::kDqFromBalanced);
  // dK, dV of every position, summed over the ranks onto the position's owner.
  if (P == 1) {
    Dev::copy(dk, dk_all.data(), std::size_t(B * Tg * kv));
    Dev::copy(dv, dv_all.data(), std::size_t(B * Tg * kv));
    return;
  }
  Buffer<Dev, T> all(std::size_t(P * B * Tmax * 2 * kv)), mine(std::size_t(B * Tmax * 2 * kv));
  for (int s = 0; s < P; ++s) {
    const Shard sh = contiguous_shard(Tg, P, s);
    for (int b = 0; b < B; ++b) {
      T* dst = all.data() + (i64(s) * B + b) * Tmax * 2 * kv;
      Dev::copy_rows(dst, 2 * kv, dk_all.data() + (i64(b) * Tg + sh.begin) * kv, kv, kv, sh.size());
      Dev::copy_rows(dst + kv, 2 * kv, dv_all.data() + (i64(b) * Tg + sh.begin) * kv, kv, kv,
                     sh.size());
    }
  }
  cp.comm.reduce_scatter_sum(all.data(), mine.data(), mine.size(),
                             attention_sites::kDkvReduceScatter);
  for (int b = 0; b < B; ++b) {
    const T* src = mine.data() + i64(b) * Tmax * 2 * kv;
    Dev::copy_rows(dk + i64(b) * Tl * kv, kv, src, 2 * kv, kv, Tl);
    Dev::copy_rows(dv + i64(b) * Tl * kv, kv, src + kv, 2 * kv, kv, Tl);
  }
}

#define GDN_INSTANTIATE(T, Dev) template class AttentionContextParallel<T, Dev>;
GDN_FOR_EACH_DEVICE(GDN_INSTANTIATE)
#undef GDN_INSTANTIATE

}  // namespace gdn
