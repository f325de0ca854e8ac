// The static engine on xtensor arrays (xt::xtensor, xt::xtensor_fixed, xt::xarray and
// expressions), mixed freely with float/double arguments.
//
// Two evaluators, chosen at compile time from the expression type and at run time from the
// shapes:
// - fused: when f is `sum(elementwise expression)` and the array arguments share one shape,
//   forward and backward run together in ONE loop over SIMD packs (xsimd through
//   detail/simd.hpp); every intermediate lives in registers and each argument's gradient is
//   written once. This is the loop one would write by hand.
// - general: otherwise (broadcasting, sum along an axis, matmul, non-sum roots). Every maximal
//   elementwise subtree is one region (Note [Regions] in detail/xt_region.hpp): one SIMD loop
//   forward, one backward, broadcasting between its inputs. The values of the regions and of
//   the shaped ops are materialised once as xt::xarray, and broadcast gradients are summed back
//   to each argument's shape.
#pragma once

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include <xtensor/xarray.hpp>

#include <metagrad/concepts.hpp>
#include <metagrad/detail/simd.hpp>
#include <metagrad/detail/xt_algebra.hpp>
#include <metagrad/detail/xt_region.hpp>
#include <metagrad/error.hpp>
#include <metagrad/static.hpp>

namespace mg {

namespace detail {
struct xtensor_family {};

template <class T>
requires XtExpr<T>
struct evaluator_family_of<T> {
  using type = xtensor_family;
};

// Is every node of E elementwise (no shaped op anywhere)?
template <class E>
inline constexpr bool all_elementwise_v = true;
template <class Op, class... A>
inline constexpr bool all_elementwise_v<node<Op, A...>> = is_elementwise<Op>() &&
                                                          (all_elementwise_v<A> && ...);

// Note [Captured arrays]: an array a traced function reads from outside (`[&y](auto mu) { return
// sum(y - mu); }`) meets a symbolic value in an op, and becomes a constant of the expression:
// cst<A> holding a copy of the array (or of the xtensor expression, which refers to its own
// operands). The families join (dispatch.hpp), the operators below win over xtensor's own, a
// function of numbers holding such a constant is differentiated by the array evaluator
// (constants_family), and a region takes the constant as one of its inputs (xt_region.hpp).
template <class E>
inline constexpr bool has_array_constant_v = false;
template <class T>
inline constexpr bool has_array_constant_v<cst<T>> = is_captured_array_v<T>;
template <class Op, class... A>
inline constexpr bool has_array_constant_v<node<Op, A...>> = (has_array_constant_v<A> || ...);

template <class E>
requires has_array_constant_v<E>
struct constants_family<E> {
  using type = xtensor_family;
};

template <class E>
inline constexpr bool fusible_v = false;
template <class Inner>
inline constexpr bool fusible_v<node<sum_op, Inner>> = all_elementwise_v<Inner>;

// Is the root of a fusible expression a sum of all elements (not along a dim)?
template <class E>
bool full_sum(const E& e) {
  return e.op.r.all && !e.op.r.keepdim;
}

template <class A>
struct value_of {
  using type = A;  // a number
};
template <XtExpr A>
struct value_of<A> {
  using type = xt_value_t<A>;
};

// An array argument's gradient holder: the argument's own container type when it is one,
// else an xt::xarray.
template <class A, class T>
auto gradient_like(const A& a) {
  using R = std::remove_cvref_t<A>;
  if constexpr (requires { R::from_shape(a.shape()); } && std::is_same_v<xt_value_t<R>, T>) {
    return R::from_shape(a.shape());
  } else {
    return xt::xarray<T>::from_shape(a.shape());
  }
}

template <>
struct evaluator<xtensor_family> {
  template <std::size_t... I, class F, class... A>
  static auto value_and_grad(const F& f, const A&... args) {
    using E = traced_t<F, sizeof...(A)>;
    const E e = trace(f, std::index_sequence_for<A...>{});
    if constexpr (fusible_v<E> && !has_array_constant_v<E>) {
      if (full_sum(e) && same_shapes(args...)) return fused<I...>(e, args...);
    }
    return general<I...>(e, args...);
  }

 private:
  // Do all array arguments have the first array argument's shape?
  template <class... A>
  static bool same_shapes(const A&... args) {
    bool ok = true;
    std::vector<std::size_t> ref;
    bool have = false;
    auto cmp = [&](const auto& a) {
      if constexpr (XtExpr<decltype(a)>) {
        std::vector<std::size_t> s(a.shape().begin(), a.shape().end());
        if (!have) {
          ref = std::move(s);
          have = true;
        } else if (s != ref) {
          ok = false;
        }
      }
    };
    (cmp(args), ...);
    return ok;
  }

  // One SIMD loop: forward and reverse sweep of the summed elementwise expression per pack.
  template <std::size_t... I, class E, class... A>
  static auto fused(const E& e, const A&... args) {
    using T = std::common_type_t<typename value_of<A>::type...>;
    static_assert(std::is_floating_point_v<T>, "metagrad: arrays must hold float or double");
    // contiguous row-major arrays of T are read in place; anything else is copied once
    std::tuple<std::conditional_t<XtExpr<A>, xt::xarray<T>, char>...> copies;
    const auto data = [&]<std::size_t... k>(std::index_sequence<k...>) {
      return std::tuple{region_source<T>(args, dims_of(args), std::get<k>(copies))...};
    }
    (std::index_sequence_for<A...>{});
    std::size_t n = 0;
    ((n = arg_size(args, n)), ...);

    auto grads_out = std::tuple{make_out<T>(std::get<I>(std::forward_as_tuple(args...)))...};
    auto sinks = std::apply([](auto&... o) { return std::tuple{sink_for<T>(o)...}; }, grads_out);
    sum_sink<T> value;
    element_loop<T, true>(std::index_sequence<I...>{}, child<0>(e), data, n, T(1), value, sinks);
    // numbers among the arguments: their gradient is the sum over all elements
    [&]<std::size_t... j>(std::index_sequence<j...>) {
      (finish_number(std::get<j>(grads_out), std::get<j>(sinks)), ...);
    }
    (std::index_sequence_for<decltype(I)...>{});
    return std::pair{value.total(), std::move(grads_out)};
  }

  template <class T, class O>
  static auto sink_for(O& o) {
    if constexpr (std::is_arithmetic_v<O>) {
      return sum_sink<T>{};
    } else {
      return store_sink<T>{o.data()};
    }
  }
  template <class O, class S>
  static void finish_number(O& o, const S& s) {
    if constexpr (std::is_arithmetic_v<O>) o = static_cast<O>(s.total());
  }

  template <class D>
  static std::size_t arg_size(const D& d, std::size_t n) {
    if constexpr (std::is_arithmetic_v<D>) {
      return n;
    } else {
      return d.size();
    }
  }

  // gradient holder for argument k: an array like it, or a number
  template <class T, class A>
  static auto make_out(const A& a) {
    if constexpr (XtExpr<A>) {
      return gradient_like<A, T>(a);
    } else {
      return static_cast<A>(0);
    }
  }

  // Each distinct node materialised once; any shapes, any ops.
  template <std::size_t... I, class E, class... A>
  static auto general(const E& e, const A&... args) {
    using T = std::common_type_t<typename value_of<A>::type...>;
    return general_sweep<I...>(e, std::tuple<const A&...>{args...}, [](const auto& r) {
      using R = std::remove_cvref_t<decltype(r)>;
      if constexpr (std::is_arithmetic_v<R>) {
        return R(1);
      } else {
        if (r.size() != 1)
          fail(
              "grad: the function must return a scalar (a 0-d or one-element array) but "
              "returned shape ",
              shape_string(r.shape()), "; reduce it, e.g. with mg::sum");
        return xt::xarray<T>(xt::ones<T>(r.shape()));
      }
    });
  }

 public:
  // f's value on arrays (any shape), by the general evaluator.
  template <class F, class... A>
  static auto value(const F& f, const A&... args) {
    const auto e = regionize(trace(f, std::index_sequence_for<A...>{}));  // Note [Regions]
    using E = std::remove_cvref_t<decltype(e)>;
    using Args = tuple<const A&...>;
    const Args a{{args}...};
    using T = std::common_type_t<typename value_of<A>::type...>;
    sweep<E, Args, xt_policy, xt::xarray<T>> s(e, a);
    s.forward();
    return xt::xarray<T>(s.result());
  }

  // The vector-Jacobian product of f at args with the cotangent `seed` (f's output shape):
  // the gradient of sum(seed * f) with respect to arguments I..., in the arguments' types.
  template <std::size_t... I, class F, class S, class... A>
  static auto vjp(const F& f, const S& seed, const A&... args) {
    using E = traced_t<F, sizeof...(A)>;
    const E e = trace(f, std::index_sequence_for<A...>{});
    using T = std::common_type_t<typename value_of<A>::type...>;
    return general_sweep<I...>(
               e, std::tuple<const A&...>{args...},
               [&](const auto& r) {
                 if constexpr (!std::is_arithmetic_v<std::remove_cvref_t<decltype(r)>>) {
                   if (!std::equal(r.shape().begin(), r.shape().end(), seed.shape().begin(),
                                   seed.shape().end()))
                     fail("vjp: the cotangent has shape ", shape_string(seed.shape()),
                          " but the function's value has shape ", shape_string(r.shape()),
                          "; pass a cotangent of the value's shape");
                 }
                 return xt::xarray<T>(seed);
               })
        .second;
  }

 private:
  template <std::size_t... I, class Traced, class... A, class SeedOf>
  static auto general_sweep(const Traced& traced, const std::tuple<const A&...>& args,
                            SeedOf seed_of) {
    const auto e = regionize(traced);  // Note [Regions]
    using E = std::remove_cvref_t<decltype(e)>;
    using Args = tuple<const A&...>;
    const Args a = std::apply([](const A&... x) { return Args{{x}...}; }, args);
    using Root =
        typename sweep_types<E, Args, xt_policy, int>::template val_t<plan_v<E>.nslots - 1>;
    using T = std::common_type_t<typename value_of<A>::type...>;
    using Seed = std::conditional_t<std::is_arithmetic_v<Root>, Root, xt::xarray<T>>;
    sweep<E, Args, xt_policy, Seed> s(e, a);
    s.forward();
    const auto& r = s.result();
    const Seed seed = seed_of(r);
    T value{};
    if constexpr (std::is_arithmetic_v<Root>) {
      value = static_cast<T>(r);
    } else {
      value = r.size() == 1 ? static_cast<T>(*r.begin()) : T(0);
    }
    s.backward(seed);
    return std::pair{value, std::tuple{to_argument<T>(s.template gradient<I>(seed, unused{}),
                                                      std::get<I>(args))...}};
  }

  struct unused {};

  // A gradient in its argument's type (zeros when f does not use the argument).
  template <class T, class G, class A>
  static auto to_argument(const G& g, const A& a) {
    if constexpr (std::is_arithmetic_v<A>) {
      if constexpr (std::is_same_v<G, unused>) {
        return A(0);
      } else {
        return static_cast<A>(reduce_to_shape_of(g, a));
      }
    } else {
      auto out = gradient_like<A, T>(a);
      if constexpr (std::is_same_v<G, unused>) {
        out.fill(T(0));
      } else {
        out = reduce_to_shape_of(g, a);
      }
      return out;
    }
  }
};
}  // namespace detail

// Note [Captured arrays]: an xtensor array with a static-engine expression, in either order.
// xtensor's operators take forwarding references, which bind a non-const array better than a
// const reference; these take them too and are more constrained, so they win.
namespace detail {
template <class L, class R>
concept ArrayWithExpr = (XtExpr<L> && Expr<R>) || (Expr<L> && XtExpr<R>);

// A captured array becomes a captured_array (xt_region.hpp): a container of its elements whose
// type names no xtensor type as a template argument, so that argument-dependent lookup on an
// expression holding it finds metagrad's functions only (xt::sum would otherwise compete with
// mg::sum for `sum(y - mu)`).
template <class T>
requires XtExpr<T>
struct constant_traits<T> {
  using type = captured_array<xt_value_t<T>, static_rank_v<T>>;
  static type make(const T& a) { return type{typename type::array_type(a)}; }
};
}  // namespace detail

template <class L, class R>
requires detail::ArrayWithExpr<L, R>
auto operator+(L&& a, R&& b) { return detail::call(add_op{}, a, b); }
template <class L, class R>
requires detail::ArrayWithExpr<L, R>
auto operator-(L&& a, R&& b) { return detail::call(sub_op{}, a, b); }
template <class L, class R>
requires detail::ArrayWithExpr<L, R>
auto operator*(L&& a, R&& b) { return detail::call(mul_op{}, a, b); }
template <class L, class R>
requires detail::ArrayWithExpr<L, R>
auto operator/(L&& a, R&& b) { return detail::call(div_op{}, a, b); }
template <class L, class R>
requires detail::ArrayWithExpr<L, R>
auto operator>(L&& a, R&& b) { return detail::call(gt_op{}, a, b); }
template <class L, class R>
requires detail::ArrayWithExpr<L, R>
auto operator<(L&& a, R&& b) { return detail::call(lt_op{}, a, b); }
template <class L, class R>
requires detail::ArrayWithExpr<L, R>
auto operator>=(L&& a, R&& b) { return detail::call(ge_op{}, a, b); }
template <class L, class R>
requires detail::ArrayWithExpr<L, R>
auto operator<=(L&& a, R&& b) { return detail::call(le_op{}, a, b); }

}  // namespace mg
