// Array version of the harness for the static engine on xtensor (see harness.hpp): the value
// and every element of every gradient against central finite differences in float64.
#pragma once

#include <array>
#include <cstddef>
#include <random>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <xtensor/xarray.hpp>
#include <xtensor/xmath.hpp>

#include <metagrad/autograd.hpp>
#include <metagrad/tensor.hpp>
#include <metagrad/tensor_xtensor.hpp>
#include <metagrad/xtensor.hpp>

#include "support/harness.hpp"

namespace mg_test {

template <class F, class Tuple>
double static_value(const F& f, const Tuple& args) {
  return std::apply([&](const auto&... a) { return double(mg::value_and_grad(f)(a...).first); },
                    args);
}

// Checks every gradient element of f at args (xt::xarray<double> or double) against central
// differences of the static engine's own value.
template <class F, class... A>
void check_xt(const F& f, const A&... args) {
  const std::tuple<A...> at{args...};
  auto [value, grads] = mg::value_and_grad(f)(args...);
  (void)value;
  const auto g = as_tuple(grads);
  [&]<std::size_t... k>(std::index_sequence<k...>) {
    (
        [&] {
          const auto& gk = std::get<k>(g);
          using Ak = std::remove_cvref_t<decltype(std::get<k>(at))>;
          if constexpr (std::is_arithmetic_v<Ak>) {
            auto plus = at, minus = at;
            std::get<k>(plus) += fd_step;
            std::get<k>(minus) -= fd_step;
            const double fd = (static_value(f, plus) - static_value(f, minus)) / (2 * fd_step);
            EXPECT_TRUE(near_rel(gk, fd, 1e-6)) << "d/d(argument " << k << ")";
          } else {
            ASSERT_EQ(gk.shape(), std::get<k>(at).shape()) << "gradient " << k << " shape";
            for (std::size_t j = 0; j < gk.size(); ++j) {
              auto plus = at, minus = at;
              std::get<k>(plus).flat(j) += fd_step;
              std::get<k>(minus).flat(j) -= fd_step;
              const double fd = (static_value(f, plus) - static_value(f, minus)) / (2 * fd_step);
              EXPECT_TRUE(near_rel(gk.flat(j), fd, 1e-6))
                  << "d/d(argument " << k << ")[" << j << "]";
            }
          }
        }(),
        ...);
  }
  (std::index_sequence_for<A...>{});
}

}  // namespace mg_test

namespace mg_test {

// The static engine on xtensor arrays for f of N array arguments with the given shapes and value
// ranges (float64):
//   - general path: the vector-Jacobian product with random weights w of f's output shape,
//     every element against a central difference of sum(w * f(x));
//   - fused path (one loop, when f is elementwise and the shapes agree; else the general path
//     again): mg::value_and_grad of sum(f(x) * w), against the above to 1e-12.
template <std::size_t N, class F>
void check_xt_arrays(const F& f, const std::vector<std::vector<std::size_t>>& shapes,
                     const std::vector<std::pair<double, double>>& ranges) {
  using evaluator = mg::detail::evaluator<mg::detail::array_family>;
  std::mt19937_64 gen(5);
  std::array<xt::xarray<double>, N> x;
  for (std::size_t k = 0; k < N; ++k) {
    x[k] = xt::xarray<double>::from_shape(shapes[k]);
    std::uniform_real_distribution<double> u(ranges[k].first, ranges[k].second);
    for (auto& v : x[k]) v = u(gen);
  }
  const auto value = [&](const std::array<xt::xarray<double>, N>& a) {
    return std::apply([&](const auto&... ai) { return evaluator::value(f, ai...); }, a);
  };
  const xt::xarray<double> y = value(x);
  {  // the static engine's value against the runtime engine's on the same inputs
    mg::no_grad_guard ng;
    const xt::xarray<double> r = std::apply(
        [&](const auto&... a) { return mg::tensor(f(mg::tensor(a)...)).to_xtensor<double>(); }, x);
    EXPECT_EQ(std::vector<std::size_t>(r.shape().begin(), r.shape().end()),
              std::vector<std::size_t>(y.shape().begin(), y.shape().end()))
        << "xtensor vs runtime shape";
    if (r.size() == y.size()) {
      for (std::size_t j = 0; j < y.size(); ++j) {
        EXPECT_TRUE(near_rel(y.flat(j), r.flat(j), 1e-12)) << "xtensor vs runtime value " << j;
      }
    }
  }
  xt::xarray<double> w = xt::xarray<double>::from_shape(y.shape());
  std::uniform_real_distribution<double> u(0.5, 1.5);
  for (auto& v : w) v = u(gen);
  const auto loss = [&](const std::array<xt::xarray<double>, N>& a) {
    const xt::xarray<double> v = value(a);
    return double(xt::sum(v * w)());
  };
  [&]<std::size_t... k>(std::index_sequence<k...>) {
    const auto general = evaluator::vjp<k...>(f, w, x[k]...);
    const auto weighted = [&f](const auto&... a) {
      const auto args = std::forward_as_tuple(a...);
      return sum(f(std::get<k>(args)...) * std::get<N>(args));
    };
    const auto [v, fused_grads] = mg::value_and_grad<k...>(weighted)(x[k]..., w);
    const auto fused = as_tuple(fused_grads);
    EXPECT_TRUE(near_rel(double(v), loss(x), 1e-12)) << "fused value";
    (
        [&] {
          const auto& g = std::get<k>(general);
          const auto& gf = std::get<k>(fused);
          ASSERT_EQ(g.size(), x[k].size()) << "gradient " << k;
          for (std::size_t j = 0; j < x[k].size(); ++j) {
            auto plus = x, minus = x;
            plus[k].flat(j) += fd_step;
            minus[k].flat(j) -= fd_step;
            const double fd = (loss(plus) - loss(minus)) / (2 * fd_step);
            EXPECT_TRUE(near_rel(g.flat(j), fd, 1e-6)) << "general d/dx" << k << "[" << j << "]";
            EXPECT_TRUE(near_rel(gf.flat(j), g.flat(j), 1e-12))
                << "fused vs general d/dx" << k << "[" << j << "]";
          }
        }(),
        ...);
  }
  (std::make_index_sequence<N>{});
}

}  // namespace mg_test

namespace mg_test {

// Forward mode on arrays (Note [Dual arrays]) for the same f: mg::jvp along a random tangent v
// against a central difference of f along v, and, when second_order, the Hessian-vector product
// of sum(w * f) (mg::jvp of mg::grad) against a central difference of its gradient along v.
template <std::size_t N, class F>
void check_xt_forward(const F& f, const std::vector<std::vector<std::size_t>>& shapes,
                      const std::vector<std::pair<double, double>>& ranges, bool second_order) {
  using evaluator = mg::detail::evaluator<mg::detail::array_family>;
  std::mt19937_64 gen(11);
  std::array<xt::xarray<double>, N> x, v;
  for (std::size_t k = 0; k < N; ++k) {
    x[k] = xt::xarray<double>::from_shape(shapes[k]);
    v[k] = xt::xarray<double>::from_shape(shapes[k]);
    std::uniform_real_distribution<double> u(ranges[k].first, ranges[k].second), t(-1.0, 1.0);
    for (auto& e : x[k]) e = u(gen);
    for (auto& e : v[k]) e = t(gen);
  }
  const auto along = [&](double h) {
    auto a = x;
    for (std::size_t k = 0; k < N; ++k) a[k] += h * v[k];
    return a;
  };
  const auto value = [&](const std::array<xt::xarray<double>, N>& a) {
    return std::apply([&](const auto&... ai) { return evaluator::value(f, ai...); }, a);
  };
  const auto expect_near = [](const auto& got, const xt::xarray<double>& want, const char* what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (std::size_t j = 0; j < want.size(); ++j)
      EXPECT_TRUE(near_rel(got.flat(j), want.flat(j), 1e-6)) << what << "[" << j << "]";
  };
  [&]<std::size_t... k>(std::index_sequence<k...>) {
    const auto [y, jv] = mg::jvp(f, std::tuple{x[k]...}, std::tuple{v[k]...});
    const xt::xarray<double> y0 = value(x);
    expect_near(y, y0, "jvp value");
    const xt::xarray<double> fd = (value(along(fd_step)) - value(along(-fd_step))) / (2 * fd_step);
    expect_near(jv, fd, "jvp tangent");
    if (!second_order) return;
    xt::xarray<double> w = xt::xarray<double>::from_shape(y0.shape());
    std::uniform_real_distribution<double> u(0.5, 1.5);
    for (auto& e : w) e = u(gen);
    const auto weighted = [&f, &w](const auto&... a) { return sum(f(a...) * w); };
    const auto hv =
        as_tuple(mg::jvp(mg::grad(weighted), std::tuple{x[k]...}, std::tuple{v[k]...}).second);
    const double h = 1e-5;
    const auto gp =
        std::apply([&](const auto&... a) { return evaluator::vjp<k...>(f, w, a...); }, along(h));
    const auto gm =
        std::apply([&](const auto&... a) { return evaluator::vjp<k...>(f, w, a...); }, along(-h));
    (expect_near(std::get<k>(hv), xt::xarray<double>((std::get<k>(gp) - std::get<k>(gm)) / (2 * h)),
                 "Hessian-vector product"),
     ...);
    // The block of the Hessian of argument 0, all its directions in one pass (Note [Blocks of
    // directions]), times v_0 against a central difference of the gradient along v_0.
    const xt::xarray<double> H = mg::hessian<0>(weighted)(x[k]...);
    const std::size_t n0 = x[0].size();
    ASSERT_EQ(H.size(), n0 * n0) << "Hessian block";
    auto a0 = x;
    a0[0] = x[0] + h * v[0];
    const xt::xarray<double> g0p = std::get<0>(
        std::apply([&](const auto&... a) { return evaluator::vjp<0>(f, w, a...); }, a0));
    a0[0] = x[0] - h * v[0];
    const xt::xarray<double> g0m = std::get<0>(
        std::apply([&](const auto&... a) { return evaluator::vjp<0>(f, w, a...); }, a0));
    xt::xarray<double> hv0 = xt::zeros<double>({n0});
    for (std::size_t i = 0; i < n0; ++i)
      for (std::size_t j = 0; j < n0; ++j) hv0(i) += H.flat(i * n0 + j) * v[0].flat(j);
    expect_near(hv0, xt::xarray<double>((g0p - g0m) / (2 * h)),
                "Hessian block of argument 0 times v");
  }
  (std::make_index_sequence<N>{});
}

}  // namespace mg_test
