// Forward-mode AD (mg::forward_ad): tangents of every op family against central differences,
// mg::Function jvp (the save_for_forward example of the torch.autograd.Function docs), levels and
// errors.
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include <metagrad/metagrad.hpp>

#include "support/harness_runtime.hpp"

namespace fw = mg::forward_ad;
using mg::tensor;
using mg::tensor_list;
using mg_test::expect_error;
using mg_test::values;

namespace {

using fn = std::function<tensor(const tensor_list&)>;

// The tangent of f at x along v (every input dual) against (f(x + hv) - f(x - hv)) / 2h, in f64.
void check_jvp(const fn& f, const std::vector<mg::shape_t>& shapes, double lo = -1.5,
               double hi = 1.5) {
  std::mt19937_64 gen(7);
  tensor_list x, v;
  for (const auto& s : shapes) {
    x.emplace_back(mg_test::uniform(s, lo, hi, gen));
    v.emplace_back(mg_test::uniform(s, -1, 1, gen));
  }
  tensor tangent, primal;
  {
    fw::dual_level level;
    tensor_list duals;
    for (std::size_t i = 0; i < x.size(); ++i) duals.push_back(fw::make_dual(x[i], v[i]));
    auto [p, t] = fw::unpack_dual(f(duals));
    ASSERT_TRUE(t.defined()) << "no tangent came out";
    primal = p;
    tangent = t;
  }
  const double h = 1e-6;
  auto shifted = [&](double sign) {
    tensor_list xs;
    for (std::size_t i = 0; i < x.size(); ++i) xs.push_back(x[i] + sign * h * v[i]);
    return values(f(xs));
  };
  const auto plus = shifted(1), minus = shifted(-1), t = values(tangent);
  ASSERT_EQ(t.size(), plus.size());
  EXPECT_EQ(values(primal), values(f(x)));
  for (std::size_t j = 0; j < t.size(); ++j) {
    const double fd = (plus[j] - minus[j]) / (2 * h);
    EXPECT_NEAR(t[j], fd, 1e-6 * (1 + std::fabs(fd))) << "element " << j;
  }
}

}  // namespace

TEST(ForwardAD, ElementwiseFromTheBackward) {
  check_jvp([](const tensor_list& x) { return mg::sin(x[0]) * x[0]; }, {{3, 2}});
  check_jvp([](const tensor_list& x) { return mg::exp(x[0]) / (1.0 + mg::square(x[1])); },
            {{2, 3}, {2, 3}});
  check_jvp([](const tensor_list& x) { return x[0] * x[1] - mg::tanh(x[1]); }, {{3}, {2, 3}});
  check_jvp([](const tensor_list& x) { return mg::pow(x[0], 3) + mg::sigmoid(x[0]); }, {{4}});
  check_jvp([](const tensor_list& x) { return mg::log(x[0]) * mg::sqrt(x[0]); }, {{4}}, 0.5, 2);
  check_jvp([](const tensor_list& x) { return mg::where(x[0] > 0.0, x[0] * 2.0, x[1]); },
            {{5}, {5}});
  check_jvp([](const tensor_list& x) { return mg::maximum(x[0], x[1]) + mg::abs(x[0]); },
            {{5}, {5}});
}

TEST(ForwardAD, ShapedOpsByTheDoubleVjp) {
  check_jvp([](const tensor_list& x) { return mg::sum(x[0] * x[0]); }, {{2, 3}});
  check_jvp([](const tensor_list& x) { return mg::mean(x[0], 1) * mg::sum(x[0], 0, false).sum(); },
            {{2, 3}});
  check_jvp([](const tensor_list& x) { return mg::matmul(x[0], x[1]); }, {{2, 3}, {3, 4}});
  check_jvp([](const tensor_list& x) { return mg::softmax(x[0], 1); }, {{2, 4}});
  check_jvp([](const tensor_list& x) { return mg::logsumexp(x[0], 0); }, {{3, 2}});
  check_jvp([](const tensor_list& x) { return mg::max(x[0], 1).values; }, {{3, 4}});
  check_jvp([](const tensor_list& x) { return mg::norm(x[0]) * mg::var(x[0]); }, {{5}});
  check_jvp([](const tensor_list& x) { return mg::prod(x[0], 0); }, {{3, 2}});
  check_jvp(
      [](const tensor_list& x) {
        return x[0].reshape({3, 2}).t().permute({1, 0}).unsqueeze(0).expand({2, 3, 2});
      },
      {{2, 3}});
  check_jvp(
      [](const tensor_list& x) {
        return mg::slice(x[0], 1, 1, 3) * x[0].select(1, 0).unsqueeze(1);
      },
      {{2, 4}});
  check_jvp(
      [](const tensor_list& x) {
        return x[0].index_select(0, mg::tensor({2.0, 0.0, 2.0}, mg::f64).to(mg::i64));
      },
      {{3, 2}});
  check_jvp([](const tensor_list& x) { return mg::cat({x[0], x[1] * 2.0}, 0); }, {{2, 3}, {1, 3}});
  check_jvp([](const tensor_list& x) { return mg::stack({x[0], mg::cos(x[1])}, 1); }, {{3}, {3}});
}

// matmul's tangent has the output's shape where its backward gives a gradient in a broadcast
// shape (batch dimensions broadcast, a 1-D operand promoted): every pair of 1-D, 2-D and 3-D
// operands with size-1 and broadcast batch dimensions, both operands dual and only one.
TEST(ForwardAD, MatmulTangentsInTheOutputsShape) {
  std::mt19937_64 gen(11);
  for (const std::int64_t k : {1, 2}) {
    std::vector<mg::shape_t> as{{k}}, bs{{k}};
    for (const std::int64_t m : {1, 3}) {
      as.push_back({m, k});
      bs.push_back({k, m});
      for (const std::int64_t batch : {1, 2}) {
        as.push_back({batch, m, k});
        bs.push_back({batch, k, m});
      }
    }
    for (const auto& sa : as) {
      for (const auto& sb : bs) {
        SCOPED_TRACE(mg::detail::shape_string(sa) + " @ " + mg::detail::shape_string(sb));
        check_jvp([](const tensor_list& x) { return mg::matmul(x[0], x[1]); }, {sa, sb});
        const tensor a(mg_test::uniform(sa, -1, 1, gen)), b(mg_test::uniform(sb, -1, 1, gen));
        check_jvp([&](const tensor_list& x) { return mg::matmul(x[0], b); }, {sa});
        check_jvp([&](const tensor_list& x) { return mg::matmul(a, x[0]); }, {sb});
      }
    }
  }
  // an expanded operand: [2,1,1] @ [1,1], both the same dual tensor
  check_jvp(
      [](const tensor_list& x) {
        return mg::matmul(mg::expand(x[0], {2, 1, 1}), x[0]);
      },
      {{1, 1}});
  fw::dual_level level;
  const tensor a = fw::make_dual(tensor({{2.0}}, mg::f64), tensor({{1.0}}, mg::f64));
  const tensor y = mg::matmul(a.expand({2, 1, 1}), a);  // a^2 per batch: the tangent 2a = 4
  EXPECT_EQ(fw::unpack_dual(y).tangent.shape(), (mg::shape_t{2, 1, 1}));
  EXPECT_EQ(values(fw::unpack_dual(y).tangent), (std::vector<double>{4, 4}));
}

TEST(ForwardAD, InputsWithoutTangentAndNoGradMode) {
  fw::dual_level level;
  tensor a = fw::make_dual(mg::tensor({1.0, 2.0}, mg::f64), mg::tensor({1.0, 0.0}, mg::f64));
  tensor b = mg::tensor({3.0, 4.0}, mg::f64);  // no tangent: a constant
  {
    mg::no_grad_guard ng;  // forward AD does not depend on grad mode
    auto [p, t] = fw::unpack_dual(a * b + b);
    EXPECT_EQ(values(p), (std::vector<double>{6, 12}));
    EXPECT_EQ(values(t), (std::vector<double>{3, 0}));
  }
  EXPECT_FALSE(fw::unpack_dual(b * 2.0).tangent.defined());
}

TEST(ForwardAD, InPlaceOpsKeepTheTangent) {
  fw::dual_level level;
  tensor x = fw::make_dual(mg::tensor({1.0, 2.0}, mg::f64), mg::tensor({1.0, 1.0}, mg::f64));
  tensor y = x * 1.0;
  y.mul_(3.0);
  y.exp_();
  auto [p, t] = fw::unpack_dual(y);
  EXPECT_NEAR(values(t)[0], 3 * std::exp(3.0), 1e-12);
  EXPECT_NEAR(values(t)[1], 3 * std::exp(6.0), 1e-9);
}

TEST(ForwardAD, FusedFunctionsGoOpByOp) {
  const auto f = mg::fuse([](auto a, auto b) { return mg::sum(a * mg::sin(b)); });
  check_jvp([&](const tensor_list& x) { return f(x[0], x[1]); }, {{4}, {4}});
}

TEST(ForwardAD, TangentsAreDifferentiable) {
  // forward-over-reverse: d/dx of the tangent of sum(x^3) along v is 6 x v (the Hessian times v)
  tensor x = mg::tensor({0.5, -1.0, 2.0}, mg::f64).requires_grad_();
  tensor v = mg::tensor({1.0, 2.0, -1.0}, mg::f64);
  fw::dual_level level;
  tensor y = mg::sum(mg::pow(fw::make_dual(x, v), 3));
  tensor t = fw::unpack_dual(y).tangent;
  EXPECT_NEAR(t.item<double>(), 3 * (0.25 * 1 + 1.0 * 2 + 4.0 * -1), 1e-12);
  ASSERT_TRUE(t.requires_grad());
  tensor hv = mg::autograd::grad({t}, {x})[0];
  EXPECT_EQ(values(hv), (std::vector<double>{6 * 0.5 * 1, 6 * -1.0 * 2, 6 * 2.0 * -1}));
}

// The torch.autograd.Function docs' save_for_forward example: jvp and vjp of x * y * z with a
// number z.
struct seed_fw_func {
  struct state {
    int z = 0;
  };
  static tensor forward(mg::context_with<state>& ctx, const tensor& x, const tensor& y, int z) {
    ctx.save_for_backward(x, y);
    ctx.save_for_forward(x, y);
    ctx.state.z = z;
    return x * y * z;
  }
  static tensor jvp(mg::context_with<state>& ctx, const tensor_list& t) {
    auto [x, y] = ctx.saved_for_forward<2>();
    return ctx.state.z * (y * t[0] + x * t[1]);
  }
  static tensor_list vjp(mg::context_with<state>& ctx, const tensor_list& g) {
    auto [x, y] = ctx.saved_tensors<2>();
    const int z = ctx.state.z;
    return {z * g[0] * y, z * g[0] * x, tensor{}};
  }
};

TEST(ForwardAD, FunctionJvp) {
  tensor a = mg::tensor(1.0, mg::f64).requires_grad_(), t = mg::tensor(1.0, mg::f64);
  tensor b = mg::tensor(2.0, mg::f64).requires_grad_();
  {
    fw::dual_level level;
    tensor a_dual = fw::make_dual(a, t);
    tensor d = mg::apply<seed_fw_func>(a_dual, b, 4);
    EXPECT_DOUBLE_EQ(d.item<double>(), 8.0);
    EXPECT_DOUBLE_EQ(fw::unpack_dual(d).tangent.item<double>(), 4 * 2.0 * 1.0);  // b's is zeros
    d.backward();  // the same Function differentiates in reverse mode too
  }
  EXPECT_DOUBLE_EQ(a.grad().item<double>(), 8.0);
  EXPECT_DOUBLE_EQ(b.grad().item<double>(), 4.0);
}

struct no_jvp {
  static constexpr const char* name = "no_jvp";
  static tensor forward(mg::context&, const tensor& x) { return x * 2.0; }
  static tensor_list backward(mg::context&, const tensor_list& g) { return {g[0] * 2.0}; }
};

TEST(ForwardAD, LevelsAndErrors) {
  tensor x = mg::tensor({1.0, 2.0}, mg::f64);
  expect_error([&] { fw::make_dual(x, mg::ones({2})); }, {"make_dual", "no dual level"});
  tensor kept;
  {
    fw::dual_level level;
    expect_error([] { fw::dual_level nested; }, {"dual_level", "nested"});
    expect_error([&] { fw::make_dual(x, mg::ones({3})); }, {"make_dual", "shape [3]", "shape [2]"});
    expect_error([&] { fw::make_dual(mg::tensor({1.0}, mg::f64).to(mg::i64), mg::ones({1})); },
                 {"make_dual", "i64"});
    kept = fw::make_dual(x, mg::ones({2})) * 2.0;
    EXPECT_TRUE(fw::unpack_dual(kept).tangent.defined());
    expect_error([&] { mg::apply<no_jvp>(fw::make_dual(x, mg::ones({2}))); }, {"no_jvp", "jvp"});
  }
  EXPECT_FALSE(fw::unpack_dual(kept).tangent.defined());  // cleared when the level closed
  fw::dual_level again;  // a new level may open after the first closed
}

// test_forward_ad (views and in-place, torch's Note [Forward Grad View/inplace]): the tangent of
// a view is a view of its base's tangent, and in-place writes update tangents in place.
TEST(ForwardAD, InPlaceWritesThroughViewsUpdateTheBasesTangent) {
  fw::dual_level level;
  const tensor t({1., 2.}, mg::f64);
  tensor d = fw::make_dual(tensor({3., 4.}, mg::f64), t);
  tensor w = d.slice(0, 0, 1);
  w.mul_(2.0);  // d = [6, 4], its tangent [2 t0, t1]
  EXPECT_EQ(values(d), (std::vector<double>{6, 4}));
  EXPECT_EQ(values(fw::unpack_dual(d).tangent), (std::vector<double>{2, 2}));
  EXPECT_EQ(values(fw::unpack_dual(w).tangent), (std::vector<double>{2}));

  // a view of a tensor without a tangent: the base gets one, zeros outside the view
  tensor baz = mg::zeros({2}, {.dtype = mg::f64});
  baz[0].copy_(d[0]);
  ASSERT_TRUE(fw::unpack_dual(baz).tangent.defined());
  EXPECT_EQ(values(fw::unpack_dual(baz).tangent), (std::vector<double>{2, 0}));
  baz[1].copy_(d[1]);
  EXPECT_EQ(values(fw::unpack_dual(baz).tangent), (std::vector<double>{2, 2}));
  // the tangents are baz's own: writing baz again leaves d's alone
  baz.mul_(3.0);
  EXPECT_EQ(values(fw::unpack_dual(baz).tangent), (std::vector<double>{6, 6}));
  EXPECT_EQ(values(fw::unpack_dual(d).tangent), (std::vector<double>{2, 2}));

  // a tensor written without a tangent while it has one: zeros there
  tensor e = fw::make_dual(tensor({1., 1.}, mg::f64), tensor({5., 5.}, mg::f64)) * 1.0;
  e[1].fill_(0.0);
  EXPECT_EQ(values(fw::unpack_dual(e).tangent), (std::vector<double>{5, 0}));

  // the tangent of an op result is its own even where the formula passes a tangent on (add)
  tensor p = fw::make_dual(tensor({1., 2.}, mg::f64), tensor({1., 1.}, mg::f64));
  tensor q = p + 0.0;
  q.mul_(4.0);
  EXPECT_EQ(values(fw::unpack_dual(q).tangent), (std::vector<double>{4, 4}));
  EXPECT_EQ(values(fw::unpack_dual(p).tangent), (std::vector<double>{1, 1}));

  // detach_ drops the tangent, as torch's
  tensor f = fw::make_dual(tensor({1., 2.}, mg::f64), tensor({1., 1.}, mg::f64)) * 2.0;
  f.detach_();
  EXPECT_FALSE(fw::unpack_dual(f).tangent.defined());
}

// torch: a view's forward grad is derived from its base's (a view of it) when the base has one,
// so a view made before an in-place write gave its base a tangent sees that tangent; the primal
// unpack_dual returns is a view without one.
TEST(ForwardAD, AViewMadeBeforeItsBaseHadATangentReadsTheBases) {
  // against central differences: a view of a view, written through the base
  check_jvp(
      [](const tensor_list& x) {
        tensor b = mg::ones({2}, {.dtype = mg::f64});
        const tensor v = b.reshape({2, 1}).t();
        b.mul_(x[0]);
        return mg::sin(v) * x[0];
      },
      {{2}});

  const double x0 = 0.27853384955004801;
  fw::dual_level level;
  const tensor xd = fw::make_dual(tensor(x0, mg::f64), tensor(1.0, mg::f64));
  tensor c(1.0328, mg::f64);
  const tensor u = c.unsqueeze(0);  // no tangent yet
  c.add_(xd);                       // c's tangent: 1
  EXPECT_EQ(values(fw::unpack_dual(u).tangent), (std::vector<double>{1}));
  EXPECT_EQ(fw::unpack_dual(mg::sum(u * 0.7)).tangent.item<double>(), 0.7);

  tensor r({1.0328}, mg::f64);
  const tensor t = r.transpose(0, 0), e = r.expand({3});
  r.mul_(xd);  // r = 1.0328 x: tangent 1.0328
  EXPECT_DOUBLE_EQ(fw::unpack_dual(mg::sum(t * 0.7)).tangent.item<double>(), 0.7 * 1.0328);
  EXPECT_DOUBLE_EQ(
      fw::unpack_dual(mg::sum(e * tensor({0.7, -0.2, 0.1}, mg::f64))).tangent.item<double>(),
      (0.7 - 0.2 + 0.1) * 1.0328);

  // the primal has no tangent, nor does a view of it
  const auto [p, tp] = fw::unpack_dual(c);
  EXPECT_EQ(tp.item<double>(), 1.0);
  EXPECT_FALSE(fw::unpack_dual(p * 2.0).tangent.defined());
  EXPECT_FALSE(fw::unpack_dual(p.unsqueeze(0) * 2.0).tangent.defined());
}

// The tangents of in-place ops through views against central differences: f writes a slice of
// a copy of its input in place.
TEST(ForwardAD, InPlaceThroughAViewAgainstFiniteDifferences) {
  check_jvp(
      [](const tensor_list& x) {
        tensor c = x[0] * 1.0;
        c.slice(0, 1, 3).mul_(x[1]);
        c.select(0, 0).copy_(mg::sin(x[1]).sum());
        return c * x[0];
      },
      {{4}, {2}});
}
