// Float32 reductions at scale (Note [Accurate sums], Note [Blocked sums]): a running float sum of
// 3e7 copies of 0.1 gives 2,097,152 instead of 3,000,000. Each check runs on the runtime engine
// (device cpu; device cuda in the Thrust binaries, built with MG_TEST_DEVICE) and, in the CPU
// binary, on the static engine's general and fused paths.
#include <cmath>
#include <cstddef>
#include <cstdint>

#include <gtest/gtest.h>
#include <xtensor/xarray.hpp>
#include <xtensor/xrandom.hpp>
#include <xtensor/xtensor.hpp>

#include <metagrad/metagrad.hpp>

namespace {

#if defined(MG_TEST_DEVICE)
constexpr mg::device dev = mg::device::cuda;
#else
constexpr mg::device dev = mg::device::cpu;
#endif

// The sizes count in units of a million elements; under AddressSanitizer (the Debug leg) a unit is
// a tenth of that, which runs in a tenth of the time: a running float sum still drifts by about 1%
// at a million elements, far beyond these bounds. The Release leg runs the full sizes.
#if defined(__SANITIZE_ADDRESS__)
constexpr std::size_t unit = 100'000;
#else
constexpr std::size_t unit = 1'000'000;
#endif

double rel(double a, double b) { return std::fabs(a - b) / std::fabs(b); }

constexpr auto chain = [](auto x) {
  auto t = sin(x) * x + exp(-x * x);
  return sum(t * t);
};

xt::xtensor<float, 1> inputs(std::size_t n) {
  xt::random::seed(17);
  return xt::random::randn<float>({n});
}

}  // namespace

TEST(Accuracy, SumOf3e7CopiesOfOneTenth) {
  const auto n = static_cast<std::int64_t>(30 * unit);
  const mg::tensor s = mg::sum(mg::full({n}, 0.1, {.device = dev}));
  EXPECT_EQ(s.dtype(), mg::f32);
  EXPECT_LT(rel(s.item<double>(), 0.1 * n), 1e-6) << s.item<double>();
  // along an axis, and the broadcast gradient of a bias
  const mg::tensor rows = mg::sum(mg::full({n / 3, 2}, 0.1, {.device = dev}), 0);
  const auto r = rows.to_xtensor<double>();
  EXPECT_LT(rel(r(0), 0.1 * (n / 3)), 1e-6) << r(0);
  EXPECT_LT(rel(r(1), 0.1 * (n / 3)), 1e-6) << r(1);
}

TEST(Accuracy, ChainLossOver1e7Floats) {
  const auto x = inputs(10 * unit);
  const mg::tensor xf = mg::tensor(x).to(dev), xd = xf.to(mg::f64);
  const double exact = chain(xd).item<double>();
  EXPECT_LT(rel(chain(xf).item<double>(), exact), 1e-5) << "runtime engine";
#if !defined(MG_TEST_DEVICE)
  const float vf = mg::value_and_grad(chain)(x).first;  // the fused path
  EXPECT_LT(rel(vf, exact), 1e-5) << "static engine, fused";
  // the general path: a broadcast argument (shape [1]) keeps the loop from fusing
  const auto scaled = [](auto x, auto c) {
    auto t = sin(x) * x + exp(-x * x) * c;
    return sum(t * t);
  };
  const xt::xtensor<float, 1> one{1.0f};
  const float vg = mg::value_and_grad(scaled)(x, one).first;
  EXPECT_LT(rel(vg, exact), 1e-5) << "static engine, general";
#endif
}

TEST(Accuracy, BiasGradientOver1e7Elements) {
  xt::random::seed(23);
  const xt::xtensor<float, 1> x = xt::random::rand<float>({10 * unit}, 0.5f, 1.5f);
  const mg::tensor xf = mg::tensor(x).to(dev);
  // L = sum((x * c + b) * 0.1) for c, b of shape [1]: dL/db = 0.1 n, dL/dc = 0.1 sum(x); every
  // gradient element is 0.1 (or 0.1 x_i) and a running float sum of them drifts by percents
  double sum_x = 0;
  for (float v : x) sum_x += static_cast<double>(v);
  const double db = 0.1 * static_cast<double>(x.size()), dc = static_cast<double>(0.1f) * sum_x;
  mg::tensor b = mg::ones({1}, {.device = dev}).requires_grad_();
  mg::tensor c = mg::ones({1}, {.device = dev}).requires_grad_();
  mg::sum((xf * c + b) * 0.1).backward();
  EXPECT_LT(rel(b.grad().item<double>(), db), 1e-6) << "runtime engine, d/db";
  EXPECT_LT(rel(c.grad().item<double>(), dc), 1e-6) << "runtime engine, d/dc";
#if !defined(MG_TEST_DEVICE)
  const auto f = [](auto x, auto c, auto b) { return sum((x * c + b) * 0.1f); };
  const xt::xtensor<float, 1> one{1.0f};
  const auto [gc, gb] = mg::grad<1, 2>(f)(x, one, one);  // general path: c, b of shape [1]
  EXPECT_LT(rel(gc(0), dc), 1e-6) << "static engine, general, d/dc";
  EXPECT_LT(rel(gb(0), db), 1e-6) << "static engine, general, d/db";
  const auto [nc, nb] = mg::grad<1, 2>(f)(x, 1.0f, 1.0f);  // fused path: c, b numbers
  EXPECT_LT(rel(nc, dc), 1e-6) << "static engine, fused, d/dc";
  EXPECT_LT(rel(nb, db), 1e-6) << "static engine, fused, d/db";
#endif
}

// The contiguous float sum adds 8 values per lane in float packs, then goes to double
// (Note [Accurate sums]): every length around the blocks' and packs' edges, and rows of a
// matrix, agree with the float64 sum of the same elements.
TEST(Accuracy, FloatSumsAtEveryBlockEdge) {
  for (std::int64_t n = 1; n <= 1100; n += (n < 300 ? 1 : 37)) {
    const mg::tensor x = mg::tensor(inputs(static_cast<std::size_t>(n))).to(dev) * 100.0;
    double exact = 0;
    for (float v : x.to_xtensor<float>()) exact += static_cast<double>(v);
    const double got = mg::sum(x).item<double>();
    ASSERT_LE(std::fabs(got - exact), 1e-6 * (1.0 + std::fabs(exact))) << n;
  }
  const mg::tensor m = mg::tensor(inputs(777 * 3)).reshape({3, 777}).to(dev);
  const auto rows = mg::sum(m, 1).to(mg::f64).to_xtensor<double>();
  const auto md = m.to_xtensor<float>();
  for (std::size_t r = 0; r < 3; ++r) {
    double exact = 0;
    for (std::size_t c = 0; c < 777; ++c) exact += static_cast<double>(md(r, c));
    EXPECT_LE(std::fabs(rows(r) - exact), 1e-6 * (1.0 + std::fabs(exact))) << r;
  }
}
