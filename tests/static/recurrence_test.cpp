// Note [Planning on the DAG]: unrolled recurrences whose expression tree doubles with every step,
// on numbers and on arrays (the fused path, and a region of the general path).
//
// This file is compiled without debug information (tests/static/CMakeLists.txt): GCC spells
// every expression type out in full in DWARF names, so a -g object grows like the tree, not the
// DAG (docs/performance.md, "Debug builds").
#include <tuple>

#include <gtest/gtest.h>
#include <xtensor/xarray.hpp>

#include <metagrad/xtensor.hpp>

#include "support/harness.hpp"
#include "support/harness_xtensor.hpp"

namespace {
// t_{k+1} = sin(t_k) * x + t_k: t_k appears twice in t_{k+1}
template <int K>
auto unrolled(const auto& t, const auto& x) {
  if constexpr (K == 0) {
    return t;
  } else {
    using mg::sin;
    return unrolled<K - 1>(sin(t) * x + t, x);
  }
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
