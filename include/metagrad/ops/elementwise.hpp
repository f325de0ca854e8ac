// The elementwise primitives: one struct each, evaluated unchanged by every engine and backend.
//
// Each `forward` and `backward` is generic over its element type: float/double, a SIMD pack,
// a static-engine expression node, an element inside a Thrust functor, or mg::tensor. Names are
// found by `using std::f;` plus argument-dependent lookup (the `std::swap` idiom), so the same
// body serves them all. Unary backward receives (x, y, g) with y = forward(x) and g the gradient
// of the output; binary backward receives (a, b, y, g) and returns mg::grads{da, db}. Gradients
// are returned in the output's shape: broadcasting engines sum them back to each input's shape.
#pragma once

#include <cmath>

#include <metagrad/detail/config.hpp>
#include <metagrad/grads.hpp>

namespace mg {

struct add_op {
  static constexpr const char* name = "add";
  MG_HD static constexpr auto forward(const auto& a, const auto& b) { return a + b; }
  // d/da (a+b) = 1, d/db (a+b) = 1
  MG_HD static constexpr auto backward(const auto&, const auto&, const auto&, const auto& g) {
    return grads{g, g};
  }
};

struct sub_op {
  static constexpr const char* name = "sub";
  MG_HD static constexpr auto forward(const auto& a, const auto& b) { return a - b; }
  // d/da (a-b) = 1, d/db (a-b) = -1
  MG_HD static constexpr auto backward(const auto&, const auto&, const auto&, const auto& g) {
    return grads{g, -g};
  }
};

struct mul_op {
  static constexpr const char* name = "mul";
  MG_HD static constexpr auto forward(const auto& a, const auto& b) { return a * b; }
  // d/da (a*b) = b, d/db (a*b) = a
  MG_HD static constexpr auto backward(const auto& a, const auto& b, const auto&, const auto& g) {
    return grads{g * b, g * a};
  }
};

struct div_op {
  static constexpr const char* name = "div";
  MG_HD static constexpr auto forward(const auto& a, const auto& b) { return a / b; }
  // d/da (a/b) = 1/b, d/db (a/b) = -a/b^2 = -(1/b) * y
  // (no named temporaries: on lazy array types a local would dangle once backward returns)
  MG_HD static constexpr auto backward(const auto&, const auto& b, const auto& y, const auto& g) {
    return grads{g / b, -(g / b * y)};
  }
};

struct neg_op {
  static constexpr const char* name = "neg";
  MG_HD static constexpr auto forward(const auto& x) { return -x; }
  // d/dx (-x) = -1
  MG_HD static constexpr auto backward(const auto&, const auto&, const auto& g) { return -g; }
};

struct exp_op {
  static constexpr const char* name = "exp";
  MG_HD static auto forward(const auto& x) {
    using std::exp;
    return exp(x);
  }
  // d/dx exp(x) = exp(x) = y
  MG_HD static constexpr auto backward(const auto&, const auto& y, const auto& g) { return g * y; }
};

struct log_op {
  static constexpr const char* name = "log";
  MG_HD static auto forward(const auto& x) {
    using std::log;
    return log(x);
  }
  // d/dx log(x) = 1/x
  MG_HD static constexpr auto backward(const auto& x, const auto&, const auto& g) { return g / x; }
};

struct sin_op {
  static constexpr const char* name = "sin";
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

struct cos_op {
  static constexpr const char* name = "cos";
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

struct tanh_op {
  static constexpr const char* name = "tanh";
  MG_HD static auto forward(const auto& x) {
    using std::tanh;
    return tanh(x);
  }
  // d/dx tanh(x) = 1 - tanh(x)^2 = 1 - y^2
  MG_HD static constexpr auto backward(const auto&, const auto& y, const auto& g) {
    return g * (1 - y * y);
  }
};

/// x^p for a constant scalar exponent p (an attribute of the op, not an input).
struct pow_op {
  static constexpr const char* name = "pow";
  double p;
  MG_HD auto forward(const auto& x) const {
    using std::pow;
    return pow(x, p);
  }
  // d/dx x^p = p * x^(p-1)
  MG_HD auto backward(const auto& x, const auto&, const auto& g) const {
    using std::pow;
    return g * (p * pow(x, p - 1));
  }
};

}  // namespace mg
