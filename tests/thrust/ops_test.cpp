// The Thrust backend against the CPU, op by op: every elementwise built-in, a composed
// expression, broadcast numbers and custom ops, in float64 (n = 1000 and 1001) and float32.
#include <cstddef>

#include <gtest/gtest.h>

#include <metagrad/cuda.hpp>
#include <metagrad/static.hpp>

#include "support/custom_ops.hpp"
#include "support/harness_thrust.hpp"

// The registration point of the user's ops on device cuda: this is the translation unit of the
// test program that includes <metagrad/cuda.hpp> (tensor_test.cpp applies them to tensors).
static const bool custom_ops_registered = mg::cuda::register_ops<mg_test::softplus, mg_test::hypot2>();

namespace {

using mg_test::uniform_array;

// float64 at a round and an odd size, float32 at the odd size
template <class F, class... A>
void check_thrust_all(const F& f, const A&... a) {
  mg_test::check_thrust<double>(f, 1000, a...);
  mg_test::check_thrust<double>(f, 1001, a...);
  mg_test::check_thrust<float>(f, 1001, a...);
}

constexpr uniform_array wide{-2.0, 2.0};
constexpr uniform_array positive{0.5, 2.5};

}  // namespace


// Each op alone goes through the op table (tests/ops, with its mg::cuda leg on CPP/OMP); here the
// elementwise families meet in one expression, which this file also runs on a GPU (nvcc).
TEST(ThrustOps, EveryElementwiseFamilyInOneExpression) {
  check_thrust_all(
      [](auto a, auto b) {
        return mg::sigmoid(a) * b + sqrt(b * b + 1) - mg::relu(a - b) / (2 + tanh(a)) +
               mg::maximum(a, b) * log1p(b * b) + mg::where(a > b, exp(a), cos(b)) +
               pow(b, 3) - atan2(a, b + 3) + erf(a) * mg::clamp(b, -0.5, 0.5);
      },
      wide, positive);
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

using mg_test::hypot2;
using mg_test::softplus;

TEST(ThrustOps, CustomOps) {
  check_thrust_all([](auto x) { return mg::apply<softplus>(x * x); }, wide);
  check_thrust_all([](auto a, auto b) { return mg::apply<hypot2>(a, b) * a; }, positive, wide);
  check_thrust_all([](auto a, auto b) { return mg::apply<hypot2>(sin(a), b + 1); }, wide, 0.5);
}
