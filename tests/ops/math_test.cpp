// The unary math family through the one harness: one line per op.
#include <cmath>

#include "support/expect_ad.hpp"

using mg_test::expect_ad;

TEST(Math, Exp) {
  expect_ad([](auto x) { return exp(x); });
}
TEST(Math, Log) {
  expect_ad([](auto x) { return log(x); }, {.ranges = {{0.5, 2.0}}});
}
TEST(Math, Sin) {
  expect_ad([](auto x) { return sin(x); }, {.ranges = {{-3.0, 3.0}}});
}
TEST(Math, Cos) {
  expect_ad([](auto x) { return cos(x); }, {.ranges = {{-3.0, 3.0}}});
}
TEST(Math, Tanh) {
  expect_ad([](auto x) { return tanh(x); }, {.ranges = {{-2.0, 2.0}}});
}
TEST(Math, Log1p) {
  expect_ad([](auto x) { return log1p(x); }, {.ranges = {{-0.5, 2.0}}});
}
TEST(Math, Expm1) {
  expect_ad([](auto x) { return expm1(x); });
}
TEST(Math, Sqrt) {
  expect_ad([](auto x) { return sqrt(x); }, {.ranges = {{0.5, 2.0}}});
}
TEST(Math, Rsqrt) {
  expect_ad([](auto x) { return mg::rsqrt(x); }, {.ranges = {{0.5, 2.0}}});
}
TEST(Math, Abs) {
  expect_ad([](auto x) { return abs(x); });
}
TEST(Math, Tan) {
  expect_ad([](auto x) { return tan(x); });
}
TEST(Math, Sigmoid) {
  expect_ad([](auto x) { return mg::sigmoid(x); }, {.ranges = {{-3.0, 3.0}}});
}
TEST(Math, Relu) {
  expect_ad([](auto x) { return mg::relu(x) * x; });
}
TEST(Math, Erf) {
  expect_ad([](auto x) { return erf(x); }, {.ranges = {{-2.0, 2.0}}});
}
TEST(Math, Square) {
  expect_ad([](auto x) { return mg::square(x); });
}
TEST(Math, Reciprocal) {
  expect_ad([](auto x) { return mg::reciprocal(x); }, {.ranges = {{0.5, 2.0}}});
}
TEST(Math, Softplus) {
  expect_ad([](auto x) { return mg::softplus(x); }, {.ranges = {{-3.0, 3.0}}});
}
TEST(Math, Clamp) {
  expect_ad([](auto x) { return mg::clamp(x, -0.5, 0.6) * x; });
}

// Above torch's threshold of 20 softplus is x with gradient 1 and second derivative 0, finite
// where e^x overflows; below it, its gradient is the sigmoid and its second derivative s (1 - s).
TEST(Math, SoftplusAtAndAboveTheThreshold) {
  for (const double x : {25.0, 800.0}) {
    EXPECT_EQ(mg::softplus(x), x);
    EXPECT_EQ(mg::grad([](auto v) { return mg::softplus(v); })(x), 1.0);
    EXPECT_EQ(mg::grad(mg::grad([](auto v) { return mg::softplus(v); }))(x), 0.0);
    const mg::tensor t = mg::tensor(x, mg::f64).requires_grad_();
    mg::softplus(t).backward();
    EXPECT_EQ(t.grad().item<double>(), 1.0);
  }
  // The second derivative e^-x / (1 + e^-x)^2 near the threshold is a difference of two values
  // near 1 in the gradient's derivative (as in torch's formula, 1 - s): 1e-16 absolute.
  for (const double x : {-40.0, -3.0, 19.5}) {
    const double s = 1 / (1 + std::exp(-x)), q = std::exp(-x) / std::pow(1 + std::exp(-x), 2);
    EXPECT_NEAR(mg::grad([](auto v) { return mg::softplus(v); })(x), s, 1e-15 * s);
    EXPECT_NEAR(mg::grad(mg::grad([](auto v) { return mg::softplus(v); }))(x), q,
                1e-13 * q + 1e-16);
  }
}
