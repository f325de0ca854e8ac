// The static engine on xtensor arrays (xt::xtensor, xt::xtensor_fixed, xt::xarray and
// expressions), mixed freely with float/double arguments.
//
// Two evaluators, chosen at compile time from the expression type and at run time from the
// shapes:
// - fused: when f is `sum(elementwise expression)` and the array arguments share one shape,
//   forward and backward run together in ONE loop over SIMD packs (xsimd through
//   core/simd.hpp); every intermediate lives in registers and each argument's gradient is
//   written once. This is the loop one would write by hand.
// - general: otherwise (broadcasting, sum along an axis, matmul, non-sum roots). Every maximal
//   elementwise subtree is one region (Note [Regions] in xt/region.hpp): one SIMD loop
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
#include <metagrad/core/simd.hpp>
#include <metagrad/error.hpp>
#include <metagrad/static.hpp>
#include <metagrad/xt/algebra.hpp>
#include <metagrad/xt/fused.hpp>
#include <metagrad/xt/region.hpp>
#include <metagrad/xt/transforms.hpp>

namespace mg {

namespace detail {

template <class T>
requires XtExpr<T>
struct evaluator_family_of<T> {
  using type = array_family;
};

// Note [Captured arrays]: an array a traced function reads from outside (`[&y](auto mu) { return
// sum(y - mu); }`) meets a symbolic value in an op, and becomes a constant of the expression:
// cst<A> holding a copy of the array (or of the xtensor expression, which refers to its own
// operands). The families join (dispatch.hpp), the operators below win over xtensor's own, a
// function of numbers holding such a constant is differentiated by the array evaluator
// (constants_family), and a region takes the constant as one of its inputs (xt/region.hpp).
template <class E>
requires has_array_constant_v<E>
struct constants_family<E> {
  using type = array_family;
};

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

// Converts to what f returns, by calling it: an object constructed from it where it lives.
template <class F>
struct constructed_by {
  F f;
  operator std::invoke_result_t<const F&>() const { return f(); }
};

template <>
struct evaluator<array_family> : tangent_transforms<array_family> {
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
    return value_and_grad_as<pair_final, I...>(f, args...);
  }
  template <std::size_t... I, class F, class... A>
  static auto grad_final(const F& f, const A&... args) {
    return value_and_grad_as<gradients_only, I...>(f, args...);
  }

 private:
  // The form of a result: {value, tuple of gradients}; {value, gradient(s)}; gradient(s).
  static constexpr int pair_of_tuple = 0, pair_final = 1, gradients_only = 2;
  template <int Form, class T, class Grads>
  using result_t = std::conditional_t<
      Form == gradients_only,
      std::conditional_t<std::tuple_size_v<Grads> == 1, std::tuple_element_t<0, Grads>, Grads>,
      std::pair<T, std::conditional_t<Form == pair_final && std::tuple_size_v<Grads> == 1,
                                      std::tuple_element_t<0, Grads>, Grads>>>;

  template <int Form, std::size_t... I, class F, class... A>
  static auto value_and_grad_as(const F& f, const A&... args) {
    using E = traced_t<F, sizeof...(A)>;
    const E e = trace(f, std::index_sequence_for<A...>{});
    if constexpr (fused_sum_v<E, std::tuple<A...>>) {
      if (full_sum(e) && same_shapes(args...)) return fused<Form, I...>(e, args...);
    } else if constexpr (epilogue_v<E, std::tuple<A...>>) {  // Note [Scalar epilogue]
      const auto s = epilogue_sum<std::tuple<A...>>(e);
      if (full_sum(s) && same_shapes(args...)) return fused_epilogue<Form, I...>(e, s, args...);
    }
    if constexpr (boundary_sum_v<E, std::tuple<A...>>) {  // Note [Shaped boundaries]
      return boundaries_or_general<Form, I...>(e, args...);
    } else {
      using T = std::common_type_t<typename value_of<A>::type...>;
      T value{};
      return general<Form, I...>(e, value, args...);
    }
  }
  // A result with its gradients shaped like their arguments and not initialised: each is
  // constructed where it lives (GCC elides through the conversion), so an xt::xtensor_fixed is
  // neither zeroed (as value-initialising the pair or tuple would) nor copied.
  template <int Form, class T, std::size_t... I, class... A>
  static auto make_result(const A&... args) {
    const auto all = std::forward_as_tuple(args...);
    using Grads = std::tuple<decltype(make_out<T>(std::get<I>(all)))...>;
    constexpr bool one = sizeof...(I) == 1;
    if constexpr (Form == gradients_only && one) {
      return make_out<T>(std::get<I...>(all));
    } else if constexpr (Form == gradients_only) {
      return Grads(constructed_by{[&a = std::get<I>(all)] { return make_out<T>(a); }}...);
    } else {
      return result_t<Form, T, Grads>(std::piecewise_construct, std::forward_as_tuple(T{}),
                                      std::forward_as_tuple(constructed_by{
                                          [&a = std::get<I>(all)] { return make_out<T>(a); }}...));
    }
  }
  // The gradients of a result, as a tuple of references; its value, where it has one.
  template <int Form, class R>
  static auto gradients_of(R& r) {
    auto& g = [&]() -> auto& {
      if constexpr (Form == gradients_only) {
        return r;
      } else {
        return r.second;
      }
    }
    ();
    if constexpr (requires { std::tuple_size<std::remove_cvref_t<decltype(g)>>::value; }) {
      return std::apply([](auto&... x) { return std::tie(x...); }, g);
    } else {
      return std::tie(g);
    }
  }
  template <int Form, class R, class T>
  static void set_value(R& r, T value) {
    if constexpr (Form != gradients_only) r.first = value;
  }

 private:
  // Do all array arguments have the first array argument's shape? (No allocation: this runs on
  // every call that may take a fused loop.)
  template <class... A>
  static bool same_shapes(const A&... args) {
    constexpr std::size_t first = [] {
      const bool array[] = {XtExpr<A>...};
      std::size_t k = 0;
      while (!array[k]) ++k;
      return k;
    }();
    const auto& f = std::get<first>(std::forward_as_tuple(args...));
    const auto same = [&f](const auto& a) {
      if constexpr (XtExpr<decltype(a)>) {
        return std::equal(a.shape().begin(), a.shape().end(), f.shape().begin(), f.shape().end());
      } else {
        return true;
      }
    };
    return (same(args) && ...);
  }

  // One SIMD loop: forward and reverse sweep of the summed elementwise expression per pack.
  template <int Form, std::size_t... I, class E, class... A>
  static auto fused(const E& e, const A&... args) {
    using T = std::common_type_t<typename value_of<A>::type...>;
    T value{};
    return fused_total<Form, I...>(e, value, args...);
  }
  // The same, with the sum's (or product's) value also in `total`.
  template <int Form, std::size_t... I, class E, class T, class... A>
  static auto fused_total(const E& e, T& total, const A&... args) {
    auto result = make_result<Form, T, I...>(args...);
    if (!fused_into<I...>(e, total, gradients_of<Form>(result), args...)) {
      result = general<Form, I...>(e, total, args...);  // a product with a zero factor
      return result;
    }
    set_value<Form>(result, total);
    return result;
  }
  // The fused loop writing the gradient of argument I_j into grads_out's element j (each shaped
  // like its argument, a number for a number) and the sum or product into total. False when a
  // product has a zero factor (or under- or overflows): then nothing is written, and the general
  // path, with its zero rules, is the one to run.
  template <std::size_t... I, class E, class T, class Outs, class... A>
  static bool fused_into(const E& e, T& total, Outs grads_out, const A&... args) {
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
    // one sweep per hoisted subexpression: forward now, backward with its adjoint after the loop
    const typename as_std_tuple<Hoisted>::type hoisted{};  // stateless: the types are all of them
    auto hoisted_sweeps = std::apply(
        [&](const auto&... x) {
          return std::tuple{number_sweep<std::remove_cvref_t<decltype(x)>, Numbers>(x, numbers)...};
        },
        hoisted);
    std::apply([](auto&... sw) { (sw.forward(), ...); }, hoisted_sweeps);
    // contiguous row-major arrays of T are read in place; anything else is copied once; an
    // array the loop does not read (an argument of a shaped boundary only) is a 0, never loaded
    // past its end
    std::tuple<std::conditional_t<XtExpr<A>, work_array<T>, char>...> copies;
    using Loop = std::remove_cvref_t<decltype(inner)>;
    const auto data = [&]<std::size_t... k, std::size_t... h>(std::index_sequence<k...>,
                                                              std::index_sequence<h...>) {
      return std::tuple{loop_source<T, reads_arg_v<k, Loop>>(args, std::get<k>(copies))...,
                        static_cast<T>(std::get<h>(hoisted_sweeps).result())...};
    }
    (std::index_sequence_for<A...>{}, std::make_index_sequence<H>{});
    std::size_t n = 0;
    ((n = arg_size(args, n)), ...);

    auto sinks = [&]<std::size_t... h>(std::index_sequence<h...>) {
      return std::tuple_cat(
          std::apply([](auto&... o) { return std::tuple{sink_for<T>(o)...}; }, grads_out),
          std::tuple{(void(h), sum_sink<T>{})...});
    }
    (std::make_index_sequence<H>{});
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(e.op)>, prod_op>) {
      prod_sink<T> product;
      std::tuple<> none;
      element_loop<T, false>(std::index_sequence<>{}, inner, data, n, T(0), product, none);
      total = product.total();
      // a zero factor (or a product that underflows or overflows): the general path's rules
      if (!(total != T(0)) || !std::isfinite(total)) return false;
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
          (add_hoisted<I...>(grads_out, std::get<h>(hoisted_sweeps), numbers,
                             std::get<sizeof...(I) + h>(sinks).total()),
           ...);
        }
        (std::make_index_sequence<H>{});
      }
    }
    (std::index_sequence_for<decltype(I)...>{});
    return true;
  }

  // A sweep of an expression over numbers only: a hoisted subexpression, the epilogue's outer.
  template <class X, class Numbers>
  using number_sweep = sweep<
      X, Numbers, plain_policy,
      typename sweep_types<X, Numbers, plain_policy, int>::template val_t<plan_v<X>.nslots - 1>>;
  // grads_out[j] += adjoint * d x / d(argument I_j) for the number arguments among I..., from
  // the hoisted subexpression's sweep s (forward already run).
  template <std::size_t... I, class G, class S, class Numbers, class T>
  static void add_hoisted(G& grads_out, S& s, const Numbers& numbers, T adjoint) {
    using V = std::remove_cvref_t<decltype(s.result())>;
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
  template <int Form, std::size_t... I, class E, class S, class... A>
  static auto fused_epilogue(const E& e, const S& s, const A&... args) {
    using T = std::common_type_t<typename value_of<A>::type...>;
    constexpr std::size_t N = sizeof...(A);
    T sum_value{};
    auto result = fused_total<Form, I...>(s, sum_value, args...);
    auto grads = gradients_of<Form>(result);
    const auto outer = epilogue_outer<std::tuple<A...>, N>(e);
    using O = std::remove_cvref_t<decltype(outer)>;
    // outer reads the number arguments and the sum; an array argument's place holds a 0
    using Args = tuple<std::conditional_t<std::is_arithmetic_v<A>, A, T>..., T>;
    const Args a{{number_or_zero<T>(args)}..., {sum_value}};
    number_sweep<O, Args> sweep_outer(outer, a);
    using V = std::remove_cvref_t<decltype(sweep_outer.result())>;
    sweep_outer.forward();
    sweep_outer.backward(V(1));
    const T seed = static_cast<T>(sweep_outer.template gradient<N>(V(1), V(0)));
    [&]<std::size_t... j>(std::index_sequence<j...>) {
      (scale_by(std::get<j>(grads), seed,
                sweep_outer.template gradient<I>(V(1), zero_like(at<I>(a)))),
       ...);
    }
    (std::make_index_sequence<sizeof...(I)>{});
    set_value<Form>(result, static_cast<T>(sweep_outer.result()));
    return result;
  }
  template <class T, bool Read, class X, class C>
  static auto loop_source(const X& x, C& copy) {
    if constexpr (Read || !XtExpr<X>) {
      return region_source<T>(x, args_shape(x), copy);
    } else {
      return T(0);
    }
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

  // An argument's shape as region_source reads it (a number has none).
  template <class X>
  static auto args_shape(const X& x) {
    if constexpr (XtExpr<X>) {
      return x.shape();
    } else {
      return std::array<std::size_t, 0>{};
    }
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

  // Each distinct node materialised once; any shapes, any ops. The result is built in place (a
  // fixed-size gradient is copied once, from the sweep into it); its value also in `value`.
  template <int Form, std::size_t... I, class E, class T, class... A>
  static auto general(const E& e, T& value, const A&... args) {
    auto result = make_result<Form, T, I...>(args...);
    general_into<I...>(e, value, gradients_of<Form>(result), args...);
    set_value<Form>(result, value);
    return result;
  }
  template <std::size_t... I, class E, class T, class Outs, class... A>
  static void general_into(const E& e, T& value, Outs outs, const A&... args) {
    general_sweep<I...>(
        e, std::tuple<const A&...>{args...},
        [](const auto& r) {
          using R = std::remove_cvref_t<decltype(r)>;
          if constexpr (std::is_arithmetic_v<R>) {
            return R(1);
          } else {
            if (r.size() != 1)
              fail(
                  "grad: the function must return a scalar (a 0-d or one-element array) but "
                  "returned shape ",
                  shape_string(r.shape()), "; reduce it, e.g. with mg::sum");
            return work_array<T>(xt::ones<T>(r.shape()));
          }
        },
        value, outs);
  }

  // See Note [Shaped boundaries] in xt/fused.hpp: the boundaries, one fused loop, the
  // boundaries' backward; the general path when the shapes do not allow it.
  template <int Form, std::size_t... I, class E, class... A>
  static auto boundaries_or_general(const E& e, const A&... args) {
    using T = std::common_type_t<typename value_of<A>::type...>;
    T value{};
    auto result = make_result<Form, T, I...>(args...);
    auto outs = gradients_of<Form>(result);
    if (!(full_sum(e) && fused_boundaries<I...>(e, value, outs, args...)))
      general_into<I...>(e, value, outs, args...);
    set_value<Form>(result, value);
    return result;
  }
  template <std::size_t... I, class E, class T, class Outs, class... A>
  static bool fused_boundaries(const E& e, T& value, Outs outs, const A&... args) {
    using Args = std::tuple<A...>;
    constexpr std::size_t
        K = sizeof...(A),
        M = list_length<boundary_list_t<std::remove_cvref_t<decltype(child<0>(e))>, Args>>;
    using L = boundary_list_t<std::remove_cvref_t<decltype(child<0>(e))>, Args>;
    const auto e2 = assemble(e.op, boundary_rewrite<Args, K, L>(child<0>(e)));
    using Inner2 = std::remove_cvref_t<decltype(child<0>(e2))>;
    const auto all = std::forward_as_tuple(args...);
    // the arrays the loop reads must all have one shape; where the boundaries' shapes are known
    // before they are computed (matmul), a mismatch costs no product
    constexpr bool reads_arrays = [&]<std::size_t... k>(std::index_sequence<k...>) {
      return ((reads_arg_v<k, Inner2> && XtExpr<std::tuple_element_t<k, Args>>) || ...);
    }
    (std::index_sequence_for<A...>{});
    if constexpr (reads_arrays || M > 1) {
      if (!predicted_shapes_agree<Inner2, L>(all)) return false;
    }
    // the boundaries' values, then: do the arrays the loop reads all have their shape?
    auto values = [&]<std::size_t... m>(std::index_sequence<m...>) {
      return std::tuple{boundary_value<T, typename type_at<m, L>::type>(all)...};
    }
    (std::make_index_sequence<M>{});
    const auto& shape = std::get<0>(values).shape();
    const auto same = [&](const auto& x) {
      return std::equal(x.shape().begin(), x.shape().end(), shape.begin(), shape.end());
    };
    bool ok = std::apply([&](const auto&... v) { return (same(v) && ...); }, values);
    [&]<std::size_t... k>(std::index_sequence<k...>) {
      (
          [&] {
            if constexpr (reads_arg_v<k, Inner2> && XtExpr<std::tuple_element_t<k, Args>>)
              ok = ok && same(std::get<k>(all));
          }(),
          ...);
    }
    (std::index_sequence_for<A...>{});
    if (!ok) return false;
    // the loop: value, the gradients of the wanted arguments it reads (positions P of I), and
    // the gradient of each boundary
    auto dvalues = std::apply(
        [](const auto&... v) { return std::tuple{work_array<T>::from_shape(v.shape())...}; },
        values);
    constexpr std::array<std::size_t, sizeof...(I) + 1> ids{I..., 0};
    constexpr auto read = [] {
      std::array<bool, sizeof...(I) + 1> r{reads_arg_v<I, Inner2>..., false};
      return r;
    }();
    [&]<std::size_t... m>(std::index_sequence<m...>) {
      [&]<std::size_t... P>(std::index_sequence<P...>) {
        auto loop_outs = std::tie(std::get<P>(outs)..., std::get<m>(dvalues)...);
        std::apply(
            [&](const auto&... v) {
              fused_into<ids[P]..., K + m...>(e2, value, loop_outs, args..., v...);
            },
            values);
      }
      (positions_where<read, sizeof...(I)>());
    }
    (std::make_index_sequence<M>{});
    // each boundary's backward, into the outputs; what neither reaches is 0
    std::array<bool, sizeof...(I) + 1> written = read;
    [&]<std::size_t... m>(std::index_sequence<m...>) {
      (boundary_backward<T, typename type_at<m, L>::type, I...>(
           all, std::get<m>(values), std::get<m>(dvalues), outs, written),
       ...);
    }
    (std::make_index_sequence<M>{});
    [&]<std::size_t... j>(std::index_sequence<j...>) {
      (
          [&] {
            if (!written[j]) to_argument<T>(std::get<j>(outs), unused{}, std::get<ids[j]>(all));
          }(),
          ...);
    }
    (std::index_sequence_for<decltype(I)...>{});
    return true;
  }
  // Do the arrays the loop reads and the boundaries (whose shapes can be told beforehand) have
  // one shape? True when a boundary's shape cannot be told: the values decide.
  template <class Inner2, class L, class All>
  static bool predicted_shapes_agree(const All& all) {
    constexpr std::size_t M = list_length<L>;
    std::array<shape_t, M> s;
    bool known = true;
    [&]<std::size_t... m>(std::index_sequence<m...>) {
      (
          [&] {
            using BA = boundary_args<typename type_at<m, L>::type>;
            if constexpr (std::is_same_v<typename BA::op, matmul_op>) {
              s[m] = plan_matmul(shape_of(std::get<BA::index[0]>(all)),
                                 shape_of(std::get<BA::index[1]>(all)), "matmul")
                         .out;
            } else {
              known = false;
            }
          }(),
          ...);
    }
    (std::make_index_sequence<M>{});
    if (!known) return true;
    bool same = true;
    for (const auto& x : s) same = same && x == s[0];
    [&]<std::size_t... k>(std::index_sequence<k...>) {
      (
          [&] {
            using Ak = std::remove_cvref_t<std::tuple_element_t<k, All>>;
            if constexpr (reads_arg_v<k, Inner2> && XtExpr<Ak>) {
              const auto& xs = std::get<k>(all).shape();
              same = same && std::equal(xs.begin(), xs.end(), s[0].begin(), s[0].end(),
                                        [](std::size_t a, std::int64_t b) {
                                          return static_cast<std::int64_t>(a) == b;
                                        });
            }
          }(),
          ...);
    }
    (std::make_index_sequence<std::tuple_size_v<All>>{});
    return same;
  }
  // The positions j < N where flags[j], as an index sequence.
  template <auto flags, std::size_t N>
  static constexpr auto positions_where() {
    constexpr auto pos = [] {
      std::pair<std::array<std::size_t, N + 1>, std::size_t> p{};
      for (std::size_t j = 0; j < N; ++j)
        if (flags[j]) p.first[p.second++] = j;
      return p;
    }();
    return [&]<std::size_t... q>(std::index_sequence<q...>) {
      return std::index_sequence<pos.first[q]...>{};
    }
    (std::make_index_sequence<pos.second>{});
  }
  // A boundary's value, from the arguments (a work array).
  template <class T, class B, class All>
  static auto boundary_value(const All& all) {
    using BA = boundary_args<B>;
    return [&]<std::size_t... c>(std::index_sequence<c...>) {
      return work_array<T>(call(typename BA::op{}, std::get<BA::index[c]>(all)...));
    }
    (std::make_index_sequence<BA::index.size()>{});
  }
  // The backward of boundary B at its value v and gradient g, for the wanted arguments among
  // its own (Note [Wanted gradients]: a value only unwanted gradients read is a stand-in); each
  // gradient goes into every output of its argument, written or added.
  template <class T, class B, std::size_t... I, class All, class V, class Outs>
  static void boundary_backward(const All& all, const V& v, const V& g, Outs& outs,
                                std::array<bool, sizeof...(I) + 1>& written) {
    using BA = boundary_args<B>;
    using Op = typename BA::op;
    constexpr std::size_t n = BA::index.size();
    constexpr bool any = [] {
      for (bool w : wanted_children<B, I...>())
        if (w) return true;
      return false;
    }();
    constexpr std::uint32_t reads = read_mask_for<Op>(wanted_children<B, I...>());
    if constexpr (any) {
      const auto b = [&]<std::size_t... c>(std::index_sequence<c...>) {
        return Op{}.backward(pass_as<((reads >> c) & 1u) != 0>(std::get<BA::index[c]>(all))...,
                             pass_as<((reads >> n) & 1u) != 0>(v), g);
      }
      (std::make_index_sequence<n>{});
      [&]<std::size_t... c>(std::index_sequence<c...>) {
        (add_component<T, c, B, I...>(b, all, outs, written), ...);
      }
      (std::make_index_sequence<n>{});
    }
  }
  // Component c of boundary B's backward b into the outputs of its argument, if wanted.
  template <class T, std::size_t c, class B, std::size_t... I, class Bwd, class All, class Outs>
  static void add_component(const Bwd& b, const All& all, Outs& outs,
                            std::array<bool, sizeof...(I) + 1>& written) {
    if constexpr (wanted_children<B, I...>()[c]) {
      constexpr std::size_t J = boundary_args<B>::index[c];
      constexpr std::array<std::size_t, sizeof...(I) + 1> ids{I..., 0};
      [&]<std::size_t... j>(std::index_sequence<j...>) {
        (
            [&] {
              if constexpr (ids[j] == J) {
                add_gradient<T>(std::get<j>(outs), component<c>(b), std::get<J>(all), written[j]);
                written[j] = true;
              }
            }(),
            ...);
      }
      (std::make_index_sequence<sizeof...(I)>{});
    }
  }
  template <class B, std::size_t... I>
  static constexpr auto wanted_children() {
    using BA = boundary_args<B>;
    std::array<bool, BA::index.size()> w{};
    for (std::size_t c = 0; c < w.size(); ++c) w[c] = ((BA::index[c] == I) || ...);
    return w;
  }
  template <bool Read, class X>
  static decltype(auto) pass_as(const X& x) {
    if constexpr (Read) {
      return (x);
    } else {
      return xt_policy::unread(x);
    }
  }
  // out = g (written is false) or out += g, g summed to a's shape
  template <class T, class O, class G, class A>
  static void add_gradient(O& out, const G& g, const A& a, bool written) {
    if (!written) {
      to_argument<T>(out, g, a);
      return;
    }
    if constexpr (XtStridedOf<G, T>) {
      if (g.layout() == xt::layout_type::row_major &&
          std::equal(g.shape().begin(), g.shape().end(), a.shape().begin(), a.shape().end())) {
        const T* p = g.data() + g.data_offset();
        T* o = out.data();
        for (std::size_t i = 0, size = g.size(); i < size; ++i) o[i] += p[i];
        return;
      }
    }
    out += reduce_to_shape_of(g, a);
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
    sweep<E, Args, xt_policy, work_array<T>> s(e, a);
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
    std::tuple<decltype(make_out<T>(std::get<I>(std::forward_as_tuple(args...))))...> out;
    T value{};
    general_sweep<I...>(
        e, std::tuple<const A&...>{args...}, [&](const auto& r) { return seed_like<T>(r, seed); },
        value, std::apply([](auto&... o) { return std::tie(o...); }, out));
    return out;
  }

 private:
  // vjp's seed: the cotangent, of the value's shape (a number for one value)
  template <class T, class R, class S>
  static auto seed_like(const R& r, const S& seed) {
    if constexpr (std::is_arithmetic_v<R>) {
      if constexpr (std::is_arithmetic_v<S>) {
        return static_cast<R>(seed);
      } else {
        check_seed(seed.size() == 1, r, seed);
        return static_cast<R>(*seed.begin());
      }
    } else if constexpr (std::is_arithmetic_v<S>) {
      check_seed(r.size() == 1, r, seed);
      return work_array<T>(xt::broadcast(static_cast<T>(seed), r.shape()));
    } else {
      const shape_t rs = shape_of(r), ss = shape_of(seed);
      check_seed(rs == ss, r, seed);
      return work_array<T>(seed);
    }
  }
  template <class R, class S>
  static void check_seed(bool ok, const R& r, const S& seed) {
    if (!ok)
      fail("vjp: the cotangent has shape ", shape_string(shape_of(seed)),
           " but the function's value has shape ", shape_string(shape_of(r)),
           "; pass a cotangent of the value's shape");
  }

  // The general sweep: the value into `value`, the gradient of argument I_j into out_j.
  template <std::size_t... I, class Traced, class... A, class SeedOf, class T, class Out>
  static void general_sweep(const Traced& traced, const std::tuple<const A&...>& args,
                            SeedOf seed_of, T& value, Out out) {
    const auto e = regionize(traced);  // Note [Regions]
    using E = std::remove_cvref_t<decltype(e)>;
    using Args = tuple<const A&...>;
    const Args a = std::apply([](const A&... x) { return Args{{x}...}; }, args);
    using Root =
        typename sweep_types<E, Args, xt_policy, int>::template val_t<plan_v<E>.nslots - 1>;
    using Seed = std::conditional_t<std::is_arithmetic_v<Root>, Root, work_array<T>>;
    sweep<E, Args, xt_policy, Seed, wanted_args<I...>> s(e, a);
    s.forward();
    const auto& r = s.result();
    const Seed seed = seed_of(r);
    if constexpr (std::is_arithmetic_v<Root>) {
      value = static_cast<T>(r);
    } else {
      value = r.size() == 1 ? static_cast<T>(*r.begin()) : T(0);
    }
    s.backward(seed);
    [&]<std::size_t... j>(std::index_sequence<j...>) {
      if constexpr (distinct<I...>()) {  // each adjoint is read once: Note [Handing over]
        (to_argument<T>(std::get<j>(out), s.template take_gradient<I>(seed, unused{}),
                        std::get<I>(args)),
         ...);
      } else {
        (to_argument<T>(std::get<j>(out), s.template gradient<I>(seed, unused{}),
                        std::get<I>(args)),
         ...);
      }
    }
    (std::index_sequence_for<decltype(I)...>{});
  }
  template <std::size_t... I>
  static constexpr bool distinct() {
    const std::size_t i[] = {I..., 0};
    for (std::size_t a = 0; a < sizeof...(I); ++a)
      for (std::size_t b = a + 1; b < sizeof...(I); ++b)
        if (i[a] == i[b]) return false;
    return true;
  }

  struct unused {};

  // out = a gradient in its argument's type (zeros when f does not use the argument): a
  // fixed-size out has the shape already, a dynamic one gets it.
  template <class T, class O, class G, class A>
  static void to_argument(O& out, const G& g, const A& a) {
    if constexpr (std::is_arithmetic_v<A>) {
      if constexpr (std::is_same_v<G, unused>) {
        out = A(0);
      } else {
        out = static_cast<A>(reduce_to_shape_of(g, a));
      }
    } else {
      shape_like<T>(out, a);
      if constexpr (std::is_same_v<G, unused>) {
        out.fill(T(0));
      } else if constexpr (XtStridedOf<G, T>) {
        if (g.layout() == xt::layout_type::row_major &&
            std::equal(g.shape().begin(), g.shape().end(), a.shape().begin(), a.shape().end())) {
          std::copy(g.data() + g.data_offset(), g.data() + g.data_offset() + g.size(), out.data());
          return;
        }
        out = reduce_to_shape_of(g, a);
      } else {
        out = reduce_to_shape_of(g, a);
      }
    }
  }
};
}  // namespace detail

// Note [Captured arrays]: an xtensor array with a static-engine expression (or a dual array:
// Note [Dual arrays]), in either order.
// xtensor's operators take forwarding references, which bind a non-const array better than a
// const reference; these take them too and are more constrained, so they win.
namespace detail {
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
