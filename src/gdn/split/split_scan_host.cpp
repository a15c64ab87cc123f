#include <algorithm>
#include <cstddef>

#include "core/error.h"
#include "gdn/pairs/pair_algebra.h"
#include "gdn/split/split_scan.h"

namespace gdn {

namespace {

// Pairs held as n blocks of [BH] (A: K x K, B: K x V) in one buffer, in forward orientation.
template <typename T>
struct PairList {
  PairDims d;
  int n;
  std::vector<T> data;
  PairList(const PairDims& d_, int n_) : d(d_), n(n_), data(std::size_t(n) * d.pair_elems()) {}
  T* A(int j, int bh) { return data.data() + j * d.pair_elems() + std::size_t(bh) * d.K * d.K; }
  T* B(int j, int bh) {
    return data.data() + j * d.pair_elems() + d.a_elems() + std::size_t(bh) * d.K * d.V;
  }
};

// f's maps in forward orientation (A transposed once where f applies A^T).
template <typename T>
PairList<T> forward_pairs(const PiecePairs<T>& f, const PairDims& d) {
  PairList<T> p(d, f.size());
  const std::size_t KK = std::size_t(d.K) * d.K, KV = std::size_t(d.K) * d.V;
#pragma omp parallel for collapse(2) schedule(static)
  for (int j = 0; j < p.n; ++j)
    for (int bh = 0; bh < d.BH; ++bh) {
      const T* a = f.A[j] + bh * KK;
      if (f.transpose)
        pairs::transpose(a, d.K, p.A(j, bh));
      else
        std::copy_n(a, KK, p.A(j, bh));
      std::copy_n(f.B[j] + bh * KV, KV, p.B(j, bh));
    }
  return p;
}

// Hillis-Steele: after round dist, position j holds f_j o ... o f_{max(0, j - 2 dist + 1)};
// after ceil(log2 n) rounds, the inclusive prefix f_j o ... o f_0.
template <typename T>
PairList<T> inclusive_prefixes(const PiecePairs<T>& f, const PairDims& d) {
  PairList<T> cur = forward_pairs(f, d), next(d, cur.n);
  const std::size_t KK = std::size_t(d.K) * d.K, KV = std::size_t(d.K) * d.V;
  for (int dist = 1; dist < cur.n; dist *= 2) {
#pragma omp parallel for collapse(2) schedule(static)
    for (int j = 0; j < cur.n; ++j)
      for (int bh = 0; bh < d.BH; ++bh) {
        if (j >= dist) {
          pairs::compose(cur.A(j, bh), cur.B(j, bh), cur.A(j - dist, bh), cur.B(j - dist, bh), d.K,
                         d.V, next.A(j, bh), next.B(j, bh));
        } else {
          std::copy_n(cur.A(j, bh), KK, next.A(j, bh));
          std::copy_n(cur.B(j, bh), KV, next.B(j, bh));
        }
      }
    std::swap(cur.data, next.data);
  }
  return cur;
}

}  // namespace

template <typename T>
void scan_pieces(const PiecePairs<T>& f, const PairDims& d, bool log_depth, const T* x_in,
                 const std::vector<T*>& out) {
  GDN_CHECK(f.A.size() == f.B.size() && out.size() == f.A.size(), "scan_pieces: ", f.A.size(),
            " A blocks, ", f.B.size(), " B blocks, ", out.size(), " outputs");
  const int n = f.size(), K = d.K, V = d.V;
  const std::size_t KK = std::size_t(K) * K, KV = std::size_t(K) * V;
  if (n == 0) return;
  if (!log_depth) {
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < d.BH; ++bh) {
      std::vector<T> tmp(KV);
      for (int j = 0; j < n; ++j) {
        T* x = out[j] + bh * KV;
        if (j > 0)
          std::copy_n(out[j - 1] + bh * KV, KV, x);
        else if (x_in)
          std::copy_n(x_in + bh * KV, KV, x);
        else
          std::fill_n(x, KV, T(0));
        pairs::apply(f.transpose, f.A[j] + bh * KK, f.B[j] + bh * KV, K, V, x, tmp.data());
      }
    }
    return;
  }
  PairList<T> pre = inclusive_prefixes(f, d);
#pragma omp parallel for collapse(2) schedule(static)
  for (int j = 0; j < n; ++j)
    for (int bh = 0; bh < d.BH; ++bh) {
      T* x = out[j] + bh * KV;
      if (x_in) {
        std::vector<T> tmp(KV);
        std::copy_n(x_in + bh * KV, KV, x);
        pairs::apply(false, pre.A(j, bh), pre.B(j, bh), K, V, x, tmp.data());
      } else {
        std::copy_n(pre.B(j, bh), KV, x);  // from the zero state: the prefix's offset
      }
    }
}

template <typename T>
void fold_pieces(const PiecePairs<T>& f, const PairDims& d, bool log_depth, T* A, T* B) {
  GDN_CHECK(f.size() >= 1 && f.A.size() == f.B.size() && !f.transpose,
            "fold_pieces: expected at least one forward map, got ", f.A.size());
  const int K = d.K, V = d.V;
  const std::size_t KK = std::size_t(K) * K, KV = std::size_t(K) * V;
  PairList<T> cur = forward_pairs(f, d);
  if (!log_depth) {
#pragma omp parallel for schedule(static)
    for (int bh = 0; bh < d.BH; ++bh) {
      std::vector<T> a(KK), b(KV);
      for (int j = 1; j < cur.n; ++j) {  // cur[0] <- f_j o cur[0]
        pairs::compose(cur.A(j, bh), cur.B(j, bh), cur.A(0, bh), cur.B(0, bh), K, V, a.data(),
                       b.data());
        std::copy(a.begin(), a.end(), cur.A(0, bh));
        std::copy(b.begin(), b.end(), cur.B(0, bh));
      }
    }
  } else {
    // Level by level, pair 2i + 1 after pair 2i; an odd last one moves up unchanged.
    for (int n = cur.n; n > 1; n = (n + 1) / 2) {
      PairList<T> next(d, (n + 1) / 2);
#pragma omp parallel for collapse(2) schedule(static)
      for (int i = 0; i < next.n; ++i)
        for (int bh = 0; bh < d.BH; ++bh) {
          if (2 * i + 1 < n) {
            pairs::compose(cur.A(2 * i + 1, bh), cur.B(2 * i + 1, bh), cur.A(2 * i, bh),
                           cur.B(2 * i, bh), K, V, next.A(i, bh), next.B(i, bh));
          } else {
            std::copy_n(cur.A(2 * i, bh), KK, next.A(i, bh));
            std::copy_n(cur.B(2 * i, bh), KV, next.B(i, bh));
          }
        }
      cur = std::move(next);
    }
  }
  for (int bh = 0; bh < d.BH; ++bh) {
    std::copy_n(cur.A(0, bh), KK, A + bh * KK);
    std::copy_n(cur.B(0, bh), KV, B + bh * KV);
  }
}

#define GDN_INSTANTIATE(T)                                                         \
  template void scan_pieces(const PiecePairs<T>&, const PairDims&, bool, const T*, \
                            const std::vector<T*>&);                               \
  template void fold_pieces(const PiecePairs<T>&, const PairDims&, bool, T*, T*);
GDN_INSTANTIATE(float)
GDN_INSTANTIATE(double)
#undef GDN_INSTANTIATE

}  // namespace gdn
