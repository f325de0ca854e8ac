// The array functions the forward of a non-elementwise op is written against (reductions, shape
// changes, matrix products), supplied once per array family: plain numbers here (0-d arrays),
// static-engine expressions (expr algebra, also 0-d), xtensor in xt_algebra.hpp, mg::tensor in
// runtime_ops.hpp. They compute; they never record. A family that lacks them fails Algebra.
//
// The backward of such an op is written against the ops' public functions instead (mg::expand,
// mg::sum_to, mg::matmul, ...), which record on tensors when create_graph is on: that is what
// makes the gradient of a gradient work. See Note [One formula] in nodes.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include <metagrad/detail/config.hpp>
#include <metagrad/types.hpp>

namespace mg::detail {

// Specialised per array family; the primary template is deliberately undefined.
template <class X>
struct algebra_impl;

template <class X>
using algebra = algebra_impl<std::remove_cvref_t<X>>;

template <class X>
concept Algebra = requires { sizeof(algebra_impl<std::remove_cvref_t<X>>); };

// Numbers (and any type whose values are 0-d: static-engine expressions specialise to this):
// sums are the identity, broadcasts too, and matmul is the product.
struct scalar_algebra {
  MG_HD static constexpr auto sum(const auto& x) { return x; }
  MG_HD static constexpr auto sum(const auto& x, std::ptrdiff_t) { return x; }
  MG_HD static constexpr auto unsqueeze(const auto& x, std::ptrdiff_t) { return x; }
  MG_HD static constexpr auto broadcast(const auto& x, const shape_t&) { return x; }
  MG_HD static constexpr auto sum_to(const auto& x, const shape_t&) { return x; }
  MG_HD static constexpr auto matmul(const auto& a, const auto& b) { return a * b; }
  MG_HD static constexpr auto transpose(const auto& x) { return x; }
  static shape_t shape(const auto&) { return {}; }
};

template <class X>
requires std::is_arithmetic_v<X>
struct algebra_impl<X> : scalar_algebra {};

/// The shape of x in its family (numbers and expressions: 0-d).
template <class X>
shape_t shape_of(const X& x) {
  return algebra<X>::shape(x);
}

}  // namespace mg::detail
