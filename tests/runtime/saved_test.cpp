// What the graph saves: only what the wanted gradients read, saved-tensor hooks (the examples of
// the torch.autograd.graph docs), allow_mutation_on_saved_tensors, increment_version; grad and
// inference modes.
#include <array>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include <metagrad/autograd.hpp>
#include <metagrad/saved_tensors.hpp>
#include <metagrad/tensor.hpp>
#include <metagrad/tensor_xtensor.hpp>

#include "support/harness_runtime.hpp"

using mg::tensor;
using mg::tensor_list;
using mg_test::expect_error;

using mg_test::values;

TEST(Saved, AProductSavesOnlyWhatTheWantedGradientReads) {
  // y = x * c with only x requiring grad saves c, not x: x may then change in place, and is
  // not kept alive by the graph
  tensor leaf = tensor({1., 2.}, mg::f64).requires_grad_();
  tensor c({3., 4.}, mg::f64);
  std::weak_ptr<mg::detail::tensor_impl> xw;
  tensor y;
  {
    tensor x = leaf * 1.0;
    xw = x.impl();
    y = x * c;
    x.mul_(10.0);  // allowed: x's value is not needed by backward
  }
  EXPECT_TRUE(xw.expired());
  y.sum().backward();
  EXPECT_EQ(values(leaf.grad()), (std::vector<double>{3, 4}));
  // c is saved: changing it is an error naming the node and the versions
  tensor y2 = leaf * c;
  c.add_(1.0);
  expect_error([&] { y2.sum().backward(); }, {"mul", "version 1", "expected version 0"});
  // both inputs requiring grad: both saved
  tensor a = tensor({2.}, mg::f64).requires_grad_();
  tensor b = tensor({5.}, mg::f64).requires_grad_();
  tensor ab = a * b;
  ab.backward(tensor({1.}, mg::f64));
  EXPECT_DOUBLE_EQ(a.grad().item<double>(), 5.0);
  EXPECT_DOUBLE_EQ(b.grad().item<double>(), 2.0);
  // a number operand is saved by value; the gradient of x / c reads c only
  tensor z = leaf / 4.0;
  z.sum().backward();
  EXPECT_EQ(values(leaf.grad()), (std::vector<double>{3.25, 4.25}));
}

// matmul, dot and outer declare what each gradient reads (that of a reads b, that of b reads a):
// x @ W with only W requiring grad saves x (its values) and only W's shape, as torch's mm does.
TEST(Saved, MatrixProductsSaveOnlyWhatTheWantedGradientReads) {
  const auto check = [](const char* op, auto f, std::vector<std::int64_t> sx,
                        std::vector<std::int64_t> sw) {
    SCOPED_TRACE(op);
    tensor x0 = mg::randn(sx, {.dtype = mg::f64});
    tensor w0 = mg::randn(sw, {.dtype = mg::f64});
    // only W requires grad: W may change in place afterwards, and W's gradient is right
    tensor x = x0.clone(), w = w0.clone().requires_grad_();
    tensor wv = w * 1.0;  // a non-leaf we may write in place
    tensor y = f(x, wv);
    wv.mul_(10.0);  // allowed: no wanted gradient reads W
    y.sum().backward();
    tensor w_ref = w0.clone().requires_grad_();
    f(x0, w_ref).sum().backward();
    EXPECT_EQ(values(w.grad()), values(w_ref.grad()));
    // x is read by W's gradient: changing it is an error naming the op
    tensor x2 = x0.clone(), w2 = w0.clone().requires_grad_();
    tensor y2 = f(x2, w2);
    x2.add_(1.0);
    expect_error([&] { y2.sum().backward(); }, {op, "version 1", "expected version 0"});
    // and the other way round
    tensor x3 = x0.clone().requires_grad_();
    tensor xv = x3 * 1.0;
    tensor y3 = f(xv, w0);
    xv.mul_(10.0);
    y3.sum().backward();
    tensor x_ref = x0.clone().requires_grad_();
    f(x_ref, w0).sum().backward();
    EXPECT_EQ(values(x3.grad()), values(x_ref.grad()));
  };
  const auto mm = [](const tensor& a, const tensor& b) { return mg::matmul(a, b); };
  check("matmul", mm, {3, 4}, {4, 2});
  check("matmul", mm, {4}, {4, 2});  // 1-D operands take the promoted path
  check("matmul", mm, {2, 3, 4}, {4});
  check("dot", [](const tensor& a, const tensor& b) { return mg::dot(a, b); }, {5}, {5});
  check("outer", [](const tensor& a, const tensor& b) { return mg::outer(a, b); }, {3}, {2});
}

TEST(Saved, IncrementVersionInvalidatesSavedTensors) {
  tensor x = tensor({1., 2.}, mg::f64).requires_grad_();
  tensor w({3., 4.}, mg::f64);
  tensor y = (x * w).sum();
  EXPECT_EQ(w.version(), 0u);
  mg::autograd::increment_version(w);
  EXPECT_EQ(w.version(), 1u);
  expect_error([&] { y.backward(); }, {"modified by an in-place operation", "mul"});
}

TEST(Saved, SecondBackwardNeedsRetainGraph) {
  tensor x = tensor({1., 2.}, mg::f64).requires_grad_();
  tensor y = (mg::exp(x)).sum();
  y.backward();
  expect_error([&] { y.backward(); }, {"backward through the graph a second time", "exp"});
}

// Seed (saved_tensors_hooks): with hooks, y = a * b packs a and b; backward unpacks both.
TEST(SavedHooks, SeedPackAndUnpackEachSavedTensor) {
  tensor a = mg::ones({5}, {.dtype = mg::f64, .requires_grad = true});
  tensor b = mg::ones({5}, {.dtype = mg::f64, .requires_grad = true}) * 2.0;
  std::vector<std::string> log;
  tensor y;
  {
    mg::autograd::saved_tensors_hooks_guard g(
        [&](const tensor& x) {
          log.push_back(std::string("pack ") + (x.is_leaf() ? "leaf" : x.grad_fn()->name()));
          return x;
        },
        [&](const tensor& x) {
          log.push_back("unpack " + std::to_string(x.sum().item<double>()));
          return x;
        });
    y = a * b;
  }
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0], "pack leaf");
  EXPECT_EQ(log[1], "pack mul");
  y.sum().backward();
  ASSERT_EQ(log.size(), 4u);
  EXPECT_EQ(log[2].substr(0, 6), "unpack");
  EXPECT_EQ(values(a.grad()), (std::vector<double>(5, 2.0)));
}

// An unpack hook that returns another dtype: the saved tensor is converted back to the dtype it
// was saved in (torch computes in the returned dtype, which gives the same values: the f32
// values of exp(x), widened); another shape is an error naming the shapes.
TEST(SavedHooks, UnpackConvertsToTheSavedDtypeAndChecksTheShape) {
  tensor x = tensor({1., 2., 3.}, mg::f64).requires_grad_();
  tensor y;
  {
    mg::autograd::saved_tensors_hooks_guard g([](const tensor& t) { return values(t); },
                                              [](const std::vector<double>& v) {
                                                return tensor({v[0], v[1], v[2]}, mg::f32);
                                              });
    y = mg::exp(x);  // saves its output
  }
  y.sum().backward();
  EXPECT_EQ(x.grad().dtype(), mg::f64);
  for (int i = 0; i < 3; ++i) {
    const double e = std::exp(i + 1.0);
    EXPECT_EQ(x.grad().to_xtensor<double>()(i), static_cast<double>(static_cast<float>(e)));
  }
  tensor z = tensor({1., 2., 3.}, mg::f64).requires_grad_();
  {
    mg::autograd::saved_tensors_hooks_guard g([](const tensor& t) { return values(t); },
                                              [](const std::vector<double>& v) {
                                                return tensor({v[0], v[1]}, mg::f64);
                                              });
    y = mg::exp(z);
  }
  mg_test::expect_error([&] { y.sum().backward(); },
                        {"exp", "unpack hook", "shape [2]", "shape [3]"});
}

TEST(SavedHooks, PackedValuesOfAnyTypeAndTheInnermostGuardWins) {
  tensor x = tensor({1., 2., 3.}, mg::f64).requires_grad_();
  int outer = 0, inner = 0;
  tensor y;
  {
    mg::autograd::saved_tensors_hooks_guard g1(
        [&](const tensor& t) {
          ++outer;
          return t;
        },
        [](const tensor& t) { return t; });
    {
      // packs into a std::vector<double> and rebuilds the tensor from it
      mg::autograd::saved_tensors_hooks_guard g2(
          [&](const tensor& t) {
            ++inner;
            return values(t);
          },
          [](const std::vector<double>& v) {
            return tensor({v[0], v[1], v[2]}, mg::f64);
          });
      y = mg::sin(x);
    }
    y = mg::exp(y);  // exp saves its output: packed by g1
  }
  EXPECT_EQ(inner, 1);
  EXPECT_EQ(outer, 1);
  y.sum().backward();
  for (int i = 0; i < 3; ++i) {
    const double v = i + 1.0;
    EXPECT_NEAR(x.grad().to_xtensor<double>()(i), std::exp(std::sin(v)) * std::cos(v), 1e-12);
  }
}

TEST(SavedHooks, OutputsAreSavedWithoutACycle) {
  std::weak_ptr<mg::autograd::node> n;
  {
    mg::autograd::saved_tensors_hooks_guard g([](const tensor& t) { return t; },
                                              [](const tensor& t) { return t; });
    tensor x = tensor({1.}, mg::f64).requires_grad_();
    tensor y = mg::exp(x);  // saves its own output through the hook
    n = y.grad_fn();
    y.backward(tensor({1.}, mg::f64));
    EXPECT_NEAR(x.grad().item<double>(), std::exp(1.0), 1e-12);
  }
  EXPECT_TRUE(n.expired());
}

// Seed (disable_saved_tensors_hooks): entering save_on_cpu under it raises with the message.
TEST(SavedHooks, SeedDisable) {
  const std::string message = "saved tensors default hooks are disabled";
  mg::autograd::disable_saved_tensors_hooks_guard d(message);
  expect_error([] { mg::autograd::save_on_cpu_guard g; }, {message});
  expect_error(
      [] {
        mg::autograd::saved_tensors_hooks_guard g([](const tensor& t) { return t; },
                                                  [](const tensor& t) { return t; });
      },
      {message});
}

TEST(SavedHooks, SaveOnCpuKeepsCpuTensorsAsTheyAre) {
  tensor a = mg::randn({5}, {.dtype = mg::f64, .requires_grad = true});
  tensor b = mg::randn({5}, {.dtype = mg::f64, .requires_grad = true});
  tensor y;
  {
    mg::autograd::save_on_cpu_guard g;
    y = a * b;
  }
  y.sum().backward();
  EXPECT_EQ(values(a.grad()), values(b));
  EXPECT_EQ(values(b.grad()), values(a));
}

// Seed (allow_mutation_on_saved_tensors): b = a.clone(); out = (b**2).sum(); b.sin_();
// out.sum().backward() gives a.grad = 2 * (the original b).
TEST(SavedHooks, SeedAllowMutationOnSavedTensors) {
  mg::autograd::allow_mutation_on_saved_tensors_guard g;
  tensor a = mg::ones({2, 3}, {.dtype = mg::f64, .requires_grad = true});
  tensor b = a.clone();
  tensor out = mg::pow(b, 2.0).sum();
  b.sin_();
  EXPECT_NEAR(b.to_xtensor<double>()(0, 0), std::sin(1.0), 1e-15);
  out.sum().backward();
  EXPECT_EQ(values(a.grad()), (std::vector<double>(6, 2.0)));
  expect_error([] { mg::autograd::allow_mutation_on_saved_tensors_guard nested; },
               {"cannot be nested"});
}

TEST(SavedHooks, AllowMutationBackwardOutsideTheGuardIsAnError) {
  tensor a = mg::ones({2}, {.dtype = mg::f64, .requires_grad = true});
  tensor out;
  {
    mg::autograd::allow_mutation_on_saved_tensors_guard g;
    out = mg::pow(a.clone(), 2.0).sum();
  }
  expect_error([&] { out.backward(); }, {"allow_mutation_on_saved_tensors_guard", "ended"});
}

TEST(Modes, GradModeIsThreadLocal) {
  EXPECT_TRUE(mg::is_grad_enabled());
  mg::set_grad_enabled(false);
  EXPECT_FALSE(mg::is_grad_enabled());
  bool other = false;
  std::thread([&] { other = mg::is_grad_enabled(); }).join();
  EXPECT_TRUE(other);
  tensor x = tensor({1.}, mg::f64).requires_grad_();
  EXPECT_FALSE((x * 2.0).requires_grad());
  {
    mg::enable_grad_guard on;
    EXPECT_TRUE((x * 2.0).requires_grad());
  }
  mg::set_grad_enabled(true);
  {
    mg::no_grad_guard ng;
    EXPECT_FALSE((x * 2.0).requires_grad());
  }
  EXPECT_TRUE((x * 2.0).requires_grad());
}

TEST(Modes, InferenceMode) {
  tensor x = tensor({1., 2.}, mg::f64).requires_grad_();
  tensor i;
  {
    mg::inference_mode_guard g;
    EXPECT_FALSE(mg::is_grad_enabled());
    EXPECT_TRUE(mg::is_inference_mode_enabled());
    i = x * 2.0;
    EXPECT_TRUE(i.is_inference());
    EXPECT_FALSE(i.requires_grad());
    i.add_(1.0);  // in place inside inference mode: fine
  }
  EXPECT_TRUE(mg::is_grad_enabled());
  EXPECT_FALSE(x.is_inference());
  EXPECT_EQ(values(i), (std::vector<double>{3, 5}));
  expect_error([&] { (void)(x * i); }, {"inference tensor", "saved for backward", "clone()"});
  expect_error([&] { i.mul_(2.0); }, {"inference tensor", "in place"});
  // a clone made outside inference mode is a normal tensor
  tensor n = i.clone();
  EXPECT_FALSE(n.is_inference());
  (x * n).sum().backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{3, 5}));
}

TEST(TensorAutograd, DetachVersionLeafAndRequiresGrad) {
  tensor x = tensor({1., 2.}, mg::f64).requires_grad_();
  EXPECT_TRUE(x.is_leaf());
  tensor y = x * 2.0;
  EXPECT_FALSE(y.is_leaf());
  tensor d = y.detach();
  EXPECT_TRUE(d.is_leaf());
  EXPECT_FALSE(d.requires_grad());
  EXPECT_EQ(d.version(), y.version());
  d.add_(1.0);  // shares elements and version counter
  EXPECT_EQ(y.version(), 1u);
  EXPECT_EQ(values(y), (std::vector<double>{3, 5}));
  y.detach_();
  EXPECT_TRUE(y.is_leaf());
  EXPECT_FALSE(y.requires_grad());
  EXPECT_FALSE(y.grad_fn());
  tensor v = x * 1.0;
  tensor row = v.slice(0, 0, 1);
  expect_error([&] { row.detach_(); }, {"detach_", "view", "detach()"});
}

// ---- what torch.autograd's own tests check (test_autograd.py, named in each comment) ----------

// test_pack_hook_with_inplace_modification_should_fail: exp saves its output, which the pack hook
// would modify; the values must not be corrupted silently.
TEST(SavedHooks, PackHookModifyingItsInputIsAnError) {
  tensor a = mg::zeros({2}, {.dtype = mg::f64, .requires_grad = true});
  mg::autograd::saved_tensors_hooks_guard g(
      [](const tensor& t) {
        tensor u = t;
        u.add_(1.0);
        return u;
      },
      [](const tensor& t) { return t; });
  expect_error([&] { (void)mg::exp(a); },
               {"exp", "A saved tensor pack hook is modifying its input in place", "clone()"});
}

// test_disabling_saved_tensor_hooks (second half): entering the disabling guard while hooks are
// active raises its message.
TEST(SavedHooks, DisablingWhileHooksAreActiveIsAnError) {
  const std::string message = "saved tensors default hooks are disabled";
  {
    mg::autograd::saved_tensors_hooks_guard g([](const tensor& t) { return t; },
                                              [](const tensor& t) { return t; });
    expect_error([&] { mg::autograd::disable_saved_tensors_hooks_guard d(message); }, {message});
  }
  // the failed guard left nothing behind: hooks can be entered again
  mg::autograd::saved_tensors_hooks_guard again([](const tensor& t) { return t; },
                                                [](const tensor& t) { return t; });
  tensor x = tensor({1., 2.}, mg::f64).requires_grad_();
  (x * x).sum().backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{2, 4}));
}

// test_saved_variable_saved_original_inplace_detach: an input saved with its history and then
// detached in place cannot be used; an output saved by its node can.
TEST(Saved, InputDetachedInPlaceAfterSavingIsAnError) {
  tensor a = mg::tensor(1.0, mg::f64).requires_grad_().clone();
  tensor b = mg::sin(a);
  a.detach_();
  expect_error([&] { b.backward(); },
               {"sin", "Trying to use a saved tensor that has been detached", "detach()"});

  tensor x = mg::tensor(1.0, mg::f64).requires_grad_();
  tensor c = x.clone();
  tensor d = mg::exp(c);
  c.detach_();
  d.backward();
  EXPECT_DOUBLE_EQ(x.grad().item<double>(), std::exp(1.0));
}

// A 0-d input saved as its storage alone, its history read from the node's edge (Note [Saved
// tensors]): first and second derivatives through a chain, a version error after an in-place
// write, and a 0-d view at an offset (saved with its fields).
TEST(Saved, ZeroDInputsKeepTheirHistoryThroughTheEdge) {
  const double v = 0.7;
  tensor x = mg::tensor(v, mg::f64).requires_grad_();
  tensor y = mg::sin(mg::sin(x) + 0.5);  // sin saves sin(x) + 0.5, a 0-d non-leaf
  auto [g] = std::array<tensor, 1>{mg::autograd::grad({y}, {x}, {}, {.create_graph = true})[0]};
  const double u = std::sin(v) + 0.5;
  EXPECT_NEAR(g.item<double>(), std::cos(u) * std::cos(v), 1e-15);
  auto [gg] = std::array<tensor, 1>{mg::autograd::grad({g}, {x})[0]};
  EXPECT_NEAR(gg.item<double>(),
              -std::sin(u) * std::cos(v) * std::cos(v) - std::cos(u) * std::sin(v), 1e-15);

  tensor h = x * 2.0;
  tensor z = mg::exp(h) * h;  // mul saves h (and exp's output)
  h.add_(1.0);
  expect_error([&] { z.backward(); }, {"modified by an in-place operation", "version 1"});

  tensor p = tensor({1.0, 2.0, 3.0}, mg::f64).requires_grad_();
  tensor q = p * 1.0;
  tensor e = q.select(0, 2);  // 0-d at offset 2
  tensor s = mg::sin(e);
  s.backward();
  EXPECT_EQ(values(p.grad()), (std::vector<double>{0, 0, std::cos(3.0)}));
}

// test_index_select backward twice (saved index): freed with the graph like a saved tensor.
TEST(Saved, IndexSelectTwiceNeedsRetainGraph) {
  tensor x = tensor({1., 2., 3.}, mg::f64).requires_grad_();
  tensor y = x.index_select(0, mg::tensor(xt::xarray<double>{2, 0}).to(mg::i64)).sum();
  y.backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{1, 0, 1}));
  expect_error([&] { y.backward(); }, {"backward through the graph a second time", "index_select"});
  EXPECT_EQ(values(x.grad()), (std::vector<double>{1, 0, 1}));  // not accumulated again
  tensor z = x.index_select(0, mg::tensor(xt::xarray<double>{1, 1}).to(mg::i64)).sum();
  z.backward({.retain_graph = true});
  z.backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{1, 4, 1}));
}
