// The unary math family through the one harness: one line per op.
#include "support/expect_ad.hpp"

using mg_test::expect_ad;

TEST(Math, Exp) { expect_ad([](auto x) { return exp(x); }); }
TEST(Math, Log) { expect_ad([](auto x) { return log(x); }, {.ranges = {{0.5, 2.0}}}); }
TEST(Math, Sin) { expect_ad([](auto x) { return sin(x); }, {.ranges = {{-3.0, 3.0}}}); }
TEST(Math, Cos) { expect_ad([](auto x) { return cos(x); }, {.ranges = {{-3.0, 3.0}}}); }
TEST(Math, Tanh) { expect_ad([](auto x) { return tanh(x); }, {.ranges = {{-2.0, 2.0}}}); }
