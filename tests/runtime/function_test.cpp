// Custom operations on mg::tensor: ctx-free ops (mg::StaticOp) and mg::Function structs.
#include <cmath>

#include <gtest/gtest.h>

#include <metagrad/function.hpp>
#include <metagrad/static.hpp>

#include "support/custom_ops.hpp"
#include "support/harness_runtime.hpp"

using mg::tensor;
using mg::tensor_list;
using mg_test::check_arrays;
using mg_test::check_runtime;
using mg_test::expect_error;

using mg_test::hypot2;
using mg_test::softplus;

TEST(RuntimeStaticOp, SameStructInBothEngines) {
  check_runtime([](auto x) { return mg::apply<softplus>(x * x); }, 0.5);
  check_runtime([](auto a, auto b) { return mg::apply<hypot2>(a, b) * a; }, 0.6, -1.7);
  tensor x = mg::tensor(0.5).requires_grad_();
  tensor y = mg::apply<softplus>(x);
  EXPECT_STREQ(y.grad_fn()->name(), "softplus");
  // its forward ran without recording: one node, whose input is x's accumulator
  EXPECT_STREQ(y.grad_fn()->next_functions()[0]->name(), "accumulate_grad");
}

TEST(RuntimeStaticOp, BroadcastGradientsAreSummedBack) {
  check_arrays([](const tensor_list& x) { return mg::apply<hypot2>(x[0], x[1]); }, {{3, 1}, {4}});
  check_arrays([](const tensor_list& x) { return mg::apply<softplus>(x[0]) * x[0]; }, {{2, 3}});
}

struct my_exp {
  static constexpr const char* name = "my_exp";
  static tensor forward(mg::context& ctx, const tensor& x) {
    auto r = mg::exp(x);
    ctx.save_for_backward(r);  // the output: saved without a cycle
    return r;
  }
  static tensor_list backward(mg::context& ctx, const tensor_list& g) {
    auto [r] = ctx.saved_tensors<1>();
    return {g[0] * r};
  }
};
static_assert(mg::Function<my_exp>);

struct scaled_mul {  // a * b * 2, two inputs
  static constexpr const char* name = "scaled_mul";
  static tensor forward(mg::context& ctx, const tensor& a, const tensor& b) {
    ctx.save_for_backward(a, b);
    return a * b * 2.0;
  }
  static tensor_list backward(mg::context& ctx, const tensor_list& g) {
    auto [a, b] = ctx.saved_tensors<2>();
    return {ctx.needs_input_grad(0) ? g[0] * b * 2.0 : tensor{},
            ctx.needs_input_grad(1) ? g[0] * a * 2.0 : tensor{}};
  }
};
static_assert(mg::Function<scaled_mul>);

struct wrong_count {
  static constexpr const char* name = "wrong_count";
  static tensor forward(mg::context&, const tensor& a, const tensor& b) { return a + b; }
  static tensor_list backward(mg::context&, const tensor_list& g) { return {g[0]}; }
};

struct wrong_saved {
  static tensor forward(mg::context& ctx, const tensor& a) {
    ctx.save_for_backward(a);
    return a * 1.0;
  }
  static tensor_list backward(mg::context& ctx, const tensor_list& g) {
    auto [a, b] = ctx.saved_tensors<2>();
    return {g[0] * a * b};
  }
};

TEST(RuntimeFunction, OneInput) {
  check_arrays([](const tensor_list& x) { return mg::apply<my_exp>(x[0]) * x[0]; }, {{2, 3}});
  tensor x = mg::tensor(0.7).requires_grad_();
  tensor y = mg::apply<my_exp>(x);
  EXPECT_STREQ(y.grad_fn()->name(), "my_exp");
  EXPECT_DOUBLE_EQ(y.item<double>(), std::exp(0.7));
  // double backward through the re-attached saved output
  auto d1 = mg::autograd::grad({y * y}, {x}, {}, {.create_graph = true})[0];
  auto d2 = mg::autograd::grad({d1}, {x})[0];
  EXPECT_NEAR(d1.item<double>(), 2 * std::exp(1.4), 1e-12);
  EXPECT_NEAR(d2.item<double>(), 4 * std::exp(1.4), 1e-12);
}

TEST(RuntimeFunction, TwoInputsAndNeedsInputGrad) {
  check_arrays([](const tensor_list& x) { return mg::apply<scaled_mul>(x[0], x[1]); },
               {{2, 3}, {2, 3}});
  check_arrays([](const tensor_list& x) { return mg::apply<scaled_mul>(x[0], x[1]); },
               {{2, 3}, {3}});
  tensor a = mg::tensor(3.0).requires_grad_(), b(4.0);
  mg::apply<scaled_mul>(a, b).backward();
  EXPECT_DOUBLE_EQ(a.grad().item<double>(), 8.0);
}

TEST(RuntimeFunction, NoRecordingWithoutGrad) {
  tensor a(3.0), b(4.0);
  tensor y = mg::apply<scaled_mul>(a, b);
  EXPECT_FALSE(y.requires_grad());
  EXPECT_DOUBLE_EQ(y.item<double>(), 24.0);
}

TEST(RuntimeFunction, Errors) {
  tensor a = mg::tensor(1.0).requires_grad_(), b = mg::tensor(2.0).requires_grad_();
  expect_error([&] { mg::apply<wrong_count>(a, b).backward(); },
               {"wrong_count", "backward returned 1 gradient(s)", "forward took 2 input(s)"});
  expect_error([&] { mg::apply<wrong_saved>(a).backward(); }, {"saved_tensors<2>", "saved 1"});
  tensor y = mg::apply<my_exp>(a);
  y.backward();
  expect_error([&] { y.backward(); }, {"second time", "my_exp", ".retain_graph = true"});
  // a saved input modified in place
  tensor c = mg::tensor(2.0);
  tensor z = mg::apply<scaled_mul>(a, c);
  c.add_(tensor(1.0));
  expect_error([&] { z.backward(); }, {"in-place", "scaled_mul"});
}

TEST(RuntimeFunction, NoCycleThroughTheSavedOutput) {
  std::weak_ptr<mg::autograd::node> n;
  {
    tensor x = mg::tensor(0.7).requires_grad_();
    tensor y = mg::apply<my_exp>(x);
    n = y.grad_fn();
  }
  EXPECT_TRUE(n.expired());
}
