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

#include <metagrad/core/algebra.hpp>
#include <metagrad/expr.hpp>
#include <metagrad/ops.hpp>
#include <metagrad/static/evaluator.hpp>
#include <metagrad/static/sweep.hpp>
#include <metagrad/to_string.hpp>

namespace mg {

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
  using Family = typename detail::refine_family<detail::number_family, F, n>::type;
  if constexpr (!tuple_valued && std::is_same_v<Family, detail::number_family>) {
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
    if constexpr (std::is_same_v<Family, detail::number_family>) {
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
    // arrays: f called on dual arrays (Note [Dual arrays] in xt/dual_family.hpp)
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
/// mg::tensor t = mg::hessian<0>([](auto x) { return x * x * x; })(mg::tensor(2.0, mg::f64));   //
/// 12
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

#include <metagrad/repeat.hpp>  // mg::repeat, built on static/evaluator.hpp
