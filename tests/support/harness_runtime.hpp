// The runtime engine's gradient harness (see harness.hpp for the static one).
//
// check_runtime(f, x...) on float64 scalars: f runs on 0-d mg::tensor leaves; the value, every
// gradient (backward) and every second derivative (autograd::grad with create_graph, then grad
// again) must equal what the static engine generates for the same f (mg::value_and_grad,
// mg::grad(mg::grad<I>(f))), to 1e-12 relative.
//
// check_arrays(f, {shapes...}, options) on tensors: L = sum(f(x...) * w) for fixed random
// weights w; every element of every runtime gradient is compared with a central difference of L
// (f64, h = 1e-6), and second order through create_graph: a Hessian-vector product against the
// difference of the runtime gradient along v. With .dtype = mg::f32 the runtime runs in f32 and
// is compared against the f64 differences with a looser tolerance. With .device = mg::device::cuda
// every tensor of the check lives on that device.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include <metagrad/autograd.hpp>
#include <metagrad/static.hpp>
#include <metagrad/tensor.hpp>
#include <metagrad/tensor_xtensor.hpp>

#include "support/harness.hpp"

namespace mg_test {

// A runtime gradient (undefined means zero: an unused input) against the static engine's value.
inline void expect_value(const mg::tensor& g, double expected, const char* what, std::size_t i,
                         std::size_t j) {
  if (g.defined()) {
    EXPECT_EQ(g.numel(), 1);
    EXPECT_TRUE(near_rel(g.item<double>(), expected, 1e-12)) << what << " " << i << "," << j;
  } else {
    EXPECT_EQ(expected, 0.0) << what << " " << i << "," << j << " (undefined: unused)";
  }
}

template <class F, class... X>
void check_runtime(const F& f, X... xs) {
  constexpr std::size_t n = sizeof...(X);
  const auto [value, static_grads] = mg::value_and_grad(f)(double(xs)...);
  const auto sg = as_tuple(static_grads);
  auto leaves = [&] {
    return std::array<mg::tensor, n>{mg::tensor(double(xs), mg::f64).requires_grad_()...};
  };

  // value and first order through backward
  auto x = leaves();
  mg::tensor y = std::apply(f, x);
  ASSERT_EQ(y.dim(), 0);
  EXPECT_TRUE(near_rel(y.item<double>(), value, 1e-12)) << "value";
  y.backward();
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (expect_value(x[I].grad(), double(std::get<I>(sg)), "d/dx", I, I), ...);
  }
  (std::make_index_sequence<n>{});

  // second order: row I of the Hessian via create_graph
  const auto row = [&]<std::size_t I>(std::integral_constant<std::size_t, I>) {
    auto z = leaves();
    const mg::tensor_list zl(z.begin(), z.end());
    const mg::tensor out = std::apply(f, z);
    const auto gi =
        mg::autograd::grad({out}, {z[I]}, {}, {.create_graph = true, .allow_unused = true})[0];
    const auto h = as_tuple(mg::grad(mg::grad<I>(f))(double(xs)...));
    const bool differentiable = gi.defined() && gi.requires_grad();
    mg::tensor_list hrow(n);
    if (differentiable) hrow = mg::autograd::grad({gi}, zl, {}, {.allow_unused = true});
    [&]<std::size_t... J>(std::index_sequence<J...>) {
      (expect_value(hrow[J], double(std::get<J>(h)), "d2/dx", I, J), ...);
    }
    (std::make_index_sequence<n>{});
  };
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (row(std::integral_constant<std::size_t, I>{}), ...);
  }
  (std::make_index_sequence<n>{});
}

struct array_options {
  mg::dtype dtype = mg::f64;
  double lo = -1.0, hi = 1.0;                       // inputs are uniform in [lo, hi]
  std::vector<std::pair<double, double>> ranges{};  // per input, when given: [lo, hi] of each
  std::uint64_t seed = 7;
  bool second_order = true;
  mg::device device = mg::device::cpu;  // where the tensors live (cuda: the Thrust backend)
};

inline xt::xarray<double> uniform(const mg::shape_t& shape, double lo, double hi,
                                  std::mt19937_64& gen) {
  xt::xarray<double> a =
      xt::xarray<double>::from_shape(std::vector<std::size_t>(shape.begin(), shape.end()));
  std::uniform_real_distribution<double> u(lo, hi);
  for (auto& v : a) v = u(gen);
  return a;
}

// f takes a tensor_list (one tensor per shape) and returns a tensor.
inline void check_arrays(const std::function<mg::tensor(const mg::tensor_list&)>& f,
                         const std::vector<mg::shape_t>& shapes, const array_options& o = {}) {
  std::mt19937_64 gen(o.seed);
  std::vector<xt::xarray<double>> x0, v;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const auto [lo, hi] = i < o.ranges.size() ? o.ranges[i] : std::pair{o.lo, o.hi};
    x0.push_back(uniform(shapes[i], lo, hi, gen));
  }
  for (const auto& s : shapes) v.push_back(uniform(s, -1, 1, gen));
  const bool f32 = o.dtype == mg::f32;
  const double tol1 = f32 ? 2e-3 : 1e-6, tol2 = f32 ? 2e-2 : 1e-5;

  auto make = [&](const std::vector<xt::xarray<double>>& xs, mg::dtype d, bool grad) {
    mg::tensor_list t;
    for (const auto& a : xs)
      t.push_back(mg::tensor(a).to(d).to(o.device).detach().requires_grad_(grad));
    return t;
  };
  // fixed output weights, so that every element of the output is checked
  xt::xarray<double> w;
  {
    mg::no_grad_guard ng;
    const mg::tensor out = f(make(x0, mg::f64, false));
    w = uniform(out.shape(), 0.5, 1.5, gen);
  }
  auto loss = [&](const mg::tensor_list& t, mg::dtype d) {
    return mg::sum(f(t) * mg::tensor(w).to(d).to(o.device));
  };
  auto loss_value = [&](const std::vector<xt::xarray<double>>& xs) {
    mg::no_grad_guard ng;
    return loss(make(xs, mg::f64, false), mg::f64).item<double>();
  };
  auto gradients = [&](const std::vector<xt::xarray<double>>& xs, mg::dtype d, bool create_graph,
                       mg::tensor_list& leaves) {
    leaves = make(xs, d, true);
    return mg::autograd::grad({loss(leaves, d)}, leaves, {},
                              {.create_graph = create_graph, .allow_unused = true});
  };
  auto as_array = [](const mg::tensor& g, const mg::shape_t& s) {
    return g.defined() ? g.to_xtensor<double>()
                       : xt::xarray<double>(
                             xt::zeros<double>(std::vector<std::size_t>(s.begin(), s.end())));
  };

  mg::tensor_list leaves;
  const auto g = gradients(x0, o.dtype, o.second_order, leaves);
  ASSERT_EQ(g.size(), shapes.size());
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    if (g[i].defined()) {
      EXPECT_EQ(g[i].shape(), shapes[i]) << "gradient " << i << " shape";
      EXPECT_EQ(g[i].dtype(), o.dtype) << "gradient " << i << " dtype";
      EXPECT_EQ(g[i].device(), o.device) << "gradient " << i << " device";
    }
    const auto gi = as_array(g[i], shapes[i]);
    for (std::size_t j = 0; j < x0[i].size(); ++j) {
      auto plus = x0, minus = x0;
      plus[i].data()[j] += fd_step;
      minus[i].data()[j] -= fd_step;
      const double fd = (loss_value(plus) - loss_value(minus)) / (2 * fd_step);
      EXPECT_TRUE(near_rel(gi.data()[j], fd, tol1)) << "d/dx" << i << "[" << j << "]";
    }
  }
  if (!o.second_order) return;
  // Hessian-vector product: grad of sum_i <g_i, v_i>, against (g(x + h v) - g(x - h v)) / 2h
  mg::tensor s;
  for (std::size_t i = 0; i < shapes.size(); ++i)
    if (g[i].defined() && g[i].requires_grad()) {
      const mg::tensor term = mg::sum(g[i] * mg::tensor(v[i]).to(o.dtype).to(o.device));
      s = s.defined() ? s + term : term;
    }
  mg::tensor_list hv(shapes.size());
  if (s.defined()) hv = mg::autograd::grad({s}, leaves, {}, {.allow_unused = true});
  const double h = 1e-5;
  auto shifted = [&](double sign) {
    auto xs = x0;
    for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = xs[i] + sign * h * v[i];
    mg::tensor_list l;
    return gradients(xs, mg::f64, false, l);
  };
  const auto gp = shifted(1), gm = shifted(-1);
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const auto hvi = as_array(hv[i], shapes[i]);
    const auto a = as_array(gp[i], shapes[i]), b = as_array(gm[i], shapes[i]);
    for (std::size_t j = 0; j < hvi.size(); ++j)
      EXPECT_TRUE(near_rel(hvi.data()[j], (a.data()[j] - b.data()[j]) / (2 * h), tol2))
          << "(Hv)" << i << "[" << j << "]";
  }
}

// A float64 leaf that requires grad, with the given elements (rank 1).
inline mg::tensor leaf(std::initializer_list<double> v) {
  return mg::tensor(v, mg::f64).requires_grad_();
}

// The elements of t, in order, as doubles.
inline std::vector<double> values(const mg::tensor& t) {
  const auto a = t.to_xtensor<double>();
  return {a.begin(), a.end()};
}

}  // namespace mg_test
