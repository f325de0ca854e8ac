// The static engine's function transforms: mg::grad, mg::value_and_grad, mg::hessian.
//
// f is any generic callable. It is called once with symbolic leaves (mg::arg<I>), which builds
// its expression type; the planner and the sweep then generate the forward and reverse passes
// at compile time. Which evaluator runs depends on the arguments: numbers and expressions here,
// xtensor containers in <metagrad/xtensor.hpp>, mg::tensor in <metagrad/fuse.hpp>.
#pragma once

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include <metagrad/detail/algebra.hpp>
#include <metagrad/detail/sweep.hpp>
#include <metagrad/expr.hpp>
#include <metagrad/ops.hpp>
#include <metagrad/to_string.hpp>

namespace mg {

namespace detail {
// Static-engine expressions are 0-d arrays (grad of grad on scalar functions).
template <class X>
requires Expr<X>
struct algebra_impl<X> : scalar_algebra {
};

// Which evaluator a list of argument types selects. Each family's header specialises
// evaluator<> (numbers and expressions here, xtensor in <metagrad/xtensor.hpp>, mg::tensor in
// <metagrad/fuse.hpp>).
struct scalar_family {};
template <class T>
struct evaluator_family_of {
  using type = void;
};
template <class T>
requires(std::is_floating_point_v<T> || Expr<T>) struct evaluator_family_of<T> {
  using type = scalar_family;
};

template <class... Fs>
struct join_evaluator_family;
template <>
struct join_evaluator_family<> {
  using type = scalar_family;
};
template <class F, class... Fs>
struct join_evaluator_family<F, Fs...> {
  using rest = typename join_evaluator_family<Fs...>::type;
  // scalars mix with anything; any other two families must agree
  using type = std::conditional_t<
      std::is_same_v<F, scalar_family>, rest,
      std::conditional_t<std::is_same_v<rest, scalar_family> || std::is_same_v<rest, F>, F, void>>;
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
struct evaluator<scalar_family> {
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
  using type = scalar_family;
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
struct refine_family<scalar_family, F, N> {
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

/// Gradient of a scalar-valued function, as a new function. With no indices, with respect to
/// every argument (a bare value for one argument, else a std::tuple); `grad<I...>` chooses:
/// ```cpp
/// auto f = [](auto x, auto y) { return (sin(x) * y + exp(x * y)) / (1 + x * x); };
/// auto [dx, dy] = mg::grad(f)(2.0, 3.0);
/// double d0 = mg::grad<0>(f)(2.0, 3.0);
/// double d2 = mg::grad(mg::grad<0>(f))(2.0, 3.0);   // grad of grad, generated at compile time
/// ```
template <std::size_t... I, class F>
constexpr auto grad(F f) {
  return detail::grad_only<F, I...>{{std::move(f), false}};
}

/// Like grad, but returns {value, gradient(s)}:
/// ```cpp
/// auto [v, g] = mg::value_and_grad<0, 1>(f)(2.0, 3.0);   // g is a std::tuple of two
/// ```
template <std::size_t... I, class F>
constexpr auto value_and_grad(F f) {
  return detail::grad_transform<F, I...>{std::move(f), true};
}

namespace detail {
template <class F, class... X, class... V>
constexpr auto jvp_numbers(const F& f, const std::tuple<X...>& primals,
                           const std::tuple<V...>& tangents) {
  static_assert((std::is_floating_point_v<X> && ...) && (std::is_arithmetic_v<V> && ...),
                "metagrad: mg::jvp takes floating-point numbers or xtensor arrays as primals and "
                "tangents (for mg::tensor, mg::autograd::functional::jvp)");
  constexpr std::size_t m = detail::result_count<F, sizeof...(X)>();
  const auto seq = std::index_sequence_for<X...>{};
  if constexpr (detail::returns_tuple_v<F, sizeof...(X)>) {
    return [&]<std::size_t... K>(std::index_sequence<K...>) {
      const auto r =
          std::tuple{detail::jvp_one(detail::component_of<K, F>{f}, primals, tangents, seq)...};
      return std::pair{std::tuple{std::get<K>(r).first...}, std::tuple{std::get<K>(r).second...}};
    }
    (std::make_index_sequence<m>{});
  } else {
    return detail::jvp_one(f, primals, tangents, seq);
  }
}
}  // namespace detail

namespace detail {
template <class F, class... X, class U>
constexpr auto vjp_numbers(const F& f, const std::tuple<X...>& primals, const U& cotangent) {
  static_assert((std::is_floating_point_v<X> && ...),
                "metagrad: mg::vjp takes floating-point numbers or xtensor arrays as primals (for "
                "mg::tensor, mg::autograd::functional::vjp)");
  constexpr std::size_t n = sizeof...(X);
  constexpr bool tuple_valued = detail::returns_tuple_v<F, n>;
  if constexpr (tuple_valued) {
    static_assert(detail::tuple_like<U> && std::tuple_size_v<U> == detail::result_count<F, n>(),
                  "metagrad: vjp takes a tuple of one cotangent per value f returns");
  } else {
    static_assert(std::is_arithmetic_v<U>,
                  "metagrad: the cotangent of a function returning one value is a number");
  }
  using Family = typename detail::refine_family<detail::scalar_family, F, n>::type;
  if constexpr (!tuple_valued && std::is_same_v<Family, detail::scalar_family>) {
    // one forward and one backward sweep, seeded with u
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      auto [y, g] = detail::evaluator<Family>::template value_and_vjp<I...>(
          f,
          [&](const auto& v) { return static_cast<std::remove_cvref_t<decltype(v)>>(cotangent); },
          std::get<I>(primals)...);
      return std::pair{y, detail::bare_or_tuple(std::move(g))};
    }
    (std::make_index_sequence<n>{});
  } else {
    // the gradient of u . f (a function that captured an array runs on the array evaluator)
    const auto weighted = [&f, &cotangent](const auto&... a) {
      if constexpr (tuple_valued) {
        const auto r = f(a...);
        return [&]<std::size_t... K>(std::index_sequence<K...>) {
          return ((std::get<K>(r) * std::get<K>(cotangent)) + ...);
        }
        (std::make_index_sequence<std::tuple_size_v<U>>{});
      } else {
        return f(a...) * cotangent;
      }
    };
    if constexpr (std::is_same_v<Family, detail::scalar_family>) {
      return std::pair{std::apply(f, primals), std::apply(mg::grad(weighted), primals)};
    } else {
      // f holds captured data: its value comes from the family's evaluator (called on numbers,
      // f would return a lazy xtensor expression referring to its own parameters)
      static_assert(!tuple_valued,
                    "metagrad: vjp of a tuple-valued function holding captured arrays is not "
                    "supported yet; take the vjp of each value");
      using T = std::common_type_t<X...>;
      const auto r = std::apply(
          [&](const auto&... x) { return detail::evaluator<Family>::value(f, x...); }, primals);
      return std::pair{static_cast<T>(*r.begin()), std::apply(mg::grad(weighted), primals)};
    }
  }
}
}  // namespace detail

/// Forward mode: `{f(x), J v}`, the value of f at the primals and its derivative along the
/// tangents (one per primal), generated at compile time and computed in one forward sweep, where
/// each node's local derivatives are its op's own backward (Note [Forward mode from the local
/// derivatives]); no reverse pass runs. For f returning a tuple or pair, both are tuples:
/// ```cpp
/// auto [y, ty] = mg::jvp(f, std::tuple{2.0, 3.0}, std::tuple{1.0, 0.0});   // ty = df/dx
/// auto hv = mg::jvp(mg::grad(f), std::tuple{2.0, 3.0}, std::tuple{1.0, 0.5}).second;  // H v
/// ```
/// Primals and tangents are floating-point numbers, or xtensor arrays (then f runs on dual
/// arrays, and the value and tangent come back as xt::xarray: Note [Dual arrays]); for
/// mg::tensor, mg::autograd::functional::jvp.
template <class F, class... X, class... V>
constexpr auto jvp(const F& f, const std::tuple<X...>& primals, const std::tuple<V...>& tangents) {
  static_assert(sizeof...(X) == sizeof...(V), "metagrad: jvp takes one tangent per primal");
  // a function of numbers that holds arrays runs on arrays, as for grad
  using Family =
      typename detail::refine_family<detail::evaluator_family_t<X...>, F, sizeof...(X)>::type;
  if constexpr (detail::TangentFamily<Family>) {
    // arrays: f called on dual arrays (Note [Dual arrays] in detail/xt_dual.hpp)
    return detail::evaluator<Family>::jvp(f, primals, tangents);
  } else {
    return detail::jvp_numbers(f, primals, tangents);
  }
}

/// Reverse mode: `{f(x), u^T J}`, the value of f at the primals and the gradient of
/// `u . f(x)` w.r.t. every primal (a bare value for one primal, else a tuple): for f returning
/// one value, one forward sweep and one backward sweep seeded with u. u is a number for f
/// returning one value, a tuple for f returning a tuple (then the sweeps run on u . f, and f's
/// values come from calling it on the numbers):
/// ```cpp
/// auto [y, g] = mg::vjp(f, std::tuple{2.0, 3.0}, 0.5);   // g = 0.5 * grad(f)(2.0, 3.0)
/// ```
/// With xtensor arrays among the primals, u has f's shape (a number for one value) and the value
/// comes back as an xt::xarray.
template <class F, class... X, class U>
constexpr auto vjp(const F& f, const std::tuple<X...>& primals, const U& cotangent) {
  using Family = detail::evaluator_family_t<X...>;
  if constexpr (detail::TangentFamily<Family>) {
    // arrays: the gradient of sum(u * f), with u of f's shape (or a number for one value)
    return detail::evaluator<Family>::vjp_value(f, primals, cotangent);
  } else {
    return detail::vjp_numbers(f, primals, cotangent);
  }
}

/// The Jacobian: `mg::jacobian(f)(x...)` is, for each value f returns, its gradient w.r.t. every
/// argument (as mg::grad gives it: a bare value for one argument, else a tuple). For f returning
/// one value it is grad(f); for f returning a tuple of m values, a tuple of m rows:
/// ```cpp
/// auto polar = [](auto r, auto t) { return std::tuple{r * cos(t), r * sin(t)}; };
/// auto [dx, dy] = mg::jacobian(polar)(2.0, 0.5);   // dx = {cos t, -r sin t}, dy = {...}
/// ```
template <class F>
constexpr auto jacobian(F f) {
  return detail::jacobian_transform<F>{std::move(f)};
}

/// Second derivative of a scalar function with respect to argument I: grad<I>(grad<I>(f)).
/// With mg::tensor arguments argument I must have one element (for the Hessian matrix of a
/// function of a tensor, see mg::autograd::functional::hessian):
/// ```cpp
/// double d2 = mg::hessian<0>(f)(2.0, 3.0);
/// mg::tensor t = mg::hessian<0>([](auto x) { return x * x * x; })(mg::tensor(2.0, mg::f64));   // 12
/// ```
template <std::size_t I, class F>
constexpr auto hessian(F f) {
  return detail::hessian_transform<F, I>{grad<I>(grad<I>(std::move(f)))};
}

/// The Hessian matrix of a scalar function of several numbers: jacobian(grad(f)), a tuple of
/// rows (each a tuple), generated at compile time:
/// ```cpp
/// auto [hx, hy] = mg::hessian(f)(2.0, 3.0);   // hx = {d2f/dx2, d2f/dxdy}
/// ```
template <class F>
constexpr auto hessian(F f) {
  return jacobian(grad(std::move(f)));
}

}  // namespace mg

// mg::repeat needs the evaluators above (Note [Scan] in detail/scan.hpp). Reached from
// detail/scan.hpp, which includes this header first, it is included at the end of scan.hpp
// instead, once scan's declarations exist (so every header compiles on its own).
#ifndef MG_DETAIL_SCAN_INCLUDES_STATIC
#include <metagrad/repeat.hpp>
#endif
