// One direction of forward mode on xtensor arrays (Note [Dual arrays] in xt/dual_family.hpp): the
// tangent of each kind of op applied to dual arrays whose tangents have their values' shapes.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include <metagrad/concepts.hpp>
#include <metagrad/core/dispatch.hpp>
#include <metagrad/dual_array.hpp>
#include <metagrad/ops.hpp>
#include <metagrad/xt/algebra.hpp>
#include <metagrad/xt/pool.hpp>
#include <metagrad/xt/region.hpp>

namespace mg::detail {
template <class X>
inline constexpr bool is_dual_v = false;
template <class T>
inline constexpr bool is_dual_v<dual_array<T>> = true;

// The value of x: the value part of a dual array, else x itself.
template <class X>
const auto& primal(const X& x) {
  if constexpr (is_dual_v<X>) {
    return x.value;
  } else {
    return x;
  }
}

// The element type of the first dual array among X...
template <class X, class... R>
constexpr auto first_dual_type() {
  if constexpr (is_dual_v<X>) {
    return std::type_identity<typename X::value_type>{};
  } else {
    return first_dual_type<R...>();
  }
}
template <class... X>
using dual_value_t = typename decltype(first_dual_type<X...>())::type;

// v (a number, an xtensor expression or a work_array) as a work_array<T>; a number is 0-d.
template <class T, class V>
work_array<T> as_work(V&& v) {
  using U = std::remove_cvref_t<V>;
  if constexpr (std::is_arithmetic_v<U>) {
    work_array<T> a = work_array<T>::from_shape(std::array<std::size_t, 0>{});
    a() = static_cast<T>(v);
    return a;
  } else if constexpr (std::is_same_v<U, work_array<T>>) {
    return std::forward<V>(v);
  } else {
    return work_array<T>(std::forward<V>(v));
  }
}

// x as a dual array: itself, or a value (number or array) with a zero tangent.
template <class T, class X>
dual_array<T> as_dual(X&& x) {
  if constexpr (is_dual_v<std::remove_cvref_t<X>>) {
    return std::forward<X>(x);
  } else {
    work_array<T> v = as_work<T>(std::forward<X>(x));
    work_array<T> t = work_array<T>::from_shape(v.shape());
    t.fill(T(0));
    return {std::move(v), std::move(t)};
  }
}

// The tangent of an elementwise op, as an elementwise op itself: inputs x_0..x_{N-1}, the output
// y, then the tangents of the dual inputs D...; applied as a region (Note [Regions]), so its body
// sees numbers and packs only, as every op body does.
template <class Op, std::size_t N, class D>
struct elementwise_tangent;
template <class Op, std::size_t N, std::size_t... D>
struct elementwise_tangent<Op, N, std::index_sequence<D...>> {
  static constexpr const char* name = "tangent";
  static constexpr bool differentiable = false;
  static constexpr bool simd = simd_enabled<Op>();
  static constexpr std::size_t arity = N + 1 + sizeof...(D);
  Op op;

  template <class... V>
  MG_HD auto forward(const V&... v) const {
    static_assert(sizeof...(V) == arity);
    const auto all = std::forward_as_tuple(v...);
    return local(all, std::make_index_sequence<N>{}, std::index_sequence_for<decltype(D)...>{});
  }

 private:
  template <class All, std::size_t... i, std::size_t... k>
  MG_HD auto local(const All& all, std::index_sequence<i...>, std::index_sequence<k...>) const {
    const auto& y = std::get<N>(all);
    using Y = std::remove_cvref_t<decltype(y)>;
    const Y one(1);
    const auto b = op.backward(std::get<i>(all)..., y, one);
    return (term<D>(b, std::get<N + 1 + k>(all), y) + ...);
  }
  template <std::size_t j, class B, class Tg, class Y>
  MG_HD static auto term(const B& b, const Tg& t, const Y&) {
    if constexpr (std::is_same_v<component_t<j, B>, no_grad>) {
      return Y(0);
    } else {
      return Y(component<j>(b) * t);
    }
  }
};

// The positions of the dual arrays among X...
template <class... X>
constexpr auto dual_positions() {
  constexpr bool d[] = {is_dual_v<X>..., false};
  constexpr std::size_t n = (std::size_t{is_dual_v<X>} + ... + 0);
  std::array<std::size_t, n + 1> at{};
  std::size_t c = 0;
  for (std::size_t i = 0; i < sizeof...(X); ++i)
    if (d[i]) at[c++] = i;
  return at;
}
template <class... X>
struct dual_seq {
  static constexpr auto at = dual_positions<X...>();
  template <std::size_t... k>
  static auto make(std::index_sequence<k...>) -> std::index_sequence<at[k]...>;
  using type = decltype(make(std::make_index_sequence<at.size() - 1>{}));
};

// Does Op reduce slices of its one input (a reduce_dims member named r)?
template <class Op>
concept SliceReduction = requires(const Op& op) {
  { op.r } -> std::convertible_to<reduce_dims>;
};

template <class T, class Op, class... X>
struct tangent_rule {
  using D = typename dual_seq<X...>::type;

  template <class Y>
  static work_array<T> of(const Op& op, const Y& y, const X&... x) {
    constexpr linearity lin = linearity_of<Op>();
    if constexpr (is_elementwise<Op>()) {
      return elementwise(op, y, D{}, x...);
    } else if constexpr (lin == linearity::jointly) {
      return work(call(op, tangent_or_zero(x)...));
    } else if constexpr (lin == linearity::separately) {
      return separately(op, D{}, x...);
    } else if constexpr (SliceReduction<Op> && sizeof...(X) == 1) {
      return reduction(op, y, x...);
    } else {
      return by_rows(op, y, D{}, x...);
    }
  }

 private:
  template <class Y, std::size_t... d>
  static work_array<T> elementwise(const Op& op, const Y& y, std::index_sequence<d...>,
                                   const X&... x) {
    const auto all = std::forward_as_tuple(x...);
    return work(call(elementwise_tangent<Op, sizeof...(X), std::index_sequence<d...>>{op},
                     primal(x)..., y, std::get<d>(all).tangent...));
  }
  template <class A>
  static decltype(auto) tangent_or_zero(const A& a) {
    if constexpr (is_dual_v<A>) {
      return (a.tangent);
    } else if constexpr (std::is_arithmetic_v<A>) {
      return A(0);
    } else {
      return work_array<T>(xt::zeros<T>(a.shape()));
    }
  }
  template <std::size_t... d>
  static work_array<T> separately(const Op& op, std::index_sequence<d...>, const X&... x) {
    return work((replaced<d>(op, std::index_sequence_for<X...>{}, x...) + ...));
  }
  // op with input j replaced by its tangent (an adj_term-free sum: work_arrays add by regions)
  template <std::size_t j, std::size_t... i>
  static auto replaced(const Op& op, std::index_sequence<i...>, const X&... x) {
    const auto all = std::forward_as_tuple(x...);
    return summand{work(call(op, pick<i == j>(std::get<i>(all))...))};
  }
  template <bool Tangent, class A>
  static const auto& pick(const A& a) {
    if constexpr (Tangent) {
      return a.tangent;
    } else {
      return primal(a);
    }
  }
  struct summand {
    work_array<T> v;
    friend summand operator+(summand&& a, summand&& b) {
      return {detail::as_work<T>(call(add_op{}, a.v, b.v))};
    }
  };
  static work_array<T> work(summand&& s) { return std::move(s.v); }
  template <class V>
  static work_array<T> work(V&& v) {
    return detail::as_work<T>(std::forward<V>(v));
  }
  template <class Y>
  static Y ones_like(const Y& y) {
    if constexpr (std::is_arithmetic_v<Y>) {
      return Y(1);
    } else {
      Y ones = Y::from_shape(y.shape());
      ones.fill(T(1));
      return ones;
    }
  }
  template <class Y>
  static work_array<T> reduction(const Op& op, const Y& y, const X&... x) {
    const Y ones = ones_like(y);
    const auto local = xt_policy::keep_bwd(op.backward(primal(x)..., y, ones));
    return work(call(sum_op{op.r}, call(mul_op{}, local, x.tangent...)));
  }
  // Any other op: (J t)_i = sum over dual inputs j of <row i of J_j, t_j>, row i being the op's
  // backward at the seed e_i: one backward per element of the output.
  template <class Y, std::size_t... d>
  static work_array<T> by_rows(const Op& op, const Y& y, std::index_sequence<d...>, const X&... x) {
    const auto all = std::forward_as_tuple(x...);
    if constexpr (std::is_arithmetic_v<Y>) {
      const auto b = xt_policy::keep_bwd(op.backward(primal(x)..., y, Y(1)));
      return as_work<T>((T(0) + ... + row_dot<d>(b, std::get<d>(all))));
    } else {
      work_array<T> t = work_array<T>::from_shape(y.shape());
      Y e = Y::from_shape(y.shape());
      e.fill(T(0));
      for (std::size_t i = 0; i < y.size(); ++i) {
        e.data()[i] = T(1);
        const auto b = xt_policy::keep_bwd(op.backward(primal(x)..., y, e));
        t.data()[i] = (T(0) + ... + row_dot<d>(b, std::get<d>(all)));
        e.data()[i] = T(0);
      }
      return t;
    }
  }
  template <std::size_t j, class B>
  static T row_dot(const B& b, const dual_array<T>& xj) {
    if constexpr (std::is_same_v<component_t<j, B>, no_grad>) {
      return T(0);
    } else {
      const work_array<T> r(reduce_to_shape_of(component<j>(b), xj.value));
      T s(0);
      for (std::size_t k = 0; k < r.size(); ++k) s += r.data()[k] * xj.tangent.data()[k];
      return s;
    }
  }
};

}  // namespace mg::detail
