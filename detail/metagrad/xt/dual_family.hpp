// Forward mode on xtensor arrays: mg::dual_array, the dual family of detail::call, and the
// evaluator that runs the static engine's reverse sweep on dual arrays (forward over reverse).
//
// Note [Dual arrays]: a dual_array holds a value and its tangent (the derivative of the value
// along one direction in the arguments), both arrays of the value's shape (a number is a 0-d
// array). Every op applied to dual arrays computes its value on the values, as on plain arrays,
// and its tangent J t from the op's own declaration; no op has a formula of its own for it:
// - an elementwise op: the sum over dual inputs j of d op / d x_j (its backward at the seed 1,
//   component j) times t_j, in one region (one SIMD loop that broadcasts, Note [Regions]);
// - a linear op (`linear = mg::linearity::jointly`: reshape, sum, cat, ...): op(tangents), with
//   zeros for inputs that have none; `separately` (matmul, dot, outer): the sum over dual inputs
//   j of op(inputs with input j replaced by t_j);
// - a reduction (a `reduce_dims r` member: prod, max, min, norm, var): each output element reads
//   one slice, so its tangent is the sum over the slice of the local derivative (backward at the
//   seed 1) times t;
// - any other op (a custom op with shapes): row i of its Jacobian is its backward at the seed
//   e_i, so its tangent costs one backward per output element (one for a full reduction).
// Comparisons and other ops without a gradient return plain arrays.
//
// A function of arrays called on dual arrays computes its value and its directional derivative
// in one pass (mg::jvp). The static engine's reverse sweep run on dual arrays (evaluator<
// dual_family>: a backward written with the ops' public functions applies them to dual arrays
// too) gives the gradient and its derivative along the tangent, a Hessian-vector product
// (mg::jvp of mg::grad); one such pass per basis vector gives mg::hessian. Tangents of tangents
// are not supported: a dual array's parts are plain arrays.
#pragma once

#include <algorithm>
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include <metagrad/concepts.hpp>
#include <metagrad/core/dispatch.hpp>
#include <metagrad/dual_array.hpp>
#include <metagrad/error.hpp>
#include <metagrad/ops.hpp>
#include <metagrad/static/evaluator.hpp>
#include <metagrad/static/sweep.hpp>
#include <metagrad/xt/algebra.hpp>
#include <metagrad/xt/dual_blocks.hpp>
#include <metagrad/xt/dual_tangents.hpp>
#include <metagrad/xt/pool.hpp>

namespace mg {

namespace detail {

// The dual family of detail::call (Note [Dual arrays]).
template <class Op, class... X>
auto apply_in(dual_family, const Op& op, const X&... x) {
  using T = dual_value_t<X...>;
  if constexpr (!is_differentiable<Op>()) {
    return xt_policy::keep<Op>(call(op, primal(x)...));
  } else {
    auto y0 = xt_policy::keep<Op>(call(op, primal(x)...));  // a number or an array
    const std::size_t b = std::max({block_of(x)...});       // Note [Blocks of directions]
    if (b > 0) {
      work_array<T> t = block_rule<T, Op, X...>::of(op, y0, b, x...);
      return dual_array<T>{as_work<T>(std::move(y0)), std::move(t)};
    }
    work_array<T> t = tangent_rule<T, Op, X...>::of(op, y0, x...);
    work_array<T> y = as_work<T>(std::move(y0));
    if (!std::equal(t.shape().begin(), t.shape().end(), y.shape().begin(), y.shape().end()))
      t = work_array<T>(xt::broadcast(t, y.shape()));
    return dual_array<T>{std::move(y), std::move(t)};
  }
}

// Backward formulas read shapes (and, for max and min, positions along a dim) of dual arrays.
template <class T>
struct algebra_impl<dual_array<T>> {
  static shape_t shape(const dual_array<T>& x) { return algebra<work_array<T>>::shape(x.value); }
  static auto iota(const dual_array<T>& x, std::size_t d) {
    return algebra<work_array<T>>::iota(x.value, d);
  }
  static auto top_positions(const dual_array<T>& x, const shape_t& as, std::size_t d,
                            std::int64_t k, pick p) {
    return algebra<work_array<T>>::top_positions(x.value, as, d, k, p);
  }
  static auto index_array(const std::vector<std::int64_t>& v, const shape_t& shape) {
    return algebra<work_array<T>>::index_array(v, shape);
  }
};

// The static engine's sweep on dual arrays: xt_policy, with dual gradients summed to the shape
// of the value they belong to by the sum_to op (whose tangent follows), and shape-only stand-ins
// for dual arrays as for arrays.
struct dual_policy : xt_policy {
  template <class G, class X>
  static auto reduce_like(G&& g, const X& x) {
    using U = std::remove_cvref_t<G>;
    if constexpr (is_dual_v<U>) {
      const shape_t xs = shape_of(x);
      if (std::equal(xs.begin(), xs.end(), g.value.shape().begin(), g.value.shape().end()))
        return U(std::forward<G>(g));
      return U(call(sum_to_op{xs}, g));
    } else {
      return xt_policy::reduce_like(std::forward<G>(g), primal(x));
    }
  }
  // a dual array that no wanted gradient reads (Note [Wanted gradients]: the operand of a
  // matmul with a constant) is a shape-only stand-in for its value, so the constant's gradient
  // is not computed
  using xt_policy::unread;
  template <class X>
  requires is_dual_v<X>
  static auto unread(const X& x) { return xt_policy::unread(x.value); }
};

// grad and value_and_grad at dual arrays: the reverse sweep of the traced function, every value
// and adjoint a dual array, so each gradient comes with its derivative along the arguments'
// tangents (forward over reverse). f must have one value.
template <>
struct evaluator<dual_family> {
  template <std::size_t... I, class F, class... A>
  static auto value_and_grad(const F& f, const A&... args) {
    static_assert(!Transform<F>,
                  "metagrad: derivatives of third order on arrays are not supported (second "
                  "order is: mg::hessian, mg::jvp of mg::grad)");
    using T = dual_value_t<A...>;
    if constexpr (Transform<F>) {  // after the assertion: no cascade
      return std::pair{dual_array<T>{}, std::tuple{(void(I), dual_array<T>{})...}};
    } else {
      return sweep_grad<T, I...>(f, args...);
    }
  }

 private:
  template <class T, std::size_t... I, class F, class... A>
  static auto sweep_grad(const F& f, const A&... args) {
    using E = traced_t<F, sizeof...(A)>;
    const E e = trace(f, std::index_sequence_for<A...>{});
    using Args = tuple<const A&...>;
    const Args a{{args}...};
    sweep<E, Args, dual_policy, dual_array<T>> s(e, a);
    s.forward();
    dual_array<T> value = as_dual<T>(s.result());
    if (value.value.size() != 1)
      fail("grad: the function's value has shape ", shape_string(shape_of(value)),
           "; grad differentiates a function with one value (for arrays: mg::jacobian)");
    dual_array<T> seed = as_dual<T>(value.value);
    seed.value.fill(T(1));
    s.backward(seed);
    const auto all = std::forward_as_tuple(args...);
    if constexpr (distinct_indices<I...>()) {  // each adjoint is read once: Note [Handing over]
      return std::pair{std::move(value), std::tuple{as_dual<T>(s.template take_gradient<I>(
                                             seed, zero_of<T>(std::get<I>(all))))...}};
    } else {
      return std::pair{
          std::move(value),
          std::tuple{as_dual<T>(s.template gradient<I>(seed, zero_of<T>(std::get<I>(all))))...}};
    }
  }

  template <class T, class A>
  static dual_array<T> zero_of(const A& a) {
    dual_array<T> z = as_dual<T>(primal(a));
    z.value.fill(T(0));
    return z;
  }
};
template <class T>
struct evaluator_family_of<dual_array<T>> {
  using type = dual_family;
};

}  // namespace detail
}  // namespace mg
