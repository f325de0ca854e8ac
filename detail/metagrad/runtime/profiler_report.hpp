// Text helpers of the profiler's reports (<metagrad/profiler.hpp>): times as the table prints
// them, shape lists, JSON strings for the Chrome trace.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include <metagrad/types.hpp>

namespace mg::detail::prof {

// 12.345us, 1.234ms, 2.000s: three decimals in the largest unit that keeps the value >= 1.
template <int = 0>
std::string format_time(double us) {
  char buf[48];
  if (us >= 1e6)
    std::snprintf(buf, sizeof buf, "%.3fs", us / 1e6);
  else if (us >= 1e3)
    std::snprintf(buf, sizeof buf, "%.3fms", us / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.3fus", us);
  return buf;
}

template <int = 0>
std::string format_fixed(double v, const char* suffix = "") {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.3f%s", v, suffix);
  return buf;
}

template <int = 0>
std::string format_percent(double part, double whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f%%", whole > 0 ? 100.0 * part / whole : 0.0);
  return buf;
}

// [2, 3]; with json the same without spaces.
template <int = 0>
std::string shape_text(const shape_t& s, bool json = false) {
  std::string r = "[";
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i) r += json ? "," : ", ";
    r += std::to_string(s[i]);
  }
  return r + "]";
}

// [[2, 3], []]: the input shapes of one event.
template <int = 0>
std::string shapes_text(const std::vector<shape_t>& shapes, bool json = false) {
  std::string r = "[";
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    if (i) r += json ? "," : ", ";
    r += shape_text(shapes[i], json);
  }
  return r + "]";
}

// s as a JSON string literal, quotes included.
template <int = 0>
std::string json_string(std::string_view s) {
  std::string r = "\"";
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      r += '\\';
      r += c;
    } else if (u < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", u);
      r += buf;
    } else {
      r += c;
    }
  }
  return r + "\"";
}

// s cut to width columns ("..." marks a cut), then padded on the right or the left.
template <int = 0>
std::string fit(std::string_view s, std::size_t width, bool left) {
  std::string r(s);
  if (r.size() > width) r = width > 3 ? r.substr(0, width - 3) + "..." : r.substr(0, width);
  const std::string pad(width - r.size(), ' ');
  return left ? r + pad : pad + r;
}

}  // namespace mg::detail::prof
