// The conventions of mg::cuda's transforms: argument selection, return types, broadcast
// gradients, size errors, empty arrays, reductions; and the snippets of the doc comments.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <initializer_list>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>
#include <thrust/device_vector.h>

#include <metagrad/cuda/transforms.hpp>
#include <metagrad/error.hpp>
#include <metagrad/static.hpp>

#include "support/harness_thrust.hpp"

namespace {

using mg_test::near_rel;
using mg_test::to_device;
using mg_test::to_host;

std::vector<double> linspace(double lo, double hi, std::size_t n) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = lo + (hi - lo) * double(i) / double(n - 1);
  return v;
}

template <class T>
void expect_near_all(const thrust::device_vector<T>& a, const thrust::device_vector<T>& b,
                     double tol) {
  const auto ha = to_host(a), hb = to_host(b);
  ASSERT_EQ(ha.size(), hb.size());
  for (std::size_t i = 0; i < ha.size(); ++i) EXPECT_TRUE(near_rel(ha[i], hb[i], tol)) << i;
}

}  // namespace

TEST(ThrustTransforms, DocExamples) {
  const thrust::device_vector<double> x = to_device(linspace(-1.0, 1.0, 101));
  const thrust::device_vector<double> y = to_device(linspace(0.5, 2.0, 101));
  const thrust::device_vector<double> g = to_device(linspace(1.0, 2.0, 101));
  // example-begin thrust-map
  auto f = [](auto x, auto y) { return (sin(x) * y + exp(x * y)) / (1 + x * x); };
  thrust::device_vector<double> z = mg::cuda::map(f, x, y);
  thrust::device_vector<double> w = mg::cuda::map(f, x, 3.0);  // y broadcast
  // example-end thrust-map
  // example-begin thrust-vjp
  auto [dx, dy] = mg::cuda::vjp(f, g, x, y);  // two device_vector<double>
  thrust::device_vector<double> dy1 = mg::cuda::vjp<1>(f, g, x, y);
  double ds = mg::cuda::vjp<1>(f, g, x, 3.0);  // broadcast number: summed
  // example-end thrust-vjp
  // example-begin thrust-grad
  auto [gx, gy] = mg::cuda::elementwise_grad(f)(x, y);
  thrust::device_vector<double> gx0 = mg::cuda::elementwise_grad<0>(f)(x, y);
  // example-end thrust-grad
  // example-begin thrust-value-and-grad
  auto [v, vg] =
      mg::cuda::elementwise_value_and_grad(f)(x, y);  // vg: std::tuple of two device_vectors
  double loss = mg::cuda::sum(v);
  // example-end thrust-value-and-grad

  const auto hx = to_host(x), hy = to_host(y), hg = to_host(g);
  const auto hz = to_host(z), hw = to_host(w), hdx = to_host(dx), hdy = to_host(dy),
             hdy1 = to_host(dy1), hgx = to_host(gx), hgy = to_host(gy), hgx0 = to_host(gx0),
             hv = to_host(v), hvx = to_host(std::get<0>(vg));
  double ds_ref = 0, loss_ref = 0;
  for (std::size_t i = 0; i < hx.size(); ++i) {
    const auto [fi, gi] = mg::value_and_grad(f)(hx[i], hy[i]);
    const auto [dxi, dyi] = gi;
    EXPECT_TRUE(near_rel(hz[i], f(hx[i], hy[i]), 1e-12));
    EXPECT_TRUE(near_rel(hw[i], f(hx[i], 3.0), 1e-12));
    EXPECT_TRUE(near_rel(hdx[i], hg[i] * dxi, 1e-12));
    EXPECT_TRUE(near_rel(hdy[i], hg[i] * dyi, 1e-12));
    EXPECT_TRUE(near_rel(hdy1[i], hdy[i], 1e-12));
    EXPECT_TRUE(near_rel(hgx[i], dxi, 1e-12));
    EXPECT_TRUE(near_rel(hgy[i], dyi, 1e-12));
    EXPECT_TRUE(near_rel(hgx0[i], hgx[i], 1e-12));
    EXPECT_TRUE(near_rel(hv[i], fi, 1e-12));
    EXPECT_TRUE(near_rel(hvx[i], hgx[i], 1e-12));
    ds_ref += hg[i] * mg::grad<1>(f)(hx[i], 3.0);
    loss_ref += fi;
  }
  EXPECT_TRUE(near_rel(ds, ds_ref, 1e-12));
  EXPECT_TRUE(near_rel(loss, loss_ref, 1e-12));
}

TEST(ThrustTransforms, SelectedArgumentsAndReturnTypes) {
  const auto f = [](auto a, auto s, auto b) { return a * exp(s * b) - s / (1 + b * b); };
  const thrust::device_vector<float> a = to_device(std::vector<float>{0.5f, -1.0f, 2.0f});
  const thrust::device_vector<float> b = to_device(std::vector<float>{1.5f, 0.25f, -0.75f});
  const thrust::device_vector<float> g(3, 1.0f);
  // float arrays give float results even though f's constants are double
  static_assert(
      std::is_same_v<decltype(mg::cuda::map(f, a, 0.5, b)), thrust::device_vector<float>>);
  auto all = mg::cuda::vjp(f, g, a, 0.5, b);
  static_assert(std::is_same_v<decltype(all), std::tuple<thrust::device_vector<float>, double,
                                                         thrust::device_vector<float>>>);
  auto [d0, d2] = mg::cuda::vjp<0, 2>(f, g, a, 0.5, b);
  auto [d2b, d0b] = mg::cuda::vjp<2, 0>(f, g, a, 0.5, b);
  // different kernels may contract into FMAs differently: equal up to rounding
  expect_near_all(d0, std::get<0>(all), 1e-6);
  expect_near_all(d2, std::get<2>(all), 1e-6);
  expect_near_all(d0b, d0, 1e-6);
  expect_near_all(d2b, d2, 1e-6);
  const double ds = mg::cuda::elementwise_grad<1>(f)(a, 0.5, b);  // the broadcast number: summed
  double ref = 0;
  const auto ha = to_host(a), hb = to_host(b);
  for (std::size_t i = 0; i < ha.size(); ++i) ref += mg::grad<1>(f)(ha[i], 0.5, hb[i]);
  EXPECT_TRUE(near_rel(ds, ref, 1e-6));
  EXPECT_TRUE(near_rel(std::get<1>(all), ref, 1e-6));
}

TEST(ThrustTransforms, UnusedArgumentHasZeroGradient) {
  const thrust::device_vector<double> x(7, 1.5), y(7, -2.0);
  auto [dx, dy] = mg::cuda::elementwise_grad([](auto x, auto) { return x * x; })(x, y);
  EXPECT_EQ(to_host(dx), std::vector<double>(7, 3.0));
  EXPECT_EQ(to_host(dy), std::vector<double>(7, 0.0));
  // a constant function: value everywhere, zero gradient
  auto [v, d] = mg::cuda::elementwise_value_and_grad([](auto) { return 2.5; })(x);
  EXPECT_EQ(to_host(v), std::vector<double>(7, 2.5));
  EXPECT_EQ(to_host(d), std::vector<double>(7, 0.0));
}

TEST(ThrustTransforms, SizeMismatchIsAnError) {
  const thrust::device_vector<double> x(4, 1.0), y(5, 1.0), g(3, 1.0);
  const auto f = [](auto a, auto b) { return a * b; };
  try {
    (void)mg::cuda::map(f, x, y);
    FAIL() << "no exception";
  } catch (const mg::error& e) {
    EXPECT_NE(
        std::string(e.what()).find("mg::cuda::map: the device arrays have different sizes (4, 5)"),
        std::string::npos)
        << e.what();
  }
  EXPECT_THROW((void)mg::cuda::elementwise_grad(f)(x, y), mg::error);
  try {
    (void)mg::cuda::vjp(f, g, x, 2.0);
    FAIL() << "no exception";
  } catch (const mg::error& e) {
    EXPECT_NE(std::string(e.what()).find("g has 3 elements but the arguments have 4"),
              std::string::npos)
        << e.what();
  }
}

TEST(ThrustTransforms, EmptyArrays) {
  const thrust::device_vector<double> x, y;
  const auto f = [](auto a, auto b) { return sin(a) * b; };
  EXPECT_EQ(mg::cuda::map(f, x, y).size(), 0u);
  auto [dx, ds] = mg::cuda::elementwise_grad(f)(x, 2.0);
  EXPECT_EQ(dx.size(), 0u);
  EXPECT_EQ(ds, 0.0);
  EXPECT_EQ(mg::cuda::sum(x), 0.0);
}

TEST(ThrustTransforms, LargeArraysAndReductions) {
  // large enough for the OMP device system to split the work between threads
  const std::size_t n = 100003;
  std::mt19937_64 rng(7);
  const std::vector<double> hx = mg_test::random_vector<double>(n, -1.0, 1.0, rng);
  const thrust::device_vector<double> x = to_device(hx);
  const auto f = [](auto x) { return x * sin(3 * x) + 1; };
  const double serial = std::accumulate(hx.begin(), hx.end(), 0.0);
  double abs = 0;
  for (double v : hx) abs += std::fabs(v);
  EXPECT_TRUE(mg_test::near_sum(mg::cuda::sum(x), serial, abs, 1e-13));
  auto [v, dx] = mg::cuda::elementwise_value_and_grad(f)(x);
  const auto hv = to_host(v), hdx = to_host(dx);
  double loss = 0, abs_loss = 0;
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_TRUE(near_rel(hv[i], f(hx[i]), 1e-12)) << i;
    ASSERT_TRUE(near_rel(hdx[i], mg::grad(f)(hx[i]), 1e-12)) << i;
    loss += hv[i];
    abs_loss += std::fabs(hv[i]);
  }
  EXPECT_TRUE(mg_test::near_sum(mg::cuda::sum(v), loss, abs_loss, 1e-13));
  // the gradient of a broadcast number is a reduction as well
  const auto h = [](auto x, auto s) { return exp(s * x); };
  double ds_ref = 0, abs_ds = 0;
  for (double xi : hx) {
    const double t = mg::grad<1>(h)(xi, 0.5);
    ds_ref += t;
    abs_ds += std::fabs(t);
  }
  EXPECT_TRUE(mg_test::near_sum(mg::cuda::elementwise_grad<1>(h)(x, 0.5), ds_ref, abs_ds, 1e-13));
}

// The loss transforms take the callable mg::grad takes: a reduction of all elements (sum, mean,
// logsumexp) of an elementwise expression. Against closed forms, f64 and f32, arrays and a
// broadcast number, into the caller's arrays, and the errors.
TEST(ThrustTransforms, LossesAsMgGradTakesThem) {
  const std::size_t n = 1001;
  const thrust::device_vector<double> x = to_device(linspace(-1.0, 1.0, n));
  const thrust::device_vector<double> y = to_device(linspace(0.5, 2.0, n));
  // example-begin thrust-loss
  auto loss = [](auto x, auto y) { return mg::sum(pow(sin(x) * y, 2)); };
  auto [gx, gy] = mg::cuda::grad(loss)(x, y);            // two device_vectors
  auto [l, g] = mg::cuda::value_and_grad(loss)(x, 3.0);  // g: {device_vector, double}
  thrust::device_vector<double> into_x(x.size());
  mg::cuda::grad<0>(loss).into(into_x)(x, y);  // the caller's array: nothing allocated
  // example-end thrust-loss
  const auto hx = to_host(x), hy = to_host(y), hgx = to_host(gx), hgy = to_host(gy),
             hg0 = to_host(std::get<0>(g)), hinto = to_host(into_x);
  double l_ref = 0, gs_ref = 0, abs_l = 0, abs_gs = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double s = std::sin(hx[i]), c = std::cos(hx[i]);
    ASSERT_TRUE(near_rel(hgx[i], 2 * s * c * hy[i] * hy[i], 1e-13)) << i;
    ASSERT_TRUE(near_rel(hgy[i], 2 * s * s * hy[i], 1e-13)) << i;
    ASSERT_TRUE(near_rel(hinto[i], hgx[i], 1e-15)) << i;
    ASSERT_TRUE(near_rel(hg0[i], 2 * s * c * 9, 1e-13)) << i;
    l_ref += 9 * s * s, abs_l += 9 * s * s;
    gs_ref += 2 * s * s * 3, abs_gs += 6 * s * s;
  }
  EXPECT_TRUE(mg_test::near_sum(l, l_ref, abs_l, 1e-13));
  EXPECT_TRUE(mg_test::near_sum(std::get<1>(g), gs_ref, abs_gs, 1e-13));

  // mean: the gradient scaled by 1/n
  const auto mean = [](auto x, auto y) { return mg::mean(x * y + exp(x)); };
  const auto [lm, gm] = mg::cuda::value_and_grad<0>(mean)(x, y);
  const auto hgm = to_host(gm);
  double lm_ref = 0;
  for (std::size_t i = 0; i < n; ++i) {
    lm_ref += (hx[i] * hy[i] + std::exp(hx[i])) / double(n);
    ASSERT_TRUE(near_rel(hgm[i], (hy[i] + std::exp(hx[i])) / double(n), 1e-13)) << i;
  }
  EXPECT_TRUE(near_rel(lm, lm_ref, 1e-12));

  // logsumexp: the softmax of the terms times their derivatives; large terms do not overflow
  const auto lse = [](auto x, auto y) { return mg::logsumexp(800 * x * y); };
  const auto [ll, gl] = mg::cuda::value_and_grad<0>(lse)(x, y);
  double m = -1e300;
  for (std::size_t i = 0; i < n; ++i) m = std::max(m, 800 * hx[i] * hy[i]);
  double se = 0;
  for (std::size_t i = 0; i < n; ++i) se += std::exp(800 * hx[i] * hy[i] - m);
  const double ll_ref = m + std::log(se);
  EXPECT_TRUE(near_rel(ll, ll_ref, 1e-13));
  const auto hgl = to_host(gl);
  for (std::size_t i = 0; i < n; ++i)
    ASSERT_NEAR(hgl[i], std::exp(800 * hx[i] * hy[i] - ll_ref) * 800 * hy[i], 1e-10) << i;

  // float32 arrays: the loss in float, accumulated in double
  const thrust::device_vector<float> xf(x.begin(), x.end());
  const auto [lf, gf] = mg::cuda::value_and_grad(loss)(xf, 3.0f);
  static_assert(std::is_same_v<decltype(lf), const float>);
  EXPECT_TRUE(near_rel(lf, l_ref, 1e-6));
  const auto hgf = to_host(std::get<0>(gf));
  for (std::size_t i = 0; i < n; ++i) ASSERT_TRUE(near_rel(hgf[i], hg0[i], 1e-5)) << i;
}

TEST(ThrustTransforms, LossMisuseThrowsMgError) {
  const thrust::device_vector<double> x(4, 1.0), y(5, 1.0);
  const auto loss = [](auto a, auto b) { return mg::sum(a * b); };
  mg_test::expect_error([&] { (void)mg::cuda::grad(loss)(x, y); },
                        {"mg::cuda::grad", "different sizes (4, 5)"});
  thrust::device_vector<double> small(3);
  mg_test::expect_error([&] { mg::cuda::grad<0>(loss).into(small)(x, 2.0); },
                        {"mg::cuda::grad", "into()", "3 elements", "arguments of 4"});
  const auto along = [](auto a) { return mg::sum(a * a, 0); };
  mg_test::expect_error([&] { (void)mg::cuda::value_and_grad(along)(x); },
                        {"mg::cuda::value_and_grad", "reduces along one dimension", "mg::sum(e)"});
  // empty arrays: the sum of nothing, no gradient elements
  const thrust::device_vector<double> none;
  const auto [l, g] = mg::cuda::value_and_grad(loss)(none, 2.0);
  EXPECT_EQ(l, 0.0);
  EXPECT_EQ(std::get<0>(g).size(), 0u);
  EXPECT_EQ(std::get<1>(g), 0.0);
}
