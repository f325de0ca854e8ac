// The shape and linear-algebra families through the one harness (arrays only: a reshaped number
// is not meaningful), then their semantics on known values.
#include "support/expect_ad.hpp"

using mg::tensor;
using mg_test::expect_ad;

const mg_test::ad_options arrays{.scalar = false};

TEST(Shape, Expand) {
  expect_ad([](auto x) { return mg::expand(x, {4, 2, 3}) * 2; }, {.shapes = {{2, 1}}, .scalar = false});
}
TEST(Shape, SumTo) {
  expect_ad([](auto x) { return mg::sum_to(x * x, {1, 3}); }, arrays);
}
TEST(Shape, Unsqueeze) { expect_ad([](auto x) { return mg::unsqueeze(x, 1) * x; }, arrays); }
TEST(Shape, Transpose) {
  expect_ad([](auto x) { return mg::transpose(x) * 2; }, {.shapes = {{2, 3, 4}}, .scalar = false});
}
TEST(Linalg, Matmul) {
  expect_ad([](auto a, auto b) { return mg::matmul(a, b); }, {.shapes = {{2, 3}, {3, 4}}, .scalar = false, .device = false});
}

TEST(ShapeSemantics, TransposeSwapsTheLastTwoDimensions) {
  const auto x = xt::xarray<double>::from_shape({2, 3, 4});
  const tensor t = mg::transpose(tensor(xt::xarray<double>(xt::arange<double>(24).reshape({2, 3, 4}))));
  EXPECT_EQ(t.shape(), (mg::shape_t{2, 4, 3}));
  EXPECT_EQ(t.to_xtensor<double>()(1, 3, 2), 23.0);
  (void)x;
}
