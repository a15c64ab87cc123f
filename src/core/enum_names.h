// Names for the option enums, listed once per enum: an enum class E with values 0..N-1
// declares `constexpr std::array<const char*, N> enum_names(E)` beside it (found by
// argument-dependent lookup), and these helpers turn text into values and back. Options
// are parsed once, where they are read (configs, flags), and compared as values after.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace gdn {

template <typename E>
const char* name_of(E e) {
  return enum_names(E{})[std::size_t(e)];
}

// The value named s; nullopt when no value has that name.
template <typename E>
std::optional<E> enum_from_name(std::string_view s) {
  const auto names = enum_names(E{});
  for (std::size_t i = 0; i < names.size(); ++i)
    if (s == names[i]) return E(i);
  return std::nullopt;
}

// "a or b or c", for messages.
template <typename E>
std::string enum_list() {
  std::string s;
  for (const char* n : enum_names(E{})) s += (s.empty() ? "" : " or ") + std::string(n);
  return s;
}

}  // namespace gdn
