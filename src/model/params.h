// The model's parameters: named tensors with their gradients, in a fixed order.
// Parameters are replicated on every rank; their order (the order of add()) is the same
// everywhere, which is what makes the gradient all-reduce, initialisation and checkpoints
// layout-independent.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"

namespace gdn {

template <typename T>
struct Param {
  std::string name;
  Tensor<T> value, grad;
  bool decay = true;  // AdamW weight decay applies (matrices yes; norms, A_log, dt_bias no)
  // Elements of the parameters added before this one: where it sits in a flat copy of all
  // parameters in order (the device mirrors of the CUDA model, the packed all-reduce).
  std::int64_t offset = 0;
};

template <typename T>
class ParamStore {
 public:
  // Adds a zero-initialised parameter; the returned reference stays valid.
  Param<T>& add(const std::string& name, Shape shape, bool decay) {
    for (const auto& p : params_) GDN_CHECK(p->name != name, "parameter '", name, "' added twice");
    auto p = std::make_unique<Param<T>>();
    p->name = name;
    p->value = Tensor<T>(shape);
    p->grad = Tensor<T>(shape);
    p->decay = decay;
    p->offset = num_elements();
    params_.push_back(std::move(p));
    return *params_.back();
  }

  std::size_t size() const { return params_.size(); }
  Param<T>& operator[](std::size_t i) { return *params_[i]; }
  const Param<T>& operator[](std::size_t i) const { return *params_[i]; }
  Param<T>& at(const std::string& name) {
    for (auto& p : params_)
      if (p->name == name) return *p;
    throw_error("no parameter named '", name, "'");
  }

  std::int64_t num_elements() const {
    std::int64_t n = 0;
    for (const auto& p : params_) n += p->value.size();
    return n;
  }
  void zero_grad() {
    for (auto& p : params_) std::fill(p->grad.data.begin(), p->grad.data.end(), T(0));
  }

 private:
  std::vector<std::unique_ptr<Param<T>>> params_;
};

}  // namespace gdn
