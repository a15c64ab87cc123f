// The model's parameters: named tensors in one flat buffer of values and one of gradients
// (docs/design.md §6), in the order they were added. Parameters are replicated
// on every rank and that order is the same everywhere, which makes the one gradient
// all-reduce, initialisation and checkpoints layout-independent. The buffers live in
// Dev's memory; host copies are made only for initialisation and checkpoints.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"

namespace gdn {

using ParamId = std::size_t;

struct ParamInfo {
  std::string name;
  Shape shape;
  std::int64_t offset = 0;  // first element in the flat buffers
  std::int64_t size = 0;    // elements
  bool decay = true;        // AdamW weight decay applies (matrices yes; norms, A_log, dt_bias no)
};

template <typename T, typename Dev>
class ParamStore {
 public:
  // Adds a parameter; every add comes before allocate().
  ParamId add(const std::string& name, Shape shape, bool decay) {
    GDN_CHECK(values_.empty(), "parameter '", name, "' added after the storage was allocated");
    for (const auto& p : info_) GDN_CHECK(p.name != name, "parameter '", name, "' added twice");
    const std::int64_t n = numel(shape);
    info_.push_back({name, std::move(shape), num_elements(), n, decay});
    return info_.size() - 1;
  }
  // Allocates the flat values and gradients (zeros), once, after the last add.
  void allocate() {
    values_.resize(std::size_t(num_elements()));
    grads_.resize(std::size_t(num_elements()));
  }

  std::size_t size() const { return info_.size(); }
  const ParamInfo& info(ParamId id) const { return info_.at(id); }
  const std::vector<ParamInfo>& infos() const { return info_; }
  ParamId find(const std::string& name) const {
    for (std::size_t i = 0; i < info_.size(); ++i)
      if (info_[i].name == name) return i;
    throw_error("no parameter named '", name, "'");
  }
  std::int64_t num_elements() const {
    return info_.empty() ? 0 : info_.back().offset + info_.back().size;
  }

  T* value(ParamId id) { return values_.data() + info(id).offset; }
  const T* value(ParamId id) const { return values_.data() + info(id).offset; }
  T* grad(ParamId id) { return grads_.data() + info(id).offset; }
  // The flat buffers: what the trainer all-reduces, clips and updates in one go.
  T* values() { return values_.data(); }
  T* grads() { return grads_.data(); }
  const T* grads() const { return grads_.data(); }

  void zero_grad() { Dev::fill(grads_.data(), grads_.size(), T(0)); }

  // Host copies of the flat buffers, and back.
  std::vector<T> host_values() const { return to_host<Dev>(values_); }
  std::vector<T> host_grads() const { return to_host<Dev>(grads_); }
  void set_values(const std::vector<T>& host) {
    GDN_CHECK(host.size() == values_.size(), "set_values: ", host.size(), " values for ",
              values_.size(), " parameter elements");
    Dev::upload(values_.data(), host.data(), host.size());
  }
  // The values themselves, where they live in host memory (Buffer<Host, T> is a
  // std::vector): initialisation writes them in place instead of through a second copy.
  std::vector<T>& host_storage() requires std::is_same_v<Buffer<Dev, T>, std::vector<T>> {
    return values_;
  }

 private:
  std::vector<ParamInfo> info_;
  Buffer<Dev, T> values_, grads_;
};

}  // namespace gdn
