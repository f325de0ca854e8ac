// The primitives that are not elementwise: reductions and matrix products.
//
// Their bodies are written once against `detail::algebra<X>`, a small set of array functions
// (sum, expand_as, unsqueeze, matmul, transpose) that each array family supplies: plain numbers
// here, xtensor in <metagrad/xtensor.hpp>, mg::tensor in <metagrad/tensor.hpp>, static-engine
// nodes in <metagrad/static.hpp>. A family that is missing fails `detail::Algebra`.
#pragma once

#include <concepts>
#include <cstddef>
#include <type_traits>

#include <metagrad/detail/config.hpp>
#include <metagrad/grads.hpp>

namespace mg {

namespace detail {
// Specialised per array family; the primary template is deliberately undefined.
template <class X>
struct algebra_impl;

template <class X>
using algebra = algebra_impl<std::remove_cvref_t<X>>;

template <class X>
concept Algebra = requires {
  sizeof(algebra_impl<std::remove_cvref_t<X>>);
};

// Plain numbers are 0-d arrays: sum is the identity and matmul is the product.
template <class X>
requires std::is_arithmetic_v<X>
struct algebra_impl<X> {
  MG_HD static constexpr auto sum(const auto& x) { return x; }
  MG_HD static constexpr auto sum(const auto& x, std::ptrdiff_t) { return x; }
  MG_HD static constexpr auto unsqueeze(const auto& x, std::ptrdiff_t) { return x; }
  MG_HD static constexpr auto expand_as(const auto& g, const auto&) { return g; }
  MG_HD static constexpr auto matmul(const auto& a, const auto& b) { return a * b; }
  MG_HD static constexpr auto transpose(const auto& x) { return x; }
};
}  // namespace detail

/// sum of all elements: a 0-d result.
struct sum_op {
  static constexpr const char* name = "sum";
  static constexpr bool elementwise = false;
  static auto forward(const auto& x) { return detail::algebra<decltype(x)>::sum(x); }
  // d/dx_i sum(x) = 1: g broadcast to the shape of x
  static auto backward(const auto& x, const auto&, const auto& g) {
    return detail::algebra<decltype(x)>::expand_as(g, x);
  }
};

/// sum along one axis (negative axes count from the end); the axis is removed.
struct sum_axis_op {
  static constexpr const char* name = "sum_axis";
  static constexpr bool elementwise = false;
  std::ptrdiff_t axis;
  auto forward(const auto& x) const { return detail::algebra<decltype(x)>::sum(x, axis); }
  // d/dx_ij sum_j(x) = 1: g gets its axis back and is broadcast along it
  auto backward(const auto& x, const auto&, const auto& g) const {
    using A = detail::algebra<decltype(x)>;
    return A::expand_as(A::unsqueeze(g, axis), x);
  }
};

/// 2-D matrix product: (m,k) x (k,n) -> (m,n).
struct matmul_op {
  static constexpr const char* name = "matmul";
  static constexpr bool elementwise = false;
  static auto forward(const auto& a, const auto& b) {
    return detail::algebra<decltype(a)>::matmul(a, b);
  }
  // d/dA (A B) = G B^T, d/dB (A B) = A^T G
  static auto backward(const auto& a, const auto& b, const auto&, const auto& g) {
    using A = detail::algebra<decltype(a)>;
    return grads{A::matmul(g, A::transpose(b)), A::matmul(A::transpose(a), g)};
  }
};

}  // namespace mg
