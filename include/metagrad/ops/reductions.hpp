// Reductions: sum of all elements, sum along an axis.
#pragma once

#include <cstddef>
#include <cstdint>

#include <metagrad/concepts.hpp>
#include <metagrad/detail/algebra.hpp>
#include <metagrad/detail/dispatch.hpp>
#include <metagrad/ops/list.hpp>
#include <metagrad/ops/shape.hpp>

namespace mg {

/// sum of all elements: a 0-d result.
struct sum_op {
  static constexpr const char* name = "sum";
  static constexpr bool elementwise = false;
  static constexpr auto saves = saved::inputs;
  static auto forward(const auto& x) { return detail::algebra<decltype(x)>::sum(x); }
  // d/dx_i sum(x) = 1: g broadcast to the shape of x
  static auto backward(const auto& x, const auto&, const auto& g) {
    return expand(g, detail::shape_of(x));
  }
};
template <class X>
requires detail::Operands<X>
auto sum(const X& x) { return detail::call(sum_op{}, x); }

/// sum along one axis (negative axes count from the end); the axis is removed.
struct sum_axis_op {
  static constexpr const char* name = "sum_axis";
  static constexpr bool elementwise = false;
  static constexpr auto saves = saved::inputs;
  std::ptrdiff_t axis;
  auto forward(const auto& x) const { return detail::algebra<decltype(x)>::sum(x, axis); }
  // d/dx_ij sum_j(x) = 1: g gets its axis back and is broadcast along it
  auto backward(const auto& x, const auto&, const auto& g) const {
    return expand(unsqueeze(g, axis), detail::shape_of(x));
  }
};
template <class X>
requires detail::Operands<X>
auto sum(const X& x, std::int64_t axis) {
  return detail::call(sum_axis_op{static_cast<std::ptrdiff_t>(axis)}, x);
}

using reduction_ops = op_list<sum_op, sum_axis_op>;

}  // namespace mg
