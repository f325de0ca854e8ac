// The runtime engine never recurses: a chain of a million nodes runs backward and is freed on
// the default stack (Note [Dependencies], Note [Iterative destruction]).
#include <cmath>
#include <memory>

#include <gtest/gtest.h>

#include <metagrad/autograd.hpp>
#include <metagrad/tensor.hpp>

constexpr int chain = 1'000'000;
// The add chain always has a million nodes. Under AddressSanitizer (Debug, about 20x slower per
// op) the other two use 200,000, which still overflows the default stack if anything recursed
// (sanitizer frames are larger).
#if defined(__SANITIZE_ADDRESS__)
constexpr int long_chain = 200'000;
#else
constexpr int long_chain = chain;
#endif

TEST(RuntimeChain, MillionAddsBackwardAndFree) {
  mg::tensor x = mg::tensor(0.5, mg::f64).requires_grad_();
  std::weak_ptr<mg::autograd::node> head;
  {
    mg::tensor y = x;
    for (int i = 0; i < chain; ++i) y = y + x;
    head = y.grad_fn();
    EXPECT_DOUBLE_EQ(y.item<double>(), 0.5 * (chain + 1));
    y.backward();
    EXPECT_DOUBLE_EQ(x.grad().item<double>(), chain + 1.0);
  }  // the graph is freed here, iteratively
  EXPECT_TRUE(head.expired());
}

TEST(RuntimeChain, MillionMulsBackwardAndFree) {
  mg::tensor x = mg::tensor(1.0, mg::f64).requires_grad_();
  std::weak_ptr<mg::autograd::node> head;
  {
    mg::tensor y = x;
    for (int i = 0; i < long_chain; ++i) y = y * 1.0000001;
    head = y.grad_fn();
    const double expected = std::pow(1.0000001, long_chain);
    EXPECT_NEAR(y.item<double>(), expected, 1e-9);
    y.backward();
    EXPECT_NEAR(x.grad().item<double>(), expected, 1e-9);
  }
  EXPECT_TRUE(head.expired());
}

TEST(RuntimeChain, MillionNodesFreedWithoutBackward) {
  mg::tensor x = mg::tensor(0.5, mg::f64).requires_grad_();
  std::weak_ptr<mg::autograd::node> head;
  {
    mg::tensor y = x;
    for (int i = 0; i < long_chain; ++i) y = sin(y);  // sin saves its input: the tensors chain too
    head = y.grad_fn();
  }
  EXPECT_TRUE(head.expired());
}
