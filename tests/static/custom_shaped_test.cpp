// Static custom ops with shapes (Note [Ops on arrays only] in <metagrad/concepts.hpp>): ops a
// user writes with xtensor's functions, a reduction (prod) and a matrix-vector product, get
// their arguments as xtensor arrays (the output and its gradient as a number for a reduction,
// as an array otherwise), and their gradients are checked against central differences.
#include <cmath>

#include <gtest/gtest.h>
#include <xtensor/xfixed.hpp>
#include <xtensor/xreducer.hpp>
#include <xtensor/xtensor.hpp>
#include <xtensor/xview.hpp>

#include <metagrad/xtensor.hpp>

#include "support/harness.hpp"
#include "support/harness_xtensor.hpp"

namespace {
// example-begin prod
// prod(x) of all elements: a reduction written with xtensor. Its forward and backward see whole
// arrays, so it says so (elementwise = false) and gives its arity, since it cannot be called on
// numbers to find it. Backward gets x as an array, y = prod(x) and g as numbers, and returns an
// array of x's shape: a container, not a lazy xtensor expression, which would refer to
// backward's parameters after it returned.
struct prod_op {
  static constexpr const char* name = "prod";
  static constexpr bool elementwise = false;
  static constexpr std::size_t arity = 1;
  static auto forward(const auto& x) { return xt::prod(x)(); }
  // d/dx_i prod(x) = prod of the other elements = y / x_i (for x without zeros)
  static auto backward(const auto& x, const auto& y, const auto& g) {
    return xt::xarray<double>(g * y / x);
  }
};
// example-end prod

// A x for a matrix A and a vector x: backward gets the output's gradient g as a vector and
// returns both gradients, dA = g x^T and dx = A^T g.
struct matvec_op {
  static constexpr const char* name = "matvec";
  static constexpr bool elementwise = false;
  static constexpr std::size_t arity = 2;
  static auto forward(const auto& a, const auto& x) {
    return xt::xarray<double>(xt::sum(a * xt::view(x, xt::newaxis(), xt::all()), {1}));
  }
  static auto backward(const auto& a, const auto& x, const auto&, const auto& g) {
    xt::xarray<double> da =
        xt::view(g, xt::all(), xt::newaxis()) * xt::view(x, xt::newaxis(), xt::all());
    xt::xarray<double> dx = xt::sum(a * xt::view(g, xt::all(), xt::newaxis()), {0});
    return mg::grads{da, dx};
  }
};
}  // namespace

TEST(StaticCustomShaped, ProdOfAnArray) {
  const xt::xtensor<double, 1> x = {0.5, 1.5, -2.0, 0.9};
  // the gradient against its closed form, 2 prod(x) / x_i
  const auto g = mg::grad([](auto a) { return mg::apply<prod_op>(a) * 2.0; })(x);
  const double p = 0.5 * 1.5 * -2.0 * 0.9;
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(g(i), 2 * p / x(i), 1e-14);
  // composed with elementwise ops and a sum, against central differences
  mg_test::check_xt([](auto a) { return sum(a * a) * mg::apply<prod_op>(exp(a * 0.5)); }, x);
  mg_test::check_xt([](auto a, auto s) { return mg::apply<prod_op>(a * s) + s; }, x, 0.7);
}

TEST(StaticCustomShaped, ProdOfAFixedShape) {
  const xt::xtensor_fixed<double, xt::xshape<3>> x = {1.2, -0.4, 0.8};
  mg_test::check_xt([](auto a) { return mg::apply<prod_op>(a) * 3.0; }, x);
}

TEST(StaticCustomShaped, MatrixVectorProduct) {
  const xt::xtensor<double, 2> a = {{0.3, -0.2, 0.5}, {0.1, 0.4, -0.6}};
  const xt::xtensor<double, 1> x = {0.7, -0.3, 0.2};
  mg_test::check_xt([](auto m, auto v) { return sum(tanh(mg::apply<matvec_op>(m, v))); }, a, x);
}
