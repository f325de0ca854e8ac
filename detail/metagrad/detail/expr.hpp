// Static-engine expression types: the typed graph a generic callable builds when it is called
// with symbolic leaves. They live in namespace mg so that argument-dependent lookup finds the
// operators below and error messages read `mg::node<mg::mul_op, mg::var<0>, mg::var<1>>`.
#pragma once

#include <concepts>
#include <cstddef>
#include <type_traits>
#include <utility>

#include <metagrad/concepts.hpp>
#include <metagrad/detail/config.hpp>
#include <metagrad/grads.hpp>
#include <metagrad/ops/elementwise.hpp>
#include <metagrad/ops/shaped.hpp>

namespace mg {

/// Leaf of the static engine: the I-th argument of the differentiated function.
template <std::size_t I>
struct var {};

/// A constant captured by value (a literal such as the 1 in `1 + x * x`).
template <class T>
struct cst {
  T value;
};

/// An interior node: Op applied to Args. Op holds the attributes of the op (empty for most).
template <class Op, class... Args>
struct node {
  [[no_unique_address]] Op op;
  detail::tuple<Args...> args;
};

namespace detail {
template <class T>
inline constexpr bool is_expr_v = false;
template <std::size_t I>
inline constexpr bool is_expr_v<var<I>> = true;
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

template <class T>
concept Operand = Expr<T> || std::is_arithmetic_v<std::remove_cvref_t<T>>;

template <class Op, class... Ts>
MG_HD constexpr auto make_node(Op op, Ts&&... ts) {
  using N = node<Op, decltype(as_expr(std::forward<Ts>(ts)))...>;
  return N{op, {{as_expr(std::forward<Ts>(ts))}...}};
}
}  // namespace detail

// Arithmetic on expressions: at least one side is an expression, the other may be a number.
template <class L, class R>
concept ExprOperands = detail::Operand<L> && detail::Operand<R> &&(Expr<L> || Expr<R>);

template <class L, class R>
requires ExprOperands<L, R> MG_HD constexpr auto operator+(L&& l, R&& r) {
  return detail::make_node(add_op{}, std::forward<L>(l), std::forward<R>(r));
}
template <class L, class R>
requires ExprOperands<L, R> MG_HD constexpr auto operator-(L&& l, R&& r) {
  return detail::make_node(sub_op{}, std::forward<L>(l), std::forward<R>(r));
}
template <class L, class R>
requires ExprOperands<L, R> MG_HD constexpr auto operator*(L&& l, R&& r) {
  return detail::make_node(mul_op{}, std::forward<L>(l), std::forward<R>(r));
}
template <class L, class R>
requires ExprOperands<L, R> MG_HD constexpr auto operator/(L&& l, R&& r) {
  return detail::make_node(div_op{}, std::forward<L>(l), std::forward<R>(r));
}

template <Expr X>
MG_HD constexpr auto operator-(X&& x) {
  return detail::make_node(neg_op{}, std::forward<X>(x));
}
template <Expr X>
MG_HD constexpr auto operator+(X&& x) {
  return std::remove_cvref_t<X>(std::forward<X>(x));
}

template <Expr X>
MG_HD constexpr auto exp(X&& x) {
  return detail::make_node(exp_op{}, std::forward<X>(x));
}
template <Expr X>
MG_HD constexpr auto log(X&& x) {
  return detail::make_node(log_op{}, std::forward<X>(x));
}
template <Expr X>
MG_HD constexpr auto sin(X&& x) {
  return detail::make_node(sin_op{}, std::forward<X>(x));
}
template <Expr X>
MG_HD constexpr auto cos(X&& x) {
  return detail::make_node(cos_op{}, std::forward<X>(x));
}
template <Expr X>
MG_HD constexpr auto tanh(X&& x) {
  return detail::make_node(tanh_op{}, std::forward<X>(x));
}
template <Expr X, class P>
requires std::is_arithmetic_v<P> MG_HD constexpr auto pow(X&& x, P p) {
  return detail::make_node(pow_op{static_cast<double>(p)}, std::forward<X>(x));
}
// On plain numbers (0-d arrays) sum is the identity and matmul the product, so that a
// function written for arrays also runs on numbers.
template <class X>
requires std::is_arithmetic_v<X>
constexpr X sum(X x) { return x; }
template <class A, class B>
requires(std::is_arithmetic_v<A>&& std::is_arithmetic_v<B>) constexpr auto matmul(A a, B b) {
  return a * b;
}

template <Expr X>
constexpr auto sum(X&& x) {
  return detail::make_node(sum_op{}, std::forward<X>(x));
}
template <Expr X>
constexpr auto sum(X&& x, std::ptrdiff_t axis) {
  return detail::make_node(sum_axis_op{axis}, std::forward<X>(x));
}
template <Expr A, Expr B>
constexpr auto matmul(A&& a, B&& b) {
  return detail::make_node(matmul_op{}, std::forward<A>(a), std::forward<B>(b));
}

/// Applies a ctx-free custom op. On static-engine expressions this records a node; the
/// runtime engine (mg::tensor) adds its own overload in <metagrad/function.hpp>:
/// ```cpp
/// struct softplus {
///   static auto forward(const auto& x) { using std::exp, std::log; return log(1 + exp(x)); }
///   // d/dx log(1 + e^x) = 1 - 1/(1 + e^x) = 1 - exp(-y)
///   static auto backward(const auto&, const auto& y, const auto& g) { using std::exp; return g *
///   (1 - exp(-y)); }
/// };
/// auto df = mg::grad([](auto x) { return mg::apply<softplus>(x * x); })(0.5);
/// ```
template <class F, class... A>
requires(Expr<A> || ...) constexpr auto apply(A&&... a) {
  detail::diagnose_static_op<F>();
  static_assert(sizeof...(A) == detail::op_arity<F>(),
                "metagrad: apply<F> got a different number of inputs than F::forward takes");
  return detail::make_node(F{}, std::forward<A>(a)...);
}

template <class F, class... A>
requires(std::is_arithmetic_v<std::remove_cvref_t<A>>&&...) constexpr auto apply(const A&... a) {
  detail::diagnose_static_op<F>();
  return F{}.forward(a...);
}

namespace detail {
// Expression values appear only when a static gradient is itself differentiated (grad of grad),
// which the static engine supports for scalar functions: arrays of expressions are 0-d.
template <class X>
requires Expr<X>
struct algebra_impl<X> {
  static constexpr auto sum(const auto& x) { return x; }
  static constexpr auto sum(const auto& x, std::ptrdiff_t) { return x; }
  static constexpr auto unsqueeze(const auto& x, std::ptrdiff_t) { return x; }
  static constexpr auto expand_as(const auto& g, const auto&) { return g; }
  static constexpr auto matmul(const auto& a, const auto& b) { return a * b; }
  static constexpr auto transpose(const auto& x) { return x; }
};
}  // namespace detail

}  // namespace mg
