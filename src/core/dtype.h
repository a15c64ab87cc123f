// Element types that cross file and rank boundaries.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>

#include "core/enum_names.h"
#include "core/error.h"

namespace gdn {

// bf16 names bf16 mixed precision where a run's dtype is asked for (train.dtype, gdn_eval
// --dtype): float values and master weights, bf16 matmul operands (core/precision.h).
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

// The value of a dtype option (a flag, a config key, named by `what`), one of `allowed`;
// anything else refused, naming them.
inline DType parse_dtype_of(const std::string& text, const std::string& what,
                            std::initializer_list<DType> allowed) {
  const std::optional<DType> t = enum_from_name<DType>(text);
  std::string names;
  bool ok = false;
  for (DType a : allowed) {
    ok = ok || t == a;
    names += std::string(names.empty() ? "" : " or ") + dtype_name(a);
  }
  GDN_CHECK(ok, what, " ", text.empty() ? "''" : text, " is not supported: expected ", names);
  return *t;
}

// A floating-point dtype option: f32 or f64.
inline DType parse_real_dtype(const std::string& text, const std::string& what) {
  return parse_dtype_of(text, what, {DType::f32, DType::f64});
}

// The dtype of a run's values (parameters, activations, checkpoints) for a run dtype: bf16
// mixed precision keeps them in f32.
inline DType value_dtype(DType run) {
  return run == DType::bf16 ? DType::f32 : run;
}

// A run's dtype option (train.dtype, gdn_eval --dtype): f32, f64 or bf16.
inline DType parse_run_dtype(const std::string& text, const std::string& what) {
  return parse_dtype_of(text, what, {DType::f32, DType::f64, DType::bf16});
}

// Another library's value for each element type (comm's MPI and NCCL datatypes), the one
// switch over DType for them: a new DType breaks every call until it names its value.
template <typename V>
V per_dtype(DType t, V f32, V f64, V i32, V i64, V bf16) {
  switch (t) {
    case DType::f32:
      return f32;
    case DType::f64:
      return f64;
    case DType::i32:
      return i32;
    case DType::i64:
      return i64;
    case DType::bf16:
      return bf16;
  }
  throw_error("per_dtype: unknown DType ", static_cast<int>(t));
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
