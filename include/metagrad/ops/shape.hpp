// Shape ops: expand (broadcast_to), sum_to (its adjoint), unsqueeze, transpose.
#pragma once

#include <cstddef>
#include <cstdint>

#include <metagrad/concepts.hpp>
#include <metagrad/detail/algebra.hpp>
#include <metagrad/detail/dispatch.hpp>
#include <metagrad/ops/list.hpp>
#include <metagrad/types.hpp>

namespace mg {

// The public functions, declared first: each op's backward names the others.
template <class X>
requires detail::Operands<X>
auto expand(const X& x, const shape_t& shape);
template <class X>
requires detail::Operands<X>
auto sum_to(const X& x, const shape_t& shape);
template <class X>
requires detail::Operands<X>
auto transpose(const X& x);
template <class X>
requires detail::Operands<X>
auto sum(const X& x, std::int64_t dim, bool keepdim = false);

/// x broadcast (numpy rules) to `shape`.
struct expand_op {
  static constexpr const char* name = "expand";
  static constexpr bool elementwise = false;
  static constexpr auto saves = saved::inputs;
  shape_t shape;
  auto forward(const auto& x) const { return detail::algebra<decltype(x)>::broadcast(x, shape); }
  // d/dx expand(x) = g summed back over the broadcast dimensions
  auto backward(const auto& x, const auto&, const auto& g) const {
    return mg::sum_to(g, detail::shape_of(x));
  }
};
template <class X>
requires detail::Operands<X>
auto expand(const X& x, const shape_t& shape) { return detail::call(expand_op{shape}, x); }

/// x summed over the dimensions along which `shape` broadcasts to x's shape.
struct sum_to_op {
  static constexpr const char* name = "sum_to";
  static constexpr bool elementwise = false;
  static constexpr auto saves = saved::inputs;
  shape_t shape;
  auto forward(const auto& x) const { return detail::algebra<decltype(x)>::sum_to(x, shape); }
  // d/dx sum_to(x) = g broadcast back to x's shape
  auto backward(const auto& x, const auto&, const auto& g) const {
    return mg::expand(g, detail::shape_of(x));
  }
};
template <class X>
requires detail::Operands<X>
auto sum_to(const X& x, const shape_t& shape) { return detail::call(sum_to_op{shape}, x); }

/// x with a dimension of extent 1 inserted at `axis` (a view on tensors).
struct unsqueeze_op {
  static constexpr const char* name = "unsqueeze";
  static constexpr bool elementwise = false;
  static constexpr auto saves = saved::nothing;
  std::ptrdiff_t axis;
  auto forward(const auto& x) const { return detail::algebra<decltype(x)>::unsqueeze(x, axis); }
  // d/dx unsqueeze(x) = g without the inserted axis (a sum over one element)
  auto backward(const auto&, const auto&, const auto& g) const { return mg::sum(g, axis); }
};
template <class X>
requires detail::Operands<X>
auto unsqueeze(const X& x, std::int64_t axis) {
  return detail::call(unsqueeze_op{static_cast<std::ptrdiff_t>(axis)}, x);
}

/// x with its last two dimensions swapped (a view on tensors; the identity below 2-D).
struct transpose_op {
  static constexpr const char* name = "transpose";
  static constexpr bool elementwise = false;
  static constexpr auto saves = saved::nothing;
  static auto forward(const auto& x) { return detail::algebra<decltype(x)>::transpose(x); }
  // d/dx x^T = g^T
  static auto backward(const auto&, const auto&, const auto& g) { return mg::transpose(g); }
};
template <class X>
requires detail::Operands<X>
auto transpose(const X& x) { return detail::call(transpose_op{}, x); }

using shape_ops = op_list<expand_op, sum_to_op, unsqueeze_op, transpose_op>;

}  // namespace mg
