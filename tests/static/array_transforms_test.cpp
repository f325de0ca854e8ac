// The static engine's transforms on xtensor arrays (Note [Dual arrays] in xt/dual_family.hpp):
// mg::jvp, mg::vjp, mg::jacobian, mg::hessian, jvp of grad and grad of grad, in float64 against
// central differences of the engine's own values and gradients, and their errors. (Every op's
// tangent and Hessian-vector product is also checked by the op table, tests/ops.)
#include <cmath>
#include <cstddef>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>
#include <xtensor/xarray.hpp>
#include <xtensor/xfixed.hpp>
#include <xtensor/xrandom.hpp>
#include <xtensor/xtensor.hpp>
#include <xtensor/xview.hpp>

#include <metagrad/xtensor.hpp>

#include "support/harness.hpp"

using mg_test::near_rel;

namespace {
using arr = xt::xarray<double>;
arr randn(std::vector<std::size_t> shape, unsigned seed) {
  xt::random::seed(seed);
  return xt::random::randn<double>(shape);
}
using engine = mg::detail::evaluator<mg::detail::array_family>;

// d/dh f(x + h v) at h = 0, for f of one array returning an array
template <class F>
arr along(const F& f, const arr& x, const arr& v, double h = 1e-6) {
  const arr p = engine::value(f, arr(x + h * v)), m = engine::value(f, arr(x - h * v));
  return (p - m) / (2 * h);
}
void expect_all_near(const arr& got, const arr& want, double tol, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  for (std::size_t j = 0; j < want.size(); ++j)
    EXPECT_TRUE(near_rel(got.flat(j), want.flat(j), tol))
        << what << "[" << j << "]: " << got.flat(j) << " vs " << want.flat(j);
}
// the gradient of a scalar f of one array, by the engine
template <class F>
arr gradient(const F& f, const arr& x) {
  return arr(mg::grad(f)(x));
}
// H, the Hessian of f at x (x's shape twice), against central differences of the engine's
// gradient, a column per element of x
template <class F>
void expect_hessian_by_differences(const F& f, const arr& x, const arr& H) {
  const std::size_t n = x.size();
  const double h = 1e-5;
  for (std::size_t k = 0; k < n; ++k) {
    arr e = xt::zeros<double>(x.shape());
    e.flat(k) = h;
    const arr col = (gradient(f, arr(x + e)) - gradient(f, arr(x - e))) / (2 * h);
    for (std::size_t i = 0; i < n; ++i)
      EXPECT_TRUE(near_rel(H.flat(i * n + k), col.flat(i), 1e-6)) << i << ", " << k;
  }
}
}  // namespace

TEST(ArrayTransforms, JvpAgainstDifferences) {
  const arr W = randn({4, 3}, 1), x = randn({3}, 2), v = randn({3}, 3);
  // array-valued, with a matrix product, a broadcast constant and a reduction along a dim
  const auto f = [&W](auto x) {
    return mg::tanh(mg::matmul(W, x)) * 0.5 + mg::sum(mg::exp(W * x), 1) + mg::max(x);
  };
  const auto [y, t] = mg::jvp(f, std::tuple{x}, std::tuple{v});
  expect_all_near(y, engine::value(f, x), 1e-14, "value");
  expect_all_near(t, along(f, x, v), 1e-6, "J v");

  // several arguments, a number among them; the tangent is the sum of the partial ones
  const auto g = [](auto a, auto b, auto s) { return mg::sum(mg::matmul(a, b) * s); };
  const arr a = randn({2, 3}, 4), b = randn({3, 2}, 5), va = randn({2, 3}, 6),
            vb = randn({3, 2}, 7);
  const double s = 0.7, vs = -0.4;
  const auto [gy, gt] = mg::jvp(g, std::tuple{a, b, s}, std::tuple{va, vb, vs});
  const double h = 1e-6;
  const double fd = (double(engine::value(g, arr(a + h * va), arr(b + h * vb), s + h * vs)()) -
                     double(engine::value(g, arr(a - h * va), arr(b - h * vb), s - h * vs)())) /
                    (2 * h);
  EXPECT_EQ(gy.dimension(), 0u);
  EXPECT_TRUE(near_rel(gt(), fd, 1e-6)) << gt() << " vs " << fd;

  // a function returning a pair: tuples of values and tangents
  const auto p = [](auto x) { return std::pair{mg::sum(x * x), mg::exp(x)}; };
  const auto [pv, pt] = mg::jvp(p, std::tuple{x}, std::tuple{v});
  EXPECT_TRUE(near_rel(std::get<0>(pt)(), 2 * double(xt::sum(x * v)()), 1e-12));
  expect_all_near(std::get<1>(pt), arr(xt::exp(x) * v), 1e-12, "d exp(x)");
  expect_all_near(std::get<1>(pv), arr(xt::exp(x)), 1e-14, "exp(x)");
}

// Blocks of directions (Note [Blocks of directions]): 150 elements are two passes (128 and 22
// directions); slices, sums and elementwise ops take each block at once, and the Hessian is the
// tridiagonal closed form.
TEST(ArrayTransforms, HessianByBlocksOfDirections) {
  static constexpr std::size_t n = 150;
  const auto rosenbrock = [](const auto& x) {
    const auto head = mg::slice(x, 0, 0, n - 1), tail = mg::slice(x, 0, 1, n);
    return mg::sum(100.0 * mg::square(tail - mg::square(head)) + mg::square(1.0 - head));
  };
  const arr x = 0.8 + 0.3 * randn({n}, 40);
  const arr H = mg::hessian(rosenbrock)(x);
  ASSERT_EQ(H.shape(), (std::vector<std::size_t>{n, n}));
  arr want = xt::zeros<double>({n, n});
  for (std::size_t i = 0; i + 1 < n; ++i) {
    want(i, i) += 1200 * x(i) * x(i) - 400 * x(i + 1) + 2;
    want(i + 1, i + 1) += 200;
    want(i, i + 1) += -400 * x(i);
    want(i + 1, i) += -400 * x(i);
  }
  for (std::size_t i = 0; i < n * n; ++i) EXPECT_TRUE(near_rel(H.flat(i), want.flat(i), 1e-12));
  // a 2-D argument broadcast against a row and reduced along a dim: a 0-d tangent, tangents of
  // lower rank than the result, sum along a dim and expand, all on blocks
  const arr r = randn({3}, 41), A = randn({4, 3}, 42);
  const auto g = [&r](const auto& a) {
    return mg::sum(mg::exp(mg::sum(a * r, 1, false) * 0.3)) * mg::sum(mg::tanh(a));
  };
  const arr G = mg::hessian(g)(A);
  ASSERT_EQ(G.shape(), (std::vector<std::size_t>{4, 3, 4, 3}));
  expect_hessian_by_differences(g, A, G);
}

// An elementwise op of three inputs, all of them along the block's directions: its tangent is
// the sum of three terms, the first two in one pass over the block and the third added.
namespace {
struct triple_op {
  static constexpr const char* name = "triple";
  static auto forward(const auto& a, const auto& b, const auto& c) { return a * b * c; }
  static auto backward(const auto& a, const auto& b, const auto& c, const auto&, const auto& g) {
    return mg::grads{g * b * c, g * a * c, g * a * b};
  }
};
}  // namespace

// A value that a shaped op and a region both read (Note [Shared region values] in
// xt/region.hpp): the Hessian against differences of the gradient, which the general path gives.
TEST(ArrayTransforms, HessianOfAValueReadTwice) {
  const arr x = randn({3, 4}, 44);
  arr y = xt::zeros<double>({3, 5});
  for (std::size_t i = 0; i < 3; ++i) y(i, (2 * i + 1) % 5) = 1;
  const auto f = [&x, &y](const auto& w) {
    const auto z = mg::tanh(mg::matmul(x, w));
    return mg::sum(mg::logsumexp(z, 1)) - mg::sum(y * z);
  };
  const arr w = randn({4, 5}, 45);
  const arr H = mg::hessian(f)(w);
  ASSERT_EQ(H.shape(), (std::vector<std::size_t>{4, 5, 4, 5}));
  expect_hessian_by_differences(f, w, H);
}

TEST(ArrayTransforms, HessianThroughAnOpOfThreeInputs) {
  const auto f = [](const auto& x) {
    return mg::sum(mg::apply<triple_op>(mg::sin(x), x * x, mg::exp(x * 0.3)));
  };
  const arr x = randn({7}, 43);
  const arr H = mg::hessian(f)(x);
  ASSERT_EQ(H.shape(), (std::vector<std::size_t>{7, 7}));
  // f = sum_i x_i^2 sin(x_i) exp(0.3 x_i): a diagonal Hessian, u'' of u = x^2 sin(x) exp(0.3 x)
  for (std::size_t i = 0; i < 7; ++i)
    for (std::size_t k = 0; k < 7; ++k) {
      const double t = x(i), s = std::sin(t), c = std::cos(t), e = std::exp(0.3 * t);
      const double want = i != k ? 0.0
                                 : e * (2 * s + 4 * t * c - t * t * s +
                                        0.6 * (2 * t * s + t * t * c) + 0.09 * t * t * s);
      EXPECT_TRUE(near_rel(H(i, k), want, 1e-12)) << i << "," << k << ": " << H(i, k);
    }
  const double h = 1e-5;
  for (std::size_t k = 0; k < 7; ++k) {
    arr e = xt::zeros<double>({7});
    e(k) = h;
    const arr col = (gradient(f, arr(x + e)) - gradient(f, arr(x - e))) / (2 * h);
    for (std::size_t i = 0; i < 7; ++i) EXPECT_TRUE(near_rel(H(i, k), col(i), 1e-6));
  }
}

TEST(ArrayTransforms, HessianVectorProducts) {
  const arr W = randn({5, 4}, 8), x = randn({4}, 9), v = randn({4}, 10);
  const auto f = [&W](auto x) { return mg::sum(mg::tanh(mg::matmul(W, x))) + mg::prod(x); };
  const auto [g, hv] = mg::jvp(mg::grad(f), std::tuple{x}, std::tuple{v});
  expect_all_near(g, gradient(f, x), 1e-12, "gradient");
  const double h = 1e-5;
  expect_all_near(hv, arr((gradient(f, arr(x + h * v)) - gradient(f, arr(x - h * v))) / (2 * h)),
                  1e-6, "H v");
}

TEST(ArrayTransforms, VjpOnArrays) {
  const arr x = randn({2, 3}, 11), u = randn({2, 3}, 12);
  const auto f = [](auto x) { return mg::sin(x) * x; };
  const auto [y, g] = mg::vjp(f, std::tuple{x}, u);
  expect_all_near(y, arr(xt::sin(x) * x), 1e-14, "value");
  expect_all_near(g, arr(u * (xt::cos(x) * x + xt::sin(x))), 1e-12, "u^T J");
  // a function with one value takes a number
  const auto [s, gs] = mg::vjp([](auto x) { return mg::sum(x * x); }, std::tuple{x}, 0.5);
  EXPECT_TRUE(near_rel(s(), double(xt::sum(x * x)()), 1e-14));
  expect_all_near(gs, arr(x), 1e-14, "0.5 * 2x");
  // the cotangent has the value's shape
  try {
    (void)mg::vjp(f, std::tuple{x}, randn({3}, 13));
    ADD_FAILURE() << "no error";
  } catch (const mg::error& e) {
    EXPECT_NE(std::string(e.what()).find("vjp: the cotangent has shape [3] but the function's "
                                         "value has shape [2,3]"),
              std::string::npos)
        << e.what();
  }
}

TEST(ArrayTransforms, JacobianOnArrays) {
  const arr x = randn({3}, 14), A = randn({2, 3}, 15);
  const auto f = [&A](auto x) { return mg::exp(mg::matmul(A, x)); };  // (2) from (3)
  const arr J = mg::jacobian(f)(x);
  ASSERT_EQ(J.shape(), (std::vector<std::size_t>{2, 3}));
  for (std::size_t k = 0; k < 3; ++k) {
    arr e = xt::zeros<double>({3});
    e(k) = 1;
    const arr col = along(f, x, e);
    for (std::size_t i = 0; i < 2; ++i) EXPECT_TRUE(near_rel(J(i, k), col(i), 1e-6));
  }
  // closed form: diag(exp(A x)) A
  const arr ex = xt::exp(xt::sum(A * xt::view(x, xt::newaxis(), xt::all()), {1}));
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t k = 0; k < 3; ++k) EXPECT_TRUE(near_rel(J(i, k), ex(i) * A(i, k), 1e-12));

  // more output than input elements: forward mode (the above, 2 from 3, ran in reverse)
  const arr Jo = mg::jacobian([](auto x) { return mg::outer(x, x); })(x);
  ASSERT_EQ(Jo.shape(), (std::vector<std::size_t>{3, 3, 3}));
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 3; ++j)
      for (std::size_t k = 0; k < 3; ++k)
        EXPECT_TRUE(near_rel(Jo(i, j, k), (i == k ? x(j) : 0.0) + (j == k ? x(i) : 0.0), 1e-14));

  // two arguments, one a number: a block each, of shape f(x).shape ++ argument.shape
  const auto g = [](auto m, auto s) { return m * s; };
  const arr m = randn({2, 2}, 16);
  const auto [Jm, Js] = mg::jacobian(g)(m, 3.0);
  ASSERT_EQ(Jm.shape(), (std::vector<std::size_t>{2, 2, 2, 2}));
  ASSERT_EQ(Js.shape(), (std::vector<std::size_t>{2, 2}));
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t k = 0; k < 4; ++k) EXPECT_EQ(Jm.flat(i * 4 + k), i == k ? 3.0 : 0.0);
  expect_all_near(Js, m, 1e-15, "d(m s)/ds");

  // a function returning a tuple: one row per value
  const auto [r0, r1] = mg::jacobian([](auto x) { return std::tuple{mg::sum(x), x * x}; })(x);
  expect_all_near(r0, arr(xt::ones<double>({3})), 1e-15, "d sum / dx");
  ASSERT_EQ(r1.shape(), (std::vector<std::size_t>{3, 3}));
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t k = 0; k < 3; ++k) EXPECT_EQ(r1(i, k), i == k ? 2 * x(i) : 0.0);
}

TEST(ArrayTransforms, HessianOnArrays) {
  const arr W = randn({4, 3}, 17), x = randn({3}, 18);
  const auto f = [&W](auto x) {
    return mg::sum(mg::tanh(mg::matmul(W, x))) + mg::log(mg::sum(mg::exp(x)));
  };
  const arr H = mg::hessian(f)(x);
  ASSERT_EQ(H.shape(), (std::vector<std::size_t>{3, 3}));
  const double h = 1e-5;
  for (std::size_t k = 0; k < 3; ++k) {
    arr e = xt::zeros<double>({3});
    e(k) = h;
    const arr col = (gradient(f, arr(x + e)) - gradient(f, arr(x - e))) / (2 * h);
    for (std::size_t i = 0; i < 3; ++i) EXPECT_TRUE(near_rel(H(i, k), col(i), 1e-6));
  }
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t k = 0; k < i; ++k) EXPECT_TRUE(near_rel(H(i, k), H(k, i), 1e-12));

  // two arguments: a tuple of rows of blocks; hessian<I> is block (I, I)
  const auto g = [](auto a, auto b) { return mg::sum(mg::matmul(a, b) * mg::matmul(a, b)); };
  const arr a = randn({2, 3}, 19), b = randn({3}, 20);
  const auto [row_a, row_b] = mg::hessian(g)(a, b);
  const auto& [Haa, Hab] = row_a;
  const auto& [Hba, Hbb] = row_b;
  ASSERT_EQ(Haa.shape(), (std::vector<std::size_t>{2, 3, 2, 3}));
  ASSERT_EQ(Hab.shape(), (std::vector<std::size_t>{2, 3, 3}));
  ASSERT_EQ(Hba.shape(), (std::vector<std::size_t>{3, 2, 3}));
  // g = |a b|^2: d2g/db2 = 2 a^T a, d2g/da_ij da_kl = 2 [i == k] b_j b_l
  for (std::size_t j = 0; j < 3; ++j)
    for (std::size_t l = 0; l < 3; ++l) {
      double ata = 0;
      for (std::size_t i = 0; i < 2; ++i) ata += a(i, j) * a(i, l);
      EXPECT_TRUE(near_rel(Hbb(j, l), 2 * ata, 1e-12));
      for (std::size_t i = 0; i < 2; ++i)
        for (std::size_t k = 0; k < 2; ++k)
          EXPECT_TRUE(near_rel(Haa(i, j, k, l), i == k ? 2 * b(j) * b(l) : 0.0, 1e-12));
    }
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 3; ++j)
      for (std::size_t l = 0; l < 3; ++l) EXPECT_TRUE(near_rel(Hab(i, j, l), Hba(l, i, j), 1e-12));
  expect_all_near(mg::hessian<1>(g)(a, b), Hbb, 1e-14, "hessian<1>");
  expect_all_near(mg::hessian<0>(g)(a, b), Haa, 1e-14, "hessian<0>");

  // fixed-size arguments, and float32 against float64
  const xt::xtensor_fixed<double, xt::xshape<3>> xf = x;
  expect_all_near(mg::hessian(f)(xf), H, 1e-14, "xtensor_fixed");
  const xt::xtensor<float, 2> Wf = W;
  const auto ff = [&Wf](auto x) {
    return mg::sum(mg::tanh(mg::matmul(Wf, x))) + mg::log(mg::sum(mg::exp(x)));
  };
  const xt::xarray<float> Hf = mg::hessian(ff)(xt::xtensor<float, 1>(x));
  for (std::size_t j = 0; j < 9; ++j) EXPECT_NEAR(Hf.flat(j), H.flat(j), 1e-5);
}

TEST(ArrayTransforms, GradOfGrad) {
  const arr x = randn({3}, 21);
  const auto f = [](auto x, auto s) { return mg::sum(mg::sin(x * s)); };
  const double s = 0.8;
  // d2f/ds2 = -sum(x^2 sin(x s)); d/dx_i df/ds = cos(x_i s) - x_i s sin(x_i s)
  const double dss = mg::grad<1>(mg::grad<1>(f))(x, s);
  EXPECT_TRUE(near_rel(dss, -double(xt::sum(x * x * xt::sin(x * s))()), 1e-12));
  const arr dxs = mg::grad<0>(mg::grad<1>(f))(x, s);
  expect_all_near(dxs, arr(xt::cos(x * s) - x * s * xt::sin(x * s)), 1e-12, "d/dx df/ds");
  const auto [v, d] = mg::value_and_grad<1>(mg::grad<1>(f))(x, s);
  EXPECT_TRUE(near_rel(v, double(xt::sum(x * xt::cos(x * s))()), 1e-12));
  EXPECT_EQ(d, dss);
  // the inner gradient of an array is an array: grad of it is an error naming the way out
  try {
    (void)mg::grad(mg::grad<0>(f))(x, s);
    ADD_FAILURE() << "no error";
  } catch (const mg::error& e) {
    EXPECT_NE(std::string(e.what()).find("grad: the function's value has shape [3]; grad "
                                         "differentiates a function with one value"),
              std::string::npos)
        << e.what();
  }
}

// A function of numbers that holds data (Note [Captured arrays]): its Hessian, Hessian-vector
// products and forward-mode derivatives run on the array evaluator.
TEST(ArrayTransforms, CapturedData) {
  const arr y = randn({50}, 22) * 0.5 + 1.0;
  const auto nll = [&y](auto mu, auto sigma) {
    return mg::sum(mg::square(y - mu)) / (2 * sigma * sigma) + 50.0 * mg::log(sigma);
  };
  const double mu = 0.9, sigma = 0.6, n = 50;
  const double r = double(xt::sum(y - mu)()), q = double(xt::sum((y - mu) * (y - mu))());
  const double s2 = sigma * sigma;
  // closed forms: d2/dmu2 = n/s^2, d2/dmu ds = 2 r / s^3, d2/ds2 = 3 q / s^4 - n / s^2
  const auto [hrow_mu, hrow_sigma] = mg::hessian(nll)(mu, sigma);
  EXPECT_TRUE(near_rel(double(std::get<0>(hrow_mu)()), n / s2, 1e-12));
  EXPECT_TRUE(near_rel(double(std::get<1>(hrow_mu)()), 2 * r / (s2 * sigma), 1e-12));
  EXPECT_TRUE(near_rel(double(std::get<1>(hrow_sigma)()), 3 * q / (s2 * s2) - n / s2, 1e-12));
  EXPECT_TRUE(near_rel(mg::hessian<0>(nll)(mu, sigma)(), n / s2, 1e-12));
  // grad of a gradient on captured data (forward mode over the gradient): the row of mu
  const auto [dmu_mu, dmu_sigma] = mg::grad(mg::grad<0>(nll))(mu, sigma);
  EXPECT_TRUE(near_rel(double(dmu_mu), n / s2, 1e-12));
  EXPECT_TRUE(near_rel(double(dmu_sigma), 2 * r / (s2 * sigma), 1e-12));
  const auto [v, t] = mg::jvp(nll, std::tuple{mu, sigma}, std::tuple{1.0, 0.0});
  EXPECT_TRUE(near_rel(t(), -r / s2, 1e-12));
  EXPECT_TRUE(near_rel(v(), q / (2 * s2) + n * std::log(sigma), 1e-12));
}

// A physics function and its Hessian: the stiffness of a chain of springs.
TEST(ArrayTransforms, ChainOfSprings) {
  constexpr std::size_t n = 5;
  auto D = xt::xtensor<double, 2>::from_shape({n - 1, n});  // bond i joins particles i, i + 1
  D.fill(0.0);
  for (std::size_t i = 0; i + 1 < n; ++i) D(i, i) = -1, D(i, i + 1) = 1;
  const xt::xtensor<double, 1> up = {0.0, 1.0};
  auto p = xt::xtensor<double, 2>::from_shape({n, 2});
  for (std::size_t i = 0; i < n; ++i) p(i, 0) = 1.1 * double(i), p(i, 1) = 0.2 * std::sin(i);
  // example-begin hessian
  // The potential energy of n particles in the plane (positions p, n x 2) joined in a chain by
  // springs, under gravity; D maps positions to bonds, up is (0, 1).
  const auto energy = [&D, &up](auto p) {
    constexpr double k = 40.0, L = 1.0, g = 9.8;         // stiffness, rest length, gravity
    const auto bond = mg::matmul(D, p);                  // (n - 1) x 2
    const auto len = mg::sqrt(mg::sum(bond * bond, 1));  // the bonds' lengths
    return 0.5 * k * mg::sum(mg::square(len - L)) + g * mg::sum(mg::matmul(p, up));
  };
  const auto [e, de] = mg::value_and_grad(energy)(p);  // the force is -de
  const auto H = mg::hessian(energy)(p);               // n x 2 x n x 2: the stiffness
  // example-end hessian
  ASSERT_EQ(H.shape(), (std::vector<std::size_t>{n, 2, n, 2}));
  double e_ref = 0;
  for (std::size_t i = 0; i + 1 < n; ++i) {
    const double dx = p(i + 1, 0) - p(i, 0), dy = p(i + 1, 1) - p(i, 1);
    e_ref += 0.5 * 40.0 * std::pow(std::hypot(dx, dy) - 1.0, 2);
  }
  for (std::size_t i = 0; i < n; ++i) e_ref += 9.8 * p(i, 1);
  EXPECT_TRUE(near_rel(e, e_ref, 1e-12));
  // against central differences of the gradient, and symmetric
  const double h = 1e-5;
  for (std::size_t j = 0; j < 2 * n; ++j) {
    arr pp = p, pm = p;
    pp.flat(j) += h;
    pm.flat(j) -= h;
    const arr col = (gradient(energy, pp) - gradient(energy, pm)) / (2 * h);
    for (std::size_t i = 0; i < 2 * n; ++i) {
      EXPECT_TRUE(near_rel(H.flat(i * 2 * n + j), col.flat(i), 1e-6)) << i << ", " << j;
      EXPECT_TRUE(near_rel(H.flat(i * 2 * n + j), H.flat(j * 2 * n + i), 1e-12));
    }
  }
  // moving every particle alike changes no bond: the translations are in the Hessian's kernel,
  // and a Hessian-vector product along one is zero
  for (std::size_t i = 0; i < 2 * n; ++i) {
    double sx = 0, sy = 0;
    for (std::size_t m = 0; m < n; ++m)
      sx += H.flat(i * 2 * n + 2 * m), sy += H.flat(i * 2 * n + 2 * m + 1);
    EXPECT_NEAR(sx, 0.0, 1e-10);
    EXPECT_NEAR(sy, 0.0, 1e-10);
  }
  arr shift = xt::zeros<double>({std::size_t{n}, std::size_t{2}});
  xt::view(shift, xt::all(), 0) = 1.0;
  const arr hv = mg::jvp(mg::grad(energy), std::tuple{arr(p)}, std::tuple{shift}).second;
  for (double v : hv) EXPECT_NEAR(v, 0.0, 1e-10);
}

namespace {
// Custom ops with shapes that declare no linearity (Note [Dual arrays]: their tangent is one
// backward per output element). A product written with xtensor, as in custom_shaped_test.cpp:
struct xt_prod_op {
  static constexpr const char* name = "xt_prod";
  static constexpr bool elementwise = false;
  static constexpr std::size_t arity = 1;
  static auto forward(const auto& x) { return xt::prod(x)(); }
  static auto backward(const auto& x, const auto& y, const auto& g) {
    return xt::xarray<double>(g * y / x);
  }
};
// A sum of squares whose backward is written with metagrad's operators, so it has a second
// derivative too (its backward runs on dual arrays under mg::hessian).
struct sumsq_op {
  static constexpr const char* name = "sumsq";
  static constexpr bool elementwise = false;
  static constexpr std::size_t arity = 1;
  static auto forward(const auto& x) { return double(xt::sum(x * x)()); }
  static auto backward(const auto& x, const auto&, const auto& g) { return g * x * 2.0; }
};
}  // namespace

TEST(ArrayTransforms, CustomOpsWithShapes) {
  const arr x = randn({4}, 25), v = randn({4}, 26);
  const auto f = [](auto x) { return mg::exp(x) * mg::apply<xt_prod_op>(x * 0.5); };
  const auto [y, t] = mg::jvp(f, std::tuple{x}, std::tuple{v});
  expect_all_near(t, along(f, x, v), 1e-6, "J v through a custom reduction");
  const auto g = [](auto x) { return mg::log(1.0 + mg::apply<sumsq_op>(mg::sin(x))); };
  const arr H = mg::hessian(g)(x);
  const double h = 1e-5;
  for (std::size_t k = 0; k < 4; ++k) {
    arr e = xt::zeros<double>({4});
    e(k) = h;
    const arr col = (gradient(g, arr(x + e)) - gradient(g, arr(x - e))) / (2 * h);
    for (std::size_t i = 0; i < 4; ++i) EXPECT_TRUE(near_rel(H(i, k), col(i), 1e-6));
  }
}

TEST(ArrayTransforms, Errors) {
  const arr x = randn({3}, 23);
  const auto f = [](auto x) { return mg::exp(x); };
  try {
    (void)mg::jvp(f, std::tuple{x}, std::tuple{randn({2}, 24)});
    ADD_FAILURE() << "no error";
  } catch (const mg::error& e) {
    EXPECT_NE(std::string(e.what()).find("jvp: the tangent of argument 0 has shape [2] but the "
                                         "argument has shape [3]; a tangent has its primal's "
                                         "shape"),
              std::string::npos)
        << e.what();
  }
}
