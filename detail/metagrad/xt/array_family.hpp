// The array family: xtensor arrays (xt::xtensor, xt::xtensor_fixed, xt::xarray and
// expressions), mixed freely with float/double arguments. Its hooks: the evaluator family of
// arrays, the family of expressions holding captured arrays, apply_in (the elementwise ops as
// regions of one op) and evaluator<array_family>, which picks a path at compile time from the
// expression type and at run time from the shapes:
// - fused (xt/fused_paths.hpp): when f is `sum(elementwise expression)` and the array arguments
//   share one shape, forward and backward run together in ONE loop over SIMD packs; every
//   intermediate lives in registers and each argument's gradient is written once. This is the
//   loop one would write by hand. With shaped boundaries (matmul, sums along an axis), the
//   boundaries first (xt/boundaries.hpp).
// - general (xt/general.hpp): otherwise (broadcasting, sum along an axis, matmul, non-sum roots).
//   Every maximal elementwise subtree is one region (Note [Regions] in xt/region.hpp): one SIMD
//   loop forward, one backward, broadcasting between its inputs. The values of the regions and of
//   the shaped ops are materialised once as xt::xarray, and broadcast gradients are summed back
//   to each argument's shape.
// The transforms beyond grad (jvp, vjp, jacobian, hessian) come from tangent_transforms
// (xt/transforms.hpp).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#include <xtensor/xtensor.hpp>
#include <xtensor/xview.hpp>

#include <metagrad/static/evaluator.hpp>
#include <metagrad/static/scan_rows.hpp>
#include <metagrad/xt/algebra.hpp>
#include <metagrad/xt/boundaries.hpp>
#include <metagrad/xt/fused.hpp>
#include <metagrad/xt/region.hpp>
#include <metagrad/xt/transforms.hpp>

namespace mg::detail {

template <class T>
requires XtExpr<T>
struct evaluator_family_of<T> {
  using type = array_family;
};

// Note [Captured arrays]: an array a traced function reads from outside (`[&y](auto mu) { return
// sum(y - mu); }`) meets a symbolic value in an op, and becomes a constant of the expression:
// cst<A> holding a copy of the array (or of the xtensor expression, which refers to its own
// operands). The families join (dispatch.hpp), the operators of <metagrad/xtensor.hpp> win over
// xtensor's own, a function of numbers holding such a constant is differentiated by the array
// evaluator (constants_family), and a region takes the constant as one of its inputs
// (xt/region.hpp).
template <class E>
requires has_array_constant_v<E>
struct constants_family<E> {
  using type = array_family;
};

// The array family of detail::call: an elementwise op applied to xtensor arrays (in the backward
// of a reduction, on the general path) runs as a region of one op, so its body only ever sees
// numbers and packs (Note [Lazy locals]) and comparisons are elementwise (xtensor's == is not);
// comparisons give 0/1 in the region's type. Any other op evaluates its forward on the arrays.
template <class Op, class... X>
auto apply_in(array_family, const Op& op, const X&... x) {
  if constexpr (is_elementwise<Op>()) {
    return [&]<std::size_t... k>(std::index_sequence<k...>) {
      using Inner = node<Op, arg<k>...>;
      return region_op<Inner, sizeof...(X)>{Inner{op, {}}}.forward(x...);
    }
    (std::index_sequence_for<X...>{});
  } else {
    return op.forward(x...);
  }
}

template <class L, class R>
concept ArrayWithExpr = (XtExpr<L> && (Expr<R> || is_dual_v<std::remove_cvref_t<R>>)) ||
                        ((Expr<L> || is_dual_v<std::remove_cvref_t<L>>)&&XtExpr<R>);

// A captured array becomes a captured_array (xt/region.hpp): a container of its elements whose
// type names no xtensor type as a template argument, so that argument-dependent lookup on an
// expression holding it finds metagrad's functions only (xt::sum would otherwise compete with
// mg::sum for `sum(y - mu)`).
template <class T>
requires XtExpr<T>
struct constant_traits<T> {
  using type = captured_array<xt_value_t<T>, static_rank_v<T>>;
  static type make(const T& a) { return type{typename type::array_type(a)}; }
};

// The rows of an xtensor array for mg::repeat (Note [Per-step inputs] in static/scan_rows.hpp):
// its first dimension is the steps. Row k of a 1-D array is a number; of a higher-rank one, a
// container of the other dimensions (xt::xtensor of one rank less, or an xt::xarray where the type
// does not fix the rank: then a 0-d one for a 1-D array).
template <class X>
requires XtExpr<X>
struct rows_traits<X> {
  using value_type = std::remove_cv_t<xt_value_t<X>>;
  static constexpr std::size_t rank = static_rank_v<X>;  // 0: the type does not fix it
  using stored =
      std::conditional_t<rank == 0, xt::xarray<value_type>, xt::xtensor<value_type, rank>>;
  static stored store(const X& x) {
    if (x.dimension() == 0) fail("mg::repeat: xs is a 0-d array; its first dimension is the steps");
    return stored(x);
  }
  static std::size_t count(const stored& x) { return x.shape()[0]; }
  static auto row(const stored& x, std::size_t k) {
    if constexpr (rank == 1) {
      return x(k);
    } else if constexpr (rank == 0) {
      return xt::xarray<value_type>(xt::view(x, k));
    } else {
      return xt::xtensor<value_type, rank - 1>(xt::view(x, k));
    }
  }
};

// Note [Scalar results]: mg::grad and mg::value_and_grad differentiate a function whose value is
// one number. An elementwise expression of an array whose type fixes its rank (xt::xtensor<T, N>,
// xt::xtensor_fixed, or such an array captured) is an array of at least that rank: the function
// has forgotten its reduction, and compiling says so in one sentence. Where the types do not fix
// the rank (xt::xarray, or a shaped op or reduction at the root), the run-time check of
// xt/general.hpp stays: a 0-d or one-element array passes, anything else is an mg::error.
// least_rank_v<E, Args> is a lower bound of the rank of E's value: 0 where the types do not say.
template <class X>
constexpr std::size_t least_rank_of_type() {
  if constexpr (XtExpr<X>) {
    return static_rank_v<X>;  // 0 for a rank the type does not fix
  } else {
    return 0;
  }
}
template <class E, class Args>
inline constexpr std::size_t least_rank_v = 0;
template <std::size_t I, class... A>
inline constexpr std::size_t least_rank_v<arg<I>, std::tuple<A...>> =
    least_rank_of_type<std::remove_cvref_t<std::tuple_element_t<I, std::tuple<A...>>>>();
template <class T, std::size_t R, class Args>
inline constexpr std::size_t least_rank_v<cst<captured_array<T, R>>, Args> = R;
template <class Op, class... C, class Args>
inline constexpr std::size_t least_rank_v<node<Op, C...>, Args> =
    is_elementwise<Op>() ? std::max({std::size_t{0}, least_rank_v<C, Args>...}) : 0;

template <class F, class... A>
constexpr void require_scalar_result() {
  static_assert(least_rank_v<traced_t<F, sizeof...(A)>, std::tuple<A...>> == 0,
                "metagrad: mg::grad needs a function whose value is one number, and this one "
                "returns an array: reduce it (mg::sum, mg::mean), or use mg::vjp or mg::jacobian");
}

template <>
struct evaluator<array_family> : tangent_transforms<array_family>, array_boundaries {
  template <std::size_t... I, class F, class... A>
  static auto value_and_grad(const F& f, const A&... args) {
    return value_and_grad_as<pair_of_tuple, I...>(f, args...);
  }
  // mg::value_and_grad's and mg::grad's own results: {value, gradient} (or the gradient alone)
  // for one index, a tuple for several. Built in place by the fused loops, so that a fixed-size
  // gradient (xt::xtensor_fixed) is never copied on its way out (grad_transform and grad_only
  // take these when an evaluator says builds_final_result).
  static constexpr bool builds_final_result = true;
  template <std::size_t... I, class F, class... A>
  static auto value_and_grad_final(const F& f, const A&... args) {
    require_scalar_result<F, A...>();
    return value_and_grad_as<pair_final, I...>(f, args...);
  }
  template <std::size_t... I, class F, class... A>
  static auto grad_final(const F& f, const A&... args) {
    require_scalar_result<F, A...>();
    return value_and_grad_as<gradients_only, I...>(f, args...);
  }

 private:
  template <int Form, std::size_t... I, class F, class... A>
  static auto value_and_grad_as(const F& f, const A&... args) {
    using E = traced_t<F, sizeof...(A)>;
    const E e = trace(f, std::index_sequence_for<A...>{});
    if constexpr (fused_sum_v<E, std::tuple<A...>>) {
      if (full_sum(e) && loop_shapes_agree(args...)) return fused<Form, I...>(e, args...);
    } else if constexpr (epilogue_v<E, std::tuple<A...>>) {  // Note [Scalar epilogue]
      const auto s = epilogue_sum<std::tuple<A...>>(e);
      if (full_sum(s) && loop_shapes_agree(args...))
        return fused_epilogue<Form, I...>(e, s, args...);
    }
    if constexpr (boundary_sum_v<E, std::tuple<A...>>) {  // Note [Shaped boundaries]
      return boundaries_or_general<Form, I...>(e, args...);
    } else {
      using T = std::common_type_t<typename value_of<A>::type...>;
      T value{};
      return general<Form, I...>(e, value, args...);
    }
  }
};

}  // namespace mg::detail
