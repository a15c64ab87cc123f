// The optional L2 norm of q and k in front of the chunk math (docs/design.md §2b), on any
// device: normalised copies live in this object's buffers; view() gives the tensors the
// chunk math should read, and backward() maps dq, dk back through the norm in place.
#pragma once

#include <cstdint>

#include "core/device.h"
#include "gdn/problem.h"
#include "ops/l2norm/l2norm.h"

namespace gdn {

template <typename T, typename Dev>
class QKNormalizer {
 public:
  QKNormalizer() = default;
  QKNormalizer(const GdnProblem& p, std::int64_t tokens, const GdnInputView<T>& in) {
    normalize(p, tokens, in);
  }

  // `in` holds `tokens` tokens of every batch row; its views must outlive backward().
  void normalize(const GdnProblem& p, std::int64_t tokens, const GdnInputView<T>& in) {
    in_ = view_ = in;
    rows_ = std::int64_t(p.B) * tokens * p.Hk;
    dim_ = p.K;
    on_ = p.l2norm_qk;
    if (!on_) return;
    const std::size_t n = std::size_t(rows_) * dim_;
    if (qn_.size() != n) {
      qn_.resize(n);
      kn_.resize(n);
    }
    ops::l2norm_rows(Dev{}, in.q, rows_, dim_, qn_.data());
    ops::l2norm_rows(Dev{}, in.k, rows_, dim_, kn_.data());
    view_.q = qn_.data();
    view_.k = kn_.data();
  }
  const GdnInputView<T>& view() const { return view_; }
  // Frees the normalised copies (activation recomputation); normalize() makes them again.
  void release() { qn_ = Buffer<Dev, T>(), kn_ = Buffer<Dev, T>(); }
  void backward(T* dq, T* dk) const {
    if (!on_) return;
    ops::l2norm_rows_backward(Dev{}, in_.q, dq, rows_, dim_, dq);
    ops::l2norm_rows_backward(Dev{}, in_.k, dk, rows_, dim_, dk);
  }

 private:
  GdnInputView<T> in_, view_;
  std::int64_t rows_ = 0;
  int dim_ = 0;
  bool on_ = false;
  Buffer<Dev, T> qn_, kn_;
};

}  // namespace gdn
