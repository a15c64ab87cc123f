// The one exception type of gdn-cp. Messages name the bad value and what was expected.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace gdn {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Builds a message from streamable parts: throw_error("chunk_size = ", c, ", expected ...").
template <typename... Parts>
[[noreturn]] void throw_error(Parts&&... parts) {
  std::ostringstream os;
  (os << ... << std::forward<Parts>(parts));
  throw Error(os.str());
}

#define GDN_CHECK(cond, ...)                      \
  do {                                            \
    if (!(cond)) ::gdn::throw_error(__VA_ARGS__); \
  } while (0)

}  // namespace gdn
