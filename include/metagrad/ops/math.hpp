// Unary math: exp, log, sin, cos, tanh.
//
// Conventions of every op family. An op is one struct and one line that names it:
//   - `forward(x...)` and `backward(x..., y, g)`, generic over the element type: float/double, a
//     SIMD pack, an element inside a Thrust functor, a static-engine expression (grad of grad),
//     or mg::tensor (backward under create_graph). Names are found by `using std::f;` plus
//     argument-dependent lookup, so the same body serves them all. y = forward(x...), g is the
//     gradient of the output; a one-input backward returns its gradient, a multi-input one
//     mg::grads{...}. Gradients are in the output's shape: broadcasting engines sum them back.
//   - `name`, and `saves`: which of x and y backward reads (the runtime engine keeps only those).
//   - the public function is `detail::call(op, args...)`, which picks the evaluator from the
//     arguments (numbers, expressions, tensors); a number mixes with any of them.
//   - the family's `op_list` names it once more, for the device backends and the tests.
#pragma once

#include <cmath>

#include <metagrad/concepts.hpp>
#include <metagrad/detail/config.hpp>
#include <metagrad/detail/dispatch.hpp>
#include <metagrad/ops/list.hpp>

namespace mg {

struct exp_op {
  static constexpr const char* name = "exp";
  static constexpr auto saves = saved::output;
  MG_HD static auto forward(const auto& x) {
    using std::exp;
    return exp(x);
  }
  // d/dx exp(x) = exp(x) = y
  MG_HD static constexpr auto backward(const auto&, const auto& y, const auto& g) { return g * y; }
};
template <class X>
requires detail::Operands<X>
MG_HD constexpr auto exp(const X& x) { return detail::call(exp_op{}, x); }

struct log_op {
  static constexpr const char* name = "log";
  static constexpr auto saves = saved::inputs;
  MG_HD static auto forward(const auto& x) {
    using std::log;
    return log(x);
  }
  // d/dx log(x) = 1/x
  MG_HD static constexpr auto backward(const auto& x, const auto&, const auto& g) { return g / x; }
};
template <class X>
requires detail::Operands<X>
MG_HD constexpr auto log(const X& x) { return detail::call(log_op{}, x); }

struct sin_op {
  static constexpr const char* name = "sin";
  static constexpr auto saves = saved::inputs;
  MG_HD static auto forward(const auto& x) {
    using std::sin;
    return sin(x);
  }
  // d/dx sin(x) = cos(x)
  MG_HD static auto backward(const auto& x, const auto&, const auto& g) {
    using std::cos;
    return g * cos(x);
  }
};
template <class X>
requires detail::Operands<X>
MG_HD constexpr auto sin(const X& x) { return detail::call(sin_op{}, x); }

struct cos_op {
  static constexpr const char* name = "cos";
  static constexpr auto saves = saved::inputs;
  MG_HD static auto forward(const auto& x) {
    using std::cos;
    return cos(x);
  }
  // d/dx cos(x) = -sin(x)
  MG_HD static auto backward(const auto& x, const auto&, const auto& g) {
    using std::sin;
    return -(g * sin(x));
  }
};
template <class X>
requires detail::Operands<X>
MG_HD constexpr auto cos(const X& x) { return detail::call(cos_op{}, x); }

struct tanh_op {
  static constexpr const char* name = "tanh";
  static constexpr auto saves = saved::output;
  MG_HD static auto forward(const auto& x) {
    using std::tanh;
    return tanh(x);
  }
  // d/dx tanh(x) = 1 - tanh(x)^2 = 1 - y^2
  MG_HD static constexpr auto backward(const auto&, const auto& y, const auto& g) {
    return g * (1 - y * y);
  }
};
template <class X>
requires detail::Operands<X>
MG_HD constexpr auto tanh(const X& x) { return detail::call(tanh_op{}, x); }

using math_ops = op_list<exp_op, log_op, sin_op, cos_op, tanh_op>;

}  // namespace mg
