// mg::autograd::functional (vjp, jvp, hvp, vhp, jacobian, hessian) against float64 central
// differences and closed forms, with create_graph on and off, strict mode and every error; and
// mg::grad / mg::value_and_grad / mg::hessian nested on mg::tensor arguments.
#include <cmath>
#include <cstddef>
#include <functional>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

#include <metagrad/metagrad.hpp>

#include "support/harness_runtime.hpp"

using mg::tensor;
using mg::tensor_list;
using mg_test::expect_error;
using mg_test::near_rel;
using mg_test::values;
namespace fn = mg::autograd::functional;

namespace {

std::mt19937_64& gen() {
  static std::mt19937_64 g(2024);
  return g;
}
tensor random(const mg::shape_t& shape, double lo = -1.0, double hi = 1.0) {
  return tensor(mg_test::uniform(shape, lo, hi, gen()));
}

using list_fn = std::function<tensor_list(const tensor_list&)>;

// The Jacobian of f at x by float64 central differences: j[i][k] is the matrix
// [numel(f(x)[i]), numel(x[k])].
std::vector<std::vector<std::vector<std::vector<double>>>> fd_jacobian(const list_fn& f,
                                                                       const tensor_list& x) {
  mg::no_grad_guard ng;
  std::vector<xt::xarray<double>> x0;
  for (const auto& t : x) x0.push_back(t.to_xtensor<double>());
  const auto eval = [&](const std::vector<xt::xarray<double>>& xs) {
    tensor_list in;
    for (const auto& a : xs) in.push_back(tensor(a));
    return f(in);
  };
  const tensor_list y0 = eval(x0);
  std::vector<std::vector<std::vector<std::vector<double>>>> j(y0.size());
  for (std::size_t i = 0; i < y0.size(); ++i) {
    j[i].resize(x.size());
    for (std::size_t k = 0; k < x.size(); ++k)
      j[i][k].assign(static_cast<std::size_t>(y0[i].numel()),
                     std::vector<double>(static_cast<std::size_t>(x[k].numel())));
  }
  const double h = 1e-6;
  for (std::size_t k = 0; k < x.size(); ++k)
    for (std::size_t e = 0; e < x0[k].size(); ++e) {
      auto plus = x0, minus = x0;
      plus[k].flat(e) += h;
      minus[k].flat(e) -= h;
      const tensor_list yp = eval(plus), ym = eval(minus);
      for (std::size_t i = 0; i < y0.size(); ++i) {
        const auto a = values(yp[i]), b = values(ym[i]);
        for (std::size_t r = 0; r < a.size(); ++r) j[i][k][r][e] = (a[r] - b[r]) / (2 * h);
      }
    }
  return j;
}

// The gradient of a scalar f as a function (for Hessians by differences of gradients).
list_fn gradient_of(const list_fn& f) {
  return [f](const tensor_list& x) {
    mg::enable_grad_guard on(true);
    tensor_list leaves;
    for (const auto& t : x) leaves.push_back(t.detach().requires_grad_());
    return mg::autograd::grad(f(leaves), leaves, {}, {.allow_unused = true});
  };
}

// sum_i J[i][k]^T v[i] (vjp) and sum_k J[i][k] v[k] (jvp), flattened.
std::vector<std::vector<double>> jt_v(
    const std::vector<std::vector<std::vector<std::vector<double>>>>& j, const tensor_list& v,
    std::size_t n_inputs) {
  std::vector<std::vector<double>> r(n_inputs);
  for (std::size_t k = 0; k < n_inputs; ++k) {
    r[k].assign(j[0][k][0].size(), 0.0);
    for (std::size_t i = 0; i < j.size(); ++i) {
      const auto vi = values(v[i]);
      for (std::size_t a = 0; a < vi.size(); ++a)
        for (std::size_t b = 0; b < r[k].size(); ++b) r[k][b] += j[i][k][a][b] * vi[a];
    }
  }
  return r;
}
std::vector<std::vector<double>> j_v(
    const std::vector<std::vector<std::vector<std::vector<double>>>>& j, const tensor_list& v) {
  std::vector<std::vector<double>> r(j.size());
  for (std::size_t i = 0; i < j.size(); ++i) {
    r[i].assign(j[i][0].size(), 0.0);
    for (std::size_t k = 0; k < v.size(); ++k) {
      const auto vk = values(v[k]);
      for (std::size_t a = 0; a < r[i].size(); ++a)
        for (std::size_t b = 0; b < vk.size(); ++b) r[i][a] += j[i][k][a][b] * vk[b];
    }
  }
  return r;
}

void expect_values(const tensor& t, const std::vector<double>& expected, double tol,
                   const std::string& what) {
  ASSERT_TRUE(t.defined()) << what;
  const auto got = values(t);
  ASSERT_EQ(got.size(), expected.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(near_rel(got[i], expected[i], tol)) << what << " [" << i << "]";
}

// A matrix [numel(y), numel(x)] as the flat row-major values of a Jacobian tensor.
std::vector<double> flat(const std::vector<std::vector<double>>& m) {
  std::vector<double> r;
  for (const auto& row : m) r.insert(r.end(), row.begin(), row.end());
  return r;
}

// A non-linear function of one tensor, and one of two tensors with two outputs.
tensor mix(const tensor& x) { return mg::sin(x) * mg::exp(x * 0.5) + x * x * x; }
tensor_list two_by_two(const tensor_list& in) {
  return {in[0] * mg::sin(in[1]).sum(), mg::exp(in[0]).sum() * in[1] + in[1] * in[1]};
}
tensor scalar_mix(const tensor_list& in) {
  return mg::sum(mg::exp(in[0]) * mg::sin(in[0])) + mg::sum(in[0] * in[0]) * mg::sum(in[1]) +
         mg::sum(mg::sin(in[1] * in[1]));
}

constexpr double tol = 1e-6;

}  // namespace

// ---- vjp ----------------------------------------------------------------------------------------

TEST(FunctionalVjp, OneTensorAgainstDifferences) {
  const tensor x = random({2, 3}), v = random({2, 3});
  auto [y, g] = fn::vjp(mix, x, v);
  static_assert(std::is_same_v<decltype(y), tensor> && std::is_same_v<decltype(g), tensor>);
  expect_values(y, values(mix(x)), 1e-14, "output");
  EXPECT_EQ(g.shape(), x.shape());
  const auto j = fd_jacobian([](const tensor_list& t) { return tensor_list{mix(t[0])}; }, {x});
  expect_values(g, jt_v(j, {v}, 1)[0], tol, "v^T J");
  EXPECT_FALSE(y.requires_grad());
  EXPECT_FALSE(g.requires_grad());
}

TEST(FunctionalVjp, LinearMapGivesTransposeTimesV) {
  const tensor a({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}}, mg::f64);
  const tensor x({0.5, -1.0, 2.0}, mg::f64), v({1.0, -2.0}, mg::f64);
  auto [y, g] = fn::vjp([&](const tensor& t) { return mg::matmul(a, t); }, x, v);
  expect_values(y, {4.5, 9.0}, 1e-14, "A x");
  expect_values(g, {1 - 8.0, 2 - 10.0, 3 - 12.0}, 1e-14, "A^T v");
}

TEST(FunctionalVjp, OmittedVForOneElementOutput) {
  const tensor x({1.0, -2.0, 0.5}, mg::f64);
  auto [y, g] = fn::vjp([](const tensor& t) { return mg::sum(t * t * t); }, x);
  expect_values(y, {1 - 8 + 0.125}, 1e-14, "sum x^3");
  expect_values(g, {3.0, 12.0, 0.75}, 1e-14, "3 x^2");
  // a [1, 1] output counts as one element too
  auto [y1, g1] = fn::vjp([](const tensor& t) { return mg::sum(t).reshape({1, 1}); }, x);
  expect_values(g1, {1.0, 1.0, 1.0}, 0, "ones");
  expect_error([&] { (void)fn::vjp(mix, x); }, {"functional::vjp", "[3]", "pass v"});
}

TEST(FunctionalVjp, ListsOfInputsAndOutputs) {
  const tensor_list x{random({3}), random({2, 3})};
  const tensor_list v{random({3}), random({2, 3})};
  auto [y, g] = fn::vjp(two_by_two, x, v);
  static_assert(std::is_same_v<decltype(y), tensor_list> &&
                std::is_same_v<decltype(g), tensor_list>);
  ASSERT_EQ(y.size(), 2u);
  ASSERT_EQ(g.size(), 2u);
  const auto expected = jt_v(fd_jacobian(two_by_two, x), v, 2);
  expect_values(g[0], expected[0], tol, "input 0");
  expect_values(g[1], expected[1], tol, "input 1");
  // a list of inputs with one output, and one input with a list of outputs
  auto [s, gs] = fn::vjp([](const tensor_list& t) { return mg::sum(t[0] * t[1]); },
                         tensor_list{x[0], x[0] * 2.0});
  expect_values(gs[0], values(x[0] * 2.0), 1e-14, "d/da sum(a b) = b");
  expect_values(gs[1], values(x[0]), 1e-14, "d/db sum(a b) = a");
  auto [ys, gx] = fn::vjp(
      [](const tensor& t) {
        return tensor_list{t * 2.0, mg::sum(t)};
      },
      x[0], tensor_list{v[0], tensor(1.0, mg::f64)});
  expect_values(gx, values(v[0] * 2.0 + 1.0), 1e-14, "2 v0 + v1");
}

TEST(FunctionalVjp, InputsAreNotTouched) {
  tensor x = random({4}).requires_grad_();
  auto [y, g] = fn::vjp([](const tensor& t) { return mg::sum(mg::exp(t)); }, x);
  EXPECT_FALSE(x.grad().defined());
  EXPECT_TRUE(x.is_leaf());
  EXPECT_FALSE(g.requires_grad());  // no create_graph: plain results even for x with grad
  EXPECT_FALSE(y.requires_grad());
  expect_values(g, values(mg::exp(x.detach())), 1e-14, "exp");
}

// ---- jvp ----------------------------------------------------------------------------------------

TEST(FunctionalJvp, OneTensorAgainstDifferences) {
  const tensor x = random({2, 3}), v = random({2, 3});
  auto [y, t] = fn::jvp(mix, x, v);
  expect_values(y, values(mix(x)), 1e-14, "output");
  const auto j = fd_jacobian([](const tensor_list& l) { return tensor_list{mix(l[0])}; }, {x});
  expect_values(t, j_v(j, {v})[0], tol, "J v");
  EXPECT_FALSE(t.requires_grad());
  // a reduction and a matmul: J v of a non-elementwise, non-linear map
  const tensor a = random({3, 3});
  const auto g = [&](const tensor& z) { return mg::tanh(mg::matmul(a, z)) * mg::sum(z * z); };
  const tensor z = random({3}), w = random({3});
  auto [gy, gt] = fn::jvp(g, z, w);
  const auto jg = fd_jacobian([&](const tensor_list& l) { return tensor_list{g(l[0])}; }, {z});
  expect_values(gt, j_v(jg, {w})[0], tol, "J v through matmul");
}

TEST(FunctionalJvp, ListsAndOmittedV) {
  const tensor_list x{random({3}), random({2, 3})};
  const tensor_list v{random({3}), random({2, 3})};
  auto [y, t] = fn::jvp(two_by_two, x, v);
  static_assert(std::is_same_v<decltype(t), tensor_list>);
  const auto expected = j_v(fd_jacobian(two_by_two, x), v);
  expect_values(t[0], expected[0], tol, "output 0");
  expect_values(t[1], expected[1], tol, "output 1");
  // v omitted for a one-element input: the derivative
  auto [c, dc] = fn::jvp([](const tensor& s) { return s * s * s; }, tensor(2.0, mg::f64));
  expect_values(dc, {12.0}, 1e-14, "3 x^2");
  expect_error([&] { (void)fn::jvp(mix, random({3})); },
               {"functional::jvp", "input", "[3]", "pass v"});
}

TEST(FunctionalJvp, OutputsThatDoNotDependOnTheInput) {
  const tensor x = random({3}), v = random({3});
  const tensor k = random({2});
  auto [y, t] = fn::jvp([&](const tensor& s) { return tensor_list{s * 2.0, k * 1.0}; }, x, v);
  expect_values(t[0], values(v * 2.0), 1e-14, "2 v");
  expect_values(t[1], {0.0, 0.0}, 0, "constant output");
  // the identity: J v = v
  auto [i, iv] = fn::jvp([](const tensor& s) { return s; }, x, v);
  expect_values(iv, values(v), 0, "identity");
  expect_error(
      [&] {
        (void)fn::jvp(
            [&](const tensor& s) {
              return tensor_list{s * 2.0, k * 1.0};
            },
            x, v, {.strict = true});
      },
      {"functional::jvp", "Output 1 of the user-provided function does not require gradients",
       "strict"});
}

// ---- hvp, vhp -----------------------------------------------------------------------------------

TEST(FunctionalHvp, ClosedFormAndDifferencesOfGradients) {
  const tensor x({1.0, -2.0, 0.5}, mg::f64), v({0.3, 0.7, -1.1}, mg::f64);
  auto [y, hv] = fn::hvp([](const tensor& t) { return mg::sum(t * t * t); }, x, v);
  expect_values(hv, values(6.0 * x * v), 1e-14, "6 x v");
  // a full Hessian: differences of the gradient along v
  const tensor_list xs{random({2, 2}), random({3})}, vs{random({2, 2}), random({3})};
  auto [s, r] = fn::hvp(scalar_mix, xs, vs);
  const auto h =
      fd_jacobian(gradient_of([](const tensor_list& t) { return tensor_list{scalar_mix(t)}; }), xs);
  const auto expected = j_v(h, vs);
  expect_values(r[0], expected[0], tol, "(H v) 0");
  expect_values(r[1], expected[1], tol, "(H v) 1");
  auto [s2, r2] = fn::vhp(scalar_mix, xs, vs);
  expect_values(r2[0], expected[0], tol, "(v^T H) 0");
  expect_values(r2[1], expected[1], tol, "(v^T H) 1");
  EXPECT_FALSE(r[0].requires_grad());
  // v omitted for one element: the second derivative
  auto [c, d2] =
      fn::hvp([](const tensor& t) { return mg::sin(t) * mg::exp(t); }, tensor(0.4, mg::f64));
  expect_values(d2, {2 * std::exp(0.4) * std::cos(0.4)}, 1e-12, "(sin e^x)''");
}

TEST(FunctionalHvp, LinearFunctionHasZeroHessian) {
  const tensor x = random({3}), v = random({3});
  auto [y, hv] = fn::hvp([](const tensor& t) { return mg::sum(t * 3.0); }, x, v);
  expect_values(hv, {0.0, 0.0, 0.0}, 0, "zero");
  expect_error(
      [&] {
        (void)fn::hvp([](const tensor& t) { return mg::sum(t * 3.0); }, x, v, {.strict = true});
      },
      {"functional::hvp", "strict"});
}

// ---- jacobian -----------------------------------------------------------------------------------

TEST(FunctionalJacobian, KnownFunctions) {
  // A x
  const tensor a({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}}, mg::f64);
  const tensor ja = fn::jacobian([&](const tensor& t) { return mg::matmul(a, t); },
                                 tensor({0.1, 0.2, 0.3}, mg::f64));
  EXPECT_EQ(ja.shape(), (mg::shape_t{2, 3}));
  expect_values(ja, values(a), 1e-14, "A");
  // elementwise x^3 on [2, 2]: shape [2, 2, 2, 2], 3 x^2 on the diagonal
  const tensor x({{1.0, 2.0}, {-1.0, 0.5}}, mg::f64);
  const tensor jc = fn::jacobian([](const tensor& t) { return t * t * t; }, x);
  EXPECT_EQ(jc.shape(), (mg::shape_t{2, 2, 2, 2}));
  const auto xv = values(x);
  std::vector<double> diag(16, 0.0);
  for (std::size_t i = 0; i < 4; ++i) diag[i * 4 + i] = 3 * xv[i] * xv[i];
  expect_values(jc, diag, 1e-14, "diag(3 x^2)");
  // a 0-d output: the gradient's shape; a 0-d input: the output's shape
  EXPECT_EQ(fn::jacobian([](const tensor& t) { return mg::sum(t); }, x).shape(),
            (mg::shape_t{2, 2}));
  const tensor j0 = fn::jacobian(
      [](const tensor& s) {
        return tensor({1.0, 2.0}, mg::f64) * s * s;
      },
      tensor(3.0, mg::f64));
  EXPECT_EQ(j0.shape(), (mg::shape_t{2}));
  expect_values(j0, {6.0, 12.0}, 1e-14, "2 s (1, 2)");
  EXPECT_FALSE(jc.requires_grad());
}

TEST(FunctionalJacobian, AgainstDifferencesWithLists) {
  const tensor x = random({2, 3});
  const tensor j = fn::jacobian(mix, x);
  EXPECT_EQ(j.shape(), (mg::shape_t{2, 3, 2, 3}));
  const auto fd = fd_jacobian([](const tensor_list& t) { return tensor_list{mix(t[0])}; }, {x});
  expect_values(j, flat(fd[0][0]), tol, "J of mix");

  const tensor_list xs{random({3}), random({2, 3})};
  const std::vector<tensor_list> jj = fn::jacobian(two_by_two, xs);
  const auto fj = fd_jacobian(two_by_two, xs);
  ASSERT_EQ(jj.size(), 2u);
  const mg::shape_t shapes[2][2] = {{{3, 3}, {3, 2, 3}}, {{2, 3, 3}, {2, 3, 2, 3}}};
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t k = 0; k < 2; ++k) {
      EXPECT_EQ(jj[i][k].shape(), shapes[i][k]);
      expect_values(jj[i][k], flat(fj[i][k]), tol,
                    "block " + std::to_string(i) + std::to_string(k));
    }
  // one side a list: a tensor_list per input, or per output
  const tensor_list per_input =
      fn::jacobian([](const tensor_list& t) { return t[0] * t[1]; }, tensor_list{xs[0], xs[0]});
  ASSERT_EQ(per_input.size(), 2u);
  EXPECT_EQ(per_input[0].shape(), (mg::shape_t{3, 3}));
  const tensor_list per_output = fn::jacobian(
      [](const tensor& t) {
        return tensor_list{t, mg::sum(t)};
      },
      xs[0]);
  ASSERT_EQ(per_output.size(), 2u);
  EXPECT_EQ(per_output[1].shape(), (mg::shape_t{3}));
  expect_values(per_output[1], {1.0, 1.0, 1.0}, 0, "d sum");
}

TEST(FunctionalJacobian, UnusedInputsAndStrict) {
  const tensor_list xs{random({2}), random({3})};
  const auto f = [](const tensor_list& t) { return t[0] * 2.0; };
  const tensor_list j = fn::jacobian(f, xs);
  expect_values(j[1], std::vector<double>(6, 0.0), 0, "unused input: zeros");
  EXPECT_EQ(j[1].shape(), (mg::shape_t{2, 3}));
  expect_error([&] { (void)fn::jacobian(f, xs, {.strict = true}); },
               {"functional::jacobian",
                "Output 0 of the user-provided function is independent of "
                "input 1. This is not allowed in strict mode"});
  expect_error([&] { (void)fn::vjp(f, xs, {random({2})}, {.strict = true}); },
               {"functional::vjp", "input 1", "strict"});
  // an output that does not depend on the inputs at all
  const tensor c = random({2});
  const tensor jc = fn::jacobian([&](const tensor&) { return c * 1.0; }, xs[1]);
  expect_values(jc, std::vector<double>(6, 0.0), 0, "constant");
  EXPECT_NO_THROW((void)fn::jacobian([&](const tensor&) { return c * 1.0; }, xs[1], true));
}

// ---- hessian ------------------------------------------------------------------------------------

TEST(FunctionalHessian, KnownFunctions) {
  // sum(x^3): diag(6 x)
  const tensor x({1.0, -2.0, 0.5}, mg::f64);
  const tensor h = fn::hessian([](const tensor& t) { return mg::sum(t * t * t); }, x);
  EXPECT_EQ(h.shape(), (mg::shape_t{3, 3}));
  expect_values(h, {6.0, 0, 0, 0, -12.0, 0, 0, 0, 3.0}, 1e-14, "diag(6 x)");
  // x^T A x: A + A^T
  const tensor a({{1.0, 2.0}, {0.5, -3.0}}, mg::f64);
  const tensor hq = fn::hessian([&](const tensor& t) { return mg::dot(t, mg::matmul(a, t)); },
                                tensor({0.3, 0.9}, mg::f64));
  expect_values(hq, {2.0, 2.5, 2.5, -6.0}, 1e-14, "A + A^T");
  // a [2, 2] input: shape [2, 2, 2, 2]; a one-element [1] output counts as a scalar
  const tensor m = random({2, 2});
  const auto f = [](const tensor& t) { return mg::sum(mg::exp(t) * mg::sin(t)).reshape({1}); };
  const tensor hm = fn::hessian(f, m);
  EXPECT_EQ(hm.shape(), (mg::shape_t{2, 2, 2, 2}));
  const auto fd =
      fd_jacobian(gradient_of([&](const tensor_list& t) { return tensor_list{f(t[0])}; }), {m});
  expect_values(hm, flat(fd[0][0]), tol, "H of sum(e^x sin x)");
  EXPECT_FALSE(hm.requires_grad());
}

TEST(FunctionalHessian, ListsOfInputs) {
  const tensor_list xs{random({2, 2}), random({3})};
  const std::vector<tensor_list> h = fn::hessian(scalar_mix, xs);
  const auto fd =
      fd_jacobian(gradient_of([](const tensor_list& t) { return tensor_list{scalar_mix(t)}; }), xs);
  const mg::shape_t shapes[2][2] = {{{2, 2, 2, 2}, {2, 2, 3}}, {{3, 2, 2}, {3, 3}}};
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t k = 0; k < 2; ++k) {
      EXPECT_EQ(h[i][k].shape(), shapes[i][k]);
      expect_values(h[i][k], flat(fd[i][k]), tol, "block " + std::to_string(i) + std::to_string(k));
    }
  // an input f does not use: zero blocks, an error in strict mode
  const auto g = [](const tensor_list& t) { return mg::sum(t[0] * t[0]); };
  const std::vector<tensor_list> hg = fn::hessian(g, xs);
  expect_values(hg[1][1], std::vector<double>(9, 0.0), 0, "unused");
  expect_values(hg[0][1], std::vector<double>(12, 0.0), 0, "unused");
  expect_error([&] { (void)fn::hessian(g, xs, {.strict = true}); },
               {"functional::hessian", "input 1", "strict"});
}

// ---- strict mode (torch.autograd.functional's checks, step by step) ----------------------------

namespace {
// f(x) made of x through no differentiable step: a fresh leaf inside f, so the output requires
// grad but its graph does not reach the input.
tensor unconnected(const tensor& t) { return t.detach().requires_grad_().clone(); }
const char* const not_allowed = "This is not allowed in strict mode";
}  // namespace

TEST(FunctionalStrict, OutputsThatDoNotRequireGrad) {
  const tensor x = random({4}), v = random({4});
  const auto detached = [](const tensor& t) { return t.detach(); };
  const auto compared = [](const tensor& t) { return (t > 0.0).to(mg::f64); };
  const auto truncated = [](const tensor& t) { return t.to(mg::i64).to(mg::f64); };
  for (const auto& f : {std::function<tensor(const tensor&)>(detached),
                        std::function<tensor(const tensor&)>(compared),
                        std::function<tensor(const tensor&)>(truncated)}) {
    const char* m = "Output 0 of the user-provided function does not require gradients";
    expect_error([&] { (void)fn::vjp(f, x, v, {.strict = true}); }, {"functional::vjp", m});
    expect_error([&] { (void)fn::jvp(f, x, v, {.strict = true}); }, {"functional::jvp", m});
    expect_error([&] { (void)fn::jacobian(f, x, {.strict = true}); },
                 {"functional::jacobian", m, ".strict = false"});
    // without strict: zeros
    expect_values(fn::vjp(f, x, v).result, std::vector<double>(4, 0.0), 0, "vjp zeros");
    expect_values(fn::jvp(f, x, v).result, std::vector<double>(4, 0.0), 0, "jvp zeros");
  }
  const auto sum_detached = [](const tensor& t) { return mg::sum(t.detach()); };
  expect_error([&] { (void)fn::hessian(sum_detached, x, {.strict = true}); },
               {"functional::hessian", "Output 0 of the user-provided function"});
  expect_error([&] { (void)fn::vhp(sum_detached, x, v, {.strict = true}); },
               {"functional::vhp", "does not require gradients"});
}

TEST(FunctionalStrict, OutputIndependentOfTheInput) {
  const tensor x = random({4}), v = random({4});
  expect_error(
      [&] { (void)fn::vjp(unconnected, x, v, {.strict = true}); },
      {"functional::vjp", "The output of the user-provided function is independent of input 0",
       not_allowed, ".strict = false"});
  expect_error([&] { (void)fn::jvp(unconnected, x, v, {.strict = true}); },
               {"functional::jvp",
                "The output of the user-provided function is independent of input 0", not_allowed});
  expect_error([&] { (void)fn::jacobian(unconnected, x, {.strict = true}); },
               {"functional::jacobian",
                "Output 0 of the user-provided function is independent of input 0", not_allowed});
  // without strict: zeros, in the structure of x (vjp) and of f(x) (jvp, jacobian)
  auto [y, g] = fn::vjp(unconnected, x, v);
  expect_values(g, std::vector<double>(4, 0.0), 0, "vjp zeros");
  expect_values(fn::jvp(unconnected, x, v).result, std::vector<double>(4, 0.0), 0, "jvp zeros");
  const tensor j = fn::jacobian(unconnected, x);
  EXPECT_EQ(j.shape(), (mg::shape_t{4, 4}));
  expect_values(j, std::vector<double>(16, 0.0), 0, "jacobian zeros");
  // jvp: an output that requires grad but reaches no input (entry 1 of the double-backward trick)
  const auto two = [](const tensor& t) { return tensor_list{t * 2.0, unconnected(t)}; };
  expect_error([&] { (void)fn::jvp(two, x, v, {.strict = true}); },
               {"functional::jvp", "independent of entry 1 in the grad_outputs", not_allowed});
  const tensor_list t = fn::jvp(two, x, v).result;
  expect_values(t[0], values(v * 2.0), 1e-15, "2 v");
  expect_values(t[1], std::vector<double>(4, 0.0), 0, "zeros");
  // second derivatives: the gradient is undefined (vhp, hvp) or constant (hessian)
  const auto sum_unconnected = [](const tensor& s) { return mg::sum(unconnected(s)); };
  for (const char* name : {"vhp", "hvp"})
    expect_error(
        [&] {
          if (name[0] == 'v')
            (void)fn::vhp(sum_unconnected, x, v, {.strict = true});
          else
            (void)fn::hvp(sum_unconnected, x, v, {.strict = true});
        },
        {"The output of the user-provided function is independent of input 0", not_allowed});
  expect_error([&] { (void)fn::hessian(sum_unconnected, x, {.strict = true}); },
               {"functional::hessian",
                "While computing the hessian, found that the jacobian of "
                "the user-provided function with respect to input 0 is "
                "independent of the input"});
  expect_values(fn::hessian(sum_unconnected, x), std::vector<double>(16, 0.0), 0, "zero H");
}

TEST(FunctionalStrict, LinearFunctionsWithCreateGraph) {
  const tensor x = random({3}).requires_grad_(), v = random({3});
  const auto twice = [](const tensor& t) { return t * 2.0; };
  const char* m =
      "The jacobian of the user-provided function is independent of input 0. This is not "
      "allowed in strict mode when create_graph=True";
  expect_error([&] { (void)fn::vjp(twice, x, v, {.create_graph = true, .strict = true}); },
               {"functional::vjp", m, ".strict = false"});
  expect_error([&] { (void)fn::jvp(twice, x, v, {.create_graph = true, .strict = true}); },
               {"functional::jvp", m});
  expect_error([&] { (void)fn::jacobian(twice, x, {.create_graph = true, .strict = true}); },
               {"functional::jacobian",
                "The jacobian of the user-provided function is independent of input 0",
                "create_graph=True"});
  // strict without create_graph, or create_graph without strict: the results
  expect_values(fn::vjp(twice, x, v, {.strict = true}).result, values(v * 2.0), 1e-15, "2 v");
  expect_values(fn::vjp(twice, x, v, {.create_graph = true}).result, values(v * 2.0), 1e-15, "2 v");
  expect_values(fn::jvp(twice, x, v, {.create_graph = true}).result, values(v * 2.0), 1e-15, "2 v");
  expect_values(fn::jacobian(twice, x, {.create_graph = true}),
                {2.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0, 2.0}, 0, "2 I");
  // a nonlinear f passes: its derivatives depend on x
  EXPECT_TRUE(
      fn::vjp([](const tensor& t) { return t * t; }, x, v, {.create_graph = true, .strict = true})
          .result.requires_grad());
  // second derivatives: a linear f has a constant gradient, a quadratic f a constant Hessian
  const auto linear = [](const tensor& t) { return mg::sum(t * 3.0); };
  const auto square = [](const tensor& t) { return mg::sum(t * t); };
  for (const char* name : {"hessian", "vhp", "hvp"})
    expect_error(
        [&] {
          if (name[0] == 'h' && name[1] == 'e')
            (void)fn::hessian(linear, x, {.strict = true});
          else if (name[0] == 'v')
            (void)fn::vhp(linear, x, v, {.strict = true});
          else
            (void)fn::hvp(linear, x, v, {.strict = true});
        },
        {"found that the jacobian of the user-provided function with respect to input 0 is "
         "independent of the input",
         not_allowed});
  expect_error([&] { (void)fn::hvp(square, x, v, {.create_graph = true, .strict = true}); },
               {"functional::hvp",
                "The hessian of the user-provided function is independent of input 0. This is "
                "not allowed in strict mode when create_graph=True"});
  expect_error(
      [&] { (void)fn::hessian(square, x, {.create_graph = true, .strict = true}); },
      {"functional::hessian", "The hessian of the user-provided function is independent of input 0",
       "create_graph=True"});
  expect_values(fn::hvp(square, x, v, {.strict = true}).result, values(v * 2.0), 1e-15, "2 v");
  EXPECT_TRUE(fn::hvp([](const tensor& t) { return mg::sum(t * t * t); }, x, v,
                      {.create_graph = true, .strict = true})
                  .result.requires_grad());
}

// ---- create_graph -------------------------------------------------------------------------------

TEST(FunctionalCreateGraph, ResultsAreDifferentiableInTheCallersInputs) {
  tensor x = tensor({1.0, -2.0, 0.5}, mg::f64).requires_grad_();
  const tensor v({0.3, 0.7, -1.1}, mg::f64);
  const auto cube = [](const tensor& t) { return t * t * t; };
  const auto sum_cube = [](const tensor& t) { return mg::sum(t * t * t); };
  const auto xv = values(x.detach()), vv = values(v);

  // vjp: g = 3 x^2 v; d/dx sum(g) = 6 x v; d/dx of that = 6 v (third derivative)
  auto [y, g] = fn::vjp(cube, x, v, {.create_graph = true});
  EXPECT_TRUE(y.requires_grad());
  EXPECT_TRUE(g.requires_grad());
  const tensor d2 = mg::autograd::grad({mg::sum(g)}, {x}, {}, {.create_graph = true})[0];
  expect_values(d2, values(6.0 * x.detach() * v), 1e-14, "6 x v");
  const tensor d3 = mg::autograd::grad({mg::sum(d2)}, {x})[0];
  expect_values(d3, values(6.0 * v), 1e-14, "6 v");

  // jvp: t = 3 x^2 v, the same derivatives
  auto [yj, t] = fn::jvp(cube, x, v, true);
  EXPECT_TRUE(t.requires_grad());
  expect_values(t, values(3.0 * x.detach() * x.detach() * v), 1e-14, "3 x^2 v");
  const tensor t2 = mg::autograd::grad({mg::sum(t)}, {x}, {}, {.create_graph = true})[0];
  expect_values(t2, values(6.0 * x.detach() * v), 1e-14, "d/dx jvp");
  expect_values(mg::autograd::grad({mg::sum(t2)}, {x})[0], values(6.0 * v), 1e-14, "third");

  // hvp of sum(x^3): 6 x v; its derivative 6 v
  auto [yh, hv] = fn::hvp(sum_cube, x, v, {.create_graph = true});
  EXPECT_TRUE(hv.requires_grad());
  expect_values(mg::autograd::grad({mg::sum(hv)}, {x})[0], values(6.0 * v), 1e-14, "d/dx hvp");

  // jacobian of x^3: diag(3 x^2); d/dx sum(J) = 6 x
  const tensor j = fn::jacobian(cube, x, {.create_graph = true});
  EXPECT_TRUE(j.requires_grad());
  expect_values(mg::autograd::grad({mg::sum(j)}, {x})[0], values(6.0 * x.detach()), 1e-14,
                "d/dx jacobian");

  // hessian of sum(x^3): diag(6 x); the third derivative: d/dx sum(H) = 6
  const tensor h = fn::hessian(sum_cube, x, true);
  EXPECT_TRUE(h.requires_grad());
  expect_values(mg::autograd::grad({mg::sum(h)}, {x})[0], {6.0, 6.0, 6.0}, 1e-14, "third");

  // a non-polynomial check: d/dx of the hvp of sum(sin(x) e^x) along v, by differences
  const auto sm = [](const tensor& s) { return mg::sum(mg::sin(s) * mg::exp(s)); };
  auto [ys, hs] = fn::hvp(sm, x, v, true);
  const tensor d = mg::autograd::grad({mg::sum(hs)}, {x})[0];
  // d/dx_i sum_j H_ij v_j = f'''(x_i) v_i with f''' = 2 e^x (cos x - sin x)
  std::vector<double> expected(3);
  for (std::size_t i = 0; i < 3; ++i)
    expected[i] = 2 * std::exp(xv[i]) * (std::cos(xv[i]) - std::sin(xv[i])) * vv[i];
  expect_values(d, expected, 1e-12, "f''' v");
  EXPECT_FALSE(x.grad().defined());
}

TEST(FunctionalCreateGraph, DifferentiableInVToo) {
  // vjp under create_graph is linear in v and keeps v's history
  tensor v = tensor({1.0, 2.0}, mg::f64).requires_grad_();
  const tensor x({0.5, -1.5}, mg::f64);
  auto [y, g] = fn::vjp([](const tensor& t) { return mg::exp(t); }, x, v, true);
  const tensor dv = mg::autograd::grad({mg::sum(g)}, {v})[0];
  expect_values(dv, values(mg::exp(x)), 1e-14, "d/dv sum(e^x v)");
  // jvp and hvp too: d/dv sum(J v) = J^T 1, d/dv sum(H v) = H 1
  auto [yj, t] = fn::jvp([](const tensor& s) { return mg::exp(s); }, x, v, true);
  expect_values(mg::autograd::grad({mg::sum(t)}, {v})[0], values(mg::exp(x)), 1e-14, "e^x");
  auto [yh, hv] = fn::hvp([](const tensor& s) { return mg::sum(s * s * s); }, x, v, true);
  expect_values(mg::autograd::grad({mg::sum(hv)}, {v})[0], values(6.0 * x), 1e-14, "6 x");
}

TEST(FunctionalCreateGraph, OffGivesPlainResults) {
  tensor x = random({3}).requires_grad_();
  const tensor v = random({3});
  EXPECT_FALSE(fn::vjp(mix, x, v).result.requires_grad());
  EXPECT_FALSE(fn::jvp(mix, x, v).result.requires_grad());
  EXPECT_FALSE(fn::jvp(mix, x, v).output.requires_grad());
  EXPECT_FALSE(
      fn::hvp([](const tensor& t) { return mg::sum(mix(t)); }, x, v).result.requires_grad());
  EXPECT_FALSE(fn::jacobian(mix, x).requires_grad());
  EXPECT_FALSE(fn::hessian([](const tensor& t) { return mg::sum(mix(t)); }, x).requires_grad());
  // a transform inside a function being differentiated: create_graph keeps the outer chain
  const auto outer = [&](const tensor& t) {
    return mg::sum(fn::vjp([](const tensor& s) { return s * s; }, t, v, true).result);
  };
  auto [o, g] = fn::vjp(outer, x);
  expect_values(g, values(2.0 * v), 1e-14, "d/dx sum(2 x v)");
}

// ---- errors -------------------------------------------------------------------------------------

TEST(FunctionalErrors, ShapesCountsAndOutputs) {
  const tensor x = random({2, 3});
  expect_error([&] { (void)fn::vjp(mix, x, random({3})); },
               {"functional::vjp", "v 0", "[3]", "[2,3]", "output"});
  expect_error(
      [&] {
        (void)fn::jvp(mix, x, random({3, 2}));
      },
      {"functional::jvp", "[3,2]", "[2,3]", "input"});
  expect_error([&] { (void)fn::hvp([](const tensor& t) { return mg::sum(t); }, x, random({6})); },
               {"functional::hvp", "[6]", "[2,3]"});
  expect_error(
      [&] {
        (void)fn::vjp(two_by_two, tensor_list{x, x}, tensor_list{x});
      },
      {"functional::vjp", "1 tensors", "2 outputs"});
  // hessian and hvp need one output element
  expect_error([&] { (void)fn::hessian(mix, x); },
               {"functional::hessian", "one-element", "[2,3]", "jacobian"});
  expect_error([&] { (void)fn::hvp(mix, x, x); }, {"functional::hvp", "one-element", "[2,3]"});
  expect_error([&] { (void)fn::vhp(mix, x, x); }, {"functional::vhp", "one-element"});
  // f returning an undefined tensor
  expect_error([&] { (void)fn::jacobian([](const tensor&) { return tensor{}; }, x); },
               {"functional::jacobian", "undefined"});
  expect_error(
      [&] {
        (void)fn::vjp([](const tensor& t) { return tensor_list{t, tensor{}}; }, x);
      },
      {"functional::vjp", "undefined", "output 1"});
  // undefined and non-floating inputs
  expect_error([&] { (void)fn::jacobian(mix, tensor{}); }, {"functional::jacobian", "undefined"});
  expect_error([&] { (void)fn::jacobian(mix, x.to(mg::i64)); },
               {"functional::jacobian", "i64", "floating"});
  // strict: an output that does not depend on the input
  expect_error(
      [&] {
        (void)fn::vjp([](const tensor&) { return tensor(1.0, mg::f64); }, x, {}, {.strict = true});
      },
      {"functional::vjp", "Output 0 of the user-provided function does not require gradients",
       "strict"});
  auto [c, zero] = fn::vjp([](const tensor&) { return tensor(1.0, mg::f64); }, x);
  expect_values(zero, std::vector<double>(6, 0.0), 0, "constant f: zeros");
}

// ---- mg::grad, mg::value_and_grad, mg::hessian on tensors
// ----------------------------------------

TEST(GradOnTensorsNested, HessianOfOneElementArguments) {
  const auto f = [](auto x) { return sin(x) * exp(x); };
  const tensor x(0.4, mg::f64);
  const tensor h = mg::hessian<0>(f)(x);
  EXPECT_NEAR(h.item<double>(), 2 * std::exp(0.4) * std::cos(0.4), 1e-14);
  EXPECT_FALSE(h.requires_grad());
  // the same as the static engine, and as grad of grad
  EXPECT_NEAR(h.item<double>(), mg::hessian<0>(f)(0.4), 1e-14);
  EXPECT_NEAR(mg::grad(mg::grad(f))(x).item<double>(), mg::hessian<0>(f)(0.4), 1e-14);
  // third derivative: 2 e^x (cos x - sin x)
  const tensor d3 = mg::grad(mg::grad(mg::grad(f)))(x);
  EXPECT_NEAR(d3.item<double>(), 2 * std::exp(0.4) * (std::cos(0.4) - std::sin(0.4)), 1e-13);
  // a [1] tensor and a function of a sum: the shape of the argument
  const tensor h1 =
      mg::hessian<0>([](auto t) { return mg::sum(t * t * t); })(tensor({2.0}, mg::f64));
  EXPECT_EQ(h1.shape(), (mg::shape_t{1}));
  EXPECT_NEAR(h1.item<double>(), 12.0, 1e-14);
}

TEST(GradOnTensorsNested, MixedPartialsAndCapturedOuterVariables) {
  // f = x^2 y^3: d/dy d/dx f = 6 x y^2, d2/dy2 = 6 x^2 y
  const auto f = [](auto x, auto y) { return x * x * y * y * y; };
  const tensor x(1.5, mg::f64), y(-0.5, mg::f64);
  EXPECT_NEAR(mg::grad<1>(mg::grad<0>(f))(x, y).item<double>(), 6 * 1.5 * 0.25, 1e-14);
  EXPECT_NEAR(mg::hessian<1>(f)(x, y).item<double>(), 6 * 2.25 * -0.5, 1e-14);
  // both at once: the gradient of d/dx f with respect to (x, y) = (2 y^3, 6 x y^2)
  auto [dxx, dxy] = mg::grad(mg::grad<0>(f))(x, y);
  EXPECT_NEAR(dxx.item<double>(), 2 * -0.125, 1e-14);
  EXPECT_NEAR(dxy.item<double>(), 6 * 1.5 * 0.25, 1e-14);
  // an inner transform closing over the outer variable: d/dx sum(d/dy sum(x y^2)) = 2 y0
  const tensor y0({0.5, -1.0, 2.0}, mg::f64), x0({1.0, 2.0, 3.0}, mg::f64);
  const auto outer = [&](auto xt) {
    return mg::sum(mg::grad([&](auto yt) { return mg::sum(xt * yt * yt); })(y0));
  };
  const tensor gx = mg::grad(outer)(x0);
  expect_values(gx, values(2.0 * y0), 1e-14, "2 y0");
  EXPECT_FALSE(gx.requires_grad());
}

TEST(GradOnTensorsNested, TopLevelResultsArePlainAndArgumentsWithHistoryStayConnected) {
  const auto cube = [](auto t) { return mg::sum(t * t * t); };
  const tensor x({1.0, -2.0}, mg::f64);
  auto [v, g] = mg::value_and_grad(cube)(x);
  EXPECT_FALSE(v.requires_grad());
  EXPECT_FALSE(g.requires_grad());
  expect_values(g, {3.0, 12.0}, 1e-14, "3 x^2");
  // an argument that requires grad: the gradient is differentiable with respect to it
  tensor w = tensor({1.0, -2.0}, mg::f64).requires_grad_();
  const tensor gw = mg::grad(cube)(w);
  EXPECT_TRUE(gw.requires_grad());
  expect_values(mg::autograd::grad({mg::sum(gw)}, {w})[0], {6.0, -12.0}, 1e-14, "6 w");
  EXPECT_FALSE(w.grad().defined());
  // a function that does not depend on its argument: zero gradient, no error
  expect_values(mg::grad([](auto) {
                  return mg::sum(tensor({1.0, 2.0}, mg::f64));
                })(x),
                {0.0, 0.0}, 0, "constant");
}

TEST(GradOnTensorsNested, HessianOfATensorArgumentPointsToTheFunctionalApi) {
  const auto f = [](auto t) { return mg::sum(t * t * t); };
  expect_error(
      [&] {
        (void)mg::hessian<0>(f)(tensor({1.0, 2.0, 3.0}, mg::f64));
      },
      {"hessian<0>", "[3]", "mg::autograd::functional::hessian"});
  expect_error(
      [&] {
        (void)mg::grad(mg::grad(f))(tensor({1.0, 2.0, 3.0}, mg::f64));
      },
      {"grad", "[3]", "mg::autograd::functional::jacobian"});
  // the functional API gives the whole matrix
  expect_values(
      fn::hessian([&](const tensor& t) { return f(t); }, tensor({1.0, 2.0, 3.0}, mg::f64)),
      {6.0, 0, 0, 0, 12.0, 0, 0, 0, 18.0}, 1e-14, "diag(6 x)");
}

TEST(FunctionalEdgeCases, NonContiguousInputsWithHistoryAndFloat32) {
  // a transposed view that requires grad enters f through an identity view of itself
  tensor w = random({2, 3}).requires_grad_();
  const tensor wt = w.t();
  ASSERT_FALSE(wt.is_contiguous());
  const tensor h = fn::hessian([](const tensor& t) { return mg::sum(t * t * t); }, wt, true);
  EXPECT_EQ(h.shape(), (mg::shape_t{3, 2, 3, 2}));
  const tensor d = mg::autograd::grad({mg::sum(h)}, {w})[0];
  expect_values(d, std::vector<double>(6, 6.0), 1e-14, "third derivative through a view");
  const tensor g = mg::grad([](auto t) { return mg::sum(t * t * t); })(wt);
  EXPECT_TRUE(g.requires_grad());
  expect_values(mg::autograd::grad({mg::sum(g)}, {w})[0], values(6.0 * w.detach()), 1e-14,
                "6 w through a view");
  // float32 in, float32 out
  const tensor x = random({3}).to(mg::f32);
  const tensor j = fn::jacobian([](const tensor& t) { return t * t; }, x);
  EXPECT_EQ(j.dtype(), mg::f32);
  auto [y, t] = fn::jvp([](const tensor& s) { return mg::exp(s); }, x, x);
  EXPECT_EQ(t.dtype(), mg::f32);
  expect_values(t, values(mg::exp(x) * x), 1e-6, "f32 jvp");
  // a function with an empty output: a Jacobian with no elements
  const tensor je = fn::jacobian([](const tensor& s) { return s.slice(0, 0, 0); }, x);
  EXPECT_EQ(je.shape(), (mg::shape_t{0, 3}));
}

TEST(FunctionalEdgeCases, UnderNoGradAndWithBracedLists) {
  tensor x = tensor({1.0, 2.0}, mg::f64).requires_grad_();
  {
    mg::no_grad_guard ng;
    const tensor j = fn::jacobian([](const tensor& t) { return t * t; }, x);
    expect_values(j, {2.0, 0.0, 0.0, 4.0}, 1e-14, "diag(2 x)");
    // create_graph records even under no_grad_guard, as torch's
    const tensor h = fn::hessian([](const tensor& t) { return mg::sum(t * t * t); }, x, true);
    EXPECT_TRUE(h.requires_grad());
    EXPECT_FALSE(mg::is_grad_enabled());
  }
  // lists written in place: the inputs and v as braced lists
  const tensor a({1.0, 2.0}, mg::f64), b({3.0, 4.0}, mg::f64);
  auto [y, g] = fn::vjp([](const tensor_list& t) { return t[0] * t[1]; }, {a, b},
                        tensor({1.0, 1.0}, mg::f64));
  expect_values(g[0], values(b), 1e-14, "b");
  expect_values(g[1], values(a), 1e-14, "a");
  auto [y2, t] = fn::jvp([](const tensor_list& l) { return l[0] * l[1]; }, {a, b}, {b, a});
  expect_values(t, values(b * b + a * a), 1e-14, "b v0 + a v1");
}
