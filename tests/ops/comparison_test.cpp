// Comparisons and where through the one harness: comparisons have no gradient, so they are
// checked through where, which selects by them.
#include "support/expect_ad.hpp"

using mg_test::expect_ad;

const mg::shape_t s23{2, 3}, s3{3};

TEST(Comparison, WhereGt) {
  expect_ad([](auto a, auto b) { return mg::where(a > b, a * b, a - b); }, {.shapes = {s23, s3}});
}
TEST(Comparison, WhereLtNumber) { expect_ad([](auto x) { return mg::where(x < 0.2, x * x, 1 - x); }); }
TEST(Comparison, WhereGeLe) {
  expect_ad([](auto a, auto b) { return mg::where(a >= b, a, b) + mg::where(a <= 0, b, a); });
}
TEST(Comparison, WhereEqNe) {
  expect_ad([](auto a, auto b) { return mg::where(a == b, b, a * a) + mg::where(a != b, a, b); });
}
