// torch.autograd semantics of the runtime engine: graph inspection, grad mode, retain_graph,
// create_graph, allow_unused, .inputs, accumulation, saved-tensor checks, and every error.
#include <cmath>
#include <memory>
#include <utility>

#include <gtest/gtest.h>

#include <metagrad/autograd.hpp>
#include <metagrad/saved_tensors.hpp>
#include <metagrad/tensor.hpp>
#include <metagrad/tensor_xtensor.hpp>

#include "support/harness_runtime.hpp"

using mg::tensor;
using mg_test::expect_error;
using mg_test::values;

namespace {
tensor leaf(double v) { return tensor(v, mg::f64).requires_grad_(); }
double val(const tensor& t) { return t.item<double>(); }
}  // namespace

TEST(RuntimeGraph, LeavesNodesAndNames) {
  tensor x = leaf(2.0), c(3.0, mg::f64);
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

// A C++ number operand is bound into the node by value: the node has an edge per operand, empty
// for the number (as torch's next_functions), and saves no tensor for the number.
TEST(RuntimeGraph, NumberOperandsAreBoundIntoTheNode) {
  tensor x = leaf(2.0);
  const std::pair<tensor, std::size_t> cases[] = {{x * 3.0, 0},           {3.0 * x, 1},
                                                  {x / 4.0, 0},           {1.0 - x, 1},
                                                  {mg::atan2(x, 1.0), 0}, {mg::pow(2.0, x), 1}};
  for (const auto& [y, k] : cases) {
    const auto next = y.grad_fn()->next_functions();
    ASSERT_EQ(next.size(), 2u) << y.grad_fn()->name();
    EXPECT_STREQ(next[k]->name(), "accumulate_grad") << y.grad_fn()->name();
    EXPECT_FALSE(next[1 - k]) << y.grad_fn()->name();
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
  tensor w = mg::tensor(1.0, mg::f64).to(mg::f32).requires_grad_();
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
  expect_error([&] { z.backward({.retain_graph = true, .inputs = {tensor(1.0, mg::f64)}}); },
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
  tensor x = mg::tensor({1., 2., 3.}, mg::f64).requires_grad_();
  tensor t = x * x;
  tensor y = sin(t);
  auto g = mg::autograd::grad({y}, {t, x}, {mg::tensor({1., 0., 2.}, mg::f64)});
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
  tensor x = mg::tensor({1., 2.}, mg::f64).requires_grad_();
  tensor c = mg::tensor({3., 4.}, mg::f64);
  tensor y = (x * c).sum();
  const auto v0 = c.version();
  c.mul_(mg::tensor(2.0, mg::f64));
  EXPECT_EQ(c.version(), v0 + 1);
  EXPECT_EQ(c.to_xtensor<double>(), (xt::xarray<double>{6., 8.}));
  expect_error([&] { y.backward(); },
               {"modified by an in-place operation", "mul", "version 1", "expected version 0"});
  // an output saved by its own node (exp), modified through a view that shares its storage
  tensor e = exp(x);
  tensor s = e.sum();
  {
    mg::no_grad_guard ng;
    e.detach().add_(mg::tensor(1.0, mg::f64));
  }
  expect_error([&] { s.backward(); }, {"in-place", "exp"});
  // in-place on a tensor that requires grad, with grad mode on, is refused
  expect_error([&] { x.add_(mg::tensor(1.0, mg::f64)); },
               {"add_", "requires grad", "no_grad_guard"});
  {
    mg::no_grad_guard ng;
    x.add_(mg::tensor(1.0, mg::f64));
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

// ---- what torch.autograd's own tests check (test_autograd.py, named in each comment) ----------

// test_grad_accumulation / test_accumulate_grad: without create_graph a leaf's .grad is
// accumulated in place, so a handle to it (what an optimiser holds) sees later backwards; the
// first gradient is a copy that owns its storage, never the caller's tensor.
TEST(RuntimeGrad, GradIsAccumulatedInPlace) {
  tensor x = mg::ones({2}, {.dtype = mg::f64, .requires_grad = true});
  tensor y = x * 3.0;
  tensor seed = mg::ones({2}, {.dtype = mg::f64});
  y.backward(seed, {.retain_graph = true});
  tensor g = x.grad();
  y.backward(seed, {.retain_graph = true});
  EXPECT_EQ(values(g), (std::vector<double>{6, 6}));
  EXPECT_EQ(g.impl(), x.grad().impl());
  EXPECT_EQ(values(seed), (std::vector<double>{1, 1}));

  // the gradient reaching a leaf unchanged (clone's backward passes it on) is copied first
  tensor a = mg::ones({2}, {.dtype = mg::f64, .requires_grad = true});
  tensor s = tensor({5., 7.}, mg::f64);
  a.clone().backward(s);
  a.clone().backward(s);
  EXPECT_EQ(values(a.grad()), (std::vector<double>{10, 14}));
  EXPECT_EQ(values(s), (std::vector<double>{5, 7}));

  // a computed gradient that nothing else holds becomes .grad without a copy (torch's
  // AccumulateGrad steals it); one that the program also holds is copied
  tensor b = mg::ones({3}, {.dtype = mg::f64, .requires_grad = true});
  (b * 2.0).sum().backward();
  tensor first_b = b.grad();
  (b * 2.0).sum().backward();
  EXPECT_EQ(values(first_b), (std::vector<double>{4, 4, 4}));
  tensor kept = tensor({1., 2., 3.}, mg::f64);
  tensor c = mg::ones({3}, {.dtype = mg::f64, .requires_grad = true});
  c.register_hook([&](const tensor&) { return kept; });
  (c * 2.0).sum().backward();
  kept.add_(10.0);
  EXPECT_EQ(values(c.grad()), (std::vector<double>{1, 2, 3}));

  // with create_graph the sum is a new tensor that carries its graph
  tensor w = tensor({2.}, mg::f64).requires_grad_();
  (w * w * w).sum().backward({.create_graph = true});
  tensor first = w.grad();
  EXPECT_TRUE(first.requires_grad());
  (w * w * w).sum().backward({.create_graph = true});
  EXPECT_DOUBLE_EQ(first.item<double>(), 12.0);
  EXPECT_DOUBLE_EQ(w.grad().item<double>(), 24.0);
  // d/dw of the accumulated 3w^2 + 3w^2 = 12 w
  EXPECT_DOUBLE_EQ(mg::autograd::grad({w.grad().sum()}, {w})[0].item<double>(), 24.0);
  // w's .grad holds a graph that holds w (as in torch): reset it to free both
  w.set_grad(tensor{});
  first = tensor{};
}

// test_inplace_on_view_of_view / gradcheck through a view of a base written in place: the view
// requires grad (and has a history) as soon as its base does, before grad_fn() is read.
TEST(RuntimeGrad, ViewOfABaseWrittenInPlaceRequiresGrad) {
  tensor r = mg::ones({1}, {.dtype = mg::f64, .requires_grad = true});
  tensor x = mg::ones({5}, {.dtype = mg::f64});
  tensor v = x.select(0, 1);
  x.add_(r);
  EXPECT_TRUE(v.requires_grad());
  EXPECT_FALSE(v.is_leaf());
  tensor y = v * 3.0;  // recorded: the view's history reaches r
  y.backward();
  EXPECT_DOUBLE_EQ(r.grad().item<double>(), 3.0);
  EXPECT_DOUBLE_EQ(y.item<double>(), 6.0);
  // second order through the view: d/dr (v^2 summed) with v = 1 + r, at r = 1
  tensor q = mg::ones({1}, {.dtype = mg::f64, .requires_grad = true});
  tensor b = mg::zeros({3}, {.dtype = mg::f64});
  tensor u = b.slice(0, 0, 2);
  b.add_(q * q);
  const auto d = mg::autograd::grad({(u * u).sum()}, {q}, {}, {.create_graph = true})[0];
  EXPECT_DOUBLE_EQ(d.item<double>(), 2 * 2 * (2 * 1.0 * 1.0 * 1.0));  // 2*2*q^3*... = 8 q^3
  EXPECT_DOUBLE_EQ(mg::autograd::grad({d.sum()}, {q})[0].item<double>(), 24.0);  // 24 q^2
}

// test_function_returns_input / next_functions of `x + 5`: one edge per operand, empty for the
// number.
TEST(RuntimeGrad, ANumberOperandHasAnEmptyEdge) {
  tensor x = tensor({1., 2.}, mg::f64).requires_grad_();
  const auto add = (x + 5.0).grad_fn();
  ASSERT_EQ(add->next_functions().size(), 2u);
  EXPECT_TRUE(add->next_functions()[0]);
  EXPECT_FALSE(add->next_functions()[1]);
  const auto rsub = (5.0 - x).grad_fn();
  ASSERT_EQ(rsub->next_functions().size(), 2u);
  EXPECT_FALSE(rsub->next_functions()[0]);
  EXPECT_TRUE(rsub->next_functions()[1]);
  // the gradients are those of the tensor operand, first and second order
  const auto g = mg::autograd::grad({(5.0 / x).sum()}, {x}, {}, {.create_graph = true})[0];
  EXPECT_EQ(values(g), (std::vector<double>{-5.0, -1.25}));
  EXPECT_EQ(values(mg::autograd::grad({g.sum()}, {x})[0]), (std::vector<double>{10.0, 1.25}));
}

// test_grad_materialize_grads: unused inputs get zeros (requiring grad) instead of undefined
// tensors; allow_unused = false with it is an error.
TEST(RuntimeGrad, MaterializeGrads) {
  tensor x = mg::tensor(0.5, mg::f64).requires_grad_();
  tensor a = mg::tensor(2.0, mg::f64).requires_grad_();
  tensor y = x * a;
  const auto dx = mg::autograd::grad({y}, {x}, {}, {.create_graph = true})[0];
  const auto dx2 = mg::autograd::grad({dx}, {x}, {}, {.materialize_grads = true})[0];
  ASSERT_TRUE(dx2.defined());
  EXPECT_EQ(dx2.item<double>(), 0.0);
  EXPECT_TRUE(dx2.requires_grad());
  EXPECT_FALSE(
      mg::autograd::grad({dx}, {x}, {}, {.retain_graph = true, .allow_unused = true})[0].defined());
  expect_error(
      [&] {
        (void)mg::autograd::grad({dx}, {x}, {}, {.allow_unused = false, .materialize_grads = true});
      },
      {"materialize_grads", "allow_unused"});
}

// An integer or bool result carries no gradient (torch: only floating tensors require grad), so
// a function of x through x.to(mg::i64) does not depend on x.
TEST(RuntimeGrad, IntegerResultsCarryNoGradient) {
  tensor x = tensor({1.5, -2.5}, mg::f64).requires_grad_();
  const tensor i = x.to(mg::i64);
  EXPECT_FALSE(i.requires_grad());
  EXPECT_EQ(i.grad_fn(), nullptr);
  EXPECT_FALSE(i.to(mg::f64).requires_grad());
  EXPECT_FALSE((x > 0.0).requires_grad());
  const tensor y = (x * 2.0 + i.to(mg::f64)).sum();
  EXPECT_EQ(values(mg::autograd::grad({y}, {x})[0]), (std::vector<double>{2, 2}));
}

// Note [Buffers summed in place]: a node's buffer takes its later gradients in place only when
// nothing else holds it. Here a parameter is read by many slices (summed in place), y's buffer
// receives one tensor twice (add passes its gradient to both operands: summed out of place), a
// hook keeps the gradient it saw, and the root gradient is the caller's: none of them changes.
TEST(RuntimeBackward, BuffersSummedInPlaceLeaveSharedGradientsAlone) {
  const tensor w = tensor({0.5, -1.0, 2.0, 0.25, 1.5, -0.75}, mg::f64).requires_grad_();
  tensor y = w * 2.0;
  tensor seen;
  y.register_hook([&](const tensor& g) {
    seen = g;
    return tensor{};
  });
  tensor total = ((y + y) * w).sum();
  for (int k = 0; k < 10; ++k) {
    const tensor s = w.slice(0, k % 4, k % 4 + 3);
    total = total + (s * s).sum() * double(k + 1);
  }
  const tensor root = tensor(1.0, mg::f64);
  total.backward(root);
  EXPECT_EQ(root.item<double>(), 1.0);
  // d/dw of 4 w.w is 8 w; each slice k adds 2 (k + 1) w on its three elements
  const std::vector<double> wv = values(w);
  std::vector<double> expected(6);
  for (std::size_t i = 0; i < 6; ++i) expected[i] = 8 * wv[i];
  for (int k = 0; k < 10; ++k)
    for (int i = k % 4; i < k % 4 + 3; ++i)
      expected[std::size_t(i)] += 2.0 * (k + 1) * wv[std::size_t(i)];
  const std::vector<double> g = values(w.grad());
  for (std::size_t i = 0; i < 6; ++i) EXPECT_NEAR(g[i], expected[i], 1e-12) << i;
  // y's gradient: 2 w from each operand of y + y
  const std::vector<double> sv = values(seen);
  for (std::size_t i = 0; i < 6; ++i) EXPECT_NEAR(sv[i], 2 * wv[i], 1e-12) << i;
  mg_test::check_arrays(
      [](const mg::tensor_list& x) {
        const tensor v = x[0] * 2.0;
        tensor t = ((v + v) * x[0]).sum();
        for (int k = 0; k < 10; ++k) t = t + mg::sin(x[0].slice(0, k % 4, k % 4 + 3)).sum();
        return t;
      },
      {{6}});
}
