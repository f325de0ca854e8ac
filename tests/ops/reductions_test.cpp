// The reductions through the one harness (one line per op and form), then the semantics the
// harness's random points do not reach: exact zeros in prod, ties in max and min, norm at 0.
#include <cmath>
#include <vector>

#include <xtensor/xadapt.hpp>

#include <metagrad/tensor_xtensor.hpp>
#include "support/expect_ad.hpp"

using mg::tensor;
using mg_test::expect_ad;

TEST(Reductions, Sum) {
  expect_ad([](auto x) { return mg::sum(x * x) * x; });
}
TEST(Reductions, SumDim) {
  expect_ad([](auto x) { return mg::sum(x * x, -1); });
}
TEST(Reductions, SumDimKeepdim) {
  expect_ad([](auto x) { return mg::sum(x, 0, true) * x; });
}
TEST(Reductions, Mean) {
  expect_ad([](auto x) { return mg::mean(x) * x; });
}
TEST(Reductions, MeanDim) {
  expect_ad([](auto x) { return mg::mean(x * x, -1, true) * x; });
}
TEST(Reductions, Prod) {
  expect_ad([](auto x) { return mg::prod(x); }, {.ranges = {{0.5, 1.5}}});
}
TEST(Reductions, ProdDim) {
  expect_ad([](auto x) { return mg::prod(x, 0, true) * x; }, {.ranges = {{0.5, 1.5}}});
}
TEST(Reductions, Max) {
  expect_ad([](auto x) { return mg::max(x) * x; });
}
TEST(Reductions, AmaxDim) {
  expect_ad([](auto x) { return mg::amax(x * x, -1); });
}
TEST(Reductions, Amax) {
  expect_ad([](auto x) { return mg::amax(x) * x; });
}
TEST(Reductions, Min) {
  expect_ad([](auto x) { return mg::min(x) * x; });
}
TEST(Reductions, AminDim) {
  expect_ad([](auto x) { return mg::amin(x, 0, true) * x; });
}
TEST(Reductions, Logsumexp) {
  expect_ad([](auto x) { return mg::logsumexp(x * 3); });
}
TEST(Reductions, LogsumexpDim) {
  expect_ad([](auto x) { return mg::logsumexp(x * 3, -1); });
}
TEST(Reductions, Norm) {
  expect_ad([](auto x) { return mg::norm(x) * x; });
}
TEST(Reductions, NormDim) {
  expect_ad([](auto x) { return mg::norm(x, 0); });
}
TEST(Reductions, Var) {
  expect_ad([](auto x) { return mg::var(x) * x; }, {.scalar = false});
}
TEST(Reductions, VarDim) {
  expect_ad([](auto x) { return mg::var(x, -1, true, true) * x; }, {.scalar = false});
}
TEST(Reductions, VarBiased) {
  expect_ad([](auto x) { return mg::var(x, false); }, {.scalar = false});
}

MG_TEST_ON_EACH_DEVICE(ReductionSemantics);

namespace {
xt::xarray<double> grad_of(mg::device dev, const tensor& x, tensor (*f)(const tensor&)) {
  tensor l = x.to(dev).detach().requires_grad_();
  f(l).backward();
  return l.grad().to_xtensor<double>();
}
}  // namespace

TEST_P(ReductionSemantics, ProdWithZerosIsExact) {
  const mg::device dev = GetParam();
  // one zero: its gradient is the product of the others; the others get 0
  EXPECT_EQ(
      grad_of(dev, tensor({2.0, 0.0, 3.0}, mg::f64), [](const tensor& x) { return mg::prod(x); }),
      (xt::xarray<double>{0.0, 6.0, 0.0}));
  // two zeros: every gradient is 0
  EXPECT_EQ(
      grad_of(dev, tensor({0.0, 2.0, 0.0}, mg::f64), [](const tensor& x) { return mg::prod(x); }),
      (xt::xarray<double>{0.0, 0.0, 0.0}));
  // along a dim, row by row: [2, 0] has one zero, [3, 4] none
  EXPECT_EQ(grad_of(dev, tensor({{2.0, 0.0}, {3.0, 4.0}}, mg::f64),
                    [](const tensor& x) { return mg::sum(mg::prod(x, 1)); }),
            (xt::xarray<double>{{0.0, 2.0}, {4.0, 3.0}}));
}

TEST_P(ReductionSemantics, TiesShareTheGradient) {
  const mg::device dev = GetParam();
  EXPECT_EQ(
      grad_of(dev, tensor({1.0, 3.0, 3.0}, mg::f64), [](const tensor& x) { return mg::max(x); }),
      (xt::xarray<double>{0.0, 0.5, 0.5}));
  EXPECT_EQ(
      grad_of(dev, tensor({-1.0, 2.0, -1.0}, mg::f64), [](const tensor& x) { return mg::min(x); }),
      (xt::xarray<double>{0.5, 0.0, 0.5}));
  EXPECT_EQ(grad_of(dev, tensor({1.0, 2.0, 2.0}, mg::f64),
                    [](const tensor& x) {
                      return mg::maximum(x, tensor(2.0, mg::f64).to(x.device())).sum();
                    }),
            (xt::xarray<double>{0.0, 0.5, 0.5}));
}

TEST_P(ReductionSemantics, TiesAlongADimGoToTheFirst) {
  const mg::device dev = GetParam();
  // torch 1.13: max(dim)/min(dim) route the gradient to the index they return, the first
  EXPECT_EQ(grad_of(dev, tensor({{1.0, 3.0, 3.0}, {2.0, 2.0, 0.0}}, mg::f64),
                    [](const tensor& x) { return mg::sum(mg::max(x, 1).values); }),
            (xt::xarray<double>{{0.0, 1.0, 0.0}, {1.0, 0.0, 0.0}}));
  EXPECT_EQ(grad_of(dev, tensor({{1.0, 2.0}, {1.0, 0.0}}, mg::f64),
                    [](const tensor& x) { return mg::sum(mg::min(x, 0, true).values); }),
            (xt::xarray<double>{{1.0, 0.0}, {0.0, 1.0}}));
}

TEST_P(ReductionSemantics, NormGradientIsZeroAtZero) {
  const mg::device dev = GetParam();
  EXPECT_EQ(grad_of(dev, tensor({0.0, 0.0}, mg::f64), [](const tensor& x) { return mg::norm(x); }),
            (xt::xarray<double>{0.0, 0.0}));
  const auto g =
      grad_of(dev, tensor({3.0, 4.0}, mg::f64), [](const tensor& x) { return mg::norm(x); });
  EXPECT_NEAR(g(0), 0.6, 1e-15);
  EXPECT_NEAR(g(1), 0.8, 1e-15);
}

TEST_P(ReductionSemantics, ValuesAndShapes) {
  const mg::device dev = GetParam();
  const tensor x = tensor({{1.0, -2.0, 3.0}, {4.0, 5.0, -6.0}}, mg::f64).to(dev);
  EXPECT_EQ(mg::sum(x, 1, true).shape(), (mg::shape_t{2, 1}));
  EXPECT_EQ(mg::max(x, 0).values.to_xtensor<double>(), (xt::xarray<double>{4.0, 5.0, 3.0}));
  EXPECT_EQ(mg::min(x).item<double>(), -6.0);
  EXPECT_EQ(mg::prod(x).item<double>(), 720.0);
  EXPECT_DOUBLE_EQ(mg::mean(x).item<double>(), 5.0 / 6.0);
  EXPECT_DOUBLE_EQ(mg::var(tensor({1.0, 2.0, 4.0}, mg::f64).to(dev)).item<double>(), 7.0 / 3.0);
  EXPECT_NEAR(mg::logsumexp(tensor({1000.0, 1000.0}, mg::f64).to(dev)).item<double>(),
              1000.0 + std::log(2.0), 1e-12);
  mg_test::expect_error([&] { (void)mg::sum(x, 2); }, {"sum", "dim 2", "[2,3]", "-2 to 1"});
  mg_test::expect_error([&] { (void)mg::max(mg::zeros({0}, {.device = dev})); },
                        {"max", "no elements"});
}

// The CPU's packed rows (four SIMD packs at a time, then the rest one by one) against a plain
// loop, for every length up to a few packs: max and min of f32 and f64 with a NaN at each
// position and none, and the product (accumulated in double, so equal to the loop's to rounding).
TEST(Reductions, PackedRowsMatchAPlainLoop) {
  for (const mg::dtype d : {mg::f32, mg::f64}) {
    for (std::size_t n = 1; n <= 80; ++n) {
      std::vector<double> v(n);
      for (std::size_t i = 0; i < n; ++i)
        v[i] = 1.0 + 0.01 * static_cast<double>((i * 37) % 23) - 0.1 * (i % 2 ? 1.0 : 0.0);
      for (std::size_t nan = 0; nan <= n; ++nan) {  // nan == n: none
        std::vector<double> w = v;
        if (nan < n) w[nan] = std::nan("");
        const xt::xarray<double> a = xt::adapt(w, {n});
        const tensor x = mg::tensor(a).to(d);
        double hi = -INFINITY, lo = INFINITY;
        for (double e : w) {
          const double r = d == mg::f32 ? static_cast<double>(static_cast<float>(e)) : e;
          hi = std::max(hi, r);
          lo = std::min(lo, r);
        }
        if (nan < n) {
          EXPECT_TRUE(std::isnan(mg::amax(x).item<double>())) << n << " " << nan;
          EXPECT_TRUE(std::isnan(mg::amin(x).item<double>())) << n << " " << nan;
        } else {
          EXPECT_EQ(mg::amax(x).item<double>(), hi) << n;
          EXPECT_EQ(mg::amin(x).item<double>(), lo) << n;
        }
      }
      double p = 1.0;
      for (double e : v) p *= d == mg::f32 ? static_cast<double>(static_cast<float>(e)) : e;
      const tensor x = mg::tensor(xt::xarray<double>(xt::adapt(v, {n}))).to(d);
      EXPECT_NEAR(mg::prod(x).item<double>(), p, (d == mg::f32 ? 1e-6 : 1e-14) * std::fabs(p)) << n;
    }
  }
}
