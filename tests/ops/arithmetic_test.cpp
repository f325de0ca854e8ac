// The arithmetic family through the one harness: one line per op (broadcasting shapes where the
// op is binary, a number on either side, integral and fractional exponents).
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <xtensor/xadapt.hpp>

#include <metagrad/tensor_xtensor.hpp>
#include "support/expect_ad.hpp"

using mg_test::expect_ad;

const mg::shape_t s23{2, 3}, s3{3}, s21{2, 1};

TEST(Arithmetic, Add) {
  expect_ad([](auto a, auto b) { return a + b; }, {.shapes = {s23, s3}});
}
TEST(Arithmetic, Sub) {
  expect_ad([](auto a, auto b) { return a - b; }, {.shapes = {s21, s23}});
}
TEST(Arithmetic, Mul) {
  expect_ad([](auto a, auto b) { return a * b; }, {.shapes = {s23, s3}});
}
TEST(Arithmetic, Div) {
  expect_ad([](auto a, auto b) { return a / b; },
            {.ranges = {{-1, 1}, {0.5, 2}}, .shapes = {s23, s21}});
}
TEST(Arithmetic, Neg) {
  expect_ad([](auto x) { return -x; });
}
TEST(Arithmetic, NumbersOnEitherSide) {
  expect_ad([](auto x) { return 2.0 * x - 3 + x / 4.0 - 1 / (2.5 + x); });
}
TEST(Arithmetic, PowIntegral) {
  expect_ad([](auto x) { return pow(x, 3); });
}
TEST(Arithmetic, PowNegativeIntegral) {
  expect_ad([](auto x) { return pow(x, -2); }, {.ranges = {{0.5, 2.0}}});
}
TEST(Arithmetic, PowFractional) {
  expect_ad([](auto x) { return pow(x, 2.5); }, {.ranges = {{0.5, 2.0}}});
}
TEST(Arithmetic, PowElementwise) {
  expect_ad([](auto a, auto b) { return pow(a, b); },
            {.ranges = {{0.5, 2}, {-1.5, 1.5}}, .shapes = {s23, s3}});
}
TEST(Arithmetic, PowNumberBase) {
  expect_ad([](auto b) { return pow(2.5, b); });
}
TEST(Arithmetic, Maximum) {
  expect_ad([](auto a, auto b) { return mg::maximum(a, b); }, {.shapes = {s23, s3}});
}
TEST(Arithmetic, Minimum) {
  expect_ad([](auto a, auto b) { return mg::minimum(a, b); }, {.shapes = {s21, s23}});
}
TEST(Arithmetic, Atan2) {
  expect_ad([](auto a, auto b) { return atan2(a, b); }, {.shapes = {s23, s3}});
}

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

// The gradient of x^0 is 0, also at x = 0 (where p x^(p-1) would be 0 * inf = NaN) and under an
// infinite gradient, as torch's pow_backward: through backward, pow_, double backward (the second
// derivative of x^1 at 0, whose first derivative is x^0), forward AD and the static engine. The
// elementwise pow's gradient of a where b == 0 is 0 likewise.
namespace {
void expect_exact_zeros(const mg::tensor& g, const std::string& what) {
  ASSERT_TRUE(g.defined()) << what;
  for (const double v : mg_test::values(g)) EXPECT_EQ(v, 0.0) << what;  // NaN is unequal
}
}  // namespace

TEST_P(PowSemantics, GradientOfXToTheZeroIsZero) {
  const mg::device d = GetParam();
  const auto leaf = [&](double v) { return mg::tensor(v, mg::f64).to(d).requires_grad_(); };
  const double x0 = 0.2785;
  {  // x - x is exactly 0
    mg::tensor x = leaf(x0);
    mg::sum(mg::pow(x - x, 0.0) * 0.7).backward();
    expect_exact_zeros(x.grad(), "pow(x - x, 0)");
  }
  {
    mg::tensor x = leaf(x0);
    mg::tensor v = x - x;
    v.pow_(0.0);
    mg::sum(v * 0.7).backward();
    expect_exact_zeros(x.grad(), "(x - x).pow_(0)");
  }
  {  // packs and a tail, zeros among other bases, f32 and f64
    const std::vector<double> xs{0.0, -0.0, 0.5, 2.0, 0.0, 1.0, 0.0, 3.0, 0.0};
    for (const mg::dtype dt : {mg::f64, mg::f32}) {
      mg::tensor x = mg::tensor(xt::xarray<double>(xt::adapt(xs))).to(dt).to(d).requires_grad_();
      mg::sum(mg::pow(x, 0.0) * std::numeric_limits<double>::infinity()).backward();
      expect_exact_zeros(x.grad(), "pow(x, 0) under an infinite gradient");
    }
  }
  for (const double p : {0.0, 1.0, 2.0}) {  // 0.7 z^p at z = 0: d2/dz2 is 0, 0, 1.4
    SCOPED_TRACE("p = " + std::to_string(p));
    mg::tensor z = leaf(0.0);
    const mg::tensor d1 =
        mg::autograd::grad({mg::sum(mg::pow(z, p) * 0.7)}, {z}, {}, {.create_graph = true})[0];
    EXPECT_EQ(mg_test::values(d1), std::vector<double>{p == 1 ? 0.7 : 0.0});
    const mg::tensor d2 = mg::autograd::grad({d1}, {z}, {}, {.allow_unused = true})[0];
    EXPECT_EQ(d2.defined() ? mg_test::values(d2) : std::vector<double>{0.0},
              std::vector<double>{p == 2 ? 1.4 : 0.0});
    mg::tensor x = leaf(x0);
    const mg::tensor e1 =
        mg::autograd::grad({mg::sum(mg::pow(x - x, p) * 0.7)}, {x}, {}, {.create_graph = true})[0];
    expect_exact_zeros(e1, "d/dx pow(x - x, p)");
    const mg::tensor e2 = mg::autograd::grad({e1}, {x}, {}, {.allow_unused = true})[0];
    if (e2.defined()) expect_exact_zeros(e2, "d2/dx2 pow(x - x, p)");
  }
  {
    mg::forward_ad::dual_level level;
    const mg::tensor x =
        mg::forward_ad::make_dual(mg::tensor(x0, mg::f64).to(d), mg::tensor(1.0, mg::f64).to(d));
    expect_exact_zeros(mg::forward_ad::unpack_dual(mg::pow(x - x, 0.0)).tangent,
                       "the tangent of pow(x - x, 0)");
  }
  {
    mg::tensor a = mg::tensor({0.0, 0.0, 2.0}, mg::f64).to(d).requires_grad_();
    mg::tensor b = mg::tensor({0.0, 0.0, 0.0}, mg::f64).to(d).requires_grad_();
    mg::sum(mg::pow(a, b)).backward();
    expect_exact_zeros(a.grad(), "pow(a, b) where b == 0");
  }
}

TEST(Arithmetic, PowZeroExponentGradientIsZeroOnTheStaticEngine) {
  const double x0 = 0.2785;
  const auto f0 = [](auto x) { return mg::pow(x - x, 0.0) * 0.7; };
  EXPECT_EQ(mg::grad(f0)(x0), 0.0);
  EXPECT_EQ(mg::grad(mg::grad(f0))(x0), 0.0);
  const auto f1 = [](auto x) { return mg::pow(x, 1.0) * 0.7; };
  EXPECT_EQ(mg::grad(f1)(0.0), 0.7);
  EXPECT_EQ(mg::grad(mg::grad(f1))(0.0), 0.0);
  EXPECT_EQ(mg::grad(mg::grad(mg::grad(f1)))(0.0), 0.0);
  const auto f2 = [](auto x) { return mg::pow(x, 2) * 0.7; };
  EXPECT_EQ(mg::grad(mg::grad(f2))(0.0), 1.4);
  EXPECT_EQ(mg::grad(mg::grad(mg::grad(f2)))(0.0), 0.0);
  const auto inf = [](auto x) {
    return mg::pow(x - x, 0) * std::numeric_limits<double>::infinity();
  };
  EXPECT_EQ(mg::grad(inf)(x0), 0.0);

  using arr = xt::xarray<double>;
  const arr x{0.0, x0, 0.0, -1.0, 0.0};
  const arr g = mg::grad([](auto x) { return mg::sum(mg::pow(x - x, 0.0) * 0.7); })(x);
  for (const double v : g) EXPECT_EQ(v, 0.0);
  const arr h = mg::hessian([](auto x) { return mg::sum(mg::pow(x, 1.0) * 0.7); })(x);
  for (const double v : h) EXPECT_EQ(v, 0.0);
  const auto [y, t] = mg::jvp([](auto x) { return mg::pow(x - x, 0.0); }, std::tuple{x},
                              std::tuple{arr(xt::ones<double>({5}))});
  for (const double v : arr(t)) EXPECT_EQ(v, 0.0);
}
