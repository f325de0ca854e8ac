// Arithmetic: + - * / and unary -, pow (a number exponent, or elementwise), maximum, minimum,
// atan2. Each op is one struct,
// evaluated unchanged by every engine and backend (see <metagrad/ops/math.hpp> for the
// conventions), and one line that names it. Each operator has a generic template for
// static-engine expressions and two overloads for tensors (tensor @ tensor-or-number, number @
// tensor) that take the tensor as detail::tracked, so that its node knows the caller's line.
#pragma once

#include <concepts>
#include <type_traits>
#include <utility>

#include <metagrad/concepts.hpp>
#include <metagrad/core/config.hpp>
#include <metagrad/core/dispatch.hpp>
#include <metagrad/core/element_math.hpp>
#include <metagrad/grads.hpp>
#include <metagrad/ops/list.hpp>

namespace mg {

struct add_op {
  static constexpr const char* name = "add";
  static constexpr bool keeps_integers = true;
  static constexpr auto saves = saved::nothing;
  MG_HD static constexpr auto forward(const auto& a, const auto& b) { return a + b; }
  // d/da (a+b) = 1, d/db (a+b) = 1
  // g goes to both inputs: copied once, and handed over to the second when it is a temporary
  template <class G>
  MG_HD static constexpr auto backward(const auto&, const auto&, const auto&, G&& g) {
    return grads{g, static_cast<G&&>(g)};
  }
};
template <class L, class R, class Origin = MG_ORIGIN>
requires detail::OperatorOperands<L, R> MG_HD constexpr auto operator+(const L& a, const R& b) {
  return detail::call_from<Origin>(add_op{}, a, b);
}
template <class R>
requires detail::TensorOperatorOperand<R>
auto operator+(detail::tracked a, const R& b) {
  return detail::call_at(a.site, add_op{}, a.value, b);
}
template <class L>
requires std::is_arithmetic_v<L>
auto operator+(const L& a, detail::tracked b) {
  return detail::call_at(b.site, add_op{}, a, b.value);
}

struct sub_op {
  static constexpr const char* name = "sub";
  static constexpr bool keeps_integers = true;
  static constexpr auto saves = saved::nothing;
  MG_HD static constexpr auto forward(const auto& a, const auto& b) { return a - b; }
  // d/da (a-b) = 1, d/db (a-b) = -1
  template <class G>
  MG_HD static constexpr auto backward(const auto&, const auto&, const auto&, G&& g) {
    auto minus = -g;
    return grads{static_cast<G&&>(g), std::move(minus)};
  }
};
template <class L, class R, class Origin = MG_ORIGIN>
requires detail::OperatorOperands<L, R> MG_HD constexpr auto operator-(const L& a, const R& b) {
  return detail::call_from<Origin>(sub_op{}, a, b);
}
template <class R>
requires detail::TensorOperatorOperand<R>
auto operator-(detail::tracked a, const R& b) {
  return detail::call_at(a.site, sub_op{}, a.value, b);
}
template <class L>
requires std::is_arithmetic_v<L>
auto operator-(const L& a, detail::tracked b) {
  return detail::call_at(b.site, sub_op{}, a, b.value);
}

struct mul_op {
  static constexpr const char* name = "mul";
  static constexpr bool keeps_integers = true;
  static constexpr auto saves = saved::inputs;
  MG_HD static constexpr auto forward(const auto& a, const auto& b) { return a * b; }
  // d/da (a*b) = b, d/db (a*b) = a
  MG_HD static constexpr auto backward(const auto& a, const auto& b, const auto&, const auto& g) {
    return grads{g * b, g * a};
  }
};
template <class L, class R, class Origin = MG_ORIGIN>
requires detail::OperatorOperands<L, R> MG_HD constexpr auto operator*(const L& a, const R& b) {
  return detail::call_from<Origin>(mul_op{}, a, b);
}
template <class R>
requires detail::TensorOperatorOperand<R>
auto operator*(detail::tracked a, const R& b) {
  return detail::call_at(a.site, mul_op{}, a.value, b);
}
template <class L>
requires std::is_arithmetic_v<L>
auto operator*(const L& a, detail::tracked b) {
  return detail::call_at(b.site, mul_op{}, a, b.value);
}

struct div_op {
  static constexpr const char* name = "div";
  static constexpr auto saves = saved::inputs;
  MG_HD static constexpr auto forward(const auto& a, const auto& b) { return a / b; }
  // d/da (a/b) = 1/b, d/db (a/b) = -a/b^2. It reads a, not the output: as torch's, the node saves
  // b, and a only when b requires grad, so writing the quotient in place later is no error.
  // (no named temporaries: on lazy array types a local would dangle once backward returns)
  MG_HD static constexpr auto backward(const auto& a, const auto& b, const auto&, const auto& g) {
    return grads{g / b, -(g / b * (a / b))};
  }
};
template <class L, class R, class Origin = MG_ORIGIN>
requires detail::OperatorOperands<L, R> MG_HD constexpr auto operator/(const L& a, const R& b) {
  return detail::call_from<Origin>(div_op{}, a, b);
}
template <class R>
requires detail::TensorOperatorOperand<R>
auto operator/(detail::tracked a, const R& b) {
  return detail::call_at(a.site, div_op{}, a.value, b);
}
template <class L>
requires std::is_arithmetic_v<L>
auto operator/(const L& a, detail::tracked b) {
  return detail::call_at(b.site, div_op{}, a, b.value);
}

struct neg_op {
  static constexpr const char* name = "neg";
  static constexpr bool keeps_integers = true;
  static constexpr auto saves = saved::nothing;
  MG_HD static constexpr auto forward(const auto& x) { return -x; }
  // d/dx (-x) = -1
  MG_HD static constexpr auto backward(const auto&, const auto&, const auto& g) { return -g; }
};
template <class X>
requires detail::OperatorOperands<X> MG_HD constexpr auto operator-(const X& x) {
  return detail::call(neg_op{}, x);
}
// (T is tensor: named so that the body is compiled where tensor is complete)
template <class T = tensor>
requires std::same_as<T, tensor>
auto operator-(detail::tracked x) {
  return detail::call_at(x.site, neg_op{}, static_cast<const T&>(x.value));
}

/// x^p for a number exponent p (an attribute of the op, not an input). Integral exponents
/// multiply; they never call std::pow.
struct pow_op {
  static constexpr const char* name = "pow";
  static constexpr auto saves = saved::inputs;
  double p;
  bool integer_exponent = false;  // p was given as an integer >= 0: i64 stays i64 (torch)
  constexpr bool integral_result() const { return integer_exponent; }
  MG_HD constexpr auto forward(const auto& x) const { return detail::power(x, p); }
  // d/dx x^p = p * x^(p-1); for p = 0 exactly 0 (torch), also at x = 0, where 0 * x^-1 would be
  // NaN, and for an infinite g. With p = 0 the select's other branch reads x^0 = 1 rather than
  // x^-1: double backward differentiates that branch too (with a zero gradient), and 0 * x^-2
  // would be NaN there.
  MG_HD constexpr auto backward(const auto& x, const auto&, const auto& g) const {
    using detail::select;
    return select(p == 0, 0, g * (p * detail::power(x, p == 0 ? 0.0 : p - 1)));
  }
};
template <class X, class P>
requires detail::Operands<X> && std::is_arithmetic_v<P> MG_HD constexpr auto pow(
    const X& x, P p, call_site site = {}) {
  return detail::call_at(site, pow_op{static_cast<double>(p), std::is_integral_v<P> && p >= 0}, x);
}

/// a^b elementwise (numpy broadcasting); a number base or exponent joins as a 0-d tensor. The
/// gradients follow torch: 0 for a where b == 0, and 0 for b where a == 0 and b >= 0.
struct pow_elementwise_op {
  static constexpr const char* name = "pow";
  static constexpr auto saves = saved::both;
  MG_HD static auto forward(const auto& a, const auto& b) {
    using std::pow;
    return pow(a, b);
  }
  // d/da a^b = b a^(b-1), d/db a^b = a^b log(a) = y log(a)
  MG_HD static auto backward(const auto& a, const auto& b, const auto& y, const auto& g) {
    using detail::select;
    using std::log, std::pow;
    return grads{select(b == 0, 0, g * (b * pow(a, b - 1))),
                 select(a == 0, select(b >= 0, 0, g * (y * log(a))), g * (y * log(a)))};
  }
};
template <class A, class B>
requires detail::Operands<A, B> &&(!std::is_arithmetic_v<B>)MG_HD
    constexpr auto pow(const A& a, const B& b, call_site site = {}) {
  return detail::call_at(site, pow_elementwise_op{}, a, b);
}

/// The larger of a and b elementwise; at ties each gets half the gradient (torch 1.13).
struct maximum_op {
  static constexpr const char* name = "maximum";
  static constexpr bool keeps_integers = true;
  static constexpr auto saves = saved::inputs;
  MG_HD static constexpr auto forward(const auto& a, const auto& b) {
    using detail::select;
    return select(a < b, b, a);
  }
  // d/da max(a, b) = 1 where a > b, 1/2 where a == b, 0 where a < b; d/db likewise
  MG_HD static constexpr auto backward(const auto& a, const auto& b, const auto&, const auto& g) {
    using detail::select;
    return grads{select(a > b, g, select(a == b, g * 0.5, 0)),
                 select(b > a, g, select(a == b, g * 0.5, 0))};
  }
};
template <class A, class B>
requires detail::Operands<A, B> MG_HD constexpr auto maximum(const A& a, const B& b,
                                                             call_site site = {}) {
  return detail::call_at(site, maximum_op{}, a, b);
}

/// The smaller of a and b elementwise; at ties each gets half the gradient (torch 1.13).
struct minimum_op {
  static constexpr const char* name = "minimum";
  static constexpr bool keeps_integers = true;
  static constexpr auto saves = saved::inputs;
  MG_HD static constexpr auto forward(const auto& a, const auto& b) {
    using detail::select;
    return select(b < a, b, a);
  }
  // d/da min(a, b) = 1 where a < b, 1/2 where a == b, 0 where a > b; d/db likewise
  MG_HD static constexpr auto backward(const auto& a, const auto& b, const auto&, const auto& g) {
    using detail::select;
    return grads{select(a < b, g, select(a == b, g * 0.5, 0)),
                 select(b < a, g, select(a == b, g * 0.5, 0))};
  }
};
template <class A, class B>
requires detail::Operands<A, B> MG_HD constexpr auto minimum(const A& a, const B& b,
                                                             call_site site = {}) {
  return detail::call_at(site, minimum_op{}, a, b);
}

/// atan2(a, b): the angle of the point (b, a), in (-pi, pi].
struct atan2_op {
  static constexpr const char* name = "atan2";
  static constexpr auto saves = saved::inputs;
  MG_HD static auto forward(const auto& a, const auto& b) {
    using std::atan2;
    return atan2(a, b);
  }
  // d/da atan2(a, b) = b/(a^2 + b^2), d/db atan2(a, b) = -a/(a^2 + b^2)
  MG_HD static constexpr auto backward(const auto& a, const auto& b, const auto&, const auto& g) {
    return grads{g * b / (a * a + b * b), -(g * a / (a * a + b * b))};
  }
};
template <class A, class B>
requires detail::Operands<A, B> MG_HD constexpr auto atan2(const A& a, const B& b,
                                                           call_site site = {}) {
  return detail::call_at(site, atan2_op{}, a, b);
}

using arithmetic_ops = op_list<add_op, sub_op, mul_op, div_op, neg_op, pow_op, pow_elementwise_op,
                               maximum_op, minimum_op, atan2_op>;

}  // namespace mg
