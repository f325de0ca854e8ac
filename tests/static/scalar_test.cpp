// Static engine on float/double beyond the op table (tests/ops): DAG sharing, grad of grad,
// custom ops, and the argument/return conventions of grad and value_and_grad.
#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include <metagrad/static.hpp>

#include "support/custom_ops.hpp"
#include "support/harness.hpp"

using mg_test::check_static;

TEST(StaticScalar, SumAndMatmulOfScalars) {
  check_static([](auto a, auto b) { return mg::sum(a * b) + mg::matmul(a, b); }, 0.7, -1.3);
}
TEST(StaticScalar, MixedWithConstants) {
  check_static([](auto x, auto y) { return (sin(x) * y + exp(x * y)) / (1 + x * x); }, 2.0, 3.0);
  check_static([](auto x) { return 2.0 * x - 3 + x / 4.0 - 1 / x; }, 1.3);
}

TEST(StaticScalar, SharedSubexpressionIsOneSlot) {
  // t = x*y appears twice and sin(t) once: three distinct nodes, not five
  auto f = [](auto x, auto y) {
    auto t = x * y;
    return t + sin(t);
  };
  using E = mg::detail::traced_t<decltype(f), 2>;
  static_assert(mg::detail::tree_info<E>::count == 8);  // occurrences in the tree
  static_assert(mg::detail::plan_v<E>.nslots == 5);     // x, y, t, sin(t), t + sin(t)
  check_static(f, 0.4, 1.1);
}

TEST(StaticScalar, AStatefulSubtreeIsOneSlotPerOccurrence) {
  // u = x * 2 holds a constant: its two occurrences are two slots; the stateless sin(x) inside
  // both is one
  auto f = [](auto x) {
    auto u = sin(x) * 2.0;
    return u * u + exp(u);
  };
  using E = mg::detail::traced_t<decltype(f), 1>;
  // x, sin(x), then per occurrence of u: 2.0 and u; then u*u, exp(u) and the sum
  static_assert(mg::detail::plan_v<E>.nslots == 2 + 3 * 2 + 1 + 1 + 1);
  check_static(f, 0.4);
}

// Note [Constant origins]: named values holding literals and a captured number, each reused
// at every level, so their tree repeats them exponentially often. A copy keeps the constant's
// origin, so the plan has one slot per distinct subexpression, and the object one value per origin.
TEST(StaticScalar, ReusedValuesHoldingConstantsArePlannedOnce) {
  const double k = 0.3;
  auto f = [k](auto x, auto y) {
    const auto a = 1 / (1 + x * x);
    const auto b = a * y + 2 * a - k;
    const auto c = b * b + a * b;
    const auto d = c * c + b * c;
    return d * d + 3 * c;
  };
  using E = mg::detail::traced_t<decltype(f), 2>;
  static_assert(mg::detail::tree_info<E>::table);
  static_assert(mg::detail::tree_info<E>::count > 200);
  // one slot per distinct subexpression, of some 200 occurrences
  static_assert(mg::detail::plan_v<E>.nslots ==
                mg::detail::list_size<mg::detail::distinct_t<E>>::value);
  static_assert(sizeof(E) <= 64);  // the five constants and a flag, not a copy per use
  check_static(f, 0.4, 1.1);
  check_static(f, -0.7, 0.2);
}

// A helper called twice with different numbers makes two constants of one type. Where the
// result repeats them little, each occurrence keeps its own slot, as always.
TEST(StaticScalar, AHelperCalledWithDifferentNumbersStaysExact) {
  const auto shift = [](auto x, double c) { return x * x - c; };
  auto f = [&](auto x) { return shift(x, 1.0) * sin(x) + shift(x, 2.0) / 3; };
  check_static(f, 0.8);
  EXPECT_DOUBLE_EQ(mg::grad(f)(0.8), 2 * 0.8 * sin(0.8) + (0.64 - 1) * cos(0.8) + 2 * 0.8 / 3);
}

// Inside a subexpression reused exponentially often, those two constants would share one slot:
// refused with an mg::error naming both fixes. The twin passes the numbers as arguments.
TEST(StaticScalar, AHelperWithDifferentNumbersInAReusedValueIsAnError) {
  const auto shift = [](auto x, auto c) { return x * x - c; };
  const auto deep = [](auto a, auto b) {
    const auto g = a * b;
    const auto c = g * g + a;
    const auto d = c * c + g;
    const auto e = d * d + c;
    return e * e + d;
  };
  auto f = [&](auto x) { return deep(shift(x, 1.0), shift(x, 2.0)); };
  static_assert(mg::detail::tree_info<mg::detail::traced_t<decltype(f), 1>>::table);
  try {
    (void)mg::grad(f)(0.3);
    ADD_FAILURE() << "no error";
  } catch (const mg::error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("took two different values"), std::string::npos) << what;
    EXPECT_NE(what.find("pass those numbers as arguments"), std::string::npos) << what;
  }
  // the twin against a central difference of f's value on numbers (second order through such a
  // table is checked above)
  auto twin = [&](auto x, auto c1, auto c2) { return deep(shift(x, c1), shift(x, c2)); };
  const auto by_hand = [&](double x) { return deep(x * x - 1.0, x * x - 2.0); };
  const auto [v, dx] = mg::value_and_grad<0>(twin)(0.3, 1.0, 2.0);
  EXPECT_DOUBLE_EQ(v, by_hand(0.3));
  EXPECT_NEAR(dx, (by_hand(0.3 + 1e-6) - by_hand(0.3 - 1e-6)) / 2e-6, 1e-6 * std::abs(dx));
}

TEST(StaticScalar, ConstantsAreNotMergedAcrossOccurrences) {
  // pow(x, 2) and pow(x, 3) have the same type; their exponents must stay distinct.
  auto f = [](auto x) { return pow(x, 2) + pow(x, 3); };
  EXPECT_DOUBLE_EQ(mg::grad(f)(1.5), 2 * 1.5 + 3 * 1.5 * 1.5);
  check_static(f, 1.5);
}

TEST(StaticScalar, GradConventions) {
  auto f = [](auto x, auto y) { return x * x * y; };
  auto [dx, dy] = mg::grad(f)(2.0, 3.0);
  EXPECT_DOUBLE_EQ(dx, 12.0);
  EXPECT_DOUBLE_EQ(dy, 4.0);
  const double d1 = mg::grad<1>(f)(2.0, 3.0);
  EXPECT_DOUBLE_EQ(d1, 4.0);
  auto [v, g] = mg::value_and_grad<0, 1>(f)(2.0, 3.0);
  EXPECT_DOUBLE_EQ(v, 12.0);
  EXPECT_DOUBLE_EQ(std::get<0>(g), 12.0);
  EXPECT_DOUBLE_EQ(std::get<1>(g), 4.0);
  // an argument the function ignores has a zero gradient
  EXPECT_DOUBLE_EQ(mg::grad<1>([](auto x, auto) { return x; })(2.0, 3.0), 0.0);
  // identity and constant functions
  EXPECT_DOUBLE_EQ(mg::grad([](auto x) { return x; })(2.0), 1.0);
}

TEST(StaticScalar, FloatArgumentsGiveFloatGradients) {
  auto f = [](auto x) { return sin(x) * x; };
  auto g = mg::grad(f)(0.5f);
  static_assert(std::is_same_v<decltype(g), float>);
  EXPECT_NEAR(g, std::cos(0.5) * 0.5 + std::sin(0.5), 1e-6);
}

TEST(StaticScalar, GradOfGradOfGrad) {
  auto f = [](auto x) { return exp(2 * x) * sin(x); };
  const double x = 0.3;
  // f''' = e^{2x} (2 sin x + 11 cos x)
  const double exact = std::exp(2 * x) * (2 * std::sin(x) + 11 * std::cos(x));
  EXPECT_NEAR(mg::grad(mg::grad(mg::grad(f)))(x), exact, 1e-12 * std::fabs(exact) + 1e-12);
  EXPECT_NEAR(mg::hessian<0>(f)(x), std::exp(2 * x) * (3 * std::sin(x) + 4 * std::cos(x)), 1e-12);
}

using mg_test::hypot2;
using mg_test::softplus;

TEST(StaticScalar, CustomOps) {
  check_static([](auto x) { return mg::apply<softplus>(x * x); }, 0.5);
  check_static([](auto a, auto b) { return mg::apply<hypot2>(a, b) * a; }, 0.6, -1.7);
}
