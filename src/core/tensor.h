// A minimal owning, row-major, host tensor: a shape and a flat std::vector.
#pragma once

#include <cstdint>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

namespace gdn {

using Shape = std::vector<std::int64_t>;

inline std::int64_t numel(const Shape& s) {
  return std::accumulate(s.begin(), s.end(), std::int64_t{1}, std::multiplies<>());
}

inline std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << "[";
  for (std::size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << "]";
  return os.str();
}

template <typename T>
struct Tensor {
  Shape shape;
  std::vector<T> data;

  Tensor() = default;
  explicit Tensor(Shape s, T fill = T(0)) : shape(std::move(s)), data(numel(shape), fill) {}

  std::int64_t size() const { return static_cast<std::int64_t>(data.size()); }
  bool empty() const { return data.empty(); }
  T* ptr() { return data.data(); }
  const T* ptr() const { return data.data(); }
};

template <typename To, typename From>
Tensor<To> cast(const Tensor<From>& t) {
  Tensor<To> out;
  out.shape = t.shape;
  out.data.assign(t.data.begin(), t.data.end());
  return out;
}

}  // namespace gdn
