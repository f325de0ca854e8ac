// The unary math family through the one harness: one line per op.
#include "support/expect_ad.hpp"

using mg_test::expect_ad;

TEST(Math, Exp) { expect_ad([](auto x) { return exp(x); }); }
TEST(Math, Log) { expect_ad([](auto x) { return log(x); }, {.ranges = {{0.5, 2.0}}}); }
TEST(Math, Sin) { expect_ad([](auto x) { return sin(x); }, {.ranges = {{-3.0, 3.0}}}); }
TEST(Math, Cos) { expect_ad([](auto x) { return cos(x); }, {.ranges = {{-3.0, 3.0}}}); }
TEST(Math, Tanh) { expect_ad([](auto x) { return tanh(x); }, {.ranges = {{-2.0, 2.0}}}); }
TEST(Math, Log1p) { expect_ad([](auto x) { return log1p(x); }, {.ranges = {{-0.5, 2.0}}}); }
TEST(Math, Expm1) { expect_ad([](auto x) { return expm1(x); }); }
TEST(Math, Sqrt) { expect_ad([](auto x) { return sqrt(x); }, {.ranges = {{0.5, 2.0}}}); }
TEST(Math, Rsqrt) { expect_ad([](auto x) { return mg::rsqrt(x); }, {.ranges = {{0.5, 2.0}}}); }
TEST(Math, Abs) { expect_ad([](auto x) { return abs(x); }); }
TEST(Math, Tan) { expect_ad([](auto x) { return tan(x); }); }
TEST(Math, Sigmoid) { expect_ad([](auto x) { return mg::sigmoid(x); }, {.ranges = {{-3.0, 3.0}}}); }
TEST(Math, Relu) { expect_ad([](auto x) { return mg::relu(x) * x; }); }
TEST(Math, Erf) { expect_ad([](auto x) { return erf(x); }, {.ranges = {{-2.0, 2.0}}}); }
TEST(Math, Square) { expect_ad([](auto x) { return mg::square(x); }); }
TEST(Math, Reciprocal) { expect_ad([](auto x) { return mg::reciprocal(x); }, {.ranges = {{0.5, 2.0}}}); }
TEST(Math, Softplus) { expect_ad([](auto x) { return mg::softplus(x); }, {.ranges = {{-3.0, 3.0}}}); }
TEST(Math, Clamp) { expect_ad([](auto x) { return mg::clamp(x, -0.5, 0.6) * x; }); }
