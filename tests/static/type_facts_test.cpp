// Type-level facts of the op registry and the dispatch, checked at compile time only: every
// built-in op is a StaticOp with the traits the engines read, each family's function builds the
// right thing, and misuse does not compile (`requires !requires`).
#include <string>
#include <type_traits>

#include <metagrad/metagrad.hpp>

namespace {

using mg::detail::is_differentiable;
using mg::detail::is_elementwise;
using mg::detail::saves_of;

template <class... Ops>
constexpr bool all_static_ops(mg::op_list<Ops...>) {
  return (mg::StaticOp<Ops> && ...);
}
static_assert(all_static_ops(mg::builtin_ops{}), "every built-in op is a StaticOp");

// What backward reads, as each op declares it (the runtime engine saves exactly this).
static_assert(saves_of<mg::add_op>() == mg::saved::nothing);
static_assert(saves_of<mg::mul_op>() == mg::saved::inputs);
static_assert(saves_of<mg::exp_op>() == mg::saved::output);
static_assert(saves_of<mg::div_op>() == mg::saved::inputs);  // b, and a when b needs grad
static_assert(saves_of<mg::pow_elementwise_op>() == mg::saved::both);
static_assert(saves_of<mg::where_op>() == mg::saved::inputs);

// A slice with fixed bounds carries no run-time state, so its occurrences are one slot; one with
// run-time bounds is planned per occurrence (Note [Fixed indices], Note [Slot identity]).
using fixed_slice_t = decltype(mg::slice<0, 1, 3>(mg::arg<0>{}));
using run_time_slice_t = decltype(mg::slice(mg::arg<0>{}, 0, 1, 3));
static_assert(mg::detail::stateless_v<fixed_slice_t>);
static_assert(!mg::detail::stateless_v<run_time_slice_t>);
static_assert(mg::detail::plan_v<decltype(fixed_slice_t{} * fixed_slice_t{})>.nslots == 3);
static_assert(mg::detail::stateless_v<decltype(mg::select<0, 2>(mg::arg<0>{}))>);

// Elementwise or not, differentiable or not.
static_assert(is_elementwise<mg::exp_op>() && is_elementwise<mg::where_op>());
static_assert(!is_elementwise<mg::sum_op>() && !is_elementwise<mg::matmul_op>());
static_assert(!is_differentiable<mg::gt_op>() && !is_differentiable<mg::ne_op>());
static_assert(is_differentiable<mg::maximum_op>());

// A user's struct needs no name, saves or traits: it is a StaticOp with the safe defaults.
struct plain_square {
  static auto forward(const auto& x) { return x * x; }
  static auto backward(const auto& x, const auto&, const auto& g) { return 2 * x * g; }
};
static_assert(mg::StaticOp<plain_square>);
static_assert(saves_of<plain_square>() == mg::saved::both);
struct no_backward {
  static auto forward(const auto& x) { return x; }
};
static_assert(!mg::StaticOp<no_backward>);
struct wrong_count {
  static auto forward(const auto& a, const auto& b) { return a * b; }
  static auto backward(const auto&, const auto&, const auto&, const auto& g) { return g; }
};
static_assert(!mg::StaticOp<wrong_count>);

// One function per op, three families: numbers evaluate, expressions build nodes, tensors record.
using x0 = mg::arg<0>;
using x1 = mg::arg<1>;
static_assert(std::is_same_v<decltype(mg::exp(2.0)), double>);
static_assert(std::is_same_v<decltype(mg::relu(2.0f)), float>);
static_assert(std::is_same_v<decltype(mg::clamp(2.0f, -1.0, 1.0)), float>);
static_assert(std::is_same_v<decltype(mg::exp(x0{})), mg::node<mg::exp_op, x0>>);
static_assert(std::is_same_v<decltype(x0{} * x1{}), mg::node<mg::mul_op, x0, x1>>);
// a number an operator joins is a constant of the place that made it (Note [Constant origins]):
// two places are two types, a copy is the same type
template <class E>
struct joined_constant;
template <class Op, class A, class T, class O>
struct joined_constant<mg::node<Op, A, mg::cst<T, O>>> {
  using value = T;
  using origin = O;
};
static_assert(std::is_same_v<joined_constant<decltype(x0{} + 1.0)>::value, double>);
static_assert(!std::is_void_v<joined_constant<decltype(x0{} + 1.0)>::origin>);
static_assert(!std::is_same_v<decltype(x0{} + 1.0), decltype(x0{} + 1.0)>);
constexpr auto plus_one = x0{} + 1.0;
constexpr auto plus_one_copy = plus_one;
static_assert(std::is_same_v<decltype(plus_one), decltype(plus_one_copy)>);
static_assert(std::is_same_v<decltype(x0{} > 0), mg::node<mg::gt_op, x0, mg::cst<int>>>);
static_assert(std::is_same_v<decltype(mg::atan2(mg::tensor{}, 1.0)), mg::tensor>);
static_assert(std::is_same_v<decltype(mg::tensor{} > 0.5), mg::tensor>);
static_assert(std::is_same_v<decltype(mg::where(true, 1.0, 2.0)), double>);
static_assert(std::is_same_v<decltype(mg::apply<plain_square>(x0{})), mg::node<plain_square, x0>>);

// Misuse does not compile (a requires-expression is only checked softly inside a template).
template <class X>
concept has_exp = requires(const X& x) {
  mg::exp(x);
};
template <class A, class B>
concept addable = requires(const A& a, const B& b) {
  a + b;
};
template <class A, class B>
concept has_maximum = requires(const A& a, const B& b) {
  mg::maximum(a, b);
};
template <class X, class P>
concept has_pow = requires(const X& x, const P& p) {
  mg::pow(x, p);
};
template <class X, class L>
concept has_clamp = requires(const X& x, const L& l) {
  mg::clamp(x, l, 1.0);
};

static_assert(has_exp<double> && has_exp<mg::tensor> && has_exp<x0>);
static_assert(!has_exp<std::string>, "not an operand");
static_assert(addable<x0, double> && addable<mg::tensor, double>);
static_assert(!addable<x0, mg::tensor>, "two families do not mix");
static_assert(!has_maximum<mg::tensor, x0>, "two families do not mix");
static_assert(has_pow<mg::tensor, int> && has_pow<mg::tensor, mg::tensor>);
static_assert(!has_pow<mg::tensor, const char*>, "not an exponent");
static_assert(has_clamp<mg::tensor, double>);
static_assert(!has_clamp<mg::tensor, mg::tensor>, "clamp's bounds are numbers");

}  // namespace
