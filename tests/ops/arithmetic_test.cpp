// The arithmetic family through the one harness: one line per op (broadcasting shapes where the
// op is binary, a number on either side, integral and fractional exponents).
#include "support/expect_ad.hpp"

using mg_test::expect_ad;

const mg::shape_t s23{2, 3}, s3{3}, s21{2, 1};

TEST(Arithmetic, Add) { expect_ad([](auto a, auto b) { return a + b; }, {.shapes = {s23, s3}}); }
TEST(Arithmetic, Sub) { expect_ad([](auto a, auto b) { return a - b; }, {.shapes = {s21, s23}}); }
TEST(Arithmetic, Mul) { expect_ad([](auto a, auto b) { return a * b; }, {.shapes = {s23, s3}}); }
TEST(Arithmetic, Div) {
  expect_ad([](auto a, auto b) { return a / b; }, {.ranges = {{-1, 1}, {0.5, 2}}, .shapes = {s23, s21}});
}
TEST(Arithmetic, Neg) { expect_ad([](auto x) { return -x; }); }
TEST(Arithmetic, NumbersOnEitherSide) {
  expect_ad([](auto x) { return 2.0 * x - 3 + x / 4.0 - 1 / (2.5 + x); });
}
TEST(Arithmetic, PowIntegral) { expect_ad([](auto x) { return pow(x, 3); }); }
TEST(Arithmetic, PowNegativeIntegral) {
  expect_ad([](auto x) { return pow(x, -2); }, {.ranges = {{0.5, 2.0}}});
}
TEST(Arithmetic, PowFractional) {
  expect_ad([](auto x) { return pow(x, 2.5); }, {.ranges = {{0.5, 2.0}}});
}
TEST(Arithmetic, PowElementwise) {
  expect_ad([](auto a, auto b) { return pow(a, b); }, {.ranges = {{0.5, 2}, {-1.5, 1.5}}, .shapes = {s23, s3}});
}
TEST(Arithmetic, PowNumberBase) { expect_ad([](auto b) { return pow(2.5, b); }); }
TEST(Arithmetic, Maximum) { expect_ad([](auto a, auto b) { return mg::maximum(a, b); }, {.shapes = {s23, s3}}); }
TEST(Arithmetic, Minimum) { expect_ad([](auto a, auto b) { return mg::minimum(a, b); }, {.shapes = {s21, s23}}); }
TEST(Arithmetic, Atan2) { expect_ad([](auto a, auto b) { return atan2(a, b); }, {.shapes = {s23, s3}}); }
