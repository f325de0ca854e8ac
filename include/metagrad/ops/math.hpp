// Unary math: exp, log, log1p, expm1, sqrt, rsqrt, abs, sin, cos, tan, tanh, sigmoid, relu, erf,
// square, reciprocal, softplus, clamp.
//
// Conventions of every op family. An op is one struct and one line that names it:
//   - `forward(x...)` and `backward(x..., y, g)`, generic over the element type: float/double, a
//     SIMD pack, an element inside a Thrust functor, a static-engine expression (grad of grad),
//     or mg::tensor (backward under create_graph). Names are found by `using std::f;` plus
//     argument-dependent lookup, so the same body serves them all. y = forward(x...), g is the
//     gradient of the output; a one-input backward returns its gradient, a multi-input one
//     mg::grads{...}. Gradients are in the output's shape: broadcasting engines sum them back.
//   - `name`, and `saves`: which of x and y backward reads (the runtime engine keeps only those).
//   - the public function is `detail::call_at(site, op, args...)`, which picks the evaluator from
//     the arguments (numbers, expressions, tensors); a number mixes with any of them. Its last
//     parameter, `call_site site = {}`, is where it was called, which a tensor's node keeps for
//     anomaly detection (Note [Call sites] in <metagrad/call_site.hpp>); operators, which take
//     no such parameter, have tensor overloads taking the tensor as detail::tracked.
//   - the family's `op_list` names it once more, for the device backends and the tests.
#pragma once

#include <cmath>
#include <type_traits>

#include <metagrad/concepts.hpp>
#include <metagrad/core/config.hpp>
#include <metagrad/core/dispatch.hpp>
#include <metagrad/core/element_math.hpp>
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
requires detail::Operands<X> MG_HD constexpr auto exp(const X& x, call_site site = {}) {
  return detail::call_at(site, exp_op{}, x);
}

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
requires detail::Operands<X> MG_HD constexpr auto log(const X& x, call_site site = {}) {
  return detail::call_at(site, log_op{}, x);
}

struct log1p_op {
  static constexpr const char* name = "log1p";
  static constexpr auto saves = saved::inputs;
  MG_HD static auto forward(const auto& x) {
    using std::log1p;
    return log1p(x);
  }
  // d/dx log(1 + x) = 1/(1 + x)
  MG_HD static constexpr auto backward(const auto& x, const auto&, const auto& g) {
    return g / (1 + x);
  }
};
template <class X>
requires detail::Operands<X> MG_HD constexpr auto log1p(const X& x, call_site site = {}) {
  return detail::call_at(site, log1p_op{}, x);
}

struct expm1_op {
  static constexpr const char* name = "expm1";
  static constexpr auto saves = saved::output;
  MG_HD static auto forward(const auto& x) {
    using std::expm1;
    return expm1(x);
  }
  // d/dx (e^x - 1) = e^x = y + 1
  MG_HD static constexpr auto backward(const auto&, const auto& y, const auto& g) {
    return g * (y + 1);
  }
};
template <class X>
requires detail::Operands<X> MG_HD constexpr auto expm1(const X& x, call_site site = {}) {
  return detail::call_at(site, expm1_op{}, x);
}

struct sqrt_op {
  static constexpr const char* name = "sqrt";
  static constexpr auto saves = saved::output;
  MG_HD static auto forward(const auto& x) {
    using std::sqrt;
    return sqrt(x);
  }
  // d/dx sqrt(x) = 1/(2 sqrt(x)) = 1/(2y)
  MG_HD static constexpr auto backward(const auto&, const auto& y, const auto& g) {
    return g / (2 * y);
  }
};
template <class X>
requires detail::Operands<X> MG_HD constexpr auto sqrt(const X& x, call_site site = {}) {
  return detail::call_at(site, sqrt_op{}, x);
}

struct rsqrt_op {
  static constexpr const char* name = "rsqrt";
  static constexpr auto saves = saved::output;
  MG_HD static auto forward(const auto& x) {
    using std::sqrt;
    return 1 / sqrt(x);
  }
  // d/dx x^(-1/2) = -x^(-3/2)/2 = -y^3/2
  MG_HD static constexpr auto backward(const auto&, const auto& y, const auto& g) {
    return g * (-0.5 * y * y * y);
  }
};
template <class X>
requires detail::Operands<X> MG_HD constexpr auto rsqrt(const X& x, call_site site = {}) {
  return detail::call_at(site, rsqrt_op{}, x);
}

/// |x|; its gradient at 0 is 0 (torch's sign(0) = 0).
struct abs_op {
  static constexpr const char* name = "abs";
  static constexpr bool keeps_integers = true;
  static constexpr auto saves = saved::inputs;
  MG_HD static auto forward(const auto& x) {
    using std::abs;
    return abs(x);
  }
  // d/dx |x| = sign(x)
  MG_HD static constexpr auto backward(const auto& x, const auto&, const auto& g) {
    using detail::select;
    return select(x > 0, g, select(x < 0, -g, 0));
  }
};
template <class X>
requires detail::Operands<X> MG_HD constexpr auto abs(const X& x, call_site site = {}) {
  return detail::call_at(site, abs_op{}, x);
}

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
requires detail::Operands<X> MG_HD constexpr auto sin(const X& x, call_site site = {}) {
  return detail::call_at(site, sin_op{}, x);
}

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
requires detail::Operands<X> MG_HD constexpr auto cos(const X& x, call_site site = {}) {
  return detail::call_at(site, cos_op{}, x);
}

struct tan_op {
  static constexpr const char* name = "tan";
  static constexpr auto saves = saved::output;
  MG_HD static auto forward(const auto& x) {
    using std::tan;
    return tan(x);
  }
  // d/dx tan(x) = 1 + tan(x)^2 = 1 + y^2
  MG_HD static constexpr auto backward(const auto&, const auto& y, const auto& g) {
    return g * (1 + y * y);
  }
};
template <class X>
requires detail::Operands<X> MG_HD constexpr auto tan(const X& x, call_site site = {}) {
  return detail::call_at(site, tan_op{}, x);
}

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
requires detail::Operands<X> MG_HD constexpr auto tanh(const X& x, call_site site = {}) {
  return detail::call_at(site, tanh_op{}, x);
}

struct sigmoid_op {
  static constexpr const char* name = "sigmoid";
  static constexpr auto saves = saved::output;
  MG_HD static auto forward(const auto& x) {
    using std::exp;
    return 1 / (1 + exp(-x));
  }
  // d/dx 1/(1 + e^-x) = y (1 - y)
  MG_HD static constexpr auto backward(const auto&, const auto& y, const auto& g) {
    return g * (y * (1 - y));
  }
};
template <class X>
requires detail::Operands<X> MG_HD constexpr auto sigmoid(const X& x, call_site site = {}) {
  return detail::call_at(site, sigmoid_op{}, x);
}

/// max(x, 0); its gradient at 0 is 0, as torch's.
struct relu_op {
  static constexpr const char* name = "relu";
  static constexpr bool keeps_integers = true;
  static constexpr auto saves = saved::output;
  MG_HD static constexpr auto forward(const auto& x) {
    using detail::select;
    return select(x > 0, x, 0);
  }
  // d/dx max(x, 0) = 1 where y > 0, else 0
  MG_HD static constexpr auto backward(const auto&, const auto& y, const auto& g) {
    using detail::select;
    return select(y > 0, g, 0);
  }
};
template <class X>
requires detail::Operands<X> MG_HD constexpr auto relu(const X& x, call_site site = {}) {
  return detail::call_at(site, relu_op{}, x);
}

struct erf_op {
  static constexpr const char* name = "erf";
  static constexpr auto saves = saved::inputs;
  MG_HD static auto forward(const auto& x) {
    using std::erf;
    return erf(x);
  }
  // d/dx erf(x) = 2/sqrt(pi) e^(-x^2)
  MG_HD static auto backward(const auto& x, const auto&, const auto& g) {
    using std::exp;
    return g * (1.1283791670955126 * exp(-(x * x)));
  }
};
template <class X>
requires detail::Operands<X> MG_HD constexpr auto erf(const X& x, call_site site = {}) {
  return detail::call_at(site, erf_op{}, x);
}

struct square_op {
  static constexpr const char* name = "square";
  static constexpr bool keeps_integers = true;
  static constexpr auto saves = saved::inputs;
  MG_HD static constexpr auto forward(const auto& x) { return x * x; }
  // d/dx x^2 = 2x
  MG_HD static constexpr auto backward(const auto& x, const auto&, const auto& g) {
    return g * (2 * x);
  }
};
template <class X>
requires detail::Operands<X> MG_HD constexpr auto square(const X& x, call_site site = {}) {
  return detail::call_at(site, square_op{}, x);
}

struct reciprocal_op {
  static constexpr const char* name = "reciprocal";
  static constexpr auto saves = saved::output;
  MG_HD static constexpr auto forward(const auto& x) { return 1 / x; }
  // d/dx 1/x = -1/x^2 = -y^2
  MG_HD static constexpr auto backward(const auto&, const auto& y, const auto& g) {
    return -(g * (y * y));
  }
};
template <class X>
requires detail::Operands<X> MG_HD constexpr auto reciprocal(const X& x, call_site site = {}) {
  return detail::call_at(site, reciprocal_op{}, x);
}

/// log(1 + e^x), torch's defaults (beta = 1, threshold = 20): x itself above 20.
struct softplus_op {
  static constexpr const char* name = "softplus";
  static constexpr auto saves = saved::inputs;
  // Above the threshold the result is x (torch's threshold 20) and its gradient 1. Below it,
  // forward and backward take exp of the same value, which a static gradient computes once.
  MG_HD static auto below(const auto& x) {
    using detail::select;
    return select(x > 20, 0, x);
  }
  MG_HD static auto forward(const auto& x) {
    using detail::select;
    using std::exp, std::log1p;
    return select(x > 20, x, log1p(exp(below(x))));
  }
  // d/dx log(1 + e^x) = e^x / (1 + e^x); 1 above the threshold
  MG_HD static auto backward(const auto& x, const auto&, const auto& g) {
    using detail::select;
    using std::exp;
    const auto e = exp(below(x));
    return select(x > 20, g, g * e / (1 + e));
  }
};
template <class X>
requires detail::Operands<X> MG_HD constexpr auto softplus(const X& x, call_site site = {}) {
  return detail::call_at(site, softplus_op{}, x);
}

/// x clamped to [lo, hi]; the gradient passes where lo <= x <= hi, as torch's.
struct clamp_op {
  static constexpr const char* name = "clamp";
  static constexpr auto saves = saved::inputs;
  double lo, hi;
  MG_HD constexpr auto forward(const auto& x) const {
    using detail::select;
    return select(x < lo, detail::like(x, lo), select(x > hi, detail::like(x, hi), x));
  }
  // d/dx clamp(x) = 1 inside [lo, hi], 0 outside
  MG_HD constexpr auto backward(const auto& x, const auto&, const auto& g) const {
    using detail::select;
    return select(x < lo, 0, select(x > hi, 0, g));
  }
};
template <class X, class L, class H>
requires detail::Operands<X> && std::is_arithmetic_v<L> && std::is_arithmetic_v<H>
    MG_HD constexpr auto clamp(const X& x, L lo, H hi, call_site site = {}) {
  return detail::call_at(site, clamp_op{static_cast<double>(lo), static_cast<double>(hi)}, x);
}

using math_ops =
    op_list<exp_op, log_op, log1p_op, expm1_op, sqrt_op, rsqrt_op, abs_op, sin_op, cos_op, tan_op,
            tanh_op, sigmoid_op, relu_op, erf_op, square_op, reciprocal_op, softplus_op, clamp_op>;

}  // namespace mg
