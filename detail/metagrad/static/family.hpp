// What every evaluator family of the static engine shares: the family of a call's arguments
// (evaluator_family_of, joined), the primary evaluator<Family> each family's file specialises,
// the family of an expression's constants and the refinement it makes (refine_family), and the
// tracing of a function into an expression (trace, traced_t).
#pragma once

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include <metagrad/core/algebra.hpp>
#include <metagrad/core/dispatch.hpp>
#include <metagrad/expr.hpp>
#include <metagrad/ops.hpp>
#include <metagrad/static/sweep.hpp>

namespace mg::detail {
// Static-engine expressions are 0-d arrays (grad of grad on scalar functions).
template <class X>
requires Expr<X>
struct algebra_impl<X> : scalar_algebra {
};

// Which evaluator a list of argument types selects, named by the family tags of detail::call
// (core/dispatch.hpp). Each family's file specialises evaluator_family_of for its types and
// defines evaluator<its family>: number_family (numbers, and expressions being traced:
// static/number_family.hpp), array_family (xtensor arrays: xt/array_family.hpp), dual_family
// (xt/dual_family.hpp) and tensor_family (mg::tensor: api/tensor_family.hpp).
template <class T>
struct evaluator_family_of {
  using type = void;
};

template <class... Fs>
struct join_evaluator_family;
template <>
struct join_evaluator_family<> {
  using type = number_family;
};
template <class F, class... Fs>
struct join_evaluator_family<F, Fs...> {
  using rest = typename join_evaluator_family<Fs...>::type;
  // scalars mix with anything; any other two families must agree
  using type = std::conditional_t<
      std::is_same_v<F, number_family>, rest,
      std::conditional_t<std::is_same_v<rest, number_family> || std::is_same_v<rest, F>, F, void>>;
};
template <class... Args>
using evaluator_family_t = typename join_evaluator_family<
    typename evaluator_family_of<std::remove_cvref_t<Args>>::type...>::type;

template <class Family>
struct evaluator;  // primary: no evaluator for these arguments

template <class Family>
concept HasEvaluator = requires {
  sizeof(evaluator<Family>);
};

template <class F, std::size_t... I>
MG_HD MG_INLINE constexpr auto trace(const F& f, std::index_sequence<I...>) {
  return as_expr(f(arg<I>{}...));
}
template <class F, std::size_t N>
using traced_t = decltype(trace(std::declval<const F&>(), std::make_index_sequence<N>{}));

template <class V>
MG_HD constexpr auto one_like(const V&) {
  if constexpr (Expr<V>) {
    return cst<known<1>>{};
  } else {
    return V(1);
  }
}
template <class A>
MG_HD constexpr auto zero_like(const A&) {
  if constexpr (Expr<A>) {
    return cst<known<0>>{};
  } else {
    return A(0);
  }
}
// Gradients come back in the argument's type.
template <class A, class G>
MG_HD constexpr auto as_arg_type(G&& g) {
  if constexpr (std::is_arithmetic_v<A>) {
    return static_cast<A>(g);
  } else {
    return std::remove_cvref_t<G>(std::forward<G>(g));
  }
}

template <class T>
constexpr auto bare_or_tuple(T&& t) {
  if constexpr (std::tuple_size_v<std::remove_cvref_t<T>> == 1) {
    return std::get<0>(std::forward<T>(t));
  } else {
    return std::forward<T>(t);
  }
}

// The family of the data among an expression's constants: numbers, unless a family's header says
// otherwise (xt/array_family.hpp for captured arrays: Note [Captured arrays]).
template <class E>
struct constants_family {
  using type = number_family;
};
// The family whose evaluator differentiates F at arguments of family Family: for numbers, the
// family of F's constants (a function of numbers that captured an array runs on arrays).
template <class Family, class F, std::size_t N>
struct refine_family {
  using type = Family;
};
// The function a transform differentiates (the function itself for others): a transform's
// family is that of the function inside it, which is traced, not the transform.
template <class F>
struct innermost {
  using type = F;
};
template <class F>
requires requires { typename F::mg_inner; }
struct innermost<F> {
  using type = typename innermost<typename F::mg_inner>::type;
};

}  // namespace mg::detail
