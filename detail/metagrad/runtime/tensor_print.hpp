// `std::cout << t`: a tensor printed as torch prints one. Nested rows, aligned in one column
// width; a tensor of more than 1000 elements shows the first and last three entries of each
// dimension, with `...` between; floating values with 4 decimals (or as `2.` when every value is
// an integer, or in scientific notation when they span more than 1e3 or leave [1e-4, 1e8));
// then the dtype when it is not f32, i64 or bool, the device when it is not the CPU,
// requires_grad on a leaf that requires it, and the grad_fn.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

#include <metagrad/tensor_class.hpp>

namespace mg::detail {

struct tensor_printer {
  static constexpr std::int64_t threshold = 1000, edge = 3;

  const shape_t& shape;
  std::vector<std::string> text;  // each element, formatted (empty where elided)
  std::size_t width = 0;
  bool summarize;

  // The row-major indices of the elements shown along a dimension of extent n.
  bool shown(std::int64_t i, std::int64_t n) const {
    return !summarize || n <= 2 * edge || i < edge || i >= n - edge;
  }
  bool shown_flat(std::int64_t flat) const {
    for (std::size_t d = shape.size(); d-- > 0;) {
      if (!shown(flat % shape[d], shape[d])) return false;
      flat /= shape[d];
    }
    return true;
  }

  static std::string format(const char* f, double v) {
    char b[64];
    std::snprintf(b, sizeof b, f, v);
    return b;
  }

  // Formats the shown floating values in one style, chosen from them all (torch's rule).
  void format_floating(const std::vector<double>& v) {
    bool integers = true;
    double lo = INFINITY, hi = 0;
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (!shown_flat(static_cast<std::int64_t>(i)) || !std::isfinite(v[i])) continue;
      integers = integers && v[i] == std::nearbyint(v[i]);
      const double a = std::abs(v[i]);
      if (a != 0) lo = std::min(lo, a), hi = std::max(hi, a);
    }
    const bool any = hi > 0;
    const bool scientific = any && (integers ? hi > 1e8 : hi / lo > 1e3 || hi > 1e8 || lo < 1e-4);
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (!shown_flat(static_cast<std::int64_t>(i))) continue;
      const double x = v[i];
      text[i] = std::isnan(x)   ? "nan"
                : std::isinf(x) ? (x > 0 ? "inf" : "-inf")
                : scientific    ? format("%.4e", x)
                : integers      ? format("%.0f", x) + "."
                                : format("%.4f", x);
    }
  }

  void print(std::ostream& os, std::size_t dim, std::int64_t offset, std::size_t indent) const {
    if (dim == shape.size()) {
      const std::string& s = text[static_cast<std::size_t>(offset)];
      os << std::string(width - s.size(), ' ') << s;
      return;
    }
    std::int64_t stride = 1;
    for (std::size_t d = dim + 1; d < shape.size(); ++d) stride *= shape[d];
    const std::int64_t n = shape[dim];
    const bool last = dim + 1 == shape.size();
    // between rows: a line break per remaining dimension, and the indent of this bracket
    const std::string between =
        last ? ", "
             : "," + std::string(shape.size() - dim - 1, '\n') + std::string(indent + 1, ' ');
    os << '[';
    bool first = true;
    for (std::int64_t i = 0; i < n; ++i) {
      if (!shown(i, n)) {
        os << between << (last ? " ..." : "...");
        i = n - edge - 1;
        continue;
      }
      if (!first) os << between;
      first = false;
      print(os, dim + 1, offset + i * stride, indent + 1);
    }
    os << ']';
  }
};

MG_API std::ostream& print_tensor(std::ostream& os, const tensor& t);

#if MG_EMIT_API  // Note [Compiled core] in config.hpp
MG_API std::ostream& print_tensor(std::ostream& os, const tensor& t) {
  if (!t.defined()) return os << "tensor(undefined)";
  const tensor_impl& ti = *t.impl();
  const auto n = static_cast<std::size_t>(ti.numel());
  tensor_printer p{ti.shape, std::vector<std::string>(n), 0,
                   ti.numel() > tensor_printer::threshold};
  if (is_floating(ti.dtype())) {
    std::vector<double> v(n);
    if (n) read_elements(ti, dtype::f64, v.data());
    p.format_floating(v);
  } else {
    std::vector<std::int64_t> v(n);
    if (n) read_elements(ti, dtype::i64, v.data());
    for (std::size_t i = 0; i < n; ++i)
      if (p.shown_flat(static_cast<std::int64_t>(i)))
        p.text[i] = ti.dtype() == dtype::b8 ? (v[i] ? "true" : "false") : std::to_string(v[i]);
  }
  for (const auto& s : p.text) p.width = std::max(p.width, s.size());
  os << "tensor(";
  if (n == 0)
    os << "[]";
  else
    p.print(os, 0, 0, 7);  // 7: the width of "tensor("
  if (n == 0 && ti.shape.size() != 1) os << ", shape=" << shape_string(ti.shape);
  if (ti.dtype() == dtype::f64) os << ", dtype=f64";
  if (ti.device() != device::cpu) os << ", device=" << device_name(ti.device());
  if (t.grad_fn())
    os << ", grad_fn=" << t.grad_fn()->name();
  else if (t.requires_grad())
    os << ", requires_grad=true";
  return os << ")";
}
#endif

}  // namespace mg::detail
