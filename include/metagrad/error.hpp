// mg::error: the one exception type every run-time misuse of metagrad derives from.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace mg {

/// Thrown on run-time misuse. The message names the operation, the shapes or versions involved,
/// and how to fix it:
/// ```cpp
/// try { (a + b).sum().backward(); } catch (const mg::error& e) { std::cerr << e.what(); }
/// ```
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
// Concatenates its arguments with operator<< into a message prefixed with "metagrad: ".
template <class... Ts>
[[nodiscard]] std::string message(const Ts&... parts) {
  std::ostringstream os;
  os << "metagrad: ";
  (os << ... << parts);
  return std::move(os).str();
}

template <class... Ts>
[[noreturn]] void fail(const Ts&... parts) {
  throw error(message(parts...));
}
}  // namespace detail

}  // namespace mg
