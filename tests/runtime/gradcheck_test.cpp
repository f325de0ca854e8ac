// mg::autograd::gradcheck and gradgradcheck: correct functions pass, wrong backwards fail with a
// message naming the entry and both values, the options change the outcome.
#include <cmath>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

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
    const tensor mask({{0., 0., 0.}, {0., 0., 1.}}, mg::f64);
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

// x * x whose backward multiplies the gradient by 2 x (1 + 1e-9 calls): close to the finite
// differences, but two backward passes on one graph differ by about 1e-9 relative (and a zero
// gradient still gives zero).
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
    return {g[0] * 2.0 * x * (1.0 + 1e-9 * calls)};
  }
};

// x * x that asks for undefined gradients (set_materialize_grads(false)); `checked` handles them.
template <bool checked>
struct unmaterialized_square {
  static constexpr const char* name = "unmaterialized_square";
  static tensor forward(mg::context& ctx, const tensor& x) {
    ctx.save_for_backward(x);
    ctx.set_materialize_grads(false);
    return x * x;
  }
  static tensor_list backward(mg::context& ctx, const tensor_list& g) {
    auto [x] = ctx.saved_tensors<1>();
    if (checked && !g[0].defined()) return {tensor{}};
    return {g[0] * 2.0 * x};
  }
};

// x * x whose gradient has a constant 1e-7 added: within the Jacobian's tolerances, but not zero
// for a zero incoming gradient.
struct offset_square {
  static constexpr const char* name = "offset_square";
  static tensor forward(mg::context& ctx, const tensor& x) {
    ctx.save_for_backward(x);
    return x * x;
  }
  static tensor_list backward(mg::context& ctx, const tensor_list& g) {
    auto [x] = ctx.saved_tensors<1>();
    return {g[0] * 2.0 * x + 1e-7};
  }
};

// x * x with a right backward and a jvp that says 3 x t instead of 2 x t.
struct wrong_jvp_square {
  static constexpr const char* name = "wrong_jvp_square";
  static tensor forward(mg::context& ctx, const tensor& x) {
    ctx.save_for_backward(x);
    ctx.save_for_forward(x);
    return x * x;
  }
  static tensor_list backward(mg::context& ctx, const tensor_list& g) {
    auto [x] = ctx.saved_tensors<1>();
    return {g[0] * 2.0 * x};
  }
  static tensor jvp(mg::context& ctx, const tensor_list& t) {
    auto [x] = ctx.saved_for_forward<1>();
    return t[0] * 3.0 * x;
  }
};

// std::cerr's text while it lives.
class capture_cerr {
 public:
  capture_cerr() : old_(std::cerr.rdbuf(buffer_.rdbuf())) {}
  capture_cerr(const capture_cerr&) = delete;
  capture_cerr& operator=(const capture_cerr&) = delete;
  ~capture_cerr() { std::cerr.rdbuf(old_); }
  std::string text() const { return buffer_.str(); }

 private:
  std::ostringstream buffer_;
  std::streambuf* old_;
};

std::vector<double> elements(const tensor& t) {
  const auto a = t.to_xtensor<double>();
  return {a.begin(), a.end()};
}

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
  tensor s = mg::tensor(0.7, mg::f64).requires_grad_();
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
  tensor a = tensor({{0.5, -1.0, 2.0}, {1.5, 0.25, 2.5}}, mg::f64).requires_grad_();
  tensor b = tensor({{1.0, 2.0, 3.0}, {-1.0, -2.0, -3.0}}, mg::f64).requires_grad_();
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
  // misuse throws even with .raise_exception = false
  expect_error(
      [&] {
        gradcheck([](const tensor_list& in) { return in[0] * 2.0; }, {x.detach()},
                  {.raise_exception = false});
      },
      {"gradcheck", "none of the 1 input(s) requires grad"});
}

TEST(Gradcheck, NonReentrantBackwardFails) {
  tensor x = tensor({0.5, -1.5}, mg::f64).requires_grad_();
  auto fn = [](const tensor_list& in) { return mg::apply<drifting_square>(in[0]); };
  expect_error([&] { gradcheck(fn, {x}); }, {"gradcheck", "backward is not reentrant", "input 0"});
  EXPECT_FALSE(gradcheck(fn, {x}, {.raise_exception = false}));
}

TEST(Gradcheck, ZeroStrideInputsAreRefused) {
  // an expanded tensor: its 3 elements are one in memory
  const tensor e = mg::ones({1}, {.dtype = mg::f64, .requires_grad = true}).expand({3});
  ASSERT_EQ(e.strides(), (mg::shape_t{0}));
  auto twice = [](const tensor_list& in) { return in[0] * 2.0; };
  // a misuse: thrown even with .raise_exception = false
  expect_error([&] { gradcheck(twice, {e}, {.raise_exception = false}); },
               {"gradcheck: input 0 (shape [3], strides [0]) has a dimension with stride 0",
                "pass input.contiguous()"});
  // a leaf with a zero stride, as the second input; gradgradcheck too
  const tensor leaf = mg::ones({1, 2}, {.dtype = mg::f64}).expand({2, 2}).requires_grad_();
  expect_error(
      [&] {
        gradcheck(twice, {random_leaf({2}), leaf});
      },
      {"input 1", "strides [0,1]", "stride 0"});
  expect_error([&] { gradgradcheck(twice, {leaf}); }, {"gradgradcheck: input 0", "stride 0"});
  // a dimension of size 1 with stride 0 overlaps nothing; contiguous() is the fix
  EXPECT_TRUE(
      gradcheck(twice, {mg::ones({1}, {.dtype = mg::f64}).expand({1, 1}).requires_grad_()}));
  EXPECT_TRUE(gradcheck(twice, {e.contiguous()}));
}

TEST(Gradcheck, PerturbsTheInputsInPlace) {
  tensor x = tensor({0.5, -1.5, 2.0}, mg::f64).requires_grad_();
  const std::vector<double> x0 = elements(x);
  const auto version = x.version();
  // fn reads x through its capture as well as through its argument: d(x * x)/dx = 2 x
  auto captured = [&](const tensor_list& in) { return in[0] * x; };
  EXPECT_TRUE(gradcheck(captured, {x}));
  // what fn saw: the captured x moved with the perturbed element
  std::vector<double> seen;
  gradcheck(
      [&](const tensor_list& in) {
        seen.push_back(x.to_xtensor<double>()(1));
        return in[0] * 1.0;
      },
      {x}, {.eps = 0.25, .check_undefined_grad = false});
  // the first call (analytical), then element 0 up and down, element 1 up and down, element 2
  ASSERT_EQ(seen.size(), 7u);
  EXPECT_EQ(seen[3], -1.25);
  EXPECT_EQ(seen[4], -1.75);
  EXPECT_EQ(seen[5], -1.5);
  // restored exactly, the version counter untouched, x still a leaf that requires grad
  EXPECT_EQ(elements(x), x0);
  EXPECT_EQ(x.version(), version);
  EXPECT_TRUE(x.is_leaf() && x.requires_grad());
  // restored when fn throws in the middle of a perturbation
  int calls = 0;
  auto throws = [&](const tensor_list& in) {
    if (++calls == 3) throw std::runtime_error("fn failed");
    return in[0] * 2.0;
  };
  EXPECT_THROW(gradcheck(throws, {x}), std::runtime_error);
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(elements(x), x0);
  // a non-contiguous leaf (a transposed view) is perturbed element by element through its strides
  const tensor xt = tensor({{1.0, 2.0}, {3.0, 4.0}}, mg::f64).t().requires_grad_();
  ASSERT_FALSE(xt.is_contiguous());
  EXPECT_TRUE(gradcheck([](const tensor_list& in) { return mg::matmul(in[0], in[0]); }, {xt}));
  EXPECT_EQ(elements(xt), (std::vector<double>{1.0, 3.0, 2.0, 4.0}));
}

TEST(Gradcheck, Float32InputsWarnAndAreChecked) {
  tensor x = tensor{0.5f, 1.5f}.requires_grad_();
  ASSERT_EQ(x.dtype(), mg::f32);
  {
    capture_cerr cerr;
    // eps = 2^-10 keeps (x +- eps)^2 exact in float32: the differences are 2 x exactly
    EXPECT_TRUE(gradcheck([](const tensor_list& in) { return in[0] + in[1] * in[1]; },
                          {random_leaf({2}), x}, {.eps = 1.0 / 1024}));
    EXPECT_EQ(cerr.text(),
              "metagrad: gradcheck: input 1 is float32; the check is imprecise in single "
              "precision (finite differences lose digits), prefer float64\n");
  }
  {
    capture_cerr cerr;
    // a float32 input is checked: a wrong gradient fails
    EXPECT_FALSE(gradcheck([](const tensor_list& in) { return in[0] * in[0].detach(); }, {x},
                           {.eps = 1.0 / 1024, .raise_exception = false}));
    EXPECT_TRUE(gradgradcheck([](const tensor_list& in) { return in[0] * in[0] * in[0]; }, {x},
                              {.eps = 1.0 / 1024, .atol = 1e-3}));
    EXPECT_NE(cerr.text().find("metagrad: gradgradcheck: input 0 is float32"), std::string::npos);
  }
}

TEST(Gradcheck, NondeterminismTolerance) {
  tensor x = tensor({0.5, -1.5, 2.0}, mg::f64).requires_grad_();
  auto fn = [](const tensor_list& in) { return mg::apply<drifting_square>(in[0]); };
  // the two passes differ by 2 |x| 1e-9 (up to 4e-9)
  expect_error([&] { gradcheck(fn, {x}); },
               {"backward is not reentrant", "nondet_tol = 0", ".nondet_tol"});
  EXPECT_FALSE(gradcheck(fn, {x}, {.raise_exception = false, .nondet_tol = 1e-12}));
  EXPECT_TRUE(gradcheck(fn, {x}, {.nondet_tol = 1e-6}));
}

TEST(Gradcheck, UndefinedOutputGradients) {
  tensor x = tensor({0.5, -1.5}, mg::f64).requires_grad_();
  auto unchecked = [](const tensor_list& in) {
    return mg::apply<unmaterialized_square<false>>(in[0]);
  };
  // its Jacobian is right, but its backward multiplies an undefined gradient
  expect_error([&] { gradcheck(unchecked, {x}); },
               {"gradcheck: backward failed with all output gradients undefined",
                "must check g[k].defined()", "operand is an undefined tensor"});
  EXPECT_FALSE(gradcheck(unchecked, {x}, {.raise_exception = false}));
  EXPECT_TRUE(gradcheck(unchecked, {x}, {.check_undefined_grad = false}));
  EXPECT_TRUE(gradcheck(
      [](const tensor_list& in) { return mg::apply<unmaterialized_square<true>>(in[0]); }, {x}));
  // a gradient that is not zero for a zero incoming gradient
  auto offset = [](const tensor_list& in) { return mg::apply<offset_square>(in[0]); };
  expect_error([&] { gradcheck(offset, {x}); },
               {"with all output gradients undefined", "input 0 is not zero (1e-07)",
                ".check_undefined_grad = false"});
  EXPECT_TRUE(gradcheck(offset, {x}, {.check_undefined_grad = false}));
  // several outputs: each one's gradient undefined in turn
  auto two = [](const tensor_list& in) -> tensor_list {
    return {in[0] * 3.0, mg::apply<offset_square>(in[0])};
  };
  const std::string msg = error_of([&] { gradcheck(two, {x}); });
  EXPECT_NE(msg.find("with all output gradients undefined"), std::string::npos) << msg;

  // gradgradcheck: built-in ops handle undefined gradients in double backward
  EXPECT_TRUE(gradgradcheck([](const tensor_list& in) { return mg::sin(in[0]) * in[0]; }, {x},
                            {.check_undefined_grad = true}));
}

TEST(Gradcheck, ForwardModeJacobian) {
  mg::manual_seed(8);
  tensor x = random_leaf({3}), y = random_leaf({3});
  auto fn = [](const tensor_list& in) -> tensor_list {
    return {mg::sin(in[0]) * in[1], mg::sum(mg::exp(in[0] * in[1]))};
  };
  EXPECT_TRUE(gradcheck(fn, {x, y}, {.check_forward_ad = true}));
  EXPECT_TRUE(gradcheck([](const tensor_list& in) { return in[0] * in[0]; }, {x, x},
                        {.check_forward_ad = true}));
  // a wrong jvp: the backward check passes, the forward-mode one fails at d(x^2)/dx = 1
  tensor h = tensor({0.5, 2.0}, mg::f64).requires_grad_();
  auto wrong = [](const tensor_list& in) { return mg::apply<wrong_jvp_square>(in[0]); };
  EXPECT_TRUE(gradcheck(wrong, {h}));
  const std::string msg = error_of([&] { gradcheck(wrong, {h}, {.check_forward_ad = true}); });
  for (const char* part : {"gradcheck: forward-mode Jacobian mismatch for output 0 with respect to "
                           "input 0 at input element 0 (index [0])",
                           "the jvp of an operation"})
    EXPECT_NE(msg.find(part), std::string::npos) << "'" << part << "' not in: " << msg;
  EXPECT_NEAR(number_after(msg, "numerical "), 1.0, 1e-6) << msg;
  EXPECT_NEAR(number_after(msg, "vs forward-mode "), 1.5, 1e-12) << msg;
  EXPECT_FALSE(gradcheck(wrong, {h}, {.raise_exception = false, .check_forward_ad = true}));
  // forward-over-reverse is not available: gradgradcheck says so
  expect_error(
      [&] {
        gradgradcheck(fn, {x, y}, {.check_forward_ad = true});
      },
      {"gradgradcheck", ".check_forward_ad", "leave it false"});
}

TEST(Gradcheck, Tolerances) {
  tensor x = tensor({0.5, 1.5, -2.0}, mg::f64).requires_grad_();
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
  tensor x = tensor({0.3, 1.2, -0.8}, mg::f64).requires_grad_();
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
  tensor x = tensor({0.3, 1.2}, mg::f64).requires_grad_();
  mg::manual_seed(11);
  const tensor expected = mg::randn({4}, {.dtype = mg::f64});
  mg::manual_seed(11);
  EXPECT_TRUE(gradgradcheck([](const tensor_list& in) { return mg::exp(in[0]) * in[0]; }, {x}));
  EXPECT_TRUE(equal_values(mg::randn({4}, {.dtype = mg::f64}), expected));
}
