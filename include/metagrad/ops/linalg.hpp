// Linear algebra: matrix products through BLAS.
#pragma once

#include <metagrad/concepts.hpp>
#include <metagrad/detail/algebra.hpp>
#include <metagrad/detail/dispatch.hpp>
#include <metagrad/grads.hpp>
#include <metagrad/ops/list.hpp>
#include <metagrad/ops/shape.hpp>

namespace mg {

template <class A, class B>
requires detail::Operands<A, B>
auto matmul(const A& a, const B& b);

/// 2-D matrix product: (m,k) x (k,n) -> (m,n).
struct matmul_op {
  static constexpr const char* name = "matmul";
  static constexpr bool elementwise = false;
  static constexpr auto saves = saved::inputs;
  static auto forward(const auto& a, const auto& b) {
    return detail::algebra<decltype(a)>::matmul(a, b);
  }
  // d/dA (A B) = G B^T, d/dB (A B) = A^T G
  static auto backward(const auto& a, const auto& b, const auto&, const auto& g) {
    return grads{mg::matmul(g, mg::transpose(b)), mg::matmul(mg::transpose(a), g)};
  }
};
template <class A, class B>
requires detail::Operands<A, B>
auto matmul(const A& a, const B& b) { return detail::call(matmul_op{}, a, b); }

using linalg_ops = op_list<matmul_op>;

}  // namespace mg
