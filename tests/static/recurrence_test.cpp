// Note [Planning on the DAG]: unrolled recurrences whose expression tree doubles with every step,
// on numbers and on arrays (the fused path, and a region of the general path).
//
// This file is compiled without debug information (tests/static/CMakeLists.txt): GCC spells
// every expression type out in full in DWARF names, so a -g object grows like the tree, not the
// DAG (docs/performance.md, "Debug builds").
#include <cmath>
#include <tuple>
#include <utility>

#include <gtest/gtest.h>
#include <xtensor/xarray.hpp>

#include <metagrad/xtensor.hpp>

#include "support/harness.hpp"
#include "support/harness_xtensor.hpp"

namespace {
// t_{k+1} = sin(t_k) * x + t_k, K steps from t: t_k appears twice in t_{k+1}
template <int K>
auto unrolled(const auto& t, const auto& x) {
  return mg::repeat<K>([&](const auto& s) { return sin(s) * x + s; }, t);
}
}  // namespace

TEST(StaticRecurrence, NumbersArePlannedOnTheDag) {
  auto f = [](auto t, auto x) { return unrolled<16>(t, x); };
  using E = mg::detail::traced_t<decltype(f), 2>;
  static_assert(mg::detail::tree_info<E>::count > 65536);     // 2^16 occurrences of t_0 ...
  static_assert(mg::detail::plan_v<E>.nslots == 2 + 3 * 16);  // ... and 50 slots
  const auto [dt, dx] = mg::grad(f)(0.3, 0.1);  // first order (second order: below, 6 steps)
  const auto at = std::tuple{0.3, 0.1};         // where both derivatives are of order 1 to 10
  EXPECT_TRUE(mg_test::near_rel(dt, mg_test::central_difference<0>(f, at), 1e-6));
  EXPECT_TRUE(mg_test::near_rel(dx, mg_test::central_difference<1>(f, at), 1e-6));
  mg_test::check_static([](auto t, auto x) { return unrolled<6>(t, x); }, 0.3, 0.7);
  auto g = [](auto t, auto x) { return unrolled<4>(t, x) * 0.5; };  // a stateful root
  mg_test::check_static(g, 0.3, 0.7);
}

TEST(StaticRecurrence, ArraysArePlannedOnTheDag) {
  const xt::xarray<double> t = {0.3, 0.5, 0.2, -0.4}, x = {0.1, 0.05, -0.1, 0.2};
  mg_test::check_xt([](auto a, auto b) { return sum(unrolled<12>(a, b)); }, t, x);
  mg_test::check_xt([](auto a, auto b) { return sum(sum(unrolled<12>(a, b), 0) * 0.5); }, t, x);
}

// mg::repeat with a pair as its state: N symplectic Euler steps of the pendulum q'' = -k sin(q)
// with step h (p -= h k sin(q), then q += h p). The energy after 8 steps, differentiated w.r.t.
// (q0, p0, k, h) against central differences; first and second order after 2 steps (second order
// of long recurrences is slow to compile: docs/static.md); the same function on numbers, where
// the state keeps its type and repeat runs a plain loop. (The state holds no literal constant: a
// subexpression holding one is planned per occurrence; docs/static.md, "Recurrences".)
template <int N>
auto energy_after(auto q0, auto p0, auto k, auto h) {
  const auto step = [&](const auto& s) {
    const auto p = s.second - h * k * sin(s.first);
    return std::pair{s.first + h * p, p};
  };
  const auto [q, p] = mg::repeat<N>(step, std::pair{q0, p0});
  return 0.5 * p * p + k * (1 - cos(q));
}

TEST(StaticRecurrence, RepeatCarriesAPairOfStates) {
  const auto f = [](auto... a) { return energy_after<8>(a...); };
  const auto at = std::tuple{0.8, 0.2, 1.3, 0.1};
  const auto [dq, dp, dk, dh] = mg::grad<0, 1, 2, 3>(f)(0.8, 0.2, 1.3, 0.1);
  EXPECT_TRUE(mg_test::near_rel(dq, mg_test::central_difference<0>(f, at), 1e-7));
  EXPECT_TRUE(mg_test::near_rel(dp, mg_test::central_difference<1>(f, at), 1e-7));
  EXPECT_TRUE(mg_test::near_rel(dk, mg_test::central_difference<2>(f, at), 1e-7));
  EXPECT_TRUE(mg_test::near_rel(dh, mg_test::central_difference<3>(f, at), 1e-7));
  mg_test::check_static([](auto... a) { return energy_after<2>(a...); }, 0.8, 0.2, 1.3, 0.1);
  double q = 0.8, p = 0.2;
  for (int i = 0; i < 8; ++i) {
    p -= 0.1 * 1.3 * std::sin(q);
    q += 0.1 * p;
  }
  EXPECT_NEAR(energy_after<8>(0.8, 0.2, 1.3, 0.1), 0.5 * p * p + 1.3 * (1 - std::cos(q)), 1e-15);
}
