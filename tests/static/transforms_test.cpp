// The static engine's function transforms beyond grad: jvp (forward mode, Note [Forward mode from
// the local derivatives] in static/sweep.hpp), vjp, jacobian and the Hessian matrix, on float64
// numbers, each against central differences or against grad, first and second order.
#include <cmath>
#include <tuple>
#include <utility>

#include <gtest/gtest.h>

#include <metagrad/static.hpp>

#include "support/harness.hpp"

namespace {
using mg_test::central_difference;
using mg_test::near_rel;

const auto f = [](auto x, auto y) { return (sin(x) * y + exp(x * y)) / (1 + x * x); };
const auto at = std::tuple{0.7, -1.3};
}  // namespace

TEST(StaticTransforms, JvpIsTheDirectionalDerivative) {
  const auto [y, ty] = mg::jvp(f, at, std::tuple{0.4, -2.0});
  EXPECT_TRUE(near_rel(y, std::apply(f, at), 1e-15));
  const double fd = 0.4 * central_difference<0>(f, at) - 2.0 * central_difference<1>(f, at);
  EXPECT_TRUE(near_rel(ty, fd, 1e-7));
  const auto [dx, dy] = std::apply(mg::grad(f), at);  // forward and reverse mode agree
  EXPECT_TRUE(near_rel(ty, 0.4 * dx - 2.0 * dy, 1e-14));
  // a tangent along one argument only, and an argument the function does not use
  const auto g = [](auto x, auto, auto z) { return x * z; };
  EXPECT_DOUBLE_EQ(mg::jvp(g, std::tuple{2.0, 5.0, 3.0}, std::tuple{0.0, 1.0, 0.0}).second, 0.0);
  EXPECT_DOUBLE_EQ(mg::jvp(g, std::tuple{2.0, 5.0, 3.0}, std::tuple{1.0, 1.0, 0.0}).second, 3.0);
}

TEST(StaticTransforms, JvpOfATupleValuedFunction) {
  const auto polar = [](auto r, auto t) { return std::tuple{r * cos(t), r * sin(t)}; };
  const auto [y, ty] = mg::jvp(polar, std::tuple{2.0, 0.5}, std::tuple{0.3, 1.0});
  EXPECT_DOUBLE_EQ(std::get<0>(y), 2.0 * std::cos(0.5));
  // d(r cos t) = cos t dr - r sin t dt; d(r sin t) = sin t dr + r cos t dt
  EXPECT_TRUE(near_rel(std::get<0>(ty), 0.3 * std::cos(0.5) - 2.0 * std::sin(0.5), 1e-15));
  EXPECT_TRUE(near_rel(std::get<1>(ty), 0.3 * std::sin(0.5) + 2.0 * std::cos(0.5), 1e-15));
}

// Forward mode runs on the planned DAG: a 16-step recurrence (2^16 tree occurrences).
TEST(StaticTransforms, JvpOfARecurrence) {
  const auto r = [](auto t, auto x) {
    return mg::repeat<16>([&](const auto& s) { return sin(s) * x + s; }, t);
  };
  const auto rat = std::tuple{0.3, 0.1};
  const auto [y, ty] = mg::jvp(r, rat, std::tuple{1.0, -0.5});
  const auto [dt, dx] = std::apply(mg::grad(r), rat);
  EXPECT_TRUE(near_rel(ty, dt - 0.5 * dx, 1e-13));
  EXPECT_TRUE(
      near_rel(ty, central_difference<0>(r, rat) - 0.5 * central_difference<1>(r, rat), 1e-6));
}

// Second order: jvp of grad is a Hessian-vector product, generated at compile time.
TEST(StaticTransforms, JvpOfGradIsAHessianVectorProduct) {
  const auto hv = mg::jvp(mg::grad(f), at, std::tuple{1.0, 0.5}).second;
  const auto gx = [](auto... a) { return mg::grad<0>(f)(a...); };
  const auto gy = [](auto... a) { return mg::grad<1>(f)(a...); };
  for (const auto& [got, g] : {std::pair{std::get<0>(hv), 0}, std::pair{std::get<1>(hv), 1}}) {
    const auto d = [&](auto... a) { return g == 0 ? gx(a...) : gy(a...); };
    const double fd = central_difference<0>(d, at, 1e-5) + 0.5 * central_difference<1>(d, at, 1e-5);
    EXPECT_TRUE(near_rel(got, fd, 1e-6)) << "row " << g;
  }
}

TEST(StaticTransforms, VjpWeightsTheGradient) {
  const auto [y, g] = mg::vjp(f, at, 0.25);
  const auto [dx, dy] = std::apply(mg::grad(f), at);
  EXPECT_TRUE(near_rel(y, std::apply(f, at), 1e-15));
  EXPECT_TRUE(near_rel(std::get<0>(g), 0.25 * dx, 1e-15));
  EXPECT_TRUE(near_rel(std::get<1>(g), 0.25 * dy, 1e-15));
  // a tuple-valued function: u . f
  const auto polar = [](auto r, auto t) { return std::tuple{r * cos(t), r * sin(t)}; };
  const auto [py, pg] = mg::vjp(polar, std::tuple{2.0, 0.5}, std::tuple{1.0, 2.0});
  EXPECT_TRUE(near_rel(std::get<0>(pg), std::cos(0.5) + 2 * std::sin(0.5), 1e-15));
  EXPECT_TRUE(near_rel(std::get<1>(pg), -2 * std::sin(0.5) + 4 * std::cos(0.5), 1e-15));
  // one primal: a bare gradient
  const auto [sy, sg] = mg::vjp([](auto x) { return x * x * x; }, std::tuple{3.0}, 0.5);
  EXPECT_DOUBLE_EQ(sy, 27.0);
  EXPECT_DOUBLE_EQ(sg, 0.5 * 27.0);
}

TEST(StaticTransforms, JacobianRowsAreGradients) {
  const auto h = [](auto r, auto t, auto z) { return std::tuple{r * cos(t) * z, exp(r * t) - z}; };
  const auto x = std::tuple{1.5, 0.4, -0.8};
  const auto j = std::apply(mg::jacobian(h), x);
  const auto h0 = [&](auto... a) { return std::get<0>(h(a...)); };
  const auto h1 = [&](auto... a) { return std::get<1>(h(a...)); };
  const auto check_row = [&](const auto& row, const auto& hk) {
    EXPECT_TRUE(near_rel(std::get<0>(row), central_difference<0>(hk, x), 1e-7));
    EXPECT_TRUE(near_rel(std::get<1>(row), central_difference<1>(hk, x), 1e-7));
    EXPECT_TRUE(near_rel(std::get<2>(row), central_difference<2>(hk, x), 1e-7));
  };
  check_row(std::get<0>(j), h0);
  check_row(std::get<1>(j), h1);
  // a function returning one value: its gradient
  const auto [dx, dy] = std::apply(mg::jacobian(f), at);
  EXPECT_TRUE(near_rel(dx, central_difference<0>(f, at), 1e-7));
  EXPECT_TRUE(near_rel(dy, central_difference<1>(f, at), 1e-7));
}

// Note [One forward for a Jacobian]: the values share one forward sweep, and each row's reverse
// sweep reaches only what its value reads: a constant value, an argument as a value, one
// expression twice, values reading different arguments.
TEST(StaticTransforms, JacobianValuesShareOneForward) {
  const auto h = [](auto x, auto y, auto z) {
    const auto u = sin(x * y);
    return std::tuple{u * z, u / x, 2.0, y, u * z, exp(z)};
  };
  const double x = 0.9, y = -0.6, z = 1.7, u = std::sin(x * y), c = std::cos(x * y);
  const auto [j0, j1, j2, j3, j4, j5] = mg::jacobian(h)(x, y, z);
  const auto expect_row = [](const auto& row, double dx, double dy, double dz) {
    EXPECT_TRUE(near_rel(std::get<0>(row), dx, 1e-15));
    EXPECT_TRUE(near_rel(std::get<1>(row), dy, 1e-15));
    EXPECT_TRUE(near_rel(std::get<2>(row), dz, 1e-15));
  };
  expect_row(j0, z * y * c, z * x * c, u);
  expect_row(j1, (x * y * c - u) / (x * x), c, 0.0);
  expect_row(j2, 0.0, 0.0, 0.0);
  expect_row(j3, 0.0, 1.0, 0.0);
  expect_row(j4, z * y * c, z * x * c, u);
  expect_row(j5, 0.0, 0.0, std::exp(z));
  const auto h1 = [&](auto... a) { return std::get<1>(h(a...)); };
  EXPECT_TRUE(near_rel(std::get<0>(j1), central_difference<0>(h1, std::tuple{x, y, z}), 1e-7));
  // one argument: each row is a bare number
  const auto [dc, ds] = mg::jacobian([](auto t) { return std::pair{cos(t), sin(t) * t}; })(0.3);
  EXPECT_TRUE(near_rel(dc, -std::sin(0.3), 1e-15));
  EXPECT_TRUE(near_rel(ds, std::cos(0.3) * 0.3 + std::sin(0.3), 1e-15));
}

// A Jacobian inside a traced function: its rows are expressions, and grad differentiates them.
TEST(StaticTransforms, JacobianInsideGrad) {
  const auto s = [](auto x, auto y) {
    const auto inner = [](auto a, auto b) { return std::tuple{a * sin(b), exp(a * b)}; };
    const auto [r0, r1] = mg::jacobian(inner)(x, y);
    return std::get<0>(r0) * std::get<1>(r1) + std::get<1>(r0);
  };
  const auto p = std::tuple{0.4, 1.1};
  // s = sin(y) a exp(xy) + x cos(y), with a = x
  EXPECT_TRUE(near_rel(std::apply(s, p), std::sin(1.1) * 0.4 * std::exp(0.44) + 0.4 * std::cos(1.1),
                       1e-15));
  const auto [dx, dy] = std::apply(mg::grad(s), p);
  EXPECT_TRUE(near_rel(dx, central_difference<0>(s, p), 1e-7));
  EXPECT_TRUE(near_rel(dy, central_difference<1>(s, p), 1e-7));
}

TEST(StaticTransforms, HessianMatrix) {
  const auto [hx, hy] = std::apply(mg::hessian(f), at);
  const auto gx = [](auto... a) { return mg::grad<0>(f)(a...); };
  const auto gy = [](auto... a) { return mg::grad<1>(f)(a...); };
  EXPECT_TRUE(near_rel(std::get<0>(hx), central_difference<0>(gx, at, 1e-5), 1e-6));
  EXPECT_TRUE(near_rel(std::get<1>(hx), central_difference<1>(gx, at, 1e-5), 1e-6));
  EXPECT_TRUE(near_rel(std::get<0>(hy), central_difference<0>(gy, at, 1e-5), 1e-6));
  EXPECT_TRUE(near_rel(std::get<1>(hy), central_difference<1>(gy, at, 1e-5), 1e-6));
  EXPECT_TRUE(near_rel(std::get<1>(hx), std::get<0>(hy), 1e-13));  // symmetric
  EXPECT_DOUBLE_EQ(std::get<0>(hx), std::apply(mg::hessian<0>(f), at));
  // one argument: a bare second derivative
  EXPECT_DOUBLE_EQ(mg::hessian([](auto x) { return x * x * x; })(2.0), 12.0);
}
