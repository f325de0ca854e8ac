// numpy broadcasting of two shapes, shared by the runtime engine (int64 extents) and the static
// engine's regions (size_t extents), so that both say the same thing when shapes do not fit.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>

#include <metagrad/error.hpp>

namespace mg::detail {

// "[2,3]"; a 0-d shape is "[]".
template <class S>
std::string shape_string(const S& s) {
  std::string r = "[";
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i) r += ',';
    r += std::to_string(s[i]);
  }
  r += ']';
  return r;
}

// numpy rules: align on the right; extents must be equal or 1.
template <class V>
V broadcast_extents(const V& a, const V& b, const char* op) {
  const std::size_t n = std::max(a.size(), b.size());
  V r(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const auto y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (x != y && x != 1 && y != 1)
      fail(op, ": shapes ", shape_string(a), " and ", shape_string(b),
           " cannot be broadcast together (numpy rules: trailing dimensions must be equal or 1); "
           "reshape one operand or sum it to a compatible shape first");
    r[i] = x == 1 ? y : x;
  }
  return r;
}

}  // namespace mg::detail
