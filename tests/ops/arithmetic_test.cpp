// The arithmetic family through the one harness: one line per op (broadcasting shapes where the
// op is binary, a number on either side, integral and fractional exponents).
#include <cmath>
#include <string>
#include <vector>

#include <xtensor/xadapt.hpp>

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

// pow at and around zero as std::pow gives it, with every exponent kind, through SIMD packs (9
// elements: whole packs and a tail) and tensors on each device. xsimd's pow is exp(p log a) and
// gave 0 at a = 0 for fractional p < 0, where std::pow gives infinity.
template <class T>
void expect_pow_as_std(const std::vector<double>& xs, double p) {
  using P = mg::detail::pack<T>;
  for (std::size_t i = 0; i + P::size <= xs.size(); i += P::size) {
    T in[P::size], out[P::size];
    for (std::size_t k = 0; k < P::size; ++k) in[k] = static_cast<T>(xs[i + k]);
    pow(P::load(in), p).store(out);
    for (std::size_t k = 0; k < P::size; ++k) {
      const T expected = std::pow(in[k], static_cast<T>(p));
      if (std::isnan(expected)) {
        EXPECT_TRUE(std::isnan(out[k])) << "pow(" << in[k] << ", " << p << ")";
      } else if (std::isinf(expected)) {
        EXPECT_EQ(out[k], expected) << "pow(" << in[k] << ", " << p << ")";
      } else {
        EXPECT_NEAR(out[k], expected, 4e-6 * std::fabs(expected))
            << "pow(" << in[k] << ", " << p << ")";
      }
    }
  }
}

MG_TEST_ON_EACH_DEVICE(PowSemantics);
TEST_P(PowSemantics, AtZeroAsStd) {
  const std::vector<double> xs{0.0, -0.0, 0.5, 2.0, 0.0, 1.0, 0.0, 3.0, 0.0};
  for (const double p : {-0.5, 0.5, -1.5, 1.5, -2.0, 2.0, 0.0}) {
    SCOPED_TRACE("p = " + std::to_string(p));
    expect_pow_as_std<double>(xs, p);
    expect_pow_as_std<float>(xs, p);
    const mg::tensor t = mg::tensor(xt::xarray<double>(xt::adapt(xs))).to(GetParam());
    const auto got = mg_test::values(mg::pow(t, p));
    for (std::size_t i = 0; i < xs.size(); ++i) {
      const double expected = std::pow(xs[i], p);
      if (std::isinf(expected)) {
        EXPECT_EQ(got[i], expected) << "pow(" << xs[i] << ", " << p << ")";
      } else {
        EXPECT_NEAR(got[i], expected, 1e-15 * std::fabs(expected)) << "pow(" << xs[i] << ")";
      }
    }
  }
}
