// The array evaluator's fused paths (Note [Hoisting] and Note [Scalar epilogue] in xt/fused.hpp):
// a sum (or product) of an elementwise expression whose array arguments share one shape runs as
// ONE SIMD loop, forward and reverse sweep per pack (element_loop, xt/region.hpp); every
// intermediate lives in registers and each argument's gradient is written once.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#include <metagrad/concepts.hpp>
#include <metagrad/core/simd.hpp>
#include <metagrad/static/evaluator.hpp>
#include <metagrad/static/sweep.hpp>
#include <metagrad/xt/algebra.hpp>
#include <metagrad/xt/fused.hpp>
#include <metagrad/xt/general.hpp>
#include <metagrad/xt/region.hpp>

namespace mg::detail {

// Is the root of a fusible expression a sum of all elements (not along a dim)?
template <class E>
bool full_sum(const E& e) {
  return e.op.r.all && !e.op.r.keepdim;
}

struct array_fused : array_general {
 protected:
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
        return same_extents(a.shape(), f.shape());
      } else {
        return true;
      }
    };
    return (same(args) && ...);
  }
  // The same, except that an array may also have the last extents of the largest one's shape in
  // periods of at least a pack: a bias row beside a batch (Note [Periodic sources]).
  template <class... A>
  static bool loop_shapes_agree(const A&... args) {
    if (same_shapes(args...)) return true;
    using T = std::common_type_t<typename value_of<A>::type...>;
    dims shape;
    std::size_t largest = 0;
    bool first = true;
    const auto find = [&](const auto& a) {
      if constexpr (XtExpr<decltype(a)>) {
        if (first || a.size() > largest) {
          shape = dims(a.shape().begin(), a.shape().end());
          largest = a.size();
          first = false;
        }
      }
    };
    (find(args), ...);
    const auto agree = [&](const auto& a) {
      if constexpr (XtExpr<decltype(a)>) {
        return agrees<T>(a.shape(), shape);
      } else {
        return true;
      }
    };
    return (agree(args) && ...);
  }
  // Does an array of extents xs have `shape`, or repeat along its leading dimensions?
  template <class T, class XS, class S>
  static bool agrees(const XS& xs, const S& shape) {
    return same_extents(xs, shape) || periodic_in(xs, shape, pack<T>::size);
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
    std::tuple<copy_for<T, A>...> copies;
    using Loop = std::remove_cvref_t<decltype(inner)>;
    const auto data = [&]<std::size_t... k, std::size_t... h>(std::index_sequence<k...>,
                                                              std::index_sequence<h...>) {
      return std::tuple{loop_source<T, reads_arg_v<k, Loop>>(args, std::get<k>(copies))...,
                        static_cast<T>(std::get<h>(hoisted_sweeps).result())...};
    }
    (std::index_sequence_for<A...>{}, std::make_index_sequence<H>{});
    // the loop's size is that of the largest array it reads; a smaller one repeats (Note
    // [Periodic sources]: the callers checked that it does)
    std::size_t n = 0;
    [&]<std::size_t... k>(std::index_sequence<k...>) {
      ((n = reads_arg_v<k, Loop> ? std::max(n, arg_size(args, 0)) : n), ...);
    }
    (std::index_sequence_for<A...>{});
    std::array<std::size_t, K + H> period{};
    [&]<std::size_t... k>(std::index_sequence<k...>) {
      ((period[k] = reads_arg_v<k, Loop> && arg_size(args, n) != n ? arg_size(args, n) : 0), ...);
    }
    (std::index_sequence_for<A...>{});
    const bool by_rows = std::any_of(period.begin(), period.end(), [](auto q) { return q != 0; });
    constexpr std::array<std::size_t, sizeof...(I) + 1> ids{I..., 0};
    auto sinks = [&]<std::size_t... h>(std::index_sequence<h...>) {
      return std::tuple_cat(
          std::apply([](auto&... o) { return std::tuple{sink_for<T>(o)...}; }, grads_out),
          std::tuple{(void(h), sum_sink<T>{})...});
    }
    (std::make_index_sequence<H>{});
    const auto sink_period = [&]<std::size_t... j, std::size_t... h>(std::index_sequence<j...>,
                                                                     std::index_sequence<h...>) {
      return std::array<std::size_t, sizeof...(I) + H>{period[ids[j]]..., (void(h), 0)...};
    }
    (std::make_index_sequence<sizeof...(I)>{}, std::make_index_sequence<H>{});
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(e.op)>, prod_op>) {
      prod_sink<T> product;
      std::tuple<> none;
      if (by_rows) {
        element_rows<T, false>(std::index_sequence<>{}, inner, data, period, {}, n, T(0), product,
                               none);
      } else {
        element_loop<T, false>(std::index_sequence<>{}, inner, data, n, T(0), product, none);
      }
      total = product.total();
      // a zero factor (or a product that underflows or overflows): the general path's rules
      if (!(total != T(0)) || !std::isfinite(total)) return false;
      no_sink ignored;
      [&]<std::size_t... h>(std::index_sequence<h...>) {
        if (by_rows) {
          element_rows<T, true>(std::index_sequence<I..., K + h...>{}, inner, data, period,
                                sink_period, n, quotient_seed<T>{total}, ignored, sinks);
        } else {
          element_loop<T, true>(std::index_sequence<I..., K + h...>{}, inner, data, n,
                                quotient_seed<T>{total}, ignored, sinks);
        }
      }
      (std::make_index_sequence<H>{});
    } else {
      sum_sink<T> value;
      [&]<std::size_t... h>(std::index_sequence<h...>) {
        if (by_rows) {
          element_rows<T, true>(std::index_sequence<I..., K + h...>{}, inner, data, period,
                                sink_period, n, unit_seed{}, value, sinks);
        } else {
          element_loop<T, true>(std::index_sequence<I..., K + h...>{}, inner, data, n, unit_seed{},
                                value, sinks);
        }
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
  using number_sweep =
      sweep<X, Numbers, plain_policy,
            typename value_types<X, Numbers, plain_policy>::template val_t<plan_v<X>.nslots - 1>>;
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
};

}  // namespace mg::detail
