// The static engine's transforms (what <metagrad/static.hpp>'s public functions are made of): the
// objects mg::grad, mg::value_and_grad, mg::jacobian and mg::hessian return, which run the
// evaluator of their arguments' family (static/family.hpp; the number family's is included here,
// the others come with their headers). The loop node (static/scan.hpp) and the xtensor
// evaluator (xt/) build on them.
#pragma once

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include <metagrad/core/algebra.hpp>
#include <metagrad/core/dispatch.hpp>
#include <metagrad/expr.hpp>
#include <metagrad/ops.hpp>
#include <metagrad/static/family.hpp>
#include <metagrad/static/number_family.hpp>
#include <metagrad/static/sweep.hpp>
#include <metagrad/to_string.hpp>

namespace mg {

namespace detail {
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
  MG_INLINE constexpr auto operator()(const A&... args) const {
    return run<true>(args...);
  }

  // ValueToo: {value, gradient(s)} (mg::value_and_grad); else the gradient(s) alone (mg::grad).
  template <bool ValueToo, class... A>
  MG_INLINE constexpr auto run(const A&... args) const {
    using Family = typename refine_family<evaluator_family_t<A...>, F, sizeof...(A)>::type;
    static_assert(!std::is_void_v<Family>,
                  "metagrad: grad takes floating-point numbers, xtensor containers or mg::tensor "
                  "arguments of one family (numbers may mix with either)");
    static_assert(HasEvaluator<Family>,
                  "metagrad: include <metagrad/metagrad.hpp> (or the header of this argument "
                  "family) to differentiate with these arguments");
    static_assert(((I < sizeof...(A)) && ...),
                  "metagrad: grad<I...> names an argument index the call does not have");
    // an evaluator that builds the final results in place says so (xt/array_family.hpp): no copy of
    // them
    constexpr bool in_place = requires { evaluator<Family>::builds_final_result; };
    return [&]<std::size_t... J>(std::index_sequence<J...>) MG_LAMBDA_INLINE {
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
