// Static engine on xtensor arrays: the fused SIMD path and the general (materialised) path,
// each op against finite differences, both paths against each other and closed forms,
// broadcasting, shaped ops, argument types, and the errors.
#include <cmath>
#include <cstdint>
#include <string>
#include <thread>
#include <tuple>
#include <utility>

#include <gtest/gtest.h>
#include <xtensor/xfixed.hpp>
#include <xtensor/xrandom.hpp>
#include <xtensor/xtensor.hpp>
#include <xtensor/xview.hpp>

#include <metagrad/xtensor.hpp>

#include "support/harness_xtensor.hpp"

using mg_test::check_xt;

namespace {
xt::xarray<double> randn(std::vector<std::size_t> shape, unsigned seed) {
  xt::random::seed(seed);
  return xt::random::randn<double>(shape);
}
xt::xarray<double> positive(std::vector<std::size_t> shape, unsigned seed) {
  xt::random::seed(seed);
  return xt::random::rand<double>(shape, 0.5, 2.0);
}
}  // namespace

// Sizes 13 and 37 leave a scalar tail after the SIMD packs; 64 does not.
class Fused : public ::testing::TestWithParam<std::size_t> {};

TEST_P(Fused, EveryElementwiseOp) {
  const std::size_t n = GetParam();
  const auto x = randn({n}, 1), y = randn({n}, 2), p = positive({n}, 3);
  check_xt([](auto a, auto b) { return sum(a + b); }, x, y);
  check_xt([](auto a, auto b) { return sum(a - b); }, x, y);
  check_xt([](auto a, auto b) { return sum(a * b); }, x, y);
  check_xt([](auto a, auto b) { return sum(a / b); }, x, p);
  check_xt([](auto a) { return sum(-a); }, x);
  check_xt([](auto a) { return sum(exp(a)); }, x);
  check_xt([](auto a) { return sum(log(a)); }, p);
  check_xt([](auto a) { return sum(sin(a)); }, x);
  check_xt([](auto a) { return sum(cos(a)); }, x);
  check_xt([](auto a) { return sum(tanh(a)); }, x);
  check_xt([](auto a) { return sum(pow(a, 3)); }, x);  // integral exponent, negative bases
  check_xt([](auto a) { return sum(pow(a, 2.5)); }, p);
}

TEST_P(Fused, MatchesClosedFormAndGeneralPath) {
  const std::size_t n = GetParam();
  const auto x = randn({n}, 4);
  auto f = [](auto v) {
    auto t = sin(v) * v + exp(-v * v);
    return sum(t * t);
  };
  auto [value, g] = mg::value_and_grad(f)(x);
  const xt::xarray<double> t = xt::sin(x) * x + xt::exp(-x * x);
  const xt::xarray<double> dt = xt::cos(x) * x + xt::sin(x) - 2 * x * xt::exp(-x * x);
  EXPECT_NEAR(value, xt::sum(t * t)(), 1e-12 * double(n));
  const xt::xarray<double> expected = 2 * t * dt;
  for (std::size_t i = 0; i < n; ++i) EXPECT_NEAR(g(i), expected(i), 1e-12) << i;
  // `1 * sum(...)` is not a bare sum, so it takes the general path: same numbers
  auto [value2, g2] = mg::value_and_grad([&](auto v) { return 1.0 * f(v); })(x);
  EXPECT_NEAR(value2, value, 1e-12 * double(n));
  for (std::size_t i = 0; i < n; ++i) EXPECT_NEAR(g2(i), g(i), 1e-13) << i;
}

INSTANTIATE_TEST_SUITE_P(Sizes, Fused, ::testing::Values(13, 37, 64));

// Note [Scalar epilogue] and Note [Hoisting] (xtensor.hpp): these run as one fused loop. Each is
// checked against central differences, and against the general path: the same function with a
// broadcast factor of shape [1], which keeps it from fusing.
template <class F, class... N>
void expect_fused_matches_general(const F& f, const xt::xarray<double>& x, N... numbers) {
  const xt::xarray<double> one{1.0};
  auto [v, g] = mg::value_and_grad(f)(x, numbers...);
  auto [vg, gg] = mg::value_and_grad([&f](auto a, auto o, auto... n) { return f(a * o, n...); })(
      x, one, numbers...);
  EXPECT_NEAR(v, vg, 1e-12 * std::fabs(vg));
  const auto& ga = std::get<0>(g);
  const auto& gga = std::get<0>(gg);
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(ga(i), gga(i), 1e-12) << i;
  [&]<std::size_t... k>(std::index_sequence<k...>) {
    (
        [&] {
          EXPECT_NEAR(std::get<k + 1>(g), std::get<k + 2>(gg),
                      1e-10 * std::fabs(std::get<k + 2>(gg)))
              << "number argument " << k;
        }(),
        ...);
  }
  (std::index_sequence_for<N...>{});
}

TEST(StaticXtensorFusion, ScalarEpilogue) {
  const auto x = randn({37}, 21), y = randn({37}, 22);
  const auto lse = [](auto a) { return log(sum(exp(a))); };
  check_xt(lse, x);
  check_xt([](auto a) { return sqrt(sum(a * a)); }, x);
  check_xt([](auto a, auto s) { return sum(a * s) / s + s * s; }, x, 0.7);  // s in both parts
  check_xt([](auto a, auto b) { return exp(-sum(a * b) * 0.1); }, x, y);
  // closed form: d/dx log(sum(exp(x))) = softmax(x)
  auto [v, g] = mg::value_and_grad(lse)(x);
  const double total = xt::sum(xt::exp(x))();
  EXPECT_NEAR(v, std::log(total), 1e-12);
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(g(i), std::exp(x(i)) / total, 1e-15);
  expect_fused_matches_general([](auto a, auto s) { return sum(sin(a) * s) / s + s * s; }, x, 0.7);
}

TEST(StaticXtensorFusion, Hoisting) {
  const auto x = randn({37}, 23);
  const auto normal = [](auto a, auto mu, auto sigma) {
    const auto z = (a - mu) / sigma;  // one reciprocal, hoisted; z used twice, one slot
    return sum(-0.5 * z * z - log(sigma));
  };
  check_xt(normal, x, 0.3, 1.7);
  expect_fused_matches_general(normal, x, 0.3, 1.7);
  // closed forms: d/dmu = sum(z) / sigma, d/dsigma = sum(z^2) / sigma - n / sigma
  const double mu = 0.3, sigma = 1.7, n = double(x.size());
  const xt::xarray<double> z = (x - mu) / sigma;
  auto [dmu, dsigma] = mg::grad<1, 2>(normal)(x, mu, sigma);
  EXPECT_NEAR(dmu, xt::sum(z)() / sigma, 1e-12);
  EXPECT_NEAR(dsigma, xt::sum(z * z)() / sigma - n / sigma, 1e-12);
  // hoisted subexpressions of several numbers, divisions by them, and a number used in both the
  // hoisted part and the loop
  const auto mixed = [](auto a, auto m, auto s) {
    return sum(a / (s * s + m) + log(s) * a / s + exp(a * m));
  };
  check_xt(mixed, x, 0.4, 1.3);
  expect_fused_matches_general(mixed, x, 0.4, 1.3);
  // with an epilogue too
  const auto scaled = [](auto a, auto s) { return log(sum(exp(a / s))) * s; };
  check_xt(scaled, x, 0.8);
  expect_fused_matches_general(scaled, x, 0.8);
}

TEST(StaticXtensorFusion, Product) {
  // one loop for the product, one for the gradient prod / v_i
  const auto x = positive({37}, 25), y = randn({37}, 26);
  check_xt([](auto a) { return prod(a); }, x);
  check_xt([](auto a, auto b) { return prod(a * 0.5 + sin(b)); }, x, xt::xarray<double>(y * 0.1));
  check_xt([](auto a, auto s) { return prod(a / s); }, x, 1.1);
  check_xt([](auto a) { return log(prod(a)) * 2.0; }, x);  // with an epilogue
  expect_fused_matches_general([](auto a, auto s) { return prod(a * s); }, x, 0.9);
  // closed form, and the zero rules (a zero factor takes the general path)
  const xt::xarray<double> v{2.0, 3.0, 5.0};
  auto [p, g] = mg::value_and_grad([](auto a) { return prod(a); })(v);
  EXPECT_DOUBLE_EQ(p, 30.0);
  EXPECT_DOUBLE_EQ(g(0), 15.0);
  EXPECT_DOUBLE_EQ(g(2), 6.0);
  const xt::xarray<double> one_zero{2.0, 0.0, 5.0}, two_zeros{0.0, 3.0, 0.0};
  auto [p1, g1] = mg::value_and_grad([](auto a) { return prod(a); })(one_zero);
  EXPECT_EQ(p1, 0.0);
  EXPECT_EQ(g1, (xt::xarray<double>{0.0, 10.0, 0.0}));
  auto [p2, g2] = mg::value_and_grad([](auto a) { return prod(a); })(two_zeros);
  EXPECT_EQ(p2, 0.0);
  EXPECT_EQ(g2, (xt::xarray<double>{0.0, 0.0, 0.0}));
}

TEST(StaticXtensorFusion, ResultsInTheArgumentsTypes) {
  // the fused forms build mg::grad's and mg::value_and_grad's results in place: each gradient in
  // its argument's type (xtensor_fixed: no allocation, no copy), one bare, several in a tuple
  using fixed = xt::xtensor_fixed<double, xt::xshape<5>>;
  const fixed x{0.5, 1.0, 1.5, 2.0, 2.5}, y{1.0, -1.0, 2.0, 0.5, 3.0};
  const auto lse = [](auto a) { return log(sum(exp(a))); };
  const auto dot = [](auto a, auto b) { return sum(a * b); };
  const auto product = [](auto a, auto s) { return prod(a * s); };
  const fixed g = mg::grad(lse)(x);
  const auto [v, g2] = mg::value_and_grad(lse)(x);
  static_assert(std::is_same_v<decltype(mg::grad(lse)(x)), fixed>);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(g2)>, fixed>);
  const double total = xt::sum(xt::exp(x))();
  EXPECT_NEAR(v, std::log(total), 1e-14);
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_NEAR(g(i), std::exp(x(i)) / total, 1e-15);
    EXPECT_EQ(g2(i), g(i));
  }
  const auto [ga, gb] = mg::grad(dot)(x, y);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(ga)>, fixed>);
  EXPECT_EQ(ga, y);
  EXPECT_EQ(gb, x);
  const auto [p, gp] = mg::value_and_grad<1>(product)(x, 2.0);  // d/ds prod(2x) = 5 prod / s
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(gp)>, double>);
  EXPECT_NEAR(gp, 5 * p / 2.0, 1e-12 * p);
  const auto [gx, gs] = mg::grad(product)(x, 2.0);
  EXPECT_NEAR(gx(1), p / x(1), 1e-12 * p);
  EXPECT_NEAR(gs, gp, 1e-12 * p);
}

TEST(StaticXtensorFusion, SumOfNumbersOnlyIsNotMultipliedByTheArraySize) {
  // the sum of a 0-d value is that value, whatever the size of the unused array argument
  const auto x = randn({37}, 24);
  auto [v, g] =
      mg::value_and_grad([](auto a, auto s) { return sum(s * s) + 0.0 * sum(a); })(x, 3.0);
  EXPECT_DOUBLE_EQ(v, 9.0);
  EXPECT_DOUBLE_EQ(std::get<1>(g), 6.0);
  auto [v2, g2] = mg::value_and_grad([](auto, auto s) { return sum(s * s); })(x, 3.0);
  EXPECT_DOUBLE_EQ(v2, 9.0);
  EXPECT_DOUBLE_EQ(std::get<1>(g2), 6.0);
  EXPECT_DOUBLE_EQ(std::get<0>(g2)(5), 0.0);
}

TEST(StaticXtensor, NumbersMixWithArrays) {
  const auto x = randn({3, 5}, 5);
  check_xt([](auto a, auto s) { return sum(a * s + s * s); }, x, 0.7);      // fused
  check_xt([](auto a, auto s) { return 2.0 * sum(exp(a * s)); }, x, -0.3);  // general
  auto [ga, gs] = mg::grad([](auto a, auto s) { return sum(a * s); })(x, 2.0);
  EXPECT_NEAR(gs, xt::sum(x)(), 1e-12);
  EXPECT_NEAR(ga(1, 2), 2.0, 0.0);
}

TEST(StaticXtensor, BroadcastingSumsGradientsBack) {
  check_xt([](auto a, auto b) { return sum(a * b); }, randn({3, 1}, 6), randn({1, 4}, 7));
  check_xt([](auto a, auto b) { return sum(sin(a) * b); }, randn({2, 3}, 8), randn({3}, 9));
  auto [ga, gb] =
      mg::grad([](auto a, auto b) { return sum(a + b); })(randn({2, 3}, 10), randn({3}, 11));
  EXPECT_EQ(gb.shape(), (std::vector<std::size_t>{3}));
  EXPECT_DOUBLE_EQ(gb(0), 2.0);  // broadcast over 2 rows
  EXPECT_DOUBLE_EQ(ga(1, 2), 1.0);
}

// Broadcast copies write what a broadcast dimension repeats once and copy it, doubling: repeat
// counts that are not powers of two, inner rows of 1 to 3, a repeat between two own dimensions.
TEST(StaticXtensor, BroadcastCopiesRepeatByDoubling) {
  using arr = xt::xarray<double>;
  const auto check = [](const arr& x, const std::vector<std::size_t>& to) {
    const mg::detail::dims d(to.begin(), to.end());
    const auto copy = mg::detail::broadcast_copy<double>(x, d);
    const arr want = xt::broadcast(x, to);
    ASSERT_EQ(copy.size(), want.size());
    for (std::size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(copy.data()[i], want.data()[i]) << "element " << i;
  };
  check(randn({5, 1, 2}, 60), {5, 1000, 2});
  check(randn({1, 7, 3}, 61), {6, 7, 3});
  check(randn({3, 1, 1}, 62), {3, 5, 7});
  check(randn({4}, 63), {9, 3, 4});
  check(randn({2, 1, 3, 1}, 64), {2, 11, 3, 13});
  const arr t = xt::transpose(randn({3, 4}, 65));  // strided: (4, 3) read along strides (1, 4)
  check(xt::view(t, xt::newaxis(), xt::all(), xt::all()), {5, 4, 3});
}

// The gradients of inputs broadcast over [k, n, d] with a short d: summed back over n (into d
// accumulators per k) and over d, as the GMM objective does.
TEST(StaticXtensor, GradientsSummedBackOverShortRows) {
  const auto mu = randn({4, 1, 2}, 66), x = randn({1, 37, 2}, 67), w = randn({4, 37, 1}, 68);
  check_xt([](auto m, auto p, auto q) { return sum(square(p - m) * q); }, mu, x, w);
  check_xt([](auto m, auto p) { return sum(exp(sum(square(p - m), 2) * -0.5)); }, mu, x);
  const auto a = randn({3, 20, 5}, 69), b = randn({3, 1, 5}, 70);
  check_xt([](auto p, auto q) { return sum(tanh(p * q)); }, a, b);
}

TEST(StaticXtensor, SumAlongAnAxis) {
  const auto x = randn({3, 4}, 12);
  check_xt([](auto a) { return sum(pow(sum(a, 0), 2)); }, x);
  check_xt([](auto a) { return sum(exp(sum(a, -1))); }, x);
  check_xt([](auto a) { return sum(sum(a * a, 1) * sum(a, 1)); }, x);
}

TEST(StaticXtensor, Matmul) {
  const auto a = randn({2, 3}, 13), w = randn({3, 4}, 14);
  check_xt([](auto p, auto q) { return sum(tanh(matmul(p, q))); }, a, w);
  // closed form: d/dA sum(A W) = 1 W^T
  auto [ga, gw] = mg::grad([](auto p, auto q) { return sum(matmul(p, q)); })(a, w);
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t k = 0; k < 3; ++k) EXPECT_NEAR(ga(i, k), xt::sum(xt::row(w, k))(), 1e-12);
  EXPECT_EQ(gw.shape(), w.shape());
}

TEST(StaticXtensor, SharedNodesAreComputedOnce) {
  // t is used three times; its value is materialised once and the gradient is still right
  check_xt(
      [](auto a, auto b) {
        auto t = matmul(a, b);
        return sum(t * t) + sum(sin(t));
      },
      randn({2, 2}, 15), randn({2, 2}, 16));
}

TEST(StaticXtensor, ArgumentTypesArePreserved) {
  xt::xtensor<float, 1> xf = {0.5f, -1.0f, 2.0f, 0.25f, 1.5f, -0.75f, 0.1f, 3.0f, -2.0f};
  auto gf = mg::grad([](auto v) { return sum(v * v); })(xf);
  static_assert(std::is_same_v<decltype(gf), xt::xtensor<float, 1>>);
  for (std::size_t i = 0; i < xf.size(); ++i) EXPECT_FLOAT_EQ(gf(i), 2 * xf(i));
  xt::xtensor_fixed<double, xt::xshape<2, 2>> m = {{1.0, 2.0}, {3.0, 4.0}};
  auto gm = mg::grad([](auto v) { return sum(exp(v)); })(m);
  static_assert(std::is_same_v<decltype(gm), decltype(m)>);
  EXPECT_NEAR(gm(1, 0), std::exp(3.0), 1e-12);
  auto [v, g] = mg::value_and_grad([](auto v) { return sum(v); })(xf);
  static_assert(std::is_same_v<decltype(v), float>);
  EXPECT_FLOAT_EQ(v, 3.6f);
  EXPECT_FLOAT_EQ(g(3), 1.0f);
}

TEST(StaticXtensor, UnusedArgumentHasZeroGradient) {
  auto [ga, gb] =
      mg::grad([](auto a, auto) { return 2.0 * sum(a); })(randn({2}, 17), randn({3}, 18));
  EXPECT_DOUBLE_EQ(ga(0), 2.0);
  EXPECT_EQ(gb.shape(), (std::vector<std::size_t>{3}));
  EXPECT_DOUBLE_EQ(gb(2), 0.0);
}

using mg_test::error_of;

TEST(StaticXtensor, Errors) {
  const auto a = randn({2, 3}, 19), b = randn({2, 3}, 20), c = randn({4}, 21);
  const std::string mm =
      error_of([&] { mg::grad([](auto p, auto q) { return sum(matmul(p, q)); })(a, b); });
  EXPECT_NE(mm.find("matmul"), std::string::npos) << mm;
  EXPECT_NE(mm.find("[2,3]"), std::string::npos) << mm;
  const std::string bc =
      error_of([&] { mg::grad([](auto p, auto q) { return sum(p * q); })(a, c); });
  EXPECT_NE(bc.find("mul"), std::string::npos) << bc;
  EXPECT_NE(bc.find("shapes [2,3] and [4] cannot be broadcast together"), std::string::npos) << bc;
  const std::string ns = error_of([&] { mg::grad([](auto p) { return p * p; })(a); });
  EXPECT_NE(ns.find("scalar"), std::string::npos) << ns;
  EXPECT_NE(ns.find("[2,3]"), std::string::npos) << ns;
  // a one-element array is a scalar (as in torch); an xt::xtensor<T, N> result is rejected at
  // compile time instead (Note [Scalar results], tests/compile_fail)
  const xt::xarray<double> one{3.0};
  const auto g1 = mg::grad([](auto p) { return p * p; })(one);
  ASSERT_EQ(g1.size(), 1u);
  EXPECT_DOUBLE_EQ(g1(0), 6.0);
  const std::string ax = error_of([&] { mg::grad([](auto p) { return sum(sum(p, 2)); })(a); });
  EXPECT_NE(ax.find("dim 2"), std::string::npos) << ax;
}

TEST(StaticXtensor, ValueAndVectorJacobianProduct) {
  // f maps arrays to arrays; vjp gives the gradient of sum(seed * f)
  const auto x = randn({2, 3}, 22), seed = randn({2, 3}, 23);
  auto f = [](auto v, auto w) { return sin(v) * w; };
  using engine = mg::detail::evaluator<mg::detail::array_family>;
  const xt::xarray<double> value = engine::value(f, x, 2.0);
  const auto [gx, gw] = engine::vjp<0, 1>(f, seed, x, 2.0);
  for (std::size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(value.flat(i), std::sin(x.flat(i)) * 2.0, 1e-15);
    EXPECT_NEAR(gx.flat(i), seed.flat(i) * std::cos(x.flat(i)) * 2.0, 1e-14);
  }
  EXPECT_NEAR(gw, xt::sum(seed * xt::sin(x))(), 1e-12);
  EXPECT_THROW(engine::vjp<0>(f, randn({3}, 24), x, 2.0), mg::error);
}

// Note [Regions]: every maximal elementwise subtree is one node of the general evaluator.
template <class N>
struct op_of;
template <class Op, class... A>
struct op_of<mg::node<Op, A...>> {
  using type = Op;
};

namespace {
// A value that counts its constructions and destructions.
struct tally {
  static inline int made = 0, gone = 0, assigned = 0;
  double v = 0;
  explicit tally(double x) : v(x) { ++made; }
  tally(const tally& o) : v(o.v) { ++made; }
  tally(tally&& o) noexcept : v(o.v) { ++made; }
  tally& operator=(const tally& o) {
    v = o.v;
    ++assigned;
    return *this;
  }
  tally& operator=(tally&& o) noexcept {
    v = o.v;
    ++assigned;
    return *this;
  }
  ~tally() { ++gone; }
};
}  // namespace

// Note [Slots built when computed]: the pooled arrays of the general path are held in cells that
// build nothing until a value is set (an xtensor array's default constructor allocates one
// element), and free what they hold exactly once.
TEST(StaticXtensorRegions, SlotsBuiltWhenComputed) {
  using mg::detail::built_when_computed_v;
  using mg::detail::work_array;
  static_assert(built_when_computed_v<work_array<double>>);
  static_assert(built_when_computed_v<mg::grads<mg::no_grad, work_array<float>>>);
  static_assert(!built_when_computed_v<double>);
  static_assert(!built_when_computed_v<mg::grads<double, double>>);
  static_assert(std::is_same_v<mg::detail::slot_storage_t<double>, double>);
  {
    using cell = mg::detail::slot_cell<tally>;
    cell a;
    EXPECT_EQ(tally::made, 0);  // nothing built
    a.set(tally(1.5));          // built in place from the temporary: 2 made, 1 gone
    EXPECT_EQ(tally::made, 2);
    EXPECT_EQ(tally::gone, 1);
    a.set(tally(2.5));  // assigned, not built again
    EXPECT_EQ(tally::assigned, 1);
    EXPECT_EQ(a.get().v, 2.5);
    cell b = a;  // a copy builds one
    EXPECT_EQ(b.get().v, 2.5);
    cell c = std::move(b);
    EXPECT_EQ(c.get().v, 2.5);
    cell empty;
    c = empty;  // assigning an empty cell frees the value
    b = std::move(empty);
    a.clear();
    a.clear();  // clearing twice frees once
    const int made = tally::made;
    EXPECT_EQ(tally::gone, made);  // every value built so far is freed
    cell d;
    d.set(tally(4.0));
  }  // d's value freed by its destructor
  EXPECT_EQ(tally::made, tally::gone);
}

TEST(StaticXtensorRegions, RewriteKeepsShapedOpsAndMergesElementwiseOnes) {
  using mg::arg, mg::node, mg::matmul_op;
  auto layer = [](auto x, auto w, auto b) { return sum(tanh(matmul(x, w) + b) * 0.5, 0); };
  using E = mg::detail::traced_t<decltype(layer), 3>;
  using R = mg::detail::regionized_t<E>;
  // sum( region( matmul(x, w), b ), axis ): the region has two inputs, x*w is its input 0
  static_assert(std::is_same_v<op_of<R>::type, mg::sum_op>);
  using Region = std::remove_cvref_t<decltype(mg::detail::child<0>(std::declval<R>()))>;
  static_assert(mg::detail::tree_info<Region>::arity == 2);
  static_assert(
      std::is_same_v<std::remove_cvref_t<decltype(mg::detail::child<0>(std::declval<Region>()))>,
                     node<matmul_op, arg<0>, arg<1>>>);
  static_assert(
      std::is_same_v<std::remove_cvref_t<decltype(mg::detail::child<1>(std::declval<Region>()))>,
                     arg<2>>);
  // x used four times in one region is one input
  auto f = [](auto x) { return sum(x, 0) * (sin(x) * x + exp(-x * x)); };
  using F = mg::detail::regionized_t<mg::detail::traced_t<decltype(f), 1>>;
  static_assert(mg::detail::tree_info<F>::arity == 2);  // inputs: sum(x, 0) and x
}

TEST(StaticXtensorRegions, GradientsThroughRegionsWithBroadcastingAndNumbers) {
  const auto x = randn({4, 3}, 30), w = randn({3, 5}, 31), b = randn({5}, 32);
  check_xt([](auto p, auto q, auto r) { return sum(tanh(matmul(p, q) + r) * 0.5); }, x, w, b);
  check_xt([](auto p, auto q, auto r) { return sum(sum(tanh(matmul(p, q) + r), 0) * r); }, x, w, b);
  // a number inside a region, an input used several times, a constant exponent
  check_xt([](auto p, auto s) { return sum(pow(sum(p * s, 1) + s, 2) * s); }, x, 0.7);
  check_xt([](auto p, auto r) { return sum(sum(p, 0) * (sin(p) * p + exp(-p * p)) / (1 + r * r)); },
           x, randn({1, 3}, 33));
}

// Is E an Op node, or does it hold one?
template <class Op, class E>
constexpr bool holds_op() {
  if constexpr (mg::detail::is_node_v<E>) {
    return []<class O, class... A>(std::type_identity<mg::node<O, A...>>) {
      return std::is_same_v<O, Op> || (holds_op<Op, A>() || ...);
    }(std::type_identity<E>{});
  } else {
    return false;
  }
}
// How many distinct region nodes of E compute an Op node in their loop?
template <class Op, class E>
constexpr int regions_computing() {
  return []<class... T>(mg::detail::type_list<T...>) {
    return ([] {
      if constexpr (mg::detail::is_node_v<T>) {
        using O = std::remove_cvref_t<decltype(std::declval<const T&>().op)>;
        if constexpr (requires { std::declval<const O&>().inner; })
          return holds_op<Op, decltype(std::declval<const O&>().inner)>() ? 1 : 0;
      }
      return 0;
    }() + ... +
            0);
  }(mg::detail::distinct_t<E>{});
}

// Note [Rows of logsumexp] in xt/algebra.hpp: each reduction against a direct computation and
// its gradient against central differences, along the last dimension (rows in packs), a leading
// one (strided) and all, with keepdim, and the max's rules for infinities and NaN.
TEST(StaticXtensorRegions, LogsumexpRowByRow) {
  const auto x = randn({3, 11}, 63);
  const auto direct = [&](std::size_t row) {
    double m = -INFINITY, s = 0;
    for (std::size_t k = 0; k < 11; ++k) m = std::max(m, x(row, k));
    for (std::size_t k = 0; k < 11; ++k) s += std::exp(x(row, k) - m);
    return std::log(s) + m;
  };
  using engine = mg::detail::evaluator<mg::detail::array_family>;
  const xt::xarray<double> rows = engine::value([](auto a) { return logsumexp(a, 1); }, x);
  ASSERT_EQ(rows.shape(), (std::vector<std::size_t>{3}));
  for (std::size_t i = 0; i < 3; ++i) EXPECT_NEAR(rows(i), direct(i), 1e-14);
  const xt::xarray<double> kept = engine::value([](auto a) { return logsumexp(a, -1, true); }, x);
  ASSERT_EQ(kept.shape(), (std::vector<std::size_t>{3, 1}));
  EXPECT_EQ(kept(2, 0), rows(2));
  const xt::xarray<double> cols = engine::value([](auto a) { return logsumexp(a, 0); }, x);
  ASSERT_EQ(cols.shape(), (std::vector<std::size_t>{11}));
  for (std::size_t k = 0; k < 11; ++k) {
    double s = 0;
    for (std::size_t i = 0; i < 3; ++i) s += std::exp(x(i, k));
    EXPECT_NEAR(cols(k), std::log(s), 1e-13);
  }
  const auto w = randn({3}, 64), v = randn({11}, 65);
  check_xt([](auto a, auto b) { return sum(logsumexp(a, 1) * b); }, x, w);
  check_xt([](auto a, auto b) { return sum(logsumexp(a, 0) * b); }, x, v);
  check_xt([](auto a, auto b) { return sum(logsumexp(a, 1, true) * b); }, x, randn({3, 1}, 66));
  check_xt([](auto a) { return logsumexp(a) * 2.0; }, x);
  check_xt([](auto a) { return sum(logsumexp(a * a, 1)); }, randn({2, 3, 5}, 67));
  // the formula's rules: a row of -inf gives NaN (-inf - -inf), +inf gives NaN, NaN propagates
  xt::xarray<double> odd = {{-INFINITY, -INFINITY}, {1.0, INFINITY}, {NAN, 0.0}, {0.0, 0.0}};
  const xt::xarray<double> r = engine::value([](auto a) { return logsumexp(a, 1); }, odd);
  EXPECT_TRUE(std::isnan(r(0)) && std::isnan(r(1)) && std::isnan(r(2)));
  EXPECT_NEAR(r(3), std::log(2.0), 1e-15);
  // float rows longer than a pack, the sums in double
  xt::xarray<float> f = xt::ones<float>({2, 37});
  const auto [vf, gf] = mg::value_and_grad([](auto a) { return sum(logsumexp(a, 1)); })(f);
  EXPECT_NEAR(vf, 2 * (1 + std::log(37.0f)), 1e-5);
  for (float g : gf) EXPECT_NEAR(g, 1.0f / 37, 1e-7);
}

TEST(StaticXtensorRegions, AValueAShapedOpReadsIsComputedOnce) {
  // Note [Shared region values]: z is read by logsumexp (not elementwise) and by y * z; one
  // region computes it, and y * z reads it (each of the two regions computed tanh before)
  auto loss = [](auto x, auto w, auto y) {
    const auto z = tanh(matmul(x, w));
    return sum(logsumexp(z, 1)) - sum(y * z);
  };
  using R = mg::detail::regionized_t<mg::detail::traced_t<decltype(loss), 3>>;
  static_assert(regions_computing<mg::tanh_op, R>() == 1);
  // a value with a constant (its own slot per occurrence) is computed where it is read
  auto scaled = [](auto x, auto w, auto y) {
    const auto z = tanh(matmul(x, w)) * 2.0;
    return sum(logsumexp(z, 1)) - sum(y * z);
  };
  using S = mg::detail::regionized_t<mg::detail::traced_t<decltype(scaled), 3>>;
  static_assert(regions_computing<mg::tanh_op, S>() == 2);
  const auto x = randn({3, 4}, 60), w = randn({4, 5}, 61);
  xt::xarray<double> y = xt::zeros<double>({3, 5});
  for (std::size_t i = 0; i < 3; ++i) y(i, (2 * i + 1) % 5) = 1;
  check_xt(loss, x, w, y);
  // a value that a shaped op and two regions read, and an axis sum of it besides
  check_xt(
      [](auto a, auto b) {
        const auto u = exp(a) + b;
        return sum(sum(u, 0) * 2.0) + sum(u * u * b) - sum(sin(u));
      },
      x, randn({4}, 62));
}

TEST(StaticXtensorRegions, VjpOfAnElementwiseFunctionIsOneRegion) {
  // the root itself is a region: value and vjp against closed forms, with broadcasting
  const auto x = randn({2, 3}, 34), y = randn({3}, 35), seed = randn({2, 3}, 36);
  auto f = [](auto a, auto c) { return exp(a) * c - a / (2.0 + c * c); };
  using engine = mg::detail::evaluator<mg::detail::array_family>;
  const xt::xarray<double> v = engine::value(f, x, y);
  const auto [gx, gy] = engine::vjp<0, 1>(f, seed, x, y);
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 3; ++j) {
      const double a = x(i, j), c = y(j), d = 2.0 + c * c;
      EXPECT_NEAR(v(i, j), std::exp(a) * c - a / d, 1e-14);
      EXPECT_NEAR(gx(i, j), seed(i, j) * (std::exp(a) * c - 1 / d), 1e-13);
    }
  for (std::size_t j = 0; j < 3; ++j) {
    double expected = 0;
    for (std::size_t i = 0; i < 2; ++i) {
      const double a = x(i, j), c = y(j), d = 2.0 + c * c;
      expected += seed(i, j) * (std::exp(a) + a * 2 * c / (d * d));
    }
    EXPECT_NEAR(gy(j), expected, 1e-13);
  }
}

TEST(StaticXtensorRegions, ViewsWithOffsetsAndTransposedOperands) {
  // arguments that are views into larger arrays (an element offset, row-major) or transposed
  // (column-major): read in place where the layout allows, never from the wrong elements
  const auto big = randn({5, 3}, 37), w = randn({4, 3}, 38);
  auto rows = xt::view(big, xt::range(1, 4), xt::all());  // rows 1..3, offset 3
  const xt::xarray<double> rows_copy = rows;
  auto fused = [](auto p) { return sum(sin(p) * p); };
  auto [v1, g1] = mg::value_and_grad(fused)(rows);
  auto [v2, g2] = mg::value_and_grad(fused)(rows_copy);
  EXPECT_DOUBLE_EQ(v1, v2);
  for (std::size_t i = 0; i < rows_copy.size(); ++i) EXPECT_DOUBLE_EQ(g1.flat(i), g2.flat(i));
  auto layer = [](auto p, auto q) { return sum(tanh(matmul(p, q)) * sum(q, 0)); };
  auto wt = xt::transpose(w);  // (3,4), column-major
  const xt::xarray<double> wt_copy = wt;
  auto [v3, g3] = mg::value_and_grad(layer)(rows, wt);
  auto [v4, g4] = mg::value_and_grad(layer)(rows_copy, wt_copy);
  EXPECT_NEAR(v3, v4, 1e-13);
  for (std::size_t i = 0; i < rows_copy.size(); ++i)
    EXPECT_NEAR(std::get<0>(g3).flat(i), std::get<0>(g4).flat(i), 1e-13);
  for (std::size_t i = 0; i < wt_copy.size(); ++i)
    EXPECT_NEAR(std::get<1>(g3).flat(i), std::get<1>(g4).flat(i), 1e-13);
  check_xt(layer, rows_copy, wt_copy);
}

// A matrix and a vector: gemv forward, an outer product and gemv backward (no gemm, no reshape).
TEST(StaticXtensor, MatrixVectorProducts) {
  const auto w = randn({5, 4}, 40), x = randn({4}, 41), v = randn({5}, 42);
  check_xt([](auto p, auto q) { return sum(tanh(matmul(p, q))); }, w, x);
  check_xt([](auto p, auto q) { return sum(tanh(matmul(q, p))); }, w, v);
  check_xt([](auto p, auto q, auto r) { return sum(sin(matmul(r, matmul(p, q)))); }, w, x, v);
  // closed forms: d/dW sum(W x) = 1 x^T, d/dx = W^T 1
  auto [gw, gx] = mg::grad([](auto p, auto q) { return sum(matmul(p, q)); })(w, x);
  for (std::size_t i = 0; i < 5; ++i)
    for (std::size_t j = 0; j < 4; ++j) EXPECT_DOUBLE_EQ(gw(i, j), x(j));
  for (std::size_t j = 0; j < 4; ++j) EXPECT_NEAR(gx(j), xt::sum(xt::col(w, j))(), 1e-12);
  // a transposed matrix (column-major: gemv's other op) and a strided vector (a BLAS increment)
  const auto big = randn({9}, 43);
  auto every_other = xt::view(big, xt::range(0, 9, 2));  // 5 elements, stride 2
  const xt::xarray<double> eo_copy = every_other;
  auto wt = xt::transpose(w);  // (4, 5)
  const xt::xarray<double> wt_copy = wt;
  auto f = [](auto p, auto q) { return sum(tanh(matmul(p, q)) * sum(q)); };
  auto [v1, g1] = mg::value_and_grad(f)(wt, every_other);
  auto [v2, g2] = mg::value_and_grad(f)(wt_copy, eo_copy);
  EXPECT_NEAR(v1, v2, 1e-13);
  for (std::size_t i = 0; i < wt_copy.size(); ++i)
    EXPECT_NEAR(std::get<0>(g1).flat(i), std::get<0>(g2).flat(i), 1e-13);
  for (std::size_t i = 0; i < eo_copy.size(); ++i)
    EXPECT_NEAR(std::get<1>(g1).flat(i), std::get<1>(g2).flat(i), 1e-13);
  check_xt(f, wt_copy, eo_copy);
  auto g = [](auto p, auto q) { return sum(exp(matmul(q, p))); };  // (4) x (4, 5)
  auto [v3, g3] = mg::value_and_grad(g)(wt, x);
  auto [v4, g4] = mg::value_and_grad(g)(wt_copy, x);
  EXPECT_NEAR(v3, v4, 1e-12);
  for (std::size_t i = 0; i < wt_copy.size(); ++i)
    EXPECT_NEAR(std::get<0>(g3).flat(i), std::get<0>(g4).flat(i), 1e-12);
  check_xt(g, wt_copy, x);
  // float: the sgemv binding, against the double result
  const xt::xtensor<float, 2> wf = w;
  const xt::xtensor<float, 1> xf = x;
  auto [vf, gf] =
      mg::value_and_grad([](auto p, auto q) { return sum(tanh(matmul(p, q))); })(wf, xf);
  auto [vd, gd] = mg::value_and_grad([](auto p, auto q) { return sum(tanh(matmul(p, q))); })(w, x);
  EXPECT_NEAR(vf, vd, 1e-5);
  for (std::size_t i = 0; i < w.size(); ++i)
    EXPECT_NEAR(std::get<0>(gf).flat(i), std::get<0>(gd).flat(i), 1e-5);
}

// mg::matmul and mg::outer applied to arrays directly, against loops.
TEST(StaticXtensor, MatrixVectorValues) {
  const auto w = randn({3, 4}, 44), x = randn({4}, 45), v = randn({3}, 46);
  const auto wx = mg::matmul(w, x);
  const auto vw = mg::matmul(v, w);
  const auto o = mg::outer(v, x);
  ASSERT_EQ(wx.shape(), (std::vector<std::size_t>{3}));
  ASSERT_EQ(vw.shape(), (std::vector<std::size_t>{4}));
  ASSERT_EQ(o.shape(), (std::vector<std::size_t>{3, 4}));
  for (std::size_t i = 0; i < 3; ++i) {
    double s = 0;
    for (std::size_t j = 0; j < 4; ++j) s += w(i, j) * x(j);
    EXPECT_NEAR(wx(i), s, 1e-13);
  }
  for (std::size_t j = 0; j < 4; ++j) {
    double s = 0;
    for (std::size_t i = 0; i < 3; ++i) s += v(i) * w(i, j);
    EXPECT_NEAR(vw(j), s, 1e-13);
  }
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 4; ++j) EXPECT_DOUBLE_EQ(o(i, j), v(i) * x(j));
  // an empty inner dimension gives zeros; an empty result is empty
  const xt::xarray<double> w0 = xt::zeros<double>({3, 0}), x0 = xt::zeros<double>({0});
  const auto z = mg::matmul(w0, x0);
  ASSERT_EQ(z.shape(), (std::vector<std::size_t>{3}));
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(z(i), 0.0);
  EXPECT_EQ(mg::matmul(xt::xarray<double>(xt::zeros<double>({0, 4})), x).size(), 0u);
  // mismatched lengths: the matmul error
  const std::string e = error_of([&] { mg::matmul(w, v); });
  EXPECT_NE(e.find("matmul"), std::string::npos) << e;
  EXPECT_NE(e.find("[3,4]"), std::string::npos) << e;
}

// Note [Handing over]: an argument asked for twice gets its whole gradient both times.
TEST(StaticXtensor, ArgumentAskedForTwice) {
  const auto w = randn({3, 4}, 47), x = randn({4}, 48);
  auto f = [](auto p, auto q) { return sum(tanh(matmul(p, q))); };
  const auto [g0, g1] = mg::grad<1, 1>(f)(w, x);
  const auto g = mg::grad<1>(f)(w, x);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_DOUBLE_EQ(g0(i), g(i));
    EXPECT_DOUBLE_EQ(g1(i), g(i));
  }
}

// Note [Pooled arrays]: a freed block is handed out again; blocks are aligned for any pack; an
// array freed on another thread than the one that allocated it is fine.
TEST(StaticXtensorPool, ReusesAlignedBlocksAcrossThreads) {
  using mg::detail::pool_allocator;
  pool_allocator<double> a;
  double* p = a.allocate(100);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(p) % 64, 0u);
  for (int i = 0; i < 100; ++i) p[i] = i;
  a.deallocate(p, 100);
  double* q = a.allocate(120);  // the same size class (1 KiB)
#if !defined(__SANITIZE_ADDRESS__)
  EXPECT_EQ(p, q);
#endif
  a.deallocate(q, 120);
  mg::detail::work_array<double> moved;
  std::thread t([&] {
    mg::detail::work_array<double> w = xt::ones<double>({1000});
    moved = std::move(w);
  });
  t.join();
  EXPECT_EQ(moved.size(), 1000u);
  EXPECT_EQ(xt::sum(moved)(), 1000.0);
  moved = mg::detail::work_array<double>();  // freed here, into this thread's lists
  // large blocks come from the tensors' caching allocator: counted there, handed out again
  pool_allocator<float> f;
  const std::size_t held = mg::cpu::memory_allocated();
  float* big = f.allocate(std::size_t{3} << 20);  // 12 MiB
  big[(std::size_t{3} << 20) - 1] = 1.0f;
#if !defined(__SANITIZE_ADDRESS__)
  EXPECT_GE(mg::cpu::memory_allocated(), held + (std::size_t{12} << 20));
#endif
  f.deallocate(big, std::size_t{3} << 20);
  EXPECT_EQ(mg::cpu::memory_allocated(), held);
  float* again = f.allocate(std::size_t{3} << 20);
#if !defined(__SANITIZE_ADDRESS__)
  EXPECT_EQ(again, big);
#endif
  f.deallocate(again, std::size_t{3} << 20);
  mg::cpu::empty_cache();
}

// Note [Cheap extents]: the working arrays' shape container, inline up to 4 and on the heap
// beyond; moves leave the source empty or intact, insert and erase keep order; a working array of
// rank 6 reshapes, reduces and broadcasts as xt::xarray does.
TEST(StaticXtensorPool, ExtentsInlineAndOnTheHeap) {
  using E = mg::detail::extents<std::size_t, 4>;
  E a{2, 3};
  EXPECT_EQ(a.size(), 2u);
  EXPECT_EQ(a.capacity(), 4u);
  a.resize(4);
  EXPECT_EQ((std::vector<std::size_t>(a.begin(), a.end())), (std::vector<std::size_t>{2, 3, 0, 0}));
  a.push_back(7);  // the fifth element moves all to the heap
  EXPECT_GE(a.capacity(), 5u);
  EXPECT_EQ(a.back(), 7u);
  E b = a;             // copy of a heap one
  E c = std::move(a);  // takes the block
  EXPECT_EQ(c, b);
  EXPECT_TRUE(a.empty());
  E d{5, 6, 7};
  E e = std::move(d);  // inline: copied
  EXPECT_EQ(e, (E{5, 6, 7}));
  e.insert(e.begin() + 1, {1, 2});
  EXPECT_EQ(e, (E{5, 1, 2, 6, 7}));
  e.erase(e.begin(), e.begin() + 2);
  EXPECT_EQ(e, (E{2, 6, 7}));
  e.insert(e.begin(), e.begin() + 1, e.end());  // from itself
  EXPECT_EQ(e, (E{6, 7, 2, 6, 7}));
  b = e;
  EXPECT_EQ(b, e);
  b = E{1};
  EXPECT_EQ(b.size(), 1u);
  EXPECT_THROW((void)b.at(1), std::out_of_range);

  xt::xarray<double> x = xt::arange<double>(720.0);
  x.reshape({2, 3, 4, 5, 3, 2});
  mg::detail::work_array<double> w = x;
  EXPECT_EQ(w.dimension(), 6u);
  EXPECT_EQ(w(1, 2, 3, 4, 2, 1), x(1, 2, 3, 4, 2, 1));
  EXPECT_EQ(w.strides()[0], 360);
  mg::detail::work_array<double> moved = std::move(w);
  EXPECT_EQ(xt::xarray<double>(xt::sum(moved, {0, 5})), xt::xarray<double>(xt::sum(x, {0, 5})));
  moved.resize({3, 1});
  xt::xarray<double> col = {1.0, 2.0, 3.0};
  col.reshape({3, 1});
  moved = xt::broadcast(col, std::vector<std::size_t>{3, 2});
  EXPECT_EQ(moved(2, 1), 3.0);
}

// Note [Wanted gradients]: gradients for some arguments only (the data operand of a matmul gets
// none computed) agree with the full gradient, on the general path and the fused one.
TEST(StaticXtensor, GradientsForSomeArgumentsOnly) {
  const auto x = randn({6, 5}, 49), w = randn({5, 3}, 50), b = randn({3}, 51);
  auto layer = [](auto p, auto q, auto r) { return sum(tanh(matmul(p, q) + r) * 0.5); };
  const auto [v, all] = mg::value_and_grad(layer)(x, w, b);
  const auto [v12, some] = mg::value_and_grad<1, 2>(layer)(x, w, b);
  EXPECT_DOUBLE_EQ(v, v12);
  for (std::size_t i = 0; i < w.size(); ++i)
    EXPECT_DOUBLE_EQ(std::get<0>(some).flat(i), std::get<1>(all).flat(i));
  for (std::size_t i = 0; i < b.size(); ++i)
    EXPECT_DOUBLE_EQ(std::get<1>(some).flat(i), std::get<2>(all).flat(i));
  const auto gx = mg::grad<0>(layer)(x, w, b);
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_DOUBLE_EQ(gx.flat(i), std::get<0>(all).flat(i));
  // a subexpression of data only (exp(x)) and a fused loop with data (y)
  auto f = [](auto p, auto q) { return sum(matmul(exp(p), q) * matmul(p, q)); };
  const auto [fp, fq] = mg::grad(f)(x, w);
  const auto only_q = mg::grad<1>(f)(x, w);
  for (std::size_t i = 0; i < w.size(); ++i) EXPECT_DOUBLE_EQ(only_q.flat(i), fq.flat(i));
  check_xt(f, x, w);
  const auto y = randn({40}, 52);
  auto nll = [](auto d, auto mu, auto s) {
    return sum(-0.5 * ((d - mu) / s) * ((d - mu) / s) - log(s));
  };
  const auto [gd, gmu, gs] = mg::grad(nll)(y, 0.3, 1.4);
  const auto [gmu2, gs2] = mg::grad<1, 2>(nll)(y, 0.3, 1.4);
  EXPECT_NEAR(gmu2, gmu, 1e-13);
  EXPECT_NEAR(gs2, gs, 1e-13);
  (void)gd;
}

// A two-layer MLP's softmax cross-entropy (examples/mlp_step.cpp, small): every argument's
// gradient against central differences, the parameters' alone against the full gradient.
TEST(StaticXtensor, MlpLoss) {
  auto loss = [](auto x, auto y, auto w1, auto b1, auto w2, auto b2) {
    const auto h = tanh(matmul(x, w1) + b1);
    const auto logits = matmul(h, w2) + b2;
    return (sum(logsumexp(logits, 1)) - sum(y * logits)) / 3.0;
  };
  xt::xarray<double> y = xt::zeros<double>({3, 4});
  y(0, 1) = y(1, 3) = y(2, 0) = 1.0;
  const auto x = randn({3, 5}, 53), w1 = randn({5, 6}, 54), b1 = randn({6}, 55),
             w2 = randn({6, 4}, 56), b2 = randn({4}, 57);
  check_xt(loss, x, y, w1, b1, w2, b2);
  const auto [v, all] = mg::value_and_grad(loss)(x, y, w1, b1, w2, b2);
  const auto [v2, some] = mg::value_and_grad<2, 5>(loss)(x, y, w1, b1, w2, b2);
  EXPECT_DOUBLE_EQ(v, v2);
  for (std::size_t i = 0; i < w1.size(); ++i)
    EXPECT_DOUBLE_EQ(std::get<0>(some).flat(i), std::get<2>(all).flat(i));
  for (std::size_t i = 0; i < b2.size(); ++i)
    EXPECT_DOUBLE_EQ(std::get<1>(some).flat(i), std::get<5>(all).flat(i));
}

// Note [Shaped boundaries]: sum(elementwise(arguments, shaped ops of arguments)) runs the shaped
// ops, then one fused loop, then their backward. Against the general path (`1.0 * f` is not a
// bare sum) and central differences.
template <class F, class... A>
void expect_boundaries_match_general(const F& f, const A&... a) {
  const auto [v, g] = mg::value_and_grad(f)(a...);
  const auto [vg, gg] = mg::value_and_grad([&f](auto... x) { return 1.0 * f(x...); })(a...);
  EXPECT_NEAR(v, vg, 1e-12 * (1 + std::fabs(vg)));
  [&]<std::size_t... k>(std::index_sequence<k...>) {
    (
        [&] {
          const auto& gk = std::get<k>(g);
          const auto& ggk = std::get<k>(gg);
          if constexpr (std::is_arithmetic_v<std::remove_cvref_t<decltype(gk)>>) {
            EXPECT_NEAR(gk, ggk, 1e-12 * (1 + std::fabs(ggk))) << "argument " << k;
          } else {
            ASSERT_EQ(gk.shape(), ggk.shape()) << "argument " << k;
            for (std::size_t i = 0; i < gk.size(); ++i)
              EXPECT_NEAR(gk.flat(i), ggk.flat(i), 1e-12 * (1 + std::fabs(ggk.flat(i))))
                  << "argument " << k << " element " << i;
          }
        }(),
        ...);
  }
  (std::index_sequence_for<A...>{});
  check_xt(f, a...);
}

TEST(StaticXtensorFusion, ShapedBoundaries) {
  const auto w = randn({5, 4}, 60), w2 = randn({5, 4}, 61), sq = randn({4, 4}, 62);
  const auto x = randn({4}, 63), v = randn({5}, 64), a = randn({3, 4}, 65), b = randn({4, 2}, 66);
  expect_boundaries_match_general([](auto p, auto q) { return sum(tanh(matmul(p, q))); }, w, x);
  // an argument the loop reads too, of the boundary's shape
  expect_boundaries_match_general(
      [](auto p, auto q, auto r) { return sum(tanh(matmul(p, q)) * r); }, w, x, v);
  // vector times matrix; an argument both in the loop and in the boundary
  expect_boundaries_match_general([](auto p, auto q) { return sum(sin(matmul(q, p)) * q); }, sq, x);
  // two boundaries; one boundary used three times; matrix times matrix
  expect_boundaries_match_general(
      [](auto p, auto o, auto q) { return sum(matmul(p, q) * matmul(o, q)); }, w, w2, x);
  expect_boundaries_match_general(
      [](auto p, auto q) {
        const auto y = matmul(p, q);
        return sum(exp(y) + y * y);
      },
      w, x);
  expect_boundaries_match_general([](auto p, auto q) { return sum(tanh(matmul(p, q))); }, a, b);
  // numbers, and a hoisted subexpression of them
  expect_boundaries_match_general(
      [](auto p, auto q, auto s) { return sum(tanh(matmul(p, q)) * s - log(s)); }, w, x, 1.7);
  // gradients for some arguments only, or one twice, agree with the full gradient
  auto f = [](auto p, auto q, auto r) { return sum(tanh(matmul(p, q)) * r); };
  using A3 = std::tuple<xt::xarray<double>, xt::xarray<double>, xt::xarray<double>>;
  static_assert(mg::detail::boundary_sum_v<mg::detail::traced_t<decltype(f), 3>, A3>);
  auto not_a_bare_sum = [](auto p, auto q, auto r) { return 1.0 * sum(tanh(matmul(p, q)) * r); };
  static_assert(!mg::detail::boundary_sum_v<mg::detail::traced_t<decltype(not_a_bare_sum), 3>, A3>);
  const auto [gw, gx, gv] = mg::grad(f)(w, x, v);
  const auto only_x = mg::grad<1>(f)(w, x, v);
  const auto only_w = mg::grad<0>(f)(w, x, v);
  const auto [x1, x2] = mg::grad<1, 1>(f)(w, x, v);
  for (std::size_t i = 0; i < x.size(); ++i) {
    EXPECT_DOUBLE_EQ(only_x(i), gx(i));
    EXPECT_DOUBLE_EQ(x1(i), gx(i));
    EXPECT_DOUBLE_EQ(x2(i), gx(i));
  }
  for (std::size_t i = 0; i < w.size(); ++i) EXPECT_DOUBLE_EQ(only_w.flat(i), gw.flat(i));
  // an argument f does not use has a zero gradient
  const auto [u0, u1, u2] =
      mg::grad([](auto p, auto q, auto) { return sum(tanh(matmul(p, q))); })(w, x, v);
  for (std::size_t i = 0; i < v.size(); ++i) EXPECT_EQ(u2(i), 0.0);
  (void)u0;
  (void)u1;
  // an array of another shape than the boundary's (broadcast): the general path, same numbers
  const xt::xarray<double> one{2.0};
  expect_boundaries_match_general(
      [](auto p, auto q, auto r) { return sum(tanh(matmul(p, q)) * r); }, w, x, one);
  // fixed-size arguments and results
  const xt::xtensor_fixed<double, xt::xshape<5, 4>> wf = w;
  const xt::xtensor_fixed<double, xt::xshape<4>> xf = x;
  const auto [vf, gf] =
      mg::value_and_grad([](auto p, auto q) { return sum(tanh(matmul(p, q))); })(wf, xf);
  const auto [vd, gd] =
      mg::value_and_grad([](auto p, auto q) { return sum(tanh(matmul(p, q))); })(w, x);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(std::get<0>(gf))>,
                               std::remove_cvref_t<decltype(wf)>>);
  EXPECT_DOUBLE_EQ(vf, vd);
  for (std::size_t i = 0; i < w.size(); ++i)
    EXPECT_DOUBLE_EQ(std::get<0>(gf).flat(i), std::get<0>(gd).flat(i));
}

// A column-major argument's gradient comes back row-major (an xt::xarray: the loops write in
// row-major order) with every element in its place, on the fused, general and boundary paths.
TEST(StaticXtensor, ColumnMajorArguments) {
  const xt::xarray<double> rows = randn({2, 3}, 70);
  const xt::xtensor<double, 2, xt::layout_type::column_major> cols = rows;
  const auto x = randn({3}, 71), w = randn({3}, 72);
  const auto same = [](const auto& f, const auto&... more) {
    return [&](const auto& p, const auto& q) {
      const auto gp = mg::grad<0>(f)(p, more...);
      const auto gq = mg::grad<0>(f)(q, more...);
      ASSERT_EQ(gp.shape(), gq.shape());
      for (std::size_t i = 0; i < 2; ++i)
        for (std::size_t j = 0; j < 3; ++j) EXPECT_DOUBLE_EQ(gp(i, j), gq(i, j)) << i << "," << j;
    };
  };
  same([](auto p) { return sum(sin(p) * p); })(cols, rows);
  same([](auto p, auto v) { return sum(p * v); }, w)(cols, rows);
  same([](auto p, auto v) { return sum(tanh(matmul(p, v))); }, x)(cols, rows);
  static_assert(std::is_same_v<decltype(mg::grad([](auto p) { return sum(p * p); })(cols)),
                               xt::xarray<double>>);
}

// Note [Periodic sources]: an array broadcast along the leading dimensions of the largest one (a
// bias row beside a batch) is read in place by the fused loops and the regions, and its gradient
// summed per column in the loop. Against the general path, central differences, and (second
// order) a central difference of the gradient along a direction.
TEST(StaticXtensorFusion, BiasRowsReadInPlace) {
  using m2 = xt::xtensor<double, 2>;
  using v1 = xt::xtensor<double, 1>;
  using m3 = xt::xtensor<double, 3>;
  const m2 x = randn({6, 5}, 80), w = randn({5, 9}, 81), y = randn({7, 16}, 82);
  const v1 b = randn({9}, 83), c = randn({16}, 84), small = randn({1}, 85);
  const m3 z = randn({3, 4, 16}, 86);
  const m2 rows = randn({4, 16}, 87);
  // a dense layer: one boundary, a bias of 9 (a scalar tail per row)
  const auto dense = [](auto p, auto q, auto r) { return sum(tanh(matmul(p, q) + r) * 0.5); };
  expect_boundaries_match_general(dense, x, w, b);
  // the plain fused loop, a hoisted number, a product and a scalar epilogue
  expect_boundaries_match_general([](auto p, auto r) { return sum(sin(p) * r + r * r); }, y, c);
  expect_boundaries_match_general([](auto p, auto r, auto s) { return sum(exp(p * r) / (s * s)); },
                                  y, c, 1.3);
  expect_boundaries_match_general([](auto p, auto r) { return prod(1.0 + 0.1 * p * r); }, y, c);
  expect_boundaries_match_general([](auto p, auto r) { return log(sum(exp(p - r))); }, y, c);
  // two periods (16 and 64) over a batch of 192: rows of 16, the longer period wrapping
  expect_boundaries_match_general([](auto p, auto r, auto q) { return sum(p * r * q + exp(q)); }, z,
                                  c, rows);
  // one element is no row: the general path, the same numbers
  expect_boundaries_match_general([](auto p, auto r) { return sum(sin(p) * r); }, y, small);
  // arrays whose type does not fix their rank
  expect_boundaries_match_general([](auto p, auto r) { return sum(exp(p * r)); },
                                  randn({6, 16}, 89), randn({16}, 79));
  // a float column sum over many rows is summed in double: one rounding from the exact sum
  xt::random::seed(78);
  const xt::xtensor<float, 2> many = xt::random::rand<float>({20000, 8}, 0.5f, 1.5f);
  const xt::xtensor<float, 1> ones = xt::ones<float>({8});
  const auto column = mg::grad<1>([](auto p, auto r) { return sum(p * r); })(many, ones);
  for (std::size_t j = 0; j < 8; ++j) {
    double exact = 0;
    for (std::size_t i = 0; i < 20000; ++i) exact += many(i, j);
    EXPECT_NEAR(column(j), exact, 1.5e-7 * exact) << j;  // summed in float: up to 4e-6
  }
  // second order: the Hessian-vector product against a central difference of the gradient
  const v1 u = randn({9}, 88);
  const double h = 1e-5;
  const auto g = mg::grad<2>(dense);
  const v1 hv = std::get<1>(mg::jvp(g, std::tuple{x, w, b}, std::tuple{0.0 * x, 0.0 * w, u}));
  const v1 fd = (g(x, w, v1(b + h * u)) - g(x, w, v1(b - h * u))) / (2 * h);
  for (std::size_t i = 0; i < b.size(); ++i) EXPECT_NEAR(hv(i), fd(i), 1e-7) << i;
}

// The regions of the general path read a bias row in place too, forward and backward.
TEST(StaticXtensorRegions, BiasRowsReadInPlace) {
  const xt::xtensor<double, 2> y = randn({7, 16}, 90);
  const xt::xtensor<double, 1> c = randn({16}, 91);
  const auto f = [](auto p, auto r) { return sum(exp(p * r + 1.0) * mean(p)); };
  const auto [v, g] = mg::value_and_grad(f)(y, c);
  const xt::xtensor<double, 2> e = xt::exp(y * c + 1.0);
  const double m = xt::mean(y)(), s = xt::sum(e)();
  EXPECT_NEAR(v, s * m, 1e-12 * std::fabs(s * m));
  const xt::xtensor<double, 1> dc = xt::sum(e * y, {0}) * m;
  const xt::xtensor<double, 2> dy = e * c * m + s / double(y.size());
  for (std::size_t j = 0; j < c.size(); ++j) EXPECT_NEAR(std::get<1>(g)(j), dc(j), 1e-10) << j;
  for (std::size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(std::get<0>(g).flat(i), dy.flat(i), 1e-10);
  check_xt(f, y, c);
}

// Note [Gradients written into the results]: on the general path, a product of two matrices
// writes the gradient of an operand that is a wanted argument with one use straight into the
// result the caller receives. Every other case (an argument used twice, a column-major result, a
// gradient asked for twice) copies as before; the values are the same either way.
TEST(StaticXtensorRegions, GradientsWrittenIntoTheResults) {
  using m2 = xt::xtensor<double, 2>;
  using v1 = xt::xtensor<double, 1>;
  using mg::detail::lent_results_count;
  const xt::xarray<double> xa = randn({6, 5}, 101), wa = randn({5, 4}, 102),
                           va = randn({4, 3}, 103), ba = randn({4}, 104);
  const m2 x = xa, w = wa, v = va;
  const v1 b = ba;
  // a two-layer network's loss; logsumexp along the rows keeps it on the general path
  const auto f = [](auto a, auto p, auto c, auto q) {
    return sum(logsumexp(matmul(tanh(matmul(a, p) + c), q), 1));
  };
  // closed form: H = tanh(x w + b), Z = H v, P = softmax of Z's rows; d/dv = H^T P,
  // D = (P v^T) (1 - H^2), d/db = column sums of D, d/dw = x^T D
  m2 H = xt::zeros<double>({6, 4}), P = xt::zeros<double>({6, 3}), D = xt::zeros<double>({6, 4});
  double value = 0;
  for (std::size_t i = 0; i < 6; ++i) {
    for (std::size_t j = 0; j < 4; ++j) {
      double z = b(j);
      for (std::size_t k = 0; k < 5; ++k) z += x(i, k) * w(k, j);
      H(i, j) = std::tanh(z);
    }
    double s = 0;
    for (std::size_t j = 0; j < 3; ++j) {
      double z = 0;
      for (std::size_t k = 0; k < 4; ++k) z += H(i, k) * v(k, j);
      P(i, j) = std::exp(z);
      s += P(i, j);
    }
    value += std::log(s);
    for (std::size_t j = 0; j < 3; ++j) P(i, j) /= s;
    for (std::size_t k = 0; k < 4; ++k) {
      double d = 0;
      for (std::size_t j = 0; j < 3; ++j) d += P(i, j) * v(k, j);
      D(i, k) = d * (1 - H(i, k) * H(i, k));
    }
  }
  m2 dw = xt::zeros<double>({5, 4}), dv = xt::zeros<double>({4, 3});
  v1 db = xt::zeros<double>({4});
  for (std::size_t i = 0; i < 6; ++i)
    for (std::size_t k = 0; k < 4; ++k) {
      db(k) += D(i, k);
      for (std::size_t r = 0; r < 5; ++r) dw(r, k) += x(i, r) * D(i, k);
      for (std::size_t j = 0; j < 3; ++j) dv(k, j) += H(i, k) * P(i, j);
    }
  const auto expect_closed_form = [&](const auto& gw, const auto& gb, const auto& gv, double tol) {
    for (std::size_t i = 0; i < dw.size(); ++i) EXPECT_NEAR(gw.flat(i), dw.flat(i), tol) << i;
    for (std::size_t i = 0; i < db.size(); ++i) EXPECT_NEAR(gb.flat(i), db.flat(i), tol) << i;
    for (std::size_t i = 0; i < dv.size(); ++i) EXPECT_NEAR(gv.flat(i), dv.flat(i), tol) << i;
  };
  std::size_t before = lent_results_count();
  const auto [val, g] = mg::value_and_grad<1, 2, 3>(f)(x, w, b, v);
  EXPECT_EQ(lent_results_count() - before, 2u);  // w and v
  EXPECT_NEAR(val, value, 1e-12 * std::fabs(value));
  expect_closed_form(std::get<0>(g), std::get<1>(g), std::get<2>(g), 1e-12);
  check_xt(f, xa, wa, ba, va);  // xt::xarray results, every argument: central differences

  // float, fixed shapes
  const xt::xtensor_fixed<float, xt::xshape<6, 5>> xf = xt::cast<float>(x);
  const xt::xtensor_fixed<float, xt::xshape<5, 4>> wf = xt::cast<float>(w);
  const xt::xtensor_fixed<float, xt::xshape<4, 3>> vf = xt::cast<float>(v);
  const xt::xtensor_fixed<float, xt::xshape<4>> bf = xt::cast<float>(b);
  before = lent_results_count();
  const auto [gwf, gbf, gvf] = mg::grad<1, 2, 3>(f)(xf, wf, bf, vf);
  EXPECT_EQ(lent_results_count() - before, 2u);
  expect_closed_form(gwf, gbf, gvf, 1e-5);

  // an argument used twice: its gradient is a sum, copied
  const auto twice = [](auto a, auto p) {
    return sum(logsumexp(matmul(a, p) + matmul(sin(a), p), 1));
  };
  before = lent_results_count();
  const m2 gp = mg::grad<1>(twice)(x, w);
  EXPECT_EQ(lent_results_count() - before, 0u);
  check_xt(twice, xa, wa);
  // one array passed as two arguments, each used once: each gradient into its own result
  const auto two = [](auto a, auto p, auto q) {
    return sum(logsumexp(matmul(a, p) * matmul(sin(a), q), 1));
  };
  const m2 sq = randn({5, 5}, 105);
  before = lent_results_count();
  const auto [gp1, gp2] = mg::grad<1, 2>(two)(x, sq, sq);
  EXPECT_EQ(lent_results_count() - before, 2u);
  const xt::xarray<double> sqa = sq;
  check_xt(two, xa, sqa, sqa);
  const auto [ga1, ga2, ga3] = mg::grad(two)(xa, sqa, sqa);
  for (std::size_t i = 0; i < sq.size(); ++i) {
    EXPECT_DOUBLE_EQ(gp1.flat(i), ga2.flat(i));
    EXPECT_DOUBLE_EQ(gp2.flat(i), ga3.flat(i));
  }
  (void)gp;
  (void)ga1;
  // a column-major argument and result: copied, the same values
  const xt::xtensor<double, 2, xt::layout_type::column_major> wc = w;
  const auto [gwc, gbc, gvc] = mg::grad<1, 2, 3>(f)(x, wc, b, v);
  expect_closed_form(gwc, gbc, gvc, 1e-12);
  // a gradient asked for twice: neither is lent
  before = lent_results_count();
  const auto [w1, w2] = mg::grad<1, 1>(f)(x, w, b, v);
  EXPECT_EQ(lent_results_count() - before, 0u);
  for (std::size_t i = 0; i < dw.size(); ++i) {
    EXPECT_NEAR(w1.flat(i), dw.flat(i), 1e-12);
    EXPECT_DOUBLE_EQ(w1.flat(i), w2.flat(i));
  }
  // second order: the Hessian-vector product through d/dv against a central difference of it
  const m2 u = randn({4, 3}, 106);
  const double h = 1e-5;
  const auto gv = mg::grad<3>(f);
  const m2 hv =
      std::get<1>(mg::jvp(gv, std::tuple{x, w, b, v}, std::tuple{0.0 * x, 0.0 * w, 0.0 * b, u}));
  const m2 fd = (gv(x, w, b, m2(v + h * u)) - gv(x, w, b, m2(v - h * u))) / (2 * h);
  for (std::size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(hv.flat(i), fd.flat(i), 1e-7) << i;
}

// Note [Gradients written in place]: a product of two matrices at a shaped boundary writes its
// operands' gradients straight into the results where it can; wherever it cannot (a result also
// written by the loop, an operand used twice, a column-major result, a gradient asked for twice)
// the gradients are the same.
TEST(StaticXtensorFusion, BoundaryGradientsWrittenInPlace) {
  using m2 = xt::xtensor<double, 2>;
  const m2 p = randn({5, 3}, 95), q = randn({3, 4}, 96), sq = randn({3, 3}, 97);
  const auto f = [](auto a, auto b) { return sum(tanh(matmul(a, b))); };
  expect_boundaries_match_general(f, p, q);
  const auto [gp, gq] = mg::grad(f)(p, q);
  const m2 only_q = mg::grad<1>(f)(p, q);
  const auto [q1, q2] = mg::grad<1, 1>(f)(p, q);
  for (std::size_t i = 0; i < q.size(); ++i) {
    EXPECT_DOUBLE_EQ(only_q.flat(i), gq.flat(i));
    EXPECT_DOUBLE_EQ(q1.flat(i), gq.flat(i));
    EXPECT_DOUBLE_EQ(q2.flat(i), gq.flat(i));
  }
  // d/dz tanh(z) summed: G B^T and A^T G with G = 1 - tanh(A B)^2
  m2 G = xt::zeros<double>({5, 4}), dp = xt::zeros<double>({5, 3}), dq = xt::zeros<double>({3, 4});
  for (std::size_t i = 0; i < 5; ++i)
    for (std::size_t j = 0; j < 4; ++j) {
      double z = 0;
      for (std::size_t k = 0; k < 3; ++k) z += p(i, k) * q(k, j);
      G(i, j) = 1 - std::tanh(z) * std::tanh(z);
    }
  for (std::size_t i = 0; i < 5; ++i)
    for (std::size_t j = 0; j < 4; ++j)
      for (std::size_t k = 0; k < 3; ++k) {
        dp(i, k) += G(i, j) * q(k, j);
        dq(k, j) += p(i, k) * G(i, j);
      }
  for (std::size_t i = 0; i < p.size(); ++i) EXPECT_NEAR(gp.flat(i), dp.flat(i), 1e-12);
  for (std::size_t i = 0; i < q.size(); ++i) EXPECT_NEAR(gq.flat(i), dq.flat(i), 1e-12);
  // the operand read by the loop too; an operand used twice; column-major arguments; float
  expect_boundaries_match_general([](auto a, auto b) { return sum(tanh(matmul(a, b)) * a); }, sq,
                                  sq);
  expect_boundaries_match_general(
      [](auto a, auto b) { return sum(sin(matmul(a, a)) * matmul(b, a)); }, sq, m2(sq + 0.5));
  const xt::xtensor<double, 2, xt::layout_type::column_major> pc = p;
  const auto [gpc, gqc] = mg::grad(f)(pc, q);
  for (std::size_t i = 0; i < 5; ++i)
    for (std::size_t k = 0; k < 3; ++k) EXPECT_NEAR(gpc(i, k), dp(i, k), 1e-12);
  for (std::size_t i = 0; i < q.size(); ++i) EXPECT_NEAR(gqc.flat(i), dq.flat(i), 1e-12);
  const xt::xtensor<float, 2> pf = xt::cast<float>(p), qf = xt::cast<float>(q);
  const auto [gpf, gqf] = mg::grad(f)(pf, qf);
  for (std::size_t i = 0; i < p.size(); ++i) EXPECT_NEAR(gpf.flat(i), dp.flat(i), 1e-5);
  for (std::size_t i = 0; i < q.size(); ++i) EXPECT_NEAR(gqf.flat(i), dq.flat(i), 1e-5);
  // a matrix and a vector, either way round: G x^T and A^T G, B G and x G^T (G = 1 - tanh^2)
  using v1 = xt::xtensor<double, 1>;
  const v1 x3 = randn({3}, 98), x5 = randn({5}, 99);
  const auto [mp, mx] = mg::grad(f)(p, x3);
  const auto [vx, vq] = mg::grad(f)(x5, p);
  for (std::size_t i = 0; i < 5; ++i) {
    double z = 0;
    for (std::size_t k = 0; k < 3; ++k) z += p(i, k) * x3(k);
    const double d = 1 - std::tanh(z) * std::tanh(z);
    for (std::size_t k = 0; k < 3; ++k) EXPECT_NEAR(mp(i, k), d * x3(k), 1e-12);
  }
  for (std::size_t k = 0; k < 3; ++k) {
    double dx = 0, z = 0;
    for (std::size_t i = 0; i < 5; ++i) {
      double zi = 0;
      for (std::size_t r = 0; r < 3; ++r) zi += p(i, r) * x3(r);
      dx += p(i, k) * (1 - std::tanh(zi) * std::tanh(zi));
      z += x5(i) * p(i, k);
    }
    EXPECT_NEAR(mx(k), dx, 1e-12);
    const double d = 1 - std::tanh(z) * std::tanh(z);
    for (std::size_t i = 0; i < 5; ++i) EXPECT_NEAR(vq(i, k), x5(i) * d, 1e-12);
  }
  for (std::size_t i = 0; i < 5; ++i) {
    double dx = 0;
    for (std::size_t k = 0; k < 3; ++k) {
      double z = 0;
      for (std::size_t r = 0; r < 5; ++r) z += x5(r) * p(r, k);
      dx += p(i, k) * (1 - std::tanh(z) * std::tanh(z));
    }
    EXPECT_NEAR(vx(i), dx, 1e-12);
  }
  expect_boundaries_match_general(f, p, x3);
  expect_boundaries_match_general(f, x5, p);
  // x as a column or a row (a gemv, not a gemm, in both directions), operands column-major too
  m2 x3c = m2::from_shape({3, 1}), x5r = m2::from_shape({1, 5});
  std::copy(x3.begin(), x3.end(), x3c.begin());
  std::copy(x5.begin(), x5.end(), x5r.begin());
  const auto [cv, cg] = mg::value_and_grad(f)(p, x3c);
  EXPECT_NEAR(cv, mg::value_and_grad(f)(p, x3).first, 1e-13);
  const auto [rp, rx] = mg::grad(f)(pc, x3c);
  const auto [rx5, rq] = mg::grad(f)(x5r, p);
  const xt::xtensor<double, 2, xt::layout_type::column_major> x5rc = x5r;
  const auto [rx5c, rqc] = mg::grad(f)(x5rc, pc);
  for (std::size_t i = 0; i < p.size(); ++i) {
    EXPECT_NEAR(std::get<0>(cg).flat(i), mp.flat(i), 1e-13);
    EXPECT_NEAR(rp(i / 3, i % 3), mp.flat(i), 1e-13);
    EXPECT_NEAR(rq.flat(i), vq.flat(i), 1e-13);
    EXPECT_NEAR(rqc(i / 3, i % 3), vq.flat(i), 1e-13);
  }
  for (std::size_t i = 0; i < 3; ++i) EXPECT_NEAR(std::get<1>(cg).flat(i), mx(i), 1e-13);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_NEAR(rx.flat(i), mx(i), 1e-13);
  for (std::size_t i = 0; i < 5; ++i) EXPECT_NEAR(rx5.flat(i), vx(i), 1e-13);
  for (std::size_t i = 0; i < 5; ++i) EXPECT_NEAR(rx5c.flat(i), vx(i), 1e-13);
  // a column times a row: an outer product; d/da_i = sum_j G_ij b_j, d/db_j = sum_i a_i G_ij
  const m2 a51 = randn({5, 1}, 100), b13 = randn({1, 3}, 101);
  const auto [oa, ob] = mg::grad(f)(a51, b13);
  for (std::size_t i = 0; i < 5; ++i) {
    double s = 0;
    for (std::size_t j = 0; j < 3; ++j) {
      const double u = std::tanh(a51(i, 0) * b13(0, j));
      s += (1 - u * u) * b13(0, j);
    }
    EXPECT_NEAR(oa(i, 0), s, 1e-13);
  }
  for (std::size_t j = 0; j < 3; ++j) {
    double s = 0;
    for (std::size_t i = 0; i < 5; ++i) {
      const double u = std::tanh(a51(i, 0) * b13(0, j));
      s += a51(i, 0) * (1 - u * u);
    }
    EXPECT_NEAR(ob(0, j), s, 1e-13);
  }
  expect_boundaries_match_general(f, p, x3c);
  expect_boundaries_match_general(f, x5r, p);
  expect_boundaries_match_general(f, a51, b13);
  const xt::xtensor_fixed<float, xt::xshape<5, 3>> pff = pf;
  const xt::xtensor_fixed<float, xt::xshape<3>> x3f = xt::cast<float>(x3);
  const auto [mpf, mxf] = mg::grad(f)(pff, x3f);
  for (std::size_t i = 0; i < mp.size(); ++i) EXPECT_NEAR(mpf.flat(i), mp.flat(i), 1e-5);
  for (std::size_t i = 0; i < mx.size(); ++i) EXPECT_NEAR(mxf(i), mx(i), 1e-5);
}
