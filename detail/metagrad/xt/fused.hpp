// The forms of a traced expression that the static engine's xtensor evaluator runs as fused
// loops (xt/fused_paths.hpp): which expressions they are, and the rewrites that prepare them
// (Note [Hoisting], Note [Scalar epilogue]). Types and constexpr functions only; the loops are
// element_loop (xt/region.hpp) and the evaluator.
#pragma once

#include <array>
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include <metagrad/concepts.hpp>
#include <metagrad/core/type_list.hpp>
#include <metagrad/expr.hpp>
#include <metagrad/ops/arithmetic.hpp>
#include <metagrad/ops/reductions.hpp>
#include <metagrad/static/plan.hpp>
#include <metagrad/xt/region.hpp>

namespace mg::detail {

// Is every node of E elementwise (no shaped op anywhere)?
template <class E>
inline constexpr bool all_elementwise_v = true;
template <class Op, class... A>
inline constexpr bool all_elementwise_v<node<Op, A...>> = is_elementwise<Op>() &&
                                                          (all_elementwise_v<A> && ...);

// Does E hold a captured array (Note [Captured arrays] in xt/array_family.hpp)?
template <class E>
inline constexpr bool has_array_constant_v = false;
template <class T, class O>
inline constexpr bool has_array_constant_v<cst<T, O>> = is_captured_array_v<T>;
// ... or in the step a loop node holds (Note [Scan])
template <class Op>
constexpr bool op_has_array_constant() {
  if constexpr (requires { std::tuple_size<decltype(Op::body)>::value; }) {
    return []<std::size_t... j>(std::index_sequence<j...>) {
      return (has_array_constant_v<std::tuple_element_t<j, decltype(Op::body)>> || ...);
    }
    (std::make_index_sequence<std::tuple_size_v<decltype(Op::body)>>{});
  } else {
    return false;
  }
}
template <class Op, class... A>
inline constexpr bool has_array_constant_v<node<Op, A...>> =
    (has_array_constant_v<A> || ...) || op_has_array_constant<Op>();

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
template <class T, class O, class Args>
inline constexpr bool reads_array_v<cst<T, O>, Args> = is_captured_array_v<T>;
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
struct as_std_tuple;
template <class... T>
struct as_std_tuple<type_list<T...>> {
  using type = std::tuple<T...>;
};
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
template <class T, class O, class Args>
struct epilogue_kind<cst<T, O>, Args>
    : std::integral_constant<int, is_captured_array_v<T> ? 0 : 1> {};
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
    }()> {
};

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

// Note [Shaped boundaries]: f = sum(inner) where inner is elementwise over the arguments and over
// shaped ops of array arguments (`sum(tanh(matmul(W, x)))`, `sum(exp(matmul(x, w)) * y)`). Each
// distinct such op, a boundary, is evaluated first (gemv for `W x`), and becomes an input of the
// fused loop, arg<K + m>; the loop computes the value and, once per element, the gradients of the
// arguments it reads and of every boundary; each boundary's own backward then turns its gradient
// into its arguments' (an outer product and a gemv), written into the results. So the region's
// values are computed once (the general path's region computes them forward and again backward),
// no seed or broadcast is materialised, and nothing reaches the results through an intermediate
// copy but what the shaped op returns. Boundaries are stateless (their type is all of them, so
// one occurring twice is one input) and read array arguments only; anything else, and arrays of
// other shapes than the boundaries', takes the general path.
template <class C, class Args>
inline constexpr bool array_arg_v = false;
template <std::size_t J, class Args>
inline constexpr bool array_arg_v<arg<J>, Args> =
    !std::is_arithmetic_v<std::tuple_element_t<J, Args>>;

template <class E, class Args>
inline constexpr bool boundary_node_v = false;
template <class Op, class... C, class Args>
inline constexpr bool boundary_node_v<node<Op, C...>, Args> =
    !is_elementwise<Op>() && is_differentiable<Op>() && stateless_v<node<Op, C...>> &&
    (array_arg_v<C, Args> && ...);

// Is E elementwise down to arguments, number constants and boundaries? Does it hold a boundary?
template <class E, class Args>
inline constexpr bool bounded_v = true;  // arg<J>
template <class T, class O, class Args>
inline constexpr bool bounded_v<cst<T, O>, Args> = !is_captured_array_v<T>;
template <class Op, class... C, class Args>
inline constexpr bool bounded_v<node<Op, C...>, Args> = is_elementwise<Op>()
                                                            ? (bounded_v<C, Args>&&...)
                                                            : boundary_node_v<node<Op, C...>, Args>;
template <class E, class Args>
inline constexpr bool has_boundary_v = false;
template <class Op, class... C, class Args>
inline constexpr bool has_boundary_v<node<Op, C...>, Args> =
    !is_elementwise<Op>() || (has_boundary_v<C, Args> || ...);

template <class E, class Args>
inline constexpr bool boundary_sum_v = false;
template <class Inner, class Args>
inline constexpr bool boundary_sum_v<node<sum_op, Inner>, Args> =
    bounded_v<Inner, Args>&& has_boundary_v<Inner, Args>;

// The distinct boundaries of E, in order of first occurrence.
template <class E, class Args>
struct boundary_list {
  using type = type_list<>;
};
template <class Op, class... C, class Args>
struct boundary_list<node<Op, C...>, Args> {
  using type = std::conditional_t<
      boundary_node_v<node<Op, C...>, Args>, type_list<node<Op, C...>>,
      typename merge_all<type_list<>, typename boundary_list<C, Args>::type...>::type>;
};
template <class E, class Args>
using boundary_list_t = typename boundary_list<E, Args>::type;

// e with each boundary B replaced by arg<K + index of B in L>.
template <class Args, std::size_t K, class L, class E>
constexpr auto boundary_rewrite(const E& e) {
  if constexpr (boundary_node_v<E, Args>) {
    return arg<K + index_in<E>(L{})>{};
  } else if constexpr (is_node_v<E>) {
    return [&]<class Op, class... C>(const node<Op, C...>& n) {
      return [&]<std::size_t... j>(std::index_sequence<j...>) {
        return assemble(n.op, boundary_rewrite<Args, K, L>(child<j>(n))...);
      }
      (std::index_sequence_for<C...>{});
    }(e);
  } else {
    return e;
  }
}

// The arguments of a boundary node, as indices.
template <class B>
struct boundary_args;
template <class Op, std::size_t... J>
struct boundary_args<node<Op, arg<J>...>> {
  using op = Op;
  static constexpr std::array<std::size_t, sizeof...(J)> index{J...};
};

}  // namespace mg::detail
