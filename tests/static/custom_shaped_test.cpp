// Static custom ops with shapes (Note [Ops on arrays only] in <metagrad/concepts.hpp>): ops a
// user writes with xtensor's functions, a reduction (prod) and a matrix-vector product, get
// their arguments as xtensor arrays (the output and its gradient as a number for a reduction,
// as an array otherwise), and their gradients are checked against central differences.
#include <array>
#include <cmath>
#include <cstdint>

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

// The same product, declaring what each gradient reads (Note [Wanted gradients] in
// static/sweep.hpp): dA reads x, dx reads A. A value that no wanted gradient reads arrives as a
// stand-in with its shape only, and gradient_reading skips the gradients that read it; the
// counters say which ran.
int computed_da = 0, computed_dx = 0;
struct counted_matvec_op {
  static constexpr const char* name = "counted_matvec";
  static constexpr bool elementwise = false;
  static constexpr std::size_t arity = 2;
  static constexpr std::array<std::uint32_t, 2> gradient_reads{0b10, 0b01};
  static auto forward(const auto& a, const auto& x) { return matvec_op::forward(a, x); }
  static auto backward(const auto& a, const auto& x, const auto&, const auto& g) {
    auto da = mg::detail::gradient_reading(x, [&] {
      ++computed_da;
      return xt::xarray<double>(xt::view(g, xt::all(), xt::newaxis()) *
                                xt::view(x, xt::newaxis(), xt::all()));
    });
    auto dx = mg::detail::gradient_reading(a, [&] {
      ++computed_dx;
      return xt::xarray<double>(xt::sum(a * xt::view(g, xt::all(), xt::newaxis()), {0}));
    });
    return mg::grads{da, dx};
  }
};
}  // namespace

TEST(StaticCustomShaped, OnlyWantedGradientsAreComputed) {
  const xt::xtensor<double, 2> a = {{0.5, -1.0, 2.0}, {1.5, 0.25, -0.75}};
  const xt::xtensor<double, 1> x = {0.3, -0.8, 1.1};
  auto f = [](auto p, auto q) { return sum(sin(mg::apply<counted_matvec_op>(p, q))); };
  auto g = [](auto p, auto q) { return sum(sin(mg::apply<matvec_op>(p, q))); };
  const auto [ga, gx] = mg::grad(g)(a, x);
  computed_da = computed_dx = 0;
  const auto only_x = mg::grad<1>(f)(a, x);
  EXPECT_EQ(computed_da, 0);
  EXPECT_EQ(computed_dx, 1);
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(only_x(i), gx(i), 1e-15);
  computed_da = computed_dx = 0;
  const auto only_a = mg::grad<0>(f)(a, x);
  EXPECT_EQ(computed_da, 1);
  EXPECT_EQ(computed_dx, 0);
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(only_a.flat(i), ga.flat(i), 1e-15);
  computed_da = computed_dx = 0;
  mg_test::check_xt(f, xt::xarray<double>(a), xt::xarray<double>(x));
  EXPECT_GE(computed_da, 1);
  EXPECT_GE(computed_dx, 1);
}

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

namespace {
// An elementwise op whose body calls max unqualified after `using std::max;`
// (docs/adding-an-op.md): on numbers that is std::max, on the SIMD packs of the fused loop the
// packs' own.
struct floor_at_quarter {
  static constexpr const char* name = "floor_at_quarter";
  static auto forward(const auto& x) {
    using std::max;
    return max(x, 0.25);
  }
  // d/dx max(x, 1/4) = 1 where x > 1/4, else 0
  static auto backward(const auto& x, const auto&, const auto& g) {
    using mg::detail::select;
    return select(x > 0.25, g, 0.0 * g);
  }
};
}  // namespace

TEST(StaticCustomShaped, AnOpBodyCallingMax) {
  // 9 elements: a full pack of 4 doubles (AVX2) twice and a tail, either side of 1/4
  const xt::xtensor<double, 1> x = {-1.0, 0.1, 0.3, 2.0, -0.2, 0.26, 0.24, 1.5, -3.0};
  const auto f = [](auto a) { return mg::sum(mg::apply<floor_at_quarter>(a) * a); };
  const auto [v, g] = mg::value_and_grad(f)(x);
  double want = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    want += std::max(x(i), 0.25) * x(i);
    // d/dx_i max(x_i, 1/4) x_i: 2 x_i above 1/4, 1/4 below
    EXPECT_DOUBLE_EQ(g(i), x(i) > 0.25 ? 2 * x(i) : 0.25) << i;
  }
  EXPECT_DOUBLE_EQ(v, want);
  // on numbers: std::max, and its gradient through the static engine
  EXPECT_DOUBLE_EQ(mg::apply<floor_at_quarter>(0.1), 0.25);
  EXPECT_DOUBLE_EQ(mg::grad([](auto a) { return mg::apply<floor_at_quarter>(a) * a; })(0.5), 1.0);
}
