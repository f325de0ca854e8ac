// The static engine's expression types: the typed graph a generic callable builds when it is
// called with symbolic leaves. They live in namespace mg so that argument-dependent lookup finds
// the ops' functions and operators, and error messages read
// `mg::node<mg::mul_op, mg::arg<0>, mg::arg<1>>`.
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

#include <metagrad/concepts.hpp>
#include <metagrad/detail/config.hpp>
#include <metagrad/detail/dispatch.hpp>
#include <metagrad/detail/tuple.hpp>

namespace mg {

/// Leaf of the static engine: the I-th argument of the differentiated function.
template <std::size_t I>
struct arg {
  using mg_family = detail::expr_family;
};

/// A constant captured by value (a literal such as the 1 in `1 + x * x`).
template <class T>
struct cst {
  using mg_family = detail::expr_family;
  T value;
};

/// An interior node: Op applied to Args. Op holds the attributes of the op (empty for most).
template <class Op, class... Args>
struct node {
  using mg_family = detail::expr_family;
  [[no_unique_address]] Op op;
  detail::tuple<Args...> args;
};

namespace detail {
template <class T>
inline constexpr bool is_expr_v = false;
template <std::size_t I>
inline constexpr bool is_expr_v<arg<I>> = true;
template <class T>
inline constexpr bool is_expr_v<cst<T>> = true;
template <class Op, class... Args>
inline constexpr bool is_expr_v<node<Op, Args...>> = true;
}  // namespace detail

/// A static-engine expression: a leaf, a constant or a node.
template <class T>
concept Expr = detail::is_expr_v<std::remove_cvref_t<T>>;

namespace detail {
template <class T>
MG_HD constexpr auto as_expr(T&& t) {
  if constexpr (Expr<T>) {
    return std::remove_cvref_t<T>(std::forward<T>(t));
  } else {
    return cst<std::remove_cvref_t<T>>{std::forward<T>(t)};
  }
}

template <class Op, class... Ts>
MG_HD constexpr auto make_node(Op op, Ts&&... ts) {
  using N = node<Op, decltype(as_expr(std::forward<Ts>(ts)))...>;
  return N{op, {{as_expr(std::forward<Ts>(ts))}...}};
}

// The expression family of detail::call: applying an op records a node.
template <class Op, class... X>
MG_HD constexpr auto apply_in(expr_family, const Op& op, const X&... x) {
  return make_node(op, x...);
}
}  // namespace detail

template <Expr X>
MG_HD constexpr auto operator+(X&& x) {
  return std::remove_cvref_t<X>(std::forward<X>(x));
}

/// Applies a ctx-free custom op. On static-engine expressions this records a node, on numbers
/// it evaluates the op; mg::tensor has its overload in <metagrad/function.hpp>:
/// ```cpp
/// struct softplus {
///   static auto forward(const auto& x) { using std::exp, std::log; return log(1 + exp(x)); }
///   // d/dx log(1 + e^x) = 1 - 1/(1 + e^x) = 1 - exp(-y)
///   static auto backward(const auto&, const auto& y, const auto& g) {
///     using std::exp; return g * (1 - exp(-y)); }
/// };
/// auto df = mg::grad([](auto x) { return mg::apply<softplus>(x * x); })(0.5);
/// ```
template <class F, class... A>
requires((Expr<A> || ...) || (std::is_arithmetic_v<std::remove_cvref_t<A>> && ...)) MG_HD
    constexpr auto apply(const A&... a) {
  detail::diagnose_static_op<F>();
  static_assert(sizeof...(A) == detail::op_arity<F>(),
                "metagrad: apply<F> got a different number of inputs than F::forward takes");
  return detail::call(F{}, a...);
}

}  // namespace mg
