// The static engine's evaluators and transforms (what <metagrad/static.hpp>'s public functions
// are made of): the evaluator family of a call's arguments, evaluator<number_family> (plain
// sweeps on numbers), and the transform objects mg::grad, mg::value_and_grad, mg::jacobian and
// mg::hessian return. The loop node (static/scan.hpp) and the xtensor evaluator (xt/) build on
// them.
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
#include <metagrad/to_string.hpp>

namespace mg {

namespace detail {
// Static-engine expressions are 0-d arrays (grad of grad on scalar functions).
template <class X>
requires Expr<X>
struct algebra_impl<X> : scalar_algebra {
};

// Which evaluator a list of argument types selects, named by the family tags of detail::call
// (core/dispatch.hpp): number_family (numbers, and expressions being traced: evaluator<> here),
// array_family (xtensor arrays: <metagrad/xtensor.hpp>), dual_family (xt/dual.hpp) and
// tensor_family (mg::tensor: <metagrad/fuse.hpp>).
template <class T>
struct evaluator_family_of {
  using type = void;
};
template <class T>
requires(std::is_floating_point_v<T> || Expr<T>) struct evaluator_family_of<T> {
  using type = number_family;
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

template <>
struct evaluator<number_family> {
  template <std::size_t... I, class F, class... A>
  MG_INLINE static constexpr auto value_and_grad(const F& f, const A&... args) {
    return value_and_vjp<I...>(
        f, [](const auto& v) { return one_like(v); }, args...);
  }

  // {f(args), seed * gradient}, one forward and one backward sweep; seed_of(value) is the seed.
  template <std::size_t... I, class F, class SeedOf, class... A>
  MG_INLINE static constexpr auto value_and_vjp(const F& f, SeedOf seed_of, const A&... args) {
    using E = traced_t<F, sizeof...(A)>;
    const E e = trace(f, std::index_sequence_for<A...>{});
    const tuple<A...> a{{args}...};
    using V = typename sweep_types<E, tuple<A...>, plain_policy,
                                   int>::template val_t<plan_v<E>.nslots - 1>;
    using Seed = decltype(seed_of(std::declval<const V&>()));
    sweep<E, tuple<A...>, plain_policy, Seed> s(e, a);
    s.forward();
    const Seed seed = seed_of(s.result());
    s.backward(seed);
    using Args = std::tuple<A...>;
    return std::pair{s.result(), std::tuple{as_arg_type<std::tuple_element_t<I, Args>>(
                                     s.template gradient<I>(seed, zero_like(at<I>(a))))...}};
  }
};

// The family of the data among an expression's constants: numbers, unless a family's header says
// otherwise (<metagrad/xtensor.hpp> for captured arrays: Note [Captured arrays]).
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
template <class F, std::size_t N>
struct refine_family<number_family, F, N> {
  using type = typename constants_family<traced_t<typename innermost<F>::type, N>>::type;
};

// Is F one of the transforms below (a function that is not traced, but computes derivatives;
// component_of is one when the function inside it is)?
template <class F>
concept Transform = requires {
  requires bool(F::mg_transform);
};

// Does a family's evaluator differentiate a transform by tangents (arrays: Note [Dual arrays])?
template <class Family>
concept TangentFamily = requires {
  evaluator<Family>::by_tangents;
};

template <class F, std::size_t... I>
struct grad_transform {
  static constexpr bool mg_transform = true;
  using mg_inner = F;
  F f;
  bool with_value;

  template <class... A>
  constexpr auto operator()(const A&... args) const {
    return run<true>(args...);
  }

  // ValueToo: {value, gradient(s)} (mg::value_and_grad); else the gradient(s) alone (mg::grad).
  template <bool ValueToo, class... A>
  constexpr auto run(const A&... args) const {
    using Family = typename refine_family<evaluator_family_t<A...>, F, sizeof...(A)>::type;
    static_assert(!std::is_void_v<Family>,
                  "metagrad: grad takes floating-point numbers, xtensor containers or mg::tensor "
                  "arguments of one family (numbers may mix with either)");
    static_assert(HasEvaluator<Family>,
                  "metagrad: include <metagrad/metagrad.hpp> (or the header of this argument "
                  "family) to differentiate with these arguments");
    static_assert(((I < sizeof...(A)) && ...),
                  "metagrad: grad<I...> names an argument index the call does not have");
    // an evaluator that builds the final results in place says so (xtensor.hpp): no copy of them
    constexpr bool in_place = requires { evaluator<Family>::builds_final_result; };
    return [&]<std::size_t... J>(std::index_sequence<J...>) {
      if constexpr (Transform<F> && TangentFamily<Family>) {
        // the gradient of a gradient on arrays: forward mode over f (Note [Dual arrays])
        return evaluator<Family>::template grad_by_tangents<ValueToo, J...>(f, args...);
      } else if constexpr (in_place && ValueToo) {
        return evaluator<Family>::template value_and_grad_final<J...>(f, args...);
      } else if constexpr (in_place) {
        return evaluator<Family>::template grad_final<J...>(f, args...);
      } else {
        auto [v, g] = evaluator<Family>::template value_and_grad<J...>(f, args...);
        if constexpr (ValueToo) {
          return std::pair{std::move(v), bare_or_tuple(std::move(g))};
        } else {
          return bare_or_tuple(std::move(g));
        }
      }
    }
    (std::conditional_t<sizeof...(I) == 0, std::index_sequence_for<A...>,
                        std::index_sequence<I...>>{});
  }
};

// Is R (what a traced function returns) a tuple or pair of values rather than one value?
template <class R>
concept tuple_like = requires {
  std::tuple_size<std::remove_cvref_t<R>>::value;
};

// Component K of f's result, as a function (f itself when f returns one value).
template <std::size_t K, class F>
struct component_of {
  static constexpr bool mg_transform = Transform<F>;
  using mg_inner = F;
  F f;
  template <class... A>
  constexpr auto operator()(const A&... a) const {
    if constexpr (tuple_like<decltype(f(a...))>) {
      return std::get<K>(f(a...));
    } else {
      return f(a...);
    }
  }
};

// Does f, traced with N arguments, return a tuple or pair? How many values (1 for one value)?
template <class F, std::size_t... I>
auto traced_result(std::index_sequence<I...>) -> decltype(std::declval<const F&>()(arg<I>{}...));
template <class F, std::size_t N>
inline constexpr bool returns_tuple_v =
    tuple_like<decltype(traced_result<F>(std::make_index_sequence<N>{}))>;
template <class F, std::size_t N>
constexpr std::size_t result_count() {
  using R = decltype(traced_result<F>(std::make_index_sequence<N>{}));
  if constexpr (tuple_like<R>) {
    return std::tuple_size_v<std::remove_cvref_t<R>>;
  } else {
    return 1;
  }
}

// Note [Forward mode from the local derivatives] (sweep.hpp), for one value of f.
template <class F, class... X, class... V, std::size_t... I>
constexpr auto jvp_one(const F& f, const std::tuple<X...>& x, const std::tuple<V...>& v,
                       std::index_sequence<I...> seq) {
  using E = traced_t<F, sizeof...(X)>;
  const E e = trace(f, seq);
  const tuple<X...> a{{std::get<I>(x)}...};
  const tuple<V...> t{{std::get<I>(v)}...};
  using R =
      typename sweep_types<E, tuple<X...>, plain_policy, int>::template val_t<plan_v<E>.nslots - 1>;
  sweep<E, tuple<X...>, plain_policy, R> s(e, a);
  s.forward();
  return std::pair{s.result(), s.tangent(t)};
}

template <class F, std::size_t... I>
struct grad_only {
  static constexpr bool mg_transform = true;
  using mg_inner = F;
  grad_transform<F, I...> inner;
  template <class... A>
  constexpr auto operator()(const A&... args) const {
    return inner.template run<false>(args...);
  }
};

// grad<I>(grad<I>(f)); a family whose evaluator has check_hessian<I> (mg::tensor) first checks
// that the inner gradient can be differentiated by the outer grad.
template <class F, std::size_t I>
struct hessian_transform {
  static constexpr bool mg_transform = true;
  using mg_inner = F;
  grad_only<grad_only<F, I>, I> inner;
  template <class... A>
  constexpr auto operator()(const A&... args) const {
    using Family = typename refine_family<evaluator_family_t<A...>, F, sizeof...(A)>::type;
    if constexpr (TangentFamily<Family>) {
      // arrays: the block of argument I of the Hessian matrix (Note [Dual arrays])
      return evaluator<Family>::template jacobian<I>(inner.inner.f, args...);
    } else {
      if constexpr (HasEvaluator<Family>)
        if constexpr (requires { evaluator<Family>::template check_hessian<I>(args...); })
          evaluator<Family>::template check_hessian<I>(args...);
      return inner(args...);
    }
  }
};

// mg::jacobian's function: on numbers a grad per value of f, on arrays forward mode.
template <class F>
struct jacobian_transform {
  static constexpr bool mg_transform = true;
  using mg_inner = F;
  F f;
  template <class... X>
  constexpr auto operator()(const X&... x) const {
    using Family = typename refine_family<evaluator_family_t<X...>, F, sizeof...(X)>::type;
    if constexpr (TangentFamily<Family>) {
      return evaluator<Family>::jacobian(f, x...);
    } else {
      constexpr std::size_t m = result_count<F, sizeof...(x)>();
      if constexpr (!returns_tuple_v<F, sizeof...(x)>) {
        return grad_only<F>{{f, false}}(x...);
      } else {
        return [&]<std::size_t... K>(std::index_sequence<K...>) {
          return std::tuple{grad_only<component_of<K, F>>{{component_of<K, F>{f}, false}}(x...)...};
        }
        (std::make_index_sequence<m>{});
      }
    }
  }
};
}  // namespace detail

}  // namespace mg
