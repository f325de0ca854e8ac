// The bridge: mg::grad on mg::tensor arguments, and mg::fuse (a static callable recorded as one
// runtime node), checked against finite differences (first and second order) and against the
// same function run op by op on the runtime engine.
#include <cmath>

#include <gtest/gtest.h>

#include <metagrad/metagrad.hpp>

#include "support/harness_runtime.hpp"

using mg_test::check_arrays;

namespace {
const auto layer = [](auto x, auto w, auto b) { return tanh(matmul(x, w) + b) * 0.5; };
const auto smooth = [](auto x, auto y) { return (sin(x) * y + exp(x * y)) / (1 + x * x); };
}  // namespace

TEST(Fuse, RecordsOneNode) {
  mg::manual_seed(1);
  auto x = mg::randn({2, 3}, {.dtype = mg::f64, .requires_grad = true});
  auto y = mg::randn({2, 3}, {.dtype = mg::f64, .requires_grad = true});
  const mg::tensor z = mg::fuse(smooth)(x, y);
  ASSERT_TRUE(z.grad_fn());
  EXPECT_STREQ(z.grad_fn()->name(), "fused");
  // its inputs are the leaves themselves: no per-op nodes in between
  EXPECT_EQ(z.grad_fn()->next_functions().size(), 2u);
  // no node when nothing requires grad
  mg::no_grad_guard ng;
  EXPECT_FALSE(mg::fuse(smooth)(x, y).grad_fn());
}

TEST(Fuse, MatchesTheRuntimeEngineOpByOp) {
  mg::manual_seed(2);
  for (mg::dtype d : {mg::f64, mg::f32}) {
    auto x = mg::randn({4, 3}, {.dtype = d, .requires_grad = true});
    auto w = mg::randn({3, 2}, {.dtype = d, .requires_grad = true});
    auto b = mg::randn({2}, {.dtype = d, .requires_grad = true});
    const auto fused = mg::fuse(layer)(x, w, b);
    const auto eager = layer(x, w, b);
    const double tol = d == mg::f64 ? 1e-13 : 1e-5;
    const auto fv = fused.to_xtensor<double>(), ev = eager.to_xtensor<double>();
    for (std::size_t i = 0; i < fv.size(); ++i) EXPECT_NEAR(fv.flat(i), ev.flat(i), tol);
    EXPECT_EQ(fused.dtype(), d);
    const auto gf = mg::autograd::grad({mg::sum(fused * fused)}, {x, w, b});
    const auto ge = mg::autograd::grad({mg::sum(eager * eager)}, {x, w, b});
    for (std::size_t k = 0; k < 3; ++k) {
      EXPECT_EQ(gf[k].shape(), ge[k].shape());
      const auto a = gf[k].to_xtensor<double>(), c = ge[k].to_xtensor<double>();
      for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a.flat(i), c.flat(i), tol) << k;
    }
  }
}

TEST(Fuse, FiniteDifferencesFirstAndSecondOrder) {
  // second order runs the generated sweep on tensors under create_graph
  check_arrays([](const mg::tensor_list& t) { return mg::fuse(layer)(t[0], t[1], t[2]); },
               {{4, 3}, {3, 2}, {2}});
  check_arrays([](const mg::tensor_list& t) { return mg::fuse(smooth)(t[0], t[1]); },
               {{2, 3}, {3}});  // broadcasting inside the fused node
  check_arrays([](const mg::tensor_list& t) { return mg::fuse(smooth)(t[0], t[1]); }, {{5}, {5}},
               {.dtype = mg::f32});
  // a full sum of an elementwise expression over equal shapes: value and gradients come from
  // one fused loop in forward, and backward scales the kept gradients
  const auto total = [](auto x, auto y) { return sum(smooth(x, y)); };
  check_arrays([&](const mg::tensor_list& t) { return mg::fuse(total)(t[0], t[1]); },
               {{3, 4}, {3, 4}});
  check_arrays([&](const mg::tensor_list& t) { return mg::fuse(total)(t[0], t[1]); }, {{13}, {13}},
               {.dtype = mg::f32});
}

TEST(GradOnTensors, SameCallableAsTheStaticEngine) {
  const xt::xarray<double> xa = {{0.3, -1.2, 0.8}, {1.5, 0.1, -0.4}};
  const xt::xarray<double> ya = {0.7, 0.2, -0.9};
  auto f = [](auto x, auto y) { return sum(sin(x) * y + exp(x * y)); };
  auto [v_static, g_static] = mg::value_and_grad(f)(xa, ya);
  auto [v_runtime, g_runtime] = mg::value_and_grad(f)(mg::tensor(xa), mg::tensor(ya));
  EXPECT_NEAR(v_runtime.item<double>(), v_static, 1e-12);
  const auto gx = std::get<0>(g_runtime).to_xtensor<double>();
  const auto gy = std::get<1>(g_runtime).to_xtensor<double>();
  for (std::size_t i = 0; i < gx.size(); ++i)
    EXPECT_NEAR(gx.flat(i), std::get<0>(g_static).flat(i), 1e-12);
  for (std::size_t i = 0; i < gy.size(); ++i)
    EXPECT_NEAR(gy.flat(i), std::get<1>(g_static).flat(i), 1e-12);
  // a number argument: its gradient is a number
  auto gs = mg::grad<1>([](auto x, auto s) { return sum(x * s); })(mg::tensor(xa), 2.0);
  static_assert(std::is_same_v<decltype(gs), double>);
  EXPECT_NEAR(gs, xt::sum(xa)(), 1e-12);
  // the gradient is that of f at the argument, not through the argument's own history; it
  // stays differentiable with respect to that history (Note [Nested transforms])
  auto w = mg::tensor(xa).requires_grad_();
  auto gw = mg::grad([](auto x) { return sum(x * x); })(w * 2.0);
  EXPECT_NEAR(gw.to_xtensor<double>()(0, 0), 4 * xa(0, 0), 1e-12);
  EXPECT_FALSE(w.grad().defined());
  EXPECT_TRUE(gw.requires_grad());
  mg_test::expect_error([&] { mg::grad([](auto x) { return x * x; })(mg::tensor(xa)); },
                        {"grad", "[2,3]", "mg::sum"});
}
