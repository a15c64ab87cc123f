// Element types that cross file and rank boundaries.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/enum_names.h"
#include "core/error.h"

namespace gdn {

// bf16 names bf16 mixed precision where a run's dtype is asked for (train.dtype, gdn_eval
// --dtype): float values and master weights, bf16 matmul operands (core/autocast.h).
enum class DType { f32, f64, i32, i64, bf16 };

inline std::size_t dtype_size(DType t) {
  return t == DType::bf16 ? 2 : (t == DType::f32 || t == DType::i32) ? 4 : 8;
}

constexpr std::array<const char*, 5> enum_names(DType) {
  return {"f32", "f64", "i32", "i64", "bf16"};
}

inline const char* dtype_name(DType t) {
  return name_of(t);
}

// The value of a floating-point dtype option (a flag, a config key, named by `what`):
// f32 or f64, anything else refused.
inline DType parse_real_dtype(const std::string& text, const std::string& what) {
  const std::optional<DType> t = enum_from_name<DType>(text);
  GDN_CHECK(t == DType::f32 || t == DType::f64, what, " ", text.empty() ? "''" : text,
            " is not supported: expected f32 or f64");
  return *t;
}

// The dtype of a run's values (parameters, activations, checkpoints) for a run dtype: bf16
// mixed precision keeps them in f32.
inline DType value_dtype(DType run) {
  return run == DType::bf16 ? DType::f32 : run;
}

// A run's dtype option (train.dtype, gdn_eval --dtype): f32, f64 or bf16.
inline DType parse_run_dtype(const std::string& text, const std::string& what) {
  const std::optional<DType> t = enum_from_name<DType>(text);
  GDN_CHECK(t == DType::f32 || t == DType::f64 || t == DType::bf16, what, " ",
            text.empty() ? "''" : text, " is not supported: expected f32, f64 or bf16");
  return *t;
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
