// Hooks of the runtime engine: tensor hooks, node hooks and pre-hooks, retain_grad, multi-grad
// hooks, their order, handles, errors, and the graph's lifetime with hooks that capture tensors.
// The examples of the torch.autograd.graph docs are reproduced as they are written there.
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <metagrad/autograd.hpp>
#include <metagrad/function.hpp>
#include <metagrad/tensor.hpp>

#include "support/harness_runtime.hpp"

using mg::tensor;
using mg::tensor_list;
using mg_test::expect_error;

using mg_test::values;

namespace {
tensor leaf(std::initializer_list<double> v) { return tensor(v, mg::f64).requires_grad_(); }
}  // namespace

// Seed (Tensor.register_hook): v.register_hook(lambda grad: grad * 2); v.backward([1, 1, 1]).
TEST(Hooks, SeedTensorHookDoublesTheGradient) {
  tensor v = leaf({0., 0., 0.});
  mg::hook_handle h = v.register_hook([](const tensor& g) { return g * 2.0; });
  v.backward(tensor({1., 1., 1.}, mg::f64));
  EXPECT_EQ(values(v.grad()), (std::vector<double>{2, 2, 2}));
  h.remove();
  v.backward(tensor({1., 1., 1.}, mg::f64));
  EXPECT_EQ(values(v.grad()), (std::vector<double>{3, 3, 3}));  // accumulated, not doubled
}

// The Node hook examples of the torch.autograd.graph docs: b = a.clone(); a hook registered on
// b.grad_fn doubles the gradient (a.grad is [2, 2, 2]); after handle.remove() it is [1, 1, 1]
// again.
template <class Register>
void expect_doubled_until_removed(Register reg) {
  tensor a = leaf({0., 0., 0.});
  tensor b = a.clone();
  ASSERT_TRUE(b.grad_fn());
  mg::hook_handle handle = reg(*b.grad_fn());
  b.sum().backward({.retain_graph = true});
  EXPECT_EQ(values(a.grad()), (std::vector<double>{2, 2, 2}));
  handle.remove();
  a.set_grad(tensor{});
  b.sum().backward({.retain_graph = true});
  EXPECT_EQ(values(a.grad()), (std::vector<double>{1, 1, 1}));
}

// Seed (Node.register_hook): b.grad_fn.register_hook(lambda gI, gO: (gO[0] * 2,))
TEST(Hooks, SeedNodeHookReplacesGradInputs) {
  expect_doubled_until_removed([](mg::autograd::node& n) {
    return n.register_hook(
        [](const tensor_list&, const tensor_list& gO) -> std::optional<tensor_list> {
          return tensor_list{gO[0] * 2.0};
        });
  });
}

// Seed (Node.register_prehook): b.grad_fn.register_prehook(lambda gI: (gI[0] * 2,))
TEST(Hooks, SeedNodePrehookReplacesGradOutputs) {
  expect_doubled_until_removed([](mg::autograd::node& n) {
    return n.register_prehook([](const tensor_list& gI) -> std::optional<tensor_list> {
      return tensor_list{gI[0] * 2.0};
    });
  });
}

TEST(Hooks, OrderIsTensorHooksRetainGradPrehooksNodePosthooks) {
  tensor x = leaf({1., 2.});
  tensor y = x * 3.0;
  std::vector<std::string> log;
  y.retain_grad();
  y.register_hook([&](const tensor& g) {
    log.push_back("tensor1");
    return g * 10.0;
  });
  y.register_hook([&](const tensor& g) {
    log.push_back("tensor2 sees " + std::to_string(g.sum().item<double>()));
    return tensor{};  // keeps the gradient
  });
  y.grad_fn()->register_prehook([&](const tensor_list& go) {
    log.push_back("pre sees " + std::to_string(go[0].sum().item<double>()));
  });
  y.grad_fn()->register_hook([&](const tensor_list& gi, const tensor_list& go) {
    log.push_back("post " + std::to_string(gi[0].sum().item<double>()) + " " +
                  std::to_string(go[0].sum().item<double>()));
  });
  x.register_hook([&](const tensor& g) {
    log.push_back("leaf " + std::to_string(g.sum().item<double>()));
    return tensor{};
  });
  y.sum().backward();
  ASSERT_EQ(log.size(), 5u);
  EXPECT_EQ(log[0], "tensor1");
  EXPECT_EQ(log[1], "tensor2 sees 20.000000");
  EXPECT_EQ(log[2], "pre sees 20.000000");
  EXPECT_EQ(log[3], "post 60.000000 20.000000");
  EXPECT_EQ(log[4], "leaf 60.000000");
  EXPECT_EQ(values(y.grad()), (std::vector<double>{10, 10}));  // retain_grad saw the hooked one
  EXPECT_EQ(values(x.grad()), (std::vector<double>{30, 30}));
}

TEST(Hooks, LeafHookRunsBeforeAccumulation) {
  tensor x = leaf({1., 2.});
  x.register_hook([](const tensor& g) { return g + 1.0; });
  (x * x).sum().backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{3, 5}));
  // a hook registered before any op (its grad accumulator does not exist yet) still runs
  tensor z = leaf({1.});
  z.register_hook([](const tensor& g) { return g * 5.0; });
  (z * 2.0).sum().backward();
  EXPECT_EQ(values(z.grad()), (std::vector<double>{10}));
}

TEST(Hooks, PostHookOfAGradAccumulatorAndOfAFunctionWithTwoInputs) {
  tensor a = leaf({1.}), b = leaf({2.});
  tensor y = a * b;
  int calls = 0;
  y.grad_fn()->register_hook([&](const tensor_list& gi, const tensor_list& go) {
    ++calls;
    EXPECT_EQ(gi.size(), 2u);
    EXPECT_EQ(go.size(), 1u);
    EXPECT_DOUBLE_EQ(gi[0].item<double>(), 2.0);  // d/da = b
    EXPECT_DOUBLE_EQ(gi[1].item<double>(), 1.0);  // d/db = a
    return tensor_list{gi[0], tensor{}};          // b gets no gradient
  });
  y.sum().backward();
  EXPECT_EQ(calls, 1);
  EXPECT_DOUBLE_EQ(a.grad().item<double>(), 2.0);
  EXPECT_FALSE(b.grad().defined());
}

TEST(Hooks, WrongResultsAreErrors) {
  tensor x = leaf({1., 2.});
  tensor y = x * 2.0;
  auto h = y.register_hook([](const tensor&) { return tensor({1., 2., 3.}, mg::f64); });
  expect_error([&] { y.sum().backward({.retain_graph = true}); },
               {"tensor hook", "mul", "shape [3]", "shape [2]"});
  h.remove();
  auto h2 = y.register_hook([](const tensor& g) { return g.to(mg::f32); });
  expect_error([&] { y.sum().backward({.retain_graph = true}); }, {"dtype f32", "dtype f64"});
  h2.remove();
  auto h3 = y.grad_fn()->register_hook(
      [](const tensor_list&, const tensor_list&) { return tensor_list{}; });
  expect_error([&] { y.sum().backward({.retain_graph = true}); },
               {"returned 0 gradients for 2 inputs"});  // the number 2.0 has an empty edge
  h3.remove();
  y.grad_fn()->register_prehook([](const tensor_list& g) { return tensor_list{g[0], g[0]}; });
  expect_error([&] { y.sum().backward(); }, {"pre-hook of mul", "2 gradients for 1 outputs"});
  expect_error([] { tensor(1.0, mg::f64).register_hook([](const tensor& g) { return g; }); },
               {"register_hook", "does not require grad"});
}

TEST(Hooks, HandlesOutliveTensorsAndDroppingOneKeepsTheHook) {
  mg::hook_handle h;
  {
    tensor x = leaf({1.});
    tensor y = x * 2.0;
    h = y.register_hook([](const tensor& g) { return g; });
  }
  h.remove();  // the hook set is gone: nothing to do
  h.remove();  // twice: harmless
  tensor x = leaf({1.});
  tensor y = x * 2.0;
  {
    (void)y.register_hook([](const tensor& g) { return g * 3.0; });
  }  // handle dropped
  y.backward(tensor({1.}, mg::f64));
  EXPECT_DOUBLE_EQ(x.grad().item<double>(), 6.0);
}

// Seed (register_multi_grad_hook): c = a * b; d = a * b; hook on (a, b, c, d).
TEST(Hooks, SeedMultiGradHook) {
  tensor a = mg::randn({2, 3}, {.dtype = mg::f64, .requires_grad = true});
  tensor b = mg::randn({2, 3}, {.dtype = mg::f64, .requires_grad = true});
  tensor c = a * b;
  tensor d = a * b;
  std::vector<std::vector<bool>> calls;
  mg::autograd::register_multi_grad_hook({a, b, c, d}, [&](const tensor_list& grads) {
    std::vector<bool> defined;
    for (const auto& g : grads) defined.push_back(g.defined());
    calls.push_back(defined);
  });
  c.sum().backward({.retain_graph = true});
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0], (std::vector<bool>{true, true, true, false}));
  c.sum().backward({.retain_graph = true, .inputs = {a}});
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1], (std::vector<bool>{true, false, true, false}));
}

TEST(Hooks, MultiGradHookSeesTheGradientsAndIsRemoved) {
  tensor a = leaf({1., 2.}), b = leaf({3., 4.});
  double seen = 0;
  auto h = mg::autograd::register_multi_grad_hook(
      {a, b}, [&](const tensor_list& g) { seen = (g[0] * g[1]).sum().item<double>(); });
  (a * b).sum().backward();
  EXPECT_DOUBLE_EQ(seen, 3 * 1 + 4 * 2);  // grads are b and a
  h.remove();
  seen = -1;
  (a * b).sum().backward();
  EXPECT_EQ(seen, -1);
}

// Only a's gradient flows out of this function; b's is undefined.
struct first_only {
  static tensor forward(mg::context&, const tensor& a, const tensor& b) { return a * b; }
  static tensor_list backward(mg::context&, const tensor_list& g) { return {g[0], tensor{}}; }
};

// b's node runs but receives an undefined gradient: the hook still fires once, with grads[1]
// undefined (torch passes None), and plain tensor hooks of b are not called with it.
TEST(Hooks, MultiGradHookFiresWhenAGradientIsUndefined) {
  tensor a = leaf({1., 2.}), b = leaf({3., 4.});
  tensor bb = b * 1.0;  // a non-leaf whose grad_fn is reached without a gradient
  int plain = 0;
  (void)bb.register_hook([&](const tensor& g) {
    ++plain;
    return g;
  });
  std::vector<std::vector<bool>> calls;
  auto h = mg::autograd::register_multi_grad_hook({a, bb, b}, [&](const tensor_list& g) {
    calls.push_back({g[0].defined(), g[1].defined(), g[2].defined()});
    if (g[0].defined()) {
      EXPECT_EQ(values(g[0]), (std::vector<double>{1, 1}));  // backward passes g through
    }
  });
  mg::apply<first_only>(a, bb).sum().backward();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0], (std::vector<bool>{true, false, false}));
  EXPECT_EQ(plain, 0);
  EXPECT_EQ(values(a.grad()), (std::vector<double>{1, 1}));
  EXPECT_FALSE(b.grad().defined());
}

TEST(Hooks, RetainGradIsAHookAndFollowsInPlaceWrites) {
  tensor x = leaf({1., 2.});
  tensor y = x * 2.0;
  EXPECT_FALSE(y.retains_grad());
  y.retain_grad();
  EXPECT_TRUE(y.retains_grad());
  EXPECT_FALSE(x.retains_grad());  // a leaf keeps its gradient anyway
  y.mul_(3.0);                     // y's history moves on; retain_grad goes with it
  EXPECT_TRUE(y.retains_grad());
  (y * y).sum().backward();
  EXPECT_EQ(values(y.grad()), (std::vector<double>{12, 24}));
  EXPECT_EQ(values(x.grad()), (std::vector<double>{72, 144}));
}

TEST(Hooks, HookCapturingItsOwnTensorDoesNotLeak) {
  std::weak_ptr<mg::detail::tensor_impl> leaf_w, y_w;
  std::weak_ptr<mg::autograd::node> node_w;
  double seen = 0;
  {
    tensor x = leaf({1., 2.});
    x.register_hook([x, &seen](const tensor& g) {
      seen += x.sum().item<double>();
      return g;
    });
    tensor y = x * 2.0;
    y.register_hook([y](const tensor& g) { return g * y.sum().item<double>() / 6.0; });
    leaf_w = x.impl();
    y_w = y.impl();
    node_w = y.grad_fn();
    y.sum().backward();
    EXPECT_EQ(values(x.grad()), (std::vector<double>{2, 2}));
    EXPECT_DOUBLE_EQ(seen, 3.0);
  }
  EXPECT_TRUE(leaf_w.expired());
  EXPECT_TRUE(y_w.expired());
  EXPECT_TRUE(node_w.expired());
  // the handle dropped first, the graph later: still freed
  std::weak_ptr<mg::detail::tensor_impl> w;
  {
    tensor z;
    {
      tensor x = leaf({1.});
      tensor y = x * 2.0;
      y.register_hook([y](const tensor& g) { return g; });
      w = y.impl();
      z = y * 3.0;
    }
    EXPECT_FALSE(w.expired());  // z's graph still needs y's node (and its hook)
    z.backward(tensor({1.}, mg::f64));
  }
  EXPECT_TRUE(w.expired());
}

TEST(Hooks, LongChainWithHooksCapturingUpstreamTensorsIsFreedIteratively) {
  std::weak_ptr<mg::detail::tensor_impl> first;
  {
    tensor x = leaf({1.});
    tensor y = x * 1.0;
    first = y.impl();
    for (int i = 0; i < 200000; ++i) {
      tensor prev = y;
      y = prev * 1.0;
      y.register_hook([prev](const tensor& g) { return g; });
    }
  }  // must not overflow the stack
  EXPECT_TRUE(first.expired());
}

TEST(Hooks, ReentrantBackwardFromAHook) {
  tensor x = leaf({2.});
  tensor y = x * x;
  double inner = 0;
  y.register_hook([&](const tensor& g) {
    mg::enable_grad_guard on;  // hooks run in backward's grad mode (off without create_graph)
    tensor w = leaf({3.});
    auto [dw] = std::array<tensor, 1>{mg::autograd::grad({(w * w * w).sum()}, {w})[0]};
    inner = dw.item<double>();
    return g;
  });
  y.sum().backward();
  EXPECT_DOUBLE_EQ(inner, 27.0);
  EXPECT_DOUBLE_EQ(x.grad().item<double>(), 4.0);
}

// A backward inside a hook that runs through nodes the outer backward has reached and not yet
// run: each task keeps its own state for them (Note [Task state]).
TEST(Hooks, ReentrantBackwardThroughTheOuterGraph) {
  tensor x = leaf({2.});
  tensor h = x * x;
  tensor y = h * 3.0;
  double inner = 0;
  y.register_hook([&](const tensor& g) {
    mg::enable_grad_guard on;
    inner = mg::autograd::grad({h.sum()}, {x}, {}, {.retain_graph = true})[0].item<double>();
    return g;
  });
  y.sum().backward();
  EXPECT_DOUBLE_EQ(inner, 4.0);                     // d(x^2)/dx at 2
  EXPECT_DOUBLE_EQ(x.grad().item<double>(), 12.0);  // d(3 x^2)/dx at 2
}

// ---- what torch.autograd's own tests check (test_autograd.py, named in each comment) ----------

// test_hooks (the log of hook kinds): backward(inputs = {b}) with b a non-leaf runs b's tensor
// hook and then the pre-hooks of b.grad_fn; b.grad sees only the tensor hook (retain_grad runs
// before the pre-hooks).
TEST(Hooks, BackwardWithANonLeafInputRunsItsNodesPrehooks) {
  std::vector<int> log;
  const auto hook1 = [&](const tensor& g) {
    log.push_back(1);
    return g * 3.0;
  };
  const auto hook2 = [&](const tensor_list& gs) -> std::optional<tensor_list> {
    log.push_back(2);
    tensor_list r;
    for (const auto& g : gs) r.push_back(g * 2.0);
    return r;
  };
  tensor a = mg::tensor(1.0, mg::f64).requires_grad_();
  tensor b = a.clone();
  b.grad_fn()->register_prehook(hook2);
  b.register_hook(hook1);
  b.grad_fn()->register_prehook(hook2);
  const auto acc = b.grad_fn()->next_functions()[0].function;
  a.register_hook(hook1);
  acc->register_prehook(hook2);
  a.register_hook(hook1);

  b.sum().backward({.retain_graph = true});
  EXPECT_EQ(log, (std::vector<int>{1, 2, 2, 1, 1, 2}));
  EXPECT_DOUBLE_EQ(a.grad().item<double>(), 3.0 * 2 * 2 * 3 * 3 * 2);

  log.clear();
  (void)mg::autograd::grad({b.sum()}, {a}, {}, {.retain_graph = true});
  EXPECT_EQ(log, (std::vector<int>{1, 2, 2, 1, 1}));

  log.clear();
  b.sum().backward(mg::backward_options{.inputs = {b}});
  EXPECT_EQ(log, (std::vector<int>{1, 2, 2}));
  EXPECT_DOUBLE_EQ(b.grad().item<double>(), 3.0);
}

// test_post_accumulate_grad_hook_*: called after .grad was accumulated, with the leaf; only on
// leaves that require grad; removable; an optimiser step inside it.
TEST(Hooks, PostAccumulateGradHook) {
  tensor w = tensor({1., 2.}, mg::f64).requires_grad_();
  std::vector<std::vector<double>> seen;
  auto h = w.register_post_accumulate_grad_hook(
      [&](const tensor& p) { seen.push_back(values(p.grad())); });
  (w * w).sum().backward();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], (std::vector<double>{2, 4}));
  (w * 3.0).sum().backward();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1], (std::vector<double>{5, 7}));  // after accumulation
  // autograd::grad accumulates nothing: the hook does not run
  (void)mg::autograd::grad({(w * w).sum()}, {w});
  EXPECT_EQ(seen.size(), 2u);
  h.remove();
  (w * w).sum().backward();
  EXPECT_EQ(seen.size(), 2u);

  // an SGD step during backward
  tensor v = tensor({1., -1.}, mg::f64).requires_grad_();
  v.register_post_accumulate_grad_hook([](const tensor& p) {
    mg::no_grad_guard ng;
    p.detach().sub_(p.grad() * 0.5);
    p.detach().grad();  // the tensor stays usable
  });
  (v * v).sum().backward();
  EXPECT_EQ(values(v), (std::vector<double>{0, 0}));  // v - 0.5 * 2v

  tensor nl = w * 2.0;
  expect_error([&] { nl.register_post_accumulate_grad_hook([](const tensor&) {}); },
               {"register_post_accumulate_grad_hook", "not a leaf", "register_hook"});
  expect_error(
      [] { tensor({1.}, mg::f64).register_post_accumulate_grad_hook([](const tensor&) {}); },
      {"register_post_accumulate_grad_hook", "does not require grad"});
}

// test_multi_grad_any_hooks: mode any calls the hook once per backward, with the first gradient
// computed (b's: b is used last in the forward, so its node runs first).
TEST(Hooks, MultiGradHookModeAny) {
  tensor a = tensor({1., 2.}, mg::f64).requires_grad_();
  tensor b = tensor({3., 4.}, mg::f64).requires_grad_();
  tensor c = mg::tensor(5.0, mg::f64);  // requires no grad: skipped, as torch skips it
  int calls = 0;
  std::vector<double> first;
  auto h = mg::autograd::register_multi_grad_hook(
      {a, b, c},
      [&](const tensor& g) {
        ++calls;
        first = values(g);
      },
      mg::autograd::multi_grad_mode::any);
  tensor la = (a * 2.0).sum();
  tensor lb = (b * 3.0).sum();  // recorded last: its nodes run first
  (la + lb).backward();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(first, (std::vector<double>{3, 3}));
  (a * 5.0).sum().backward();  // b is not reached
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(first, (std::vector<double>{5, 5}));
  h.remove();
  (a * 5.0).sum().backward();
  EXPECT_EQ(calls, 2);
  expect_error(
      [&] {
        (void)mg::autograd::register_multi_grad_hook(
            {a}, [](const tensor&) {}, mg::autograd::multi_grad_mode::all);
      },
      {"register_multi_grad_hook", "mode all", "multi_grad_mode::any"});
}

// A node's post-hooks see one gradient per operand, as next_functions() lists them: undefined
// at a number operand's position, and a replacement is read from the tensor operand's position.
TEST(Hooks, PostHooksSeeOneGradientPerOperand) {
  tensor x = leaf({1., 2.});
  tensor y = 3.0 * x;  // the number is operand 0
  std::size_t seen = 0;
  bool number_undefined = false;
  y.grad_fn()->register_hook(
      [&](const tensor_list& gi, const tensor_list&) -> std::optional<tensor_list> {
        seen = gi.size();
        number_undefined = !gi[0].defined();
        return tensor_list{tensor{}, gi[1] * 10.0};
      });
  y.sum().backward();
  EXPECT_EQ(seen, 2u);
  EXPECT_TRUE(number_undefined);
  EXPECT_EQ(values(x.grad()), (std::vector<double>{30, 30}));
}
