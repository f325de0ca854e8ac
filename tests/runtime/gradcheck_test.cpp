// mg::autograd::gradcheck and gradgradcheck: correct functions pass, wrong backwards fail with a
// message naming the entry and both values, the options change the outcome.
#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include <metagrad/function.hpp>
#include <metagrad/gradcheck.hpp>
#include <metagrad/metagrad.hpp>

#include "support/harness_runtime.hpp"

using mg::tensor;
using mg::tensor_list;
using mg::autograd::gradcheck;
using mg::autograd::gradgradcheck;
using mg_test::error_of;
using mg_test::expect_error;

namespace {

tensor random_leaf(const mg::shape_t& shape) {
  return mg::randn(shape, {.dtype = mg::f64, .requires_grad = true});
}

// The number printed right after `key` in msg (NaN if key is not there).
double number_after(const std::string& msg, const std::string& key) {
  const auto at = msg.find(key);
  if (at == std::string::npos) return std::nan("");
  return std::stod(msg.substr(at + key.size()));
}

bool equal_values(const tensor& a, const tensor& b) {
  return a.to_xtensor<double>() == b.to_xtensor<double>();
}

// x^3 with a correct backward that is differentiable again (x is saved with its history).
struct cube_fn {
  static constexpr const char* name = "cube_fn";
  static tensor forward(mg::context& ctx, const tensor& x) {
    ctx.save_for_backward(x);
    return x * x * x;
  }
  static tensor_list backward(mg::context& ctx, const tensor_list& g) {
    auto [x] = ctx.saved_tensors<1>();
    return {g[0] * 3.0 * x * x};
  }
};

// a * b of two [2, 3] tensors; the gradient of b is wrong in element [1, 2] (flat 5) only.
struct wrong_mul {
  static constexpr const char* name = "wrong_mul";
  static tensor forward(mg::context& ctx, const tensor& a, const tensor& b) {
    ctx.save_for_backward(a, b);
    return a * b;
  }
  static tensor_list backward(mg::context& ctx, const tensor_list& g) {
    auto [a, b] = ctx.saved_tensors<2>();
    const tensor mask{{0., 0., 0.}, {0., 0., 1.}};
    return {g[0] * b, g[0] * a + g[0] * mask};
  }
};

// sin with a backward right to first order only: cos(x) is computed from a detached x, so the
// gradient does not depend on x in the graph (its derivative would be -sin(x)).
struct sin_first_order_only {
  static constexpr const char* name = "sin_first_order_only";
  static tensor forward(mg::context& ctx, const tensor& x) {
    ctx.save_for_backward(x);
    return mg::sin(x);
  }
  static tensor_list backward(mg::context& ctx, const tensor_list& g) {
    auto [x] = ctx.saved_tensors<1>();
    return {g[0] * mg::cos(x.detach())};
  }
};

// x * x with a gradient off by a relative 1e-4.
struct slightly_off_square {
  static constexpr const char* name = "slightly_off_square";
  static tensor forward(mg::context& ctx, const tensor& x) {
    ctx.save_for_backward(x);
    return x * x;
  }
  static tensor_list backward(mg::context& ctx, const tensor_list& g) {
    auto [x] = ctx.saved_tensors<1>();
    return {g[0] * 2.0 * x * (1.0 + 1e-4)};
  }
};

// x * x whose backward drifts by 1e-9 per call: close to the finite differences, but two
// backward passes on one graph disagree.
struct drifting_square {
  static constexpr const char* name = "drifting_square";
  static inline int calls = 0;
  static tensor forward(mg::context& ctx, const tensor& x) {
    ctx.save_for_backward(x);
    return x * x;
  }
  static tensor_list backward(mg::context& ctx, const tensor_list& g) {
    auto [x] = ctx.saved_tensors<1>();
    ++calls;
    return {g[0] * 2.0 * x + 1e-9 * calls};
  }
};

}  // namespace

TEST(Gradcheck, ElementwiseWithBroadcasting) {
  mg::manual_seed(1);
  tensor x = random_leaf({2, 3}), y = random_leaf({3}), z = random_leaf({2, 1});
  const tensor x_before = x.clone().detach();
  EXPECT_TRUE(gradcheck(
      [](const tensor_list& in) {
        return mg::sin(in[0]) * in[1] + mg::exp(in[0] * in[2]) - in[0] * in[1] * in[2];
      },
      {x, y, z}));
  // the check works on copies: the inputs keep their values and get no .grad()
  EXPECT_TRUE(equal_values(x, x_before));
  EXPECT_FALSE(x.grad().defined());
}

TEST(Gradcheck, MatmulAndReductions) {
  mg::manual_seed(2);
  tensor a = random_leaf({2, 3}), b = random_leaf({3, 4});
  EXPECT_TRUE(gradcheck([](const tensor_list& in) { return mg::matmul(in[0], in[1]); }, {a, b}));
  EXPECT_TRUE(gradcheck([](const tensor_list& in) { return (in[0] * in[0]).sum(1); }, {a}));
  EXPECT_TRUE(gradcheck([](const tensor_list& in) { return mg::mean(mg::exp(in[0]), 0); }, {a}));
  EXPECT_TRUE(
      gradcheck([](const tensor_list& in) { return mg::matmul(in[0], in[1]).mean(); }, {a, b}));
}

TEST(Gradcheck, SeveralOutputsAndZeroDim) {
  mg::manual_seed(3);
  tensor x = random_leaf({2, 3}), y = random_leaf({3});
  tensor s = mg::tensor(0.7).requires_grad_();
  EXPECT_TRUE(gradcheck(
      [](const tensor_list& in) -> tensor_list {
        return {mg::sin(in[0]) * in[1], (in[0] * in[1]).sum()};
      },
      {x, y}));
  // a 0-d input and a 0-d output
  EXPECT_TRUE(gradcheck(
      [](const tensor_list& in) { return in[0] * in[0] * mg::mean(mg::exp(in[1])); }, {s, x}));
  EXPECT_TRUE(gradcheck([](const tensor_list& in) { return mg::sin(in[0]) * 3.0; }, {s}));
}

TEST(Gradcheck, SameInputTwice) {
  mg::manual_seed(8);
  tensor x = random_leaf({3});
  // autograd::grad gives d(x * x)/dx = 2x in both slots; perturbing the one tensor moves both
  EXPECT_TRUE(gradcheck([](const tensor_list& in) { return in[0] * in[1]; }, {x, x}));
  EXPECT_TRUE(gradgradcheck([](const tensor_list& in) { return in[0] * mg::sin(in[1]); }, {x, x}));
}

TEST(Gradcheck, InputWithoutGradIsSkipped) {
  mg::manual_seed(4);
  tensor a = random_leaf({2, 3});
  auto fn = [](const tensor_list& in) { return mg::apply<wrong_mul>(in[0], in[1].to(mg::f64)); };
  // the second input's gradient is wrong, but it is not differentiated (and may be f32)
  tensor c = mg::randn({2, 3});
  ASSERT_EQ(c.dtype(), mg::f32);
  EXPECT_TRUE(gradcheck(fn, {a, c}));
  // the same input requiring grad is checked, and fails
  tensor b = random_leaf({2, 3});
  EXPECT_FALSE(gradcheck(fn, {a, b}, {.raise_exception = false}));
}

TEST(Gradcheck, CorrectFunction) {
  mg::manual_seed(5);
  tensor x = random_leaf({3, 2}), y = random_leaf({2});
  EXPECT_TRUE(gradcheck([](const tensor_list& in) { return mg::apply<cube_fn>(in[0]); }, {x}));
  EXPECT_TRUE(
      gradcheck([](const tensor_list& in) { return mg::apply<cube_fn>(in[0]) * in[1]; }, {x, y}));
}

TEST(Gradcheck, WrongBackwardFails) {
  tensor a = tensor{{0.5, -1.0, 2.0}, {1.5, 0.25, 2.5}}.requires_grad_();
  tensor b = tensor{{1.0, 2.0, 3.0}, {-1.0, -2.0, -3.0}}.requires_grad_();
  auto fn = [](const tensor_list& in) { return mg::apply<wrong_mul>(in[0], in[1]); };
  const std::string msg = error_of([&] { gradcheck(fn, {a, b}); });
  // the one wrong entry: d out[1, 2] / d b[1, 2] is a[1, 2] = 2.5, the backward says 3.5
  for (const char* part : {"gradcheck", "Jacobian mismatch", "output 0", "with respect to input 1",
                           "input element 5 (index [1, 2])", "output element 5 (index [1, 2])",
                           "analytical 3.5", "atol 1e-05", "rtol 0.001"})
    EXPECT_NE(msg.find(part), std::string::npos) << "'" << part << "' not in: " << msg;
  EXPECT_NEAR(number_after(msg, "numerical "), 2.5, 1e-6) << msg;
  EXPECT_DOUBLE_EQ(number_after(msg, "analytical "), 3.5) << msg;
  EXPECT_FALSE(gradcheck(fn, {a, b}, {.raise_exception = false}));
  // input 0's gradient is right: differentiating only input 0 passes
  EXPECT_TRUE(gradcheck(fn, {a, b.detach()}));
}

TEST(Gradcheck, OutputsWithoutGrad) {
  mg::manual_seed(6);
  tensor x = random_leaf({3});
  // an output that does not depend on the inputs: zero Jacobian, passes
  EXPECT_TRUE(gradcheck(
      [](const tensor_list& in) -> tensor_list {
        return {in[0] * 2.0, mg::ones({2}, {.dtype = mg::f64})};
      },
      {x}));
  // a detached output that does depend on them: fails
  expect_error(
      [&] {
        gradcheck(
            [](const tensor_list& in) -> tensor_list {
              return {in[0] * 2.0, in[0].detach() * 3.0};
            },
            {x});
      },
      {"gradcheck", "output 1 does not require grad", "with respect to input 0", "analytical 0 ("});
}

TEST(Gradcheck, InputErrors) {
  tensor x = random_leaf({2});
  tensor f = mg::randn({2}, {.requires_grad = true});  // f32
  expect_error(
      [&] {
        gradcheck([](const tensor_list& in) { return in[0] * in[1]; }, {x, f});
      },
      {"gradcheck", "input 1", "f32", "convert it with .to(mg::f64)"});
  expect_error(
      [&] {
        gradgradcheck([](const tensor_list& in) { return in[0] * in[1]; }, {x, f});
      },
      {"gradgradcheck", "input 1", "f32", "convert it with .to(mg::f64)"});
  // misuse throws even with .raise_exception = false
  expect_error(
      [&] {
        gradcheck([](const tensor_list& in) { return in[0] * 2.0; }, {x.detach()},
                  {.raise_exception = false});
      },
      {"gradcheck", "none of the 1 input(s) requires grad"});
}

TEST(Gradcheck, NonReentrantBackwardFails) {
  tensor x = tensor{0.5, -1.5}.requires_grad_();
  auto fn = [](const tensor_list& in) { return mg::apply<drifting_square>(in[0]); };
  expect_error([&] { gradcheck(fn, {x}); }, {"gradcheck", "backward is not reentrant", "input 0"});
  EXPECT_FALSE(gradcheck(fn, {x}, {.raise_exception = false}));
}

TEST(Gradcheck, Tolerances) {
  tensor x = tensor{0.5, 1.5, -2.0}.requires_grad_();
  auto fn = [](const tensor_list& in) { return mg::apply<slightly_off_square>(in[0]); };
  // |error| = 2e-4 |x| <= 4e-4: within the default rtol 1e-3, not within rtol 1e-6
  EXPECT_TRUE(gradcheck(fn, {x}));
  EXPECT_FALSE(gradcheck(fn, {x}, {.atol = 0, .rtol = 1e-6, .raise_exception = false}));
  expect_error([&] { gradcheck(fn, {x}, {.atol = 0, .rtol = 1e-6}); },
               {"gradcheck", "input element 0 (index [0])", "atol 0", "rtol 1e-06"});
  // atol alone: 1e-3 covers 4e-4, 1e-5 does not
  EXPECT_TRUE(gradcheck(fn, {x}, {.atol = 1e-3, .rtol = 0}));
  EXPECT_FALSE(gradcheck(fn, {x}, {.atol = 1e-5, .rtol = 0, .raise_exception = false}));
  const std::string msg = error_of([&] { gradcheck(fn, {x}, {.atol = 0, .rtol = 1e-6}); });
  EXPECT_NEAR(number_after(msg, "numerical "), 1.0, 1e-6) << msg;  // 2 * 0.5
  EXPECT_NEAR(number_after(msg, "analytical "), 1.0001, 1e-12) << msg;
}

TEST(Gradgradcheck, CorrectFunctionsPass) {
  mg::manual_seed(7);
  tensor x = random_leaf({2, 3}), y = random_leaf({3}), a = random_leaf({2, 3}),
         b = random_leaf({3, 2});
  EXPECT_TRUE(gradgradcheck([](const tensor_list& in) { return mg::sin(in[0]) * in[1]; }, {x, y}));
  EXPECT_TRUE(gradgradcheck([](const tensor_list& in) { return in[0] * in[0] * in[0]; }, {x}));
  EXPECT_TRUE(gradgradcheck([](const tensor_list& in) { return mg::exp(in[0]); }, {x}));
  EXPECT_TRUE(
      gradgradcheck([](const tensor_list& in) { return mg::matmul(in[0], in[1]); }, {a, b}));
  EXPECT_TRUE(gradgradcheck([](const tensor_list& in) { return mg::apply<cube_fn>(in[0]); }, {x}));
  // two outputs, one of them 0-d, and an input that does not require grad
  EXPECT_TRUE(gradgradcheck(
      [](const tensor_list& in) -> tensor_list {
        return {mg::sin(in[0]) * in[2], (in[0] * in[0] * in[1]).sum()};
      },
      {x, y, mg::randn({3}, {.dtype = mg::f64})}));
}

TEST(Gradgradcheck, FirstOrderOnlyBackwardFails) {
  tensor x = tensor{0.3, 1.2, -0.8}.requires_grad_();
  auto fn = [](const tensor_list& in) { return mg::apply<sin_first_order_only>(in[0]); };
  // first derivatives are right
  EXPECT_TRUE(gradcheck(fn, {x}));
  // second derivatives are not: d(g cos(x))/dx is -g sin(x), the backward's graph says 0
  const std::string msg = error_of([&] { gradgradcheck(fn, {x}); });
  for (const char* part : {"gradgradcheck", "second-derivative mismatch", "output 0",
                           "with respect to input 0 at", "vs analytical 0 ("})
    EXPECT_NE(msg.find(part), std::string::npos) << "'" << part << "' not in: " << msg;
  EXPECT_GT(std::fabs(number_after(msg, "numerical ")), 1e-5) << msg;
  EXPECT_FALSE(gradgradcheck(fn, {x}, {.raise_exception = false}));
  // the random grad_outputs are fixed: the same failure every time
  EXPECT_EQ(error_of([&] { gradgradcheck(fn, {x}); }), msg);
}

TEST(Gradgradcheck, LeavesTheUserGeneratorAlone) {
  tensor x = tensor{0.3, 1.2}.requires_grad_();
  mg::manual_seed(11);
  const tensor expected = mg::randn({4}, {.dtype = mg::f64});
  mg::manual_seed(11);
  EXPECT_TRUE(gradgradcheck([](const tensor_list& in) { return mg::exp(in[0]) * in[0]; }, {x}));
  EXPECT_TRUE(equal_values(mg::randn({4}, {.dtype = mg::f64}), expected));
}
