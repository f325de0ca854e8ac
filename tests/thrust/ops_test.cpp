// The Thrust backend against the CPU, op by op: every elementwise built-in, a composed
// expression, broadcast numbers and custom ops, in float64 (n = 1000 and 1001) and float32.
#include <cstddef>

#include <gtest/gtest.h>

#include <metagrad/cuda.hpp>
#include <metagrad/static.hpp>

#include "support/harness_thrust.hpp"

namespace {

using mg_test::uniform;

// float64 at a round and an odd size, float32 at the odd size
template <class F, class... A>
void check_thrust_all(const F& f, const A&... a) {
  mg_test::check_thrust<double>(f, 1000, a...);
  mg_test::check_thrust<double>(f, 1001, a...);
  mg_test::check_thrust<float>(f, 1001, a...);
}

constexpr uniform wide{-2.0, 2.0};
constexpr uniform positive{0.5, 2.5};

}  // namespace

TEST(ThrustOps, Add) {
  check_thrust_all([](auto a, auto b) { return a + b; }, wide, wide);
}
TEST(ThrustOps, Sub) {
  check_thrust_all([](auto a, auto b) { return a - b; }, wide, wide);
}
TEST(ThrustOps, Mul) {
  check_thrust_all([](auto a, auto b) { return a * b; }, wide, wide);
}
TEST(ThrustOps, Div) {
  check_thrust_all([](auto a, auto b) { return a / b; }, wide, positive);
}
TEST(ThrustOps, Neg) {
  check_thrust_all([](auto a) { return -a; }, wide);
}
TEST(ThrustOps, Exp) {
  check_thrust_all([](auto a) { return exp(a); }, wide);
}
TEST(ThrustOps, Log) {
  check_thrust_all([](auto a) { return log(a); }, positive);
}
TEST(ThrustOps, Sin) {
  check_thrust_all([](auto a) { return sin(a); }, wide);
}
TEST(ThrustOps, Cos) {
  check_thrust_all([](auto a) { return cos(a); }, wide);
}
TEST(ThrustOps, Tanh) {
  check_thrust_all([](auto a) { return tanh(a); }, wide);
}
TEST(ThrustOps, PowScalarExponent) {
  check_thrust_all([](auto a) { return pow(a, 3.5); }, positive);
  check_thrust_all([](auto a) { return pow(a, -2); }, positive);
  check_thrust_all([](auto a) { return pow(a, 2) + pow(a, 3); }, wide);  // distinct exponents
}

TEST(ThrustOps, ComposedExpression) {
  check_thrust_all([](auto x, auto y) { return (sin(x) * y + exp(x * y)) / (1 + x * x); }, wide,
                   wide);
  // a shared subexpression (one slot) used by two consumers
  check_thrust_all(
      [](auto x, auto y) {
        auto t = tanh(x * y);
        return t * t + log(1 + exp(t)) - cos(t) / (2 + t);
      },
      wide, wide);
}

TEST(ThrustOps, BroadcastNumbers) {
  const auto f = [](auto x, auto y) { return (sin(x) * y + exp(x * y)) / (1 + x * x); };
  check_thrust_all(f, wide, 0.75);
  check_thrust_all(f, -1.25, wide);
  check_thrust_all([](auto a, auto s, auto b) { return a * exp(s * b) - s / (1 + b * b); }, wide,
                   0.3, wide);
}

TEST(ThrustOps, UnusedArgumentAndConstantsOnly) {
  check_thrust_all([](auto x, auto) { return sin(x) * 2.0 - 1; }, wide, wide);
  check_thrust_all([](auto x) { return x; }, wide);
}

namespace {
// Custom ops used on the device are marked MG_HD like the built-ins.
struct softplus {
  MG_HD static auto forward(const auto& x) {
    using std::exp, std::log;
    return log(1 + exp(x));
  }
  // d/dx log(1 + e^x) = 1 - 1/(1 + e^x) = 1 - exp(-y)
  MG_HD static auto backward(const auto&, const auto& y, const auto& g) {
    using std::exp;
    return g * (1 - exp(-y));
  }
};
static_assert(mg::StaticOp<softplus>);

struct hypot2 {  // sqrt(a^2 + b^2) as one op with two inputs
  MG_HD static auto forward(const auto& a, const auto& b) {
    using std::sqrt;
    return sqrt(a * a + b * b);
  }
  // d/da = a / y, d/db = b / y
  MG_HD static auto backward(const auto& a, const auto& b, const auto& y, const auto& g) {
    return mg::grads{g * a / y, g * b / y};
  }
};
static_assert(mg::StaticOp<hypot2>);
}  // namespace

TEST(ThrustOps, CustomOps) {
  check_thrust_all([](auto x) { return mg::apply<softplus>(x * x); }, wide);
  check_thrust_all([](auto a, auto b) { return mg::apply<hypot2>(a, b) * a; }, positive, wide);
  check_thrust_all([](auto a, auto b) { return mg::apply<hypot2>(sin(a), b + 1); }, wide, 0.5);
}
