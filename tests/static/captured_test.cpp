// Data in the function (Note [Captured arrays] in xt/array_family.hpp): arrays a traced
// function captures are constants of its expression, with number arguments and with array
// arguments, inside elementwise regions and under shaped ops; gradients against closed forms and
// central differences (first order: second order on arrays is not there yet, docs/static.md).
#include <cmath>
#include <string>

#include <gtest/gtest.h>
#include <xtensor/xfixed.hpp>
#include <xtensor/xtensor.hpp>

#include <metagrad/xtensor.hpp>

#include "support/harness.hpp"
#include "support/harness_xtensor.hpp"

namespace {
const xt::xtensor<double, 1> data = {0.5, 1.5, -0.2, 0.9, 2.1};
}

// The negative log-likelihood of normal data w.r.t. (mu, sigma), against its closed form.
TEST(StaticCaptured, NormalLogLikelihoodOfCapturedData) {
  // example-begin captured
  const xt::xtensor<double, 1>& y = data;  // data the function reads, not an argument
  auto nll = [&y](auto mu, auto sigma) {
    auto z = (y - mu) / sigma;
    return sum(0.5 * z * z + log(sigma)) / double(y.size());  // a traced function reads sizes
  };
  auto [dmu, dsigma] = mg::grad(nll)(0.3, 1.2);
  // example-end captured
  const double n = 5, mu = 0.3, s = 1.2;
  double sy = 0, syy = 0;
  for (double v : data) {
    sy += v - mu;
    syy += (v - mu) * (v - mu);
  }
  EXPECT_NEAR(dmu, -sy / (s * s) / n, 1e-14);
  EXPECT_NEAR(dsigma, (-syy / (s * s * s) + n / s) / n, 1e-14);
  mg_test::check_xt(nll, 0.3, 1.2);
  // vjp of a function holding captured data: u times the gradient, and the value
  const auto [v, ug] = mg::vjp(nll, std::tuple{0.3, 1.2}, 0.5);
  double expected = 0;
  for (double d : data) expected += (0.5 * (d - mu) * (d - mu) / (s * s) + std::log(s)) / n;
  EXPECT_NEAR(v, expected, 1e-14);
  EXPECT_NEAR(std::get<0>(ug), 0.5 * dmu, 1e-15);
  EXPECT_NEAR(std::get<1>(ug), 0.5 * dsigma, 1e-15);
  EXPECT_EQ(mg::to_string(mg::trace<1>([&y](auto m) { return sum(y * m); })), "sum(array[5] * x0)");
}

TEST(StaticCaptured, WithArrayArguments) {
  const xt::xtensor<double, 1> w = {0.2, -0.7, 1.1, 0.4, -0.3};
  const xt::xtensor<double, 1> x = {0.9, 0.1, -0.5, 1.3, 0.6};
  // a captured array on either side of an op, in the fused sum's place
  mg_test::check_xt([&w](auto a) { return sum(w * sin(a) + a / (w + 2.0)); }, x);
  // under a sum along an axis and a product with a captured matrix
  const xt::xtensor<double, 2> m = {{0.3, -0.2, 0.5, 0.1, 0.0}, {0.1, 0.4, -0.6, 0.2, 0.7}};
  mg_test::check_xt([&m](auto a) { return sum(tanh(sum(m * a, 1))); }, x);
  // an xtensor expression (not a container) captured: evaluated once into the constant
  mg_test::check_xt([&w](auto a) { return sum(exp((w * 2.0) - a) * 0.5); }, x);
}

TEST(StaticCaptured, FixedShapes) {
  const xt::xtensor_fixed<double, xt::xshape<3>> c = {1.5, -0.5, 0.25};
  const xt::xtensor_fixed<double, xt::xshape<3>> x = {0.3, 0.8, -0.4};
  mg_test::check_xt([&c](auto a) { return sum((a - c) * (a - c)); }, x);
  const auto g = mg::grad([&c](auto a) { return sum((a - c) * (a - c)); })(x);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_NEAR(g(i), 2 * (x(i) - c(i)), 1e-15);
}
