// torch.autograd semantics of the runtime engine: graph inspection, grad mode, retain_graph,
// create_graph, allow_unused, .inputs, accumulation, saved-tensor checks, and every error.
#include <cmath>
#include <memory>

#include <gtest/gtest.h>

#include <metagrad/autograd.hpp>
#include <metagrad/saved_tensors.hpp>
#include <metagrad/tensor.hpp>

#include "support/harness_runtime.hpp"

using mg::tensor;
using mg_test::expect_error;

namespace {
tensor leaf(double v) { return tensor(v).requires_grad_(); }
double val(const tensor& t) { return t.item<double>(); }
}  // namespace

TEST(RuntimeGraph, LeavesNodesAndNames) {
  tensor x = leaf(2.0), c(3.0);
  EXPECT_TRUE(x.is_leaf());
  EXPECT_TRUE(x.requires_grad());
  EXPECT_EQ(x.grad_fn(), nullptr);
  EXPECT_FALSE(x.grad().defined());
  EXPECT_FALSE(c.requires_grad());
  tensor y = x * c;
  EXPECT_FALSE(y.is_leaf());
  ASSERT_NE(y.grad_fn(), nullptr);
  EXPECT_STREQ(y.grad_fn()->name(), "mul");
  EXPECT_STREQ(exp(y).grad_fn()->name(), "exp");
  EXPECT_STREQ(y.sum().grad_fn()->name(), "sum");
  // the edge of the constant is null; the edge of x is its grad accumulator
  ASSERT_EQ(y.grad_fn()->next_functions().size(), 2u);
  EXPECT_STREQ(y.grad_fn()->next_functions()[0]->name(), "accumulate_grad");
  EXPECT_EQ(y.grad_fn()->next_functions()[1], nullptr);
  // nothing recorded when no input requires grad
  EXPECT_EQ((c * c).grad_fn(), nullptr);
  EXPECT_FALSE((c * c).requires_grad());
  // detach shares storage but leaves the graph
  tensor d = y.detach();
  EXPECT_TRUE(d.is_leaf());
  EXPECT_FALSE(d.requires_grad());
}

// A C++ number operand is bound into the node by value (torch's MulBackward1 and kin): the node
// has edges for the tensor operands only and saves no tensor for the number.
TEST(RuntimeGraph, NumberOperandsAreBoundIntoTheNode) {
  tensor x = leaf(2.0);
  for (const tensor& y : {x * 3.0, 3.0 * x, x / 4.0, 1.0 - x, mg::atan2(x, 1.0), mg::pow(2.0, x)}) {
    ASSERT_EQ(y.grad_fn()->next_functions().size(), 1u) << y.grad_fn()->name();
    EXPECT_STREQ(y.grad_fn()->next_functions()[0]->name(), "accumulate_grad");
  }
  // gradients, and a second backward without retain_graph: nothing was saved (as in torch)
  tensor y = x * 3.0;
  y.backward();
  y.backward();
  EXPECT_DOUBLE_EQ(val(x.grad()), 6.0);
  x.set_grad(tensor{});
  (3.0 / x).backward();  // saves x (and its output): the number is read back by value
  EXPECT_DOUBLE_EQ(val(x.grad()), -3.0 / 4.0);
  x.set_grad(tensor{});
  mg::pow(2.0, x).backward();  // the gradient of the exponent reads the output and the base
  EXPECT_NEAR(val(x.grad()), 4.0 * std::log(2.0), 1e-15);
  // second order through number operands: d2/dx2 of (x * 3 + 1)^2 / 2 = 9
  tensor z = leaf(0.5);
  const tensor f = mg::pow(z * 3.0 + 1.0, 2.0) / 2.0;
  const tensor g = mg::autograd::grad({f}, {z}, {}, {.create_graph = true})[0];
  EXPECT_DOUBLE_EQ(val(g), 3.0 * (0.5 * 3.0 + 1.0));
  EXPECT_DOUBLE_EQ(val(mg::autograd::grad({g}, {z})[0]), 9.0);
  // a number takes the dtype the op computes in: f32 rounds 0.1 in forward and backward alike
  tensor w = mg::tensor(1.0).to(mg::f32).requires_grad_();
  tensor v = w * 0.1;
  v.backward();
  EXPECT_EQ(w.grad().dtype(), mg::f32);
  EXPECT_EQ(w.grad().item<float>(), 0.1f);
  EXPECT_EQ(v.item<float>(), 0.1f);
  // the saved-tensor pack hook never sees a number
  int packed = 0;
  {
    mg::autograd::saved_tensors_hooks_guard hooks(
        [&](const tensor& t) {
          ++packed;
          return t;
        },
        [](const tensor& t) { return t; });
    tensor m = x * 2.0 + mg::exp(x) * 0.5;
    EXPECT_EQ(packed, 1);  // exp's output only
  }
}

TEST(RuntimeGraph, NoGradGuard) {
  tensor x = leaf(2.0);
  EXPECT_TRUE(mg::is_grad_enabled());
  {
    mg::no_grad_guard ng;
    EXPECT_FALSE(mg::is_grad_enabled());
    tensor y = x * x;
    EXPECT_FALSE(y.requires_grad());
    EXPECT_EQ(y.grad_fn(), nullptr);
    {
      mg::enable_grad_guard on;
      EXPECT_TRUE((x * x).requires_grad());
    }
    EXPECT_FALSE(mg::is_grad_enabled());
  }
  EXPECT_TRUE(mg::is_grad_enabled());
  EXPECT_TRUE((x * x).requires_grad());
}

TEST(RuntimeBackward, AccumulatesAcrossCalls) {
  tensor x = leaf(3.0);
  (x * x).backward();
  EXPECT_DOUBLE_EQ(val(x.grad()), 6.0);
  (x * x * x).backward();
  EXPECT_DOUBLE_EQ(val(x.grad()), 6.0 + 27.0);
  x.set_grad({});
  EXPECT_FALSE(x.grad().defined());
  (x + x).backward();  // two edges into one accumulator
  EXPECT_DOUBLE_EQ(val(x.grad()), 2.0);
}

TEST(RuntimeBackward, ExplicitGradientAndShapes) {
  tensor x = mg::ones({2, 3}, {.dtype = mg::f64, .requires_grad = true});
  tensor y = x * 2;
  expect_error([&] { y.backward(); },
               {"backward: grad can be implicitly created only for scalar outputs", "[2,3]",
                "pass a gradient tensor"});
  expect_error([&] { y.backward(mg::ones({3}, {.dtype = mg::f64})); },
               {"backward", "[3]", "[2,3]"});
  y.backward(mg::full({2, 3}, 0.5, {.dtype = mg::f64}));
  EXPECT_EQ(x.grad().to_xtensor<double>(), xt::xarray<double>(xt::ones<double>({2, 3})));
  // a one-element (not 0-d) output may backward implicitly
  tensor z = mg::ones({1, 1}, {.dtype = mg::f64, .requires_grad = true});
  (z * 5).backward();
  EXPECT_DOUBLE_EQ(val(z.grad()), 5.0);
}

TEST(RuntimeBackward, TwiceNeedsRetainGraph) {
  tensor x = leaf(1.5);
  tensor y = exp(x) * x;
  y.backward({.retain_graph = true});
  y.backward();
  const double once = std::exp(1.5) * 2.5;
  EXPECT_NEAR(val(x.grad()), 2 * once, 1e-12);
  expect_error([&] { y.backward(); }, {"Trying to backward through the graph a second time", "mul",
                                       "freed", ".retain_graph = true"});
  tensor z = exp(x);
  z.backward();
  expect_error([&] { z.backward(); }, {"second time", "exp"});
}

TEST(RuntimeBackward, InputsRestrictAccumulation) {
  tensor x = leaf(2.0), y = leaf(5.0);
  tensor z = x * y;
  z.backward({.retain_graph = true, .inputs = {x}});
  EXPECT_DOUBLE_EQ(val(x.grad()), 5.0);
  EXPECT_FALSE(y.grad().defined());
  // a non-leaf input gets its .grad
  tensor t = x * x;
  tensor u = sin(t);
  u.backward(tensor{}, {.inputs = {t}});  // g++ 12 finds {.inputs = {t}} alone ambiguous
  EXPECT_NEAR(val(t.grad()), std::cos(4.0), 1e-15);
  EXPECT_DOUBLE_EQ(val(x.grad()), 5.0);  // unchanged
  expect_error([&] { z.backward({.retain_graph = true, .inputs = {tensor(1.0)}}); },
               {"backward", "input 0 does not require grad"});
}

TEST(RuntimeBackward, RetainGradOnNonLeaf) {
  tensor x = leaf(2.0);
  tensor t = x * x;
  t.retain_grad();
  EXPECT_TRUE(t.retains_grad());
  (t * 3).backward();
  EXPECT_DOUBLE_EQ(val(t.grad()), 3.0);
  EXPECT_DOUBLE_EQ(val(x.grad()), 12.0);
}

TEST(RuntimeGrad, ReturnsGradientsWithoutAccumulating) {
  tensor x = leaf(0.5), y = leaf(-1.0);
  tensor z = sin(x) * y;
  auto g = mg::autograd::grad({z}, {x, y});
  ASSERT_EQ(g.size(), 2u);
  EXPECT_NEAR(val(g[0]), std::cos(0.5) * -1.0, 1e-15);
  EXPECT_NEAR(val(g[1]), std::sin(0.5), 1e-15);
  EXPECT_FALSE(x.grad().defined());
  EXPECT_FALSE(g[0].requires_grad());  // no create_graph: plain values
}

TEST(RuntimeGrad, CreateGraphGivesHigherDerivatives) {
  tensor x = leaf(0.3);
  tensor y = exp(2 * x) * sin(x);
  auto [d1] = std::array{mg::autograd::grad({y}, {x}, {}, {.create_graph = true})[0]};
  ASSERT_TRUE(d1.requires_grad());
  auto d2 = mg::autograd::grad({d1}, {x}, {}, {.create_graph = true})[0];
  auto d3 = mg::autograd::grad({d2}, {x})[0];
  const double e = std::exp(0.6), s = std::sin(0.3), c = std::cos(0.3);
  EXPECT_NEAR(val(d1), e * (2 * s + c), 1e-13);
  EXPECT_NEAR(val(d2), e * (3 * s + 4 * c), 1e-13);
  EXPECT_NEAR(val(d3), e * (2 * s + 11 * c), 1e-12);
  // double backward through saved outputs (exp, tanh, div save their output)
  tensor z = tanh(x) / exp(x);
  auto dz = mg::autograd::grad({z}, {x}, {}, {.create_graph = true})[0];
  auto ddz = mg::autograd::grad({dz}, {x})[0];
  EXPECT_NEAR(val(ddz), mg::hessian<0>([](auto v) { return tanh(v) / exp(v); })(0.3), 1e-12);
  // backward with create_graph: .grad() carries a graph
  tensor w = leaf(2.0);
  (w * w * w).backward({.create_graph = true});
  ASSERT_TRUE(w.grad().requires_grad());
  auto h = mg::autograd::grad({w.grad()}, {w})[0];
  EXPECT_DOUBLE_EQ(val(h), 12.0);
  w.set_grad({});  // .grad() refers back to w through its graph: break the cycle, as in torch
}

TEST(RuntimeGrad, AllowUnused) {
  tensor x = leaf(1.0), y = leaf(2.0);
  tensor z = x * 3;
  expect_error(
      [&] {
        mg::autograd::grad({z}, {x, y}, {}, {.retain_graph = true});
      },
      {"autograd::grad", "input 1", "not used", ".allow_unused = true"});
  auto g = mg::autograd::grad({z}, {x, y}, {}, {.allow_unused = true});
  EXPECT_DOUBLE_EQ(val(g[0]), 3.0);
  EXPECT_FALSE(g[1].defined());
}

TEST(RuntimeGrad, NonLeafInputsAndGradOutputs) {
  tensor x = mg::tensor{1., 2., 3.}.requires_grad_();
  tensor t = x * x;
  tensor y = sin(t);
  auto g = mg::autograd::grad({y}, {t, x}, {mg::tensor{1., 0., 2.}});
  EXPECT_NEAR(g[0].to_xtensor<double>()(2), 2 * std::cos(9.0), 1e-14);
  EXPECT_NEAR(g[1].to_xtensor<double>()(2), 2 * std::cos(9.0) * 6, 1e-13);
  EXPECT_DOUBLE_EQ(g[1].to_xtensor<double>()(1), 0.0);
  // several outputs: gradients add up
  tensor a = leaf(2.0);
  auto s = mg::autograd::grad({a * a, a * 10}, {a});
  EXPECT_DOUBLE_EQ(val(s[0]), 14.0);
}

TEST(RuntimeErrors, MessagesNameTheOpShapesAndFix) {
  tensor a = mg::ones({2, 3}), b = mg::ones({4});
  expect_error([&] { (void)(a + b); }, {"add", "[2,3]", "[4]", "broadcast"});
  expect_error([&] { (void)(a * mg::ones({3, 3})); }, {"mul", "[2,3]", "[3,3]"});
  expect_error([&] { (void)mg::matmul(a, a); }, {"matmul", "[2,3]", "inner dimensions 3 and 2"});
  expect_error([&] { (void)mg::matmul(a, b); },
               {"matmul", "[2,3]", "[4]", "inner dimensions 3 and 4"});
  expect_error([&] { (void)a.item<double>(); }, {"item", "[2,3]", "6 elements"});
  expect_error([&] { (void)a.sum(2); }, {"sum", "dim 2", "[2,3]"});
  expect_error([&] { (void)mg::sum(a, -3); }, {"sum", "dim -3"});
  expect_error([&] { a.backward(); }, {"backward", "does not require grad"});
  expect_error([&] { (void)exp(tensor{}); }, {"exp", "undefined"});
  expect_error([&] { (void)mg::zeros({2}, {.device = mg::device::cuda}); },
               {"no translation unit of this program includes <metagrad/cuda.hpp>"});
  expect_error([&] { (void)mg::zeros({2}, {.dtype = mg::i64, .requires_grad = true}); },
               {"requires_grad", "i64", "floating"});
  expect_error([&] { (void)mg::expand(a, {3, 3}); }, {"expand", "[2,3]", "[3,3]"});
}

TEST(RuntimeSaved, InPlaceModificationOfASavedTensorIsDetected) {
  tensor x = mg::tensor{1., 2.}.requires_grad_();
  tensor c = mg::tensor{3., 4.};
  tensor y = (x * c).sum();
  const auto v0 = c.version();
  c.mul_(mg::tensor(2.0));
  EXPECT_EQ(c.version(), v0 + 1);
  EXPECT_EQ(c.to_xtensor<double>(), (xt::xarray<double>{6., 8.}));
  expect_error([&] { y.backward(); },
               {"modified by an in-place operation", "mul", "version 1", "expected version 0"});
  // an output saved by its own node (exp), modified through a view that shares its storage
  tensor e = exp(x);
  tensor s = e.sum();
  {
    mg::no_grad_guard ng;
    e.detach().add_(mg::tensor(1.0));
  }
  expect_error([&] { s.backward(); }, {"in-place", "exp"});
  // in-place on a tensor that requires grad, with grad mode on, is refused
  expect_error([&] { x.add_(mg::tensor(1.0)); }, {"add_", "requires grad", "no_grad_guard"});
  {
    mg::no_grad_guard ng;
    x.add_(mg::tensor(1.0));
  }  // an optimiser step
  EXPECT_EQ(x.to_xtensor<double>(), (xt::xarray<double>{2., 3.}));
}

TEST(RuntimeSaved, NoReferenceCycles) {
  std::weak_ptr<mg::autograd::node> node, acc;
  std::weak_ptr<mg::detail::tensor_impl> leaf_impl;
  {
    tensor x = leaf(0.2);
    leaf_impl = x.impl();
    tensor y = tanh(exp(x)) / x;  // exp, tanh and div save their own output
    node = y.grad_fn();
    acc = exp(x).grad_fn()->next_functions()[0].function;
    auto d = mg::autograd::grad({y}, {x}, {}, {.create_graph = true})[0];
    (void)mg::autograd::grad({d}, {x});
  }
  EXPECT_TRUE(node.expired());
  EXPECT_TRUE(acc.expired());
  EXPECT_TRUE(leaf_impl.expired());
}
