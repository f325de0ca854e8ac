// The nn functions through the one harness, and their values on known inputs.
#include <cmath>

#include <metagrad/tensor_xtensor.hpp>
#include "support/expect_ad.hpp"

using mg::tensor;
using mg_test::expect_ad;

TEST(Nn, Softmax) {
  expect_ad([](auto x) { return mg::softmax(x * 2, -1) * x; });
}
TEST(Nn, LogSoftmax) {
  expect_ad([](auto x) { return mg::log_softmax(x * 2, 0) * x; });
}
TEST(Nn, MseLoss) {
  expect_ad([](auto a, auto b) { return mg::mse_loss(a, b); }, {.shapes = {{2, 3}, {3}}});
}

// cross_entropy inside a traced function is a compile-time error (tests/compile_fail): the
// harness's static legs are off here, and compile with a stand-in for numbers and expressions.
template <class X, class F>
auto unless_traced(const X& x, F f) {
  if constexpr (mg::detail::ZeroD<X>) {
    return x;
  } else {
    return f(x);
  }
}
TEST(Nn, CrossEntropy) {
  expect_ad(
      [](auto x) {
        return unless_traced(x, [](auto v) {
          return mg::cross_entropy(v * 2, std::vector<std::int64_t>{2, 0});
        });
      },
      {.shapes = {{2, 3}}, .scalar = false, .xtensor = false});
}
TEST(Nn, CrossEntropyOneSample) {
  expect_ad(
      [](auto x) {
        return unless_traced(
            x, [](auto v) { return mg::cross_entropy(v, std::vector<std::int64_t>{1}); });
      },
      {.shapes = {{4}}, .scalar = false, .xtensor = false});
}

MG_TEST_ON_EACH_DEVICE(NnSemantics);

TEST_P(NnSemantics, CrossEntropyValuesAndErrors) {
  const mg::device dev = GetParam();
  const tensor logits = mg::zeros({2, 3}, {.dtype = mg::f64, .device = dev});
  const tensor targets = tensor({2.0, 0.0}, mg::f64).to(mg::i64).to(dev);
  EXPECT_NEAR(mg::cross_entropy(logits, targets).item<double>(), std::log(3.0), 1e-15);
  const tensor z = tensor({{1.0, 2.0, 3.0}}, mg::f64).to(dev).requires_grad_();
  const tensor l = mg::cross_entropy(z, tensor({0.0}, mg::f64).to(mg::i64).to(dev));
  const double e = std::exp(1.0), s = e + e * e + e * e * e;
  EXPECT_NEAR(l.item<double>(), -std::log(e / s), 1e-14);
  l.backward();
  EXPECT_NEAR(z.grad().to_xtensor<double>()(0, 0), e / s - 1, 1e-14);
  EXPECT_NEAR(z.grad().to_xtensor<double>()(0, 2), e * e * e / s, 1e-14);
  mg_test::expect_error(
      [&] {
        (void)mg::cross_entropy(logits, tensor({3.0, 0.0}, mg::f64).to(mg::i64).to(dev));
      },
      {"cross_entropy", "target 3", "3 classes", "0 to 2"});
  mg_test::expect_error(
      [&] {
        (void)mg::cross_entropy(logits, tensor({1.0, 0.0}, mg::f64).to(dev));
      },
      {"cross_entropy", "i64"});
  mg_test::expect_error(
      [&] { (void)mg::cross_entropy(logits, tensor({1.0}, mg::f64).to(mg::i64).to(dev)); },
      {"cross_entropy", "1 targets", "[2,3]"});
}

TEST_P(NnSemantics, Values) {
  const mg::device dev = GetParam();
  const tensor x = tensor({{1.0, 2.0, 3.0}, {1000.0, 1000.0, 1000.0}}, mg::f64).to(dev);
  const auto s = mg::softmax(x, 1).to_xtensor<double>();
  const double e = std::exp(1.0), z = 1 + e + e * e;
  EXPECT_NEAR(s(0, 0), 1 / z, 1e-15);
  EXPECT_NEAR(s(0, 2), e * e / z, 1e-15);
  EXPECT_NEAR(s(1, 1), 1.0 / 3, 1e-15);  // stable: no overflow at 1000
  EXPECT_NEAR(mg::log_softmax(x, 1).to_xtensor<double>()(0, 0), -std::log(z), 1e-14);
  EXPECT_DOUBLE_EQ(
      mg::mse_loss(tensor({1.0, 2.0}, mg::f64).to(dev), tensor({0.0, 4.0}, mg::f64).to(dev))
          .item<double>(),
      2.5);
}

// Note [Fused composites]: one node each, named after the function, whose edge leads straight
// to the operand's history; stable at large logits, with finite gradients there.
TEST_P(NnSemantics, FusedCompositesAreOneNode) {
  const mg::device dev = GetParam();
  const tensor x = tensor({{1.0, -2.0, 3.0}, {0.5, 0.25, -1.0}}, mg::f64).to(dev).requires_grad_();
  const auto one_node = [&](const tensor& y, const char* name) {
    ASSERT_NE(y.grad_fn(), nullptr) << name;
    EXPECT_STREQ(y.grad_fn()->name(), name);
    const auto next = y.grad_fn()->next_functions();
    ASSERT_EQ(next.size(), 1u) << name;
    EXPECT_STREQ(next[0].function->name(), "accumulate_grad") << name;
  };
  one_node(mg::softmax(x, 1), "softmax");
  one_node(mg::log_softmax(x, 0), "log_softmax");
  one_node(mg::logsumexp(x, 1), "logsumexp");
  one_node(mg::logsumexp(x), "logsumexp");
  one_node(mg::cross_entropy(x, std::vector<std::int64_t>{2, 0}), "cross_entropy");
  // d/dx cross_entropy = (softmax(x) - onehot) / N
  const tensor l = mg::cross_entropy(x, std::vector<std::int64_t>{2, 0});
  const tensor g = mg::autograd::grad({l}, {x})[0];
  const auto p = mg::softmax(x, 1).to_xtensor<double>();
  const auto gx = g.to_xtensor<double>();
  EXPECT_NEAR(gx(0, 2), (p(0, 2) - 1) / 2, 1e-15);
  EXPECT_NEAR(gx(0, 0), p(0, 0) / 2, 1e-15);
  EXPECT_NEAR(gx(1, 0), (p(1, 0) - 1) / 2, 1e-15);
  // large logits: no overflow, no NaN in value or gradient
  const tensor big = tensor({{1000.0, 0.0, -1000.0}}, mg::f64).to(dev).requires_grad_();
  const tensor lb = mg::cross_entropy(big, std::vector<std::int64_t>{1});
  EXPECT_NEAR(lb.item<double>(), 1000.0, 1e-9);
  lb.backward();
  const auto gb = big.grad().to_xtensor<double>();
  EXPECT_NEAR(gb(0, 0), 1.0, 1e-15);
  EXPECT_NEAR(gb(0, 1), -1.0, 1e-15);
  EXPECT_EQ(gb(0, 2), 0.0);
  EXPECT_NEAR(mg::logsumexp(big, 1).item<double>(), 1000.0, 1e-12);
  EXPECT_NEAR(mg::log_softmax(big, 1).to_xtensor<double>()(0, 2), -2000.0, 1e-9);
}

TEST(Nn, LogSumExpAlongADimAndKeepdim) {
  expect_ad([](auto x) { return mg::logsumexp(x * 2, 1, true) * x; },
            {.shapes = {{2, 3}}, .scalar = false});
  expect_ad([](auto x) { return mg::logsumexp(x, 0); }, {.shapes = {{3, 2}}, .scalar = false});
}
