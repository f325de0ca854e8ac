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

#include <cmath>
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

// Note [Hoisting]: in the fused loop, a subexpression of numbers only (log(sigma)) has the same
// value at every element. Each maximal one becomes an input of the loop, arg<K + h>, computed
// once before it; the loop's sum sink for that input is its adjoint, which one scalar sweep of
// the subexpression carries back to the number arguments. A division by numbers only is a product
// with the hoisted reciprocal: a division per element costs 4 to 8 products, and the hand-written
// loop multiplies by the reciprocal too. Hoisted are stateless subexpressions (their type is all
// of them): one input per distinct type, so a subexpression used twice stays one slot of the DAG.
template <class E, class Args>
inline constexpr bool reads_array_v = false;
template <std::size_t J, class Args>
inline constexpr bool reads_array_v<arg<J>, Args> =
    !std::is_arithmetic_v<std::tuple_element_t<J, Args>>;
template <class T, class Args>
inline constexpr bool reads_array_v<cst<T>, Args> = is_captured_array_v<T>;
template <class Op, class... C, class Args>
inline constexpr bool reads_array_v<node<Op, C...>, Args> = (reads_array_v<C, Args> || ...);

template <class E, class Args>
inline constexpr bool hoisted_v = false;
template <class Op, class... C, class Args>
inline constexpr bool hoisted_v<node<Op, C...>, Args> =
    stateless_v<node<Op, C...>> && !reads_array_v<node<Op, C...>, Args>;

template <class E, class Args>
inline constexpr bool by_reciprocal_v = false;
template <class A, class B, class Args>
inline constexpr bool by_reciprocal_v<node<div_op, A, B>, Args> =
    reads_array_v<A, Args> && !reads_array_v<B, Args> && stateless_v<B>;
template <class B>
using reciprocal_t = node<div_op, cst<known<1>>, B>;

// The distinct hoisted subexpressions of E, in order of first occurrence.
template <class E, class Args>
struct hoisted_list {
  using type = type_list<>;
};
template <class Op, class... C, class Args>
struct hoisted_list<node<Op, C...>, Args> {
  using type = std::conditional_t<
      hoisted_v<node<Op, C...>, Args>, type_list<node<Op, C...>>,
      typename merge_all<type_list<>, typename hoisted_list<C, Args>::type...>::type>;
};
template <class A, class B, class Args>
requires by_reciprocal_v<node<div_op, A, B>, Args>
struct hoisted_list<node<div_op, A, B>, Args> {
  using type = typename push_unique<typename hoisted_list<A, Args>::type, reciprocal_t<B>>::type;
};
template <class E, class Args>
using hoisted_list_t = typename hoisted_list<E, Args>::type;
template <class L>
inline constexpr std::size_t list_length = 0;
template <class... T>
inline constexpr std::size_t list_length<type_list<T...>> = sizeof...(T);

// e with each hoisted subexpression X replaced by arg<K + index of X in L>.
template <class Args, std::size_t K, class L, class E>
constexpr auto hoist_rewrite(const E& e) {
  if constexpr (hoisted_v<E, Args>) {
    return arg<K + index_in<E>(L{})>{};
  } else if constexpr (list_length<hoisted_list_t<E, Args>> == 0) {
    return e;
  } else if constexpr (by_reciprocal_v<E, Args>) {
    using B = std::remove_cvref_t<decltype(child<1>(e))>;
    return assemble(mul_op{}, hoist_rewrite<Args, K, L>(child<0>(e)),
                    arg<K + index_in<reciprocal_t<B>>(L{})>{});
  } else {
    return [&]<class Op, class... C>(const node<Op, C...>& n) {
      return [&]<std::size_t... j>(std::index_sequence<j...>) {
        return assemble(n.op, hoist_rewrite<Args, K, L>(child<j>(n))...);
      }
      (std::index_sequence_for<C...>{});
    }(e);
  }
}

// The fused loop's form: a sum of an elementwise expression of the arguments that reads at least
// one array argument (the sum of a 0-d value is that value, not n copies of it).
// A product too: one loop forward, one backward with the seed prod / v_i (quotient_seed).
template <class E, class Args>
inline constexpr bool fused_sum_v = false;
template <class Inner, class Args>
inline constexpr bool fused_sum_v<node<sum_op, Inner>, Args> =
    all_elementwise_v<Inner> && !has_array_constant_v<Inner> && reads_array_v<Inner, Args>;
template <class Inner, class Args>
inline constexpr bool fused_sum_v<node<prod_op, Inner>, Args> =
    fused_sum_v<node<sum_op, Inner>, Args>;

// Note [Scalar epilogue]: f = outer(sum(inner)), where inner is elementwise over arrays of one
// shape and outer is elementwise over that one sum, number arguments and constants (log(sum(
// exp(x))), sqrt(sum(x*x)), sum(...) / 2). The fused loop runs sum(inner) forward and backward
// with the seed 1, writing d sum / d x into the gradients; outer's value and derivative with
// respect to the sum then cost one scalar sweep, and one loop scales the gradients by it. That
// is the loop one writes by hand (exp(x) computed once, stored, then scaled by 1/s), and no
// array of the sum's shape is materialised besides the gradients.
//
// epilogue_kind<E, Args> (Args: std::tuple of the argument types): 0 not of this form; 1 numbers
// and constants only; 2 holds exactly one fusible sum, reached through elementwise ops only.
template <class E, class Args>
struct epilogue_kind : std::integral_constant<int, 0> {};
template <std::size_t J, class Args>
struct epilogue_kind<arg<J>, Args>
    : std::integral_constant<int, std::is_arithmetic_v<std::tuple_element_t<J, Args>> ? 1 : 0> {};
template <class T, class Args>
struct epilogue_kind<cst<T>, Args> : std::integral_constant<int, is_captured_array_v<T> ? 0 : 1> {};
template <class Inner, class Args>
struct epilogue_kind<node<sum_op, Inner>, Args>
    : std::integral_constant<int, fused_sum_v<node<sum_op, Inner>, Args> ? 2 : 0> {};
template <class Inner, class Args>
struct epilogue_kind<node<prod_op, Inner>, Args>
    : std::integral_constant<int, fused_sum_v<node<prod_op, Inner>, Args> ? 2 : 0> {};
template <class Op, class... C, class Args>
requires(is_elementwise<Op>()) struct epilogue_kind<node<Op, C...>, Args>
    : std::integral_constant<int, [] {
        const int k[] = {epilogue_kind<C, Args>::value...};
        int sums = 0;
        for (int v : k) {
          if (v == 0) return 0;
          sums += v == 2;
        }
        return sums == 0 ? 1 : sums == 1 ? 2 : 0;
      }()> {};

// f = outer(sum(inner)), and not sum(inner) itself (the plain fused loop)?
template <class E, class Args>
inline constexpr bool epilogue_v = epilogue_kind<E, Args>::value == 2 && !fused_sum_v<E, Args>;

// The child of n on the way to the sum.
template <class Args, class... C>
inline constexpr std::size_t epilogue_child = [] {
  const int k[] = {epilogue_kind<C, Args>::value...};
  std::size_t i = 0;
  while (k[i] != 2) ++i;
  return i;
}();

// The sum of an expression of kind 2.
template <class Args, class E>
constexpr auto epilogue_sum(const E& e) {
  return [&]<class Op, class... C>(const node<Op, C...>& n) {
    if constexpr (std::is_same_v<Op, sum_op> || std::is_same_v<Op, prod_op>) {
      return n;
    } else {
      return epilogue_sum<Args>(child<epilogue_child<Args, C...>>(n));
    }
  }(e);
}

// outer: e with its sum replaced by arg<S>.
template <class Args, std::size_t S, class E>
constexpr auto epilogue_outer(const E& e) {
  if constexpr (epilogue_kind<E, Args>::value != 2) {
    return e;
  } else {
    return [&]<class Op, class... C>(const node<Op, C...>& n) {
      if constexpr (std::is_same_v<Op, sum_op> || std::is_same_v<Op, prod_op>) {
        return arg<S>{};
      } else {
        return [&]<std::size_t... j>(std::index_sequence<j...>) {
          return assemble(n.op, epilogue_outer<Args, S>(child<j>(n))...);
        }
        (std::index_sequence_for<C...>{});
      }
    }(e);
  }
}

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
    return value_and_grad_as<false, I...>(f, args...);
  }
  // mg::value_and_grad's own result: {value, gradient} for one index, {value, tuple} for several.
  // Built in place by the fused loops, so that a fixed-size gradient (xt::xtensor_fixed) is never
  // copied on its way out (grad_transform takes this form when an evaluator has it).
  static constexpr bool builds_final_result = true;
  template <std::size_t... I, class F, class... A>
  static auto value_and_grad_final(const F& f, const A&... args) {
    return value_and_grad_as<sizeof...(I) == 1, I...>(f, args...);
  }

 private:
  template <bool Bare, std::size_t... I, class F, class... A>
  static auto value_and_grad_as(const F& f, const A&... args) {
    using E = traced_t<F, sizeof...(A)>;
    const E e = trace(f, std::index_sequence_for<A...>{});
    if constexpr (fused_sum_v<E, std::tuple<A...>>) {
      if (full_sum(e) && same_shapes(args...)) return fused<Bare, I...>(e, args...);
    } else if constexpr (epilogue_v<E, std::tuple<A...>>) {  // Note [Scalar epilogue]
      const auto s = epilogue_sum<std::tuple<A...>>(e);
      if (full_sum(s) && same_shapes(args...)) return fused_epilogue<Bare, I...>(e, s, args...);
    }
    return as_result<Bare>(general<I...>(e, args...));
  }
  template <bool Bare, class R>
  static auto as_result(R&& r) {
    if constexpr (Bare) {
      return std::pair{r.first, std::get<0>(std::move(r.second))};
    } else {
      return std::move(r);
    }
  }
  // The gradients of a result, as a tuple of references.
  template <class R>
  static auto gradients_of(R& r) {
    if constexpr (requires { std::tuple_size<decltype(r.second)>::value; }) {
      return std::apply([](auto&... g) { return std::tie(g...); }, r.second);
    } else {
      return std::tie(r.second);
    }
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
  template <bool Bare, std::size_t... I, class E, class... A>
  static auto fused(const E& e, const A&... args) {
    using T = std::common_type_t<typename value_of<A>::type...>;
    static_assert(std::is_floating_point_v<T>, "metagrad: arrays must hold float or double");
    using Args = std::tuple<A...>;
    constexpr std::size_t K = sizeof...(A);
    using Inner = std::remove_cvref_t<decltype(child<0>(e))>;
    using Hoisted = hoisted_list_t<Inner, Args>;  // Note [Hoisting]
    constexpr std::size_t H = list_length<Hoisted>;
    const auto inner = hoist_rewrite<Args, K, Hoisted>(child<0>(e));
    // the number arguments, as the hoisted subexpressions read them (an array's place holds 0)
    using Numbers = tuple<std::conditional_t<std::is_arithmetic_v<A>, A, T>...>;
    const Numbers numbers{{number_or_zero<T>(args)}...};
    // contiguous row-major arrays of T are read in place; anything else is copied once
    std::tuple<std::conditional_t<XtExpr<A>, xt::xarray<T>, char>...> copies;
    const auto data = [&]<std::size_t... k, std::size_t... h>(std::index_sequence<k...>,
                                                             std::index_sequence<h...>) {
      return std::tuple{region_source<T>(args, dims_of(args), std::get<k>(copies))...,
                        static_cast<T>(scalar_value(typename type_at<h, Hoisted>::type{}, numbers))...};
    }
    (std::index_sequence_for<A...>{}, std::make_index_sequence<H>{});
    std::size_t n = 0;
    ((n = arg_size(args, n)), ...);

    // the result, built in place (Bare: one gradient, not a tuple of one)
    using Grads = std::tuple<decltype(make_out<T>(std::get<I>(std::forward_as_tuple(args...))))...>;
    using Result = std::conditional_t<Bare, std::pair<T, std::tuple_element_t<0, Grads>>,
                                      std::pair<T, Grads>>;
    Result result{};
    auto grads_out = gradients_of(result);
    [&]<std::size_t... j>(std::index_sequence<j...>) {
      (shape_like<T>(std::get<j>(grads_out), std::get<I>(std::forward_as_tuple(args...))), ...);
    }
    (std::index_sequence_for<decltype(I)...>{});
    auto sinks = [&]<std::size_t... h>(std::index_sequence<h...>) {
      return std::tuple_cat(
          std::apply([](auto&... o) { return std::tuple{sink_for<T>(o)...}; }, grads_out),
          std::tuple{(void(h), sum_sink<T>{})...});
    }
    (std::make_index_sequence<H>{});
    T total{};
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(e.op)>, prod_op>) {
      prod_sink<T> product;
      std::tuple<> none;
      element_loop<T, false>(std::index_sequence<>{}, inner, data, n, T(0), product, none);
      total = product.total();
      // a zero factor (or a product that underflows or overflows): the general path's rules
      if (!(total != T(0)) || !std::isfinite(total)) {
        result = as_result<Bare>(general<I...>(e, args...));
        return result;
      }
      no_sink ignored;
      [&]<std::size_t... h>(std::index_sequence<h...>) {
        element_loop<T, true>(std::index_sequence<I..., K + h...>{}, inner, data, n,
                              quotient_seed<T>{total}, ignored, sinks);
      }
      (std::make_index_sequence<H>{});
    } else {
      sum_sink<T> value;
      [&]<std::size_t... h>(std::index_sequence<h...>) {
        element_loop<T, true>(std::index_sequence<I..., K + h...>{}, inner, data, n, T(1), value,
                              sinks);
      }
      (std::make_index_sequence<H>{});
      total = value.total();
    }
    [&]<std::size_t... j>(std::index_sequence<j...>) {
      // numbers among the arguments: their gradient is the sum over all elements
      (finish_number(std::get<j>(grads_out), std::get<j>(sinks)), ...);
      // and what reaches them through the hoisted subexpressions
      if constexpr (H > 0 && ((std::is_arithmetic_v<std::tuple_element_t<I, Args>>) || ...)) {
        [&]<std::size_t... h>(std::index_sequence<h...>) {
          (add_hoisted<I...>(grads_out, typename type_at<h, Hoisted>::type{}, numbers,
                             std::get<sizeof...(I) + h>(sinks).total()),
           ...);
        }
        (std::make_index_sequence<H>{});
      }
    }
    (std::index_sequence_for<decltype(I)...>{});
    result.first = total;
    return result;
  }

  // A hoisted subexpression's value, from the number arguments.
  template <class X, class Numbers>
  static auto scalar_value(const X& x, const Numbers& numbers) {
    using V = typename sweep_types<X, Numbers, plain_policy, int>::template val_t<
        plan_v<X>.nslots - 1>;
    sweep<X, Numbers, plain_policy, V> s(x, numbers);
    s.forward();
    return s.result();
  }
  // grads_out[j] += adjoint * d x / d(argument I_j), for the number arguments among I...
  template <std::size_t... I, class G, class X, class Numbers, class T>
  static void add_hoisted(G& grads_out, const X& x, const Numbers& numbers, T adjoint) {
    using V = typename sweep_types<X, Numbers, plain_policy, int>::template val_t<
        plan_v<X>.nslots - 1>;
    sweep<X, Numbers, plain_policy, V> s(x, numbers);
    s.forward();
    s.backward(V(adjoint));
    [&]<std::size_t... j>(std::index_sequence<j...>) {
      (
          [&] {
            auto& g = std::get<j>(grads_out);
            if constexpr (std::is_arithmetic_v<std::remove_cvref_t<decltype(g)>>)
              g = static_cast<std::remove_cvref_t<decltype(g)>>(
                  g + s.template gradient<I>(V(adjoint), zero_like(at<I>(numbers))));
          }(),
          ...);
    }
    (std::index_sequence_for<decltype(I)...>{});
  }

  // See Note [Scalar epilogue]: the fused loop for the sum s, then outer's sweep on numbers.
  template <bool Bare, std::size_t... I, class E, class S, class... A>
  static auto fused_epilogue(const E& e, const S& s, const A&... args) {
    using T = std::common_type_t<typename value_of<A>::type...>;
    constexpr std::size_t N = sizeof...(A);
    auto result = fused<Bare, I...>(s, args...);
    const T sum_value = result.first;
    auto grads = gradients_of(result);
    const auto outer = epilogue_outer<std::tuple<A...>, N>(e);
    using O = std::remove_cvref_t<decltype(outer)>;
    // outer reads the number arguments and the sum; an array argument's place holds a 0
    using Args = tuple<std::conditional_t<std::is_arithmetic_v<A>, A, T>..., T>;
    const Args a{{number_or_zero<T>(args)}..., {sum_value}};
    using V = typename sweep_types<O, Args, plain_policy, int>::template val_t<plan_v<O>.nslots - 1>;
    sweep<O, Args, plain_policy, V> sweep_outer(outer, a);
    sweep_outer.forward();
    sweep_outer.backward(V(1));
    const T seed = static_cast<T>(sweep_outer.template gradient<N>(V(1), V(0)));
    [&]<std::size_t... j>(std::index_sequence<j...>) {
      (scale_by(std::get<j>(grads), seed,
                sweep_outer.template gradient<I>(V(1), zero_like(at<I>(a)))),
       ...);
    }
    (std::make_index_sequence<sizeof...(I)>{});
    result.first = static_cast<T>(sweep_outer.result());
    return result;
  }
  template <class T, class A>
  static auto number_or_zero(const A& a) {
    if constexpr (std::is_arithmetic_v<A>) {
      return a;
    } else {
      return T(0);
    }
  }
  // d f / d x = seed * d sum / d x (+ outer's own derivative, for a number argument)
  template <class G, class T, class D>
  static void scale_by(G& g, T seed, const D& direct) {
    if constexpr (std::is_arithmetic_v<G>) {
      g = static_cast<G>(g * seed + direct);
    } else {
      T* p = g.data();
      for (std::size_t i = 0, n = g.size(); i < n; ++i) p[i] *= seed;
    }
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

  // g takes the shape of argument a: a fixed-size array has it already (and is not copied), a
  // dynamic one gets new storage; every element is written by the loop.
  template <class T, class G, class A>
  static void shape_like(G& g, const A& a) {
    if constexpr (XtExpr<A>) {
      if (!std::equal(g.shape().begin(), g.shape().end(), a.shape().begin(), a.shape().end()))
        g = gradient_like<A, T>(a);
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
