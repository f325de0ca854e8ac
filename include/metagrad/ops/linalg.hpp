// Linear algebra: matrix products through BLAS (CPU; on device cuda they throw, since there is
// no cuBLAS path yet): matmul with numpy semantics, dot, outer.
#pragma once

#include <array>
#include <cstdint>

#include <metagrad/concepts.hpp>
#include <metagrad/core/algebra.hpp>
#include <metagrad/core/dispatch.hpp>
#include <metagrad/core/lent_results.hpp>
#include <metagrad/core/shape_rules.hpp>
#include <metagrad/grads.hpp>
#include <metagrad/ops/arithmetic.hpp>
#include <metagrad/ops/list.hpp>
#include <metagrad/ops/shape.hpp>

namespace mg {

template <class A, class B>
requires detail::Operands<A, B>
auto matmul(const A& a, const B& b, call_site site = {});
template <class A, class B>
requires detail::Operands<A, B>
auto outer(const A& a, const B& b, call_site site = {});

namespace detail {
// x^T for a matrix product within one expression: on xtensor arrays a view (BLAS reads it as a
// transposed operand, no copy), elsewhere mg::transpose (recorded on tensors).
template <class X>
auto transposed(const X& x) {
  if constexpr (std::is_same_v<family_of_t<X>, array_family>) {
    return algebra<X>::transpose_view(x);
  } else {
    return mg::transpose(x);
  }
}
}  // namespace detail

/// numpy's matmul: (..., m, k) x (..., k, n) -> (..., m, n) with the batch dimensions broadcast;
/// a 1-D first operand is a row (its dimension dropped from the result), a 1-D second operand a
/// column (likewise); two 1-D operands give their dot product.
struct matmul_op {
  static constexpr const char* name = "matmul";
  static constexpr bool elementwise = false;
  static constexpr auto linear = linearity::separately;
  static constexpr auto saves = saved::inputs;
  // the gradient of a reads b, that of b reads a (bit j: input j): with only a requiring grad,
  // only b is saved
  static constexpr std::array<std::uint32_t, 2> gradient_reads{0b10, 0b01};
  // the static engine may give a product of two matrices its operand's result to be written
  // into (Note [Gradients written into the results] in core/lent_results.hpp)
  static constexpr bool writes_operand_gradients = true;
  static auto forward(const auto& a, const auto& b) {
    return detail::algebra<decltype(a)>::matmul(a, b);
  }
  // d/dA (A B) = G B^T, d/dB (A B) = A^T G (1-D operands promoted as in forward, then the
  // gradients summed over broadcast batch dimensions and brought back to the operands' shapes)
  static auto backward(const auto& a, const auto& b, const auto&, const auto& g) {
    if constexpr (detail::ZeroD<decltype(a)>) {
      return grads{detail::call(mul_op{}, g, b), detail::call(mul_op{}, g, a)};
    } else {
      return backward_arrays(a, b, g);
    }
  }
  static auto backward_arrays(const auto& a, const auto& b, const auto& g) {
    const shape_t sa = detail::shape_of(a), sb = detail::shape_of(b);
    const bool va = sa.size() == 1, vb = sb.size() == 1;
    shape_t pg = detail::shape_of(g);  // the result's shape with the promoted dimensions back
    if (vb) pg.push_back(1);
    if (va) pg.insert(pg.end() - 1, 1);
    // a matrix and a vector: an outer product and a matrix-vector product (gemv on arrays)
    const bool mat_vec = sa.size() == 2 && vb, vec_mat = va && sb.size() == 2;
    const auto grad_a = [&] {
      if (!va && !vb) {
        const detail::result_for_operand into(0);
        return mg::matmul(g, detail::transposed(b));
      }
      if (mat_vec) return mg::outer(g, b);
      if (vec_mat) return mg::matmul(b, g);
      const auto B = mg::reshape(b, vb ? shape_t{sb[0], 1} : sb);
      auto ga = mg::matmul(mg::reshape(g, pg), detail::transposed(B));
      return va ? mg::squeeze(ga, -2) : ga;
    };
    const auto grad_b = [&] {
      if (!va && !vb) {
        const detail::result_for_operand into(1);
        return mg::matmul(detail::transposed(a), g);
      }
      if (mat_vec) return mg::matmul(g, a);
      if (vec_mat) return mg::outer(a, g);
      const auto A = mg::reshape(a, va ? shape_t{1, sa[0]} : sa);
      auto gb = mg::matmul(detail::transposed(A), mg::reshape(g, pg));
      return vb ? mg::squeeze(gb, -1) : gb;
    };
    return grads{detail::gradient_reading(b, grad_a), detail::gradient_reading(a, grad_b)};
  }
};
template <class A, class B>
requires detail::Operands<A, B>
auto matmul(const A& a, const B& b, call_site site) {
  return detail::call_at(site, matmul_op{}, a, b);
}

namespace detail {
template <class A, class B>
void check_vectors(const A& a, const B& b, const char* op, bool same_length) {
  const shape_t sa = shape_of(a), sb = shape_of(b);
  if (sa.size() != 1 || sb.size() != 1)
    fail(op, ": expected two 1-D tensors, got shapes ", shape_string(sa), " and ", shape_string(sb),
         "; use matmul for matrices (or flatten the operands)");
  if (same_length && sa[0] != sb[0])
    fail(op, ": the vectors have lengths ", sa[0], " and ", sb[0], " (shapes ", shape_string(sa),
         " and ", shape_string(sb), "); they must be equal");
}
}  // namespace detail

/// The dot product of two 1-D operands of equal length.
struct dot_op {
  static constexpr const char* name = "dot";
  static constexpr bool elementwise = false;
  static constexpr auto linear = linearity::separately;
  static constexpr auto saves = saved::inputs;
  static auto forward(const auto& a, const auto& b) {
    if constexpr (!std::is_arithmetic_v<std::remove_cvref_t<decltype(a)>>)
      detail::check_vectors(a, b, "dot", true);
    return detail::algebra<decltype(a)>::matmul(a, b, "dot");
  }
  static constexpr std::array<std::uint32_t, 2> gradient_reads{0b10, 0b01};
  // d/da (a . b) = g b, d/db (a . b) = g a
  static auto backward(const auto& a, const auto& b, const auto&, const auto& g) {
    return grads{detail::gradient_reading(b, [&] { return detail::call(mul_op{}, g, b); }),
                 detail::gradient_reading(a, [&] { return detail::call(mul_op{}, g, a); })};
  }
};
template <class A, class B>
requires detail::Operands<A, B>
auto dot(const A& a, const B& b, call_site site = {}) {
  return detail::call_at(site, dot_op{}, a, b);
}

/// The outer product of two 1-D operands: (n) x (m) -> (n, m).
struct outer_op {
  static constexpr const char* name = "outer";
  static constexpr bool elementwise = false;
  static constexpr auto linear = linearity::separately;
  static constexpr auto saves = saved::inputs;
  static auto forward(const auto& a, const auto& b) {
    if constexpr (!std::is_arithmetic_v<std::remove_cvref_t<decltype(a)>>)
      detail::check_vectors(a, b, "outer", false);
    using alg = detail::algebra<decltype(a)>;
    if constexpr (requires { alg::outer(a, b); }) {
      return alg::outer(a, b);
    } else {
      return alg::matmul(alg::unsqueeze(a, 1), alg::unsqueeze(b, 0), "outer");
    }
  }
  static constexpr std::array<std::uint32_t, 2> gradient_reads{0b10, 0b01};
  // d/da (a b^T) = G b, d/db (a b^T) = G^T a
  static auto backward(const auto& a, const auto& b, const auto&, const auto& g) {
    if constexpr (detail::ZeroD<decltype(a)>) {
      return grads{detail::call(mul_op{}, g, b), detail::call(mul_op{}, g, a)};
    } else {
      return grads{
          detail::gradient_reading(b, [&] { return mg::matmul(g, b); }),
          detail::gradient_reading(a, [&] { return mg::matmul(detail::transposed(g), a); })};
    }
  }
};
template <class A, class B>
requires detail::Operands<A, B>
auto outer(const A& a, const B& b, call_site site) {
  return detail::call_at(site, outer_op{}, a, b);
}

using linalg_ops = op_list<matmul_op, dot_op, outer_op>;

}  // namespace mg
