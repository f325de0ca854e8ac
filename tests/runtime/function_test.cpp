// Custom operations on mg::tensor: ctx-free ops (mg::StaticOp) and mg::Function structs.
#include <cmath>
#include <tuple>

#include <gtest/gtest.h>

#include <metagrad/function.hpp>
#include <metagrad/gradcheck.hpp>
#include <metagrad/static.hpp>

#include "support/custom_ops.hpp"
#include "support/harness_runtime.hpp"

using mg::tensor;
using mg::tensor_list;
using mg_test::check_arrays;
using mg_test::check_runtime;
using mg_test::expect_error;
using mg_test::values;

using mg_test::hypot2;
using mg_test::softplus;

TEST(RuntimeStaticOp, SameStructInBothEngines) {
  check_runtime([](auto x) { return mg::apply<softplus>(x * x); }, 0.5);
  check_runtime([](auto a, auto b) { return mg::apply<hypot2>(a, b) * a; }, 0.6, -1.7);
  tensor x = mg::tensor(0.5, mg::f64).requires_grad_();
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
  tensor x = mg::tensor(0.7, mg::f64).requires_grad_();
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
  tensor a = mg::tensor(3.0, mg::f64).requires_grad_(), b(4.0, mg::f64);
  mg::apply<scaled_mul>(a, b).backward();
  EXPECT_DOUBLE_EQ(a.grad().item<double>(), 8.0);
}

TEST(RuntimeFunction, NoRecordingWithoutGrad) {
  tensor a(3.0, mg::f64), b(4.0, mg::f64);
  tensor y = mg::apply<scaled_mul>(a, b);
  EXPECT_FALSE(y.requires_grad());
  EXPECT_DOUBLE_EQ(y.item<double>(), 24.0);
}

TEST(RuntimeFunction, Errors) {
  tensor a = mg::tensor(1.0, mg::f64).requires_grad_(),
         b = mg::tensor(2.0, mg::f64).requires_grad_();
  expect_error([&] { mg::apply<wrong_count>(a, b).backward(); },
               {"wrong_count", "backward returned 1 gradient(s)", "forward took 2 differentiable"});
  expect_error([&] { mg::apply<wrong_saved>(a).backward(); }, {"saved_tensors<2>", "saved 1"});
  tensor y = mg::apply<my_exp>(a);
  y.backward();
  expect_error([&] { y.backward(); }, {"second time", "my_exp", ".retain_graph = true"});
  // a saved input modified in place
  tensor c = mg::tensor(2.0, mg::f64);
  tensor z = mg::apply<scaled_mul>(a, c);
  c.add_(tensor(1.0, mg::f64));
  expect_error([&] { z.backward(); }, {"in-place", "scaled_mul"});
}

TEST(RuntimeFunction, NoCycleThroughTheSavedOutput) {
  std::weak_ptr<mg::autograd::node> n;
  {
    tensor x = mg::tensor(0.7, mg::f64).requires_grad_();
    tensor y = mg::apply<my_exp>(x);
    n = y.grad_fn();
  }
  EXPECT_TRUE(n.expired());
}

// ---- the torch.autograd.Function docs' examples and the rest of the context --------------------

// The Func of the torch.autograd.Function docs: a non-tensor input z (typed state), four saved
// tensors, once_differentiable.
struct seed_func {
  static constexpr const char* name = "seed_func";
  static constexpr bool once_differentiable = true;
  struct state {
    int z = 0;
  };
  static tensor forward(mg::context_with<state>& ctx, const tensor& x, const tensor& y, int z) {
    tensor w = x * z;
    tensor out = x * y + y * z + w * y;
    ctx.save_for_backward(x, y, w, out);
    ctx.state.z = z;  // z is not a tensor
    return out;
  }
  static tensor_list backward(mg::context_with<state>& ctx, const tensor_list& g) {
    auto [x, y, w, out] = ctx.saved_tensors<4>();
    const int z = ctx.state.z;
    return {g[0] * (y + y * z), g[0] * (x + z + w), tensor{}};  // gz: an extra undefined one
  }
};
static_assert(mg::Function<seed_func>);

TEST(RuntimeFunction, SeedFuncWithANumberInputAndState) {
  tensor a = mg::tensor(1.0, mg::f64).requires_grad_(),
         b = mg::tensor(2.0, mg::f64).requires_grad_();
  tensor d = mg::apply<seed_func>(a, b, 4);
  EXPECT_DOUBLE_EQ(d.item<double>(), 1 * 2 + 2 * 4 + 4 * 2);
  d.backward();
  EXPECT_DOUBLE_EQ(a.grad().item<double>(), 2 + 2 * 4);  // y + y z
  EXPECT_DOUBLE_EQ(b.grad().item<double>(), 1 + 4 + 4);  // x + z + w
  check_arrays([](const tensor_list& x) { return mg::apply<seed_func>(x[0], x[1], 3); },
               {{2, 3}, {2, 3}}, {.second_order = false});
}

TEST(RuntimeFunction, OnceDifferentiableRefusesDoubleBackward) {
  tensor a = mg::tensor(1.0, mg::f64).requires_grad_(),
         b = mg::tensor(2.0, mg::f64).requires_grad_();
  tensor d = mg::apply<seed_func>(a, b, 4);
  // the gradient reaching seed_func requires grad (2 d), so its result is marked
  auto ga = mg::autograd::grad({d * d}, {a}, {}, {.create_graph = true})[0];
  EXPECT_DOUBLE_EQ(ga.item<double>(), 2 * 18.0 * 10.0);
  EXPECT_TRUE(ga.requires_grad());
  expect_error([&] { mg::autograd::grad({ga}, {a}); },
               {"seed_func", "once_differentiable", "cannot be differentiated again"});
}

// The Exp of the torch.autograd.Function docs.
struct exp_fn {
  static tensor forward(mg::context& ctx, const tensor& i) {
    tensor result = mg::exp(i);
    ctx.save_for_backward(result);
    return result;
  }
  static tensor_list backward(mg::context& ctx, const tensor_list& g) {
    auto [result] = ctx.saved_tensors<1>();
    return {g[0] * result};
  }
};

TEST(RuntimeFunction, SeedExp) {
  check_arrays([](const tensor_list& x) { return mg::apply<exp_fn>(x[0]); }, {{3, 2}});
  EXPECT_STREQ(mg::apply<exp_fn>(mg::tensor(1.0, mg::f64).requires_grad_()).grad_fn()->name(),
               "exp_fn");
}

// Two outputs, the second not differentiable (the Function docs' sort example, with an index
// output).
struct with_index {
  static constexpr const char* name = "with_index";
  static std::tuple<tensor, tensor, tensor> forward(mg::context& ctx, const tensor& x) {
    tensor y = x * 3.0;
    tensor idx = mg::zeros(x.shape(), {.dtype = mg::i64});  // integer: never differentiable
    tensor flag = x * 0.0;                                  // floating, declared not
    ctx.mark_non_differentiable(flag);
    ctx.save_for_backward(x, idx);
    return {y, idx, flag};
  }
  static tensor_list backward(mg::context& ctx, const tensor_list& g) {
    EXPECT_EQ(g.size(), 3u);
    EXPECT_TRUE(g[2].defined());  // materialized: zeros of the output's shape
    EXPECT_EQ(values(g[2]), (std::vector<double>{0, 0}));
    auto [x, idx] = ctx.saved_tensors<2>();
    EXPECT_FALSE(idx.requires_grad());
    return {g[0] * 3.0};
  }
};

TEST(RuntimeFunction, SeveralOutputsAndNonDifferentiable) {
  tensor x = mg::tensor({1.0, 2.0}, mg::f64).requires_grad_();
  auto [y, i, flag] = mg::apply<with_index>(x);
  EXPECT_TRUE(y.requires_grad());
  EXPECT_FALSE(i.requires_grad());
  EXPECT_FALSE(flag.requires_grad());
  EXPECT_EQ(i.dtype(), mg::i64);
  EXPECT_EQ(y.grad_fn()->num_outputs(), 3u);
  mg::sum(y).backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{3, 3}));
}

// The set_materialize_grads examples of the torch.autograd.Function docs.
struct simple_func {
  static std::tuple<tensor, tensor> forward(mg::context&, const tensor& x) {
    return {x.clone(), x.clone()};
  }
  static tensor_list backward(mg::context&, const tensor_list& g) {
    return {g[0] + g[1]};  // no check for undefined needed
  }
};
struct lazy_func {
  static inline int undefined_seen = 0;
  static std::tuple<tensor, tensor> forward(mg::context& ctx, const tensor& x) {
    ctx.set_materialize_grads(false);
    ctx.save_for_backward(x);
    return {x.clone(), x.clone()};
  }
  static tensor_list backward(mg::context& ctx, const tensor_list& g) {
    auto [x] = ctx.saved_tensors<1>();
    tensor grad_input = mg::zeros_like(x);
    if (g[0].defined()) grad_input = grad_input + g[0];
    if (g[1].defined()) grad_input = grad_input + g[1];
    undefined_seen += !g[0].defined() + !g[1].defined();
    return {grad_input};
  }
};

TEST(RuntimeFunction, MaterializeGrads) {
  tensor a = mg::tensor(1.0, mg::f64).requires_grad_();
  auto [b, c] = mg::apply<simple_func>(a);
  (b * 5.0).backward();
  EXPECT_DOUBLE_EQ(a.grad().item<double>(), 5.0);
  tensor a2 = mg::tensor(1.0, mg::f64).requires_grad_();
  auto [b2, unused] = mg::apply<lazy_func>(a2);  // induces g[1] to be undefined
  (b2 * 7.0).backward();
  EXPECT_EQ(lazy_func::undefined_seen, 1);
  EXPECT_DOUBLE_EQ(a2.grad().item<double>(), 7.0);
}

// The Function docs' mark_dirty example: forward modifies its input in place.
struct add_one_in_place {
  static constexpr const char* name = "add_one_in_place";
  static constexpr bool once_differentiable = true;
  static tensor forward(mg::context& ctx, const tensor& x) {
    tensor y = x;
    y.add_(1.0);
    ctx.mark_dirty(x);
    return x;
  }
  static tensor_list backward(mg::context&, const tensor_list& g) { return {g[0]}; }
};

TEST(RuntimeFunction, MarkDirty) {
  tensor leaf = mg::tensor(1.0, mg::f64).requires_grad_();
  tensor a = leaf.clone();
  tensor b = a * a;
  const auto version = a.version();
  tensor r = mg::apply<add_one_in_place>(a);
  EXPECT_GT(a.version(), version);
  EXPECT_DOUBLE_EQ(a.item<double>(), 2.0);
  EXPECT_EQ(r.impl(), a.impl());                          // the input itself is returned...
  EXPECT_STREQ(a.grad_fn()->name(), "add_one_in_place");  // ...with its history rewritten
  expect_error([&] { b.backward(); }, {"in-place", "mul"});
  (r * 3.0).backward();
  EXPECT_DOUBLE_EQ(leaf.grad().item<double>(), 3.0);
  expect_error([&] { mg::apply<add_one_in_place>(leaf); },
               {"add_one_in_place", "leaf tensor that requires grad", "clone()"});
}

// Containers of tensors and numbers: backward returns one gradient per tensor, lists flattened.
struct weighted_sum {
  static constexpr const char* name = "weighted_sum";
  static tensor forward(mg::context& ctx, const tensor_list& xs, double k, const tensor& b) {
    tensor s = b * 1.0;
    for (const auto& x : xs) s = s + x * k;
    ctx.save_for_backward(xs);
    return s;
  }
  static tensor_list backward(mg::context& ctx, const tensor_list& g) {
    const tensor_list saved = ctx.saved_tensors();
    tensor_list r;
    for (std::size_t i = 0; i < saved.size(); ++i)
      r.push_back(ctx.needs_input_grad(i) ? g[0] * 2.5 : tensor{});
    r.push_back(g[0]);
    return r;
  }
};

TEST(RuntimeFunction, ListAndNumberInputs) {
  tensor x0 = mg::tensor({1.0, 2.0}, mg::f64).requires_grad_(),
         x1 = mg::tensor({3.0, 4.0}, mg::f64);
  tensor x2 = mg::tensor({5.0, 6.0}, mg::f64).requires_grad_(),
         b = mg::tensor(1.0, mg::f64).requires_grad_();
  tensor y = mg::apply<weighted_sum>(tensor_list{x0, x1, x2}, 2.5, b);
  EXPECT_EQ(values(y), (std::vector<double>{1 + 2.5 * 9, 1 + 2.5 * 12}));
  mg::sum(y).backward();
  EXPECT_EQ(values(x0.grad()), (std::vector<double>{2.5, 2.5}));
  EXPECT_FALSE(x1.grad().defined());
  EXPECT_EQ(values(x2.grad()), (std::vector<double>{2.5, 2.5}));
  EXPECT_DOUBLE_EQ(b.grad().item<double>(), 2.0);  // summed back to b's shape
}

// The split form, with both setup_context signatures, and vjp in place of backward.
struct split_mul {
  static tensor forward(const tensor& a, const tensor& b) { return a * b; }
  static void setup_context(mg::context& ctx, const tensor_list& inputs, const tensor_list&) {
    ctx.save_for_backward(inputs[0], inputs[1]);
  }
  static tensor_list vjp(mg::context& ctx, const tensor_list& g) {
    auto [a, b] = ctx.saved_tensors<2>();
    return {g[0] * b, g[0] * a};
  }
};
struct split_scale {
  struct state {
    double k = 0;
  };
  static tensor forward(const tensor& x, double k) { return x * k; }
  static void setup_context(mg::context_with<state>& ctx,
                            const std::tuple<const tensor&, const double&>& args,
                            const tensor_list&) {
    ctx.state.k = std::get<1>(args);
  }
  static tensor backward(mg::context_with<state>& ctx, const tensor_list& g) {
    return g[0] * ctx.state.k;  // a single tensor for a single input
  }
};

TEST(RuntimeFunction, SetupContextAndVjp) {
  check_arrays([](const tensor_list& x) { return mg::apply<split_mul>(x[0], x[1]); },
               {{2, 2}, {2}});
  check_arrays([](const tensor_list& x) { return mg::apply<split_scale>(x[0], -1.5); }, {{3}});
}

struct wrong_shape {
  static constexpr const char* name = "wrong_shape";
  static tensor forward(mg::context&, const tensor& x) { return x * 2.0; }
  static tensor_list backward(mg::context&, const tensor_list&) { return {mg::ones({3})}; }
};
struct f32_gradient {
  static tensor forward(mg::context&, const tensor& x) { return x * 2.0; }
  static tensor_list backward(mg::context&, const tensor_list& g) {
    return {(g[0] * 2.0).to(mg::f32)};
  }
};
struct extra_gradient {
  static constexpr const char* name = "extra_gradient";
  static tensor forward(mg::context&, const tensor& x) { return x * 2.0; }
  static tensor_list backward(mg::context&, const tensor_list& g) { return {g[0], g[0]}; }
};

TEST(RuntimeFunction, ReturnedGradientsAreChecked) {
  tensor x = mg::tensor({1.0, 2.0}, mg::f64).requires_grad_();
  expect_error([&] { mg::sum(mg::apply<wrong_shape>(x)).backward(); },
               {"wrong_shape", "shape [3]", "shape [2]"});
  expect_error([&] { mg::sum(mg::apply<extra_gradient>(x)).backward(); },
               {"extra_gradient", "returned 2 gradient(s)", "1 differentiable"});
  mg::sum(mg::apply<f32_gradient>(x)).backward();  // another floating dtype is cast
  EXPECT_EQ(x.grad().dtype(), mg::f64);
  EXPECT_EQ(values(x.grad()), (std::vector<double>{2, 2}));
}

struct dirty_not_returned {
  static constexpr const char* name = "dirty_not_returned";
  static tensor forward(mg::context& ctx, const tensor& x) {
    ctx.mark_dirty(x);
    return x * 2.0;
  }
  static tensor_list backward(mg::context&, const tensor_list& g) { return {g[0]}; }
};
struct marks_an_input {
  static constexpr const char* name = "marks_an_input";
  static tensor forward(mg::context& ctx, const tensor& x) {
    ctx.mark_non_differentiable(x);
    return x * 2.0;
  }
  static tensor_list backward(mg::context&, const tensor_list& g) { return {g[0]}; }
};

TEST(RuntimeFunction, ContextMisuseIsAnError) {
  tensor x = mg::tensor(1.0, mg::f64).requires_grad_();
  expect_error([&] { mg::apply<dirty_not_returned>(x * 1.0); },
               {"dirty_not_returned", "mark_dirty", "did not return"});
  expect_error([&] { mg::apply<marks_an_input>(x); },
               {"marks_an_input", "mark_non_differentiable", "only outputs"});
}

TEST(RuntimeFunction, GradcheckOnSeveralOutputs) {
  struct two_outputs {
    static std::tuple<tensor, tensor> forward(mg::context& ctx, const tensor& a, const tensor& b) {
      ctx.save_for_backward(a, b);
      return {a * b, mg::sin(a)};
    }
    static tensor_list backward(mg::context& ctx, const tensor_list& g) {
      auto [a, b] = ctx.saved_tensors<2>();
      return {g[0] * b + g[1] * mg::cos(a), g[0] * a};
    }
  };
  const auto f = [](const tensor_list& x) {
    auto [p, s] = mg::apply<two_outputs>(x[0], x[1]);
    return tensor_list{p, s};
  };
  const tensor_list in{mg::tensor({0.3, -1.2}, mg::f64).requires_grad_(),
                       mg::tensor({2.0, 0.5}, mg::f64).requires_grad_()};
  EXPECT_TRUE(mg::autograd::gradcheck(f, in));
  EXPECT_TRUE(mg::autograd::gradgradcheck(f, in));
}

// test_return_duplicate: a Function returning one tensor twice gives one tensor; its gradient
// (through both uses) is right, first and second order.
namespace {
struct double_duplicate {
  static tensor_list forward(mg::context&, const tensor& x) {
    tensor out = x * 2.0;
    return {out, out};
  }
  static tensor_list backward(mg::context&, const tensor_list& g) {
    return {g[0] * 2.0 + g[1] * 2.0};
  }
};
}  // namespace

TEST(RuntimeFunction, ReturningOneTensorTwiceGivesOneTensor) {
  tensor x = tensor({{0.5, -1.0}, {2.0, 3.0}}, mg::f64).requires_grad_();
  const auto fn = [](const tensor_list& in) {
    auto outs = mg::apply<double_duplicate>(in[0]);
    EXPECT_EQ(outs[0].impl(), outs[1].impl());
    return outs[0] + outs[1];
  };
  EXPECT_TRUE(mg::autograd::gradcheck(fn, {x}));
  EXPECT_TRUE(mg::autograd::gradgradcheck(fn, {x}));
  fn({x}).sum().backward();
  EXPECT_EQ(values(x.grad()), (std::vector<double>{4, 4, 4, 4}));  // d/dx (2x + 2x)
}
