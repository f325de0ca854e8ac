// The nn functions through the one harness, and their values on known inputs.
#include <cmath>

#include "support/expect_ad.hpp"

using mg::tensor;
using mg_test::expect_ad;

TEST(Nn, Softmax) { expect_ad([](auto x) { return mg::softmax(x * 2, -1) * x; }); }
TEST(Nn, LogSoftmax) { expect_ad([](auto x) { return mg::log_softmax(x * 2, 0) * x; }); }
TEST(Nn, MseLoss) {
  expect_ad([](auto a, auto b) { return mg::mse_loss(a, b); }, {.shapes = {{2, 3}, {3}}});
}

TEST(NnSemantics, Values) {
  const tensor x{{1.0, 2.0, 3.0}, {1000.0, 1000.0, 1000.0}};
  const auto s = mg::softmax(x, 1).to_xtensor<double>();
  const double e = std::exp(1.0), z = 1 + e + e * e;
  EXPECT_NEAR(s(0, 0), 1 / z, 1e-15);
  EXPECT_NEAR(s(0, 2), e * e / z, 1e-15);
  EXPECT_NEAR(s(1, 1), 1.0 / 3, 1e-15);  // stable: no overflow at 1000
  EXPECT_NEAR(mg::log_softmax(x, 1).to_xtensor<double>()(0, 0), -std::log(z), 1e-14);
  EXPECT_DOUBLE_EQ(mg::mse_loss(tensor{1.0, 2.0}, tensor{0.0, 4.0}).item<double>(), 2.5);
}
