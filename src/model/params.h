// The model's parameters: named tensors in one flat order of values and of gradients
// (docs/design.md §6), in the order they were added, grouped into units (§6d): the
// embedding, each layer, the final norm with the LM head. That order is the same on every
// rank, which makes the gradient reduction, initialisation and checkpoints
// layout-independent.
//
// Storage comes in two kinds. allocate(): one flat buffer of values and one of gradients,
// every parameter resident (train.shard none and optimizer). allocate_by_unit(): nothing
// is resident until materialize(u) makes unit u's values and (zero) gradients exist, and
// evict(u) frees them again (train.shard full, train/sharded_state.h). The buffers live in
// Dev's memory; host copies are made only for initialisation and checkpoints.
#pragma once

#include <algorithm>
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
  std::int64_t offset = 0;  // first element in the flat order
  std::int64_t size = 0;    // elements
  bool decay = true;        // AdamW weight decay applies (matrices yes; norms, A_log, dt_bias no)
  std::size_t unit = 0;     // the unit it belongs to
  // Its first element's place in the flat order of the whole model (ep = 1): the offset
  // there, plus, for a rank's block of experts, the rows of the experts before them.
  std::int64_t global = 0;
};

// Consecutive parameters [begin, end) of the flat order, gathered and released together.
struct ParamUnit {
  std::string name;  // "model.embed_tokens", "model.layers.3", "model.norm + lm_head"
  std::int64_t begin = 0, end = 0;
  // A MoE block's experts: split over the ep ranks, their gradients summed over the ranks
  // that hold the same experts, not over the whole world.
  bool expert = false;
  std::int64_t size() const { return end - begin; }
};

// A host array holding the flat elements [begin, begin + size) (one unit, or all): what
// initialisation and weight loading write into.
template <typename T>
struct HostParams {
  T* data = nullptr;
  std::int64_t begin = 0, size = 0;
  T* at(const ParamInfo& p) const {
    GDN_CHECK(p.offset >= begin && p.offset + p.size <= begin + size, "parameter '", p.name,
              "' (elements ", p.offset, " .. ", p.offset + p.size, ") is outside the host span ",
              begin, " .. ", begin + size);
    return data + (p.offset - begin);
  }
};

// Elements [at, at + n) of a rank's array belong at [global, global + n) of the whole
// model's flat order (checkpoint parts, weights read for a rank, gathers to rank 0).
struct GlobalRun {
  std::int64_t global = 0, at = 0, n = 0;
};

// Calls f(local, global, n) for each run of the flat elements [lo, hi) that lies in one
// parameter: where the run starts here, where in the whole model's flat order, its length.
template <typename F>
void for_each_global_run(const std::vector<ParamInfo>& infos, std::int64_t lo, std::int64_t hi,
                         F&& f) {
  for (const ParamInfo& p : infos) {
    const std::int64_t a = std::max(lo, p.offset), b = std::min(hi, p.offset + p.size);
    if (a < b) f(a, p.global + (a - p.offset), b - a);
  }
}

// This rank's flat values (all of infos) from the whole model's flat order.
template <typename T>
std::vector<T> local_from_global(const std::vector<ParamInfo>& infos, const std::vector<T>& whole) {
  const std::int64_t n = infos.empty() ? 0 : infos.back().offset + infos.back().size;
  std::vector<T> local(static_cast<std::size_t>(n));
  for_each_global_run(infos, 0, n, [&](std::int64_t at, std::int64_t global, std::int64_t len) {
    std::copy_n(whole.begin() + global, len, local.begin() + at);
  });
  return local;
}

template <typename T, typename Dev>
class ParamStore {
 public:
  // Starts a new unit: the parameters added from here on belong to it. A parameter added
  // before any begin_unit() starts a unit named "all".
  void begin_unit(std::string name, bool expert = false) {
    GDN_CHECK(!allocated_, "unit '", name, "' begun after the storage was allocated");
    if (!units_.empty() && units_.back().size() == 0) units_.pop_back();
    units_.push_back({std::move(name), num_elements(), num_elements(), expert});
  }
  // Adds a parameter to the current unit; every add comes before the storage is allocated.
  ParamId add(const std::string& name, Shape shape, bool decay) {
    GDN_CHECK(!allocated_, "parameter '", name, "' added after the storage was allocated");
    for (const auto& p : info_) GDN_CHECK(p.name != name, "parameter '", name, "' added twice");
    if (units_.empty()) begin_unit("all");
    const std::int64_t n = numel(shape);
    info_.push_back(
        {name, std::move(shape), num_elements(), n, decay, units_.size() - 1, num_elements()});
    units_.back().end += n;
    return info_.size() - 1;
  }
  // Allocates the flat values and gradients (zeros), once, after the last add.
  void allocate() {
    GDN_CHECK(!allocated_, "the parameters are allocated twice");
    allocated_ = flat_ = true;
    values_.resize(std::size_t(num_elements()));
    grads_.resize(std::size_t(num_elements()));
  }
  // Instead of allocate(): no parameter is resident until its unit is materialized.
  void allocate_by_unit() {
    GDN_CHECK(!allocated_, "the parameters are allocated twice");
    allocated_ = true;
    by_unit_.resize(units_.size());
  }
  bool flat() const { return flat_; }

  std::size_t size() const { return info_.size(); }
  const ParamInfo& info(ParamId id) const { return info_.at(id); }
  const std::vector<ParamInfo>& infos() const { return info_; }
  const std::vector<ParamUnit>& units() const { return units_; }
  // Where each parameter lies in the whole model's flat order (ParamInfo::global).
  void set_global(ParamId id, std::int64_t global) { info_.at(id).global = global; }
  ParamId find(const std::string& name) const {
    for (std::size_t i = 0; i < info_.size(); ++i)
      if (info_[i].name == name) return i;
    throw_error("no parameter named '", name, "'");
  }
  std::int64_t num_elements() const { return units_.empty() ? 0 : units_.back().end; }

  // Unit u's zero gradients and, with `values`, room for its values (allocate_by_unit
  // only); evict frees them.
  void materialize(std::size_t u, bool values = true) {
    GDN_CHECK(!flat_ && u < by_unit_.size(), "materialize(", u, "): the store is not by unit");
    by_unit_[u].values.resize(values ? std::size_t(units_[u].size()) : 0);
    by_unit_[u].has_values = values;
    by_unit_[u].grads.resize(std::size_t(units_[u].size()));
    Dev::fill(by_unit_[u].grads.data(), by_unit_[u].grads.size(), T(0));
    by_unit_[u].resident = true;
  }
  void evict(std::size_t u) {
    GDN_CHECK(!flat_ && u < by_unit_.size(), "evict(", u, "): the store is not by unit");
    by_unit_[u] = UnitStorage();
  }
  bool resident(std::size_t u) const {
    return flat_ || (u < by_unit_.size() && by_unit_[u].resident);
  }
  // The first value and gradient of unit u (resident).
  T* unit_values(std::size_t u) {
    return flat_ ? values_.data() + units_[u].begin : storage(u, true).values.data();
  }
  T* unit_grads(std::size_t u) {
    return flat_ ? grads_.data() + units_[u].begin : storage(u, false).grads.data();
  }
  const T* unit_values(std::size_t u) const {
    return const_cast<ParamStore*>(this)->unit_values(u);
  }

  T* value(ParamId id) { return unit_values(info(id).unit) + local(id); }
  const T* value(ParamId id) const { return unit_values(info(id).unit) + local(id); }
  T* grad(ParamId id) { return unit_grads(info(id).unit) + local(id); }
  // The flat buffers (allocate() only): what the trainer reduces, clips and updates.
  T* values() { return flat_buffer(values_); }
  T* grads() { return flat_buffer(grads_); }
  const T* grads() const { return const_cast<ParamStore*>(this)->grads(); }

  void zero_grad() {
    if (flat_) Dev::fill(grads_.data(), grads_.size(), T(0));
    for (UnitStorage& s : by_unit_) Dev::fill(s.grads.data(), s.grads.size(), T(0));
  }

  // Host copies of the flat buffers, and back (allocate() only).
  std::vector<T> host_values() const { return to_host<Dev>(flat_check(values_)); }
  std::vector<T> host_grads() const { return to_host<Dev>(flat_check(grads_)); }
  void set_values(const std::vector<T>& host) {
    GDN_CHECK(host.size() == flat_check(values_).size(), "set_values: ", host.size(),
              " values for ", values_.size(), " parameter elements");
    Dev::upload(values_.data(), host.data(), host.size());
  }
  // The values themselves, where they live in host memory (Buffer<Host, T> is a
  // std::vector): initialisation writes them in place instead of through a second copy.
  std::vector<T>& host_storage() requires std::is_same_v<Buffer<Dev, T>, std::vector<T>> {
    return flat_check(values_);
  }

 private:
  struct UnitStorage {
    Buffer<Dev, T> values, grads;
    bool resident = false, has_values = false;
  };
  std::int64_t local(ParamId id) const { return info(id).offset - units_[info(id).unit].begin; }
  UnitStorage& storage(std::size_t u, bool values) {
    GDN_CHECK(u < by_unit_.size() && by_unit_[u].resident && (!values || by_unit_[u].has_values),
              "the parameter ", values ? "values" : "gradients", " of unit '",
              u < units_.size() ? units_[u].name : std::to_string(u),
              "' are used while they are not gathered (train.shard full)");
    return by_unit_[u];
  }
  template <typename B>
  B& flat_check(B& b) const {
    GDN_CHECK(flat_,
              "the flat parameter buffers exist only with every parameter resident "
              "(train.shard none or optimizer)");
    return b;
  }
  template <typename B>
  T* flat_buffer(B& b) {
    return flat_check(b).data();
  }

  std::vector<ParamInfo> info_;
  std::vector<ParamUnit> units_;
  bool allocated_ = false, flat_ = false;
  Buffer<Dev, T> values_, grads_;
  std::vector<UnitStorage> by_unit_;
};

}  // namespace gdn
