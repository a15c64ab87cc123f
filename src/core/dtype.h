// Element types that cross file and rank boundaries.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace gdn {

enum class DType { f32, f64, i32, i64 };

inline std::size_t dtype_size(DType t) {
  return (t == DType::f32 || t == DType::i32) ? 4 : 8;
}

inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "f32";
    case DType::f64:
      return "f64";
    case DType::i32:
      return "i32";
    case DType::i64:
      return "i64";
  }
  return "?";
}

template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::f32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::f64;
}
template <>
constexpr DType dtype_of<std::int32_t>() {
  return DType::i32;
}
template <>
constexpr DType dtype_of<std::int64_t>() {
  return DType::i64;
}

}  // namespace gdn
